// The .hsp file: round trips with state, and every kind of bad file.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "hisparse/formats/builder.hpp"
#include "hisparse/formats/hsp_file.hpp"
#include "hisparse/formats/validate.hpp"
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

template <class V>
void expect_load_error(const fs::path& p, const std::string& needle) {
  try {
    (void)load_hsp<V>(p);
    ADD_FAILURE() << "loaded a bad file; expected: " << needle;
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(p.filename().string()), std::string::npos) << msg;
    EXPECT_NE(msg.find(needle), std::string::npos) << msg;
  }
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
