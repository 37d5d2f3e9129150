#pragma once
// Where device memory comes from: a stream-ordered allocator interface (as
// RMM's device_memory_resource and CUB's caching allocator), so that
// frameworks with their own memory pools (PyTorch, CuPy, RMM) can hand the
// runtime and the ops their memory. Plain C++ against the CUDA runtime API.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>
#include <utility>

namespace hisparse::runtime {

// Memory returned by allocate(bytes, s) may be used by work ordered after
// the call on stream s (and, once s is synchronised, anywhere); it is handed
// back with deallocate on a stream whose work ordered before that call is
// the memory's last use. Implementations are used from one host thread at a
// time per object unless they say otherwise (the default below is thread-safe).
class DeviceAllocator {
public:
    virtual ~DeviceAllocator() = default;
    // At least 256-byte aligned. Throws (CudaError for the CUDA allocators,
    // whatever the implementation chooses otherwise) when out of memory.
    virtual void* allocate(std::size_t bytes, cudaStream_t stream) = 0;
    virtual void deallocate(void* p, std::size_t bytes, cudaStream_t stream) noexcept = 0;
};

// The default: cudaMallocFromPoolAsync / cudaFreeAsync on a memory pool of
// the device's own (one per device, made on first use, kept for the
// process), whose release threshold keeps freed memory for the next
// allocation instead of returning it to the driver at every synchronisation.
// Nothing synchronises, unlike cudaFree.
class StreamPoolAllocator final : public DeviceAllocator {
public:
    explicit StreamPoolAllocator(int device);
    void* allocate(std::size_t bytes, cudaStream_t stream) override;
    void deallocate(void* p, std::size_t bytes, cudaStream_t stream) noexcept override;
    [[nodiscard]] cudaMemPool_t pool() const noexcept { return pool_; }

private:
    cudaMemPool_t pool_ = nullptr;
};

// cudaMalloc / cudaFree, stream ignored: allocation and release synchronise
// the device, as the ops did before contexts existed.
class SynchronousAllocator final : public DeviceAllocator {
public:
    void* allocate(std::size_t bytes, cudaStream_t stream) override;
    void deallocate(void* p, std::size_t bytes, cudaStream_t stream) noexcept override;
};

// The process's StreamPoolAllocator of `device` (one object per device).
// Made at the first call and kept for the process: it does not survive
// cudaDeviceReset.
[[nodiscard]] std::shared_ptr<DeviceAllocator> stream_pool_allocator(int device);
// The same where a call has made it already; null otherwise (makes nothing).
[[nodiscard]] std::shared_ptr<DeviceAllocator> existing_stream_pool_allocator(int device);
// The process's SynchronousAllocator.
[[nodiscard]] std::shared_ptr<DeviceAllocator> synchronous_allocator();

// Bytes owned through an allocator, returned on the stream they were last
// given (allocation's, or set_stream's). Keeps the allocator alive. Move-only.
class AllocatedBuffer {
public:
    AllocatedBuffer() = default;
    AllocatedBuffer(std::size_t bytes, std::shared_ptr<DeviceAllocator> allocator, cudaStream_t stream)
        : allocator_(std::move(allocator)), stream_(stream), bytes_(bytes) {
        if (bytes_ != 0) ptr_ = allocator_->allocate(bytes_, stream_);
    }
    ~AllocatedBuffer() { release(); }
    AllocatedBuffer(AllocatedBuffer&& o) noexcept
        : allocator_(std::move(o.allocator_)), stream_(o.stream_), ptr_(std::exchange(o.ptr_, nullptr)),
          bytes_(std::exchange(o.bytes_, 0)) {}
    AllocatedBuffer& operator=(AllocatedBuffer&& o) noexcept {
        if (this != &o) {
            release();
            allocator_ = std::move(o.allocator_);
            stream_ = o.stream_;
            ptr_ = std::exchange(o.ptr_, nullptr);
            bytes_ = std::exchange(o.bytes_, 0);
        }
        return *this;
    }
    AllocatedBuffer(const AllocatedBuffer&) = delete;
    AllocatedBuffer& operator=(const AllocatedBuffer&) = delete;

    [[nodiscard]] void* get() const noexcept { return ptr_; }
    [[nodiscard]] std::size_t size() const noexcept { return bytes_; }
    template <class T>
    [[nodiscard]] T* as() const noexcept { return static_cast<T*>(ptr_); }
    // The stream the bytes will be returned on (its work must be the last use).
    void set_stream(cudaStream_t stream) noexcept { stream_ = stream; }

private:
    void release() noexcept {
        if (ptr_ != nullptr) allocator_->deallocate(ptr_, bytes_, stream_);
        ptr_ = nullptr;
        bytes_ = 0;
    }
    std::shared_ptr<DeviceAllocator> allocator_;
    cudaStream_t stream_ = nullptr;
    void* ptr_ = nullptr;
    std::size_t bytes_ = 0;
};

}  // namespace hisparse::runtime
