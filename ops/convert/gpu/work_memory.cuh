#pragma once
// Work memory of one conversion: typed device arrays that count what the
// conversion holds at once (ConvertStats::peak_work_bytes), and the few CUB
// device-wide algorithms it runs, on its stream, with their temporary storage
// counted too.
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>
#include <cub/device/device_segmented_sort.cuh>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "hisparse/formats/device_matrix.hpp"
#include "hisparse/ops/context.hpp"
#include "hisparse/ops/stride_grid.hpp"

namespace hisparse::ops::convert_detail {

// What a device's work pool keeps mapped between calls: a small call's
// arrays then need no new mapping, which costs more than its kernels.
inline constexpr std::uint64_t work_pool_keep = std::uint64_t{256} << 20;

// The work memory pool of a device, one for the process, made at its first
// use (null where the device has no memory pools). It never gives memory back
// by itself during a call (release threshold: all); WorkMemory trims it when a
// call ends. release: the pool is destroyed (its memory goes back to the
// device once nothing of it is in use) and the next use makes a new one
// (ops::release_work_memory: before cudaDeviceReset, with no call in flight).
inline cudaMemPool_t work_pool(int device, bool release = false) {
  static std::mutex mutex;
  static std::vector<cudaMemPool_t> pools;
  static std::vector<bool> made;
  std::lock_guard lock(mutex);
  if (static_cast<std::size_t>(device) >= pools.size()) {
    pools.resize(device + 1, nullptr);
    made.resize(device + 1, false);
  }
  if (release) {
    if (pools[device]) cudaMemPoolDestroy(pools[device]);
    pools[device] = nullptr;
    made[device] = false;
    return nullptr;
  }
  if (!made[device]) {
    int supported = 0;
    cuda_check(cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, device), "cudaDeviceGetAttribute");
    if (supported) {
      cudaMemPoolProps props{};
      props.allocType = cudaMemAllocationTypePinned;
      props.location.type = cudaMemLocationTypeDevice;
      props.location.id = device;
      cuda_check(cudaMemPoolCreate(&pools[device], &props), "cudaMemPoolCreate");
      std::uint64_t keep = ~std::uint64_t{0};
      cudaMemPoolSetAttribute(pools[device], cudaMemPoolAttrReleaseThreshold, &keep);
    }
    made[device] = true;
  }
  return pools[device];
}

// The most shared memory a block of the current device may use (kernels with
// a large shared-memory stage check it and fall back where theirs does not fit).
inline std::size_t shared_memory_optin() {
  int device = 0, bytes = 0;
  cuda_check(cudaGetDevice(&device), "cudaGetDevice");
  cuda_check(cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
             "cudaDeviceGetAttribute(shared memory)");
  return static_cast<std::size_t>(bytes);
}

// Whether `kernel` can take `dynamic` bytes of dynamic shared memory beside
// its static shared memory on this device.
template <class Kernel>
bool dynamic_shared_fits(Kernel kernel, std::size_t dynamic, const char* what) {
  cudaFuncAttributes attr{};
  cuda_check(cudaFuncGetAttributes(&attr, kernel), what);
  return attr.sharedSizeBytes + dynamic <= shared_memory_optin();
}

// Lets `kernel` take up to `most` bytes of dynamic shared memory, capped by
// what the device grants beside its static shared memory. Callers pass the
// most the kernel can ever ask for, not one call's size: the attribute is the
// kernel's, shared by every thread that launches it, so a smaller per-call
// value could land between another thread's set and its launch.
template <class Kernel>
void allow_dynamic_shared(Kernel kernel, std::size_t most, const char* what) {
  cudaFuncAttributes attr{};
  cuda_check(cudaFuncGetAttributes(&attr, kernel), what);
  const std::size_t optin = shared_memory_optin();
  const std::size_t cap = optin > attr.sharedSizeBytes ? optin - attr.sharedSizeBytes : 0;
  cuda_check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  static_cast<int>(most < cap ? most : cap)),
             what);
}

// Blocks of `kernel` (threads each, `shared` bytes of dynamic shared memory)
// that stay resident on the current device at once: a persistent grid's
// size, at least one a multiprocessor.
template <class Kernel>
std::uint64_t resident_blocks(Kernel kernel, int threads, std::size_t shared) {
  int device = 0, sms = 0, per_sm = 0;
  cuda_check(cudaGetDevice(&device), "cudaGetDevice");
  cuda_check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute");
  cuda_check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, shared),
             "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  return std::uint64_t(sms) * std::uint64_t(per_sm > 0 ? per_sm : 1);
}

class WorkMemory {
 public:
  // HISPARSE_CONVERT_LOG set: every phase() synchronises and prints the time
  // since the previous one (a profile without a profiler; off by default).
  // Work arrays come from the device's work pool (work_pool), stream-ordered:
  // a conversion or an edit makes 30-70 allocations, and cudaFree
  // synchronises the device at each. When the call ends, what the pool holds
  // beyond work_pool_keep goes back to the device.
  // On a context (`ctx`), the result comes from its allocator, and so does
  // every work array unless that is the synchronous one: a context's pool
  // keeps what it has mapped, so that a call after the first maps nothing
  // (the result's pool and the large arrays cost 0.3-0.7 ms to map on the
  // large families: perf-log C44). Without one, the result is cudaMalloc'd.
  explicit WorkMemory(cudaStream_t stream, Context* ctx = nullptr)
      : stream_(stream), ctx_(ctx), log_(std::getenv("HISPARSE_CONVERT_LOG") != nullptr), last_(std::chrono::steady_clock::now()) {
    int device = 0;
    cuda_check(cudaGetDevice(&device), "cudaGetDevice");
    pool_ = work_pool(device);  // null without memory pools: every array from cudaMalloc then
    if (ctx && ctx->allocator() != runtime::synchronous_allocator()) work_allocator_ = ctx->allocator();
  }
  ~WorkMemory() {
    // Every array is freed (stream-ordered) by now; once those frees have
    // run, the pool keeps at most work_pool_keep bytes mapped.
    cudaStreamSynchronize(stream_);
    if (pool_) cudaMemPoolTrimTo(pool_, work_pool_keep);
  }
  WorkMemory(const WorkMemory&) = delete;
  WorkMemory& operator=(const WorkMemory&) = delete;
  [[nodiscard]] cudaMemPool_t pool() const { return pool_; }
  // The context the call runs on (its nested calls too: the GPU edit's
  // builds), or null.
  [[nodiscard]] Context* context() const { return ctx_; }
  // Where work arrays come from besides the pool: a context's allocator, or null.
  [[nodiscard]] const std::shared_ptr<runtime::DeviceAllocator>& work_allocator() const { return work_allocator_; }
  // Memory of the result (a pool, library-allocated CSR or COO arrays).
  [[nodiscard]] DeviceBytes result(std::size_t bytes) const {
    return DeviceBytes(bytes, stream_, ctx_ ? ctx_->allocator() : nullptr);
  }
  void phase(const char* name) {
    if (!log_) return;
    sync(name);
    const auto now = std::chrono::steady_clock::now();
    std::fprintf(stderr, "[convert] %-28s %8.3f ms  (work memory %.1f MB, peak %.1f MB)\n", name,
                 std::chrono::duration<double, std::milli>(now - last_).count(), current_ / 1e6, peak_ / 1e6);
    last_ = now;
  }
  [[nodiscard]] cudaStream_t stream() const { return stream_; }
  // The most bytes of work arrays held at once. Freed blocks under
  // pooled_limit stay reserved by the pool until the call returns (for the
  // next allocation), which the device sees besides this, and up to
  // work_pool_keep after it (docs/ops.md).
  [[nodiscard]] std::uint64_t peak() const { return peak_; }
  void add(std::uint64_t bytes) {
    current_ += bytes;
    if (current_ > peak_) peak_ = current_;
  }
  void remove(std::uint64_t bytes) { current_ -= bytes; }
  void sync(const char* what) const { cuda_check(cudaStreamSynchronize(stream_), what); }
  void check_launch(const char* what) const { cuda_check(cudaGetLastError(), what); }

 private:
  cudaStream_t stream_;
  Context* ctx_ = nullptr;
  cudaMemPool_t pool_ = nullptr;
  std::shared_ptr<runtime::DeviceAllocator> work_allocator_;  // ctx_'s, unless the synchronous one
  bool log_;
  std::chrono::steady_clock::time_point last_;
  std::uint64_t current_ = 0, peak_ = 0;
};

inline constexpr std::uint64_t pooled_limit = std::uint64_t{64} << 20;

// A device array of n T's, counted against its WorkMemory while it lives.
template <class T>
class Array {
 public:
  Array() = default;
  Array(WorkMemory& w, std::uint64_t n)
      : w_(&w), n_(n), bytes_(n * sizeof(T)), large_(bytes_ >= pooled_limit || !w.pool()) {
    w.add(bytes_);
    try {
      // On a context, from its allocator. Otherwise small arrays from the
      // work pool; large ones straight from the device, whose mapping costs
      // the same either way and which the pool would then unmap at the end
      // of the call (measured slower: perf-log C4).
      mem_ = w.work_allocator() ? DeviceBytes(bytes_, w.stream(), w.work_allocator())
             : large_           ? DeviceBytes(bytes_)
                                : DeviceBytes(bytes_, w.stream(), w.pool());
    } catch (...) {
      w.remove(bytes_);
      throw;
    }
  }
  Array(Array&& o) noexcept : w_(o.w_), n_(o.n_), bytes_(o.bytes_), large_(o.large_), mem_(std::move(o.mem_)) {
    o.w_ = nullptr;
  }
  Array& operator=(Array&& o) noexcept {
    if (this != &o) {
      release();
      w_ = o.w_;
      n_ = o.n_;
      bytes_ = o.bytes_;
      large_ = o.large_;
      mem_ = std::move(o.mem_);
      o.w_ = nullptr;
    }
    return *this;
  }
  ~Array() { release(); }
  void release() {
    if (w_) w_->remove(bytes_);
    w_ = nullptr;
    mem_ = DeviceBytes();
    n_ = 0;
  }
  [[nodiscard]] T* get() const { return mem_.as<T>(); }
  [[nodiscard]] std::uint64_t size() const { return n_; }

 private:
  WorkMemory* w_ = nullptr;
  std::uint64_t n_ = 0, bytes_ = 0;
  bool large_ = false;
  DeviceBytes mem_;
};

// One element back to the host (synchronises the stream).
template <class T>
T read_back(WorkMemory& w, const T* p, const char* what) {
  T v{};
  cuda_check(cudaMemcpyAsync(&v, p, sizeof(T), cudaMemcpyDeviceToHost, w.stream()), what);
  w.sync(what);
  return v;
}

// n elements back to the host in one copy and one synchronisation: a step's
// counters read together instead of one round trip each (perf-log C20).
template <class T>
std::vector<T> read_back_n(WorkMemory& w, const T* p, std::size_t n, const char* what) {
  std::vector<T> v(n);
  cuda_check(cudaMemcpyAsync(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost, w.stream()), what);
  w.sync(what);
  return v;
}

// CUB calls (CUB_NS_QUALIFIER: this unit wraps CUB in its own namespace, see
// ops/meson.build): query the temporary storage, hold it (counted), run.
template <class Call>
void run_cub(WorkMemory& w, const char* what, Call&& call) {
  std::size_t temp = 0;
  cuda_check(call(nullptr, temp), what);
  Array<std::uint8_t> t(w, temp ? temp : 1);
  cuda_check(call(t.get(), temp), what);
}

template <class T>
void exclusive_sum(WorkMemory& w, const T* in, T* out, std::uint64_t n) {
  run_cub(w, "CUB_NS_QUALIFIER::DeviceScan::ExclusiveSum", [&](void* t, std::size_t& b) {
    return CUB_NS_QUALIFIER::DeviceScan::ExclusiveSum(t, b, in, out, static_cast<std::int64_t>(n), w.stream());
  });
}

template <class T>
void inclusive_sum(WorkMemory& w, const T* in, T* out, std::uint64_t n) {
  run_cub(w, "CUB_NS_QUALIFIER::DeviceScan::InclusiveSum", [&](void* t, std::size_t& b) {
    return CUB_NS_QUALIFIER::DeviceScan::InclusiveSum(t, b, in, out, static_cast<std::int64_t>(n), w.stream());
  });
}

struct MinOp {
  template <class T>
  __device__ T operator()(const T& a, const T& b) const { return b < a ? b : a; }
};

struct MaxOp {
  template <class T>
  __device__ T operator()(const T& a, const T& b) const { return a < b ? b : a; }
};

template <class T>
void inclusive_max(WorkMemory& w, const T* in, T* out, std::uint64_t n) {
  run_cub(w, "cub::DeviceScan::InclusiveScan", [&](void* t, std::size_t& b) {
    return CUB_NS_QUALIFIER::DeviceScan::InclusiveScan(t, b, in, out, MaxOp{}, static_cast<std::int64_t>(n),
                                                       w.stream());
  });
}

// Stable sort of (key, value) pairs by the key's bits [0, bits). Sorted
// results land in keys_out / vals_out.
template <class K, class Vv>
void radix_sort_pairs(WorkMemory& w, const K* keys_in, K* keys_out, const Vv* vals_in, Vv* vals_out, std::uint64_t n,
                      int bits) {
  if (n == 0) return;
  run_cub(w, "cub::DeviceRadixSort::SortPairs", [&](void* t, std::size_t& b) {
    return CUB_NS_QUALIFIER::DeviceRadixSort::SortPairs(t, b, keys_in, keys_out, vals_in, vals_out, static_cast<std::int64_t>(n), 0,
                                           bits > 0 ? bits : 1, w.stream());
  });
}

// Sort of (key, value) pairs within segments [begin[s], end[s]) (segments
// need not cover the arrays; positions outside every segment are left
// undefined in the outputs). Stable: equal keys keep their order.
template <class K, class Vv>
void segmented_sort_pairs(WorkMemory& w, const K* keys_in, K* keys_out, const Vv* vals_in, Vv* vals_out,
                          std::uint64_t n, std::uint64_t segments, const std::uint64_t* begin,
                          const std::uint64_t* end) {
  if (n == 0 || segments == 0) return;
  run_cub(w, "cub::DeviceSegmentedSort::StableSortPairs", [&](void* t, std::size_t& b) {
    return CUB_NS_QUALIFIER::DeviceSegmentedSort::StableSortPairs(t, b, keys_in, keys_out, vals_in, vals_out,
                                                     static_cast<std::int64_t>(n), static_cast<std::int64_t>(segments),
                                                     begin, end, w.stream());
  });
}

__global__ void iota_kernel(std::uint32_t* out, std::uint64_t n) {
  for (std::uint64_t i = blockIdx.x * std::uint64_t(blockDim.x) + threadIdx.x; i < n;
       i += std::uint64_t(gridDim.x) * blockDim.x)
    out[i] = static_cast<std::uint32_t>(i);
}

// Grid size for one thread per item.
inline unsigned blocks_for(std::uint64_t n, unsigned block = 256) {
  const std::uint64_t b = (n + block - 1) / block;
  return static_cast<unsigned>(b ? b : 1);
}

}  // namespace hisparse::ops::convert_detail
