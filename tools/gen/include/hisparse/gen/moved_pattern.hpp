#pragma once
// The second operand of the add benchmarks (seed 004 section 7): B is made
// from A by moving every entry within its neighbourhood, row and column each
// shifted by a normal deviate (mean 0, `sigma`), rounded and clamped into the
// matrix. The pattern is similar to A's but not the same, so an add merges
// partly overlapping nodes. Entries landing on one cell are summed when the
// list is built, as any coordinate list. Deterministic for a seed.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>

#include "hisparse/formats/coo.hpp"

namespace hisparse::gen {

template <class V>
Coo<V> moved_pattern(const Coo<V>& a, double sigma, std::uint64_t seed) {
  Coo<V> b;
  b.rows = a.rows;
  b.cols = a.cols;
  b.row.reserve(a.nnz());
  b.col.reserve(a.nnz());
  b.val.reserve(a.nnz());
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> shift(0.0, sigma);
  auto move = [&](index_t x, index_t n) {
    const double y = std::round(static_cast<double>(x) + shift(rng));
    return static_cast<index_t>(std::clamp(y, 0.0, static_cast<double>(n - 1)));
  };
  for (std::size_t i = 0; i < a.nnz(); ++i) b.push(move(a.row[i], a.rows), move(a.col[i], a.cols), a.val[i]);
  return b;
}

}  // namespace hisparse::gen
