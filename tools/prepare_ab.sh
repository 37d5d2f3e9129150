#!/usr/bin/env bash
# Prepares an A/B (or A/B/C...) of the GPU ops library for the GPU machine
# (run there with tools/gpu_ab.sh): A is the current checkout's build, copied
# to .devbuild as tools/prepare_devbuild.sh makes it and trimmed to what a
# device call needs (the carry limit is 64 MiB); each REV given is a variant
# (B, C, ... in that order): its libhisparse-ops-gpu.so and test-ops-gpu,
# built in the same build folder and put in .devbuild/ab/B, .devbuild/ab/C...
# The variants share every other binary and library, so each must keep A's
# ABI (a change inside the ops library's kernels does).
# Usage: tools/prepare_ab.sh REV [REV ...]    (then carry .devbuild)
#        BUILD_DIR=dir selects the build folder (default build); the old form
#        tools/prepare_ab.sh REV BUILD_DIR still works.
# The checkout is switched to each REV and back (tracked files must be
# clean), and the build folder rebuilt for the current checkout at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: tools/prepare_ab.sh REV [REV ...]" >&2; exit 1; }
build=${BUILD_DIR:-build}
revs=("$@")
if [ $# -eq 2 ] && [ -f "$2/build.ninja" ]; then  # the old form: REV BUILD_DIR
  build=$2
  revs=("$1")
fi
names=(B C D E F)
[ ${#revs[@]} -le ${#names[@]} ] || { echo "prepare_ab: at most ${#names[@]} variants" >&2; exit 1; }
for rev in "${revs[@]}"; do
  git rev-parse --verify -q "$rev^{commit}" >/dev/null || { echo "prepare_ab: no commit '$rev'" >&2; exit 1; }
done
if ! git diff --quiet || ! git diff --cached --quiet; then
  echo "prepare_ab: tracked files have changes; commit or stash them first" >&2
  exit 1
fi
here=$(git symbolic-ref -q --short HEAD || git rev-parse HEAD)
rm -rf .devbuild
tools/prepare_devbuild.sh "$build"
# What no device call of an A/B runs (host tests, generators, other benches,
# the runtime's tests and examples).
(cd ".devbuild/$build" && rm -rf runtime/examples formats/tests formats/test-formats tests/fuzz tools/gen tools/rt-bench \
  tools/edit-bench tools/hisparse-edit-bench tools/hisparse-rt-bench ops/test-ops runtime/tests \
  runtime/libhisparse-rt-examples.so runtime/hisparse-bfs runtime/hisparse-mandelbrot)
restore() { git checkout -q "$here" && ninja -C "$build" >/dev/null; }
trap restore EXIT
summary="A: $here ($(git rev-parse --short "$here"))"
for i in "${!revs[@]}"; do
  rev=${revs[$i]} name=${names[$i]}
  git checkout -q "$rev"
  ninja -C "$build" ops/libhisparse-ops-gpu.so ops/test-ops-gpu >/dev/null
  mkdir -p ".devbuild/ab/$name"
  cp -L "$build/ops/libhisparse-ops-gpu.so" ".devbuild/ab/$name/"
  cp "$build/ops/test-ops-gpu" ".devbuild/ab/$name/"
  summary+=", $name: $rev ($(git rev-parse --short "$rev"))"
done
size=$(du -sm .devbuild | cut -f1)
echo "$summary; carry .devbuild (${size} MB)"
# The working tree travels too (~10 MB): warn before the device refuses it.
[ "$size" -le 54 ] || echo "prepare_ab: .devbuild is ${size} MB; with the working tree it may pass the 64 MiB carry limit" >&2
