#!/usr/bin/env bash
# Prepares what the GPU machine needs to run binaries built here (it has the
# CUDA toolkit but not spdlog, fmt or xxhash, and not ../shared): builds
# BUILD_DIR, copies the shared libraries the binaries need that are not part
# of CUDA or libc into .devbuild/lib, and the SuiteSparse matrices into
# .devbuild/matrices. Then carry BUILD_DIR and .devbuild and run
# tools/gpu_check.sh there.
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/.."
ninja -C "$build" >/dev/null
mkdir -p .devbuild/lib .devbuild/matrices
bins=$(find "$build" -maxdepth 3 -type f -perm -u+x \( -name 'test-*' -o -name '*-tests' -o -name 'hisparse*' \) -not -path '*.p/*')
for lib in $(ldd $bins 2>/dev/null | awk '/=> \// {print $3}' | sort -u | grep -E 'libspdlog|libfmt|libxxhash'); do
  cp -L "$lib" .devbuild/lib/
done
cp ../shared/matrices/*.mtx .devbuild/matrices/ 2>/dev/null || echo "note: ../shared/matrices not found"
du -sh "$build" .devbuild
