#!/usr/bin/env bash
# Runs the GPU test suites, the demo and (optionally) benchmarks on a machine
# with a GPU, from a build folder made elsewhere and carried over together
# with .devbuild/ (lib/: spdlog, fmt, xxhash; matrices/: the SuiteSparse set).
# Usage: [TESTS="bin ..."] [BENCH=1 BENCH_SCALE=16 BENCH_L2=both BENCH_ARGS="--controllers"] [DEMO_GRID=2048]
#        [SANITIZE_BUILD=.devbuild/build-nordc] [SANITIZE_TOOLS="memcheck racecheck synccheck"]
#        [SANITIZE_ONLY=1] tools/gpu_check.sh .devbuild/build [sanitize]
# The whole sequence with sanitize takes longer than one 10-minute device
# call (the ops racecheck alone ~6 min): run it as two, e.g. the plain
# check with SANITIZE_TOOLS=memcheck, then SANITIZE_ONLY=1
# SANITIZE_TOOLS="racecheck synccheck".
# Prepare with tools/prepare_devbuild.sh build build-nordc on the development
# machine (build-nordc: configured with -Ddevice_launch=false), then carry .devbuild.
set -u
build=${1:-build}
export LD_LIBRARY_PATH="$PWD/.devbuild/lib:${LD_LIBRARY_PATH:-}"
export HISPARSE_MATRICES_DIR="$PWD/.devbuild/matrices"
out=${OUT:-/tmp}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
status=0
only=${SANITIZE_ONLY:-0}
[ "$only" = 1 ] && TESTS=none
for t in ${TESTS:-"$build"/ops/test-ops-gpu "$build"/runtime/tests/runtime-gpu-tests "$build"/tests/readme-example}; do
  [ -x "$t" ] || continue
  echo "== $t"
  timeout "${TEST_TIMEOUT:-300}" "$t" --gtest_brief=1 >"$out/$(basename "$t").log" 2>&1
  rc=$?
  tail -n 25 "$out/$(basename "$t").log"
  echo "rc=$rc"
  [ $rc -eq 0 ] || status=1
done
if [ "$only" != 1 ]; then
echo "== demo"
timeout 300 "$build"/tools/hisparse demo --grid "${DEMO_GRID:-2048}" || status=1
# The command-line tests take their GPU branches here (byte-identical GPU
# builds, bench's GPU conversion records, the demo's GPU lines).
echo "== cli tests (GPU present)"
timeout 900 python3 tests/cli/test_cli.py "$build"/tools/hisparse "$HISPARSE_MATRICES_DIR" >"$out/cli.log" 2>&1
rc=$?
tail -n 4 "$out/cli.log"
echo "rc=$rc"
[ $rc -eq 0 ] || status=1
fi
if [ "${BENCH:-0}" = 1 ]; then
  echo "== bench"
  timeout "${BENCH_TIMEOUT:-400}" "$build"/tools/hisparse bench --matrices-dir "$HISPARSE_MATRICES_DIR" --scale "${BENCH_SCALE:-16}" --l2 "${BENCH_L2:-both}" \
    ${BENCH_ARGS:-} --json "$out/bench.json" --csv "$out/bench.csv" --markdown "$out/bench.md" >"$out/bench.log" 2>&1 || status=1
  tail -n 8 "$out/bench.log"
fi
if [ "${2:-}" = sanitize ]; then
  # racecheck and synccheck check nothing in a program that can launch from
  # the device: they run on a build configured with -Ddevice_launch=false
  # (SANITIZE_BUILD), which has the persistent and host-loop controllers only.
  export HISPARSE_RT_TEST_SCALE=small
  nordc=${SANITIZE_BUILD:-.devbuild/build-nordc}
  tools=${SANITIZE_TOOLS:-memcheck racecheck synccheck}
  for tool in $tools; do
    b=$build; [ "$tool" = memcheck ] || b=$nordc
    leak=""; [ "$tool" = memcheck ] && leak="--leak-check full"
    [ -d "$b" ] || { echo "no $b: skipping $tool"; continue; }
    echo "== compute-sanitizer --tool $tool ($b: runtime suite; ops: controllers, extreme shapes, riders, wide nodes, output tiles, copy, add)"
    timeout 300 compute-sanitizer --tool "$tool" $leak --error-exitcode 9 "$b"/runtime/tests/runtime-gpu-tests \
      --gtest_brief=1 >"$out/rt-$tool.log" 2>&1 || status=1
    grep -E '=====.*(SUMMARY|errors)|PASSED|FAILED' "$out/rt-$tool.log" | tail -n 4
    timeout 450 compute-sanitizer --tool "$tool" $leak --error-exitcode 9 "$b"/ops/test-ops-gpu \
      --gtest_filter='SpmvGpu.ExtremeShapes:SpmvGpu.EveryController*:SpmvGpu.RidersOfLargeLeaves:SpmvGpu.WideNodes:SpmvGpu.OutputTiles:CopyGpu.*:AddGpu.NodeSizesAndExtremeShapes:AddGpu.BadOperandsAreRefused:AddGpu.WideRootBandPaths:AddGpu.HeavyUnitsByTheBlock:AddGpu.OneOperandOnAContext:ContextGpu.VersionsUploadAsTheirOwnNodes:AddPlanGpu.*:ConvertGpu.RectangularAtEveryNodeSize:ConvertGpu.EmptyAndSingleEntry:ConvertGpu.DenseBlocks:ConvertGpu.DenseRowsSmall:ConvertGpu.WideNodes:ConvertGpu.BadInputThrows:EditGpu.ShallowTrees:EditGpu.RemovalsThatMissShareEverything:EditGpu.InPlaceThroughCompaction:EditGpu.BadBatchesChangeNothing:EditGpu.RealMatricesAndSpmvOnVersions' --gtest_brief=1 >"$out/ops-$tool.log" 2>&1 || status=1
    grep -E '=====.*(SUMMARY|errors)|PASSED|FAILED' "$out/ops-$tool.log" | tail -n 4
  done
  # The failure-mode tests run out of device memory on purpose: the failed
  # API calls are theirs; memory access errors and leaks are still reported.
  case " $tools " in *" memcheck "*)
    echo "== compute-sanitizer --tool memcheck ($build: ops failure modes)"
    timeout 300 compute-sanitizer --tool memcheck --report-api-errors no --leak-check full --error-exitcode 9 \
      "$build"/ops/test-ops-gpu --gtest_filter='*FailureModes*' --gtest_brief=1 >"$out/fm-memcheck.log" 2>&1 || status=1
    grep -E '=====.*(SUMMARY|errors)|PASSED|FAILED' "$out/fm-memcheck.log" | tail -n 4 ;;
  esac
fi
exit $status
