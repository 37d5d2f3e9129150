#include "generators.hpp"

namespace hisparse::cli {

template <class V>
Coo<V> laplacian_2d(index_t n) {
  Coo<V> m;
  m.rows = m.cols = n * n;
  m.reserve(5 * n * n);
  for (index_t i = 0; i < n; ++i)
    for (index_t j = 0; j < n; ++j) {
      const index_t r = i * n + j;
      if (i > 0) m.push(r, r - n, V(-1));
      if (j > 0) m.push(r, r - 1, V(-1));
      m.push(r, r, V(4));
      if (j + 1 < n) m.push(r, r + 1, V(-1));
      if (i + 1 < n) m.push(r, r + n, V(-1));
    }
  return m;
}

template Coo<float> laplacian_2d(index_t);
template Coo<double> laplacian_2d(index_t);

}  // namespace hisparse::cli
