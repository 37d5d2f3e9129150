// The reference SpMV against a plain CSR product of the same entries.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "hisparse/formats/builder.hpp"
#include "hisparse/ops/spmv_reference.hpp"
#include "support/random_matrix.hpp"
#include "support/test_seed.hpp"

using namespace hisparse;
using namespace hisparse::testing;

namespace {

// y = alpha * op(A) * x + beta * y from the summed entry map, in double.
template <class V>
std::vector<double> plain_spmv(const Coo<V>& coo, bool transpose, double scale, const std::vector<V>& x,
                               const std::vector<V>& y, double alpha, double beta) {
  const index_t rows = transpose ? coo.cols : coo.rows;
  std::vector<double> out(rows, 0.0);
  if (beta != 0.0)
    for (index_t i = 0; i < rows; ++i) out[i] = beta * static_cast<double>(y[i]);
  for (const auto& [rc, v] : summed(coo)) {
    const index_t r = transpose ? rc.second : rc.first, c = transpose ? rc.first : rc.second;
    out[r] += alpha * scale * static_cast<double>(v) * static_cast<double>(x[c]);
  }
  return out;
}

// Both formats: the builder's default (wide nodes allowed) and the standard one.
template <class V>
void check_spmv(const Coo<V>& coo, std::uint32_t d, std::mt19937_64& rng, const std::string& what) {
  const double tol = std::is_same_v<V, float> ? 1e-5 : 1e-12;
  for (const bool wide : {true, false}) {
    const Matrix<V> base = build_matrix(coo, BuildOptions{d, wide});
    for (bool t : {false, true}) {
      for (auto [alpha, beta, scale] : {std::tuple{1.0, 0.0, 1.0}, {2.0, 0.5, 1.0}, {-1.5, 1.0, 3.0}, {0.0, 2.0, 1.0}}) {
        SCOPED_TRACE(what + (t ? " T" : " N") + " alpha " + std::to_string(alpha) + " beta " + std::to_string(beta) +
                     " scale " + std::to_string(scale) + " d " + std::to_string(d) + (wide ? " default (wide)" : " standard"));
        Matrix<V> a = base.scaled(static_cast<V>(scale));
        if (t) a = a.transpose();
        std::vector<V> x(a.cols()), y(a.rows());
        for (auto& v : x) v = random_value<V>(rng);
        for (auto& v : y) v = beta == 0.0 ? std::numeric_limits<V>::quiet_NaN() : random_value<V>(rng);
        const auto expect = plain_spmv(coo, t, scale, x, y, alpha, beta);
        ops::spmv_reference<V>(a, x, y, static_cast<V>(alpha), static_cast<V>(beta));
        for (std::size_t i = 0; i < y.size(); ++i)
          ASSERT_NEAR(static_cast<double>(y[i]), expect[i], tol * (1.0 + std::abs(expect[i]))) << "row " << i;
      }
    }
  }
}

}  // namespace

TEST(SpmvReference, MatchesPlainProduct) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  for (std::uint32_t d : {2u, 16u, 128u}) {
    check_spmv(random_coo<double>(500, 500, 4000, rng), d, rng, "square f64");
    check_spmv(random_coo<float>(300, 800, 3000, rng), d, rng, "wide f32");
    check_spmv(clustered_coo<double>(600, 200, 4, 150, 0.95, rng), d, rng, "clustered f64");
    check_spmv(Coo<double>{40, 30, {}, {}, {}}, d, rng, "empty");
  }
}

TEST(SpmvReference, RejectsWrongSizes) {
  const auto a = build_matrix(Coo<double>{4, 3, {0}, {0}, {1.0}});
  std::vector<double> x(3), y(4), bad(5);
  EXPECT_THROW(ops::spmv_reference<double>(a, bad, y), Error);
  EXPECT_THROW(ops::spmv_reference<double>(a, x, bad), Error);
  EXPECT_THROW(ops::spmv_reference<double>(a.transpose(), x, y), Error);
}

TEST(SpmvReference, WideNodes) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  const auto coo = random_coo<double>(30000, 20000, 15000, rng);
  for (bool t : {false, true}) {
    const Matrix<double> wide = t ? build_matrix(coo, BuildOptions{64, true}).transpose() : build_matrix(coo, BuildOptions{64, true});
    std::vector<double> x(wide.cols()), y(wide.rows(), 0.0);
    for (auto& v : x) v = random_value<double>(rng);
    const auto expect = plain_spmv(coo, t, 1.0, x, y, 1.0, 0.0);
    ops::spmv_reference<double>(wide, x, y);
    for (std::size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], expect[i], 1e-12 * (1 + std::abs(expect[i]))) << "row " << i;
  }
}
