#include "hisparse/runtime/device.hpp"

#include <atomic>
#include <map>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace hisparse::runtime {

int device_count() noexcept {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();  // clear the sticky "no device" error
        return 0;
    }
    return n;
}

DeviceLimits query_device_limits() {
    int device = 0;
    check(cudaGetDevice(&device), "cudaGetDevice");
    DeviceLimits l;
    int v = 0;
    check(cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute(SM count)");
    l.multiprocessors = static_cast<std::uint32_t>(v);
    check(cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlock, device),
          "cudaDeviceGetAttribute(shared memory per block)");
    l.max_shared_per_block = static_cast<std::uint32_t>(v);
    std::size_t pending = 0;
    check(cudaDeviceGetLimit(&pending, cudaLimitDevRuntimePendingLaunchCount),
          "cudaDeviceGetLimit(pending launch count)");
    l.device_pending_launch_limit = static_cast<std::uint32_t>(pending);
    return l;
}

namespace {

// Released blocks by (device, size class), for reuse. Never destroyed: at
// process exit the CUDA runtime may already be gone, and the OS reclaims
// the memory anyway.
class BlockCache {
public:
    static constexpr std::size_t max_block = std::size_t{4} << 20;
    static constexpr std::size_t max_total = std::size_t{64} << 20;

    static std::size_t size_class(std::size_t bytes) {
        if (bytes > max_block) return bytes;
        std::size_t c = 256;
        while (c < bytes) c <<= 1;
        return c;
    }
    void* take(int device, std::size_t cls) {
        const std::lock_guard lock(mutex_);
        auto it = free_.find({device, cls});
        if (it == free_.end() || it->second.empty()) return nullptr;
        void* p = it->second.back();
        it->second.pop_back();
        total_ -= cls;
        return p;
    }
    bool keep(int device, std::size_t cls, void* p) {
        const std::lock_guard lock(mutex_);
        if (cls > max_block || total_ + cls > max_total) return false;
        free_[{device, cls}].push_back(p);
        total_ += cls;
        return true;
    }
    template <class Free>
    void clear(Free&& release) {
        const std::lock_guard lock(mutex_);
        for (auto& [key, blocks] : free_)
            for (void* p : blocks) release(key.first, p);
        free_.clear();
        total_ = 0;
    }

private:
    std::mutex mutex_;
    std::map<std::pair<int, std::size_t>, std::vector<void*>> free_;
    std::size_t total_ = 0;
};

BlockCache& device_cache() {
    static auto* cache = new BlockCache;
    return *cache;
}
BlockCache& pinned_cache() {
    static auto* cache = new BlockCache;
    return *cache;
}

int current_device() {
    int device = 0;
    check(cudaGetDevice(&device), "cudaGetDevice");
    return device;
}

}  // namespace

namespace {
std::atomic<long> injected_failure_countdown{-1};
}  // namespace

void inject_allocation_failure(long n) { injected_failure_countdown.store(n < 0 ? -1 : n); }

void* DeviceMemory::allocate(std::size_t bytes) {
    if (injected_failure_countdown.load() >= 0 && injected_failure_countdown.fetch_sub(1) == 0)
        check(cudaErrorMemoryAllocation, "cudaMalloc (failure injected by a test)");
    const int device = current_device();
    const std::size_t cls = BlockCache::size_class(bytes);
    if (void* p = device_cache().take(device, cls)) return p;
    void* p = nullptr;
    if (cudaMalloc(&p, cls) != cudaSuccess) {
        // Out of memory (or another failure): the cache may hold what is
        // needed in other size classes. Give it back and try once more.
        (void)cudaGetLastError();
        release_cached_memory();
        check(cudaMalloc(&p, cls), "cudaMalloc");
    }
    return p;
}
void DeviceMemory::release(void* p, std::size_t bytes) noexcept {
    if (p == nullptr) return;
    int device = 0;
    if (cudaGetDevice(&device) == cudaSuccess && device_cache().keep(device, BlockCache::size_class(bytes), p)) return;
    (void)cudaFree(p);
}

// Pinned memory is mapped for every device (unified addressing): one pool.
void* PinnedMemory::allocate(std::size_t bytes) {
    const std::size_t cls = BlockCache::size_class(bytes);
    if (void* p = pinned_cache().take(-1, cls)) return p;
    void* p = nullptr;
    check(cudaMallocHost(&p, cls), "cudaMallocHost");
    return p;
}
void PinnedMemory::release(void* p, std::size_t bytes) noexcept {
    if (p == nullptr) return;
    if (pinned_cache().keep(-1, BlockCache::size_class(bytes), p)) return;
    (void)cudaFreeHost(p);
}

void release_cached_memory() noexcept {
    device_cache().clear([](int device, void* p) {
        int current = 0;
        (void)cudaGetDevice(&current);
        (void)cudaSetDevice(device);
        (void)cudaFree(p);
        (void)cudaSetDevice(current);
    });
    pinned_cache().clear([](int, void* p) { (void)cudaFreeHost(p); });
}

Stream::Stream() { check(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags"); }
Stream::~Stream() {
    if (s_ != nullptr) (void)cudaStreamDestroy(s_);
}

Event::Event() { check(cudaEventCreateWithFlags(&e_, cudaEventDisableTiming), "cudaEventCreateWithFlags"); }
Event::~Event() {
    if (e_ != nullptr) (void)cudaEventDestroy(e_);
}

bool wait_for(cudaEvent_t event, std::chrono::steady_clock::time_point deadline) {
    // Spin for the first ~200 µs: most runs end by then and a sleeping thread
    // would add tens of microseconds of wake-up latency to each of them.
    const auto spin_until = std::chrono::steady_clock::now() + std::chrono::microseconds(200);
    while (true) {
        const cudaError_t e = cudaEventQuery(event);
        if (e == cudaSuccess) return true;
        if (e != cudaErrorNotReady) check(e, "cudaEventQuery(run end)");
        const auto now = std::chrono::steady_clock::now();
        if (now >= deadline) return false;
        if (now > spin_until) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
}

namespace {
class CachedDeviceAllocator final : public DeviceAllocator {
public:
    void* allocate(std::size_t bytes, cudaStream_t) override { return DeviceMemory::allocate(bytes); }
    void deallocate(void* p, std::size_t bytes, cudaStream_t) noexcept override { DeviceMemory::release(p, bytes); }
};
}  // namespace

std::shared_ptr<DeviceAllocator> cached_device_allocator() {
    static const auto* a = new std::shared_ptr<DeviceAllocator>(std::make_shared<CachedDeviceAllocator>());
    return *a;
}

}  // namespace hisparse::runtime
