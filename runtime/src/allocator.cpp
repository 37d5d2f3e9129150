#include "hisparse/runtime/allocator.hpp"

#include <cstdint>
#include <limits>
#include <map>
#include <mutex>

#include "hisparse/runtime/device.hpp"

namespace hisparse::runtime {

StreamPoolAllocator::StreamPoolAllocator(int device) {
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.handleTypes = cudaMemHandleTypeNone;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = device;
    check(cudaMemPoolCreate(&pool_, &props), "cudaMemPoolCreate");
    // Freed memory stays in the pool: without this, every synchronisation
    // hands it back to the driver and the next call maps it again.
    std::uint64_t keep = std::numeric_limits<std::uint64_t>::max();
    check(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &keep),
          "cudaMemPoolSetAttribute(release threshold)");
}

void* StreamPoolAllocator::allocate(std::size_t bytes, cudaStream_t stream) {
    void* p = nullptr;
    check(cudaMallocFromPoolAsync(&p, bytes, pool_, stream), "cudaMallocFromPoolAsync");
    return p;
}

void StreamPoolAllocator::deallocate(void* p, std::size_t, cudaStream_t stream) noexcept {
    (void)cudaFreeAsync(p, stream);
}

void* SynchronousAllocator::allocate(std::size_t bytes, cudaStream_t) {
    void* p = nullptr;
    check(cudaMalloc(&p, bytes), "cudaMalloc");
    return p;
}

void SynchronousAllocator::deallocate(void* p, std::size_t, cudaStream_t) noexcept { (void)cudaFree(p); }

namespace {
// The process's stream-ordered pools. Never destroyed: a pool's memory goes
// with the process's CUDA context, and at exit the CUDA runtime may be gone
// before static destructors run.
std::shared_ptr<DeviceAllocator> stream_pool(int device, bool make) {
    static std::mutex mutex;
    static auto* pools = new std::map<int, std::shared_ptr<DeviceAllocator>>();
    const std::lock_guard lock(mutex);
    const auto it = pools->find(device);
    if (it != pools->end()) return it->second;
    if (!make) return nullptr;
    auto p = std::make_shared<StreamPoolAllocator>(device);
    (*pools)[device] = p;
    return p;
}
}  // namespace

std::shared_ptr<DeviceAllocator> stream_pool_allocator(int device) { return stream_pool(device, true); }

std::shared_ptr<DeviceAllocator> existing_stream_pool_allocator(int device) { return stream_pool(device, false); }

std::shared_ptr<DeviceAllocator> synchronous_allocator() {
    static const auto* a = new std::shared_ptr<DeviceAllocator>(std::make_shared<SynchronousAllocator>());
    return *a;
}

}  // namespace hisparse::runtime
