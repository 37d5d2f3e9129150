// The library context (hisparse::Context) across the ops: every op on a
// context gives what its call-local form gives (the same matrix: node
// types, entries and values bit for bit; y within rounding order), a user's
// allocator sees every allocation of the ops returned, a failing allocator
// leaves the context and the operands usable, contexts on two streams run side by side from two threads, and a
// plan's SpMV captured into a CUDA graph replays like direct calls.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <new>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "hisparse/formats/builder.hpp"
#include "hisparse/formats/device_matrix.hpp"
#include "hisparse/formats/matrix_market.hpp"
#include "hisparse/formats/validate.hpp"
#include "hisparse/ops/add_gpu.hpp"
#include "hisparse/ops/add_reference.hpp"
#include "hisparse/ops/context.hpp"
#include "hisparse/ops/copy_gpu.hpp"
#include "hisparse/ops/edit.hpp"
#include "hisparse/ops/spmv_gpu.hpp"
#include "hisparse/ops/spmv_reference.hpp"
#include "support/counting_allocator.hpp"
#include "support/matrices_dir.hpp"
#include "support/random_matrix.hpp"
#include "support/test_seed.hpp"
#include "support/wide_matrix.hpp"

using namespace hisparse;
using namespace hisparse::testing;
namespace fs = std::filesystem;

namespace {

template <class V>
std::vector<V> random_vector(std::size_t n, std::mt19937_64& rng) {
  std::vector<V> v(n);
  for (auto& e : v) e = random_value<V>(rng);
  return v;
}

template <class V>
DeviceBytes upload(const std::vector<V>& h) {
  DeviceBytes d(std::max<std::size_t>(h.size(), 1) * sizeof(V));
  cuda_check(cudaMemcpy(d.get(), h.data(), h.size() * sizeof(V), cudaMemcpyHostToDevice), "upload");
  return d;
}

template <class V>
std::vector<V> download(const DeviceBytes& d, std::size_t n) {
  std::vector<V> h(n);
  cuda_check(cudaMemcpy(h.data(), d.get(), n * sizeof(V), cudaMemcpyDeviceToHost), "download");
  return h;
}

// y against spmv_reference, relative to the size of each row's terms.
template <class V>
void expect_spmv(const Matrix<V>& a, const std::vector<V>& x, const std::vector<V>& y0, V alpha, V beta,
                 const std::vector<V>& got, const std::string& what) {
  std::vector<V> want = y0;
  ops::spmv_reference<V>(a, x, want, alpha, beta);
  const Coo<V> coo = to_coo(a);
  std::vector<double> mag(want.size(), 0.0);
  for (std::size_t k = 0; k < coo.nnz(); ++k) mag[coo.row[k]] += std::abs(double(coo.val[k]) * double(x[coo.col[k]]));
  const double eps = std::is_same_v<V, float> ? 1e-5 : 1e-13;
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double tol = eps * (std::abs(double(alpha)) * mag[i] + std::abs(double(beta) * double(y0[i]))) + 1e-30;
    ASSERT_NEAR(double(got[i]), double(want[i]), tol) << what << ": row " << i;
  }
}

// The same matrix: state, node types and entries (values bit for bit). Not
// the same bytes: the add's and the rebuild's bump allocator place nodes in
// the order warps reach it, which differs from run to run.
template <class V>
void expect_same_matrix(const DeviceMatrix<V>& got, const DeviceMatrix<V>& want, const std::string& what) {
  const Matrix<V> g = got.download(), w = want.download();
  PoolStats gs, ws;
  ASSERT_NO_THROW(gs = validate(g.content())) << what;
  ws = validate(w.content());
  EXPECT_EQ(g.transposed(), w.transposed()) << what;
  EXPECT_EQ(g.scale(), w.scale()) << what;
  EXPECT_EQ(g.nnz(), w.nnz()) << what;
  ASSERT_EQ(g.pool_bytes(), w.pool_bytes()) << what;
  EXPECT_EQ(g.content().header().flags, w.content().header().flags) << what;
  EXPECT_EQ(gs.inner, ws.inner) << what;
  EXPECT_EQ(gs.dense, ws.dense) << what;
  EXPECT_EQ(gs.coo1 + gs.coo2 + gs.coo4, ws.coo1 + ws.coo2 + ws.coo4) << what;
  EXPECT_EQ(gs.coow, ws.coow) << what;
  const Coo<V> a = to_coo(g), b = to_coo(w);
  ASSERT_EQ(a.row, b.row) << what;
  ASSERT_EQ(a.col, b.col) << what;
  EXPECT_EQ(0, std::memcmp(a.val.data(), b.val.data(), a.val.size() * sizeof(V))) << what << ": values differ";
}

// B for A + B: A's pattern with about a tenth of its entries moved and new values.
template <class V>
Coo<V> companion(const Coo<V>& a, std::mt19937_64& rng) {
  Coo<V> b = random_coo<V>(a.rows, a.cols, a.nnz() / 10 + 1, rng);
  for (std::size_t k = 0; k < a.nnz(); k += 2) b.push(a.row[k], a.col[k], random_value<V>(rng));
  return b;
}

// Every op on `ctx` against its call-local form (and SpMV against the host).
template <class V>
void check_ops(ops::Context& ctx, const Matrix<V>& ha, const Matrix<V>& hb, std::mt19937_64& rng,
               const std::string& what) {
  SCOPED_TRACE(what);
  DeviceMatrix<V> a(ha), b(hb);
  const V alpha = V(1.5), beta = V(-0.5);
  expect_same_matrix(ops::add(ctx, a, b, alpha, beta), ops::add(a, b, alpha, beta), "add");
  expect_same_matrix(ops::copy(ctx, a), ops::copy(a), "copy");
  expect_same_matrix(ops::copy(ctx, a, {.rebuild = true}), ops::copy(a, {.rebuild = true}), "copy rebuild");
  DeviceMatrix<V> at(ha), bt(hb);
  at.transpose();
  at.scale_by(V(-2));
  bt.transpose();
  expect_same_matrix(ops::materialize(ctx, at), ops::materialize(at), "materialize");
  expect_same_matrix(ops::add(ctx, at, bt, alpha, beta), ops::add(at, bt, alpha, beta), "add with A^T and B^T");

  const std::vector<V> x = random_vector<V>(ha.cols(), rng), y0 = random_vector<V>(ha.rows(), rng);
  DeviceBytes dx = upload(x), dy = upload(y0);
  ops::GpuSpmv<V> plan(ctx, a);
  plan(dx.template as<V>(), dy.template as<V>(), alpha, beta);
  cuda_check(cudaStreamSynchronize(ctx.stream()), "spmv plan");
  expect_spmv(ha, x, y0, alpha, beta, download<V>(dy, ha.rows()), "plan");
  cuda_check(cudaMemcpy(dy.get(), y0.data(), y0.size() * sizeof(V), cudaMemcpyHostToDevice), "reset y");
  ops::spmv(ctx, a, dx.template as<V>(), dy.template as<V>(), alpha, beta);
  cuda_check(cudaStreamSynchronize(ctx.stream()), "spmv one-shot");
  expect_spmv(ha, x, y0, alpha, beta, download<V>(dy, ha.rows()), "one-shot");
}

}  // namespace

TEST(ContextGpu, OpsOnAContextEqualTheirCallLocalForms) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  ops::Context ctx;  // one context for everything: its cached state serves matrices of every size
  for (const fs::path& f : real_matrix_files()) {
    const Coo<double> coo = read_matrix_market<double>(f);
    const Coo<double> other = companion(coo, rng);
    check_ops(ctx, build_matrix(coo), build_matrix(other), rng, f.filename().string() + " f64");
    Coo<float> c32{coo.rows, coo.cols, coo.row, coo.col, {}}, o32{other.rows, other.cols, other.row, other.col, {}};
    c32.val.assign(coo.val.begin(), coo.val.end());
    o32.val.assign(other.val.begin(), other.val.end());
    check_ops(ctx, build_matrix(c32, 32), build_matrix(o32, 32), rng, f.filename().string() + " f32 d32");
  }
  for (int k = 0; k < 4; ++k) {
    const index_t rows = 1 + rng() % 3000, cols = 1 + rng() % 3000;
    const Coo<float> r = random_coo<float>(rows, cols, rng() % 20000, rng);
    const std::uint32_t d = 1u << (1 + rng() % 8);
    check_ops(ctx, build_matrix(r, d), build_matrix(companion(r, rng), d), rng,
              "random " + std::to_string(rows) + "x" + std::to_string(cols) + " d " + std::to_string(d));
  }
  EXPECT_GT(ctx.cached_entries(), 0u);
}

// Versions of one family (ops::edit_version) go to the GPU as their own nodes
// in the builder's layout, and every GPU op on them equals the host's.
TEST(ContextGpu, VersionsUploadAsTheirOwnNodes) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  ops::Context ctx;
  for (const char* name : {"bcsstk13.mtx", "crack.mtx", "rajat01.mtx"}) {
    SCOPED_TRACE(name);
    const Coo<double> coo = read_matrix_market<double>(matrices_dir() / name);
    const Matrix<double> v0 = ops::versioned(build_matrix(coo));
    // Two branches from v0: an add of a companion's entries, a removal of some of v0's.
    const Matrix<double> v1 = ops::edit_version(v0, companion(coo, rng), ops::EditMode::add);
    Coo<double> gone{coo.rows, coo.cols, {}, {}, {}};
    for (std::size_t i = 0; i < coo.nnz(); i += 7) gone.push(coo.row[i], coo.col[i], 0.0);
    const Matrix<double> v2 = ops::edit_version(v0, gone, ops::EditMode::remove);
    ASSERT_EQ(v1.content().arena, v0.content().arena);
    ASSERT_EQ(v2.content().arena, v0.content().arena);
    for (const Matrix<double>* v : {&v0, &v1, &v2}) {
      const auto own = compacted(v->content());
      const Matrix<double> back = DeviceMatrix<double>(*v).download();
      ASSERT_EQ(back.pool_bytes(), own->pool.size());
      ASSERT_EQ(0, std::memcmp(back.content().pool.data(), own->pool.data(), own->pool.size()));
    }
    const Matrix<double> sum = ops::add(ctx, DeviceMatrix<double>(v1), DeviceMatrix<double>(v2), 1.0, -1.0).download();
    const Matrix<double> want = ops::add_reference(v1, v2, 1.0, -1.0);
    // The GPU add lays its nodes out in the order it makes them: same nodes, entries and bits.
    validate(sum.content());
    ASSERT_EQ(sum.pool_bytes(), want.pool_bytes());
    const Coo<double> got_entries = to_coo(sum), want_entries = to_coo(want);
    ASSERT_EQ(got_entries.row, want_entries.row);
    ASSERT_EQ(got_entries.col, want_entries.col);
    EXPECT_EQ(0, std::memcmp(got_entries.val.data(), want_entries.val.data(), want_entries.val.size() * sizeof(double)));
    check_ops(ctx, v1, v2, rng, std::string(name) + " versions");
  }
}

TEST(ContextGpu, AnAllocatorSeesEveryAllocationReturned) {
  const Matrix<double> ha = build_matrix(read_matrix_market<double>(matrices_dir() / "bcsstk13.mtx"));
  const Matrix<double> hb = ha.transpose().scaled(0.5);
  const DeviceMatrix<double> a(ha), b(hb);
  auto counting = std::make_shared<CountingAllocator>();
  {
    ops::Context ctx(nullptr, counting);
    const DeviceMatrix<double> c = ops::add(ctx, a, b);
    // The result's pool and the cached runtime's queues come from it.
    EXPECT_GE(counting->outstanding.load(), static_cast<long long>(c.pool_bytes()));
    const DeviceMatrix<double> m = ops::materialize(ctx, b);
    std::vector<double> x(ha.cols(), 1.0);
    DeviceBytes dx = upload(x), dy(ha.rows() * sizeof(double));
    {
      ops::GpuSpmv<double> plan(ctx, c);
      const long before = counting->allocations.load();
      plan(dx.as<double>(), dy.as<double>());
      plan(dx.as<double>(), dy.as<double>());
      EXPECT_EQ(counting->allocations.load(), before) << "a plan's calls allocate nothing";
    }
    ops::spmv(ctx, m, dx.as<double>(), dy.as<double>());
    EXPECT_GT(counting->allocations.load(), 3);
    ctx.release_cached();
    EXPECT_EQ(ctx.cached_entries(), 0u);
  }
  cuda_check(cudaDeviceSynchronize(), "sync");
  EXPECT_EQ(counting->allocations.load(), counting->deallocations.load());
  EXPECT_EQ(counting->outstanding.load(), 0);
}

// The n-th allocation of an op fails, for every n it makes: the op throws,
// nothing leaks, and the same context then runs the op right.
TEST(ContextGpu, AFailingAllocatorLeavesEverythingUsable) {
  const Matrix<float> ha = build_matrix(read_matrix_market<float>(matrices_dir() / "rajat01.mtx"));
  const Matrix<float> hb = ha.scaled(3.0f);
  const DeviceMatrix<float> a(ha), b(hb);
  const DeviceMatrix<float> want = ops::add(a, b, 1.0f, -1.0f);
  std::vector<float> x(ha.cols(), 0.25f);
  DeviceBytes dx = upload(x), dy(ha.rows() * sizeof(float));
  const auto ops_once = [&](ops::Context& ctx) {
    DeviceMatrix<float> c = ops::add(ctx, a, b, 1.0f, -1.0f);
    DeviceMatrix<float> m = ops::materialize(ctx, c);
    ops::GpuSpmv<float> plan(ctx, m);
    plan(dx.as<float>(), dy.as<float>());
    return c;
  };
  fail_each_allocation_in_turn(
      5, [&](ops::Context& ctx) { (void)ops_once(ctx); },
      [](const std::exception& e) { EXPECT_NE(std::string(e.what()), ""); },
      [&](ops::Context& ctx) { expect_same_matrix(ops_once(ctx), want, "after the failure"); });
}

TEST(ContextGpu, TwoStreamsFromTwoThreads) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  const Matrix<double> h[2] = {build_matrix(read_matrix_market<double>(matrices_dir() / "bcsstk13.mtx")),
                               build_matrix(read_matrix_market<double>(matrices_dir() / "rajat01.mtx"))};
  std::string failures[2];
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      try {
        cudaStream_t s = nullptr;
        cuda_check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
        {
          ops::Context ctx(s);
          std::mt19937_64 rng(seed + t);
          const DeviceMatrix<double> a(h[t]);
          const DeviceMatrix<double> want = ops::add(a, a, 2.0, -0.5);
          const std::vector<double> x = random_vector<double>(h[t].cols(), rng), y0(h[t].rows(), 0.0);
          std::vector<double> ref = y0;
          ops::spmv_reference<double>(h[t], x, ref, 1.0, 0.0);
          DeviceBytes dx = upload(x), dy = upload(y0);
          ops::GpuSpmv<double> plan(ctx, a);
          for (int i = 0; i < 10; ++i) {
            const DeviceMatrix<double> c = ops::add(ctx, a, a, 2.0, -0.5);
            cuda_check(cudaStreamSynchronize(s), "sync");
            if (c.pool_bytes() != want.pool_bytes() || c.nnz() != want.nnz()) failures[t] = "add differs";
            plan(dx.as<double>(), dy.as<double>());
            ops::spmv(ctx, a, dx.as<double>(), dy.as<double>(), 1.0, 1.0);  // y = 2 A x
            cuda_check(cudaStreamSynchronize(s), "sync");
            const std::vector<double> got = download<double>(dy, ref.size());
            for (std::size_t r = 0; r < ref.size(); ++r)
              if (std::abs(got[r] - 2 * ref[r]) > 1e-9 * (1 + std::abs(ref[r])))
                failures[t] = "spmv row " + std::to_string(r) + ": " + std::to_string(got[r]) + " != 2 * " +
                              std::to_string(ref[r]);
          }
        }
        cuda_check(cudaStreamDestroy(s), "cudaStreamDestroy");
      } catch (const std::exception& e) {
        failures[t] = e.what();
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures[0], "");
  EXPECT_EQ(failures[1], "");
}

// A plan's call captured on a stream and replayed: each replay equals a
// direct call with the inputs the captured pointers then hold.
TEST(ContextGpu, CapturedPlanReplaysLikeDirectCalls) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  cudaStream_t s = nullptr;
  cuda_check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  {
    ops::Context ctx(s);
    const std::string names[] = {"bcsstk13.mtx", "rajat01.mtx", "jazz.mtx"};
    for (const std::string& name : names) {
      if (!fs::exists(matrices_dir() / name)) continue;
      const Matrix<float> host = build_matrix(read_matrix_market<float>(matrices_dir() / name));
      for (bool transposed : {false, true}) {
        SCOPED_TRACE(name + (transposed ? " T" : " N"));
        DeviceMatrix<float> a(host);
        if (transposed) a.transpose();
        const Matrix<float> ha = host.with_state(a.transposed(), a.scale());
        ops::GpuSpmv<float> plan(ctx, a);
        DeviceBytes dx(ha.cols() * sizeof(float)), dy(ha.rows() * sizeof(float));
        cudaGraph_t graph = nullptr;
        cudaGraphExec_t exec = nullptr;
        cuda_check(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
        plan(dx.as<float>(), dy.as<float>(), 2.0f, 0.5f);
        cuda_check(cudaStreamEndCapture(s, &graph), "cudaStreamEndCapture");
        cuda_check(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
        for (int replay = 0; replay < 3; ++replay) {
          const std::vector<float> x = random_vector<float>(ha.cols(), rng), y0 = random_vector<float>(ha.rows(), rng);
          cuda_check(cudaMemcpyAsync(dx.get(), x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice, s), "x");
          cuda_check(cudaMemcpyAsync(dy.get(), y0.data(), y0.size() * sizeof(float), cudaMemcpyHostToDevice, s), "y");
          cuda_check(cudaGraphLaunch(exec, s), "cudaGraphLaunch");
          cuda_check(cudaStreamSynchronize(s), "replay");
          expect_spmv(ha, x, y0, 2.0f, 0.5f, download<float>(dy, ha.rows()), "replay " + std::to_string(replay));
        }
        cuda_check(cudaGraphExecDestroy(exec), "cudaGraphExecDestroy");
        cuda_check(cudaGraphDestroy(graph), "cudaGraphDestroy");
      }
    }
  }
  cuda_check(cudaStreamDestroy(s), "cudaStreamDestroy");
}

// A plan runs its calls on the stream its context had when it was built; the
// part for A^T, prepared by the first transposed call, goes there too (and
// its memory returns there), even after the context has moved to another
// stream.
TEST(ContextGpu, PlanPreparesOnItsOwnStream) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  cudaStream_t s1 = nullptr, s2 = nullptr;
  cuda_check(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking), "cudaStreamCreate");
  cuda_check(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking), "cudaStreamCreate");
  {
    ops::Context ctx(s1);
    Coo<float> band{20000, 20000, {}, {}, {}};
    for (index_t r = 0; r < 20000; ++r)
      for (index_t k = r > 2 ? r - 2 : 0; k < std::min<index_t>(r + 3, 20000); ++k) band.push(r, k, random_value<float>(rng));
    const Matrix<float> host = build_matrix(band, 32);
    DeviceMatrix<float> a(host);
    ops::GpuSpmv<float> plan(ctx, a);
    ctx.set_stream(s2);
    a.transpose();
    const Matrix<float> ha = host.with_state(true, 1.0f);
    const std::vector<float> x = random_vector<float>(ha.cols(), rng), y0 = random_vector<float>(ha.rows(), rng);
    DeviceBytes dx = upload(x), dy = upload(y0);
    plan(dx.as<float>(), dy.as<float>(), 2.0f, 0.5f);  // prepares A^T's part on s1
    EXPECT_TRUE(plan.stats().prepared[1]);
    cuda_check(cudaStreamSynchronize(s1), "spmv on the plan's stream");
    expect_spmv(ha, x, y0, 2.0f, 0.5f, download<float>(dy, ha.rows()), "A^T prepared after set_stream");
  }
  cuda_check(cudaStreamDestroy(s2), "cudaStreamDestroy");
  cuda_check(cudaStreamDestroy(s1), "cudaStreamDestroy");
}

// The cached runtimes grow with the matrices, are released on request and
// with a change of stream, and a bad call leaves the context usable.
TEST(ContextGpu, CachedStateGrowsIsReleasedAndSurvivesErrors) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  ops::Context ctx;
  const Matrix<float> small = build_matrix(random_coo<float>(300, 300, 900, rng));
  // Scattered entries: one-entry leaves everywhere, the most items per pool byte.
  const Matrix<float> large = build_standard(random_coo<float>(200000, 200000, 400000, rng));
  for (const Matrix<float>* m : {&small, &large, &small}) {
    const DeviceMatrix<float> d(*m);
    for (runtime::Controller c : {runtime::Controller::persistent, runtime::Controller::host_loop})
      expect_same_matrix(ops::add(ctx, d, d, 1.0f, 2.0f, {.controller = c}),
                       ops::add(d, d, 1.0f, 2.0f, {.controller = c}), std::string("add ") + std::string(to_string(c)));
  }
  EXPECT_GT(ctx.cached_entries(), 0u);
  ctx.release_cached();
  EXPECT_EQ(ctx.cached_entries(), 0u);
  const DeviceMatrix<float> d(small), wrong(large);
  EXPECT_THROW((void)ops::add(ctx, d, wrong), Error);
  cudaStream_t s = nullptr;
  cuda_check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  {
    DeviceMatrix<float> on_s;
    ctx.set_stream(s);
    on_s = ops::add(ctx, d, d, 1.0f, 2.0f);
    expect_same_matrix(on_s, ops::add(d, d, 1.0f, 2.0f), "add on the second stream");
    ctx.set_stream(nullptr);
    cuda_check(cudaStreamSynchronize(s), "sync");
  }
  cuda_check(cudaStreamDestroy(s), "cudaStreamDestroy");
  expect_same_matrix(ops::add(ctx, d, d, 1.0f, 2.0f), ops::add(d, d, 1.0f, 2.0f), "add back on the default stream");
}
