// Matrix Market reader and writer: the SuiteSparse files against a naive
// reference parser, bit-exact round trips, every malformed-input error with
// its file and line, symmetric expansion, hostile inputs (FIFOs, endless
// lines, headers that promise more than the file holds, escape sequences),
// and a throughput measurement.
#include "hisparse/formats/matrix_market.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <complex>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hisparse/formats/error.hpp"

namespace hisparse {
namespace {

namespace fs = std::filesystem;
using cd = std::complex<double>;
using cf = std::complex<float>;

// One directory per test, removed afterwards, so parallel runs (ctest -j,
// several checkouts) never share files.
class ScratchDir {
 public:
  ScratchDir() {
    std::random_device rd;
    path_ = fs::temp_directory_path() /
            ("hisparse-mm-" + std::to_string(::getpid()) + "-" + std::to_string(rd()));
    fs::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  [[nodiscard]] const fs::path& path() const { return path_; }

  fs::path write(std::string_view name, std::string_view content) const {
    const fs::path file = path_ / name;
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    out.close();
    EXPECT_TRUE(out.good()) << "cannot write test input " << file;
    return file;
  }

 private:
  fs::path path_;
};

// The error's text, or a test failure when the call does not throw.
template <class F>
std::string error_of(F&& call) {
  try {
    call();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected hisparse::Error, nothing was thrown";
  return {};
}

bool contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

std::string at(const fs::path& file, std::uint64_t line) {
  return file.string() + ":" + std::to_string(line) + ": ";
}

// Bit equality: the round trip promise is about bits, and -0 == 0 or
// NaN != NaN would hide or invent differences.
template <class V>
bool same_bits(const V& a, const V& b) {
  return std::memcmp(&a, &b, sizeof(V)) == 0;
}

class MatrixMarketTest : public ::testing::Test {
 protected:
  // Writes content to NAME.mtx (NAME from the test), reads it with read,
  // and checks the message names the file, the line and the problem.
  template <class Read>
  void expect_error(std::string_view content, std::uint64_t line, std::string_view problem,
                    Read read) {
    const fs::path file = dir_.write(test_name() + ".mtx", content);
    const std::string msg = error_of([&] { read(file); });
    EXPECT_TRUE(contains(msg, at(file, line))) << "expected line " << line << " in: " << msg;
    EXPECT_TRUE(contains(msg, problem)) << "expected '" << problem << "' in: " << msg;
  }
  void expect_error(std::string_view content, std::uint64_t line, std::string_view problem) {
    expect_error(content, line, problem,
                 [](const fs::path& f) { (void)read_matrix_market<double>(f); });
  }

  static std::string test_name() {
    return ::testing::UnitTest::GetInstance()->current_test_info()->name();
  }

  ScratchDir dir_;
};

constexpr std::string_view real_general = "%%MatrixMarket matrix coordinate real general\n";

// ---------------------------------------------------------------------------
// SuiteSparse files

struct SuiteSparseFile {
  const char* name;
  index_t rows;
  index_t cols;
  std::uint64_t stored;
  MmField field;
  MmSymmetry symmetry;
  // Where the reader must reject the file, for files that are not valid
  // Matrix Market despite their banner.
  std::uint64_t bad_line = 0;
  const char* problem = "";
};

// From /work/shared/matrices/README.md. block_2000 ("unverified origin") is
// 0-based: its indices run 0..1999 and 12 entries have column 0, the first on
// line 54, so it is malformed and must be rejected, not shifted silently.
constexpr SuiteSparseFile suitesparse_files[] = {
    {"Franz6_id1959_aug", 10592, 3016, 48472, MmField::integer, MmSymmetry::general},
    {"G51", 1000, 1000, 5909, MmField::pattern, MmSymmetry::symmetric},
    {"add32", 4960, 4960, 23884, MmField::real, MmSymmetry::general},
    {"adder_dcop_05", 1813, 1813, 11097, MmField::real, MmSymmetry::general},
    {"bcspwr10", 5300, 5300, 13571, MmField::pattern, MmSymmetry::symmetric},
    {"bcsstk13", 2003, 2003, 42943, MmField::real, MmSymmetry::symmetric},
    {"block_2000", 2000, 2000, 9912, MmField::real, MmSymmetry::symmetric, 54,
     "column index 0 out of range [1, 2000]"},
    {"ca-GrQc", 5242, 5242, 14496, MmField::pattern, MmSymmetry::symmetric},
    {"cage8", 1015, 1015, 11003, MmField::real, MmSymmetry::general},
    {"crack", 10240, 10240, 30380, MmField::pattern, MmSymmetry::symmetric},
    {"cryg2500", 2500, 2500, 12349, MmField::real, MmSymmetry::general},
    {"dwt_1005", 1005, 1005, 4813, MmField::pattern, MmSymmetry::symmetric},
    {"fe_4elt2", 11143, 11143, 32818, MmField::pattern, MmSymmetry::symmetric},
    {"fidapex6", 1651, 1651, 49533, MmField::real, MmSymmetry::general},
    {"hangGlider_2", 1647, 1647, 7834, MmField::real, MmSymmetry::symmetric},
    {"jazz", 198, 198, 2742, MmField::integer, MmSymmetry::symmetric},
    {"lp_e226", 223, 472, 2768, MmField::real, MmSymmetry::general},
    {"lp_ship04l", 402, 2166, 6380, MmField::real, MmSymmetry::general},
    {"rajat01", 6833, 6833, 43250, MmField::pattern, MmSymmetry::general},
    {"rajat19", 1157, 1157, 5399, MmField::real, MmSymmetry::general},
    {"watt_2", 1856, 1856, 11550, MmField::real, MmSymmetry::general},
    {"young1c", 841, 841, 4089, MmField::complex, MmSymmetry::general},
};

fs::path matrices_dir() {
  if (const char* env = std::getenv("HISPARSE_MATRICES_DIR")) return env;
  return fs::path(HISPARSE_MATRICES_DIR);
}

// Deliberately the slow obvious way (streams, strtod), sharing no code with
// the reader under test, so the two can only agree by both being right.
Coo<cd> reference_read(const fs::path& file) {
  std::ifstream in(file);
  std::string line;
  std::getline(in, line);
  std::string banner, object, format, field, symmetry;
  std::istringstream(line) >> banner >> object >> format >> field >> symmetry;
  std::transform(field.begin(), field.end(), field.begin(), ::tolower);
  std::transform(symmetry.begin(), symmetry.end(), symmetry.begin(), ::tolower);
  while (std::getline(in, line) && (line.empty() || line[0] == '%')) {
  }
  Coo<cd> m;
  std::uint64_t entries = 0;
  std::istringstream(line) >> m.rows >> m.cols >> entries;
  for (std::uint64_t k = 0; k < entries && std::getline(in, line);) {
    if (line.empty() || line[0] == '%') continue;
    ++k;
    std::istringstream s(line);
    index_t r = 0, c = 0;
    std::string re, im;
    s >> r >> c >> re >> im;
    const double x = field == "pattern" ? 1.0 : std::strtod(re.c_str(), nullptr);
    const double y = field == "complex" ? std::strtod(im.c_str(), nullptr) : 0.0;
    m.push(r - 1, c - 1, cd(x, y));
    if (r != c && symmetry == "symmetric") m.push(c - 1, r - 1, cd(x, y));
    if (r != c && symmetry == "skew-symmetric") m.push(c - 1, r - 1, cd(-x, -y));
    if (r != c && symmetry == "hermitian") m.push(c - 1, r - 1, cd(x, -y));
  }
  return m;
}

class MatrixMarketSuiteSparse : public ::testing::TestWithParam<SuiteSparseFile> {};

template <class V>
void check_against_reference(const SuiteSparseFile& info, const Coo<V>& m,
                             const Coo<cd>& ref) {
  ASSERT_EQ(m.rows, info.rows);
  ASSERT_EQ(m.cols, info.cols);
  const auto off_diagonal = static_cast<std::uint64_t>(std::count_if(
      m.row.begin(), m.row.end(),
      [&, k = std::size_t{0}](index_t r) mutable { return r != m.col[k++]; }));
  if (info.symmetry == MmSymmetry::general) {
    EXPECT_EQ(m.nnz(), info.stored);
  } else {
    // Each stored off-diagonal entry gained a mirror, itself off-diagonal.
    EXPECT_EQ(off_diagonal % 2, 0u);
    EXPECT_EQ(m.nnz(), info.stored + off_diagonal / 2);
  }
  ASSERT_EQ(m.nnz(), ref.nnz());
  for (std::size_t k = 0; k < m.nnz(); ++k) {
    ASSERT_EQ(m.row[k], ref.row[k]) << "entry " << k;
    ASSERT_EQ(m.col[k], ref.col[k]) << "entry " << k;
    if constexpr (is_complex_v<V>) {
      ASSERT_TRUE(same_bits(m.val[k], ref.val[k])) << "entry " << k;
    } else {
      ASSERT_TRUE(same_bits(m.val[k], ref.val[k].real())) << "entry " << k;
    }
  }
}

TEST_P(MatrixMarketSuiteSparse, MatchesReadmeAndReference) {
  const SuiteSparseFile& info = GetParam();
  const fs::path file = matrices_dir() / (std::string(info.name) + ".mtx");
  ASSERT_TRUE(fs::exists(file)) << file;

  const MmHeader h = read_matrix_market_header(file);
  EXPECT_EQ(h.format, MmFormat::coordinate);
  EXPECT_EQ(h.field, info.field);
  EXPECT_EQ(h.symmetry, info.symmetry);
  EXPECT_EQ(h.rows, info.rows);
  EXPECT_EQ(h.cols, info.cols);
  EXPECT_EQ(h.entries, info.stored);

  if (info.bad_line != 0) {
    for (const std::string& msg : {error_of([&] { (void)read_matrix_market<double>(file); }),
                                   error_of([&] { (void)read_matrix_market<cd>(file); })}) {
      EXPECT_TRUE(contains(msg, at(file, info.bad_line))) << msg;
      EXPECT_TRUE(contains(msg, info.problem)) << msg;
    }
    return;
  }

  const Coo<cd> ref = reference_read(file);
  check_against_reference(info, read_matrix_market<cd>(file), ref);
  if (info.field == MmField::complex) {
    const std::string msg = error_of([&] { (void)read_matrix_market<double>(file); });
    EXPECT_TRUE(contains(msg, at(file, 1))) << msg;
    EXPECT_TRUE(contains(msg, "complex values are not supported for f64")) << msg;
  } else {
    check_against_reference(info, read_matrix_market<double>(file), ref);
  }
}

INSTANTIATE_TEST_SUITE_P(AllFiles, MatrixMarketSuiteSparse,
                         ::testing::ValuesIn(suitesparse_files),
                         [](const ::testing::TestParamInfo<SuiteSparseFile>& p) {
                           std::string n = p.param.name;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

TEST(MatrixMarketSuiteSparseDir, HoldsExactlyTheListedFiles) {
  std::vector<std::string> found;
  for (const auto& e : fs::directory_iterator(matrices_dir())) {
    if (e.path().extension() == ".mtx") found.push_back(e.path().stem().string());
  }
  std::vector<std::string> listed;
  for (const auto& f : suitesparse_files) listed.emplace_back(f.name);
  std::sort(found.begin(), found.end());
  std::sort(listed.begin(), listed.end());
  EXPECT_EQ(found, listed);
}

// ---------------------------------------------------------------------------
// Round trips

template <class V>
class MatrixMarketRoundTrip : public ::testing::Test {};
using ValueTypes = ::testing::Types<float, double, cf, cd>;
TYPED_TEST_SUITE(MatrixMarketRoundTrip, ValueTypes);

// Any finite or infinite value, subnormals included, from random bits; NaN
// is excluded because its payload is not representable in the text format.
template <class R>
R random_real(std::mt19937_64& rng) {
  using Bits = std::conditional_t<sizeof(R) == 4, std::uint32_t, std::uint64_t>;
  for (;;) {
    const R x = std::bit_cast<R>(static_cast<Bits>(rng()));
    if (!std::isnan(x)) return x;
  }
}

template <class V>
V random_value(std::mt19937_64& rng) {
  if constexpr (is_complex_v<V>) {
    using R = typename V::value_type;
    return V(random_real<R>(rng), random_real<R>(rng));
  } else {
    return random_real<V>(rng);
  }
}

template <class V>
std::vector<V> special_values() {
  using R = real_of_t<V>;
  using L = std::numeric_limits<R>;
  const R reals[] = {R(0),        -R(0),       R(1),          R(-1),         R(0.1),
                     L::min(),    L::max(),    L::lowest(),   L::denorm_min(), -L::denorm_min(),
                     L::epsilon(), L::infinity(), -L::infinity(), R(1e-30),    R(3.0e38)};
  std::vector<V> out;
  for (R x : reals) out.push_back(V(x));
  return out;
}

TYPED_TEST(MatrixMarketRoundTrip, RandomMatrixIsBitExact) {
  using V = TypeParam;
  const std::uint64_t seed = std::random_device{}() * 0x100000000ull + std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  ScratchDir dir;
  for (int round = 0; round < 5; ++round) {
    Coo<V> m;
    m.rows = 1 + rng() % 2000;
    m.cols = 1 + rng() % 2000;
    const std::size_t nnz = rng() % 5000;
    for (std::size_t k = 0; k < nnz; ++k) {
      m.push(rng() % m.rows, rng() % m.cols, random_value<V>(rng));
    }
    for (const V& v : special_values<V>()) m.push(rng() % m.rows, rng() % m.cols, v);
    if (nnz > 0) m.push(m.row[0], m.col[0], m.val[0]);  // a duplicate stays a duplicate

    const fs::path file = dir.path() / "round.mtx";
    write_matrix_market(file, m, "written by the round-trip test\nsecond comment line");
    const MmHeader h = read_matrix_market_header(file);
    EXPECT_EQ(h.field, is_complex_v<V> ? MmField::complex : MmField::real);
    EXPECT_EQ(h.symmetry, MmSymmetry::general);
    const Coo<V> back = read_matrix_market<V>(file);
    ASSERT_EQ(back.rows, m.rows);
    ASSERT_EQ(back.cols, m.cols);
    ASSERT_EQ(back.nnz(), m.nnz());
    EXPECT_EQ(back.row, m.row);
    EXPECT_EQ(back.col, m.col);
    for (std::size_t k = 0; k < m.nnz(); ++k) {
      ASSERT_TRUE(same_bits(back.val[k], m.val[k])) << "entry " << k << ": wrote " << m.val[k]
                                                    << ", read " << back.val[k];
    }
  }
}

TYPED_TEST(MatrixMarketRoundTrip, VectorIsBitExact) {
  using V = TypeParam;
  const std::uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  ScratchDir dir;
  std::vector<V> v = special_values<V>();
  for (int i = 0; i < 1000; ++i) v.push_back(random_value<V>(rng));
  const fs::path file = dir.path() / "v.mtx";
  write_vector<V>(file, v);
  const MmHeader h = read_matrix_market_header(file);
  EXPECT_EQ(h.format, MmFormat::array);
  EXPECT_EQ(h.rows, v.size());
  EXPECT_EQ(h.cols, 1u);
  const std::vector<V> back = read_vector<V>(file);
  ASSERT_EQ(back.size(), v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    ASSERT_TRUE(same_bits(back[i], v[i])) << "element " << i;
  }

  write_vector<V>(file, std::span<const V>{});
  EXPECT_TRUE(read_vector<V>(file).empty());
}

TYPED_TEST(MatrixMarketRoundTrip, EmptyMatrix) {
  using V = TypeParam;
  ScratchDir dir;
  Coo<V> m;
  m.rows = 7;
  m.cols = 3;
  const fs::path file = dir.path() / "empty.mtx";
  write_matrix_market(file, m);
  const Coo<V> back = read_matrix_market<V>(file);
  EXPECT_EQ(back.rows, 7u);
  EXPECT_EQ(back.cols, 3u);
  EXPECT_EQ(back.nnz(), 0u);
}

TEST_F(MatrixMarketTest, WriterRejectsInconsistentCooAndCreatesNothing) {
  const fs::path file = dir_.path() / "bad.mtx";
  Coo<double> m;
  m.rows = 2;
  m.cols = 2;
  m.push(2, 0, 1.0);
  std::string msg = error_of([&] { write_matrix_market(file, m); });
  EXPECT_TRUE(contains(msg, file.string())) << msg;
  EXPECT_TRUE(contains(msg, "outside the 2 x 2 matrix")) << msg;
  m.row[0] = 0;
  m.col.push_back(1);
  msg = error_of([&] { write_matrix_market(file, m); });
  EXPECT_TRUE(contains(msg, "different lengths")) << msg;
  EXPECT_FALSE(fs::exists(file));
}

TEST_F(MatrixMarketTest, WriterFormat) {
  Coo<double> m;
  m.rows = 3;
  m.cols = 2;
  m.push(2, 1, 0.1);
  m.push(0, 0, -2.0);
  const fs::path file = dir_.path() / "w.mtx";
  write_matrix_market(file, m, "hello");
  std::ifstream in(file);
  std::stringstream s;
  s << in.rdbuf();
  EXPECT_EQ(s.str(),
            "%%MatrixMarket matrix coordinate real general\n% hello\n3 2 2\n3 2 0.1\n1 1 -2\n");

  const std::complex<float> z[] = {{1.5f, -0.25f}};
  write_vector<cf>(file, z);
  std::ifstream vin(file);
  std::stringstream vs;
  vs << vin.rdbuf();
  EXPECT_EQ(vs.str(), "%%MatrixMarket matrix array complex general\n1 1\n1.5 -0.25\n");
}

// ---------------------------------------------------------------------------
// Accepted variations and expansion

TEST_F(MatrixMarketTest, ToleratesCaseCrlfBlanksCommentsAndMissingFinalNewline) {
  const fs::path file = dir_.write(
      "tolerant.mtx",
      "\xEF\xBB\xBF%%matrixmarket MATRIX Coordinate REAL General  \r\n"
      "% comment\r\n"
      "\r\n"
      "   \t\r\n"
      "  3   2\t 4 \r\n"
      "% between entries\r\n"
      "1 1 +1.5\r\n"
      "\r\n"
      "\t3  2   -2e-3   \r\n"
      "  % indented comment\r\n"
      "2 1 0\r\n"
      "2 1 7"); // duplicate and explicit zero, no final newline
  const Coo<double> m = read_matrix_market<double>(file);
  EXPECT_EQ(m.rows, 3u);
  EXPECT_EQ(m.cols, 2u);
  EXPECT_EQ(m.row, (std::vector<index_t>{0, 2, 1, 1}));
  EXPECT_EQ(m.col, (std::vector<index_t>{0, 1, 0, 0}));
  EXPECT_EQ(m.val, (std::vector<double>{1.5, -2e-3, 0.0, 7.0}));
}

TEST_F(MatrixMarketTest, PatternGivesOne) {
  const fs::path file = dir_.write("p.mtx",
                                   "%%MatrixMarket matrix coordinate pattern general\n"
                                   "2 3 3\n1 3\n2 1\n2 2\n");
  const Coo<float> m = read_matrix_market<float>(file);
  EXPECT_EQ(m.row, (std::vector<index_t>{0, 1, 1}));
  EXPECT_EQ(m.col, (std::vector<index_t>{2, 0, 1}));
  EXPECT_EQ(m.val, (std::vector<float>{1, 1, 1}));
  const Coo<cd> z = read_matrix_market<cd>(file);
  EXPECT_EQ(z.val, (std::vector<cd>{1, 1, 1}));
}

TEST_F(MatrixMarketTest, SymmetricExpansion) {
  const fs::path file = dir_.write("s.mtx",
                                   "%%MatrixMarket matrix coordinate real symmetric\n"
                                   "3 3 4\n1 1 5\n2 1 -1.5\n3 2 2\n3 3 0\n");
  const Coo<double> m = read_matrix_market<double>(file);
  EXPECT_EQ(m.row, (std::vector<index_t>{0, 1, 0, 2, 1, 2}));
  EXPECT_EQ(m.col, (std::vector<index_t>{0, 0, 1, 1, 2, 2}));
  EXPECT_EQ(m.val, (std::vector<double>{5, -1.5, -1.5, 2, 2, 0}));
}

TEST_F(MatrixMarketTest, SymmetricPatternExpansion) {
  const fs::path file = dir_.write("sp.mtx",
                                   "%%MatrixMarket matrix coordinate pattern symmetric\n"
                                   "2 2 2\n2 1\n2 2\n");
  const Coo<double> m = read_matrix_market<double>(file);
  EXPECT_EQ(m.row, (std::vector<index_t>{1, 0, 1}));
  EXPECT_EQ(m.col, (std::vector<index_t>{0, 1, 1}));
  EXPECT_EQ(m.val, (std::vector<double>{1, 1, 1}));
}

TEST_F(MatrixMarketTest, SkewSymmetricExpansion) {
  const fs::path file = dir_.write("k.mtx",
                                   "%%MatrixMarket matrix coordinate integer skew-symmetric\n"
                                   "3 3 2\n2 1 4\n3 1 -7\n");
  const Coo<double> m = read_matrix_market<double>(file);
  EXPECT_EQ(m.row, (std::vector<index_t>{1, 0, 2, 0}));
  EXPECT_EQ(m.col, (std::vector<index_t>{0, 1, 0, 2}));
  EXPECT_EQ(m.val, (std::vector<double>{4, -4, -7, 7}));
}

TEST_F(MatrixMarketTest, HermitianExpansion) {
  const fs::path file = dir_.write("h.mtx",
                                   "%%MatrixMarket matrix coordinate complex hermitian\n"
                                   "2 2 2\n1 1 3 0\n2 1 1.5 -2\n");
  const Coo<cd> m = read_matrix_market<cd>(file);
  EXPECT_EQ(m.row, (std::vector<index_t>{0, 1, 0}));
  EXPECT_EQ(m.col, (std::vector<index_t>{0, 0, 1}));
  EXPECT_EQ(m.val, (std::vector<cd>{{3, 0}, {1.5, -2}, {1.5, 2}}));
  const Coo<cf> f = read_matrix_market<cf>(file);
  EXPECT_EQ(f.val, (std::vector<cf>{{3, 0}, {1.5f, -2}, {1.5f, 2}}));
}

TEST_F(MatrixMarketTest, ComplexSkewSymmetricNegatesBothParts) {
  const fs::path file = dir_.write("ck.mtx",
                                   "%%MatrixMarket matrix coordinate complex skew-symmetric\n"
                                   "2 2 1\n2 1 1 2\n");
  const Coo<cd> m = read_matrix_market<cd>(file);
  EXPECT_EQ(m.val, (std::vector<cd>{{1, 2}, {-1, -2}}));
}

TEST_F(MatrixMarketTest, RealAndIntegerIntoComplexHaveZeroImaginaryPart) {
  const fs::path real = dir_.write("r.mtx", std::string(real_general) + "1 2 1\n1 2 2.5\n");
  EXPECT_EQ(read_matrix_market<cd>(real).val, (std::vector<cd>{{2.5, 0}}));
  const fs::path integer = dir_.write("i.mtx",
                                      "%%MatrixMarket matrix coordinate integer general\n"
                                      "1 2 1\n1 2 -3\n");
  EXPECT_EQ(read_matrix_market<cf>(integer).val, (std::vector<cf>{{-3, 0}}));
}

TEST_F(MatrixMarketTest, IntegersAreExact) {
  const fs::path file = dir_.write("i.mtx",
                                   "%%MatrixMarket matrix coordinate integer general\n"
                                   "1 3 3\n1 1 9007199254740992\n1 2 -16777216\n1 3 +12\n");
  EXPECT_EQ(read_matrix_market<double>(file).val,
            (std::vector<double>{9007199254740992.0, -16777216.0, 12.0}));
}

TEST_F(MatrixMarketTest, InfinityAndNanSpelledOutAreValues) {
  const fs::path file =
      dir_.write("inf.mtx", std::string(real_general) + "1 3 3\n1 1 inf\n1 2 -Infinity\n1 3 nan\n");
  const Coo<float> m = read_matrix_market<float>(file);
  EXPECT_EQ(m.val[0], std::numeric_limits<float>::infinity());
  EXPECT_EQ(m.val[1], -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(m.val[2]));
}

TEST_F(MatrixMarketTest, ValuesRoundToNearest) {
  // 1e39 does not fit a float but is an ordinary double; a value just below
  // the overflow threshold rounds to the largest double instead of failing.
  const fs::path file = dir_.write(
      "n.mtx", std::string(real_general) + "1 2 2\n1 1 1e39\n1 2 1.7976931348623158e308\n");
  const Coo<double> m = read_matrix_market<double>(file);
  EXPECT_EQ(m.val[0], 1e39);
  EXPECT_EQ(m.val[1], std::numeric_limits<double>::max());
}

TEST_F(MatrixMarketTest, ArrayMatrices) {
  const fs::path general = dir_.write("ag.mtx",
                                      "%%MatrixMarket matrix array real general\n"
                                      "2 3\n1\n2\n3\n4\n5\n0\n");
  const Coo<double> g = read_matrix_market<double>(general);
  EXPECT_EQ(g.row, (std::vector<index_t>{0, 1, 0, 1, 0, 1}));
  EXPECT_EQ(g.col, (std::vector<index_t>{0, 0, 1, 1, 2, 2}));
  EXPECT_EQ(g.val, (std::vector<double>{1, 2, 3, 4, 5, 0}));

  const fs::path sym = dir_.write("as.mtx",
                                  "%%MatrixMarket matrix array real symmetric\n"
                                  "2 2\n1\n2\n3\n");
  const Coo<double> s = read_matrix_market<double>(sym);
  EXPECT_EQ(s.row, (std::vector<index_t>{0, 1, 0, 1}));
  EXPECT_EQ(s.col, (std::vector<index_t>{0, 0, 1, 1}));
  EXPECT_EQ(s.val, (std::vector<double>{1, 2, 2, 3}));
  EXPECT_EQ(read_matrix_market_header(sym).entries, 3u);

  const fs::path skew = dir_.write("ak.mtx",
                                   "%%MatrixMarket matrix array real skew-symmetric\n"
                                   "3 3\n1\n2\n3\n");
  const Coo<double> k = read_matrix_market<double>(skew);
  EXPECT_EQ(k.row, (std::vector<index_t>{1, 0, 2, 0, 2, 1}));
  EXPECT_EQ(k.col, (std::vector<index_t>{0, 1, 0, 2, 1, 2}));
  EXPECT_EQ(k.val, (std::vector<double>{1, -1, 2, -2, 3, -3}));
}

TEST_F(MatrixMarketTest, VectorFromCoordinateFile) {
  const fs::path file = dir_.write("cv.mtx", std::string(real_general) +
                                                 "4 1 3\n3 1 2.5\n1 1 1\n3 1 0.5\n");
  EXPECT_EQ(read_vector<double>(file), (std::vector<double>{1, 0, 3, 0}));
}

TEST_F(MatrixMarketTest, LongLinesAndFilesBeyondOneBuffer) {
  // Comments of exactly the line limit (every other one with CRLF), over
  // 16 MiB in all: the entries after them straddle read-chunk boundaries.
  std::string content(real_general);
  for (int i = 0; i < 17; ++i) {
    content += "%" + std::string(mm_max_line_bytes - 1, 'x') + (i % 2 == 0 ? "\r\n" : "\n");
  }
  content += "2 2 2\n1 1 1.25\n2 2 -3\n";
  const fs::path file = dir_.write("long.mtx", content);
  const Coo<double> m = read_matrix_market<double>(file);
  EXPECT_EQ(m.val, (std::vector<double>{1.25, -3}));
}

TEST_F(MatrixMarketTest, ProgressCallbackSeesMonotoneBytesEndingAtTheFileSize) {
  // 300 000 entries of a symmetric file (the sink sees most of them twice),
  // with comments of the line limit among them: over 16 MiB, so the entries
  // straddle read-chunk boundaries.
  std::string content = "%%MatrixMarket matrix coordinate real symmetric\n% progress\n300000 300000 300000\n";
  std::mt19937_64 rng(7);
  for (int k = 0; k < 300000; ++k) {
    const std::uint64_t r = rng() % 300000, c = rng() % (r + 1);
    content += std::to_string(r + 1) + " " + std::to_string(c + 1) + " " + std::to_string(k % 97) + ".5\n";
    if (k % 20000 == 0) content += "%" + std::string(mm_max_line_bytes - 1, 'p') + "\n";
  }
  const fs::path file = dir_.write("progress.mtx", content);
  const std::uint64_t size = content.size();
  ASSERT_GT(size, std::uint64_t{16} << 20);

  std::vector<std::pair<std::uint64_t, std::uint64_t>> calls;
  MmReader reader(file);
  reader.set_progress([&](std::uint64_t done, std::uint64_t total) { calls.emplace_back(done, total); });
  const Coo<double> m = reader.read_matrix<double>();
  // Reading with a callback gives what reading without one gives.
  const Coo<double> plain = read_matrix_market<double>(file);
  EXPECT_EQ(m.row, plain.row);
  EXPECT_EQ(m.col, plain.col);
  EXPECT_EQ(m.val, plain.val);

  // The first call after the header, then every 65536 entries, then the end.
  ASSERT_GE(calls.size(), 2 + m.nnz() / 65536);
  EXPECT_GT(calls.front().first, 0u);
  EXPECT_LT(calls.front().first, 200u);
  for (std::size_t i = 0; i < calls.size(); ++i) {
    EXPECT_EQ(calls[i].second, size) << "call " << i;
    EXPECT_LE(calls[i].first, size) << "call " << i;
    if (i > 0) {
      EXPECT_LE(calls[i - 1].first, calls[i].first) << "call " << i;
    }
  }
  EXPECT_EQ(calls.back().first, size);

  // Vectors report too; an array file ends at its size as well.
  std::string array = "%%MatrixMarket matrix array real general\n200000 1\n";
  for (int k = 0; k < 200000; ++k) array += std::to_string(k) + "\n";
  const fs::path vfile = dir_.write("progress-vector.mtx", array);
  calls.clear();
  MmReader vreader(vfile);
  vreader.set_progress([&](std::uint64_t done, std::uint64_t total) { calls.emplace_back(done, total); });
  EXPECT_EQ(vreader.read_vector<double>().size(), 200000u);
  ASSERT_GE(calls.size(), 5u);
  for (std::size_t i = 1; i < calls.size(); ++i) EXPECT_LE(calls[i - 1].first, calls[i].first);
  EXPECT_EQ(calls.back(), (std::pair<std::uint64_t, std::uint64_t>{array.size(), array.size()}));

  // A callback that throws ends the read with its exception.
  MmReader stopped(file);
  int seen = 0;
  stopped.set_progress([&](std::uint64_t, std::uint64_t) {
    if (++seen == 2) throw Error("stopped by the callback");
  });
  EXPECT_EQ(error_of([&] { (void)stopped.read_matrix<double>(); }), "stopped by the callback");
}

TEST_F(MatrixMarketTest, HeaderOnly) {
  const fs::path file = dir_.write("h.mtx",
                                   "%%MatrixMarket matrix coordinate pattern symmetric\n% c\n"
                                   "5 5 3\nthis is never read\n");
  const MmHeader h = read_matrix_market_header(file);
  EXPECT_EQ(h.format, MmFormat::coordinate);
  EXPECT_EQ(h.field, MmField::pattern);
  EXPECT_EQ(h.symmetry, MmSymmetry::symmetric);
  EXPECT_EQ(h.rows, 5u);
  EXPECT_EQ(h.cols, 5u);
  EXPECT_EQ(h.entries, 3u);
}

TEST_F(MatrixMarketTest, DimensionsAtTheLimitAreAccepted) {
  const fs::path file = dir_.write("lim.mtx", std::string(real_general) +
                                                  "281474976710656 281474976710656 1\n"
                                                  "281474976710656 1 2\n");
  const Coo<double> m = read_matrix_market<double>(file);
  EXPECT_EQ(m.rows, mm_max_dimension);
  EXPECT_EQ(m.row, (std::vector<index_t>{mm_max_dimension - 1}));
}

// ---------------------------------------------------------------------------
// Malformed input: one case each, file name and line in every message

TEST_F(MatrixMarketTest, CannotOpen) {
  const fs::path file = dir_.path() / "does-not-exist.mtx";
  const std::string msg = error_of([&] { (void)read_matrix_market<double>(file); });
  EXPECT_TRUE(contains(msg, file.string() + ": cannot open")) << msg;
}

TEST_F(MatrixMarketTest, EmptyFile) { expect_error("", 1, "empty file"); }

TEST_F(MatrixMarketTest, MissingBanner) {
  expect_error("3 3 1\n1 1 1\n", 1, "missing %%MatrixMarket banner");
}

TEST_F(MatrixMarketTest, CommentBeforeBanner) {
  expect_error("% comment\n%%MatrixMarket matrix coordinate real general\n1 1 0\n", 1,
               "missing %%MatrixMarket banner");
}

TEST_F(MatrixMarketTest, MisspelledBanner) {
  expect_error("%%MatrixMarkt matrix coordinate real general\n1 1 0\n", 1,
               "unknown banner '%%MatrixMarkt'");
}

TEST_F(MatrixMarketTest, IncompleteBanner) {
  expect_error("%%MatrixMarket matrix coordinate real\n1 1 0\n", 1, "symmetry missing");
}

TEST_F(MatrixMarketTest, UnknownObject) {
  expect_error("%%MatrixMarket vector coordinate real general\n1 1 0\n", 1,
               "unsupported object 'vector'");
}

TEST_F(MatrixMarketTest, UnknownFormat) {
  expect_error("%%MatrixMarket matrix sparse real general\n1 1 0\n", 1, "unknown format 'sparse'");
}

TEST_F(MatrixMarketTest, UnknownField) {
  expect_error("%%MatrixMarket matrix coordinate double general\n1 1 0\n", 1,
               "unknown field 'double'");
}

TEST_F(MatrixMarketTest, UnknownSymmetry) {
  expect_error("%%MatrixMarket matrix coordinate real upper\n1 1 0\n", 1,
               "unknown symmetry 'upper'");
}

TEST_F(MatrixMarketTest, ExtraWordInBanner) {
  expect_error("%%MatrixMarket matrix coordinate real general extra\n1 1 0\n", 1,
               "unexpected 'extra'");
}

TEST_F(MatrixMarketTest, PatternWithArrayFormat) {
  expect_error("%%MatrixMarket matrix array pattern general\n1 1\n", 1,
               "pattern is not allowed with the array format");
}

TEST_F(MatrixMarketTest, HermitianWithRealField) {
  expect_error("%%MatrixMarket matrix coordinate real hermitian\n1 1 0\n", 1,
               "hermitian symmetry requires the complex field");
}

TEST_F(MatrixMarketTest, SkewSymmetricPattern) {
  expect_error("%%MatrixMarket matrix coordinate pattern skew-symmetric\n2 2 0\n", 1,
               "skew-symmetric is not allowed with the pattern field");
}

TEST_F(MatrixMarketTest, ComplexIntoRealType) {
  const std::string content =
      "%%MatrixMarket matrix coordinate complex general\n1 1 1\n1 1 1 2\n";
  expect_error(content, 1, "complex values are not supported for f64");
  expect_error(content, 1, "complex values are not supported for f32",
               [](const fs::path& f) { (void)read_matrix_market<float>(f); });
  expect_error(content, 1, "complex values are not supported for f64",
               [](const fs::path& f) { (void)read_vector<double>(f); });
}

TEST_F(MatrixMarketTest, MissingSizeLine) {
  expect_error(std::string(real_general) + "% only comments\n\n", 4, "missing size line");
}

TEST_F(MatrixMarketTest, SizeLineNotNumeric) {
  expect_error(std::string(real_general) + "% c\n3 x 2\n", 3, "number of columns 'x'");
}

TEST_F(MatrixMarketTest, SizeLineNegative) {
  expect_error(std::string(real_general) + "3 -3 2\n", 2, "negative number of columns '-3'");
}

TEST_F(MatrixMarketTest, SizeLineTooManyNumbers) {
  expect_error(std::string(real_general) + "3 3 2 7\n", 2, "more than 3 numbers");
}

TEST_F(MatrixMarketTest, SizeLineTooFewNumbers) {
  expect_error(std::string(real_general) + "3 3\n", 2, "size line has 2 numbers, expected 3");
}

TEST_F(MatrixMarketTest, ArraySizeLineTooManyNumbers) {
  expect_error("%%MatrixMarket matrix array real general\n3 1 3\n1\n2\n3\n", 2,
               "more than 2 numbers");
}

TEST_F(MatrixMarketTest, SizeLineOverflow) {
  expect_error(std::string(real_general) + "3 3 18446744073709551616\n", 2,
               "number of entries '18446744073709551616' does not fit in 64 bits");
}

TEST_F(MatrixMarketTest, SymmetricNotSquare) {
  expect_error("%%MatrixMarket matrix coordinate real symmetric\n3 4 1\n1 1 1\n", 2,
               "a symmetric matrix must be square, found 3 x 4");
}

template <class F>
void expect_limit_error(const fs::path& file, std::string_view what, F read) {
  try {
    read(file);
    ADD_FAILURE() << "expected LimitError for " << file;
  } catch (const LimitError& e) {
    const std::string msg = e.what();
    EXPECT_TRUE(contains(msg, at(file, 2))) << msg;
    EXPECT_TRUE(contains(msg, what)) << msg;
  }
}

TEST_F(MatrixMarketTest, RowsOverLimit) {
  const fs::path file = dir_.write("rows.mtx", std::string(real_general) + "281474976710657 1 0\n");
  expect_limit_error(file, "number of rows 281474976710657 exceeds the limit of "
                           "281474976710656 (2^48)",
                     [](const fs::path& f) { (void)read_matrix_market<double>(f); });
  expect_limit_error(file, "(2^48)", [](const fs::path& f) { (void)read_matrix_market_header(f); });
}

TEST_F(MatrixMarketTest, ColumnsOverLimit) {
  const fs::path file =
      dir_.write("cols.mtx", std::string(real_general) + "1 18446744073709551615 0\n");
  expect_limit_error(file, "number of columns 18446744073709551615 exceeds the limit",
                     [](const fs::path& f) { (void)read_matrix_market<float>(f); });
}

TEST_F(MatrixMarketTest, EntriesOverLimit) {
  // A 20-byte file claiming 2^40 + 1 entries must fail before allocating.
  const fs::path file = dir_.write("nnz.mtx", std::string(real_general) + "5 5 1099511627777\n");
  expect_limit_error(file, "number of entries 1099511627777 exceeds the limit of "
                           "1099511627776 (2^40)",
                     [](const fs::path& f) { (void)read_matrix_market<double>(f); });
}

TEST_F(MatrixMarketTest, ArrayOverLimit) {
  // 2^32 x 2^32 values overflow 64 bits; the message must still be the limit.
  const fs::path file = dir_.write("arr.mtx",
                                   "%%MatrixMarket matrix array real general\n"
                                   "4294967296 4294967296\n1\n");
  expect_limit_error(file, "exceeds the limit of 1099511627776 (2^40) entries",
                     [](const fs::path& f) { (void)read_matrix_market<double>(f); });
}

TEST_F(MatrixMarketTest, CallerLimits) {
  const fs::path file = dir_.write("small.mtx", std::string(real_general) + "10 10 2\n1 1 1\n2 2 2\n");
  MmLimits limits;
  limits.max_entries = 1;
  expect_limit_error(file, "exceeds the limit of 1 (2^0)",
                     [&](const fs::path& f) { (void)read_matrix_market<double>(f, limits); });
  limits = MmLimits{};
  limits.max_dimension = 9;
  expect_limit_error(file, "number of rows 10 exceeds the limit of 9",
                     [&](const fs::path& f) { (void)read_vector<double>(f, limits); });
}

TEST_F(MatrixMarketTest, TooFewEntries) {
  expect_error(std::string(real_general) + "3 3 4\n1 1 1\n% c\n2 2 2\n", 6,
               "unexpected end of file: expected 4 entries, found 2");
}

TEST_F(MatrixMarketTest, TruncatedMidLine) {
  expect_error(std::string(real_general) + "3 3 2\n1 1 1\n2 2", 4, "missing value");
}

TEST_F(MatrixMarketTest, TooManyEntries) {
  expect_error(std::string(real_general) + "3 3 2\n1 1 1\n2 2 2\n\n3 3 3\n", 6,
               "too many entries: the size line declares 2");
}

TEST_F(MatrixMarketTest, RowIndexZero) {
  expect_error(std::string(real_general) + "% a\n% b\n100 100 3\n1 1 1\n2 2 2\n0 3 3\n", 7,
               "row index 0 out of range [1, 100]");
}

TEST_F(MatrixMarketTest, RowIndexTooLarge) {
  expect_error(std::string(real_general) + "3 4 1\n4 1 1\n", 3, "row index 4 out of range [1, 3]");
}

TEST_F(MatrixMarketTest, ColumnIndexTooLarge) {
  expect_error(std::string(real_general) + "3 4 1\n1 5 1\n", 3,
               "column index 5 out of range [1, 4]");
}

TEST_F(MatrixMarketTest, NegativeIndex) {
  expect_error(std::string(real_general) + "3 4 1\n-1 2 1\n", 3,
               "row index -1 out of range [1, 3]");
}

TEST_F(MatrixMarketTest, IndexOverflow) {
  expect_error(std::string(real_general) + "3 4 1\n1 99999999999999999999 1\n", 3,
               "column index '99999999999999999999' does not fit in 64 bits");
}

TEST_F(MatrixMarketTest, IndexNotNumeric) {
  expect_error(std::string(real_general) + "3 4 1\n1.0 2 1\n", 3,
               "row index '1.0' is not an integer");
}

TEST_F(MatrixMarketTest, MissingColumnIndex) {
  expect_error(std::string(real_general) + "3 4 1\n2\n", 3, "missing column index");
}

TEST_F(MatrixMarketTest, ValueNotNumeric) {
  expect_error(std::string(real_general) + "3 4 1\n1 1 abc\n", 3, "invalid value 'abc'");
}

TEST_F(MatrixMarketTest, ValueWithGarbageAttached) {
  expect_error(std::string(real_general) + "3 4 1\n1 1 1.5x\n", 3, "invalid value '1.5x'");
}

TEST_F(MatrixMarketTest, MissingValue) {
  expect_error(std::string(real_general) + "3 4 2\n1 1 1\n2 2 \n", 4, "missing value");
}

TEST_F(MatrixMarketTest, MissingImaginaryPart) {
  expect_error("%%MatrixMarket matrix coordinate complex general\n2 2 2\n1 1 1 0\n2 2 2.5\n", 4,
               "missing imaginary part",
               [](const fs::path& f) { (void)read_matrix_market<cd>(f); });
}

TEST_F(MatrixMarketTest, TrailingGarbage) {
  expect_error(std::string(real_general) + "3 4 1\n1 1 1.0 junk\n", 3,
               "trailing characters 'junk' after the value");
}

TEST_F(MatrixMarketTest, TrailingGarbageOnPatternEntry) {
  expect_error("%%MatrixMarket matrix coordinate pattern general\n3 4 1\n1 1 1\n", 3,
               "trailing characters '1'");
}

TEST_F(MatrixMarketTest, ValueOverflowsDouble) {
  expect_error(std::string(real_general) + "3 4 1\n1 1 1e400\n", 3, "value '1e400' overflows f64");
}

TEST_F(MatrixMarketTest, ValueOverflowsFloat) {
  expect_error(std::string(real_general) + "3 4 1\n1 1 -1e39\n", 3, "value '-1e39' overflows f32",
               [](const fs::path& f) { (void)read_matrix_market<float>(f); });
}

TEST_F(MatrixMarketTest, ImaginaryPartOverflows) {
  expect_error("%%MatrixMarket matrix coordinate complex general\n1 1 1\n1 1 0 1e39\n", 3,
               "imaginary part '1e39' overflows complex<f32>",
               [](const fs::path& f) { (void)read_matrix_market<cf>(f); });
}

TEST_F(MatrixMarketTest, IntegerFieldWithFraction) {
  expect_error("%%MatrixMarket matrix coordinate integer general\n1 1 1\n1 1 1.5\n", 3,
               "invalid integer value '1.5'");
}

TEST_F(MatrixMarketTest, IntegerValueOverflow) {
  expect_error("%%MatrixMarket matrix coordinate integer general\n1 1 1\n1 1 9223372036854775808\n",
               3, "integer value '9223372036854775808' does not fit in 64 bits");
}

TEST_F(MatrixMarketTest, IntegerNotExactInFloat) {
  expect_error("%%MatrixMarket matrix coordinate integer general\n1 1 1\n1 1 16777217\n", 3,
               "integer value 16777217 is not exactly representable in f32",
               [](const fs::path& f) { (void)read_matrix_market<float>(f); });
}

TEST_F(MatrixMarketTest, SkewSymmetricDiagonalEntry) {
  // The strictly lower triangle only: a diagonal entry is refused, zero too.
  expect_error("%%MatrixMarket matrix coordinate real skew-symmetric\n3 3 2\n2 1 1\n2 2 0.5\n", 4,
               "diagonal entry (2, 2) in a skew-symmetric file, which stores the strictly lower "
               "triangle only");
  expect_error("%%MatrixMarket matrix coordinate integer skew-symmetric\n3 3 2\n2 1 1\n3 3 0\n",
               4, "diagonal entry (3, 3) in a skew-symmetric file");
}

// Symmetric kinds store the lower triangle; an upper entry would be mirrored
// onto a lower one, doubling a value the file also lists.
TEST_F(MatrixMarketTest, SymmetricEntryAboveDiagonal) {
  expect_error("%%MatrixMarket matrix coordinate real symmetric\n3 3 3\n1 1 1\n2 1 4\n1 2 4\n", 5,
               "entry (1, 2) above the diagonal in a symmetric file, which stores the lower "
               "triangle only (row >= column)");
  expect_error("%%MatrixMarket matrix coordinate pattern symmetric\n3 3 1\n% c\n2 3\n", 4,
               "entry (2, 3) above the diagonal in a symmetric file");
  expect_error("%%MatrixMarket matrix coordinate real skew-symmetric\n3 3 1\n1 3 2\n", 3,
               "entry (1, 3) above the diagonal in a skew-symmetric file");
  expect_error("%%MatrixMarket matrix coordinate complex hermitian\n2 2 1\n1 2 1 1\n", 3,
               "entry (1, 2) above the diagonal in a hermitian file",
               [](const fs::path& f) { (void)read_matrix_market<cd>(f); });
  // Vectors too: a 1 x 1 symmetric file is its diagonal.
  const fs::path one = dir_.write("one.mtx",
                                  "%%MatrixMarket matrix coordinate real symmetric\n1 1 1\n1 1 3\n");
  EXPECT_EQ(read_vector<double>(one), (std::vector<double>{3}));
}

TEST_F(MatrixMarketTest, HermitianDiagonalNotReal) {
  expect_error("%%MatrixMarket matrix coordinate complex hermitian\n2 2 1\n1 1 1 1\n", 3,
               "diagonal entry (1, 1) of a hermitian matrix has a non-zero imaginary part",
               [](const fs::path& f) { (void)read_matrix_market<cd>(f); });
}

TEST_F(MatrixMarketTest, ArrayTooFewValues) {
  expect_error("%%MatrixMarket matrix array real general\n2 2\n1\n2\n3\n", 6,
               "unexpected end of file: expected 4 values, found 3");
}

TEST_F(MatrixMarketTest, ArrayTooManyValues) {
  expect_error("%%MatrixMarket matrix array real general\n2 1\n1\n2\n3\n", 5,
               "too many values: the array holds 2");
}

TEST_F(MatrixMarketTest, ArrayTwoValuesOnOneLine) {
  expect_error("%%MatrixMarket matrix array real general\n2 1\n1 2\n", 3,
               "trailing characters '2'",
               [](const fs::path& f) { (void)read_vector<double>(f); });
}

TEST_F(MatrixMarketTest, VectorLengthOverLimit) {
  const fs::path file =
      dir_.write("vlen.mtx", std::string(real_general) + "281474976710656 1 0\n");
  expect_limit_error(file, "a vector of 281474976710656 elements exceeds the limit of "
                           "1099511627776 (2^40) entries",
                     [](const fs::path& f) { (void)read_vector<double>(f); });
}

TEST_F(MatrixMarketTest, VectorOfAMatrix) {
  expect_error("%%MatrixMarket matrix array real general\n2 2\n1\n2\n3\n4\n", 2,
               "expected a vector (an n x 1 matrix), found 2 x 2",
               [](const fs::path& f) { (void)read_vector<double>(f); });
}

// ---------------------------------------------------------------------------
// Hostile inputs: memory, endless lines, FIFOs, escape sequences

// Sanitizers reserve terabytes of address space, so an address-space cap
// cannot bound what the reader allocates there; the checks still run.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool can_cap_address_space = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
constexpr bool can_cap_address_space = false;
#else
constexpr bool can_cap_address_space = true;
#endif
#else
constexpr bool can_cap_address_space = true;
#endif

// Runs check in a child process, so that a hang (a FIFO opened a second
// time) or a huge allocation (a hostile header) fails this test instead of
// taking the test binary down: the child gets timeout_s seconds and, where
// it can be capped, extra_bytes of address space beyond what it has. check
// returns "" when all is well, otherwise what went wrong.
std::string in_child(const std::function<std::string()>& check, unsigned timeout_s,
                     std::uint64_t extra_bytes = 0) {
  int fds[2];
  if (::pipe(fds) != 0) return "pipe failed";
  const pid_t pid = ::fork();
  if (pid < 0) return "fork failed";
  if (pid == 0) {
    ::close(fds[0]);
    ::alarm(timeout_s);
    std::signal(SIGPIPE, SIG_IGN);  // a FIFO writer whose reader has gone just fails
    if (extra_bytes != 0 && can_cap_address_space) {
      long pages = 0;
      std::ifstream("/proc/self/statm") >> pages;
      const rlim_t cap = static_cast<rlim_t>(pages) * static_cast<rlim_t>(::sysconf(_SC_PAGESIZE)) +
                         extra_bytes;
      const rlimit limit{cap, cap};
      ::setrlimit(RLIMIT_AS, &limit);
    }
    std::string failure;
    try {
      failure = check();
    } catch (const std::bad_alloc&) {
      failure = "std::bad_alloc: the reader tried to allocate beyond the cap";
    } catch (const std::exception& e) {
      failure = std::string("unexpected exception: ") + e.what();
    }
    (void)!::write(fds[1], failure.data(), failure.size());
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string failure;
  char buf[4096];
  for (;;) {
    const ::ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n <= 0) break;
    failure.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFSIGNALED(status)) {
    return WTERMSIG(status) == SIGALRM ? "timed out after " + std::to_string(timeout_s) + " s"
                                       : "killed by signal " + std::to_string(WTERMSIG(status));
  }
  return failure;
}

// The error's text from a call in a child process, or a description of
// what else happened.
std::string child_error(const std::function<void()>& call, std::uint64_t extra_bytes) {
  return in_child(
      [&]() -> std::string {
        try {
          call();
        } catch (const Error& e) {
          return std::string("error: ") + e.what();
        }
        return "no error";
      },
      60, extra_bytes);
}

constexpr std::uint64_t memory_cap = std::uint64_t{512} << 20;

TEST_F(MatrixMarketTest, HeaderClaimingBillionEntriesDoesNotAllocateForThem) {
  // About 100 bytes that promise 10^9 entries (24 GB as a Coo<double>): the
  // reserve follows what the file can hold, so the truncation is reported
  // under a 512 MiB cap.
  for (const char* symmetry : {"general", "symmetric"}) {
    const fs::path file = dir_.write(std::string("claim-") + symmetry + ".mtx",
                                     std::string("%%MatrixMarket matrix coordinate real ") +
                                         symmetry + "\n1000000 1000000 1000000000\n1 1 1\n");
    const std::string msg =
        child_error([&] { (void)read_matrix_market<double>(file); }, memory_cap);
    EXPECT_TRUE(contains(msg, "error: " + at(file, 4) +
                                  "unexpected end of file: expected 1000000000 entries, found 1"))
        << msg;
  }
}

TEST_F(MatrixMarketTest, VectorLengthIsCheckedBeforeAllocating) {
  // 61 bytes declaring 2^30 elements (8 GB of doubles).
  const fs::path coordinate = dir_.write(
      "vx.mtx", std::string(real_general) + "1073741824 1 0\n");
  std::string msg =
      child_error([&] { (void)read_vector<double>(coordinate, 198); }, memory_cap);
  EXPECT_TRUE(contains(msg, "error: " + at(coordinate, 2) +
                                "vector of 1073741824 elements, expected 198"))
      << msg;
  msg = child_error([&] { (void)MmReader(coordinate).read_vector<cf>(std::uint64_t{7}); },
                    memory_cap);
  EXPECT_TRUE(contains(msg, "vector of 1073741824 elements, expected 7")) << msg;
  const fs::path array = dir_.write("va.mtx",
                                    "%%MatrixMarket matrix array real general\n% c\n3 1\n1\n2\n3\n");
  msg = error_of([&] { (void)read_vector<double>(array, 4); });
  EXPECT_TRUE(contains(msg, at(array, 3) + "vector of 3 elements, expected 4")) << msg;
  EXPECT_EQ(read_vector<double>(array, 3), (std::vector<double>{1, 2, 3}));

  // Without an expected length, a truncated coordinate vector fails before
  // its declared length is allocated.
  const fs::path truncated = dir_.write(
      "vt.mtx", std::string(real_general) + "1073741824 1 2\n5 1 1.5\n");
  msg = child_error([&] { (void)read_vector<double>(truncated); }, memory_cap);
  EXPECT_TRUE(contains(msg, "error: " + at(truncated, 4) +
                                "unexpected end of file: expected 2 entries, found 1"))
      << msg;
}

TEST_F(MatrixMarketTest, LineLimit) {
  // Exactly the limit (CRLF or not, last line without a newline too) is
  // accepted; one byte more is refused with the file and the line.
  MmLimits limits;
  limits.max_line_bytes = 64;
  const std::string at_limit = "%" + std::string(63, 'c');
  const fs::path ok = dir_.write(
      "ok.mtx", std::string(real_general) + at_limit + "\r\n" + at_limit + "\n1 1 1\n" +
                    "1 1 " + std::string(59, '0') + "1");
  EXPECT_EQ(read_matrix_market<double>(ok, limits).val, (std::vector<double>{1}));
  const fs::path long_comment =
      dir_.write("long.mtx", std::string(real_general) + "% c\n" + at_limit + "x\r\n1 1 0\n");
  try {
    (void)read_matrix_market<double>(long_comment, limits);
    ADD_FAILURE() << "expected LimitError";
  } catch (const LimitError& e) {
    EXPECT_TRUE(contains(e.what(), at(long_comment, 3) +
                                       "line longer than the limit of 64 bytes"))
        << e.what();
  }
  const fs::path last = dir_.write("last.mtx", std::string(real_general) + "1 1 1\n" +
                                                   "1 1 " + std::string(61, '0'));
  std::string msg = error_of([&] { (void)read_matrix_market<double>(last, limits); });
  EXPECT_TRUE(contains(msg, at(last, 3) + "line longer than the limit of 64 bytes")) << msg;
  // The default: 1 MiB.
  const fs::path big = dir_.write(
      "big.mtx", std::string(real_general) + "%" + std::string(mm_max_line_bytes, 'x') + "\n");
  msg = error_of([&] { (void)read_matrix_market_header(big); });
  EXPECT_TRUE(contains(msg, at(big, 2) + "line longer than the limit of 1048576 bytes")) << msg;
}

TEST_F(MatrixMarketTest, DevZeroEndsAtTheLineLimit) {
  // No line end at all: without a line limit the buffer doubled until
  // std::bad_alloc, which named no file.
  if (!fs::exists("/dev/zero")) GTEST_SKIP() << "no /dev/zero";
  const std::string msg =
      child_error([] { (void)read_matrix_market<double>("/dev/zero"); }, memory_cap);
  EXPECT_TRUE(contains(msg, "error: /dev/zero:1: line longer than the limit of 1048576 bytes"))
      << msg;
}

TEST_F(MatrixMarketTest, DirectoryIsRefused) {
  const std::string msg = error_of([&] { (void)read_matrix_market<double>(dir_.path()); });
  EXPECT_TRUE(contains(msg, dir_.path().string() + ": is a directory")) << msg;
}

// A FIFO can be read only once: the reader opens it once, takes the header,
// and goes on with the entries in the type the header chose. Its first line
// is a comment of the full line limit with CRLF, longer than the buffer a
// stream starts with, so the buffer has to grow.
TEST_F(MatrixMarketTest, FifoIsReadOnce) {
  const fs::path fifo = dir_.path() / "pipe.mtx";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  const std::string content = "%%MatrixMarket matrix coordinate complex general\n%" +
                              std::string(mm_max_line_bytes - 1, 'c') + "\r\n" +
                              "3 2 2\n1 1 1 -1\n3 2 0.5 2\n";
  const std::string failure = in_child(
      [&]() -> std::string {
        std::thread writer([&] { std::ofstream(fifo, std::ios::binary) << content; });
        std::string problem;
        try {
          MmReader in(fifo);
          if (in.header().field != MmField::complex) problem = "wrong field";
          const Coo<cd> m = in.read_matrix<cd>();
          if (m.rows != 3 || m.cols != 2 || m.row != std::vector<index_t>{0, 2} ||
              m.val != std::vector<cd>{{1, -1}, {0.5, 2}}) {
            problem = "wrong matrix";
          }
          const std::string again = error_of([&] { (void)in.read_matrix<cd>(); });
          if (!contains(again, "already been read")) problem = "second read: " + again;
        } catch (const Error& e) {
          problem = e.what();
        }
        writer.join();
        return problem;
      },
      30);
  EXPECT_EQ(failure, "");

  // A vector through a FIFO.
  const std::string vector_failure = in_child(
      [&]() -> std::string {
        std::thread writer([&] {
          std::ofstream(fifo, std::ios::binary)
              << "%%MatrixMarket matrix array real general\n3 1\n1\n-2\n0.5\n";
        });
        std::string problem;
        try {
          if (read_vector<double>(fifo, 3) != std::vector<double>{1, -2, 0.5}) problem = "wrong";
        } catch (const Error& e) {
          problem = e.what();
        }
        writer.join();
        return problem;
      },
      30);
  EXPECT_EQ(vector_failure, "");
}

TEST(MatrixMarketPrintable, EscapesWhatATerminalWouldInterpret) {
  EXPECT_EQ(printable_text("plain text 1.5e3 %%"), "plain text 1.5e3 %%");
  EXPECT_EQ(printable_text("\x1b[31mred"), "\\x1b[31mred");
  EXPECT_EQ(printable_text(std::string_view("a\0b", 3)), "a\\x00b");
  EXPECT_EQ(printable_text("tab\there\r\n\x7f"), "tab\\there\\r\\n\\x7f");
  EXPECT_EQ(printable_text("back\\slash"), "back\\\\slash");
  EXPECT_EQ(printable_text("gr\xc3\xb6\xc3\x9f" "e \xe2\x82\xac \xf0\x9f\x98\x80"),
            "gr\xc3\xb6\xc3\x9f" "e \xe2\x82\xac \xf0\x9f\x98\x80");  // UTF-8 stays
  EXPECT_EQ(printable_text("\xc2\x9b" "2J"), "\\u009b2J");             // C1 CSI
  EXPECT_EQ(printable_text("abc\xe2\x80\xae" "def"), "abc\\u202edef");  // right-to-left override
  EXPECT_EQ(printable_text("\xff\xfe\x9b"), "\\xff\\xfe\\x9b");         // not UTF-8
  EXPECT_EQ(printable_text("\xc3"), "\\xc3");                          // truncated sequence
  EXPECT_EQ(printable_text("\xc0\xaf"), "\\xc0\\xaf");                  // overlong '/'
  EXPECT_EQ(printable_text("\xed\xa0\x80"), "\\xed\\xa0\\x80");          // a surrogate
}

TEST_F(MatrixMarketTest, MessagesEscapeInputText) {
  // Tokens, banner words and the file name: no control byte of the input
  // reaches the message.
  auto no_raw_controls = [](const std::string& msg) {
    return std::none_of(msg.begin(), msg.end(),
                        [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; });
  };
  expect_error("%%MatrixMarket matrix coordinate real \x1b[2Jgeneral\n1 1 0\n", 1,
               "unknown symmetry '\\x1b[2Jgeneral'");
  expect_error("%%MatrixMarket\x1b]0;title\x07 matrix coordinate real general\n1 1 0\n", 1,
               "unknown banner '%%MatrixMarket\\x1b]0;title\\x07'");
  expect_error(std::string(real_general) + "2 2 1\n1 1 1\x1b[31m\n", 3,
               "invalid value '1\\x1b[31m'");
  expect_error(std::string(real_general) + "2 2 1\n1\x1b 1 1\n", 3, "row index '1\\x1b'");
  const fs::path named = dir_.write("ctl\x1b[2J\x07.mtx", std::string(real_general) + "1 1 1\n1 1 x\n");
  const std::string msg = error_of([&] { (void)read_matrix_market<double>(named); });
  EXPECT_TRUE(contains(msg, "ctl\\x1b[2J\\x07.mtx:3: invalid value 'x'")) << msg;
  EXPECT_TRUE(no_raw_controls(msg)) << msg;
  const std::string open_msg =
      error_of([&] { (void)read_matrix_market<double>(dir_.path() / "gone\x1b.mtx"); });
  EXPECT_TRUE(contains(open_msg, "gone\\x1b.mtx: cannot open")) << open_msg;
  EXPECT_TRUE(no_raw_controls(open_msg)) << open_msg;
  Coo<double> bad;
  bad.rows = 1;
  bad.cols = 1;
  bad.push(1, 0, 1.0);
  const std::string write_msg =
      error_of([&] { write_matrix_market(dir_.path() / "out\x1b.mtx", bad); });
  EXPECT_TRUE(contains(write_msg, "out\\x1b.mtx: cannot write")) << write_msg;
}

// Random corruptions of small valid files: whatever the damage, the reader
// either succeeds or throws hisparse::Error; never another exception, a
// crash or a hang (the sanitizer builds check the rest).
TEST_F(MatrixMarketTest, CorruptedFilesOnlyThrowError) {
  const std::string seeds[] = {
      "%%MatrixMarket matrix coordinate real symmetric\n% c\n4 4 4\n1 1 1.5\n2 1 -2e3\n"
      "4 3 7\n4 4 0\n",
      "%%MatrixMarket matrix coordinate complex hermitian\n3 3 2\n1 1 1 0\n3 2 0.5 -1\n",
      "%%MatrixMarket matrix array integer skew-symmetric\n3 3\n1\n-2\n3\n",
      "%%MatrixMarket matrix coordinate pattern general\n3 2 3\n1 1\n3 2\n2 1\n",
  };
  constexpr std::string_view alphabet = "0123456789 -+.eE%\n\r\tx";
  const std::uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const fs::path file = dir_.path() / "fuzz.mtx";
  int accepted = 0;
  for (int round = 0; round < 4000; ++round) {
    std::string s = seeds[rng() % std::size(seeds)];
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits && !s.empty(); ++e) {
      const std::size_t pos = rng() % s.size();
      const char c = alphabet[rng() % alphabet.size()];
      switch (rng() % 3) {
        case 0: s[pos] = c; break;
        case 1: s.insert(s.begin() + static_cast<std::ptrdiff_t>(pos), c); break;
        default: s.erase(pos, 1); break;
      }
    }
    dir_.write("fuzz.mtx", s);
    for (int type = 0; type < 3; ++type) {
      try {
        if (type == 0) (void)read_matrix_market<double>(file);
        if (type == 1) (void)read_matrix_market<cf>(file);
        if (type == 2) (void)read_vector<cd>(file);
        ++accepted;
      } catch (const Error& e) {
        ASSERT_TRUE(contains(e.what(), file.string())) << e.what();
      } catch (const std::exception& e) {
        FAIL() << "non-hisparse exception " << e.what() << " for input:\n" << s;
      }
    }
  }
  EXPECT_GT(accepted, 0);  // some corruptions are harmless (digits, blanks)
}

// ---------------------------------------------------------------------------
// Throughput: HISPARSE_MM_BENCH_MB sets the size (default 20, which also
// crosses one 16 MiB read chunk); the timing is printed, and the bound is
// loose enough for unoptimized builds on a busy machine.

TEST(MatrixMarketSpeed, ParsesLargeFile) {
  std::size_t megabytes = 20;
  if (const char* env = std::getenv("HISPARSE_MM_BENCH_MB")) megabytes = std::stoul(env);
  const std::uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> value(-1.0, 1.0);

  // About 38 bytes per entry: two 6-7 digit indices and a 17-digit value.
  const std::size_t nnz = megabytes * 1000000 / 38;
  Coo<double> m;
  m.rows = 2000000;
  m.cols = 2000000;
  m.reserve(nnz);
  for (std::size_t k = 0; k < nnz; ++k) m.push(rng() % m.rows, rng() % m.cols, value(rng));

  ScratchDir dir;
  const fs::path file = dir.path() / "big.mtx";
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  write_matrix_market(file, m);
  const auto t1 = clock::now();
  const Coo<double> back = read_matrix_market<double>(file);
  const auto t2 = clock::now();

  const double mb = static_cast<double>(fs::file_size(file)) / 1e6;
  const double write_s = std::chrono::duration<double>(t1 - t0).count();
  const double read_s = std::chrono::duration<double>(t2 - t1).count();
  std::printf("[ speed    ] %.1f MB, %zu entries: write %.3f s, read %.3f s (%.0f MB/s)\n", mb,
              nnz, write_s, read_s, mb / read_s);
  ::testing::Test::RecordProperty("read_seconds", std::to_string(read_s));

  ASSERT_EQ(back.nnz(), m.nnz());
  EXPECT_EQ(back.row, m.row);
  EXPECT_EQ(back.col, m.col);
  EXPECT_EQ(back.val, m.val);
  EXPECT_LT(read_s, 1.0 * static_cast<double>(megabytes)) << "parsing slower than 1 MB/s";
}

}  // namespace
}  // namespace hisparse
