// Matrix Market -> HiSparse -> COO equals the input for every SuiteSparse
// matrix in shared/matrices, at every node size, in both formats (the
// default, wide nodes allowed, and the standard one).
#include <gtest/gtest.h>

#include <complex>
#include <filesystem>

#include "hisparse/formats/builder.hpp"
#include "hisparse/formats/matrix_market.hpp"
#include "hisparse/formats/validate.hpp"
#include "support/matrices_dir.hpp"
#include "support/random_matrix.hpp"

using namespace hisparse;
using namespace hisparse::testing;
namespace fs = std::filesystem;

namespace {

template <class V>
void expect_entries(const Matrix<V>& m, const EntryMap<V>& expect) {
  const PoolStats st = validate(m.content());
  EXPECT_EQ(st.node_bytes + sizeof(PoolHeader), m.pool_bytes());
  const Coo<V> out = to_coo(m);
  ASSERT_EQ(out.nnz(), expect.size());
  std::size_t i = 0;
  for (const auto& [rc, v] : expect) {
    ASSERT_EQ(out.row[i], rc.first);
    ASSERT_EQ(out.col[i], rc.second);
    ASSERT_EQ(out.val[i], v);
    ++i;
  }
}

template <class V>
void round_trip(const fs::path& file) {
  const Coo<V> in = read_matrix_market<V>(file);
  const auto expect = summed(in);
  for (std::uint32_t d : {2u, 4u, 16u, 128u, 256u}) {
    SCOPED_TRACE(file.filename().string() + " d " + std::to_string(d));
    const Matrix<V> m = build_matrix(in, d);
    const Matrix<V> standard = build_matrix(in, BuildOptions{d, false});
    {
      SCOPED_TRACE("default (wide nodes allowed)");
      expect_entries(m, expect);
    }
    {
      SCOPED_TRACE("standard");
      expect_entries(standard, expect);
    }
    EXPECT_EQ(validate(standard.content()).coow, 0u);
    EXPECT_LE(m.pool_bytes(), standard.pool_bytes());
  }
}

}  // namespace

TEST(RealMatrices, RoundTripEveryFile) {
  const fs::path dir = hisparse::testing::matrices_dir();
  ASSERT_TRUE(fs::is_directory(dir)) << dir;
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".mtx") continue;
    const auto name = e.path().filename().string();
    if (name == "block_2000.mtx") {
      // Counts its indices from 0, which Matrix Market forbids: rejected with the line.
      EXPECT_THROW(read_matrix_market<double>(e.path()), Error);
      continue;
    }
    if (read_matrix_market_header(e.path()).field == MmField::complex) round_trip<std::complex<double>>(e.path());
    else {
      round_trip<double>(e.path());
      round_trip<float>(e.path());
    }
    ++files;
  }
  EXPECT_GE(files, 21);
}
