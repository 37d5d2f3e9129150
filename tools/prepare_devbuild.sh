#!/usr/bin/env bash
# Prepares what the GPU machine needs to run binaries built here (it has the
# CUDA toolkit but not spdlog, fmt or xxhash, and not ../shared). For each
# BUILD_DIR named (default: build): builds it and copies its executables and
# shared libraries, in the same layout (their rpaths are relative), to
# .devbuild/BUILD_DIR; also the shared libraries they need that are not part
# of CUDA or libc to .devbuild/lib, and the SuiteSparse matrices to
# .devbuild/matrices. Then carry .devbuild alone (it stays far below the
# 64 MiB a run may carry, where whole build folders do not) and run, there,
#   tools/gpu_check.sh .devbuild/build [sanitize]
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -gt 0 ] || set -- build
mkdir -p .devbuild/lib .devbuild/matrices
for build in "$@"; do
  ninja -C "$build" >/dev/null
  dest=.devbuild/$(basename "$build")
  rm -rf "$dest" && mkdir -p "$dest"
  (cd "$build" && find . \( -type f -o -type l \) \( -name '*.so*' -o -perm -u+x \) \
      -not -path '*.p/*' -not -path './meson-*' -not -path './fuzz-*' -not -name '*.o' -print0 |
    xargs -0 cp -P --parents -t "../$dest")
  bins=$(find "$build" -maxdepth 3 -type f -perm -u+x \( -name 'test-*' -o -name '*-tests' -o -name 'hisparse*' \) -not -path '*.p/*')
  for lib in $(ldd $bins 2>/dev/null | awk '/=> \// {print $3}' | sort -u | grep -E 'libspdlog|libfmt|libxxhash'); do
    cp -L "$lib" .devbuild/lib/
  done
done
cp ../shared/matrices/*.mtx .devbuild/matrices/ 2>/dev/null || echo "note: ../shared/matrices not found"
du -sh .devbuild
