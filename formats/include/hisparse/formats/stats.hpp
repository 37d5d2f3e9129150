#pragma once
// Memory and structure figures of a matrix (what `hisparse info` reports).
#include "hisparse/formats/hsp_file.hpp"
#include "hisparse/formats/validate.hpp"

namespace hisparse {

struct MatrixStats {
  index_t rows = 0, cols = 0;
  std::uint64_t nnz = 0;
  std::uint32_t node_size = 0, depth = 0;
  ValueType value_type = ValueType::f64;
  PoolStats nodes;
  // bytes.hisparse: the whole pool (a version: its own nodes) plus the fixed
  // 96-byte header; CSR and COO
  // with 32-bit indices and the same value type.
  std::uint64_t bytes_hisparse = 0, bytes_csr = 0, bytes_coo = 0;

  [[nodiscard]] double per_nnz(std::uint64_t bytes) const {
    return nnz ? static_cast<double>(bytes) / static_cast<double>(nnz) : 0.0;
  }
};

template <class V>
MatrixStats matrix_stats(const Matrix<V>& m) {
  MatrixStats s;
  const auto& c = m.content();
  s.rows = m.rows();
  s.cols = m.cols();
  s.nnz = c.nnz;
  s.node_size = c.shape.node_size();
  s.depth = c.shape.depth;
  s.value_type = value_type_of<V>();
  s.nodes = validate(c);
  // A version of a family counts its own nodes: what it is saved as.
  s.bytes_hisparse = (c.arena ? s.nodes.node_bytes + sizeof(PoolHeader) : c.pool.size()) + hsp_header_bytes;
  s.bytes_csr = (s.rows + 1) * 4 + s.nnz * (4 + sizeof(V));
  s.bytes_coo = s.nnz * (8 + sizeof(V));
  return s;
}

}  // namespace hisparse
