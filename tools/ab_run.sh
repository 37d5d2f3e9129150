#!/usr/bin/env bash
# A/B timing on one device machine: runs a command alternately against the
# carried build (A) and against the libraries in .devbuild/ab (B: the other
# variant's libhisparse-*.so, copied there on the development machine), so
# that both variants are timed on the same GPU (two H100s differ by as much
# as 20% on the same binary, perf-log C15).
# Usage: [ROUNDS=2] [KEEP='regex'] [EACH_TIMEOUT=250] tools/ab_run.sh command args...
#   e.g. KEEP='^\| laplace' tools/ab_run.sh .devbuild/build/tools/hisparse bench --no-suite \
#          --family laplace2d:n=4096 --gpu-conversion-only --ops spmv --l2 warm --runs 5
# Prepare: tools/prepare_devbuild.sh build; mkdir -p .devbuild/ab; cp <other build>/ops/libhisparse-ops-gpu.so .devbuild/ab/
# Keep ROUNDS x 2 x one run well inside the device call's 600 s.
set -u
root=$PWD/.devbuild
build=$root/build
[ -d "$root/ab" ] || { echo "ab_run: no $root/ab (the B variant's libraries)" >&2; exit 2; }
[ $# -gt 0 ] || { echo "usage: tools/ab_run.sh command args..." >&2; exit 2; }
export HISPARSE_MATRICES_DIR=$root/matrices
base=$root/lib:$build/ops:$build/formats:$build/formats/gpu:$build/runtime
status=0
for ((round = 1; round <= ${ROUNDS:-2}; ++round)); do
  for v in A B; do
    if [ "$v" = A ]; then export LD_LIBRARY_PATH=$base; else export LD_LIBRARY_PATH=$root/ab:$base; fi
    echo "== round $round, $v"
    timeout "${EACH_TIMEOUT:-250}" "$@" > /tmp/ab_run.out 2>&1
    rc=$?
    if [ -n "${KEEP:-}" ]; then grep -E "$KEEP" /tmp/ab_run.out; else tail -n 20 /tmp/ab_run.out; fi
    [ $rc -eq 0 ] || { echo "(rc=$rc)"; status=1; }
  done
done
exit $status
