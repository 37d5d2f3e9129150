#include "hisparse/ops/spmv_reference.hpp"

#include <complex>
#include <string>
#include <vector>

#include "hisparse/formats/traverse.hpp"

namespace hisparse::ops {
namespace {
template <class V>
using Wide = std::conditional_t<is_complex_v<V>, std::complex<double>, double>;
}

template <class V>
void spmv_reference(const Matrix<V>& a, std::span<const V> x, std::span<V> y, V alpha, V beta) {
  if (x.size() != a.cols())
    throw Error("spmv: x has " + std::to_string(x.size()) + " entries, op(A) has " + std::to_string(a.cols()) +
                " columns");
  if (y.size() != a.rows())
    throw Error("spmv: y has " + std::to_string(y.size()) + " entries, op(A) has " + std::to_string(a.rows()) +
                " rows");
  using W = Wide<V>;
  std::vector<W> acc(y.size(), W(0));
  if (beta != V(0))
    for (std::size_t i = 0; i < y.size(); ++i) acc[i] = W(beta) * W(y[i]);
  const W k = W(alpha) * W(a.scale());
  const bool t = a.transposed();
  for_each_content_entry(a.content(), [&](index_t r, index_t c, V v) {
    const index_t row = t ? c : r, col = t ? r : c;
    acc[row] += k * W(v) * W(x[col]);
  });
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = static_cast<V>(acc[i]);
}

template void spmv_reference(const Matrix<float>&, std::span<const float>, std::span<float>, float, float);
template void spmv_reference(const Matrix<double>&, std::span<const double>, std::span<double>, double, double);
template void spmv_reference(const Matrix<std::complex<float>>&, std::span<const std::complex<float>>,
                             std::span<std::complex<float>>, std::complex<float>, std::complex<float>);
template void spmv_reference(const Matrix<std::complex<double>>&, std::span<const std::complex<double>>,
                             std::span<std::complex<double>>, std::complex<double>, std::complex<double>);

}  // namespace hisparse::ops
