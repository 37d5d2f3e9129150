// The .hsp file: round trips with state, and every kind of bad file.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>
// Header-only XXH3, to re-seal patched files (the test does not link xxhash).
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "hisparse/formats/builder.hpp"
#include "hisparse/formats/hsp_file.hpp"
#include "hisparse/formats/matrix_market.hpp"
#include "hisparse/formats/node_view.hpp"
#include "hisparse/formats/validate.hpp"
#include "support/matrices_dir.hpp"
#include "support/random_matrix.hpp"
#include "support/test_seed.hpp"

using namespace hisparse;
using namespace hisparse::testing;
namespace fs = std::filesystem;

namespace {

fs::path temp_path(const std::string& name) {
  const auto dir = fs::temp_directory_path() / ("hisparse-hsp-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return dir / name;
}

std::string bytes_of(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}
void write_bytes(const fs::path& p, const std::string& s) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(s.data(), static_cast<std::streamsize>(s.size()));
}

// f(p) must throw a hisparse::Error naming the file and containing needle.
template <class F>
void expect_error(const fs::path& p, const std::string& needle, F&& f) {
  try {
    f(p);
    ADD_FAILURE() << "accepted a bad file; expected: " << needle;
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(p.filename().string()), std::string::npos) << msg;
    EXPECT_NE(msg.find(needle), std::string::npos) << msg;
  }
}

template <class V>
void expect_load_error(const fs::path& p, const std::string& needle) {
  expect_error(p, needle, [](const fs::path& f) { (void)load_hsp<V>(f); });
}

// Header fields by byte offset (docs/format.md, "The .hsp file").
template <class T>
T get(const std::string& s, std::size_t offset) {
  T v;
  std::memcpy(&v, s.data() + offset, sizeof(v));
  return v;
}
template <class T>
void put(std::string& s, std::size_t offset, T v) {
  std::memcpy(s.data() + offset, &v, sizeof(v));
}

// Recomputes both checksums of a version-2 file after a patch, so that only
// the loader's other checks (and the validator) stand in the way.
void reseal(std::string& s) {
  put<std::uint64_t>(s, 72, XXH3_64bits_withSeed(s.data() + 96, s.size() - 96, get<std::uint8_t>(s, 42)));
  put<std::uint64_t>(s, 80, 0);
  put<std::uint64_t>(s, 80, XXH3_64bits(s.data(), 96));
}
// Only the header checksum: the pool checksum stays the writer's.
void reseal_header(std::string& s) {
  put<std::uint64_t>(s, 80, 0);
  put<std::uint64_t>(s, 80, XXH3_64bits(s.data(), 96));
}
// The same file as version 1 wrote it: header checksum over bytes 0..79,
// unseeded pool checksum.
std::string as_version1(std::string s) {
  put<std::uint32_t>(s, 8, 1);
  put<std::uint64_t>(s, 72, XXH3_64bits(s.data() + 96, s.size() - 96));
  put<std::uint64_t>(s, 80, XXH3_64bits(s.data(), 80));
  return s;
}

template <class V>
bool same_pool(const Matrix<V>& a, const Matrix<V>& b) {
  return a.pool_bytes() == b.pool_bytes() &&
         std::memcmp(a.content().pool.data(), b.content().pool.data(), a.pool_bytes()) == 0;
}

template <class V>
bool is_wide(const Matrix<V>& m) {
  return (m.content().header().flags & pool_flag_wide) != 0;
}

}  // namespace

TEST(HspFile, RoundTripWithState) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  const auto a = build_matrix(random_coo<float>(700, 300, 5000, rng), 32).transpose().scaled(-2.5f);
  const auto p = temp_path("a.hsp");
  save_hsp(p, a);
  const auto b = load_hsp<float>(p);
  EXPECT_TRUE(b.transposed());
  EXPECT_EQ(b.scale(), -2.5f);
  EXPECT_EQ(b.rows(), 300u);
  EXPECT_EQ(b.cols(), 700u);
  ASSERT_EQ(a.pool_bytes(), b.pool_bytes());
  EXPECT_EQ(0, std::memcmp(a.content().pool.data(), b.content().pool.data(), a.pool_bytes()));
  EXPECT_EQ(fs::file_size(p), hsp_header_bytes + a.pool_bytes());
  const auto info = read_hsp_info(p);
  EXPECT_EQ(info.value_type, ValueType::f32);
  EXPECT_EQ(info.nnz, a.nnz());

  const auto e = Matrix<double>(Matrix<double>::empty_content(5, 6, 4));
  save_hsp(temp_path("empty.hsp"), e);
  EXPECT_EQ(load_hsp<double>(temp_path("empty.hsp")).nnz(), 0u);
}

// A file of the standard format (as every file written before wide nodes were
// the default) loads as it is: its pool carries its own flag.
TEST(HspFile, StandardFormatFilesLoadAsTheyAre) {
  std::mt19937_64 rng(5);
  const auto coo = random_coo<double>(40000, 30000, 20000, rng);
  const auto standard = build_matrix(coo, BuildOptions{16, false});
  const auto p = temp_path("standard.hsp");
  save_hsp(p, standard);
  const auto back = load_hsp<double>(p);
  EXPECT_EQ(back.content().header().flags & pool_flag_wide, 0);
  EXPECT_EQ(validate(back.content()).coow, 0u);
  ASSERT_EQ(back.pool_bytes(), standard.pool_bytes());
  EXPECT_EQ(0, std::memcmp(back.content().pool.data(), standard.content().pool.data(), standard.pool_bytes()));
  EXPECT_GT(standard.pool_bytes(), build_matrix(coo, 16).pool_bytes());  // the default would be smaller
}

TEST(HspFile, RejectsBadFiles) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  const auto a = build_matrix(random_coo<double>(500, 500, 3000, rng), 16);
  const auto good = temp_path("good.hsp");
  save_hsp(good, a);
  const std::string bytes = bytes_of(good);

  expect_load_error<double>(temp_path("missing.hsp"), "cannot open");
  expect_load_error<float>(good, "holds f64 values, expected f32");

  auto variant = [&](const std::string& name, std::string content, const std::string& needle) {
    const auto p = temp_path(name);
    write_bytes(p, content);
    expect_load_error<double>(p, needle);
  };
  variant("short-header.hsp", bytes.substr(0, 50), "shorter than the 96-byte header");
  variant("empty-file.hsp", "", "shorter than the 96-byte header");
  variant("truncated.hsp", bytes.substr(0, bytes.size() - 16), "truncated");
  variant("trailing.hsp", bytes + "xx", "trailing bytes");
  std::string s = bytes;
  s[0] = 'X';
  variant("magic.hsp", s, "bad magic");
  s = bytes;
  s[20] ^= 1;  // rows: the header checksum catches it
  variant("header.hsp", s, "header checksum");
  s = bytes;
  s[bytes.size() - 5] ^= 0x40;  // a value byte in the pool
  variant("pool.hsp", s, "pool checksum");
  s = bytes;
  s[8] = 9;  // version
  variant("version.hsp", s, "unsupported .hsp version 9");
  s = bytes;
  s[8] = 0;
  variant("version0.hsp", s, "unsupported .hsp version 0 (this build reads versions 1 to 2)");
}

TEST(HspFile, ValidatesPoolEvenWithGoodChecksum) {
  // A file whose checksums are right but whose pool breaks an invariant: the
  // loader must run the validator, not trust the checksum.
  Coo<double> coo{16, 16, {0, 5}, {0, 5}, {1, 2}};
  auto c = std::make_shared<Content<double>>(build_matrix(coo, 4).content());
  c->nnz = 3;  // wrong count
  const auto p = temp_path("invalid-pool.hsp");
  save_hsp(p, Matrix<double>(c));
  expect_load_error<double>(p, "invalid HiSparse pool");
}

TEST(HspFile, CorruptPoolsNeverCrash) {
  // Random byte corruptions of valid pools, with the checksums recomputed so
  // that the validator (not the checksum) must catch them: every load either
  // succeeds with a pool that validates, or throws hisparse::Error.
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  // Both formats: the default (wide nodes allowed) and the standard one.
  const auto s1 = random_coo<double>(300, 200, 800, rng);
  const auto s2 = clustered_coo<double>(100, 100, 2, 40, 0.9, rng);
  const auto s3 = random_coo<double>(5000, 5000, 300, rng);
  const std::vector<Matrix<double>> sources = {
      build_matrix(s1, 4), build_matrix(s2, 8), build_matrix(s3, 16),
      build_matrix(s1, BuildOptions{4, false}), build_matrix(s2, BuildOptions{8, false}),
      build_matrix(s3, BuildOptions{16, false})};
  int rejected = 0, accepted = 0;
  for (int round = 0; round < 3000; ++round) {
    const Matrix<double>& src = sources[round % sources.size()];
    auto c = std::make_shared<Content<double>>(src.content());
    std::uniform_int_distribution<std::size_t> pos(0, c->pool.size() - 1);
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) {
      const std::size_t at = pos(rng);
      c->pool.data()[at] = static_cast<std::byte>(rng() % 4 == 0 ? 0xFF : rng() & 0xFF);
    }
    const auto p = temp_path("fuzz.hsp");
    save_hsp(p, Matrix<double>(c));
    try {
      const auto m = load_hsp<double>(p);
      validate(m.content());
      (void)to_coo(m);
      ++accepted;
    } catch (const Error&) {
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 1000);  // most corruptions break an invariant
  (void)accepted;             // value-only corruptions are valid pools
}

// ---- Issue 19, class 1: sizes from counts read from the file are 64-bit ------

TEST(HspFile, LayoutsIn64BitsAgreeWhereANodeFitsAPool) {
  for (std::uint32_t elem : {4u, 8u, 16u}) {
    for (NodeType t : {NodeType::coo1, NodeType::coo2, NodeType::coo4})
      for (std::uint32_t n = 1; n <= 65536; ++n) ASSERT_TRUE(same_layout(coo_layout(t, n, elem), coo_layout64(t, n, elem)));
    for (std::uint64_t n = 1; n <= (std::uint64_t{1} << 28); n = n < 70000 ? n + 1 : n * 3 + 1)
      ASSERT_TRUE(same_layout(coow_layout(static_cast<std::uint32_t>(n), elem), coow_layout64(n, elem))) << n;
    // Near 2^32 the 32-bit COOW layout wraps to a node of 16 bytes; the
    // 64-bit one does not.
    for (std::uint32_t n : {0x40000000u, 0x80000000u, 0xFFFFFFFDu, 0xFFFFFFFFu}) {
      EXPECT_LT(coow_layout(n, elem).bytes, 64u) << n;
      EXPECT_GT(coow_layout64(n, elem).bytes, std::uint64_t{n} * 4) << n;
    }
  }
}

namespace {
// A wide pool at node size 256 whose root is one COOW node: scattered entries
// in a depth-2 matrix.
template <class V>
Matrix<V> coow_root_matrix() {
  Coo<V> coo{1000, 1000, {}, {}, {}};
  for (index_t i = 0; i < 20; ++i) coo.push((i * 97) % 1000, (i * 389 + 5) % 1000, V(static_cast<float>(i + 1)));
  return build_matrix(coo, 256);
}
}  // namespace

TEST(HspFile, CoowCountNearTwoTo32IsRejectedNotReadPastThePool) {
  // The entry count of a COOW node is a u32; at d = 256 every u32 passes its
  // range test ([1, d^4]), and the 32-bit layout of a count near 2^32 wraps
  // to 16 bytes. The validator must size the node in 64 bits and find it
  // larger than what is left of the pool, before any coordinate is read.
  const auto run = [](auto tag) {
    using V = decltype(tag);
    const Matrix<V> m = coow_root_matrix<V>();
    ASSERT_EQ(validate(m.content()).coow, 1u);
    ASSERT_EQ(ref_type(m.content().root()), NodeType::coow);
    const std::uint32_t off = ref_offset(m.content().root());
    for (std::uint32_t count : {21u, 0x40000000u, 0x80000000u, 0xFFFFFFFCu, 0xFFFFFFFDu, 0xFFFFFFFFu}) {
      SCOPED_TRACE(count);
      auto c = std::make_shared<Content<V>>(m.content());
      std::memcpy(c->pool.data() + off, &count, sizeof(count));
      try {
        validate(*c);
        ADD_FAILURE() << "validated a COOW node of " << count << " entries";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("COOW node of"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("runs past the end of the pool"), std::string::npos) << e.what();
      }
      const auto p = temp_path("coow-count.hsp");
      save_hsp(p, Matrix<V>(c));  // checksums recomputed: only the validator stands in the way
      expect_load_error<V>(p, "runs past the end of the pool");
    }
  };
  run(double{});
  run(float{});
  run(std::complex<double>{});
}

TEST(HspFile, SparseNodeCountIsCheckedAgainstTheBytesLeft) {
  // The standard format at d = 256: the root is a sparse inner node, the last
  // node of the pool. A count within [1, d*d] whose layout is longer than
  // what is left fails the 64-bit size check.
  Coo<double> coo{1000, 1000, {1, 300, 600, 900}, {2, 310, 620, 930}, {1, 2, 3, 4}};
  const Matrix<double> m = build_matrix(coo, BuildOptions{256, false});
  const std::uint32_t off = ref_offset(m.content().root());
  ASSERT_NE(ref_type(m.content().root()), NodeType::dense);
  for (std::uint32_t count : {5u, 65536u}) {
    auto c = std::make_shared<Content<double>>(m.content());
    std::memcpy(c->pool.data() + off, &count, sizeof(count));
    const auto p = temp_path("coo-count.hsp");
    save_hsp(p, Matrix<double>(c));
    expect_load_error<double>(p, "sparse node of");
    expect_load_error<double>(p, "runs past the end of the pool");
  }
}

// ---- Issue 19, class 4: FIFOs, directories, devices --------------------------

TEST(HspFile, RefusesNonRegularFilesWithoutOpeningThem) {
  const auto fifo = temp_path("fifo.hsp");
  fs::remove(fifo);
  ASSERT_EQ(0, ::mkfifo(fifo.c_str(), 0600)) << std::strerror(errno);
  // No writer ever opens the FIFO: a loader that opened it would block here.
  expect_load_error<double>(fifo, "not a regular file (a FIFO (named pipe))");
  expect_error(fifo, "a FIFO", [](const fs::path& f) { (void)read_hsp_info(f); });
  expect_error(fifo, "a FIFO", [](const fs::path& f) { (void)load_hsp_as<float>(f); });
  fs::remove(fifo);

  const auto dir = temp_path("dir.hsp");
  fs::create_directories(dir);
  expect_load_error<double>(dir, "not a regular file (a directory)");
  if (fs::exists("/dev/null")) expect_load_error<double>("/dev/null", "not a regular file (a character device)");
  // A symbolic link to a regular file is followed.
  const auto good = temp_path("target.hsp"), link = temp_path("link.hsp");
  save_hsp(good, build_matrix(Coo<double>{4, 4, {1}, {2}, {3.0}}, 2));
  fs::remove(link);
  fs::create_symlink(good, link);
  EXPECT_EQ(load_hsp<double>(link).nnz(), 1u);
}

// ---- Issue 19, class 14: file names in messages are escaped -------------------

TEST(HspFile, FileNamesInMessagesAreEscaped) {
  // f(p) must throw a hisparse::Error whose message shows the name escaped
  // (\x1b), the reason, and no raw ESC byte.
  const auto expect_escaped = [](const fs::path& p, const std::string& needle, auto&& f) {
    try {
      f(p);
      ADD_FAILURE() << "accepted " << printable_text(p.string());
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(printable_text(p.string()) + ": "), std::string::npos) << printable_text(msg);
      EXPECT_NE(msg.find("\\x1b[1m"), std::string::npos) << printable_text(msg);
      EXPECT_NE(msg.find(needle), std::string::npos) << printable_text(msg);
      EXPECT_EQ(msg.find('\x1b'), std::string::npos) << printable_text(msg);
    }
  };
  const auto load = [](const fs::path& f) { (void)load_hsp<double>(f); };
  const auto missing = temp_path("missing\x1b[1m.hsp");
  fs::remove(missing);
  expect_escaped(missing, "cannot open for reading", load);
  expect_escaped(missing, "cannot open for reading", [](const fs::path& f) { (void)read_hsp_info(f); });
  expect_escaped(missing, "cannot open for reading", [](const fs::path& f) { (void)load_hsp_as<float>(f); });
  const auto garbage = temp_path("garbage\x1b[1m.hsp");
  write_bytes(garbage, std::string("HISPARSE") + std::string(100, '\x1b'));
  expect_escaped(garbage, "", load);
  write_bytes(garbage, "\x1b]0;title\x07 not an .hsp file" + std::string(96, ' '));
  expect_escaped(garbage, "bad magic", load);
  fs::remove(garbage);
  // Saving: the atomic writer's messages escape the target and the paths it names.
  const Matrix<double> m = build_matrix(Coo<double>{2, 2, {0}, {1}, {1.0}}, 2);
  const auto nowhere = temp_path("no-such-dir\x1b[1m") / "out.hsp";
  expect_escaped(nowhere, "cannot create a temporary file", [&](const fs::path& f) { save_hsp(f, m); });
  const auto dir = temp_path("dir\x1b[1m.hsp");
  fs::create_directories(dir);
  expect_escaped(dir, "Is a directory", [&](const fs::path& f) { save_hsp(f, m); });
  fs::remove(dir);
}

// ---- Issue 19, class 6: narrowing on load --------------------------------------

TEST(HspFile, NarrowingFollowsTheMatrixMarketRules) {
  const auto p = temp_path("narrow.hsp");
  const auto save = [&](const Coo<double>& coo, bool transposed = false, double scale = 1.0) {
    Matrix<double> m = build_matrix(coo, 4).scaled(scale);
    save_hsp(p, transposed ? m.transpose() : m);
  };
  const auto as_f32 = [](const fs::path& f) { (void)load_hsp_as<float>(f); };
  const auto as_c64 = [](const fs::path& f) { (void)load_hsp_as<std::complex<float>>(f); };

  // Overflow: 1e39 is an ordinary double but no float (it would become inf).
  save(Coo<double>{10, 12, {0, 2, 5}, {1, 3, 7}, {0.1, 1e39, 2.0}});
  expect_error(p, "value 1e+39 overflows f32 at (row 2, column 3), 0-based", as_f32);
  expect_error(p, "value 1e+39 overflows c64 at (row 2, column 3), 0-based", as_c64);
  EXPECT_EQ(load_hsp_as<double>(p).nnz(), 3u);  // its own type
  EXPECT_EQ(load_hsp_as<std::complex<double>>(p).nnz(), 3u);  // widening
  // Positions are those of the logical matrix (the transpose applied).
  save(Coo<double>{10, 12, {0, 2, 5}, {1, 3, 7}, {0.1, -1e39, 2.0}}, true);
  expect_error(p, "value -1e+39 overflows f32 at (row 3, column 2), 0-based", as_f32);
  // Just above the largest float rounds to it; from the halfway point up it overflows.
  save(Coo<double>{10, 12, {0}, {0}, {0x1.ffffffp127}});
  expect_error(p, "overflows f32", as_f32);

  // An integer must stay exact (16777217 would become 16777216).
  save(Coo<double>{10, 12, {0, 4}, {1, 9}, {0.5, 16777217.0}});
  expect_error(p, "integer value 16777217 is not exactly representable in f32 at (row 4, column 9), 0-based", as_f32);
  save(Coo<double>{10, 12, {4}, {9}, {-123456789.0}});  // the nearest float is -123456792
  expect_error(p, "integer value -123456789 is not exactly representable in f32", as_f32);

  // What the Matrix Market reader accepts, rounded: non-integers, integers
  // that are floats, numbers beyond 2^63, underflow, infinities, NaN.
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const std::vector<double> ok = {0.1, 16777216.0, -3.0, 1e30, 1e-50, 3.40282356e38, inf, -inf, nan, 0.0};
  Coo<double> coo{10, 12, {}, {}, {}};
  for (std::size_t i = 0; i < ok.size(); ++i) coo.push(i, i, ok[i]);
  for (const bool wide : {true, false}) {
    const Matrix<double> m = build_matrix(coo, BuildOptions{4, wide}).transpose().scaled(0.25);
    save_hsp(p, m);
    const Matrix<float> f = load_hsp_as<float>(p);
    validate(f.content());
    EXPECT_EQ(f.node_size(), 4u);
    EXPECT_EQ(is_wide(f), wide);
    EXPECT_TRUE(f.transposed());
    EXPECT_EQ(f.scale(), 0.25f);
    EXPECT_EQ(f.nnz(), ok.size());
    const Coo<float> back = to_coo(f.with_state(false, 1.0f));
    for (std::size_t i = 0; i < ok.size(); ++i) {
      if (std::isnan(ok[i])) EXPECT_TRUE(std::isnan(back.val[i]));
      else if (std::fabs(ok[i]) > std::numeric_limits<float>::max() && std::isfinite(ok[i]))
        EXPECT_EQ(back.val[i], std::numeric_limits<float>::max());
      else EXPECT_EQ(back.val[i], static_cast<float>(ok[i])) << ok[i];
    }
    // The rebuilt pool is the one the builder makes for these f32 values.
    Coo<float> f32{10, 12, {}, {}, {}};
    for (std::size_t i = 0; i < ok.size(); ++i) f32.push(i, i, back.val[i]);
    EXPECT_TRUE(same_pool(f, build_matrix(f32, BuildOptions{4, wide})));
  }

  // The scale, by the same rules.
  const Coo<double> plain{10, 12, {1}, {1}, {1.0}};
  save(plain, false, 1e39);
  expect_error(p, "scale 1e+39 overflows f32", as_f32);
  save(plain, false, 16777217.0);
  expect_error(p, "integer scale 16777217 is not exactly representable in f32", as_f32);
  save(plain, false, 0.1);
  EXPECT_EQ(load_hsp_as<float>(p).scale(), 0.1f);
}

TEST(HspFile, NarrowingComplexAndRefusingComplexToReal) {
  using cd = std::complex<double>;
  using cf = std::complex<float>;
  const auto p = temp_path("narrow-c.hsp");
  const auto as_c64 = [](const fs::path& f) { (void)load_hsp_as<cf>(f); };
  save_hsp(p, build_matrix(Coo<cd>{9, 9, {0, 3}, {0, 8}, {cd(1, 2), cd(0.5, 1e39)}}, 2));
  expect_error(p, "imaginary part 1e+39 overflows c64 at (row 3, column 8), 0-based", as_c64);
  save_hsp(p, build_matrix(Coo<cd>{9, 9, {0, 3}, {0, 8}, {cd(1, 2), cd(16777217.0, 0)}}, 2));
  expect_error(p, "integer real part 16777217 is not exactly representable in c64", as_c64);
  expect_error(p, "holds c128 values, which cannot be loaded as f64 (the imaginary parts would be lost)",
               [](const fs::path& f) { (void)load_hsp_as<double>(f); });
  expect_error(p, "imaginary parts would be lost", [](const fs::path& f) { (void)load_hsp_as<float>(f); });
  save_hsp(p, build_matrix(Coo<cd>{9, 9, {0}, {0}, {cd(1, 2)}}, 2).scaled(cd(1, 1e39)));
  expect_error(p, "scale imaginary part 1e+39 overflows c64", as_c64);
  save_hsp(p, build_matrix(Coo<cd>{9, 9, {0, 3}, {0, 8}, {cd(1, 2), cd(0.1, -0.3)}}, 2).scaled(cd(0.5, -2)));
  const Matrix<cf> m = load_hsp_as<cf>(p);
  EXPECT_EQ(m.scale(), cf(0.5f, -2.0f));
  const Coo<cf> back = to_coo(m.with_state(false, cf(1)));
  EXPECT_EQ(back.val[1], cf(0.1f, -0.3f));
  // Widening is exact: f32 -> f64 -> c128 gives the same numbers.
  save_hsp(p, build_matrix(Coo<float>{9, 9, {2}, {5}, {0.1f}}, 2).scaled(3.5f));
  const Matrix<cd> w = load_hsp_as<cd>(p);
  EXPECT_EQ(to_coo(w).val[0], cd(static_cast<double>(0.1f) * 3.5, 0));
}

// ---- Issue 19, class 8: reserved fields, the scale, trailing bytes, type code --

TEST(HspFile, ReservedFieldsAndTheScaleAreChecked) {
  std::mt19937_64 rng(7);
  const auto good = temp_path("fields.hsp");
  save_hsp(good, build_matrix(random_coo<double>(300, 200, 900, rng), 16));
  const std::string bytes = bytes_of(good);
  EXPECT_EQ(get<std::uint32_t>(bytes, 8), hsp_version);
  auto variant = [&](const std::string& name, const std::function<void(std::string&)>& patch, const std::string& needle,
                     bool sealed = true) {
    std::string s = bytes;
    patch(s);
    if (sealed) reseal(s);
    const auto p = temp_path(name);
    write_bytes(p, s);
    expect_load_error<double>(p, needle);
  };
  variant("r0.hsp", [](std::string& s) { put<std::uint32_t>(s, 44, 1); }, "reserved header field at offset 44 is 1, not zero");
  // reserved1 lies after the checksum field; version 2 covers it...
  variant("r1.hsp", [](std::string& s) { put<std::uint64_t>(s, 88, 7); }, "header checksum mismatch", false);
  // ...and it must be zero even where the checksum has been recomputed.
  variant("r1s.hsp", [](std::string& s) { put<std::uint64_t>(s, 88, 7); }, "reserved header field at offset 88 is 7");
  variant("pool-reserved.hsp", [](std::string& s) { s[96 + 13] = 1; }, "reserved bytes 12..15 are not zero");
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  variant("nan.hsp", [&](std::string& s) { put<double>(s, 48, nan); }, "scale (nan, 0) is not finite");
  variant("inf.hsp", [&](std::string& s) { put<double>(s, 48, -inf); }, "scale (-inf, 0) is not finite");
  variant("im.hsp", [](std::string& s) { put<double>(s, 56, 2.0); },
          "scale has a non-zero imaginary part 2 in a matrix of real (f64) values");
  variant("im-inf.hsp", [&](std::string& s) { put<double>(s, 56, inf); }, "is not finite");
  // An f32 file's scale is an f32 value (stored as f64).
  variant("f32-scale.hsp", [](std::string& s) { s[42] = 1; put<double>(s, 48, 0.1); },
          "scale real part 0.1 is not an f32 value (the file holds f32 values)");
  // f64 and c64 pools both hold 8-byte values: a changed type code (with the
  // header re-sealed) must fail the pool checksum, which is seeded with it.
  {
    std::string s = bytes;
    s[42] = 3;
    reseal_header(s);
    const auto p = temp_path("type-code.hsp");
    write_bytes(p, s);
    expect_load_error<std::complex<float>>(p, "pool checksum mismatch");
    expect_error(p, "pool checksum mismatch", [](const fs::path& f) { (void)load_hsp_as<std::complex<double>>(f); });
  }
  // The writer refuses what no reader would accept.
  const auto m = build_matrix(Coo<double>{4, 4, {1}, {2}, {3.0}}, 2);
  expect_error(temp_path("unsaved.hsp"), "is not finite",
               [&](const fs::path& f) { save_hsp(f, m.scaled(inf)); });
  EXPECT_FALSE(fs::exists(temp_path("unsaved.hsp")));
}

// A pool with 32 bytes no node references (`where`: "after the last node" or
// "between nodes"): the validator refuses it, saying so, and so does the
// loader once it is saved as `file`.
namespace {
void expect_unreferenced_bytes_refused(const std::shared_ptr<Content<double>>& c, const std::string& where,
                                       const std::string& file) {
  try {
    validate(*c);
    ADD_FAILURE() << "validated a pool with unreferenced bytes " << where;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("32 unreferenced bytes " + where), std::string::npos) << e.what();
  }
  const auto p = temp_path(file);
  save_hsp(p, Matrix<double>(c));
  expect_load_error<double>(p, "unreferenced bytes " + where);
}
}  // namespace

TEST(HspFile, UnreferencedTrailingPoolBytesAreRejected) {
  std::mt19937_64 rng(11);
  for (const Matrix<double>& m : {build_matrix(random_coo<double>(300, 200, 900, rng), 16),
                                  build_matrix(random_coo<double>(300, 200, 900, rng), BuildOptions{16, false}),
                                  Matrix<double>(Matrix<double>::empty_content(7, 9, 4))}) {
    EXPECT_EQ(validate(m.content()).node_bytes + sizeof(PoolHeader), m.pool_bytes());
    auto c = std::make_shared<Content<double>>(m.content());
    AlignedBuffer longer(c->pool.size() + 32);  // zero bytes: the same entries, different bytes
    std::memcpy(longer.data(), c->pool.data(), c->pool.size());
    c->pool = std::move(longer);
    expect_unreferenced_bytes_refused(c, "after the last node", "trailing-pool.hsp");
  }
}

// Found by the fuzz suite's reasoning (tests/fuzz): unreferenced bytes between
// two nodes hide data and break "same entries, same size" like trailing ones.
TEST(HspFile, UnreferencedBytesBetweenNodesAreRejected) {
  std::mt19937_64 rng(12);
  for (const Matrix<double>& m : {build_matrix(random_coo<double>(300, 200, 900, rng), 16),
                                  build_matrix(random_coo<double>(300, 200, 900, rng), BuildOptions{16, false})}) {
    // The builder writes the root last: moving it 32 bytes on leaves a gap
    // before it and nothing after it.
    const NodeRef root = m.content().root();
    const std::uint64_t at = ref_offset(root);
    auto c = std::make_shared<Content<double>>(m.content());
    AlignedBuffer gapped(c->pool.size() + 32);
    std::memcpy(gapped.data(), c->pool.data(), at);
    std::memcpy(gapped.data() + at + 32, c->pool.data() + at, c->pool.size() - at);
    reinterpret_cast<PoolHeader*>(gapped.data())->root = make_ref(at + 32, ref_type(root));
    c->pool = std::move(gapped);
    expect_unreferenced_bytes_refused(c, "between nodes", "gapped-pool.hsp");
  }
}

TEST(HspFile, Version1FilesStillLoad) {
  std::mt19937_64 rng(13);
  const Matrix<double> a = build_matrix(random_coo<double>(40000, 30000, 3000, rng), 16).transpose().scaled(-1.5);
  ASSERT_GT(validate(a.content()).coow, 0u);
  const auto p2 = temp_path("v2.hsp"), p1 = temp_path("v1.hsp");
  save_hsp(p2, a);
  const std::string v1 = as_version1(bytes_of(p2));
  write_bytes(p1, v1);
  EXPECT_EQ(read_hsp_info(p1).version, 1u);
  EXPECT_EQ(read_hsp_info(p2).version, 2u);
  const Matrix<double> b = load_hsp<double>(p1);
  EXPECT_TRUE(same_pool(a, b));
  EXPECT_TRUE(b.transposed());
  EXPECT_EQ(b.scale(), -1.5);
  EXPECT_EQ(load_hsp_as<float>(p1).nnz(), a.nnz());
  // The version 2 checksums do not pass for version 1, nor the reverse.
  std::string s = bytes_of(p2);
  put<std::uint32_t>(s, 8, 1);
  write_bytes(p1, s);
  expect_load_error<double>(p1, "header checksum mismatch");
  s = v1;
  put<std::uint32_t>(s, 8, 2);
  put<std::uint64_t>(s, 80, 0);
  put<std::uint64_t>(s, 80, XXH3_64bits(s.data(), 96));  // v2 header checksum over a v1 pool checksum
  write_bytes(p1, s);
  expect_load_error<double>(p1, "pool checksum mismatch");
  // Version 1 rules for the fields its checksum does not cover: still zero.
  s = v1;
  put<std::uint64_t>(s, 88, 1);
  write_bytes(p1, s);
  expect_load_error<double>(p1, "reserved header field at offset 88");
}

TEST(HspFile, RealMatricesRoundTripWithoutSpareBytes) {
  // The builder never leaves bytes no node references (the validator would
  // refuse them), and a file holds exactly the pool: same entries, same bytes.
  const fs::path dir = matrices_dir();
  ASSERT_TRUE(fs::is_directory(dir)) << dir;
  int files = 0;
  const auto check = [&](const auto& coo, const std::string& name) {
    using V = typename std::decay_t<decltype(coo.val)>::value_type;
    for (const bool wide : {true, false}) {
      SCOPED_TRACE(name + (wide ? " wide" : " standard"));
      const Matrix<V> m = build_matrix(coo, BuildOptions{default_node_size, wide});
      EXPECT_EQ(validate(m.content()).node_bytes + sizeof(PoolHeader), m.pool_bytes());
      const auto p = temp_path("real.hsp");
      save_hsp(p, m);
      EXPECT_EQ(fs::file_size(p), hsp_header_bytes + m.pool_bytes());
      EXPECT_TRUE(same_pool(m, load_hsp<V>(p)));
    }
  };
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".mtx" || e.path().filename() == "block_2000.mtx") continue;
    if (read_matrix_market_header(e.path()).field == MmField::complex)
      check(read_matrix_market<std::complex<double>>(e.path()), e.path().filename().string());
    else
      check(read_matrix_market<float>(e.path()), e.path().filename().string());
    ++files;
  }
  EXPECT_GE(files, 21);
}
