// GPU failure modes (issue 18, docs/reliability.md "GPU failure modes"):
// device memory exhausted at every point of every op, queues that overflow,
// and add's result pool found short. Each must end in a clear error (or a
// right result), leave no device memory behind, and leave the device usable:
// the same op with room to spare then gives the reference result.
// A procedure that never finishes (the watchdog) is tested in the runtime's
// suite (PerController.WatchdogStopsEndlessWork).
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "hisparse/formats/builder.hpp"
#include "hisparse/formats/device_matrix.hpp"
#include "hisparse/formats/validate.hpp"
#include "hisparse/gen/moved_pattern.hpp"
#include "hisparse/ops/add_gpu.hpp"
#include "hisparse/ops/add_reference.hpp"
#include "hisparse/ops/copy_gpu.hpp"
#include "hisparse/ops/copy_reference.hpp"
#include "hisparse/ops/gpu_controllers.hpp"
#include "hisparse/ops/spmv_gpu.hpp"
#include "hisparse/ops/spmv_reference.hpp"
#include "hisparse/runtime/device.hpp"
#include "hisparse/runtime/error.hpp"
#include "support/random_matrix.hpp"
#include "support/test_seed.hpp"

using namespace hisparse;
using namespace hisparse::testing;

namespace {

std::size_t free_device_bytes() {
  std::size_t free = 0, total = 0;
  EXPECT_EQ(cudaMemGetInfo(&free, &total), cudaSuccess);
  return free;
}

// Takes all device memory but about `leave` bytes (in 2 MiB steps), in
// chunks, and gives it back when destroyed: what another process or a
// framework's pool holding the memory looks like to the ops.
class MemoryHog {
 public:
  explicit MemoryHog(std::size_t leave) {
    for (std::size_t chunk : {std::size_t{1} << 30, std::size_t{64} << 20, std::size_t{2} << 20}) {
      for (;;) {
        void* p = nullptr;
        if (cudaMalloc(&p, chunk) != cudaSuccess) {
          (void)cudaGetLastError();
          break;
        }
        chunks_.push_back({p, chunk});
      }
    }
    std::size_t freed = 0;
    while (freed < leave && !chunks_.empty()) {
      freed += chunks_.back().bytes;
      EXPECT_EQ(cudaFree(chunks_.back().p), cudaSuccess);
      chunks_.pop_back();
    }
  }
  ~MemoryHog() {
    for (const Chunk& c : chunks_) EXPECT_EQ(cudaFree(c.p), cudaSuccess);
  }
  MemoryHog(const MemoryHog&) = delete;
  MemoryHog& operator=(const MemoryHog&) = delete;

 private:
  struct Chunk {
    void* p;
    std::size_t bytes;
  };
  std::vector<Chunk> chunks_;
};

// A failure must be one of the documented errors and say what ran out.
void expect_memory_error(const std::exception& e, const std::string& what) {
  const std::string m = e.what();
  const bool typed = dynamic_cast<const Error*>(&e) != nullptr || dynamic_cast<const runtime::Error*>(&e) != nullptr;
  EXPECT_TRUE(typed) << what << ": not a hisparse error: " << m;
  EXPECT_TRUE(m.find("cudaErrorMemoryAllocation") != std::string::npos || m.find("out of memory") != std::string::npos)
      << what << ": " << m;
}

// The device accepts work and reports nothing pending.
void expect_device_usable(const std::string& what) {
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << what;
}

template <class V>
struct DeviceVector {
  V* p = nullptr;
  explicit DeviceVector(const std::vector<V>& h) {
    cuda_check(cudaMalloc(&p, std::max<std::size_t>(1, h.size()) * sizeof(V)), "cudaMalloc(test vector)");
    const cudaError_t e = cudaMemcpy(p, h.data(), h.size() * sizeof(V), cudaMemcpyHostToDevice);
    if (e != cudaSuccess) {
      (void)cudaFree(p);  // the destructor does not run for a constructor that throws
      cuda_check(e, "cudaMemcpy(test vector)");
    }
  }
  ~DeviceVector() { (void)cudaFree(p); }
  std::vector<V> read(std::size_t n) const {
    std::vector<V> h(n);
    cuda_check(cudaMemcpy(h.data(), p, n * sizeof(V), cudaMemcpyDeviceToHost), "cudaMemcpy(test vector)");
    return h;
  }
};

template <class V>
void expect_close(const std::vector<V>& got, const std::vector<V>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_LE(std::abs(got[i] - want[i]), 1e-3 * (1 + std::abs(want[i]))) << what << " at " << i;
  }
}

template <class V>
void expect_same_matrix(const Matrix<V>& got, const Matrix<V>& want, const std::string& what) {
  ASSERT_NO_THROW(validate(got.content())) << what;
  const Coo<V> a = to_coo(got), b = to_coo(want);
  EXPECT_EQ(a.row, b.row) << what;
  EXPECT_EQ(a.col, b.col) << what;
  EXPECT_EQ(a.val, b.val) << what;
}

// The operands: a random matrix of ~400 k entries (a pool of a few MB, so
// that the leave-free sweep crosses every allocation of every op) and a
// moved copy of its pattern for the add.
struct Operands {
  Matrix<float> a, b;
  std::vector<float> x, y_ref;
};

Operands make_operands(bool wide, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  Operands o;
  const Coo<float> coo = random_coo<float>(60000, 50000, 400000, rng);
  o.a = build_matrix(coo, BuildOptions{64, wide});
  o.b = build_matrix(gen::moved_pattern(coo, 10.0, seed + 1), BuildOptions{64, wide});
  o.x.resize(o.a.cols());
  for (auto& v : o.x) v = std::uniform_real_distribution<float>(-1, 1)(rng);
  o.y_ref.assign(o.a.rows(), 0);
  ops::spmv_reference<float>(o.a, o.x, o.y_ref);
  return o;
}

// Every op, each checked against its reference when it succeeds.
std::vector<std::pair<std::string, std::function<void()>>> every_op(const Operands& o, const DeviceMatrix<float>& da,
                                                                    const DeviceMatrix<float>& db,
                                                                    const std::string& what) {
  return {
      {"upload", [&o] { DeviceMatrix<float> d(o.a); }},
      {"spmv plan",
       [&o, &da, what] {
         DeviceVector<float> x(o.x), y(std::vector<float>(o.a.rows(), NAN));
         ops::GpuSpmv<float> plan(da);
         plan(x.p, y.p);
         expect_close(y.read(o.a.rows()), o.y_ref, what + " spmv plan");
       }},
      {"spmv one-shot",
       [&o, &da, what] {
         DeviceVector<float> x(o.x), y(std::vector<float>(o.a.rows(), NAN));
         ops::SpmvOptions opt;
         opt.reuse_traversal = false;
         ops::spmv(da, x.p, y.p, 1.0f, 0.0f, opt);
         expect_close(y.read(o.a.rows()), o.y_ref, what + " spmv one-shot");
       }},
      {"add",
       [&o, &da, &db, what] {
         expect_same_matrix(ops::add(da, db, 1.5f, -0.5f).download(), ops::add_reference(o.a, o.b, 1.5f, -0.5f),
                            what + " add");
       }},
      {"copy",
       [&o, &da, what] {
         expect_same_matrix(ops::copy(da, {.rebuild = true}).download(), ops::copy_reference(o.a), what + " copy");
       }},
      {"materialize",
       [&o, what] {
         DeviceMatrix<float> t(o.a.transpose().scaled(2.0f));
         expect_same_matrix(ops::materialize(t).download(),
                            ops::materialize_reference(o.a.transpose().scaled(2.0f)), what + " materialize");
       }},
  };
}

// Every op once. Returns how many failed (with a memory error); `failed_ops`
// collects their names, marked where the runtime's own allocation failed.
int run_every_op(const Operands& o, const DeviceMatrix<float>& da, const DeviceMatrix<float>& db,
                 const std::string& what, std::string* failed_ops = nullptr) {
  int failures = 0;
  for (const auto& [op, body] : every_op(o, da, db, what)) {
    try {
      body();
    } catch (const std::exception& e) {
      expect_memory_error(e, what + " " + op);
      ++failures;
      if (failed_ops) {
        const std::string m = e.what();
        *failed_ops += " " + op + (m.find("runtime") != std::string::npos ? " (runtime)" : "");
      }
    }
    expect_device_usable(what + " " + op);
  }
  return failures;
}

// Each test: operands of the parameter's format (wide nodes or not) from a
// fresh seed, uploaded.
class FailureModes : public ::testing::TestWithParam<bool> {
 protected:
  const bool wide = GetParam();
  const std::uint64_t seed = fresh_seed();
  const Operands o = make_operands(wide, seed);
  DeviceMatrix<float> da{o.a}, db{o.b};
};

TEST_P(FailureModes, DeviceMemoryExhaustedAnywhere) {
  SCOPED_TRACE(seed_note(seed));
  ASSERT_EQ(run_every_op(o, da, db, "with room"), 0);  // warm: kernels loaded, lazy reservations made
  runtime::release_cached_memory();
  const std::size_t baseline = free_device_bytes();

  // From no room at all to more than any op needs: each op fails cleanly
  // or succeeds with the right result, and the next attempt starts clean.
  int failed = 0;
  for (std::size_t leave_mib : {0, 2, 4, 8, 16, 32, 40, 48, 56, 64, 128, 256, 512}) {
    const std::string what = "leaving " + std::to_string(leave_mib) + " MiB";
    std::string failed_ops;
    {
      MemoryHog hog(leave_mib << 20);
      failed += run_every_op(o, da, db, what, &failed_ops);
    }
    // Which ops ran out where ("(runtime)": in the runtime's own set-up).
    std::printf("  %s: failed:%s\n", what.c_str(), failed_ops.empty() ? " none" : failed_ops.c_str());
    runtime::release_cached_memory();
    // Nothing leaked: every failed allocation path gave back what it had.
    const std::size_t now = free_device_bytes();
    EXPECT_GE(now + (std::size_t{4} << 20), baseline) << what << ": " << (baseline - now) << " bytes not given back";
  }
  EXPECT_GT(failed, 0) << "the sweep never ran out of memory: it tested nothing";
  EXPECT_EQ(run_every_op(o, da, db, "after the sweep"), 0);
}

// Every device allocation of every op fails in turn (fault injection: the
// k-th DeviceBytes allocation, then the k-th of the runtime's own, for k = 0,
// 1, ... until the op no longer reaches a k-th): each failure is a clean
// memory error in the middle of the op (plan building included), gives back
// everything allocated before it, and leaves the device usable.
TEST_P(FailureModes, EveryAllocationFailsInTurn) {
  SCOPED_TRACE(seed_note(seed));
  ASSERT_EQ(run_every_op(o, da, db, "with room"), 0);
  runtime::release_cached_memory();
  const std::size_t baseline = free_device_bytes();
  std::map<std::string, long> allocations;  // per op, both kinds
  for (const bool in_runtime : {false, true}) {
    const auto inject = [in_runtime](long k) {
      if (in_runtime) runtime::inject_allocation_failure(k);
      else inject_device_bytes_failure(k);
    };
    for (const auto& [op, body] : every_op(o, da, db, "injected")) {
      long k = 0;
      for (;; ++k) {
        const std::string what = op + (in_runtime ? ": runtime allocation " : ": allocation ") + std::to_string(k);
        inject(k);
        bool failed = false;
        try {
          body();
        } catch (const std::exception& e) {
          expect_memory_error(e, what);
          EXPECT_NE(std::string(e.what()).find("injected"), std::string::npos) << what << ": " << e.what();
          failed = true;
        }
        inject(-1);
        expect_device_usable(what);
        runtime::release_cached_memory();
        EXPECT_GE(free_device_bytes() + (std::size_t{4} << 20), baseline) << what << ": memory not given back";
        if (!failed) break;  // the op makes fewer than k + 1 such allocations
        ASSERT_LT(k, 1000) << what << ": never succeeds";
      }
      std::printf("  %s: %ld %s allocations, each failed in turn\n", op.c_str(), k,
                  in_runtime ? "runtime" : "DeviceBytes");
      allocations[op] += k;
    }
  }
  // Every op allocates: its result, or (a one-shot SpMV, whose result is the
  // caller's y) the runtime's queues.
  for (const auto& [op, k] : allocations) EXPECT_GT(k, 0) << op << " allocates nothing: the sweep tested nothing";
  EXPECT_EQ(run_every_op(o, da, db, "after the injections"), 0);
}

TEST_P(FailureModes, QueueOverflowInEveryOp) {
  SCOPED_TRACE(seed_note(seed));
  const std::uint32_t tiny = 32;
  DeviceVector<float> x(o.x), y(std::vector<float>(o.a.rows(), 0));
  for (runtime::Controller c : runtime::all_controllers) {
    if (!ops::gpu_controller_available(c)) continue;
    const std::string what = std::string(runtime::to_string(c));
    ops::SpmvOptions so;
    so.controller = c;
    so.queue_capacity = tiny;
    // A plan lists its leaves without the runtime: queue_capacity does not
    // concern it, and it gives the right y.
    {
      ops::GpuSpmv<float> plan(da, so);
      plan(x.p, y.p);
      expect_close(y.read(o.a.rows()), o.y_ref, what + " spmv plan, queue_capacity 32");
    }
    expect_device_usable(what + " spmv plan");
    so.reuse_traversal = false;
    EXPECT_THROW(ops::spmv(da, x.p, y.p, 1.0f, 0.0f, so), runtime::QueueOverflow) << what << " spmv one-shot";
    expect_device_usable(what + " spmv one-shot");
    ops::AddOptions ao;
    ao.controller = c;
    ao.queue_capacity = tiny;
    EXPECT_THROW((void)ops::add(da, db, 1.0f, 1.0f, ao), runtime::QueueOverflow) << what << " add";
    expect_device_usable(what + " add");
    ops::CopyOptions co;
    co.controller = c;
    co.rebuild = true;
    co.queue_capacity = tiny;
    EXPECT_THROW((void)ops::copy(da, co), runtime::QueueOverflow) << what << " copy";
    expect_device_usable(what + " copy");
    // A transposed, scaled state: materialize's own path (transpose and scale
    // applied), not the plain rebuild the copy above took.
    DeviceMatrix<float> ts(o.a.transpose().scaled(2.0f));
    EXPECT_THROW((void)ops::materialize(ts, co), runtime::QueueOverflow) << what << " materialize";
    expect_device_usable(what + " materialize");
  }
  // The same ops with their own queue sizes: right results.
  EXPECT_EQ(run_every_op(o, da, db, "after the overflows"), 0);
}

TEST_P(FailureModes, AddRerunsWhenItsPoolIsShort) {
  SCOPED_TRACE(seed_note(seed));
  const Matrix<float> want = ops::add_reference(o.a, o.b, 2.0f, 1.0f);
  // From the header alone (a rerun per doubling) to just short of the result.
  for (std::uint64_t first : {std::uint64_t{16}, std::uint64_t{4096}, want.pool_bytes() / 2, want.pool_bytes() - 16}) {
    ops::AddOptions ao;
    ao.initial_pool_bytes = first;
    expect_same_matrix(ops::add(da, db, 2.0f, 1.0f, ao).download(), want,
                       "first pool of " + std::to_string(first) + " bytes");
  }
  expect_device_usable("add reruns");
  // The reruns stop at the pool limit: a LimitError, nothing else changed.
  ops::AddOptions capped;
  capped.initial_pool_bytes = 16;
  capped.max_pool_bytes = want.pool_bytes() - 16;
  EXPECT_THROW((void)ops::add(da, db, 2.0f, 1.0f, capped), LimitError);
  expect_device_usable("add over its pool limit");
  capped.max_pool_bytes = want.pool_bytes();
  expect_same_matrix(ops::add(da, db, 2.0f, 1.0f, capped).download(), want, "a pool limit the result just fits");
}

INSTANTIATE_TEST_SUITE_P(Formats, FailureModes, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "WideNodes" : "Standard"; });

}  // namespace
