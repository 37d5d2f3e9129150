#!/usr/bin/env bash
# Prepares an A/B of the GPU ops library for the GPU machine (run there with
# tools/gpu_ab.sh): A is the current checkout's build, copied to .devbuild as
# tools/prepare_devbuild.sh makes it and trimmed to what a device call needs
# (the carry limit is 64 MiB); B is REV's libhisparse-ops-gpu.so and
# test-ops-gpu, built in the same build folder and put in .devbuild/ab/B.
# The two share every other binary and library, so B must keep A's ABI (a
# change inside the ops library's kernels does).
# Usage: tools/prepare_ab.sh REV [BUILD_DIR]    (then carry .devbuild)
# The checkout is switched to REV and back (tracked files must be clean), and
# BUILD_DIR rebuilt for the current checkout at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
rev=${1:?usage: tools/prepare_ab.sh REV [BUILD_DIR]}
build=${2:-build}
git rev-parse --verify -q "$rev^{commit}" >/dev/null || { echo "prepare_ab: no commit '$rev'" >&2; exit 1; }
if ! git diff --quiet || ! git diff --cached --quiet; then
  echo "prepare_ab: tracked files have changes; commit or stash them first" >&2
  exit 1
fi
here=$(git symbolic-ref -q --short HEAD || git rev-parse HEAD)
rm -rf .devbuild
tools/prepare_devbuild.sh "$build"
# What no device call of an A/B runs (host tests, generators, other benches).
(cd ".devbuild/$build" && rm -rf runtime/examples formats/tests formats/test-formats tests/fuzz tools/gen tools/rt-bench \
  tools/edit-bench tools/hisparse-rt-bench ops/test-ops runtime/tests/runtime-host-tests)
restore() { git checkout -q "$here" && ninja -C "$build" >/dev/null; }
trap restore EXIT
git checkout -q "$rev"
ninja -C "$build" ops/libhisparse-ops-gpu.so ops/test-ops-gpu >/dev/null
mkdir -p .devbuild/ab/B
cp -L "$build/ops/libhisparse-ops-gpu.so" .devbuild/ab/B/
cp "$build/ops/test-ops-gpu" .devbuild/ab/B/
echo "A: $here ($(git rev-parse --short "$here")), B: $rev ($(git rev-parse --short "$rev")); carry .devbuild ($(du -sh .devbuild | cut -f1))"
