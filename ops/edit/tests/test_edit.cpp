// Host edits against a std::map model: after every step the validator passes,
// the entries are the model's, and the pool is the builder's for the model's
// entries byte for byte (and the reference edit's).
#include <gtest/gtest.h>

#include <complex>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "hisparse/formats/builder.hpp"
#include "hisparse/formats/matrix_market.hpp"
#include "hisparse/formats/validate.hpp"
#include "hisparse/ops/edit.hpp"
#include "support/matrices_dir.hpp"
#include "support/random_matrix.hpp"
#include "support/test_seed.hpp"
#include "edit_test_support.hpp"

using namespace hisparse;
using namespace hisparse::testing;
using ops::EditMode;

namespace {

template <class V>
void check_step(const Matrix<V>& before, const std::vector<std::byte>& before_bytes, const Coo<V>& u, EditMode mode,
                Model<V>& model, Matrix<V>& a, const BuildOptions& o) {
  ops::EditStats stats;
  const Matrix<V> got = ops::edit(before, u, mode, &stats);
  apply(model, u, mode);
  validate(got.content());
  const Coo<V> want_coo = coo_of(model, before.rows(), before.cols());
  const Matrix<V> fresh = build_matrix(want_coo, o);
  ASSERT_TRUE(same_matrix(got, fresh)) << ops::to_string(mode) << " of " << u.nnz() << " updates";
  ASSERT_TRUE(same_matrix(got, ops::edit_reference(before, u, mode)));
  ASSERT_EQ(bytes_of(before), before_bytes) << "the original changed";
  ASSERT_EQ(stats.inserted + before.nnz() - stats.removed, got.nnz());
  a = got;
}

template <class V>
void random_sequences(std::uint32_t d, bool wide, index_t rows, index_t cols, std::mt19937_64& rng) {
  const BuildOptions o{d, wide};
  Model<V> model = start_model<V>(rows, cols, d, rng);
  Matrix<V> a = build_matrix(coo_of(model, rows, cols), o);
  for (int step = 0; step < 14; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    const std::vector<std::byte> before_bytes = bytes_of(a);
    const Matrix<V> before = a;
    EditMode mode = static_cast<EditMode>(rng() % 3);
    const Coo<V> u = shaped_batch(step % 7, model, rows, cols, d, rng, mode);
    check_step(before, before_bytes, u, mode, model, a, o);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

}  // namespace

TEST(Edit, RandomSequencesMatchModelAndFreshBuild) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  across_node_sizes([&](auto value, std::uint32_t d, bool wide, index_t rows, index_t cols) {
    random_sequences<decltype(value)>(d, wide, rows, cols, rng);
  });
}

TEST(Edit, ComplexValues) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  using C = std::complex<double>;
  random_sequences<C>(8, true, 700, 500, rng);
}

TEST(Edit, SingleEntriesFromEmptyToEmpty) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  const index_t n = 300;
  const BuildOptions o{4, true};
  Matrix<float> a = build_matrix(Coo<float>{n, n, {}, {}, {}}, o);
  Model<float> model;
  std::uniform_int_distribution<index_t> pos(0, n - 1);
  for (int i = 0; i < 400; ++i) {
    const index_t r = pos(rng) % 40, c = pos(rng);
    const float v = random_value<float>(rng);
    if (i % 3 == 2) {
      a = ops::add_to_entry(a, r, c, v);
      model[{r, c}] += v;
    } else {
      a = ops::set_entry(a, r, c, v);
      model[{r, c}] = v;
    }
  }
  ASSERT_TRUE(same_matrix(a, build_matrix(coo_of(model, n, n), o)));
  std::vector<std::pair<index_t, index_t>> present;
  for (const auto& e : model) present.push_back(e.first);
  std::shuffle(present.begin(), present.end(), rng);
  for (std::size_t i = 0; i < present.size(); ++i) {
    a = ops::remove_entry(a, present[i].first, present[i].second);
    model.erase(present[i]);
    if (i % 25 == 0 || i + 1 == present.size()) {
      validate(a.content());
      ASSERT_TRUE(same_matrix(a, build_matrix(coo_of(model, n, n), o))) << "after " << i + 1 << " removals";
    }
  }
  EXPECT_EQ(a.nnz(), 0u);
  EXPECT_EQ(a.content().root(), null_ref);
  // Removing what is absent changes nothing.
  EXPECT_TRUE(same_matrix(ops::remove_entry(a, 3, 4), a));
}

TEST(Edit, SharedMatrices) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  int done = 0;
  for (const auto& file : matrix_files()) {
    if (read_matrix_market_header(file).field == MmField::complex) continue;
    SCOPED_TRACE(file.filename().string());
    const Coo<double> coo = read_matrix_market<double>(file);
    Model<double> model;
    apply(model, coo, EditMode::add);
    for (const BuildOptions o : {BuildOptions{}, BuildOptions{16, false}}) {
      const Matrix<double> a = build_matrix(coo, o);
      for (const EditMode mode : {EditMode::set, EditMode::add, EditMode::remove}) {
        const Coo<double> u = random_batch(model, coo.rows, coo.cols, std::max<std::size_t>(1, coo.nnz() / 100), rng);
        ops::EditStats stats;
        const Matrix<double> got = ops::edit(a, u, mode, &stats);
        validate(got.content());
        Model<double> m = model;
        apply(m, u, mode);
        ASSERT_TRUE(same_matrix(got, build_matrix(coo_of(m, coo.rows, coo.cols), o))) << ops::to_string(mode);
        EXPECT_EQ(stats.inserted + a.nnz() - stats.removed, got.nnz());
      }
    }
    ++done;
  }
  EXPECT_GE(done, 19);
}

TEST(Edit, TransposedAndScaledMatrices) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  const Coo<double> coo = random_coo<double>(400, 250, 3000, rng);
  const Matrix<double> plain = build_matrix(coo, 16);
  // Transposed: positions are op(A)'s, the result stays transposed.
  const Matrix<double> t = plain.transpose();
  Coo<double> u = random_coo<double>(250, 400, 100, rng);
  for (const EditMode mode : {EditMode::set, EditMode::add, EditMode::remove}) {
    const Matrix<double> got = ops::edit(t, u, mode);
    EXPECT_TRUE(got.transposed());
    EXPECT_EQ(got.rows(), 250u);
    Model<double> m;
    const Coo<double> logical = to_coo(t);
    apply(m, logical, EditMode::set);
    apply(m, u, mode);
    const Coo<double> want = coo_of(m, 250, 400), have = to_coo(got);
    EXPECT_EQ(have.row, want.row);
    EXPECT_EQ(have.col, want.col);
    EXPECT_EQ(have.val, want.val);
    EXPECT_TRUE(same_matrix(got, ops::edit_reference(t, u, mode)));
  }
  // Scaled: a set value reads back exactly; remove keeps the state.
  const Matrix<double> s = plain.scaled(3.0).transpose();
  const Matrix<double> set = ops::set_entry(s, 7, 9, 0.1);
  EXPECT_EQ(set.scale(), 1.0);
  const Coo<double> sc = to_coo(set);
  bool found = false;
  for (std::size_t i = 0; i < sc.nnz(); ++i)
    if (sc.row[i] == 7 && sc.col[i] == 9) found = sc.val[i] == 0.1;
  EXPECT_TRUE(found);
  EXPECT_TRUE(same_matrix(set, ops::edit_reference(s, Coo<double>{250, 400, {7}, {9}, {0.1}}, EditMode::set)));
  const Matrix<double> removed = ops::remove_entry(s, coo.col[0], coo.row[0]);
  EXPECT_EQ(removed.scale(), 3.0);
  EXPECT_TRUE(removed.transposed());
}

TEST(Edit, BadEditsAreRefused) {
  const Matrix<float> a = build_matrix(Coo<float>{50, 40, {1, 2}, {3, 4}, {1.0f, 2.0f}}, 4);
  const std::vector<std::byte> before = bytes_of(a);
  const auto message = [&](const Coo<float>& u) {
    try {
      (void)ops::edit(a, u, EditMode::set);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message(Coo<float>{40, 50, {1}, {1}, {1.0f}}).find("the updates are 40 x 50, the matrix 50 x 40"),
            std::string::npos);
  EXPECT_NE(message(Coo<float>{50, 40, {1, 49, 50}, {1, 39, 0}, {1.0f, 2.0f, 3.0f}})
                .find("update 2 at (50, 0) lies outside the 50 x 40 matrix"),
            std::string::npos);
  EXPECT_NE(message(Coo<float>{50, 40, {1, 2}, {1}, {1.0f, 2.0f}}).find("differ in length"), std::string::npos);
  // A transposed matrix checks against its logical dimensions.
  EXPECT_THROW((void)ops::set_entry(a.transpose(), 45, 1, 1.0f), Error);
  EXPECT_NO_THROW((void)ops::set_entry(a.transpose(), 39, 49, 1.0f));
  EXPECT_EQ(bytes_of(a), before);
  EXPECT_THROW((void)ops::parse_edit_mode("replace"), Error);
  EXPECT_EQ(ops::parse_edit_mode("add"), EditMode::add);
}

TEST(Edit, OnlyTouchedNodesAreRewritten) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  const Coo<float> coo = clustered_coo<float>(20000, 20000, 40, 300, 0.3, rng);
  // The standard format: one path of `depth` nodes, a leaf and its
  // ancestors. With wide nodes (the default) the entry may lie in a COOW
  // node, which stands for two levels: a path one node shorter.
  for (const bool wide : {false, true}) {
    SCOPED_TRACE(wide ? "wide nodes" : "standard nodes");
    const Matrix<float> a = build_matrix(coo, BuildOptions{16, wide});
    ops::EditStats stats;
    const Matrix<float> b = ops::set_entry(a, coo.row[5], coo.col[5], 42.0f);
    (void)ops::edit(a, Coo<float>{20000, 20000, {coo.row[5]}, {coo.col[5]}, {42.0f}}, EditMode::set, &stats);
    EXPECT_EQ(stats.updated, 1u);
    EXPECT_EQ(stats.inserted + stats.removed, 0u);
    const std::uint32_t depth = a.content().shape.depth;
    if (wide) {
      EXPECT_GE(stats.nodes_rewritten, depth - 1);
      EXPECT_LE(stats.nodes_rewritten, depth);
    } else {
      EXPECT_EQ(stats.nodes_rewritten, depth);
    }
    EXPECT_GT(stats.bytes_copied, a.pool_bytes() * 9 / 10);
    EXPECT_EQ(b.pool_bytes(), a.pool_bytes());
  }
}

namespace {

// edit_in_place on a matrix that owns its content: after every step the pool
// is the fresh build's; updates of present positions are always in place.
template <class V>
void in_place_sequence(std::uint32_t d, bool wide, index_t rows, index_t cols, std::mt19937_64& rng, int& in_place) {
  const BuildOptions o{d, wide};
  Model<V> model;
  apply(model, random_coo<V>(rows, cols, 2000, rng), EditMode::add);
  apply(model, clustered_coo<V>(rows, cols, 3, 2 * d, 0.8, rng), EditMode::add);
  Matrix<V> a = build_matrix(coo_of(model, rows, cols), o);
  for (int step = 0; step < 12; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    Coo<V> u{rows, cols, {}, {}, {}};
    EditMode mode = EditMode::set;
    const bool updates_only = step % 3 == 0;
    if (updates_only) {  // present positions only: set or add
      std::vector<std::pair<index_t, index_t>> present;
      for (const auto& e : model) present.push_back(e.first);
      for (int i = 0; i < 50 && !present.empty(); ++i) {
        const auto& at = present[rng() % present.size()];
        u.push(at.first, at.second, random_value<V>(rng));
      }
      mode = rng() % 2 ? EditMode::set : EditMode::add;
    } else {
      u = random_batch(model, rows, cols, 1 + rng() % (step % 3 == 1 ? 3 : 60), rng);
      mode = static_cast<EditMode>(rng() % 3);
    }
    const std::byte* pool_before = a.content().pool.data();
    ops::EditStats stats;
    ops::edit_in_place(a, u, mode, &stats);
    apply(model, u, mode);
    validate(a.content());
    ASSERT_TRUE(same_matrix(a, build_matrix(coo_of(model, rows, cols), o)))
        << ops::to_string(mode) << (stats.in_place ? " in place" : " rewritten");
    if (updates_only && !u.val.empty()) {
      EXPECT_TRUE(stats.in_place) << "updates of present positions keep every node's size";
    }
    if (stats.in_place) {
      EXPECT_EQ(a.content().pool.data(), pool_before);
      ++in_place;
    }
  }
}

}  // namespace

TEST(Edit, InPlaceWhereSizesAllowMatchesFreshBuild) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  int in_place = 0;
  for (const std::uint32_t d : {2u, 8u, 64u, 256u}) {
    for (const bool wide : {true, false}) {
      SCOPED_TRACE("d " + std::to_string(d) + (wide ? " wide" : " standard"));
      const index_t rows = d >= 64 ? 70000 : 2000, cols = d >= 64 ? 900 : 1500;
      in_place_sequence<float>(d, wide, rows, cols, rng, in_place);
      if (HasFatalFailure()) return;
      in_place_sequence<double>(d, wide, cols, rows, rng, in_place);
      if (HasFatalFailure()) return;
    }
  }
  EXPECT_GT(in_place, 32);
}

TEST(Edit, InPlaceLeavesSharedContentAlone) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  const Coo<double> coo = random_coo<double>(300, 300, 2000, rng);
  Matrix<double> a = build_matrix(coo, 8);
  const Matrix<double> other = a;  // shares the content
  const std::vector<std::byte> before = bytes_of(other);
  ops::EditStats stats;
  ops::edit_in_place(a, Coo<double>{300, 300, {coo.row[0]}, {coo.col[0]}, {7.0}}, EditMode::set, &stats);
  EXPECT_FALSE(stats.in_place);
  EXPECT_EQ(bytes_of(other), before);
  EXPECT_NE(a.content_ptr(), other.content_ptr());
  // Now a owns its content: the same kind of update is in place.
  ops::edit_in_place(a, Coo<double>{300, 300, {coo.row[1]}, {coo.col[1]}, {8.0}}, EditMode::set, &stats);
  EXPECT_TRUE(stats.in_place);
  // Transposed: positions are op(A)'s.
  Matrix<double> t = build_matrix(coo, 8).transpose();
  ops::edit_in_place(t, Coo<double>{300, 300, {coo.col[2]}, {coo.row[2]}, {9.0}}, EditMode::set, &stats);
  EXPECT_TRUE(stats.in_place);
  Model<double> m;
  apply(m, to_coo(build_matrix(coo, 8).transpose()), EditMode::set);
  m[{coo.col[2], coo.row[2]}] = 9.0;
  EXPECT_EQ(to_coo(t).val, coo_of(m, 300, 300).val);
  // Scaled, set: materialized (a new pool), the value exact.
  Matrix<double> s = build_matrix(coo, 8).scaled(3.0);
  ops::edit_in_place(s, Coo<double>{300, 300, {coo.row[0]}, {coo.col[0]}, {0.1}}, EditMode::set, &stats);
  EXPECT_FALSE(stats.in_place);
  EXPECT_EQ(s.scale(), 1.0);
  // Bad updates: refused, nothing changed.
  const std::vector<std::byte> a_bytes = bytes_of(a);
  EXPECT_THROW(ops::edit_in_place(a, Coo<double>{300, 300, {300}, {0}, {1.0}}, EditMode::set), Error);
  EXPECT_EQ(bytes_of(a), a_bytes);
}
