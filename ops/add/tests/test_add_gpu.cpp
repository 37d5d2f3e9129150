// GPU sparse add against the host reference: for every combination of
// operand states (plain, transposed, scaled), every controller, f32 and f64,
// node sizes from 4 to 256, wide nodes, and every real matrix, the GPU result
// equals add_reference's exactly: same pool size (node types are canonical),
// same entries, same values bit for bit, and it validates.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <string>

#include "hisparse/formats/builder.hpp"
#include "hisparse/formats/device_matrix.hpp"
#include "hisparse/formats/matrix_market.hpp"
#include "hisparse/formats/validate.hpp"
#include "hisparse/gen/moved_pattern.hpp"
#include "hisparse/ops/add_gpu.hpp"
#include "hisparse/ops/add_reference.hpp"
#include "hisparse/ops/copy_reference.hpp"
#include "hisparse/ops/gpu_controllers.hpp"
#include "support/matrices_dir.hpp"
#include "support/random_matrix.hpp"
#include "support/test_seed.hpp"
#include "support/wide_matrix.hpp"

using namespace hisparse;
using namespace hisparse::testing;
namespace fs = std::filesystem;

namespace {

// The same logical matrix with its content stored transposed and the
// transpose flag set: what add must read through the state.
template <class V>
Matrix<V> flagged_transpose_of(const Matrix<V>& m) {
  return ops::materialize_reference(m.transpose()).transpose();
}

template <class V>
void expect_equal(const Matrix<V>& got, const Matrix<V>& want, const std::string& what) {
  SCOPED_TRACE(what);
  ASSERT_NO_THROW(validate(got.content()));
  EXPECT_FALSE(got.transposed());
  EXPECT_EQ(got.scale(), V(1));
  EXPECT_EQ(got.rows(), want.rows());
  EXPECT_EQ(got.cols(), want.cols());
  EXPECT_EQ(got.nnz(), want.nnz());
  EXPECT_EQ(got.pool_bytes(), want.pool_bytes());
  EXPECT_EQ(got.content().header().flags, want.content().header().flags);
  const auto a = to_coo(got), b = to_coo(want);
  ASSERT_EQ(a.row, b.row);
  ASSERT_EQ(a.col, b.col);
  ASSERT_EQ(a.val, b.val);  // separate roundings on both sides: bit-identical
  // == takes -0 for +0: the bits as well.
  EXPECT_EQ(0, std::memcmp(a.val.data(), b.val.data(), a.val.size() * sizeof(V))) << "values differ in their bits";
}

template <class V>
void check_pair(const Matrix<V>& a, const Matrix<V>& b, V alpha, V beta, runtime::Controller c,
                const std::string& what) {
  const Matrix<V> want = ops::add_reference(a, b, alpha, beta);
  DeviceMatrix<V> da(a), db(b);
  const Matrix<V> got = ops::add(da, db, alpha, beta, {c}).download();
  expect_equal(got, want, what + " " + std::string(runtime::to_string(c)));
}

// Every state combination of the two operands (A and B of the same shape).
template <class V>
void check_states(const Matrix<V>& a, const Matrix<V>& b, runtime::Controller c, const std::string& what) {
  const Matrix<V> at = flagged_transpose_of(a), bt = flagged_transpose_of(b);
  check_pair(a, b, V(1), V(1), c, what + " A+B");
  check_pair(at, bt, V(1), V(1), c, what + " At+Bt");
  check_pair(a, bt.scaled(V(-2)), V(2.5), V(1), c, what + " 2.5A-2Bt");
  check_pair(at.scaled(V(0.5)), b, V(1), V(-0.75), c, what + " .5At-.75B");
  check_pair(b, a, V(1), V(-1), c, what + " B-A");
}

template <class V>
void check_every_controller(const Matrix<V>& a, const Matrix<V>& b, const std::string& what) {
  for (runtime::Controller c : runtime::all_controllers) {
    if (!ops::gpu_controller_available(c)) continue;  // device_launch=false build
    check_states(a, b, c, what);
  }
}

template <class V>
Matrix<V> build(const Coo<V>& coo, std::uint32_t node_size, bool wide = false) {
  return build_matrix(coo, BuildOptions{node_size, wide});
}

}  // namespace

TEST(AddGpu, RandomPairsEveryController) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  {
    const auto a = random_coo<double>(3000, 1200, 20000, rng);
    check_every_controller(build(a, 16), build(random_coo<double>(3000, 1200, 15000, rng), 16), "random rect d16");
    check_every_controller(build(a, 16), build(gen::moved_pattern(a, 3.0, rng()), 16), "moved d16");
  }
  {
    const auto a = clustered_coo<float>(1000, 700, 6, 200, 0.9, rng);
    check_every_controller(build(a, 16), build(gen::moved_pattern(a, 2.0, rng()), 16), "clustered f32 (dense nodes)");
  }
  check_every_controller(build(clustered_coo<double>(64, 64, 2, 64, 1.0, rng), 4),
                         build(random_coo<double>(64, 64, 300, rng), 4), "fully dense + random d4");
}

TEST(AddGpu, NodeSizesAndExtremeShapes) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  const runtime::Controller c = ops::AddOptions{}.controller;
  for (std::uint32_t d : {2u, 8u, 64u, 256u}) {
    const auto a = random_coo<float>(700, 900, 6000, rng);
    check_states(build(a, d), build(gen::moved_pattern(a, 4.0, rng()), d), c, "random d" + std::to_string(d));
    const auto dense = clustered_coo<double>(600, 600, 3, 300, 0.95, rng);
    check_states(build(dense, d), build(random_coo<double>(600, 600, 4000, rng), d), c,
                 "dense blocks d" + std::to_string(d));
  }
  const Coo<double> empty{40, 30, {}, {}, {}};
  Coo<double> one{40, 30, {}, {}, {}};
  one.push(39, 29, 1.5);
  Coo<double> other{40, 30, {}, {}, {}};
  other.push(0, 0, -2.0);
  check_states(build(empty, 16), build(empty, 16), c, "empty + empty");
  check_states(build(empty, 16), build(one, 16), c, "empty + one");
  check_states(build(one, 16), build(other, 16), c, "one + other one");
  // Cancellation keeps an explicit zero, as csrgeam does.
  check_pair(build(one, 16), build(one, 16), 1.0, -1.0, c, "one - one");
  check_states(build(random_coo<double>(1, 5000, 700, rng), 16), build(random_coo<double>(1, 5000, 900, rng), 16), c,
               "one row");
  check_states(build(random_coo<double>(20000, 3, 5000, rng), 8), build(random_coo<double>(20000, 3, 100, rng), 8), c,
               "tall and skinny");
  // Heavy rows and columns against a scattered operand.
  Coo<double> heavy{3000, 3000, {}, {}, {}};
  for (index_t i = 0; i < 3000; ++i) {
    heavy.push(7, i, 1.0 + i);
    heavy.push(i, 2900, -1.0 - i);
    heavy.push(i, i, 0.5);
  }
  check_states(build(heavy, 16), build(random_coo<double>(3000, 3000, 30000, rng), 16), c, "heavy rows and columns");
}

// Wide (COOW) nodes in one or both operands: every merged level depth-2
// sub-tree is re-decided between one COOW node and the standard form.
TEST(AddGpu, WideNodes) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  {
    const auto a = random_coo<double>(3000, 1700, 30000, rng);
    const Matrix<double> wa = build_wide(a, 16);
    const Matrix<double> wb = build_wide(gen::moved_pattern(a, 5.0, rng()), 16);
    check_every_controller(wa, wb, "wide + wide d16");
    // A standard operand: dense clusters merge into scattered wide sub-trees.
    check_every_controller(wa, build(clustered_coo<double>(3000, 1700, 8, 120, 0.9, rng), 16), "wide + standard d16");
  }
  const runtime::Controller c = ops::AddOptions{}.controller;
  const auto big = random_coo<float>(200000, 150000, 400000, rng);
  check_states(build_wide(big, 128), build_wide(gen::moved_pattern(big, 50.0, rng()), 128), c, "wide d128 f32");
  check_states(build_wide(random_coo<double>(4096, 4096, 8000, rng), 64),
               build_wide(random_coo<double>(4096, 4096, 9000, rng), 64), c, "wide root d64");
}

// Deeper matrices with wide nodes: level depth-2 sub-tree pairs of more than
// flat_pair_entries entries go from the runtime's AddWide to the flat kernels
// after the run, the others stay with AddWide; both in one result.
TEST(AddGpu, LargeWideSubtreesAfterTheRun) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  // Node size 32: sub-trees of 1024 x 1024, the diagonal ones ~80 k entries
  // for both operands together: twelve of them, 384 bands, enough for the
  // flat kernels' launch of many blocks (a smaller shared arena per block).
  Coo<double> banded = random_coo<double>(12000, 11900, 8000, rng);
  for (index_t i = 0; i < 12000; ++i)
    for (index_t j = i > 20 ? i - 20 : 0; j <= i + 20 && j < 11900; ++j) banded.push(i, j, 1.0 + 0.001 * i - 0.002 * j);
  Coo<double> moved = gen::moved_pattern(banded, 2.0, rng());
  // Rows 5000 and 5001 full in both operands: they are one unit (two rows at
  // d = 32), which in the diagonal pair holds ~4 300 entries, 2n beyond the
  // many-block launch's f64 arena (5 376 entries): that unit sorts and merges
  // in scratch. Their off-diagonal pairs (4 096 entries) stay with AddWide.
  for (index_t r = 5000; r <= 5001; ++r)
    for (index_t j = 0; j < 11900; ++j) {
      banded.push(r, j, 0.5 + 0.0001 * j);
      moved.push(r, j, -0.25 + 0.0002 * j);
    }
  const Matrix<double> a = build(banded, 32, true), b = build(moved, 32, true);
  ASSERT_EQ(a.content().shape.depth, 3u);
  for (runtime::Controller c : runtime::all_controllers) {
    if (!ops::gpu_controller_available(c)) continue;
    check_states(a, b, c, "banded d32, wide pools");
  }
  Coo<float> banded32{banded.rows, banded.cols, banded.row, banded.col, {}};
  for (double v : banded.val) banded32.val.push_back(static_cast<float>(v));
  check_states(build(banded32, 32, true), build(gen::moved_pattern(banded32, 2.0, rng()), 32, true),
               ops::AddOptions{}.controller, "banded d32 f32, wide pools");
}

// Depth-2 matrices with wide nodes take the band-parallel path (add_flat.cuh):
// each of its ways to find a band's entries and each way to store them.
TEST(AddGpu, WideRootBandPaths) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  const runtime::Controller c = ops::AddOptions{}.controller;
  // A unit (d/16 rows of a band) holding more entries than a block's shared
  // memory takes (about 11 k f32, 5.8 k f64 for both operands), in scratch:
  // rows 0-7 holding 15 000 entries among scattered ones, a COOW root
  // (transposed: bucketed); rows 0-3 full, a standard root.
  {
    std::uniform_int_distribution<index_t> col(0, 15999);
    Coo<double> heavy = random_coo<double>(16000, 16000, 6000, rng);
    for (index_t i = 0; i < 15000; ++i) heavy.push(i % 8, col(rng), 1.0 + i);
    Coo<float> heavy32{heavy.rows, heavy.cols, heavy.row, heavy.col, {}};
    for (double v : heavy.val) heavy32.val.push_back(static_cast<float>(v));
    check_states(build_wide(heavy, 128), build_wide(gen::moved_pattern(heavy, 3.0, rng()), 128), c,
                 "heavy unit, COOW root");
    check_states(build_wide(heavy32, 128), build_wide(gen::moved_pattern(heavy32, 3.0, rng()), 128), c,
                 "heavy unit f32, COOW root");
    Coo<double> full_rows = random_coo<double>(4000, 3900, 300, rng);
    for (index_t i = 0; i < 15000; ++i) full_rows.push(i % 4, i / 4, 1.0 + i);
    const Matrix<double> standard = build(full_rows, 64, true);
    EXPECT_NE(ref_type(standard.content().header().root), NodeType::coow);
    check_states(standard, build(gen::moved_pattern(full_rows, 3.0, rng()), 64, true), c, "heavy unit, standard root");
  }
  // The standard form with a dense inner node (every block holds entries),
  // against a scattered wide operand: the result's form is decided anew.
  {
    Coo<double> full{64, 64, {}, {}, {}};
    for (index_t r = 0; r < 64; ++r)
      for (index_t col = 0; col < 64; ++col) full.push(r, col, 1.0 + r - 0.5 * col);
    const Matrix<double> standard = build(full, 8, true);
    ASSERT_EQ(ref_type(standard.content().header().root), NodeType::dense);
    check_states(standard, build(random_coo<double>(64, 64, 40, rng), 8, true), c, "dense inner root d8");
    check_states(standard, build(gen::moved_pattern(full, 1.0, rng()), 8, true), c, "dense inner roots d8");
  }
  // Node size 256: keys of 32 bits, 256 bands.
  check_states(build_wide(random_coo<double>(30000, 20000, 40000, rng), 256),
               build_wide(random_coo<double>(30000, 20000, 30000, rng), 256), c, "wide root d256");
  // A pool too small at first (the call is repeated with more room), one
  // operand empty, one with a single entry.
  {
    const Matrix<double> a = build_wide(random_coo<double>(5000, 5000, 9000, rng), 128);
    const Matrix<double> b = build_wide(random_coo<double>(5000, 5000, 7000, rng), 128);
    const Matrix<double> want = ops::add_reference(a, b, 1.0, 2.0);
    DeviceMatrix<double> da(a), db(b);
    ops::AddOptions small;
    small.initial_pool_bytes = 64;
    expect_equal(ops::add(da, db, 1.0, 2.0, small).download(), want, "wide root, pool too small at first");
    const Coo<double> none{5000, 5000, {}, {}, {}};
    Coo<double> one{5000, 5000, {}, {}, {}};
    one.push(4999, 17, 3.0);
    check_states(a, build(none, 128, true), c, "wide root + empty");
    check_states(a, build(one, 128, true), c, "wide root + one entry");
  }
}

// Units of more than flat_heavy_entries (1536) entries are sorted, merged and
// written by the whole block of their band (add_flat_block.cuh): heavy rows
// alone in their band, several in one band and in one unit, beside light
// units; in the shared arena and (full rows over many blocks, some of them
// dense leaves) in scratch; both root forms, node sizes 32 to 256, f32 and f64.
TEST(AddGpu, HeavyUnitsByTheBlock) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  const runtime::Controller c = ops::AddOptions{}.controller;
  bool saw_coow = false, saw_standard = false;
  for (std::uint32_t d : {32u, 64u, 128u, 256u}) {
    const index_t n = std::min<index_t>(index_t{d} * d, 5000);
    std::uniform_int_distribution<index_t> any(0, n - 1);
    std::uniform_int_distribution<index_t> length(800, 2500);
    // Scattered entries and heavy rows: one alone, two in one unit, two
    // more in another unit of the same band.
    Coo<double> scattered = random_coo<double>(n, n, 4 * n, rng);
    for (index_t r : {index_t{5}, index_t{n / 2}, index_t{n / 2 + 1}, index_t{n / 2 + d / 2}, index_t{n - 1}}) {
      const index_t len = std::min(length(rng), n);
      for (index_t k = 0; k < len; ++k) scattered.push(r, any(rng), 1.0 + static_cast<double>(k));
    }
    // Full rows over many blocks (dense leaves) and a diagonal band.
    Coo<double> blocked{n, n, {}, {}, {}};
    for (index_t r = 0; r < n; ++r)
      for (index_t k = r > 2 ? r - 2 : 0; k < std::min<index_t>(n, r + 3); ++k) blocked.push(r, k, 0.5 + r - k);
    for (index_t r = d; r < d + d / 4 && r < n; ++r)
      for (index_t k = 0; k < std::min<index_t>(n, 1500); ++k) blocked.push(r, k, 1.0 - 0.25 * k);
    for (const Coo<double>* coo : {&scattered, &blocked}) {
      const Matrix<double> a = build(*coo, d, true);
      const Matrix<double> b = build(gen::moved_pattern(*coo, 2.0, rng()), d, true);
      ASSERT_EQ(a.content().shape.depth, 2u);
      (ref_type(a.content().header().root) == NodeType::coow ? saw_coow : saw_standard) = true;
      const std::string what = "d" + std::to_string(d) + (coo == &scattered ? " scattered" : " blocked");
      check_states(a, b, c, what);
      Coo<float> f{coo->rows, coo->cols, coo->row, coo->col, {}};
      for (double v : coo->val) f.val.push_back(static_cast<float>(v));
      check_pair(build(f, d, true), build(gen::moved_pattern(f, 2.0, rng()), d, true), 1.0f, -0.5f, c, what + " f32");
    }
  }
  EXPECT_TRUE(saw_coow);
  EXPECT_TRUE(saw_standard);
}

TEST(AddGpu, EveryRealMatrix) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  const runtime::Controller c = ops::AddOptions{}.controller;
  int checked = 0;
  for (const auto& e : fs::directory_iterator(matrices_dir())) {
    const auto name = e.path().filename().string();
    // young1c is complex; block_2000 counts from 0 and is rejected as malformed.
    if (e.path().extension() != ".mtx" || name == "young1c.mtx" || name == "block_2000.mtx") continue;
    const auto a = read_matrix_market<double>(e.path());
    const auto b = gen::moved_pattern(a, 10.0, rng());
    const Matrix<double> ma = build_matrix(a), mb = build_matrix(b);
    check_pair(ma, mb, 1.0, 1.0, c, name + " A+B");
    check_pair(flagged_transpose_of(ma), flagged_transpose_of(mb), 1.0, 1.0, c, name + " At+Bt");
    if (ma.rows() == ma.cols()) check_pair(ma, ma.transpose(), 1.0, -1.0, c, name + " A-At");
    const auto af = read_matrix_market<float>(e.path());
    check_pair(build_matrix(af, 32), build_matrix(gen::moved_pattern(af, 10.0, rng()), 32), 1.0f,
               2.0f, c, name + " f32 d32");
    ++checked;
  }
  EXPECT_GE(checked, 20);
}

// Explicit zeros only one operand has, scaled by a negative alpha: the
// host adds 0 to the product (-0 -> +0), in wide sub-trees as elsewhere.
TEST(AddGpu, SignedZerosAsTheHost) {
  for (bool wide : {false, true}) {
    Coo<double> ca{64, 64, {}, {}, {}}, cb{64, 64, {}, {}, {}};
    ca.push(1, 2, 0.0);
    cb.push(40, 50, 0.0);
    for (index_t i = 0; i < 64; i += 7) ca.push(i, 63 - i, 1.0);
    check_states(build(ca, 4, wide), build(cb, 4, wide), ops::AddOptions{}.controller,
                 wide ? "signed zeros, wide" : "signed zeros");
    check_pair(build(ca, 4, wide), build(cb, 4, wide), -1.0, -1.0, ops::AddOptions{}.controller,
               wide ? "-A-B signed zeros, wide" : "-A-B signed zeros");
  }
}

// In a wide pool of depth 3 or more, a level depth-2 pair of standard
// sub-trees (no COOW node on either side) is merged node by node by AddNode
// and tallied; where the union's COOW form would be no larger, the add runs
// again through AddWide. Two one-entry leaves of one sub-tree (d = 2, f32)
// are each standard (32 bytes against a 48-byte COOW node) while their union
// is COOW (48 against 48): the rerun. Then random pairs at small node sizes,
// where both outcomes occur, and a banded pair of mostly standard sub-trees.
TEST(AddGpu, StandardSubtreesOfWidePools) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  const runtime::Controller c = ops::AddOptions{}.controller;
  {
    Coo<float> ca{8, 8, {}, {}, {}}, cb{8, 8, {}, {}, {}};
    ca.push(0, 0, 1.5f);
    cb.push(0, 3, -2.0f);
    const Matrix<float> a = build(ca, 2, true), b = build(cb, 2, true);
    ASSERT_EQ(a.content().shape.depth, 3u);
    ASSERT_EQ(validate(a.content()).coow, 0u);
    ASSERT_EQ(validate(b.content()).coow, 0u);
    ASSERT_GT(validate(ops::add_reference(a, b, 1.0f, 1.0f).content()).coow, 0u) << "the union must want a COOW node";
    check_states(a, b, c, "two one-entry leaves whose union is COOW");
  }
  int flips = 0;
  for (int trial = 0; trial < 24; ++trial) {
    const std::uint32_t d = trial % 3 == 0 ? 2u : trial % 3 == 1 ? 4u : 8u;
    const index_t n = static_cast<index_t>(d) * d * d + 3;  // depth 4
    std::uniform_int_distribution<std::size_t> nnz(1, static_cast<std::size_t>(n) * 2);
    const Coo<double> ca = random_coo<double>(n, n, nnz(rng), rng), cb = random_coo<double>(n, n, nnz(rng), rng);
    const Matrix<double> a = build(ca, d, true), b = build(cb, d, true);
    const Matrix<double> want = ops::add_reference(a, b, 1.0, -0.5);
    flips += validate(want.content()).coow > validate(a.content()).coow + validate(b.content()).coow;
    check_pair(a, b, 1.0, -0.5, c, "random d" + std::to_string(d) + " trial " + std::to_string(trial));
  }
  RecordProperty("flips", flips);
  {
    Coo<double> banded{3000, 3000, {}, {}, {}};
    for (index_t r = 0; r < 3000; ++r)
      for (index_t k = r > 2 ? r - 2 : 0; k < std::min<index_t>(3000, r + 3); ++k) banded.push(r, k, 1.0 + r - 0.5 * k);
    const Matrix<double> a = build(banded, 16, true), b = build(gen::moved_pattern(banded, 2.0, rng()), 16, true);
    ASSERT_EQ(a.content().shape.depth, 3u);  // mostly standard sub-trees (the sparse corners are COOW)
    check_states(a, b, c, "banded d16, standard sub-trees of a wide pool");
  }
}

// The one-operand form (materialize's path for depth-2 wide matrices): C =
// alpha·op(A) equals the host's materialization of A scaled by alpha, bit for
// bit (alpha·a + 0 on both sides: -0 becomes +0). On one context, between two-operand
// adds of both kinds: a depth-2 add leaves the device counters reset for the
// next call (flat_finish), a deeper one does not, and each call must find
// them right.
TEST(AddGpu, OneOperandOnAContext) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  ops::Context ctx;
  const auto one = [&](const Matrix<double>& src, double alpha, const std::string& what) {
    DeviceMatrix<double> d(src);
    expect_equal(ops::add(ctx, d, alpha).download(), ops::materialize_reference(src.scaled(alpha)), what);
  };
  const auto two = [&](const Matrix<double>& a, const Matrix<double>& b, const std::string& what) {
    DeviceMatrix<double> da(a), db(b);
    expect_equal(ops::add(ctx, da, db, 1.0, -2.0).download(), ops::add_reference(a, b, 1.0, -2.0), what);
  };
  Coo<double> coo = random_coo<double>(5000, 4000, 4000, rng);  // scattered: a COOW root at d = 128
  for (index_t i = 0; i < 40; ++i) coo.push(i * 97 % 5000, i * 31 % 4000, i % 2 ? 0.0 : -0.0);  // signed zeros
  Coo<double> banded{3000, 3000, {}, {}, {}};
  for (index_t r = 0; r < 3000; ++r)
    for (index_t k = r > 3 ? r - 3 : 0; k < std::min<index_t>(3000, r + 4); ++k) banded.push(r, k, r == k ? 0.0 : 1.0 + r - k);
  const Matrix<double> coow = build(coo, 128, true), standard_root = build(banded, 128, true);
  const Matrix<double> deep = build(coo, 16, true), plain = build(coo, 16, false);
  ASSERT_EQ(coow.content().shape.depth, 2u);
  ASSERT_EQ(ref_type(coow.content().header().root), NodeType::coow);
  ASSERT_EQ(standard_root.content().shape.depth, 2u);
  ASSERT_NE(ref_type(standard_root.content().header().root), NodeType::coow);
  ASSERT_GT(deep.content().shape.depth, 2u);
  for (int round = 0; round < 2; ++round) {
    for (const auto* m : {&coow, &standard_root, &deep, &plain}) {
      const std::string what = "round " + std::to_string(round) + (m == &coow ? " COOW root" : m == &standard_root ? " standard root" : m == &deep ? " deeper wide" : " standard nodes");
      one(*m, 1.0, what + " alpha 1");
      one(flagged_transpose_of(*m).scaled(-2.0), 1.0, what + " -2At");
      one(m->scaled(0.5), -3.0, what + " -3(.5A)");
      two(*m, flagged_transpose_of(*m).scaled(0.25), what + " two operands");
    }
    one(build(Coo<double>{700, 900, {}, {}, {}}, 128, true), 2.0, "empty");
    // Transposed roots small enough to be scanned (flat_scan_entries)
    // rather than bucketed, of every form, alone and beside a bucketed operand.
    const Matrix<double> small = build(random_coo<double>(900, 700, 300, rng), 128, true);
    ASSERT_EQ(ref_type(small.content().header().root), NodeType::coow);
    one(flagged_transpose_of(small), -1.0, "small -At, scanned");
    Coo<double> single{1000, 1000, {}, {}, {}};
    single.push(3, 7, 1.5);
    const Matrix<double> one_entry = build(single, 128, true);  // an inner node and a leaf
    ASSERT_NE(ref_type(one_entry.content().header().root), NodeType::coow);
    one(flagged_transpose_of(one_entry).scaled(2.0), 1.0, "one entry, 2At, scanned");
    Coo<double> full{16, 16, {}, {}, {}};
    for (index_t r = 0; r < 16; ++r)
      for (index_t k = 0; k < 16; ++k) full.push(r, k, 1.0 + r - 0.25 * k);
    const Matrix<double> dense = build(full, 4, true);  // a dense inner node of dense leaves
    ASSERT_EQ(ref_type(dense.content().header().root), NodeType::dense);
    one(flagged_transpose_of(dense), -0.5, "dense d4, -.5At, scanned");
    const Matrix<double> larger = build(random_coo<double>(900, 700, 1500, rng), 128, true);
    two(flagged_transpose_of(small), flagged_transpose_of(larger), "small At scanned + larger Bt bucketed");
    two(flagged_transpose_of(small), small, "small At scanned + A");
  }
  // The materialized matrix of the real suite's depth-2 matrices.
  const auto real = read_matrix_market<double>(matrices_dir() / "fidapex6.mtx");
  one(flagged_transpose_of(build_matrix(real)).scaled(-1.5), 1.0, "fidapex6 -1.5At");
}

TEST(AddGpu, BadOperandsAreRefused) {
  std::mt19937_64 rng(1);
  DeviceMatrix<double> a(build(random_coo<double>(30, 20, 50, rng), 16));
  DeviceMatrix<double> b(build(random_coo<double>(20, 30, 50, rng), 16));
  DeviceMatrix<double> c(build(random_coo<double>(30, 20, 50, rng), 8));
  EXPECT_THROW((void)ops::add(a, b), Error);
  EXPECT_THROW((void)ops::add(a, c), Error);
  b.transpose();  // now 30 x 20 like A
  EXPECT_NO_THROW((void)ops::add(a, b));
}
