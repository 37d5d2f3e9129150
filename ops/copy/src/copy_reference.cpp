#include "hisparse/ops/copy_reference.hpp"

#include <complex>

#include "hisparse/ops/add_reference.hpp"

namespace hisparse::ops {

template <class V>
Matrix<V> copy_reference(const Matrix<V>& a) {
  // A version of a family is copied as its own nodes: the copy leaves the family.
  if (a.content().arena) return Matrix<V>(compacted(a.content()), a.transposed(), a.scale());
  return Matrix<V>(std::make_shared<const Content<V>>(a.content()), a.transposed(), a.scale());
}

// Materializing is adding nothing: op(A)·scale + 0 rewrites every node of A
// in the logical orientation with the scale applied, through the same
// canonical node writer as the builder.
template <class V>
Matrix<V> materialize_reference(const Matrix<V>& a) {
  const Matrix<V> none(Matrix<V>::empty_content(a.rows(), a.cols(), a.node_size()));
  return add_reference(a, none, V(1), V(0));
}

template Matrix<float> copy_reference(const Matrix<float>&);
template Matrix<double> copy_reference(const Matrix<double>&);
template Matrix<std::complex<float>> copy_reference(const Matrix<std::complex<float>>&);
template Matrix<std::complex<double>> copy_reference(const Matrix<std::complex<double>>&);
template Matrix<float> materialize_reference(const Matrix<float>&);
template Matrix<double> materialize_reference(const Matrix<double>&);
template Matrix<std::complex<float>> materialize_reference(const Matrix<std::complex<float>>&);
template Matrix<std::complex<double>> materialize_reference(const Matrix<std::complex<double>>&);

}  // namespace hisparse::ops
