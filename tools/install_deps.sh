#!/usr/bin/env bash
# Installs what the build needs from Debian's packages, only where missing.
# Runs as root (CI, fresh machines) or through sudo. The CUDA toolkit itself
# is expected at /usr/local/cuda (the project builds without it, host only).
set -euo pipefail

packages=(
  meson ninja-build pkg-config g++ python3
  libboost-dev          # Boost.Hana: compile-time queue setups of the runtime
  libspdlog-dev libfmt-dev  # logging (host code only)
  libgtest-dev          # test suites
  libcli11-dev          # command-line parsing of the hisparse tool
  nlohmann-json3-dev    # JSON output (info --json, benchmarks)
  libfast-float-dev     # fast number parsing in the Matrix Market reader
  libxxhash-dev         # .hsp file checksums
  python3-matplotlib    # benchmark plots (tools/plot_bench.py)
  clang libclang-rt-dev llvm  # the fuzz suite: libFuzzer, ASan/UBSan runtimes, llvm-symbolizer
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  echo "installing: ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# nvcc lives outside PATH on a stock CUDA install; Meson finds it through PATH.
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  echo "note: add /usr/local/cuda/bin to PATH to build the GPU parts (export PATH=/usr/local/cuda/bin:\$PATH)"
fi
