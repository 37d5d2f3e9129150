#pragma once
// Host reference sparse add: C = alpha * op(A) + beta * op(B), each op and
// scale from its operand's state, C a new HiSparse matrix with plain state.
// A dual top-down traversal (seed 004 section 6): common nodes are merged,
// a sub-tree present in one operand only is rewritten (transposed and scaled
// as its state says). The result's structure is the union of both patterns;
// entries that cancel to zero stay as explicit zeros, as in cuSPARSE csrgeam.
#include "hisparse/formats/matrix.hpp"

namespace hisparse::ops {

// The operand rule of every add: op(A) and op(B) of one shape, one node
// size. Throws hisparse::Error naming both otherwise.
void check_add_operands(index_t a_rows, index_t a_cols, std::uint32_t a_node_size, index_t b_rows, index_t b_cols,
                        std::uint32_t b_node_size);

template <class V>
Matrix<V> add_reference(const Matrix<V>& a, const Matrix<V>& b, V alpha = V(1), V beta = V(1));

}  // namespace hisparse::ops
