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
  // COOW nodes (docs/format.md), on by default: the pool carries the wide-node
  // flag, and a level depth-2 sub-tree whose entries take no more bytes with
  // 16-bit coordinates in one node is stored so (the canonical rule; where no
  // sub-tree gains, the nodes are those of the standard format). The host and
  // the GPU operations handle them. false is the opt-out: the standard format
  // (no COOW nodes, flag clear), e.g. to measure against it.
  bool wide_nodes = true;
};

template <class V>
Matrix<V> build_matrix(const Coo<V>& coo, const BuildOptions& options);

// The default options with this node size (wide nodes allowed).
template <class V>
Matrix<V> build_matrix(const Coo<V>& coo, std::uint32_t node_size = default_node_size) {
  return build_matrix(coo, BuildOptions{node_size});
}

template <class V>
Matrix<V> build_matrix(const Csr<V>& csr, const BuildOptions& options);

template <class V>
Matrix<V> build_matrix(const Csr<V>& csr, std::uint32_t node_size = default_node_size) {
  return build_matrix(csr, BuildOptions{node_size});
}

// The logical matrix op(A)·scale, sorted row-major (row, then column).
template <class V>
Coo<V> to_coo(const Matrix<V>& m);

template <class V>
Csr<V> to_csr(const Matrix<V>& m);

// Checks a CSR's structure (sizes, monotone row pointers, column range).
template <class V>
Coo<V> csr_to_coo(const Csr<V>& csr);

}  // namespace hisparse
