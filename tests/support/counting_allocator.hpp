#pragma once
// A runtime::DeviceAllocator for the GPU tests of contexts: cudaMallocAsync /
// cudaFreeAsync on the device's default pool, counted (allocations, their
// returns, the bytes out), and the allocation numbered `fail_at` (from 0)
// throws std::bad_alloc instead: an op's every allocation can be failed in turn.
#include <cuda_runtime.h>

#include <atomic>
#include <cstddef>
#include <new>

#include "hisparse/formats/device_matrix.hpp"
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

}  // namespace hisparse::testing
