#!/usr/bin/env bash
# The fuzz suite (meson test --suite fuzz): configures a clang build of the
# formats library and the libFuzzer harnesses with ASan and UBSan
# (BUILD_ROOT/fuzz-clang, -Dfuzzers=enabled), writes the seed corpus, and runs
# each harness for HISPARSE_FUZZ_SECONDS (default 60) from the seeds, the
# committed regression inputs and the corpus of earlier runs. A crash, a leak,
# a hang (-timeout) or an allocation over the memory limit fails the suite;
# the input is printed and kept in BUILD_ROOT/fuzz-work/HARNESS/artifacts, to be added
# to tests/fuzz/regressions/HARNESS once fixed.
#   run_fuzz.sh SOURCE_ROOT BUILD_ROOT SEEDS_EXE MATRICES_DIR [HARNESS...]
set -uo pipefail
src=$1 build=$2 seeds_exe=$3 matrices=$4
shift 4
harnesses=("$@")
[ ${#harnesses[@]} -gt 0 ] || harnesses=(matrix_market mm_vector hsp roundtrip)
seconds=${HISPARSE_FUZZ_SECONDS:-60}
fb=$build/fuzz-clang
work=$build/fuzz-work

if ! command -v clang++ >/dev/null; then
  echo "clang++ not found: tools/install_deps.sh installs clang and libclang-rt-dev" >&2
  exit 1
fi
# One configure and build at a time (harnesses may be run side by side).
mkdir -p "$build"
exec 9>"$build/fuzz-clang.lock"
flock 9
if [ ! -f "$fb/build.ninja" ]; then
  rm -rf "$fb"
  CC=clang CXX=clang++ meson setup "$fb" "$src" -Dfuzzers=enabled -Ddefault_library=static \
    -Dbuildtype=debugoptimized -Db_ndebug=false >"$build/fuzz-setup.log" 2>&1 ||
    { cat "$build/fuzz-setup.log"; exit 1; }
fi
ninja -C "$fb" >"$build/fuzz-build.log" 2>&1 || { tail -n 60 "$build/fuzz-build.log"; exit 1; }
flock -u 9

# Each run writes its own seeds; a harness's corpus of earlier runs is kept.
seeds=$(mktemp -d "$build/fuzz-seeds.XXXXXX")
trap 'rm -rf "$seeds"' EXIT
"$seeds_exe" "$matrices" "$seeds" || exit 1

status=0
for h in "${harnesses[@]}"; do
  rm -rf "$work/$h"
  mkdir -p "$work/corpus/$h" "$work/$h/tmp" "$work/$h/artifacts"
  dirs=("$work/corpus/$h" "$seeds/$h")
  [ -d "$src/tests/fuzz/regressions/$h" ] && dirs+=("$src/tests/fuzz/regressions/$h")
  dict=()
  case $h in matrix_market | mm_vector) dict=(-dict="$src/tests/fuzz/matrix_market.dict") ;; esac
  log=$work/$h/log
  TMPDIR=$work/$h/tmp ASAN_OPTIONS=abort_on_error=0:detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    "$fb/tests/fuzz/fuzz-$h" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -max_len=65536 -print_final_stats=1 -artifact_prefix="$work/$h/artifacts/" "${dict[@]}" "${dirs[@]}" \
    >"$log" 2>&1
  rc=$?
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$')
  echo "fuzz-$h: ${execs:-?} executions in ${seconds} s, corpus $(find "$work/corpus/$h" -type f | wc -l) inputs, exit $rc"
  if [ $rc -ne 0 ]; then
    status=1
    grep -v '^#' "$log" | tail -n 60
    for a in "$work/$h/artifacts/"*; do
      [ -f "$a" ] || continue
      echo "--- input $a ($(stat -c %s "$a") bytes):"
      head -c 2048 "$a" | od -A d -c | head -n 40
    done
  fi
done
exit $status
