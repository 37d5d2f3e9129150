#pragma once
// Conversion between coordinate/CSR lists and HiSparse (seed 004 section 3.2):
// a top-down skeleton that counts nodes and bytes, one pool allocation, and a
// bottom-up fill. Duplicates are summed (in input order); explicit zeros are
// kept as entries.
#include "hisparse/formats/coo.hpp"
#include "hisparse/formats/matrix.hpp"

namespace hisparse {

struct BuildOptions {
  std::uint32_t node_size = default_node_size;
  // Allow COOW nodes (docs/format.md): a level depth-2 sub-tree whose entries
  // take no more bytes with 16-bit coordinates in one node is stored so. The
  // host and the GPU operations (SpMV, copy, materialize) handle them.
  bool wide_nodes = false;
};

template <class V>
Matrix<V> build_matrix(const Coo<V>& coo, const BuildOptions& options);

template <class V>
Matrix<V> build_matrix(const Coo<V>& coo, std::uint32_t node_size = default_node_size) {
  return build_matrix(coo, BuildOptions{node_size, false});
}

template <class V>
Matrix<V> build_matrix(const Csr<V>& csr, std::uint32_t node_size = default_node_size);

// The logical matrix op(A)·scale, sorted row-major (row, then column).
template <class V>
Coo<V> to_coo(const Matrix<V>& m);

template <class V>
Csr<V> to_csr(const Matrix<V>& m);

// Checks a CSR's structure (sizes, monotone row pointers, column range).
template <class V>
Coo<V> csr_to_coo(const Csr<V>& csr);

}  // namespace hisparse
