// The format on the host: builder round trips, the dense/sparse rule, memory
// figures, the validator's rejections and the matrix state.
#include <gtest/gtest.h>

#include <complex>
#include <cstring>
#include <filesystem>
#include <unistd.h>

#include "hisparse/formats/builder.hpp"
#include "hisparse/formats/hsp_file.hpp"
#include "hisparse/formats/node_view.hpp"
#include "hisparse/formats/stats.hpp"
#include "hisparse/formats/traverse.hpp"
#include "hisparse/formats/validate.hpp"
#include "support/random_matrix.hpp"
#include "support/test_seed.hpp"

using namespace hisparse;
using namespace hisparse::testing;

namespace {

template <class V>
void expect_round_trip(const Coo<V>& in, const BuildOptions& options) {
  const Matrix<V> m = build_matrix(in, options);
  const PoolStats st = validate(m.content());
  EXPECT_EQ((m.content().header().flags & pool_flag_wide) != 0, options.wide_nodes);
  if (!options.wide_nodes) {
    EXPECT_EQ(st.coow, 0u);
  }
  // Memory figures are the bytes actually in the pool: nodes plus header, no gaps.
  EXPECT_EQ(st.node_bytes + sizeof(PoolHeader), m.pool_bytes());
  const auto expect = summed(in);
  EXPECT_EQ(m.nnz(), expect.size());
  EXPECT_EQ(st.entries, expect.size());
  const Coo<V> out = to_coo(m);
  ASSERT_EQ(out.rows, in.rows);
  ASSERT_EQ(out.cols, in.cols);
  ASSERT_EQ(out.nnz(), expect.size());
  std::size_t i = 0;
  for (const auto& [rc, v] : expect) {
    ASSERT_EQ(out.row[i], rc.first) << "entry " << i;
    ASSERT_EQ(out.col[i], rc.second) << "entry " << i;
    ASSERT_EQ(out.val[i], v) << "entry " << i;
    ++i;
  }
}

// Both formats: the default (wide nodes allowed) and the standard one.
template <class V>
void expect_round_trip(const Coo<V>& in, std::uint32_t node_size, const std::string& what) {
  for (const bool wide : {true, false}) {
    SCOPED_TRACE(what + ", node size " + std::to_string(node_size) + (wide ? ", default (wide)" : ", standard"));
    expect_round_trip(in, BuildOptions{node_size, wide});
  }
}

constexpr std::uint32_t node_sizes[] = {2, 4, 16, 128, 256};

}  // namespace

TEST(Builder, RandomMatricesRoundTrip) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  for (std::uint32_t d : node_sizes) {
    expect_round_trip(random_coo<double>(1000, 1000, 5000, rng), d, "square f64");
    expect_round_trip(random_coo<float>(300, 2000, 4000, rng), d, "wide f32");
    expect_round_trip(random_coo<float>(5000, 17, 3000, rng), d, "tall f32");
    expect_round_trip(clustered_coo<double>(700, 900, 5, 140, 0.9, rng), d, "clustered f64");
    expect_round_trip(random_coo<std::complex<double>>(200, 300, 800, rng), d, "complex");
  }
}

TEST(Builder, EdgeShapes) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  for (std::uint32_t d : node_sizes) {
    expect_round_trip(Coo<double>{0, 0, {}, {}, {}}, d, "0 x 0");
    expect_round_trip(Coo<double>{100, 50, {}, {}, {}}, d, "empty 100 x 50");
    expect_round_trip(Coo<double>{1, 1, {0}, {0}, {2.5}}, d, "1 x 1");
    expect_round_trip(Coo<double>{1, 1, {0}, {0}, {0.0}}, d, "1 x 1 explicit zero");
    Coo<float> full{d, d, {}, {}, {}};
    for (index_t r = 0; r < d; ++r)
      for (index_t c = 0; c < d; ++c) full.push(r, c, random_value<float>(rng));
    expect_round_trip(full, d, "one full d x d block");
    Coo<double> row{3000, 3000, {}, {}, {}}, col{3000, 3000, {}, {}, {}};
    for (index_t k = 0; k < 3000; ++k) {
      row.push(1234, k, random_value<double>(rng));
      col.push(k, 2999, random_value<double>(rng));
    }
    expect_round_trip(row, d, "dense row");
    expect_round_trip(col, d, "dense column");
    // The far corner of the largest supported dimensions.
    Coo<double> corner{max_dimension, max_dimension, {}, {}, {}};
    corner.push(max_dimension - 1, max_dimension - 1, 7.0);
    corner.push(0, 0, 1.0);
    corner.push(max_dimension - 1, 0, 3.0);
    expect_round_trip(corner, d, "far corner 2^48");
  }
}

TEST(Builder, DuplicatesSummedAndZerosKept) {
  Coo<double> m{10, 10, {1, 1, 2, 1, 3}, {1, 1, 2, 1, 4}, {1.0, 2.0, 0.0, 4.0, -1.0}};
  const auto out = to_coo(build_matrix(m, 4));
  ASSERT_EQ(out.nnz(), 3u);
  EXPECT_EQ(out.val[0], 7.0);
  EXPECT_EQ(out.row[1], 2u);
  EXPECT_EQ(out.val[1], 0.0);  // explicit zero stays an entry
  EXPECT_EQ(out.val[2], -1.0);
}

TEST(Builder, RejectsBadInput) {
  Coo<double> out_of_range{10, 10, {10}, {0}, {1.0}};
  EXPECT_THROW(build_matrix(out_of_range), Error);
  Coo<double> ragged{10, 10, {1, 2}, {1}, {1.0, 2.0}};
  EXPECT_THROW(build_matrix(ragged), Error);
  Coo<double> ok{10, 10, {1}, {1}, {1.0}};
  EXPECT_THROW(build_matrix(ok, 3), Error);
  EXPECT_THROW(build_matrix(ok, 512), Error);
  EXPECT_THROW(build_matrix(ok, 1), Error);
  Coo<double> huge{max_dimension + 1, 1, {}, {}, {}};
  EXPECT_THROW(build_matrix(huge), LimitError);
}

TEST(Builder, CsrInAndOut) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  const auto coo = random_coo<double>(400, 300, 3000, rng);
  const Matrix<double> a = build_matrix(coo, 16);
  const Csr<double> csr = to_csr(a);
  ASSERT_EQ(csr.row_ptr.size(), 401u);
  const Matrix<double> b = build_matrix(csr, 16);
  EXPECT_EQ(a.pool_bytes(), b.pool_bytes());
  EXPECT_EQ(0, std::memcmp(a.content().pool.data(), b.content().pool.data(), a.pool_bytes()));
  Csr<double> bad = csr;
  bad.row_ptr[5] = bad.row_ptr[6] + 1;
  EXPECT_THROW(build_matrix(bad), Error);
}

TEST(Format, DenseSparseRuleAndLayout) {
  // Layout arithmetic of docs/format.md, spelled out.
  EXPECT_EQ(coo_layout(NodeType::coo1, 1, 4).bytes, 16u);
  EXPECT_EQ(coo_layout(NodeType::coo1, 1, 8).bytes, 16u);
  EXPECT_EQ(coo_layout(NodeType::coo2, 2, 4).bytes, 16u);
  EXPECT_EQ(coo_layout(NodeType::coo2, 2, 8).value_offset, 16u);
  EXPECT_EQ(coo_layout(NodeType::coo4, 3, 4).coord_offset, 8u);
  EXPECT_EQ(coo_layout(NodeType::coo4, 3, 4).value_offset, 16u);
  EXPECT_EQ(coo_layout(NodeType::coo4, 100, 4).bytes, 8u + 200u + 400u);
  EXPECT_EQ(dense_bytes(7, true, 4), 2048u + 65536u);
  EXPECT_EQ(dense_bytes(7, false, 4), 65536u);
  // Every node of a built matrix carries the type the rule gives (validate checks),
  // and a full block is dense.
  Coo<float> full{16, 16, {}, {}, {}};
  for (index_t r = 0; r < 16; ++r)
    for (index_t c = 0; c < 16; ++c) full.push(r, c, 1.0f);
  const auto m = build_matrix(full, 16);
  EXPECT_EQ(ref_type(m.content().root()), NodeType::dense);
  const auto st = validate(m.content());
  EXPECT_EQ(st.dense, 1u);
  EXPECT_EQ(choose_node(1, 7, true, 4).type, NodeType::coo1);
  EXPECT_EQ(choose_node(2, 7, true, 4).type, NodeType::coo2);
  EXPECT_EQ(choose_node(3, 7, true, 4).type, NodeType::coo4);
  EXPECT_EQ(choose_node(16384, 7, true, 4).type, NodeType::dense);
}

TEST(Format, StatsMatchPool) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  const auto m = build_matrix(random_coo<float>(2000, 2000, 20000, rng));
  const MatrixStats s = matrix_stats(m);
  EXPECT_EQ(s.bytes_hisparse, m.pool_bytes() + hsp_header_bytes);
  EXPECT_EQ(s.bytes_csr, 2001u * 4 + s.nnz * 8);
  EXPECT_EQ(s.bytes_coo, s.nnz * 12);
  EXPECT_EQ(s.nodes.dense + s.nodes.coo1 + s.nodes.coo2 + s.nodes.coo4, s.nodes.inner + s.nodes.leaf);
}

TEST(Format, TransposeAndScaleAreState) {
  Coo<double> m{3, 5, {0, 2}, {4, 1}, {1.0, 2.0}};
  const auto a = build_matrix(m, 2);
  const auto t = a.transpose().scaled(3.0);
  EXPECT_EQ(t.content_ptr(), a.content_ptr());  // O(1): the content is shared
  EXPECT_EQ(t.rows(), 5u);
  EXPECT_EQ(t.cols(), 3u);
  const auto out = to_coo(t);
  ASSERT_EQ(out.nnz(), 2u);
  EXPECT_EQ(out.row[0], 1u);
  EXPECT_EQ(out.col[0], 2u);
  EXPECT_EQ(out.val[0], 6.0);
  EXPECT_EQ(out.row[1], 4u);
  EXPECT_EQ(out.col[1], 0u);
  EXPECT_EQ(out.val[1], 3.0);
}

// ---- validator -----------------------------------------------------------

namespace {
// A mutable copy of a built content, to corrupt.
std::shared_ptr<Content<double>> copy_of(const Matrix<double>& m) {
  return std::make_shared<Content<double>>(m.content());
}
void expect_invalid(const Content<double>& c, const std::string& needle) {
  try {
    validate(c);
    ADD_FAILURE() << "validator accepted a pool that should fail with: " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}
PoolHeader& header_of(Content<double>& c) { return *reinterpret_cast<PoolHeader*>(c.pool.data()); }
}  // namespace

TEST(Validator, RejectsCorruptPools) {
  // Two levels with d = 4: a 16 x 16 matrix with a few scattered entries, in
  // the standard format (by default its root would be one COOW node).
  Coo<double> coo{16, 16, {0, 0, 5, 9, 15}, {0, 3, 5, 2, 15}, {1, 2, 3, 4, 5}};
  const auto m = build_matrix(coo, BuildOptions{4, false});
  validate(m.content());
  const NodeRef root = m.content().root();
  ASSERT_NE(ref_type(root), NodeType::dense);

  {  // Unknown type tag.
    auto c = copy_of(m);
    header_of(*c).root = (root & ~0xFu) | 7u;
    expect_invalid(*c, "unknown node type");
  }
  {  // Offset outside the pool.
    auto c = copy_of(m);
    header_of(*c).root = make_ref(c->pool.size() + 64, ref_type(root));
    expect_invalid(*c, "outside the pool");
  }
  {  // Child reference to the pool header.
    auto c = copy_of(m);
    header_of(*c).root = make_ref(0, NodeType::coo4);
    expect_invalid(*c, "outside the pool");
  }
  {  // Wrong nnz.
    auto c = copy_of(m);
    c->nnz = 4;
    expect_invalid(*c, "nnz");
  }
  {  // Root node's count set to zero.
    auto c = copy_of(m);
    std::uint32_t zero = 0;
    std::memcpy(c->pool.data() + ref_offset(root), &zero, 4);
    expect_invalid(*c, "entry count 0");
  }
  {  // Unsorted coordinates in the root (swap its first two children's coordinates).
    auto c = copy_of(m);
    const auto v = coo_view<NodeRef>(c->pool.data(), root);
    ASSERT_GE(v.count, 2u);
    auto* coords = const_cast<LocalCoord*>(v.coords);
    std::swap(coords[0], coords[1]);
    expect_invalid(*c, "row-major");
  }
  {  // Coordinate not below d.
    auto c = copy_of(m);
    const auto v = coo_view<NodeRef>(c->pool.data(), root);
    const_cast<LocalCoord*>(v.coords)[v.count - 1].row = 200;
    expect_invalid(*c, "not below d");
  }
  {  // A child referenced twice (also how a cycle shows).
    auto c = copy_of(m);
    const auto v = coo_view<NodeRef>(c->pool.data(), root);
    const_cast<NodeRef*>(v.values)[1] = v.values[0];
    expect_invalid(*c, "referenced more than once");
  }
  {  // A reference to the root from below: a cycle.
    auto c = copy_of(m);
    const auto v = coo_view<NodeRef>(c->pool.data(), root);
    const_cast<NodeRef*>(v.values)[0] = root;
    expect_invalid(*c, "");
  }
  {  // Non-canonical type: a COO1 child tagged as COO4.
    auto c = copy_of(m);
    const auto v = coo_view<NodeRef>(c->pool.data(), root);
    auto* refs = const_cast<NodeRef*>(v.values);
    NodeRef* one = nullptr;
    for (std::uint32_t i = 0; i < v.count; ++i)
      if (ref_type(refs[i]) == NodeType::coo1) one = &refs[i];
    ASSERT_NE(one, nullptr);
    *one = make_ref(ref_offset(*one), NodeType::coo2);
    expect_invalid(*c, "");
  }
  {  // Bad pool magic.
    auto c = copy_of(m);
    header_of(*c).magic = 0;
    expect_invalid(*c, "magic");
  }
  {  // Entry outside the matrix: shrink the matrix so that (15, 15) no longer fits.
    auto c = copy_of(m);
    c->shape.rows = 15;
    c->shape.cols = 15;
    expect_invalid(*c, "outside the 15 x 15 matrix");
  }
  {  // Non-zero padding.
    Coo<double> three{4, 4, {0, 1, 2}, {0, 1, 2}, {1, 2, 3}};
    auto c = copy_of(build_matrix(three, BuildOptions{4, false}));
    const NodeRef r = c->root();
    ASSERT_EQ(ref_type(r), NodeType::coo4);
    const auto l = coo_layout(NodeType::coo4, 3, 8);
    c->pool.data()[ref_offset(r) + l.coord_offset + 6] = std::byte{1};
    expect_invalid(*c, "padding");
  }
}

// ---- COOW (wide) nodes ----------------------------------------------------

TEST(WideNodes, RoundTripAndCanonicalChoice) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  for (std::uint32_t d : node_sizes) {
    SCOPED_TRACE("d " + std::to_string(d));
    // Scattered entries: wide nodes pay off.
    const auto scattered = random_coo<double>(40000, 30000, 20000, rng);
    const auto wide = build_matrix(scattered, BuildOptions{d, true});
    const auto plain = build_matrix(scattered, BuildOptions{d, false});
    const PoolStats st = validate(wide.content());
    EXPECT_EQ(st.node_bytes + sizeof(PoolHeader), wide.pool_bytes());
    EXPECT_LE(wide.pool_bytes(), plain.pool_bytes());
    const auto a = to_coo(wide), b = to_coo(plain);
    EXPECT_EQ(a.row, b.row);
    EXPECT_EQ(a.col, b.col);
    EXPECT_EQ(a.val, b.val);
    if (d >= 16) {
      EXPECT_GT(st.coow, 0u);
    }
    // Full blocks stay dense where dense leaves are smaller (all but tiny d,
    // where a tie goes to COOW); never larger than without wide nodes.
    Coo<float> full{2 * d, 2 * d, {}, {}, {}};
    for (index_t r = 0; r < 2 * d; ++r)
      for (index_t c = 0; c < 2 * d; ++c) full.push(r, c, 1.0f);
    const auto fw = build_matrix(full, BuildOptions{d, true});
    if (d >= 16) {
      EXPECT_EQ(validate(fw.content()).coow, 0u);
    }
    EXPECT_LE(fw.pool_bytes(), build_matrix(full, BuildOptions{d, false}).pool_bytes());
    EXPECT_EQ(to_coo(fw).val, to_coo(build_matrix(full, BuildOptions{d, false})).val);
    // Empty and one-entry matrices.
    EXPECT_EQ(build_matrix(Coo<double>{100, 100, {}, {}, {}}, BuildOptions{d, true}).nnz(), 0u);
    const auto one = build_matrix(Coo<double>{1000, 1000, {999}, {0}, {2.0}}, BuildOptions{d, true});
    validate(one.content());
    EXPECT_EQ(to_coo(one).row, std::vector<index_t>{999});
  }
}

TEST(WideNodes, ValidatorEnforcesFlagLevelAndRule) {
  std::mt19937_64 rng(7);
  const auto scattered = random_coo<double>(5000, 5000, 3000, rng);
  const auto wide = build_matrix(scattered, BuildOptions{16, true});
  ASSERT_GT(validate(wide.content()).coow, 0u);
  {  // The same pool without the flag: COOW nodes are not allowed.
    auto c = copy_of(wide);
    header_of(*c).flags = 0;
    expect_invalid(*c, "without the wide-node flag");
  }
  {  // A standard pool claiming the flag breaks the canonical rule.
    auto c = copy_of(build_matrix(scattered, BuildOptions{16, false}));
    header_of(*c).flags = pool_flag_wide;
    expect_invalid(*c, "COOW node would take no more");
  }
  {  // Unknown flag bits.
    auto c = copy_of(wide);
    header_of(*c).flags = 0x80;
    expect_invalid(*c, "unknown flag bits");
  }
}

TEST(WideNodes, SurviveTheFileFormat) {
  std::mt19937_64 rng(11);
  const auto m = build_matrix(random_coo<float>(9000, 7000, 4000, rng), BuildOptions{32, true});
  const auto p = std::filesystem::temp_directory_path() / ("hisparse-wide-" + std::to_string(::getpid()) + ".hsp");
  save_hsp(p, m);
  const auto back = load_hsp<float>(p);
  std::filesystem::remove(p);
  ASSERT_EQ(back.pool_bytes(), m.pool_bytes());
  EXPECT_EQ(0, std::memcmp(back.content().pool.data(), m.content().pool.data(), m.pool_bytes()));
  EXPECT_GT(validate(back.content()).coow, 0u);
}

TEST(WideNodes, AreTheBuildersDefault) {
  EXPECT_TRUE(BuildOptions{}.wide_nodes);
  std::mt19937_64 rng(13);
  const auto scattered = random_coo<double>(40000, 30000, 20000, rng);
  for (std::uint32_t d : {16u, 128u}) {
    SCOPED_TRACE("d " + std::to_string(d));
    // The node-size overloads (coordinate list and CSR) take the default too.
    const auto by_default = build_matrix(scattered, d);
    const auto wide = build_matrix(scattered, BuildOptions{d, true});
    const auto from_csr = build_matrix(to_csr(wide), d);
    EXPECT_TRUE(by_default.content().header().flags & pool_flag_wide);
    EXPECT_GT(validate(by_default.content()).coow, 0u);
    for (const auto* m : {&wide, &from_csr}) {
      ASSERT_EQ(m->pool_bytes(), by_default.pool_bytes());
      EXPECT_EQ(0, std::memcmp(m->content().pool.data(), by_default.content().pool.data(), by_default.pool_bytes()));
    }
    // The opt-out builds the standard format: no COOW nodes, flag clear.
    const auto standard = build_matrix(scattered, BuildOptions{d, false});
    EXPECT_EQ(standard.content().header().flags & pool_flag_wide, 0);
    EXPECT_EQ(validate(standard.content()).coow, 0u);
    EXPECT_LT(by_default.pool_bytes(), standard.pool_bytes());
    EXPECT_EQ(to_coo(standard).val, to_coo(by_default).val);
  }
}
