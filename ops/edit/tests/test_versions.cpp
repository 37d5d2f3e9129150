// Versions (persistent edits): families of versions grown by random edits,
// branching from random versions, against a std::map model per version.
// After every step the new version passes the validator, its compacted pool
// is the builder's for its model byte for byte (and edit()'s), every older
// version is unchanged, and the new version's nodes are either its parent's
// (same offsets: shared) or freshly appended.
#include <gtest/gtest.h>

#include <complex>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "edit_test_support.hpp"
#include "hisparse/formats/builder.hpp"
#include "hisparse/formats/hsp_file.hpp"
#include "hisparse/formats/matrix_market.hpp"
#include "hisparse/formats/node_view.hpp"
#include "hisparse/formats/stats.hpp"
#include "hisparse/formats/traverse.hpp"
#include "hisparse/formats/validate.hpp"
#include "hisparse/ops/add_reference.hpp"
#include "hisparse/ops/copy_reference.hpp"
#include "hisparse/ops/edit.hpp"
#include "hisparse/ops/spmv_reference.hpp"
#include "support/matrices_dir.hpp"
#include "support/test_seed.hpp"

using namespace hisparse;
using namespace hisparse::testing;

namespace {

template <class V>
std::vector<std::byte> own_bytes(const Matrix<V>& a) {
  const auto c = compacted(a.content());
  return {c->pool.data(), c->pool.data() + c->pool.size()};
}

template <class V>
std::vector<std::byte> pool_bytes_of(const Content<V>& c) {
  return {c.pool.data(), c.pool.data() + c.pool.size()};
}

// Offsets of every node a content's root reaches.
template <class V>
void reached(const Content<V>& c, NodeRef ref, std::uint32_t level, std::unordered_set<std::uint32_t>& out) {
  out.insert(ref_offset(ref));
  if (level + 1 < c.shape.depth && ref_type(ref) != NodeType::coow)
    for_each_entry<NodeRef>(c.pool.data(), ref, c.shape.log2_node_size, false,
                            [&](LocalCoord, NodeRef child) { reached(c, child, level + 1, out); });
}
template <class V>
std::unordered_set<std::uint32_t> reached(const Content<V>& c) {
  std::unordered_set<std::uint32_t> out;
  if (c.root() != null_ref) reached(c, c.root(), 0, out);
  return out;
}

template <class V>
struct Version {
  Matrix<V> m;
  Model<V> model;
  std::vector<std::byte> bytes;  // compacted, when it was made
};

template <class V>
void random_family(std::uint32_t d, bool wide, index_t rows, index_t cols, std::mt19937_64& rng) {
  const BuildOptions o{d, wide};
  std::vector<Version<V>> family;
  {
    Model<V> model = start_model<V>(rows, cols, d, rng);
    const Matrix<V> a = build_matrix(coo_of(model, rows, cols), o);
    const Matrix<V> v0 = ops::versioned(a);
    ASSERT_NE(v0.content().arena, nullptr);
    ASSERT_EQ(own_bytes(v0), pool_bytes_of(a.content())) << "versioned() changed the pool";
    family.push_back({v0, std::move(model), own_bytes(v0)});
  }
  for (int step = 0; step < 14; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    // Half the time the newest version, else any: the family branches.
    const std::size_t parent = rng() % 2 ? family.size() - 1 : rng() % family.size();
    const Version<V>& p = family[parent];
    ops::EditMode mode = static_cast<ops::EditMode>(rng() % 3);
    const Coo<V> u = shaped_batch(step % 7, p.model, rows, cols, d, rng, mode);
    const std::uint64_t arena_before = p.m.content().arena->size();
    ops::EditStats stats;
    const Matrix<V> v = ops::edit_version(p.m, u, mode, &stats);
    SCOPED_TRACE(std::string(ops::to_string(mode)) + " of " + std::to_string(u.nnz()) + " updates on version " +
                 std::to_string(parent));
    ASSERT_EQ(v.content().arena, p.m.content().arena) << "the version left its family";
    validate(v.content());
    Model<V> model = p.model;
    apply(model, u, mode);
    const Matrix<V> fresh = build_matrix(coo_of(model, rows, cols), o);
    ASSERT_EQ(v.nnz(), fresh.nnz());
    ASSERT_EQ(own_bytes(v), pool_bytes_of(fresh.content())) << "compacted version differs from a fresh build";
    ASSERT_EQ(own_bytes(v), pool_bytes_of(ops::edit(p.m, u, mode).content())) << "differs from edit()";
    // Shared nodes are the parent's, at the same offsets; the rest was appended.
    const auto mine = reached(v.content()), theirs = reached(p.m.content());
    for (const std::uint32_t off : mine)
      ASSERT_TRUE(theirs.count(off) || off >= arena_before) << "node at " << off << " is neither shared nor new";
    const ops::SharedBytes s = ops::shared_bytes(p.m, v);
    ASSERT_EQ(s.b, s.shared + stats.bytes_written) << "new bytes are not exactly the appended ones";
    ASSERT_EQ(matrix_stats(v).bytes_hisparse, matrix_stats(fresh).bytes_hisparse);
    if (stats.inserted + stats.updated + stats.removed == 0) {  // nothing changed: nothing written
      ASSERT_EQ(stats.bytes_written, 0u);
      ASSERT_EQ(v.content().root(), p.m.content().root());
    }
    family.push_back({v, std::move(model), own_bytes(v)});
  }
  // Every version is still what it was, after all the appends.
  for (std::size_t i = 0; i < family.size(); ++i) {
    SCOPED_TRACE("version " + std::to_string(i));
    validate(family[i].m.content());
    ASSERT_EQ(own_bytes(family[i].m), family[i].bytes);
  }
}

}  // namespace

TEST(Versions, RandomFamiliesMatchModelsAndShareUntouchedNodes) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  across_node_sizes([&](auto value, std::uint32_t d, bool wide, index_t rows, index_t cols) {
    random_family<decltype(value)>(d, wide, rows, cols, rng);
  });
  if (HasFatalFailure()) return;
  random_family<std::complex<double>>(8, true, 700, 500, rng);
}

// A 0.1% edit of a real matrix shares almost everything: the version stores
// its new paths only, and every op reads it as it reads its compacted form.
TEST(Versions, RealMatricesAndTheOps) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  int done = 0;
  for (const auto& file : matrix_files()) {
    if (read_matrix_market_header(file).field == MmField::complex) continue;
    SCOPED_TRACE(file.filename().string());
    const Coo<double> coo = read_matrix_market<double>(file);
    Model<double> model;
    apply(model, coo, ops::EditMode::add);
    const Matrix<double> a = ops::versioned(build_matrix(coo, BuildOptions{}));
    const Coo<double> u = random_batch(model, coo.rows, coo.cols, std::max<std::size_t>(1, coo.nnz() / 1000), rng);
    ops::EditStats stats;
    const Matrix<double> v = ops::edit_version(a, u, ops::EditMode::add, &stats);
    validate(v.content());
    const Matrix<double> own(compacted(v.content()));
    const ops::SharedBytes s = ops::shared_bytes(a, v);
    EXPECT_EQ(s.b, own.pool_bytes() - sizeof(PoolHeader));
    EXPECT_EQ(s.b, s.shared + stats.bytes_written);
    // SpMV and SpMV^T, bit for bit against the compacted form.
    for (const bool t : {false, true}) {
      const Matrix<double> vt = t ? v.transpose() : v, ot = t ? own.transpose() : own;
      std::vector<double> x(vt.cols()), y1(vt.rows(), 1.0), y2(vt.rows(), 1.0);
      for (auto& xi : x) xi = random_value<double>(rng);
      ops::spmv_reference<double>(vt, x, y1, 2.0, 0.5);
      ops::spmv_reference<double>(ot, x, y2, 2.0, 0.5);
      ASSERT_EQ(y1, y2);
    }
    // add of two versions of one family, and of a version with its original.
    const Matrix<double> sum = ops::add_reference(v, a, 1.0, -1.0);
    const Matrix<double> sum_own = ops::add_reference(own, Matrix<double>(compacted(a.content())), 1.0, -1.0);
    ASSERT_EQ(pool_bytes_of(sum.content()), pool_bytes_of(sum_own.content()));
    // copy_reference and files give the version's own nodes.
    const Matrix<double> copy = ops::copy_reference(v);
    EXPECT_EQ(copy.content().arena, nullptr);
    EXPECT_EQ(pool_bytes_of(copy.content()), pool_bytes_of(own.content()));
    const auto file = std::filesystem::temp_directory_path() / ("hisparse_version_" + std::to_string(seed) + ".hsp");
    save_hsp(file, v);
    EXPECT_EQ(pool_bytes_of(load_hsp<double>(file).content()), pool_bytes_of(own.content()));
    std::filesystem::remove(file);
    ++done;
  }
  EXPECT_GE(done, 10);
}

TEST(Versions, StatesAndInPlaceEdits) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  const index_t rows = 900, cols = 1300;
  const Model<float> model = start_model<float>(rows, cols, 8, rng);
  const Matrix<float> base = ops::versioned(build_matrix(coo_of(model, rows, cols), BuildOptions{8, true}));
  // Transposed and scaled versions edit as edit() does; a scaled set or add
  // materializes first (a new family), a remove keeps the state and family.
  for (const bool t : {false, true})
    for (const float scale : {1.0f, -2.0f})
      for (const auto mode : {ops::EditMode::set, ops::EditMode::add, ops::EditMode::remove}) {
        SCOPED_TRACE(std::string(t ? "transposed " : "") + "scale " + std::to_string(scale) + " " + ops::to_string(mode));
        const Matrix<float> a = (t ? base.transpose() : base).scaled(scale);
        Model<float> logical;
        for_each_logical_entry(a, [&](index_t r, index_t c, float val) { logical[{r, c}] = val; });
        const Coo<float> u = random_batch(logical, a.rows(), a.cols(), 50, rng);
        const Matrix<float> v = ops::edit_version(a, u, mode);
        const Matrix<float> e = ops::edit(a, u, mode);
        validate(v.content());
        EXPECT_EQ(v.transposed(), e.transposed());
        EXPECT_EQ(v.scale(), e.scale());
        EXPECT_EQ(own_bytes(v), pool_bytes_of(e.content()));
        EXPECT_EQ(v.content().arena == base.content().arena, mode == ops::EditMode::remove || scale == 1.0f);
      }
  // edit_in_place on a version appends a new one (its nodes are shared)
  // and leaves every other version alone.
  Matrix<float> a = base;
  const std::vector<std::byte> before = own_bytes(base);
  Model<float> m = model;
  for (int i = 0; i < 20; ++i) {
    ops::EditMode mode = static_cast<ops::EditMode>(rng() % 3);
    const Coo<float> u = shaped_batch(i % 7, m, rows, cols, 8, rng, mode);
    ops::EditStats stats;
    ops::edit_in_place(a, u, mode, &stats);
    apply(m, u, mode);
    EXPECT_FALSE(stats.in_place);
    ASSERT_EQ(a.content().arena, base.content().arena);
    ASSERT_EQ(own_bytes(a), pool_bytes_of(build_matrix(coo_of(m, rows, cols), BuildOptions{8, true}).content()));
  }
  EXPECT_EQ(own_bytes(base), before);
}

// Versions of one family made from several threads at once: appends are
// serialised, reads need no lock, and every version comes out right.
TEST(Versions, ConcurrentEditsOfOneFamily) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  const index_t rows = 5000, cols = 4000;
  std::mt19937_64 rng(seed);
  const Model<double> model = start_model<double>(rows, cols, 16, rng);
  const BuildOptions o{16, true};
  const Matrix<double> base = ops::versioned(build_matrix(coo_of(model, rows, cols), o));
  const std::vector<std::byte> before = own_bytes(base);
  constexpr int threads = 4, steps = 12;
  std::vector<std::vector<std::pair<Matrix<double>, Model<double>>>> made(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      std::mt19937_64 r(seed + static_cast<std::uint64_t>(t) + 1);
      Matrix<double> a = base;
      Model<double> m = model;
      for (int i = 0; i < steps; ++i) {
        ops::EditMode mode = static_cast<ops::EditMode>(r() % 3);
        const Coo<double> u = shaped_batch(i % 6, m, rows, cols, 16, r, mode);
        a = ops::edit_version(a, u, mode);
        apply(m, u, mode);
        made[t].push_back({a, m});
      }
    });
  for (auto& th : pool) th.join();
  for (int t = 0; t < threads; ++t)
    for (const auto& [v, m] : made[t]) {
      validate(v.content());
      ASSERT_EQ(v.content().arena, base.content().arena);
      ASSERT_EQ(own_bytes(v), pool_bytes_of(build_matrix(coo_of(m, rows, cols), o).content()));
    }
  EXPECT_EQ(own_bytes(base), before);
}

TEST(Versions, BadEditsLeaveTheFamilyAlone) {
  const Matrix<float> a = ops::versioned(build_matrix(Coo<float>{10, 12, {1, 2}, {3, 4}, {1.0f, 2.0f}}, BuildOptions{4, true}));
  const std::uint64_t size = a.content().arena->size();
  Coo<float> outside{10, 12, {1, 10}, {1, 1}, {1.0f, 1.0f}};
  EXPECT_THROW(ops::edit_version(a, outside, ops::EditMode::set), Error);
  Coo<float> wrong{12, 10, {1}, {1}, {1.0f}};
  EXPECT_THROW(ops::edit_version(a, wrong, ops::EditMode::add), Error);
  EXPECT_EQ(a.content().arena->size(), size);
  // A matrix in no family starts one; versioned() of a version is itself.
  const Matrix<float> plain = build_matrix(Coo<float>{10, 12, {1}, {3}, {1.0f}}, BuildOptions{4, true});
  const Matrix<float> v = ops::edit_version(plain, Coo<float>{10, 12, {2}, {2}, {5.0f}}, ops::EditMode::set);
  EXPECT_NE(v.content().arena, nullptr);
  EXPECT_EQ(ops::versioned(v).content_ptr(), v.content_ptr());
  EXPECT_EQ(ops::shared_bytes(plain, v).shared, 0u);  // not one pool
  EXPECT_EQ(plain.content().arena, nullptr);
}
