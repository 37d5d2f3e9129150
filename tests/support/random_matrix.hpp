#pragma once
// Random and structured test matrices, and a plain map-based reference of
// "the matrix a coordinate list means" (duplicates summed).
#include <algorithm>
#include <complex>
#include <map>
#include <random>
#include <utility>

#include "hisparse/formats/coo.hpp"

namespace hisparse::testing {

template <class V>
V random_value(std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  if constexpr (is_complex_v<V>) {
    using R = typename V::value_type;
    return V(static_cast<R>(u(rng)), static_cast<R>(u(rng)));
  } else {
    return static_cast<V>(u(rng));
  }
}

// nnz entries drawn uniformly (duplicates possible) in a rows x cols matrix.
template <class V>
Coo<V> random_coo(index_t rows, index_t cols, std::size_t nnz, std::mt19937_64& rng) {
  Coo<V> m;
  m.rows = rows;
  m.cols = cols;
  if (rows == 0 || cols == 0) return m;
  std::uniform_int_distribution<index_t> r(0, rows - 1), c(0, cols - 1);
  for (std::size_t i = 0; i < nnz; ++i) m.push(r(rng), c(rng), random_value<V>(rng));
  return m;
}

// Entries clustered in a few random blocks: exercises dense nodes.
template <class V>
Coo<V> clustered_coo(index_t rows, index_t cols, std::size_t clusters, index_t extent, double fill,
                     std::mt19937_64& rng) {
  Coo<V> m;
  m.rows = rows;
  m.cols = cols;
  std::uniform_int_distribution<index_t> r(0, rows - 1), c(0, cols - 1);
  std::bernoulli_distribution keep(fill);
  for (std::size_t k = 0; k < clusters; ++k) {
    const index_t r0 = r(rng), c0 = c(rng);
    for (index_t i = r0; i < std::min(rows, r0 + extent); ++i)
      for (index_t j = c0; j < std::min(cols, c0 + extent); ++j)
        if (keep(rng)) m.push(i, j, random_value<V>(rng));
  }
  return m;
}

template <class V>
using EntryMap = std::map<std::pair<index_t, index_t>, V>;

template <class V>
EntryMap<V> summed(const Coo<V>& m) {
  EntryMap<V> out;
  for (std::size_t i = 0; i < m.nnz(); ++i) out[{m.row[i], m.col[i]}] += m.val[i];
  return out;
}

}  // namespace hisparse::testing
