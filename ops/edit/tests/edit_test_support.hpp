#pragma once
// What the edit tests share: a std::map model of a matrix's entries, the
// updates applied to it, and batches of updates of several shapes.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "hisparse/formats/coo.hpp"
#include "hisparse/formats/matrix.hpp"
#include "hisparse/ops/edit.hpp"
#include "support/random_matrix.hpp"

namespace hisparse::testing {

using ops::EditMode;

template <class V>
using Model = std::map<std::pair<index_t, index_t>, V>;

template <class V>
Coo<V> coo_of(const Model<V>& m, index_t rows, index_t cols) {
  Coo<V> c;
  c.rows = rows;
  c.cols = cols;
  for (const auto& [at, v] : m) c.push(at.first, at.second, v);
  return c;
}

template <class V>
void apply(Model<V>& m, const Coo<V>& u, EditMode mode) {
  for (std::size_t i = 0; i < u.nnz(); ++i) {
    const std::pair at{u.row[i], u.col[i]};
    if (mode == EditMode::remove) m.erase(at);
    else if (mode == EditMode::set) m[at] = u.val[i];
    else if (auto [it, fresh] = m.try_emplace(at, u.val[i]); !fresh) it->second += u.val[i];
  }
}

template <class V>
std::vector<std::byte> bytes_of(const Matrix<V>& a) {
  const auto* p = a.content().pool.data();
  return {p, p + a.pool_bytes()};
}

// Same pool bytes, nnz and state.
template <class V>
::testing::AssertionResult same_matrix(const Matrix<V>& got, const Matrix<V>& want) {
  if (got.nnz() != want.nnz())
    return ::testing::AssertionFailure() << "nnz " << got.nnz() << " != " << want.nnz();
  if (got.pool_bytes() != want.pool_bytes())
    return ::testing::AssertionFailure() << "pool " << got.pool_bytes() << " != " << want.pool_bytes() << " bytes";
  if (std::memcmp(got.content().pool.data(), want.content().pool.data(), got.pool_bytes()) != 0)
    return ::testing::AssertionFailure() << "pools of " << got.pool_bytes() << " bytes differ";
  if (got.transposed() != want.transposed() || got.scale() != want.scale())
    return ::testing::AssertionFailure() << "states differ";
  return ::testing::AssertionSuccess();
}

// A batch of k updates: about half on present positions, with duplicates.
template <class V>
Coo<V> random_batch(const Model<V>& m, index_t rows, index_t cols, std::size_t k, std::mt19937_64& rng) {
  Coo<V> u;
  u.rows = rows;
  u.cols = cols;
  std::vector<std::pair<index_t, index_t>> present;
  for (const auto& e : m) present.push_back(e.first);
  std::uniform_int_distribution<index_t> r(0, rows - 1), c(0, cols - 1);
  for (std::size_t i = 0; i < k; ++i) {
    if (!present.empty() && rng() % 2) {
      const auto& at = present[rng() % present.size()];
      u.push(at.first, at.second, random_value<V>(rng));
    } else {
      u.push(r(rng), c(rng), random_value<V>(rng));
    }
    if (rng() % 8 == 0) u.push(u.row.back(), u.col.back(), random_value<V>(rng));  // a duplicate
  }
  return u;
}

// Every position of the block of `extent` rows and columns at (r0, c0), clipped.
template <class V>
Coo<V> block_batch(index_t rows, index_t cols, index_t r0, index_t c0, index_t extent, std::mt19937_64& rng) {
  Coo<V> u;
  u.rows = rows;
  u.cols = cols;
  for (index_t i = r0; i < std::min(rows, r0 + extent); ++i)
    for (index_t j = c0; j < std::min(cols, c0 + extent); ++j) u.push(i, j, random_value<V>(rng));
  return u;
}

// run(V{}, d, wide, rows, cols) at node sizes 2 to 256, wide and standard, in
// f32 and in f64 (with rows and columns exchanged), on shapes deep enough for
// inner levels at every node size; stops at the first fatal failure.
template <class Run>
void across_node_sizes(Run run) {
  for (const std::uint32_t d : {2u, 4u, 16u, 128u, 256u}) {
    for (const bool wide : {true, false}) {
      SCOPED_TRACE("d " + std::to_string(d) + (wide ? " wide" : " standard"));
      const index_t rows = d >= 128 ? 70000 : 3000, cols = d >= 128 ? 900 : 2500;
      run(float{}, d, wide, rows, cols);
      if (::testing::Test::HasFatalFailure()) return;
      run(double{}, d, wide, cols, rows);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

// 1500 random entries and three clustered d x d-ish blocks (dense leaves).
template <class V>
Model<V> start_model(index_t rows, index_t cols, std::uint32_t d, std::mt19937_64& rng) {
  Model<V> model;
  Coo<V> start = random_coo<V>(rows, cols, 1500, rng);
  const Coo<V> dense = clustered_coo<V>(rows, cols, 3, 2 * d, 0.8, rng);
  for (std::size_t i = 0; i < dense.nnz(); ++i) start.push(dense.row[i], dense.col[i], dense.val[i]);
  apply(model, start, EditMode::add);
  return model;
}

// A batch of one of 7 kinds (kind in [0, 7)): random positions (0, 1), a
// whole leaf block (2: grows it dense, or empties it by remove), a d^2 x d^2
// block's entries removed (3: sub-trees disappear), scattered entries in one
// d^2 x d^2 block (4: COOW nodes come and go), one entry (5), everything
// removed or nothing (6). `mode` may be changed to the one the kind needs.
template <class V>
Coo<V> shaped_batch(int kind, const Model<V>& model, index_t rows, index_t cols, std::uint32_t d, std::mt19937_64& rng,
                    EditMode& mode) {
  const index_t wide_extent = std::min<index_t>(std::uint64_t{d} * d, 4096);
  std::uniform_int_distribution<index_t> r(0, rows - 1), c(0, cols - 1);
  Coo<V> u;
  switch (kind) {
    case 0: case 1: u = random_batch(model, rows, cols, 1 + rng() % 400, rng); break;
    case 2: {  // a whole leaf block: grows it dense (set, add) or empties it (remove)
      const index_t r0 = r(rng) / d * d, c0 = c(rng) / d * d;
      u = block_batch<V>(rows, cols, r0, c0, d, rng);
      break;
    }
    case 3: {  // a block of d^2 x d^2 (clipped) emptied: sub-trees disappear
      const index_t e = wide_extent, r0 = r(rng) / e * e, c0 = c(rng) / e * e;
      u.rows = rows;
      u.cols = cols;
      for (const auto& [at, v] : model)
        if (at.first >= r0 && at.first < r0 + e && at.second >= c0 && at.second < c0 + e) u.push(at.first, at.second, v);
      mode = EditMode::remove;
      break;
    }
    case 4: {  // scattered entries in one d^2 x d^2 block: COOW nodes come and go
      const index_t e = wide_extent, r0 = r(rng) / e * e, c0 = c(rng) / e * e;
      u.rows = rows;
      u.cols = cols;
      std::uniform_int_distribution<index_t> off(0, e - 1);
      for (int i = 0; i < 200; ++i) {
        const index_t ri = r0 + off(rng), ci = c0 + off(rng);
        if (ri < rows && ci < cols) u.push(ri, ci, random_value<V>(rng));
      }
      break;
    }
    case 5: u = random_batch(model, rows, cols, 1, rng); break;  // one entry
    default: {  // everything (remove), or nothing
      u = coo_of(model, rows, cols);
      if (rng() % 2) u = Coo<V>{rows, cols, {}, {}, {}};
      else mode = EditMode::remove;
    }
  }
  return u;
}

}  // namespace hisparse::testing
