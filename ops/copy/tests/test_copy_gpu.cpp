// GPU copy and materialize against the host: the copy equals the source (and
// validates), the materialized matrix equals the host materialization, under
// every controller.
#include <gtest/gtest.h>

#include <cstring>

#include "hisparse/formats/builder.hpp"
#include "hisparse/formats/device_matrix.hpp"
#include "hisparse/formats/matrix_market.hpp"
#include "hisparse/formats/validate.hpp"
#include "hisparse/ops/gpu_controllers.hpp"
#include "hisparse/ops/copy_gpu.hpp"
#include "hisparse/ops/copy_reference.hpp"
#include "support/matrices_dir.hpp"
#include "support/random_matrix.hpp"
#include "support/wide_matrix.hpp"
#include "support/test_seed.hpp"

using namespace hisparse;
using namespace hisparse::testing;

namespace {

template <class V>
void expect_same_entries(const Matrix<V>& got, const Matrix<V>& want, const std::string& what) {
  SCOPED_TRACE(what);
  validate(got.content());
  EXPECT_EQ(got.rows(), want.rows());
  EXPECT_EQ(got.cols(), want.cols());
  EXPECT_EQ(got.pool_bytes(), want.pool_bytes());
  const auto a = to_coo(got), b = to_coo(want);
  ASSERT_EQ(a.row, b.row);
  ASSERT_EQ(a.col, b.col);
  ASSERT_EQ(a.val, b.val);  // scaling is one multiplication either way: exact
}

template <class V>
void check(const Matrix<V>& host, const std::string& what) {
  for (runtime::Controller c : runtime::all_controllers) {
    if (!ops::gpu_controller_available(c)) continue;  // device_launch=false build
    const std::string w = what + " " + std::string(runtime::to_string(c));
    for (bool t : {false, true}) {
      const Matrix<V> src = t ? host.transpose().scaled(V(-2)) : host;
      DeviceMatrix<V> dev(src);
      // Deep copy, both ways: equal to the source, state kept.
      for (bool rebuild : {false, true}) {
        const auto copied = ops::copy(dev, {rebuild, c}).download();
        EXPECT_EQ(copied.transposed(), src.transposed());
        EXPECT_EQ(copied.scale(), src.scale());
        expect_same_entries(copied, src, w + (rebuild ? " rebuilt copy" : " copy"));
        if (!rebuild) {
          EXPECT_EQ(0, std::memcmp(copied.content().pool.data(), src.content().pool.data(), src.pool_bytes()));
        }
      }
      const auto m = ops::materialize(dev, {true, c}).download();
      EXPECT_FALSE(m.transposed());
      EXPECT_EQ(m.scale(), V(1));
      expect_same_entries(m, ops::materialize_reference(src), w + (t ? " materialize T" : " materialize"));
    }
  }
}

}  // namespace

TEST(CopyGpu, RandomAndRealMatrices) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  // Both formats: the builder's default (wide nodes allowed) and the standard one.
  auto both = [](const auto& coo, std::uint32_t d, const std::string& what) {
    check(build_matrix(coo, d), what);
    check(build_standard(coo, d), what + " standard");
  };
  both(random_coo<double>(3000, 1200, 20000, rng), 16, "random rect d16");
  both(clustered_coo<float>(1000, 700, 5, 200, 0.9, rng), default_node_size, "clustered f32 (dense leaves)");
  both(clustered_coo<double>(64, 64, 2, 64, 1.0, rng), 4, "dense d4");
  both(Coo<float>{10, 20, {}, {}, {}}, default_node_size, "empty");
  both(read_matrix_market<double>(matrices_dir() / "fidapex6.mtx"), default_node_size, "fidapex6");
  both(read_matrix_market<float>(matrices_dir() / "lp_ship04l.mtx"), 8, "lp_ship04l d8");
}

// Wide (COOW) nodes: copied as they are, and transposed by two counting
// passes (node sizes beyond one warp step, a wide root, 16-bit coordinates
// over d^2 = 4096 and 16384).
TEST(CopyGpu, WideNodes) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  check(build_wide(random_coo<double>(3000, 1700, 30000, rng), 16), "wide random d16");
  check(build_wide(random_coo<float>(200000, 150000, 400000, rng), 128), "wide random d128 f32");
  check(build_wide(random_coo<double>(4096, 4096, 8000, rng), 64), "wide root d64");
}

