// The generators against their documented shapes, counts and structure
// (docs/generators.md), the streaming Matrix Market writer, and the
// `hisparse gen` command line's exit codes.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include "hisparse/formats/builder.hpp"
#include "hisparse/formats/hsp_file.hpp"
#include "hisparse/formats/matrix_market.hpp"
#include "hisparse/formats/validate.hpp"
#include "hisparse/gen/generators.hpp"
#include "hisparse/gen/moved_pattern.hpp"
#include "support/test_seed.hpp"

namespace fs = std::filesystem;
using namespace hisparse;
using namespace hisparse::gen;

namespace {

using Entry = std::tuple<index_t, index_t, double>;

template <class V = double>
Coo<V> make(std::string_view spec) {
  return generate_coo<V>(parse_spec(spec));
}

std::string with_seed(std::string_view spec, std::uint64_t seed) {
  return std::string(spec) + (spec.find(':') == std::string_view::npos ? ":" : ",") + "seed=" + std::to_string(seed);
}

// Shape, count and index range: what every kind promises.
template <class V>
void expect_consistent(const Coo<V>& m, const Generator& g) {
  EXPECT_EQ(m.rows, g.rows());
  EXPECT_EQ(m.cols, g.cols());
  ASSERT_EQ(m.nnz(), g.nnz());
  ASSERT_EQ(m.row.size(), m.nnz());
  ASSERT_EQ(m.col.size(), m.nnz());
  for (std::size_t k = 0; k < m.nnz(); ++k) {
    ASSERT_LT(m.row[k], m.rows) << "entry " << k;
    ASSERT_LT(m.col[k], m.cols) << "entry " << k;
  }
}

template <class V>
std::map<std::pair<index_t, index_t>, double> summed(const Coo<V>& m) {
  std::map<std::pair<index_t, index_t>, double> out;
  for (std::size_t k = 0; k < m.nnz(); ++k) out[{m.row[k], m.col[k]}] += m.val[k];
  return out;
}

template <class V>
std::size_t distinct_positions(const Coo<V>& m) {
  return summed(m).size();
}

template <class V>
std::vector<std::size_t> row_counts(const Coo<V>& m) {
  std::vector<std::size_t> c(m.rows, 0);
  for (const index_t r : m.row) ++c[r];
  return c;
}

template <class V>
std::vector<std::size_t> col_counts(const Coo<V>& m) {
  std::vector<std::size_t> c(m.cols, 0);
  for (const index_t x : m.col) ++c[x];
  return c;
}

template <class V>
std::vector<double> row_sums(const Coo<V>& m) {
  std::vector<double> s(m.rows, 0.0);
  for (std::size_t k = 0; k < m.nnz(); ++k) s[m.row[k]] += m.val[k];
  return s;
}

template <class V>
bool same(const Coo<V>& a, const Coo<V>& b) {
  return a.rows == b.rows && a.cols == b.cols && a.row == b.row && a.col == b.col && a.val == b.val;
}

template <class V>
bool symmetric(const Coo<V>& m) {
  const auto s = summed(m);
  for (const auto& [pos, v] : s) {
    auto it = s.find({pos.second, pos.first});
    if (it == s.end() || it->second != v) return false;
  }
  return true;
}

template <class V>
bool row_major_order(const Coo<V>& m) {
  for (std::size_t k = 1; k < m.nnz(); ++k)
    if (m.row[k] < m.row[k - 1] || (m.row[k] == m.row[k - 1] && m.col[k] <= m.col[k - 1])) return false;
  return true;
}

// Random values are nonzero multiples of 1e-6 in [-1, 1].
template <class V>
void expect_random_values(const Coo<V>& m) {
  for (const V v : m.val) {
    ASSERT_NE(v, V(0));
    ASSERT_LE(std::abs(v), V(1));
    const double steps = double(v) * 1e6;
    ASSERT_NEAR(steps, std::round(steps), 1e6 * std::numeric_limits<V>::epsilon()) << v;
  }
}

const std::vector<std::string> random_kinds{
    "fem3d:n=4",           "rmat:scale=9,edge-factor=4",      "circuit:n=3000,lines=3,fill=0.2",
    "uniform:n=300,per-row=5", "banded:n=200,bandwidth=4",    "dense:n=30",
    "tall:n=400,cols=40",  "special:n=500,cluster=8,fill=0.6",
};

// ---- counts and shapes -------------------------------------------------------

TEST(Counts, EveryKindMatchesItsFormula) {
  struct Case {
    std::string spec;
    index_t rows, cols;
    std::uint64_t nnz;
  };
  const std::vector<Case> cases{
      {"laplace2d:n=7", 49, 49, 5 * 49 - 4 * 7},
      {"laplace2d:n=1", 1, 1, 1},
      {"stencil3d7:n=5", 125, 125, 7 * 125 - 6 * 25},
      {"stencil3d27:n=5", 125, 125, 13 * 13 * 13},
      {"stencil3d27:n=1", 1, 1, 1},
      {"fem3d:n=4", 192, 192, 9 * (7 * 64 - 6 * 16)},
      {"rmat:scale=9,edge-factor=4", 512, 512, 4 * 512},
      {"uniform:n=300,cols=70,per-row=5", 300, 70, 1500},
      {"banded:n=50,bandwidth=3", 50, 50, 50 * 7 - 3 * 4},
      {"banded:n=9,bandwidth=8", 9, 9, 81},
      {"dense:n=30", 30, 30, 900},
      {"tall:n=400,cols=40,per-row=4", 400, 40, 1600},
      {"tall:n=10,cols=5,per-row=5", 10, 5, 50},
      // q = 1000 / 16 = 62 full clusters of round(.5 * 256); the last has 8 rows.
      {"special:n=1000,cluster=16,fill=0.5", 1000, 1000, 62 * 128 + 64},
      {"special:n=64,cluster=8,fill=1", 64, 64, 8 * 64},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.spec);
    const Generator g(parse_spec(c.spec));
    EXPECT_EQ(g.rows(), c.rows);
    EXPECT_EQ(g.cols(), c.cols);
    EXPECT_EQ(g.nnz(), c.nnz);
    EXPECT_EQ(expected_nnz(parse_spec(c.spec)), c.nnz);
    expect_consistent(g.generate_coo<double>(), g);
  }
}

TEST(Counts, DefaultsGiveAboutOneMillionEntries) {
  for (const Kind k : all_kinds()) {
    if (k == Kind::kron) continue;
    GenSpec s;
    s.kind = k;
    const Generator g(s);
    SCOPED_TRACE(describe(s));
    EXPECT_GE(g.nnz(), 900'000u);
    EXPECT_LE(g.nnz(), 1'200'000u);
  }
}

TEST(Counts, BenchmarkFamiliesHaveTheirSizes) {
  EXPECT_EQ(expected_nnz(parse_spec("laplace2d:n=2048")), 5ull * 2048 * 2048 - 4 * 2048);
  EXPECT_EQ(Generator(parse_spec("laplace2d:n=2048")).rows(), 2048ull * 2048);
  EXPECT_EQ(expected_nnz(parse_spec("stencil3d27:n=72")), 214ull * 214 * 214);
  EXPECT_EQ(expected_nnz(parse_spec("rmat:scale=20")), 16ull << 20);
  const std::uint64_t circuit = expected_nnz(parse_spec("circuit:n=2000000"));
  EXPECT_GE(circuit, 9'000'000u);
  EXPECT_LE(circuit, 11'000'000u);
}

// ---- structure ---------------------------------------------------------------

TEST(Structure, Laplace2dIsTheFivePointStencil) {
  const index_t n = 9;
  const Coo<double> m = make("laplace2d:n=9");
  EXPECT_TRUE(symmetric(m));
  EXPECT_TRUE(row_major_order(m));
  EXPECT_EQ(distinct_positions(m), m.nnz());
  const auto sums = row_sums(m);
  const auto counts = row_counts(m);
  const auto s = summed(m);
  for (index_t i = 0; i < n; ++i)
    for (index_t j = 0; j < n; ++j) {
      const index_t r = i * n + j;
      EXPECT_EQ(s.at({r, r}), 4.0);
      const bool interior = i > 0 && j > 0 && i + 1 < n && j + 1 < n;
      if (interior) {
        EXPECT_EQ(counts[r], 5u) << r;
        EXPECT_EQ(sums[r], 0.0) << r;
        EXPECT_EQ(s.at({r, r + n}), -1.0);
        EXPECT_EQ(s.at({r, r - 1}), -1.0);
      } else {
        EXPECT_GT(sums[r], 0.0) << r;  // the Dirichlet boundary makes these rows dominant
      }
    }
}

TEST(Structure, Stencil3d7InteriorRowsSumToZero) {
  const index_t n = 5;
  const Coo<double> m = make("stencil3d7:n=5");
  EXPECT_TRUE(symmetric(m));
  EXPECT_TRUE(row_major_order(m));
  const auto counts = row_counts(m);
  const auto sums = row_sums(m);
  const index_t centre = (2 * n + 2) * n + 2;
  EXPECT_EQ(counts[centre], 7u);
  EXPECT_EQ(sums[centre], 0.0);
  EXPECT_EQ(counts[0], 4u);  // a corner: itself and three faces
}

TEST(Structure, Stencil27InteriorRowsHave27Entries) {
  const index_t n = 6;
  const Coo<double> m = make("stencil3d27:n=6");
  EXPECT_TRUE(symmetric(m));
  EXPECT_TRUE(row_major_order(m));
  const auto counts = row_counts(m);
  const auto sums = row_sums(m);
  std::size_t interior = 0;
  for (index_t z = 1; z + 1 < n; ++z)
    for (index_t y = 1; y + 1 < n; ++y)
      for (index_t x = 1; x + 1 < n; ++x) {
        const index_t r = (z * n + y) * n + x;
        EXPECT_EQ(counts[r], 27u) << r;
        EXPECT_EQ(sums[r], 0.0) << r;
        ++interior;
      }
  EXPECT_EQ(interior, 64u);
  EXPECT_EQ(counts[0], 8u);
  EXPECT_EQ(counts[n * n * n - 1], 8u);
}

TEST(Structure, Fem3dHasDenseThreeByThreeBlocksAndIsSymmetricDominant) {
  const std::uint64_t seed = hisparse::testing::fresh_seed();
  SCOPED_TRACE(hisparse::testing::seed_note(seed));
  const Coo<double> m = make(with_seed("fem3d:n=4", seed));
  EXPECT_TRUE(symmetric(m));
  EXPECT_TRUE(row_major_order(m));
  const auto s = summed(m);
  EXPECT_EQ(s.size(), m.nnz());
  for (const auto& [pos, v] : s) {
    const index_t br = pos.first / 3 * 3, bc = pos.second / 3 * 3;
    for (index_t a = 0; a < 3; ++a)
      for (index_t b = 0; b < 3; ++b) ASSERT_TRUE(s.count({br + a, bc + b})) << pos.first << "," << pos.second;
  }
  std::vector<double> off(m.rows, 0.0), diag(m.rows, 0.0);
  for (const auto& [pos, v] : s) {
    if (pos.first == pos.second) diag[pos.first] = v;
    else off[pos.first] += std::abs(v);
  }
  for (index_t r = 0; r < m.rows; ++r) EXPECT_GT(diag[r], off[r]) << r;
}

TEST(Structure, RmatDegreesAreSkewed) {
  const std::uint64_t seed = hisparse::testing::fresh_seed();
  SCOPED_TRACE(hisparse::testing::seed_note(seed));
  const index_t v = 1024;
  const Coo<double> plain = make(with_seed("rmat:scale=10,edge-factor=8,permute=0", seed));
  const Coo<double> relabelled = make(with_seed("rmat:scale=10,edge-factor=8", seed));
  ASSERT_EQ(plain.nnz(), 8 * v);
  expect_random_values(plain);
  const auto deg = row_counts(plain);
  const double mean = double(plain.nnz()) / double(v);
  EXPECT_GE(double(*std::max_element(deg.begin(), deg.end())), 10 * mean);
  // Without relabelling vertex 0 collects (a + b)^scale of all edges.
  EXPECT_EQ(std::max_element(deg.begin(), deg.end()) - deg.begin(), 0);
  // The first level puts a = 57% of the edges in the top-left quadrant.
  std::size_t top_left = 0;
  for (std::size_t k = 0; k < plain.nnz(); ++k) top_left += plain.row[k] < v / 2 && plain.col[k] < v / 2;
  EXPECT_NEAR(double(top_left) / double(plain.nnz()), 0.57, 0.03);
  // Relabelling is a permutation of the same edges: same degree multiset, values unchanged.
  auto a = deg, b = row_counts(relabelled);
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  EXPECT_EQ(a, b);
  auto ca = col_counts(plain), cb = col_counts(relabelled);
  std::sort(ca.begin(), ca.end());
  std::sort(cb.begin(), cb.end());
  EXPECT_EQ(ca, cb);
  EXPECT_EQ(plain.val, relabelled.val);
  EXPECT_NE(plain.row, relabelled.row);
}

// The builder's default (wide nodes allowed, docs/format.md) stores an R-MAT
// graph in no more bytes than CSR with 32-bit indices; the opt-out builds the
// standard format (no COOW nodes, flag clear), never smaller. At scale 16 the
// entries are scattered enough that the standard format is larger than CSR and
// the COOW nodes are what bring the default below it (at scale 14 the root is
// the level of COOW candidates, and one node for all entries would be larger).
template <class V>
void expect_rmat_default_within_csr(std::uint64_t scale) {
  SCOPED_TRACE("rmat scale " + std::to_string(scale) + (sizeof(V) == 4 ? " f32" : " f64"));
  const Coo<V> coo = make<V>("rmat:scale=" + std::to_string(scale));
  const Matrix<V> m = build_matrix(coo);
  const Matrix<V> standard = build_matrix(coo, BuildOptions{default_node_size, false});
  ASSERT_EQ(m.nnz(), standard.nnz());
  const std::uint64_t csr_bytes = 4 * (m.rows() + 1) + (4 + sizeof(V)) * m.nnz();
  EXPECT_LE(m.pool_bytes(), csr_bytes);
  EXPECT_LE(m.pool_bytes(), standard.pool_bytes());
  EXPECT_TRUE(m.content().header().flags & pool_flag_wide);
  EXPECT_EQ(standard.content().header().flags & pool_flag_wide, 0);
  EXPECT_EQ(validate(standard.content()).coow, 0u);
  if (scale >= 16) {
    EXPECT_GT(validate(m.content()).coow, 0u);
    EXPECT_GT(standard.pool_bytes(), csr_bytes);
  }
}

TEST(Structure, RmatBuildsWithinCsrBytesByDefault) {
  for (const std::uint64_t scale : {14u, 15u, 16u}) {
    expect_rmat_default_within_csr<float>(scale);
    expect_rmat_default_within_csr<double>(scale);
  }
}

TEST(Structure, CircuitHasABandAndAFewVeryLongLines) {
  const std::uint64_t seed = hisparse::testing::fresh_seed();
  SCOPED_TRACE(hisparse::testing::seed_note(seed));
  const index_t n = 4000, lines = 3, band = 2;
  const double fill = 0.2;
  const std::string spec = with_seed("circuit:n=4000,bandwidth=2,lines=3,fill=0.2", seed);
  const Generator g(parse_spec(spec));
  const Coo<double> m = g.generate_coo<double>();
  expect_consistent(m, g);
  expect_random_values(m);
  EXPECT_TRUE(row_major_order(m));  // also: no duplicates
  const auto s = summed(m);
  for (index_t r = 0; r < n; ++r)
    for (index_t c = r > band ? r - band : 0; c <= std::min(n - 1, r + band); ++c) ASSERT_TRUE(s.count({r, c}));
  // The documented range: band + 2 * lines * m, less what falls on the band
  // or on another line.
  const std::uint64_t m_line = 800, band_nnz = n * (2 * band + 1) - band * (band + 1);
  EXPECT_LE(g.nnz(), band_nnz + 2 * lines * m_line);
  EXPECT_GE(g.nnz(), band_nnz + lines * (2 * m_line - 2 * (2 * band + 1) - lines));
  const auto rc = row_counts(m), cc = col_counts(m);
  const auto long_lines = [&](const std::vector<std::size_t>& c) {
    return std::count_if(c.begin(), c.end(), [&](std::size_t k) { return double(k) >= 0.1 * double(n); });
  };
  EXPECT_EQ(long_lines(rc), 3);
  EXPECT_EQ(long_lines(cc), 3);
  const auto max_row = *std::max_element(rc.begin(), rc.end());
  EXPECT_GE(double(max_row), fill * double(n) - 2 * band - 1);
  // Everything else is short: the band plus at most one entry per dense column.
  std::size_t short_max = 0;
  for (const std::size_t k : rc)
    if (double(k) < 0.1 * double(n)) short_max = std::max(short_max, k);
  EXPECT_LE(short_max, 2 * band + 1 + lines);
}

TEST(Structure, CircuitWithoutLinesIsItsBand) {
  const Coo<double> m = make("circuit:n=100,bandwidth=3,lines=0");
  EXPECT_EQ(m.nnz(), 100u * 7 - 12);
  for (std::size_t k = 0; k < m.nnz(); ++k)
    EXPECT_LE(m.row[k] > m.col[k] ? m.row[k] - m.col[k] : m.col[k] - m.row[k], 3u);
}

TEST(Structure, CircuitFullLinesCoverTheirRowsAndColumns) {
  const Coo<double> m = make("circuit:n=50,bandwidth=1,lines=2,fill=1");
  const auto rc = row_counts(m), cc = col_counts(m);
  // Lines sit at floor((2i+1) n / (2 lines)): 12 and 37.
  EXPECT_EQ(rc[12], 50u);
  EXPECT_EQ(rc[37], 50u);
  EXPECT_EQ(cc[12], 50u);
  EXPECT_EQ(cc[37], 50u);
  EXPECT_EQ(distinct_positions(m), m.nnz());
}

TEST(Structure, UniformPositionsSpreadEvenly) {
  const std::uint64_t seed = hisparse::testing::fresh_seed();
  SCOPED_TRACE(hisparse::testing::seed_note(seed));
  const Coo<double> m = make(with_seed("uniform:n=2000,cols=1000,per-row=10", seed));
  ASSERT_EQ(m.nnz(), 20000u);
  expect_random_values(m);
  std::array<std::size_t, 4> row_q{}, col_q{};
  for (std::size_t k = 0; k < m.nnz(); ++k) {
    ++row_q[m.row[k] * 4 / 2000];
    ++col_q[m.col[k] * 4 / 1000];
  }
  for (int q = 0; q < 4; ++q) {  // 5000 expected, standard deviation about 61
    EXPECT_NEAR(double(row_q[q]), 5000.0, 400.0);
    EXPECT_NEAR(double(col_q[q]), 5000.0, 400.0);
  }
}

TEST(Structure, BandedFillsExactlyItsBand) {
  const Coo<double> m = make("banded:n=60,bandwidth=4");
  EXPECT_TRUE(row_major_order(m));
  expect_random_values(m);
  for (std::size_t k = 0; k < m.nnz(); ++k)
    EXPECT_LE(m.row[k] > m.col[k] ? m.row[k] - m.col[k] : m.col[k] - m.row[k], 4u);
  EXPECT_EQ(m.nnz(), 60u * 9 - 20);  // with no duplicates, every band cell is there
}

TEST(Structure, DenseHoldsEveryEntry) {
  const Coo<float> m = make<float>("dense:n=25");
  EXPECT_EQ(distinct_positions(m), 625u);
  EXPECT_TRUE(row_major_order(m));
  expect_random_values(m);
}

TEST(Structure, TallRowsHoldDistinctColumns) {
  const std::uint64_t seed = hisparse::testing::fresh_seed();
  SCOPED_TRACE(hisparse::testing::seed_note(seed));
  const Coo<double> m = make(with_seed("tall:n=3000,cols=60,per-row=5", seed));
  EXPECT_TRUE(row_major_order(m));  // strictly increasing columns: distinct
  for (const std::size_t k : row_counts(m)) ASSERT_EQ(k, 5u);
  const auto cc = col_counts(m);
  EXPECT_EQ(std::count(cc.begin(), cc.end(), 0u), 0);  // 250 expected per column
  const Generator d(parse_spec("tall"));
  EXPECT_GE(d.rows(), 20 * d.cols());
}

TEST(Structure, SpecialClustersStayNearTheDiagonal) {
  const std::uint64_t seed = hisparse::testing::fresh_seed();
  SCOPED_TRACE(hisparse::testing::seed_note(seed));
  const index_t side = 8, spread = 20;
  const Coo<double> m = make(with_seed("special:n=1000,cluster=8,fill=0.6,spread=20", seed));
  EXPECT_TRUE(row_major_order(m));
  expect_random_values(m);
  std::map<index_t, std::pair<index_t, index_t>> col_range;  // per cluster
  std::map<index_t, std::size_t> per_cluster;
  for (std::size_t k = 0; k < m.nnz(); ++k) {
    const index_t r = m.row[k], c = m.col[k], cl = r / side;
    ASSERT_LE(c + spread, r / side * side + side - 1 + 2 * spread) << r << "," << c;
    ASSERT_LE(r / side * side, c + spread) << r << "," << c;
    auto [it, fresh] = col_range.try_emplace(cl, c, c);
    it->second.first = std::min(it->second.first, c);
    it->second.second = std::max(it->second.second, c);
    ++per_cluster[cl];
  }
  EXPECT_EQ(per_cluster.size(), 125u);
  for (const auto& [cl, range] : col_range) EXPECT_LT(range.second - range.first, side) << cl;
  for (const auto& [cl, count] : per_cluster) EXPECT_EQ(count, 38u) << cl;  // round(0.6 * 64)
}

// ---- kron --------------------------------------------------------------------

class TempDir : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("hisparse-gen-test-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

using Kron = TempDir;

TEST_F(Kron, TwoByTwoWithItselfIsTheKnownFourByFour) {
  Coo<double> a;
  a.rows = a.cols = 2;
  a.push(0, 0, 1);
  a.push(0, 1, 2);
  a.push(1, 0, 3);
  a.push(1, 1, 4);
  write_matrix_market(dir_ / "a.mtx", a);
  const Coo<double> k = make("kron:input=" + (dir_ / "a.mtx").string());
  ASSERT_EQ(k.rows, 4u);
  ASSERT_EQ(k.cols, 4u);
  ASSERT_EQ(k.nnz(), 16u);
  const double want[4][4] = {{1, 2, 2, 4}, {3, 4, 6, 8}, {3, 6, 4, 8}, {9, 12, 12, 16}};
  const auto s = summed(k);
  for (index_t i = 0; i < 4; ++i)
    for (index_t j = 0; j < 4; ++j) EXPECT_EQ(s.at({i, j}), want[i][j]) << i << "," << j;
}

TEST_F(Kron, RectangularSparseInput) {
  Coo<double> a;  // 2 x 3 with entries (0,2)=5 and (1,0)=-1
  a.rows = 2;
  a.cols = 3;
  a.push(0, 2, 5);
  a.push(1, 0, -1);
  write_matrix_market(dir_ / "a.mtx", a);
  const Generator g(parse_spec("kron:input=" + (dir_ / "a.mtx").string()));
  EXPECT_EQ(g.rows(), 4u);
  EXPECT_EQ(g.cols(), 9u);
  const Coo<double> k = g.generate_coo<double>();
  expect_consistent(k, g);
  const auto s = summed(k);
  const std::map<std::pair<index_t, index_t>, double> want{
      {{0, 8}, 25}, {{1, 6}, -5}, {{2, 2}, -5}, {{3, 0}, 1}};
  EXPECT_EQ(s, want);
}

TEST_F(Kron, MissingInputIsAnErrorNamingTheFile) {
  const std::string missing = (dir_ / "none.mtx").string();
  try {
    Generator g(parse_spec("kron:input=" + missing));
    FAIL() << "no error";
  } catch (const SpecError&) {
    FAIL() << "a missing file is not a usage error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("none.mtx"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Generator(parse_spec("kron")), SpecError);
}

// ---- determinism ---------------------------------------------------------------

TEST(Determinism, SameSeedSameMatrixOtherSeedOtherMatrix) {
  const std::uint64_t seed = hisparse::testing::fresh_seed();
  SCOPED_TRACE(hisparse::testing::seed_note(seed));
  for (const std::string& spec : random_kinds) {
    SCOPED_TRACE(spec);
    const Coo<double> a = make(with_seed(spec, seed));
    const Coo<double> b = make(with_seed(spec, seed));
    const Coo<double> c = make(with_seed(spec, seed + 1));
    EXPECT_TRUE(same(a, b));
    EXPECT_FALSE(same(a, c));
    EXPECT_EQ(a.nnz(), Generator(parse_spec(with_seed(spec, seed))).nnz());
    // Only circuit's count depends on the seed (dense-line cells that land on the band).
    if (!spec.starts_with("circuit")) {
      EXPECT_EQ(Generator(parse_spec(with_seed(spec, seed))).nnz(), Generator(parse_spec(with_seed(spec, seed + 1))).nnz());
    }
  }
}

TEST(Determinism, DefaultSeedIsFixed) {
  EXPECT_TRUE(same(make("rmat:scale=8"), make("rmat:scale=8,seed=1")));
  EXPECT_EQ(describe(parse_spec("rmat")), "rmat:scale=16,edge-factor=16,permute=1,seed=1");
}

TEST(Determinism, ValuesDoNotDependOnPrecision) {
  for (const std::string& spec : random_kinds) {
    SCOPED_TRACE(spec);
    const Coo<double> d = make<double>(spec);
    const Coo<float> f = make<float>(spec);
    ASSERT_EQ(d.row, f.row);
    ASSERT_EQ(d.col, f.col);
    for (std::size_t k = 0; k < d.nnz(); ++k) ASSERT_NEAR(d.val[k], f.val[k], 1e-6 * std::max(1.0, std::abs(d.val[k])));
  }
}

TEST(Determinism, ChunksAreBoundedAndConcatenateToTheMatrix) {
  // 300000 entries: more than one chunk, and several rmat draw blocks.
  const Generator g(parse_spec("uniform:n=100000,per-row=3,seed=5"));
  std::size_t chunks = 0, total = 0;
  Coo<double> joined;
  g.generate<double>([&](std::span<const index_t> r, std::span<const index_t> c, std::span<const double> v) {
    ASSERT_EQ(r.size(), c.size());
    ASSERT_EQ(r.size(), v.size());
    ASSERT_LE(r.size(), Generator::chunk_entries);
    ASSERT_GT(r.size(), 0u);
    ++chunks;
    total += r.size();
    joined.row.insert(joined.row.end(), r.begin(), r.end());
  });
  EXPECT_EQ(total, 300000u);
  EXPECT_GE(chunks, 2u);
  EXPECT_EQ(joined.row, g.generate_coo<double>().row);
}

// ---- spec parsing --------------------------------------------------------------

TEST(Spec, DescribeRoundTripsThroughParse) {
  for (const Kind k : all_kinds()) {
    if (k == Kind::kron) continue;
    GenSpec s;
    s.kind = k;
    s.seed = 42;
    const std::string text = describe(s);
    SCOPED_TRACE(text);
    EXPECT_EQ(text.substr(0, text.find(':')), kind_name(k));
    EXPECT_EQ(describe(parse_spec(text)), text);
    EXPECT_EQ(parse_kind(kind_name(k)), k);
    EXPECT_EQ(text.find("seed=42") != std::string::npos, kind_uses_seed(k));
  }
  EXPECT_EQ(describe(parse_spec("tall:n=1000")), "tall:n=1000,cols=50,per-row=4,seed=1");
  EXPECT_EQ(describe(parse_spec("laplace2d:n=5,seed=9")), "laplace2d:n=5");
}

TEST(Spec, BadSpecsAreSpecErrors) {
  const std::vector<std::string> bad{
      "laplace",                        // unknown kind
      "",                               // no kind
      "laplace2d:scale=3",              // foreign parameter
      "laplace2d:bogus=3",              // unknown parameter
      "laplace2d:n=abc",                // not a number
      "laplace2d:n=-4",                 // negative
      "laplace2d:n=0",                  // empty
      "laplace2d:n",                    // no value
      "laplace2d:n=33554432",           // 2^50 rows: over the limit
      "dense:n=2000000",                // 4e12 entries: over the limit
      "stencil3d27:n=18446744073709551615",  // overflow
      "rmat:scale=0",                   // out of range
      "rmat:scale=60",
      "rmat:permute=2",
      "circuit:fill=0",
      "circuit:fill=1.5",
      "circuit:n=10,bandwidth=10",
      "circuit:n=10,lines=11",
      "banded:n=10,bandwidth=10",
      "tall:cols=3,per-row=4",
      "uniform:per-row=0",
      "special:n=10,cluster=11",
      "special:fill=nan",
      "rmat:seed=x",
  };
  for (const std::string& spec : bad) {
    SCOPED_TRACE(spec);
    EXPECT_THROW(Generator(parse_spec(spec)), SpecError);
  }
  EXPECT_NO_THROW(Generator(parse_spec("circuit:n=10,lines=10,fill=0.5")));
}

// ---- streaming Matrix Market -------------------------------------------------------

using Stream = TempDir;

TEST_F(Stream, MtxReadsBackAsTheInMemoryMatrix) {
  for (const std::string spec : {"rmat:scale=12,seed=3", "uniform:n=100000,per-row=3", "laplace2d:n=40",
                                 "fem3d:n=5", "circuit:n=5000,lines=2"}) {
    SCOPED_TRACE(spec);
    const Generator g(parse_spec(spec));
    const fs::path file = dir_ / "m.mtx";
    write_matrix_market<double>(g, file);
    const MmHeader h = read_matrix_market_header(file);
    EXPECT_EQ(h.entries, g.nnz());
    EXPECT_EQ(h.rows, g.rows());
    EXPECT_EQ(h.cols, g.cols());
    const Coo<double> back = read_matrix_market<double>(file);
    EXPECT_TRUE(same(back, g.generate_coo<double>()));  // shortest text reads back to the same bits

    write_matrix_market<float>(g, file);
    EXPECT_TRUE(same(read_matrix_market<float>(file), g.generate_coo<float>()));
  }
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);  // no temporaries left
}

TEST_F(Stream, MtxCommentNamesTheSpec) {
  const fs::path file = dir_ / "m.mtx";
  write_matrix_market<double>(Generator(parse_spec("banded:n=10,bandwidth=2")), file);
  std::ifstream in(file);
  std::string banner, comment;
  std::getline(in, banner);
  std::getline(in, comment);
  EXPECT_EQ(banner, "%%MatrixMarket matrix coordinate real general");
  EXPECT_EQ(comment, "% generated by hisparse gen banded:n=10,bandwidth=2,seed=1");
}

TEST_F(Stream, FailedWriteLeavesNothing) {
  const fs::path file = dir_ / "missing-dir" / "m.mtx";
  EXPECT_THROW(write_matrix_market<double>(Generator(parse_spec("laplace2d:n=4")), file), Error);
  EXPECT_FALSE(fs::exists(file));
}

// ---- the command line ----------------------------------------------------------------

struct CliResult {
  int code = -1;
  std::string out;
};

std::string quote(const std::string& s) {
  std::string q = "'";
  for (const char c : s) {
    if (c == '\'') q += "'\\''";
    else q += c;
  }
  q += '\'';
  return q;
}

CliResult hisparse_cli(const std::vector<std::string>& args) {
  const char* exe = std::getenv("HISPARSE_EXE");
  if (!exe || !fs::exists(exe)) {
    ADD_FAILURE() << "HISPARSE_EXE must name the built hisparse executable (meson test sets it)";
    return {};
  }
  std::string cmd = quote(exe);
  for (const std::string& a : args) {
    cmd += ' ';
    cmd += quote(a);
  }
  cmd += " 2>&1";
  CliResult r;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) {
    ADD_FAILURE() << "cannot run " << cmd;
    return r;
  }
  char buf[4096];
  std::size_t got;
  while ((got = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, got);
  const int status = ::pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string slurp(const fs::path& f) {
  std::ifstream in(f, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

using Cli = TempDir;

TEST_F(Cli, HelpListsEveryKindWithItsOptions) {
  const CliResult r = hisparse_cli({"gen", "--help"});
  EXPECT_EQ(r.code, 0);
  for (const Kind k : all_kinds()) {
    EXPECT_NE(r.out.find("  " + std::string(kind_name(k)) + " "), std::string::npos) << kind_name(k);
    for (const std::string_view p : kind_params(k))
      EXPECT_NE(r.out.find("--" + std::string(p)), std::string::npos) << p;
  }
}

TEST_F(Cli, UsageErrorsExitWith2AndWriteNothing) {
  const std::string out = (dir_ / "m.mtx").string();
  const std::vector<std::vector<std::string>> cases{
      {"gen", "nosuchkind", out},
      {"gen", "laplace2d", out, "--scale", "3"},
      {"gen", "laplace2d", out, "--n", "abc"},
      {"gen", "laplace2d", out, "--n", "0"},
      {"gen", "laplace2d", out, "--bogus", "1"},
      {"gen", "laplace2d", (dir_ / "m.txt").string()},
      {"gen", "laplace2d", out, "--node-size", "64"},
      {"gen", "laplace2d", (dir_ / "m.hsp").string(), "--node-size", "3"},
      {"gen", "laplace2d", out, "--precision", "f16"},
      {"gen", "rmat", out, "--scale", "99"},
      {"gen", "kron", out},
      {"gen", "laplace2d"},
  };
  for (const auto& args : cases) {
    const CliResult r = hisparse_cli(args);
    std::string line;
    for (const auto& a : args) line += a + " ";
    EXPECT_EQ(r.code, 2) << line << "\n" << r.out;
    EXPECT_FALSE(r.out.empty()) << line;
  }
  EXPECT_TRUE(fs::is_empty(dir_));
}

TEST_F(Cli, UnreadableKronInputExitsWith1) {
  const CliResult r = hisparse_cli({"gen", "kron", (dir_ / "k.mtx").string(), "--input", (dir_ / "absent.mtx").string()});
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("absent.mtx"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::is_empty(dir_));
}

TEST_F(Cli, WritesMtxAndHsp) {
  const fs::path mtx = dir_ / "l.mtx";
  CliResult r = hisparse_cli({"gen", "laplace2d", mtx.string(), "--n", "10"});
  ASSERT_EQ(r.code, 0) << r.out;
  const Coo<double> m = read_matrix_market<double>(mtx);
  EXPECT_EQ(m.rows, 100u);
  EXPECT_EQ(m.nnz(), 5u * 100 - 40);

  const fs::path hsp = dir_ / "r.hsp";
  r = hisparse_cli({"gen", "rmat", hsp.string(), "--scale", "8", "--edge-factor", "4", "--precision", "f32",
                    "--node-size", "16"});
  ASSERT_EQ(r.code, 0) << r.out;
  const HspInfo info = read_hsp_info(hsp);
  EXPECT_EQ(info.value_type, ValueType::f32);
  const Matrix<float> a = load_hsp<float>(hsp);
  EXPECT_EQ(a.rows(), 256u);
  EXPECT_EQ(a.node_size(), 16u);
  // Duplicate edges are summed by the builder.
  EXPECT_EQ(a.nnz(), distinct_positions(make<float>("rmat:scale=8,edge-factor=4")));
}

TEST_F(Cli, SeedPicksTheMatrix) {
  const fs::path a = dir_ / "a.mtx", b = dir_ / "b.mtx", c = dir_ / "c.mtx";
  ASSERT_EQ(hisparse_cli({"gen", "special", a.string(), "--n", "300"}).code, 0);
  ASSERT_EQ(hisparse_cli({"gen", "special", b.string(), "--n", "300", "--seed", "1"}).code, 0);
  ASSERT_EQ(hisparse_cli({"gen", "special", c.string(), "--n", "300", "--seed", "2"}).code, 0);
  EXPECT_EQ(slurp(a), slurp(b));
  EXPECT_NE(slurp(a), slurp(c));
}

}  // namespace

// The add benchmarks' second operand: every entry moved a little, none lost,
// all inside the matrix, the same list for the same seed.
TEST(MovedPattern, KeepsEntriesInsideAndNear) {
  const auto seed = hisparse::testing::fresh_seed();
  SCOPED_TRACE(hisparse::testing::seed_note(seed));
  const auto a = hisparse::gen::generate_coo<double>(hisparse::gen::parse_spec("laplace2d:n=60"));
  const auto b = hisparse::gen::moved_pattern(a, 3.0, seed);
  ASSERT_EQ(b.nnz(), a.nnz());
  EXPECT_EQ(b.rows, a.rows);
  EXPECT_EQ(b.cols, a.cols);
  std::size_t moved = 0, far = 0;
  for (std::size_t i = 0; i < a.nnz(); ++i) {
    ASSERT_LT(b.row[i], a.rows);
    ASSERT_LT(b.col[i], a.cols);
    EXPECT_EQ(b.val[i], a.val[i]);
    moved += b.row[i] != a.row[i] || b.col[i] != a.col[i];
    const double dr = double(b.row[i]) - double(a.row[i]), dc = double(b.col[i]) - double(a.col[i]);
    far += std::abs(dr) > 6 * 3.0 || std::abs(dc) > 6 * 3.0;
  }
  EXPECT_GT(moved, a.nnz() / 2);  // sigma 3: most entries leave their cell
  EXPECT_EQ(far, 0u);             // six sigma: none should
  const auto again = hisparse::gen::moved_pattern(a, 3.0, seed);
  EXPECT_EQ(again.row, b.row);
  EXPECT_EQ(again.col, b.col);
}
