// The reference add against a map of summed logical entries.
#include <gtest/gtest.h>

#include <cmath>

#include "hisparse/formats/builder.hpp"
#include "hisparse/formats/validate.hpp"
#include "hisparse/ops/add_reference.hpp"
#include "hisparse/formats/node.hpp"
#include "support/random_matrix.hpp"
#include "support/test_seed.hpp"

using namespace hisparse;
using namespace hisparse::testing;

namespace {

template <class V>
EntryMap<double> logical(const Coo<V>& coo, bool t, double k) {
  EntryMap<double> out;
  for (const auto& [rc, v] : summed(coo)) out[t ? std::pair{rc.second, rc.first} : rc] += k * static_cast<double>(v);
  return out;
}

// The matrix holds exactly the entries of the map, in row-major order.
void expect_entries(const Matrix<double>& c, const EntryMap<double>& expect) {
  const auto out = to_coo(c);
  ASSERT_EQ(out.nnz(), expect.size());
  std::size_t i = 0;
  for (const auto& [rc, v] : expect) {
    ASSERT_EQ(out.row[i], rc.first);
    ASSERT_EQ(out.col[i], rc.second);
    ASSERT_NEAR(out.val[i], v, 1e-12 * (1 + std::abs(v)));
    ++i;
  }
}

}  // namespace

TEST(AddReference, MatchesEntryMap) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  for (std::uint32_t d : {2u, 4u, 16u, 128u}) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        // Both formats: the builder's default (wide nodes allowed) and the standard one.
        const bool wide = (ta + tb) % 2 == 0;
        SCOPED_TRACE("d " + std::to_string(d) + " ta " + std::to_string(ta) + " tb " + std::to_string(tb) +
                     (wide ? " default (wide)" : " standard"));
        // op(A) and op(B) are both 300 x 200.
        const auto ca = ta ? clustered_coo<double>(200, 300, 3, 100, 0.9, rng) : random_coo<double>(300, 200, 2000, rng);
        const auto cb = tb ? random_coo<double>(200, 300, 1500, rng) : clustered_coo<double>(300, 200, 3, 120, 0.8, rng);
        Matrix<double> a = build_matrix(ca, BuildOptions{d, wide}).scaled(2.0), b = build_matrix(cb, BuildOptions{d, wide});
        if (ta) a = a.transpose();
        if (tb) b = b.transpose();
        const auto c = ops::add_reference(a, b, 0.5, -3.0);
        EXPECT_EQ((c.content().header().flags & pool_flag_wide) != 0, wide);
        validate(c.content());
        EXPECT_FALSE(c.transposed());
        EXPECT_EQ(c.scale(), 1.0);
        auto expect = logical(ca, ta, 1.0);
        for (const auto& [rc, v] : logical(cb, tb, -3.0)) expect[rc] += v;
        expect_entries(c, expect);
      }
    }
  }
}

TEST(AddReference, CancellationKeepsExplicitZero) {
  const auto a = build_matrix(Coo<double>{8, 8, {1}, {2}, {4.0}}, 2);
  const auto c = ops::add_reference(a, a, 1.0, -1.0);
  const auto out = to_coo(c);
  ASSERT_EQ(out.nnz(), 1u);
  EXPECT_EQ(out.val[0], 0.0);
}

// An entry only one operand has is alpha*a + 0 (or 0 + beta*b), so a product
// of -0 gives +0, in wide sub-trees as in ordinary nodes (the GPU add
// matches this bit for bit).
TEST(AddReference, OneSidedNegativeZeroBecomesPositiveZero) {
  for (bool wide : {false, true}) {
    SCOPED_TRACE(wide ? "wide nodes" : "standard nodes");
    Coo<double> ca{64, 64, {}, {}, {}}, cb{64, 64, {}, {}, {}};
    ca.push(1, 2, 0.0);
    cb.push(40, 50, 0.0);
    for (index_t i = 0; i < 64; i += 7) ca.push(i, 63 - i, 1.0);  // scattered: wide nodes appear
    const auto a = build_matrix(ca, BuildOptions{4, wide}), b = build_matrix(cb, BuildOptions{4, wide});
    const auto out = to_coo(ops::add_reference(a, b, -1.0, -1.0));
    int zeros = 0;
    for (std::size_t k = 0; k < out.nnz(); ++k) {
      if (out.val[k] != 0.0) continue;
      ++zeros;
      EXPECT_FALSE(std::signbit(out.val[k])) << "entry (" << out.row[k] << ", " << out.col[k] << ")";
    }
    EXPECT_EQ(zeros, 2);
  }
}

TEST(AddReference, RejectsMismatchedOperands) {
  const auto a = build_matrix(Coo<double>{8, 6, {1}, {2}, {4.0}}, 4);
  EXPECT_THROW(ops::add_reference(a, a.transpose()), Error);
  const auto b = build_matrix(Coo<double>{8, 6, {1}, {2}, {4.0}}, 8);
  EXPECT_THROW(ops::add_reference(a, b), Error);
}

TEST(AddReference, WideNodes) {
  // Wide operands (either or both, any transposes): the result is a wide pool
  // that validates (so it follows the COOW rule) and holds the right sums.
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  for (std::uint32_t d : {4u, 16u, 64u}) {
    for (bool ta : {false, true}) {
      for (bool wb : {false, true}) {
        SCOPED_TRACE("d " + std::to_string(d) + " ta " + std::to_string(ta) + " wide b " + std::to_string(wb));
        const auto ca = ta ? random_coo<double>(9000, 12000, 5000, rng) : random_coo<double>(12000, 9000, 5000, rng);
        const auto cb = clustered_coo<double>(12000, 9000, 3, 300, 0.5, rng);
        Matrix<double> a = build_matrix(ca, BuildOptions{d, true});
        if (ta) a = a.transpose();
        const Matrix<double> b = build_matrix(cb, BuildOptions{d, wb});
        const auto c = ops::add_reference(a, b, 2.0, -1.0);
        validate(c.content());
        EXPECT_TRUE(c.content().header().flags & pool_flag_wide);
        auto expect = logical(ca, ta, 2.0);
        for (const auto& [rc, v] : logical(cb, false, -1.0)) expect[rc] += v;
        expect_entries(c, expect);
      }
    }
  }
}
