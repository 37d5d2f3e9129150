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
# nvcc objects are custom targets whose header dependencies ninja reads from
# their depfiles. Once, ops_gpu_unit.o had none recorded (`ninja -t deps`:
# "#deps 0"), so header edits did not rebuild SpMV and an A/B measured the
# old code; such an object is cleaned and built again.
rebuild_undepended() {
  local build=$1 out first again=0
  for out in $(ninja -C "$build" -t commands | grep nvcc | grep -o -- '-MF [^ ]*\.d' | sed 's/^-MF //; s/\.d$//' | sort -u); do
    first=$(ninja -C "$build" -t deps "$out" | sed -n 1p)  # (sed reads it all: no SIGPIPE under pipefail)
    case $first in
      *"#deps 0,"* | *"deps not found"*)
        echo "note: $build/$out had no recorded header dependencies: building it again" >&2
        ninja -C "$build" -t clean "$out" >/dev/null
        again=1 ;;
    esac
  done
  [ $again = 0 ] || ninja -C "$build" >/dev/null
}
for build in "$@"; do
  ninja -C "$build" >/dev/null
  rebuild_undepended "$build"
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
