#include "hisparse/runtime/device.hpp"

#include <thread>

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

void* DeviceMemory::allocate(std::size_t bytes) {
    void* p = nullptr;
    check(cudaMalloc(&p, bytes), "cudaMalloc");
    return p;
}
void DeviceMemory::release(void* p) noexcept {
    if (p != nullptr) (void)cudaFree(p);
}

void* PinnedMemory::allocate(std::size_t bytes) {
    void* p = nullptr;
    check(cudaMallocHost(&p, bytes), "cudaMallocHost");
    return p;
}
void PinnedMemory::release(void* p) noexcept {
    if (p != nullptr) (void)cudaFreeHost(p);
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

}  // namespace hisparse::runtime
