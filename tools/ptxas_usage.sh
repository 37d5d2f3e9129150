#!/usr/bin/env bash
# Registers, stack and spills of an op's kernels, from ptxas on this machine
# (no GPU needed): compiles one .cu of an op package alone, with the flags of
# the build's GPU unit, and prints ptxas's report for the kernels whose
# demangled name matches a pattern.
# Usage: tools/ptxas_usage.sh [file.cu] [pattern]
#   e.g. tools/ptxas_usage.sh ops/spmv/gpu/spmv_gpu.cu 'worker_kernel|persistent_kernel'
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
file=${1:-ops/spmv/gpu/spmv_gpu.cu}
pattern=${2:-worker_kernel|persistent_kernel}
nvcc=${NVCC:-/usr/local/cuda/bin/nvcc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '#include "%s/%s"\n' "$root" "$file" > "$tmp/unit.cu"
inc=()
for d in ops runtime/include formats/include formats/gpu/include ops/include ops/*/include; do inc+=("-I$root/$d"); done
# The conversion and the batch edit are compiled as one whole program
# (ops/ops_cub_unit.cu, no -rdc, CUB in its own namespace: ops/meson.build);
# the other ops as relocatable device code. Register counts differ between
# the two (the extraction's one-pass kernel: 80 with -rdc, 64 whole, as Nsight
# Compute reports), so the tool compiles as the build does.
mode=(-rdc=true)
case "$file" in
  ops/convert/*|ops/edit/*|ops/ops_cub_unit.cu) mode=(-DCUB_WRAPPED_NAMESPACE=hisparse_convert) ;;
esac
"$nvcc" -std=c++20 -gencode=arch=compute_90,code=sm_90 "${mode[@]}" --expt-relaxed-constexpr -O3 -DNDEBUG \
  "${inc[@]}" -Xptxas -v -c "$tmp/unit.cu" -o "$tmp/unit.o" 2>"$tmp/ptxas.txt"
# ptxas prints, per entry: "Compiling entry function '<mangled>'", then its
# stack/spill line and its "Used N registers" line.
awk -v pat="$pattern" '
  /Compiling entry function/ { match($0, /'"'"'[^'"'"']*'"'"'/); name = substr($0, RSTART + 1, RLENGTH - 2); want = 0;
    cmd = "c++filt " name; cmd | getline dem; close(cmd); if (dem ~ pat) { want = 1; print dem } next }
  want && /stack frame|Used/ { sub(/^ptxas info *: */, "    "); print }
' "$tmp/ptxas.txt"
