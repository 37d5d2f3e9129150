#pragma once
// A library context: what the GPU ops would otherwise set up at every call,
// kept between calls on one device and stream (cuSPARSE's handle, Ginkgo's
// executor). It owns
//   - the stream the ops run on (not owned: the caller's) and
//   - the device allocator every allocation of the ops comes from (results
//     too: a matrix made through a context returns its pool to that
//     allocator, on the stream it was made on), and
//   - what the ops cache: runtimes with their queues, pinned counters, work
//     memory; built at an op's first call, grown when a larger matrix needs
//     more, freed by release_cached() or with the context.
// Every GPU op takes a Context& (docs/ops.md, "Contexts and streams"); the
// overloads that take a cudaStream_t instead make a call-local context with
// the synchronous allocator (cudaMalloc, runtime::synchronous_allocator()),
// and synchronise before they return, as before contexts existed.
//
// Thread safety: one host thread uses a context at a time (as a cuSPARSE
// handle bound to a stream); contexts may be used side by side from several
// threads, on one stream or several. A context must outlive the plans and
// calls that use it; matrices it made outlive it (they keep the allocator).
#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <type_traits>
#include <typeindex>
#include <typeinfo>
#include <unordered_map>

#include "hisparse/formats/device_matrix.hpp"
#include "hisparse/runtime/allocator.hpp"

namespace hisparse::ops {

class Context {
 public:
  // On the current device. `stream`: null is the legacy default stream.
  // `allocator`: null is the device's stream-ordered pool
  // (runtime::stream_pool_allocator: cudaMallocFromPoolAsync, nothing
  // synchronises).
  explicit Context(cudaStream_t stream = nullptr, std::shared_ptr<runtime::DeviceAllocator> allocator = nullptr);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  [[nodiscard]] int device() const noexcept { return device_; }
  [[nodiscard]] cudaStream_t stream() const noexcept { return stream_; }
  // Between calls: the ops that follow run on `stream`. The cached state
  // goes (release_cached(), which synchronises the old stream); matrices
  // made on the old stream still return their memory on it, so keep it
  // alive as long as they live.
  void set_stream(cudaStream_t stream);
  [[nodiscard]] const std::shared_ptr<runtime::DeviceAllocator>& allocator() const noexcept { return allocator_; }
  // Where cached runtimes take their queues from: the allocator, except for
  // the synchronous one, where null (the runtime's own block cache: a
  // runtime releases its queues only after its runs completed, so reusing
  // them needs no synchronisation, and small queues cost no cudaMalloc).
  [[nodiscard]] std::shared_ptr<runtime::DeviceAllocator> queue_allocator() const;

  // `bytes` of device memory from the allocator, on the context's stream.
  [[nodiscard]] DeviceBytes allocate(std::size_t bytes) const { return DeviceBytes(bytes, stream_, allocator_); }
  // Work memory that dies within a call, on the context's stream: from the
  // allocator, except for the synchronous one, where from the device's
  // stream-ordered pool (each cudaFree synchronises the device; a plan
  // build's dozen work buffers cost about a millisecond that way), which
  // keeps it for later calls (docs/ops.md, "Contexts and streams").
  [[nodiscard]] DeviceBytes allocate_work(std::size_t bytes) const;
  // Throws Error naming `op` unless the current device is the context's.
  void check_device(const char* op) const;

  // What an op keeps between calls: one object per type T (a subclass of
  // CacheEntry, default-constructible), made at its first use.
  struct CacheEntry {
    virtual ~CacheEntry() = default;
  };
  template <class T>
  T& cached() {
    static_assert(std::is_base_of_v<CacheEntry, T>, "cache entries derive from Context::CacheEntry");
    auto& slot = cache_[std::type_index(typeid(T))];
    if (!slot) slot = std::make_unique<T>();
    return static_cast<T&>(*slot);
  }
  // Frees every op's cached state (synchronising the stream first, so that
  // nothing in flight still uses it); the next calls build it again.
  void release_cached();
  [[nodiscard]] std::size_t cached_entries() const noexcept { return cache_.size(); }

 private:
  int device_ = 0;
  cudaStream_t stream_ = nullptr;
  std::shared_ptr<runtime::DeviceAllocator> allocator_;
  std::unordered_map<std::type_index, std::unique_ptr<CacheEntry>> cache_;
};

}  // namespace hisparse::ops

namespace hisparse {
using ops::Context;
}  // namespace hisparse
