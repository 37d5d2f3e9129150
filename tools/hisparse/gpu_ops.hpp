#pragma once
// The GPU operations as the command line calls them. Implemented by the GPU
// build (gpu_cuda.cpp); without CUDA (gpu_none.cpp), resolve_device never
// selects the GPU, so none of them is reached there.
#include <span>

#include "hisparse/formats/builder.hpp"
#include "hisparse/formats/coo.hpp"
#include "hisparse/formats/matrix.hpp"
#include "hisparse/ops/edit.hpp"

namespace hisparse::cli {

template <class V>
void gpu_spmv(const Matrix<V>& a, std::span<const V> x, std::span<V> y, V alpha, V beta);

// alpha·op(A) + beta·op(B) on the GPU (states as the matrices carry them).
template <class V>
Matrix<V> gpu_add(const Matrix<V>& a, const Matrix<V>& b, V alpha, V beta);

// HiSparse built on the GPU from a coordinate list on the host: uploaded as
// COO arrays (std::int32_t indices where rows, cols and nnz all fit 2^31 - 1,
// std::int64_t otherwise), built by ops::build_device_matrix with `options`,
// downloaded. The result is byte for byte build_matrix(coo, options)'s.
// Throws hisparse::Error (LimitError where the device memory or the pool's
// 4 GiB limit is too small), leaving nothing allocated.
template <class V>
Matrix<V> gpu_build(const Coo<V>& coo, const BuildOptions& options);

// op(A) edited by `updates` on the GPU: A uploaded as the first version of a
// family, the updates as COO arrays (indices as gpu_build's), ops::edit_version,
// the new version downloaded (its own nodes: byte for byte the host edit's).
// stats: the GPU edit's (ops/edit_gpu.hpp).
template <class V>
Matrix<V> gpu_edit(const Matrix<V>& a, const Coo<V>& updates, ops::EditMode mode, ops::EditStats* stats);

}  // namespace hisparse::cli

namespace hisparse::cli {
// The demo's matrix in one precision: its coordinate list, the matrix the
// host built from it, and the host build's time (ms).
template <class V>
struct DemoBuild {
  const Coo<V>& coo;
  const Matrix<V>& matrix;
  double host_ms;
};

// The GPU part of `hisparse demo`: HiSparse SpMV and SpMV^T beside cuSPARSE
// on the same matrix, checked; then the build on the GPU from the coordinate
// list already in device memory (CUDA events, median after a warm-up, upload
// excluded) beside the host's, checked byte for byte against it, and stated in
// HiSparse SpMVs. Returns false when a check fails.
bool gpu_demo(const DemoBuild<float>& a32, const DemoBuild<double>& a64, const BuildOptions& options);
}  // namespace hisparse::cli
