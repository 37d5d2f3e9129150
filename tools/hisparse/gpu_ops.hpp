#pragma once
// The GPU operations as the command line calls them. Implemented by the GPU
// build (gpu_ops.cu); without CUDA, resolve_device never selects the GPU.
#include <span>

#include "hisparse/formats/matrix.hpp"

namespace hisparse::cli {

template <class V>
void gpu_spmv(const Matrix<V>& a, std::span<const V> x, std::span<V> y, V alpha, V beta);

// alpha·op(A) + beta·op(B) on the GPU (states as the matrices carry them).
template <class V>
Matrix<V> gpu_add(const Matrix<V>& a, const Matrix<V>& b, V alpha, V beta);

}  // namespace hisparse::cli

namespace hisparse::cli {
// The GPU part of `hisparse demo`: HiSparse SpMV and SpMV^T beside cuSPARSE
// on the same matrix, checked. Returns false when a check fails.
bool gpu_demo(const Matrix<float>& a32, const Matrix<double>& a64);
}  // namespace hisparse::cli
