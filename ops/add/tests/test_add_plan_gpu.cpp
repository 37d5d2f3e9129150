// The two-phase add (ops::AddPlan) against the one-call add and the host
// reference: phase 1's result is the add's, and phase 2 with new values,
// new factors and new operand scales gives add_reference's result bit for
// bit, called directly, into a caller's copy, and captured into a CUDA graph
// and replayed. Operands of another structure are refused.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>

#include "hisparse/formats/builder.hpp"
#include "hisparse/formats/device_matrix.hpp"
#include "hisparse/formats/matrix_market.hpp"
#include "hisparse/formats/validate.hpp"
#include "hisparse/gen/moved_pattern.hpp"
#include "hisparse/ops/add_plan.hpp"
#include "hisparse/ops/add_reference.hpp"
#include "hisparse/ops/copy_gpu.hpp"
#include "hisparse/ops/copy_reference.hpp"
#include "hisparse/runtime/device.hpp"
#include "support/matrices_dir.hpp"
#include "support/random_matrix.hpp"
#include "support/test_seed.hpp"

using namespace hisparse;
using namespace hisparse::testing;
namespace fs = std::filesystem;

namespace {

template <class V>
void expect_bits(const Matrix<V>& got, const Matrix<V>& want, const std::string& what) {
  SCOPED_TRACE(what);
  ASSERT_NO_THROW(validate(got.content()));
  EXPECT_EQ(got.pool_bytes(), want.pool_bytes());
  const auto a = to_coo(got), b = to_coo(want);
  ASSERT_EQ(a.row, b.row);
  ASSERT_EQ(a.col, b.col);
  ASSERT_EQ(a.val.size(), b.val.size());
  EXPECT_EQ(0, std::memcmp(a.val.data(), b.val.data(), a.val.size() * sizeof(V))) << "values differ in their bits";
}

// The same pattern (duplicates and all) with fresh values: the builder is
// canonical, so the pools differ in their values only.
template <class V>
Coo<V> revalued(Coo<V> coo, std::mt19937_64& rng) {
  for (V& v : coo.val) v = random_value<V>(rng);
  return coo;
}

// An operand as the test stores it: plain, or its content transposed with
// the transpose flag set; then scaled.
template <class V>
Matrix<V> operand(const Coo<V>& coo, std::uint32_t d, bool wide, bool flagged, V scale) {
  Matrix<V> m = build_matrix(coo, BuildOptions{d, wide});
  if (flagged) m = ops::materialize_reference(m.transpose()).transpose();
  return m.scaled(scale);
}

// Phase 1 on (a1, b1), then phase 2 on two revalued pairs: into the plan's
// result, and into a copy by a replayed graph.
template <class V>
void check_plan(ops::Context& ctx, const Coo<V>& a_coo, const Coo<V>& b_coo, std::uint32_t d, bool wide, bool a_t,
                bool b_t, std::mt19937_64& rng, const std::string& what) {
  SCOPED_TRACE(what);
  const Matrix<V> a1 = operand(a_coo, d, wide, a_t, V(1)), b1 = operand(b_coo, d, wide, b_t, V(-0.5));
  DeviceMatrix<V> da1(a1), db1(b1);
  ops::AddPlan<V> plan(ctx, da1, db1, V(2), V(1));
  EXPECT_EQ(plan.entries(), plan.result().nnz());
  EXPECT_EQ(plan.bytes(), std::max<std::uint64_t>(plan.entries(), 1) * 12);
  expect_bits(plan.result().download(ctx.stream()), ops::add_reference(a1, b1, V(2), V(1)), "phase 1");

  // Phase 2, direct: new values, new factors, new operand scales.
  const Matrix<V> a2 = operand(revalued(a_coo, rng), d, wide, a_t, V(3)),
                  b2 = operand(revalued(b_coo, rng), d, wide, b_t, V(0.25));
  DeviceMatrix<V> da2(a2), db2(b2);
  plan.compute(da2, db2, V(-1.5), V(4));
  expect_bits(plan.result().download(ctx.stream()), ops::add_reference(a2, b2, V(-1.5), V(4)), "phase 2");

  // Phase 2 captured: the graph reads whatever the operands' pools hold
  // when it is launched.
  DeviceMatrix<V> c = ops::copy(ctx, plan.result());
  const cudaStream_t s = ctx.stream();
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  cuda_check(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
  plan.compute(da2, db2, V(0.75), V(-2), c);
  cuda_check(cudaStreamEndCapture(s, &graph), "cudaStreamEndCapture");
  cuda_check(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
  for (int replay = 0; replay < 2; ++replay) {
    const Matrix<V> a3 = operand(revalued(a_coo, rng), d, wide, a_t, V(3)),
                    b3 = operand(revalued(b_coo, rng), d, wide, b_t, V(0.25));
    // New values into the captured operands' pools (same structure, same sizes).
    cuda_check(cudaMemcpyAsync(da2.pool_for_values(), a3.content().pool.data(), a3.pool_bytes(), cudaMemcpyHostToDevice, s),
               "upload A");
    cuda_check(cudaMemcpyAsync(db2.pool_for_values(), b3.content().pool.data(), b3.pool_bytes(), cudaMemcpyHostToDevice, s),
               "upload B");
    cuda_check(cudaGraphLaunch(exec, s), "cudaGraphLaunch");
    expect_bits(c.download(s), ops::add_reference(a3, b3, V(0.75), V(-2)), "replay " + std::to_string(replay));
  }
  cuda_check(cudaGraphExecDestroy(exec), "cudaGraphExecDestroy");
  cuda_check(cudaGraphDestroy(graph), "cudaGraphDestroy");
}

}  // namespace

// Each test's seed, and a context on a stream of its own: the legacy default
// stream cannot be captured.
class AddPlanGpu : public ::testing::Test {
 protected:
  const std::uint64_t seed = fresh_seed();
  std::mt19937_64 rng{seed};
  runtime::Stream stream;
  ops::Context ctx{stream.get()};
};

TEST_F(AddPlanGpu, SecondPhaseEqualsOneCallAdd) {
  SCOPED_TRACE(seed_note(seed));
  {
    const auto a = random_coo<double>(3000, 1200, 20000, rng);
    const auto b = gen::moved_pattern(a, 3.0, rng());
    check_plan(ctx, a, b, 16, false, false, false, rng, "random d16");
    check_plan(ctx, a, b, 16, false, true, false, rng, "random d16, A stored transposed");
    check_plan(ctx, a, b, 128, true, false, true, rng, "random d128 wide, B stored transposed");
  }
  {
    const auto a = clustered_coo<float>(1000, 700, 6, 200, 0.9, rng);
    check_plan(ctx, a, gen::moved_pattern(a, 2.0, rng()), 16, false, false, false, rng, "clustered f32 (dense nodes)");
    check_plan(ctx, a, random_coo<float>(1000, 700, 5000, rng), 8, true, true, true, rng, "clustered + random f32 d8 wide");
  }
  // A power-law pair in a depth-3 wide tree: wide sub-trees through AddWide.
  {
    Coo<float> a{20000, 20000, {}, {}, {}};
    for (int i = 0; i < 60000; ++i) {
      const auto r = static_cast<index_t>(std::pow(rng() % 1000000 / 1e6, 3.0) * 20000);
      a.push(r, rng() % 20000, random_value<float>(rng));
    }
    check_plan(ctx, a, random_coo<float>(20000, 20000, 30000, rng), 32, true, false, false, rng, "power law d32 wide");
  }
  // Empty and one-entry operands; a cancellation keeps its explicit zero.
  const Coo<double> empty{40, 30, {}, {}, {}};
  Coo<double> one{40, 30, {}, {}, {}};
  one.push(39, 29, 1.5);
  check_plan(ctx, empty, empty, 16, false, false, false, rng, "empty + empty");
  check_plan(ctx, empty, one, 16, true, false, false, rng, "empty + one");
  check_plan(ctx, one, one, 16, false, false, true, rng, "one + one");
}

TEST_F(AddPlanGpu, RealMatrices) {
  SCOPED_TRACE(seed_note(seed));
  for (const char* name : {"bcsstk13.mtx", "rajat01.mtx", "jazz.mtx", "whitaker3.mtx"}) {
    if (!fs::exists(matrices_dir() / name)) continue;
    const Coo<double> a = read_matrix_market<double>(matrices_dir() / name);
    check_plan(ctx, a, gen::moved_pattern(a, 2.0, rng()), 128, true, false, false, rng, name);
    if (a.rows == a.cols) check_plan(ctx, a, a, 128, true, false, true, rng, std::string(name) + " + itself stored transposed");
  }
}

TEST_F(AddPlanGpu, OtherStructuresAreRefused) {
  SCOPED_TRACE(seed_note(seed));
  const auto a_coo = random_coo<double>(500, 400, 3000, rng);
  const auto b_coo = random_coo<double>(500, 400, 2000, rng);
  DeviceMatrix<double> a(build_matrix(a_coo)), b(build_matrix(b_coo));
  ops::AddPlan<double> plan(ctx, a, b);
  const Matrix<double> before = plan.result().download(ctx.stream());
  DeviceMatrix<double> other(build_matrix(random_coo<double>(500, 400, 3000, rng)));
  DeviceMatrix<double> flipped(build_matrix(a_coo));
  flipped.set_state(false, 2.0);  // a scale is fine...
  EXPECT_NO_THROW(plan.compute(flipped, b));
  const auto square_coo = random_coo<double>(400, 400, 3000, rng);
  DeviceMatrix<double> square(build_matrix(square_coo));
  EXPECT_THROW(plan.compute(b, a), Error);       // swapped operands
  EXPECT_THROW(plan.compute(a, other), Error);   // another pattern, another pool size
  DeviceMatrix<double> c_wrong = ops::copy(ctx, a);
  EXPECT_THROW(plan.compute(a, b, 1.0, 1.0, c_wrong), Error);
  // ...a transposed view of a square operand is another structure.
  ops::AddPlan<double> square_plan(ctx, square, square);
  DeviceMatrix<double> square_t(build_matrix(square_coo));
  square_t.transpose();
  EXPECT_THROW(square_plan.compute(square_t, square), Error);
  // The refused calls changed nothing; the plan still works.
  plan.compute(a, b);
  expect_bits(plan.result().download(ctx.stream()), before, "after the refused calls");
}
