#pragma once
// Small host-side CUDA helpers of the runtime, implemented in src/device.cpp
// (plain C++ against the CUDA runtime API): checked calls, owning buffers, the
// device's limits and a watchdog-aware wait.
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstddef>
#include <source_location>
#include <utility>

#include "allocator.hpp"
#include "config.hpp"
#include "error.hpp"

namespace hisparse::runtime {

// Throws CudaError naming `what` unless e == cudaSuccess.
inline void check(cudaError_t e, const char* what, std::source_location where = std::source_location::current()) {
    if (e != cudaSuccess) detail::throw_cuda_error(static_cast<int>(e), what, where);
}

// Number of CUDA devices; 0 (not an exception) when there is no driver or device.
[[nodiscard]] int device_count() noexcept;

// Limits of the current device.
[[nodiscard]] DeviceLimits query_device_limits();

// Where an OwnedBuffer's bytes live: a tag with the allocation calls
// (defined in src/device.cpp). Blocks up to 4 MiB are rounded up to a power
// of two and, when released, kept in a process-wide cache (at most 64 MiB
// per kind, device memory per device) for the next allocation of that size:
// cudaMallocHost and cudaFreeHost cost about 0.2 ms each, so a Runtime made
// per call (as the ops make theirs) would otherwise spend over a millisecond
// setting up its few small buffers. Release happens only when the memory's
// last use is complete (the runtime's own buffers: after run() returns).
struct DeviceMemory {  // cudaMalloc
    static void* allocate(std::size_t bytes);
    static void release(void* p, std::size_t bytes) noexcept;
};
struct PinnedMemory {  // cudaMallocHost: asynchronous copies from and to it are truly asynchronous
    static void* allocate(std::size_t bytes);
    static void release(void* p, std::size_t bytes) noexcept;
};

// DeviceMemory as a DeviceAllocator (stream ignored): the queues' memory of a
// Runtime whose config names no allocator.
[[nodiscard]] std::shared_ptr<DeviceAllocator> cached_device_allocator();

// Frees every cached block. Call it before cudaDeviceReset (which would
// leave the cache holding pointers into a destroyed context); harmless at
// any other time.
void release_cached_memory() noexcept;

// Fault injection for tests: the n-th DeviceMemory allocation from now (0:
// the next; cached blocks count too) fails as cudaMalloc does when the
// device is out of memory; a negative n turns injection off (the default).
void inject_allocation_failure(long n);

// An owning allocation of `Memory`. Move-only.
template <class Memory>
class OwnedBuffer {
public:
    OwnedBuffer() = default;
    explicit OwnedBuffer(std::size_t bytes) : ptr_(bytes != 0 ? Memory::allocate(bytes) : nullptr), bytes_(bytes) {}
    ~OwnedBuffer() { Memory::release(ptr_, bytes_); }
    OwnedBuffer(OwnedBuffer&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
    OwnedBuffer& operator=(OwnedBuffer&& o) noexcept {
        if (this != &o) {
            Memory::release(ptr_, bytes_);
            ptr_ = std::exchange(o.ptr_, nullptr);
            bytes_ = std::exchange(o.bytes_, 0);
        }
        return *this;
    }
    OwnedBuffer(const OwnedBuffer&) = delete;
    OwnedBuffer& operator=(const OwnedBuffer&) = delete;
    [[nodiscard]] void* get() const noexcept { return ptr_; }
    [[nodiscard]] std::size_t size() const noexcept { return bytes_; }
    template <class T>
    [[nodiscard]] T* as() const noexcept { return static_cast<T*>(ptr_); }

private:
    void* ptr_ = nullptr;
    std::size_t bytes_ = 0;
};

using DeviceBuffer = OwnedBuffer<DeviceMemory>;
using PinnedBuffer = OwnedBuffer<PinnedMemory>;

// Owning stream / event.
class Stream {
public:
    Stream();  // non-blocking stream
    ~Stream();
    Stream(const Stream&) = delete;
    Stream& operator=(const Stream&) = delete;
    [[nodiscard]] cudaStream_t get() const noexcept { return s_; }

private:
    cudaStream_t s_ = nullptr;
};

class Event {
public:
    Event();  // timing disabled: cheapest to record and query
    ~Event();
    Event(const Event&) = delete;
    Event& operator=(const Event&) = delete;
    [[nodiscard]] cudaEvent_t get() const noexcept { return e_; }

private:
    cudaEvent_t e_ = nullptr;
};

// Waits for `event`; spins first (a run often ends within microseconds), then
// yields. Returns false when `timeout` passed first. Throws CudaError on errors.
[[nodiscard]] bool wait_for(cudaEvent_t event, std::chrono::steady_clock::time_point deadline);

}  // namespace hisparse::runtime
