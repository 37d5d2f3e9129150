#!/usr/bin/env bash
# An A/B (or A/B/C...) of the GPU ops library in one device call (prepared
# with tools/prepare_ab.sh): each variant's GPU tests (and, optionally,
# compute-sanitizer memcheck on some of them), then the same bench under A and
# each variant, alternated ROUNDS times, one family a process. The machines
# lent differ by up to ~20% on the same build, so only variants timed in one
# call compare.
# Usage (on the GPU machine, from the repository root, $OUT set by the device tool):
#   [VARIANTS='B C'] [TESTS='ConvertGpu.*:EditGpu.*'] [MEMCHECK='ConvertGpu.WideNodes']
#   [FAMILIES='rmat:scale=22 ...'] [BENCH_VARIANTS='A B C'] [PRECISION=f32] [RUNS=5] [ROUNDS=1]
#   [BENCH='--gpu-conversion-only --ops none --l2 warm'] tools/gpu_ab.sh
# VARIANTS: those tested (default: every folder under .devbuild/ab); BENCH_VARIANTS:
# those timed (default: A and VARIANTS). TESTS=none or FAMILIES=none skip that part.
# Time on an H200 (2026-11-29): the conversion tests ~50-65 s a variant; a
# 65-90 M-entry family ~55-80 s a process in f32 and f64 with --ops none,
# nearly all of it host-side (HISPARSE_BENCH_LOG's lines in each log say where).
set -u
root=$PWD/.devbuild
out=${OUT:-/tmp}
export HISPARSE_MATRICES_DIR=$root/matrices
export HISPARSE_BENCH_LOG=1  # each bench step's seconds in its log: where a process's time goes
base=$root/lib:$root/build/ops:$root/build/formats:$root/build/formats/gpu:$root/build/runtime
variants=${VARIANTS:-$(cd "$root/ab" 2>/dev/null && ls -d -- * 2>/dev/null | tr '\n' ' ')}
lib_of() { if [ "$1" = A ]; then echo "$base"; else echo "$root/ab/$1:$base"; fi; }
tests=${TESTS:-'ConvertGpu.*:EditGpu.*'}
status=0
for v in $variants; do
  [ -x "$root/ab/$v/test-ops-gpu" ] || { echo "gpu_ab: no variant $v (.devbuild/ab/$v)"; status=1; continue; }
  if [ "$tests" != none ]; then
    t0=$(date +%s)
    LD_LIBRARY_PATH=$(lib_of "$v") timeout "${TEST_TIMEOUT:-300}" "$root/ab/$v/test-ops-gpu" --gtest_filter="$tests" \
      --gtest_brief=1 >"$out/ab-tests-$v.log" 2>&1
    rc=$?
    echo "$v tests ($tests): rc=$rc in $(($(date +%s) - t0)) s"
    grep -E "PASSED|FAILED|Failure" -A4 "$out/ab-tests-$v.log" | head -30
    [ $rc -eq 0 ] || status=1
  fi
  if [ -n "${MEMCHECK:-}" ]; then
    LD_LIBRARY_PATH=$(lib_of "$v") timeout "${MEMCHECK_TIMEOUT:-150}" compute-sanitizer --tool memcheck --error-exitcode 9 \
      "$root/ab/$v/test-ops-gpu" --gtest_filter="$MEMCHECK" --gtest_brief=1 >"$out/ab-memcheck-$v.log" 2>&1
    rc=$?
    echo "$v memcheck ($MEMCHECK): rc=$rc"
    grep -E "ERROR SUMMARY|PASSED|FAILED" "$out/ab-memcheck-$v.log" | tail -3
    [ $rc -eq 0 ] || status=1
  fi
done
families=${FAMILIES:-'rmat:scale=22'}
[ "$families" = none ] && families=
for fam in $families; do
  tag=$(echo "${fam%%:*}" | tr -c 'a-zA-Z0-9_\n' '_')
  for round in $(seq 1 "${ROUNDS:-1}"); do
    for v in ${BENCH_VARIANTS:-A $variants}; do
      json="$out/ab-$tag-$v$round.json"
      t0=$(date +%s)
      # shellcheck disable=SC2086  # BENCH is a list of options
      LD_LIBRARY_PATH=$(lib_of "$v") timeout "${BENCH_TIMEOUT:-150}" "$root/build/tools/hisparse" bench --no-suite \
        --family "$fam" ${BENCH:---gpu-conversion-only --ops none --l2 warm} --runs "${RUNS:-5}" \
        --precision "${PRECISION:-f32}" --json "$json" >"$out/ab-$tag-$v$round.log" 2>&1
      rc=$?
      echo "== $fam $v (round $round): rc=$rc in $(($(date +%s) - t0)) s"
      [ $rc -eq 0 ] || { status=1; tail -3 "$out/ab-$tag-$v$round.log"; continue; }
      python3 - "$json" <<'EOF'
import json, sys
for r in json.load(open(sys.argv[1])):
    what = r.get("conversion") or r["op"]
    extra = f"  {r['spmv_equivalents']:.2f} SpMVs" if "spmv_equivalents" in r else ""
    print(f"  {r['impl']:<24} {what:<16} {r['precision']} {r.get('median_ms', 0):8.3f} ms{extra}  ok={r['ok']}")
EOF
    done
  done
done
exit $status
