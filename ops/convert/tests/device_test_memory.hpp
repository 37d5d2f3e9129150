#pragma once
// Device memory for the GPU conversion tests: arrays filled from and read back
// to the host, a stream, the free memory, and a hog that takes it.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "hisparse/formats/device_matrix.hpp"
#include "hisparse/ops/convert_gpu.hpp"

namespace hisparse::testing::convert_gpu {

// ---------------------------------------------------------------------------
// Device memory of the test's own (plain cudaMalloc, so that fault injection
// in DeviceBytes never hits it).

template <class T>
std::vector<T> download_array(const void* p, std::size_t n) {
  std::vector<T> h(n);
  if (n) cuda_check(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), "cudaMemcpy(test download)");
  return h;
}

template <class T>
class DeviceArray {
 public:
  explicit DeviceArray(std::size_t n) : n_(n) {
    void* p = nullptr;
    cuda_check(cudaMalloc(&p, std::max<std::size_t>(n, 1) * sizeof(T)), "cudaMalloc(test array)");
    p_ = static_cast<T*>(p);
  }
  explicit DeviceArray(const std::vector<T>& h) : DeviceArray(h.size()) {
    if (n_) cuda_check(cudaMemcpy(p_, h.data(), n_ * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy(test upload)");
    // A pageable upload may still be in flight when cudaMemcpy returns; the
    // conversion may run on a non-blocking stream.
    cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize(test upload)");
  }
  DeviceArray(DeviceArray&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  DeviceArray& operator=(DeviceArray&&) = delete;
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  ~DeviceArray() {
    if (p_) cudaFree(p_);
  }
  [[nodiscard]] T* get() const { return p_; }
  [[nodiscard]] std::size_t size() const { return n_; }
  // Garbage in caller-memory outputs: an element the conversion leaves unwritten shows.
  void poison() {
    cuda_check(cudaMemset(p_, 0xA5, std::max<std::size_t>(n_, 1) * sizeof(T)), "cudaMemset(test poison)");
    cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize(test poison)");
  }
  void set(std::size_t i, T v) {
    cuda_check(cudaMemcpy(p_ + i, &v, sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy(test poke)");
    cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize(test poke)");
  }
  [[nodiscard]] std::vector<T> download() const { return download_array<T>(p_, n_); }

 private:
  T* p_ = nullptr;
  std::size_t n_ = 0;
};

// A blocking stream (ordered with the legacy default stream that the test's
// cudaMemcpy calls use), so that the conversions also run off stream 0.
class Stream {
 public:
  Stream() { cuda_check(cudaStreamCreate(&s_), "cudaStreamCreate"); }
  ~Stream() { cudaStreamDestroy(s_); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  [[nodiscard]] cudaStream_t get() const { return s_; }

 private:
  cudaStream_t s_ = nullptr;
};

// Free device memory once the work memory the conversions keep between calls
// is given back (what remains missing is a leak).
inline std::size_t free_device_bytes() {
  ops::release_work_memory();
  std::size_t free = 0, total = 0;
  EXPECT_EQ(cudaMemGetInfo(&free, &total), cudaSuccess);
  return free;
}

constexpr std::size_t leak_slack = std::size_t{4} << 20;

inline void expect_device_usable(const std::string& what) {
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << what;
}

// Takes all device memory but about `leave` bytes and gives it back when
// destroyed: a device without room for a conversion.
class MemoryHog {
 public:
  explicit MemoryHog(std::size_t leave) {
    for (std::size_t step : {std::size_t{1} << 30, std::size_t{64} << 20, std::size_t{2} << 20}) {
      while (free_device_bytes() > leave + step) {
        void* p = nullptr;
        if (cudaMalloc(&p, step) != cudaSuccess) {
          (void)cudaGetLastError();
          break;
        }
        chunks_.push_back(p);
      }
    }
  }
  ~MemoryHog() {
    for (void* p : chunks_) cudaFree(p);
  }
  MemoryHog(const MemoryHog&) = delete;
  MemoryHog& operator=(const MemoryHog&) = delete;

 private:
  std::vector<void*> chunks_;
};


}  // namespace hisparse::testing::convert_gpu
