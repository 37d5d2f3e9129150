// Deep copy and materialize on the host.
#include <gtest/gtest.h>

#include <cstring>

#include "hisparse/formats/builder.hpp"
#include "hisparse/formats/validate.hpp"
#include "hisparse/ops/copy_reference.hpp"
#include "support/random_matrix.hpp"
#include "support/test_seed.hpp"

using namespace hisparse;
using namespace hisparse::testing;

TEST(CopyReference, DeepCopyIsEqualAndIndependent) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  const auto a = build_matrix(random_coo<float>(900, 700, 6000, rng), 64).transpose().scaled(2.0f);
  const auto b = ops::copy_reference(a);
  EXPECT_NE(b.content_ptr(), a.content_ptr());
  EXPECT_NE(b.content().pool.data(), a.content().pool.data());
  ASSERT_EQ(b.pool_bytes(), a.pool_bytes());
  EXPECT_EQ(0, std::memcmp(a.content().pool.data(), b.content().pool.data(), a.pool_bytes()));
  EXPECT_EQ(b.transposed(), a.transposed());
  EXPECT_EQ(b.scale(), a.scale());
  validate(b.content());
}

TEST(CopyReference, MaterializeWritesStateIntoContent) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  for (std::uint32_t d : {2u, 8u, 128u}) {
    for (const bool wide : {true, false}) {
      SCOPED_TRACE("d " + std::to_string(d) + (wide ? " default (wide)" : " standard"));
      const BuildOptions o{d, wide};
      const auto coo = clustered_coo<double>(500, 300, 4, 90, 0.7, rng);
      const auto a = build_matrix(coo, o).transpose().scaled(-0.25);
      const auto m = ops::materialize_reference(a);
      validate(m.content());
      EXPECT_FALSE(m.transposed());
      EXPECT_EQ(m.scale(), 1.0);
      EXPECT_EQ(m.rows(), 300u);
      EXPECT_EQ(m.cols(), 500u);
      const auto want = to_coo(a), got = to_coo(m);
      EXPECT_EQ(got.row, want.row);
      EXPECT_EQ(got.col, want.col);
      EXPECT_EQ(got.val, want.val);
      // Materializing the plain matrix reproduces the builder's content exactly
      // (same canonical nodes), node order aside: compare the entries.
      const auto plain = ops::materialize_reference(build_matrix(coo, o));
      EXPECT_EQ(to_coo(plain).val, to_coo(build_matrix(coo, o)).val);
      EXPECT_EQ(plain.pool_bytes(), build_matrix(coo, o).pool_bytes());
      EXPECT_EQ((m.content().header().flags & pool_flag_wide) != 0, wide);
    }
  }
}

TEST(CopyReference, MaterializeWideNodes) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  const auto coo = random_coo<float>(20000, 7000, 6000, rng);
  const auto a = build_matrix(coo, BuildOptions{32, true}).transpose().scaled(3.0f);
  const auto m = ops::materialize_reference(a);
  const auto st = validate(m.content());
  EXPECT_GT(st.coow, 0u);
  EXPECT_FALSE(m.transposed());
  const auto want = to_coo(a), got = to_coo(m);
  EXPECT_EQ(got.row, want.row);
  EXPECT_EQ(got.col, want.col);
  EXPECT_EQ(got.val, want.val);
  // The materialized transpose is what the builder makes from the transposed entries.
  EXPECT_EQ(m.pool_bytes(), build_matrix(want, BuildOptions{32, true}).pool_bytes());
}
