#pragma once
// A runtime::DeviceAllocator for the GPU tests of contexts: cudaMallocAsync /
// cudaFreeAsync on the device's default pool, counted (allocations, their
// returns, the bytes out), and the allocation numbered `fail_at` (from 0)
// throws std::bad_alloc instead: an op's every allocation can be failed in
// turn (fail_each_allocation_in_turn).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <exception>
#include <memory>
#include <new>
#include <string>

#include "hisparse/formats/device_matrix.hpp"
#include "hisparse/ops/context.hpp"
#include "hisparse/runtime/allocator.hpp"

namespace hisparse::testing {

class CountingAllocator final : public runtime::DeviceAllocator {
 public:
  void* allocate(std::size_t bytes, cudaStream_t stream) override {
    if (fail_at >= 0 && attempts.fetch_add(1) == fail_at) throw std::bad_alloc();
    void* p = nullptr;
    cuda_check(cudaMallocAsync(&p, bytes, stream), "cudaMallocAsync(counting allocator)");
    ++allocations;
    outstanding += static_cast<long long>(bytes);
    return p;
  }
  void deallocate(void* p, std::size_t bytes, cudaStream_t stream) noexcept override {
    (void)cudaFreeAsync(p, stream);
    ++deallocations;
    outstanding -= static_cast<long long>(bytes);
  }
  std::atomic<long> allocations{0}, deallocations{0}, attempts{0};
  std::atomic<long long> outstanding{0};
  long fail_at = -1;
};

// The n-th allocation of `run(ctx)` on a context fails, for every n it makes
// (counted on a first run, which must make more than `more_than`): the run
// throws (`on_error(e)` checks what), the same context then runs `after(ctx)`
// right, and every allocation is returned.
template <class Run, class OnError, class After>
void fail_each_allocation_in_turn(long more_than, Run&& run, OnError&& on_error, After&& after) {
  long total = 0;
  {
    auto probe = std::make_shared<CountingAllocator>();
    ops::Context ctx(nullptr, probe);
    run(ctx);
    total = probe->allocations.load();
  }
  ASSERT_GT(total, more_than);
  for (long n = 0; n < total; ++n) {
    SCOPED_TRACE("allocation " + std::to_string(n) + " of " + std::to_string(total) + " fails");
    auto failing = std::make_shared<CountingAllocator>();
    failing->fail_at = n;
    {
      ops::Context ctx(nullptr, failing);
      try {
        run(ctx);
        ADD_FAILURE() << "no exception";
      } catch (const std::exception& e) {
        on_error(e);
      }
      failing->fail_at = -1;
      after(ctx);
    }
    cuda_check(cudaDeviceSynchronize(), "sync");
    EXPECT_EQ(failing->allocations.load(), failing->deallocations.load());
    EXPECT_EQ(failing->outstanding.load(), 0);
  }
}

}  // namespace hisparse::testing
