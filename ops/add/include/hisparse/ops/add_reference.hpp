#pragma once
// Host reference sparse add: C = alpha * op(A) + beta * op(B), each op and
// scale from its operand's state, C a new HiSparse matrix with plain state.
// A dual top-down traversal (seed 004 section 6): common nodes are merged,
// a sub-tree present in one operand only is rewritten (transposed and scaled
// as its state says). The result's structure is the union of both patterns;
// entries that cancel to zero stay as explicit zeros, as in cuSPARSE csrgeam.
#include "hisparse/formats/matrix.hpp"

namespace hisparse::ops {

template <class V>
Matrix<V> add_reference(const Matrix<V>& a, const Matrix<V>& b, V alpha = V(1), V beta = V(1));

}  // namespace hisparse::ops
