#pragma once
// Host reference SpMV: y = alpha * op(A) * x + beta * y, op and scale from
// A's state. It walks the hierarchy (no detour through CSR) and is the
// specification the GPU procedures are tested against: clear before fast.
//
// Semantics: absent entries contribute nothing (a dense leaf's empty cells are
// skipped by its mask, so 0 * inf never appears); beta == 0 overwrites y
// (NaN or garbage in y does not leak); sums are formed in double precision
// (complex<double> for complex values) in tree order and rounded once.
#include <span>

#include "hisparse/formats/matrix.hpp"

namespace hisparse::ops {

template <class V>
void spmv_reference(const Matrix<V>& a, std::span<const V> x, std::span<V> y, V alpha = V(1), V beta = V(0));

}  // namespace hisparse::ops
