#!/usr/bin/env bash
# An A/B of the GPU ops library in one device call (prepared with
# tools/prepare_ab.sh): B's GPU tests (and, optionally, compute-sanitizer
# memcheck on some of them), then the same bench under A and under B,
# alternated ROUNDS times, one family a process. The machines lent differ by
# up to ~20% on the same build, so only A and B timed in one call compare.
# Usage (on the GPU machine, from the repository root, $OUT set by the device tool):
#   [TESTS='ConvertGpu.*:EditGpu.*'] [MEMCHECK='ConvertGpu.WideNodes'] [FAMILIES='rmat:scale=22 ...']
#   [PRECISION=f32] [RUNS=5] [ROUNDS=1] [BENCH='--gpu-conversion-only --ops none --l2 warm'] tools/gpu_ab.sh
# TESTS=none or FAMILIES=none skip that part. Time on an H200 (2026-11-29): the
# conversion tests ~60 s; a 65-90 M-entry family took ~90 s a process in f32
# and f64 with the SpMV benches (--ops spmv): most of it host-side (the
# matrix generated, built and checked); one precision with --ops none should
# take well under half of that (not yet measured).
set -u
root=$PWD/.devbuild
out=${OUT:-/tmp}
export HISPARSE_MATRICES_DIR=$root/matrices
export HISPARSE_BENCH_LOG=1  # each bench step's seconds in its log: where a process's time goes
base=$root/lib:$root/build/ops:$root/build/formats:$root/build/formats/gpu:$root/build/runtime
lib_a=$base
lib_b=$root/ab/B:$base
tests=${TESTS:-'ConvertGpu.*:EditGpu.*'}
status=0
if [ "$tests" != none ]; then
  t0=$(date +%s)
  LD_LIBRARY_PATH=$lib_b timeout "${TEST_TIMEOUT:-300}" "$root/ab/B/test-ops-gpu" --gtest_filter="$tests" --gtest_brief=1 \
    >"$out/ab-tests.log" 2>&1
  rc=$?
  echo "B tests ($tests): rc=$rc in $(($(date +%s) - t0)) s"
  grep -E "PASSED|FAILED|Failure" -A4 "$out/ab-tests.log" | head -30
  [ $rc -eq 0 ] || status=1
fi
if [ -n "${MEMCHECK:-}" ]; then
  LD_LIBRARY_PATH=$lib_b timeout "${MEMCHECK_TIMEOUT:-150}" compute-sanitizer --tool memcheck --error-exitcode 9 \
    "$root/ab/B/test-ops-gpu" --gtest_filter="$MEMCHECK" --gtest_brief=1 >"$out/ab-memcheck.log" 2>&1
  rc=$?
  echo "B memcheck ($MEMCHECK): rc=$rc"
  grep -E "ERROR SUMMARY|PASSED|FAILED" "$out/ab-memcheck.log" | tail -3
  [ $rc -eq 0 ] || status=1
fi
families=${FAMILIES:-'rmat:scale=22'}
[ "$families" = none ] && families=
for fam in $families; do
  tag=$(echo "${fam%%:*}" | tr -c 'a-zA-Z0-9_\n' '_')
  for round in $(seq 1 "${ROUNDS:-1}"); do
    for v in A B; do
      if [ $v = A ]; then lib=$lib_a; else lib=$lib_b; fi
      json="$out/ab-$tag-$v$round.json"
      t0=$(date +%s)
      # shellcheck disable=SC2086  # BENCH is a list of options
      LD_LIBRARY_PATH=$lib timeout "${BENCH_TIMEOUT:-150}" "$root/build/tools/hisparse" bench --no-suite --family "$fam" \
        ${BENCH:---gpu-conversion-only --ops none --l2 warm} --runs "${RUNS:-5}" --precision "${PRECISION:-f32}" \
        --json "$json" >"$out/ab-$tag-$v$round.log" 2>&1
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
