#include "hisparse/ops/context.hpp"

#include <string>
#include <utility>

namespace hisparse::ops {

Context::Context(cudaStream_t stream, std::shared_ptr<runtime::DeviceAllocator> allocator)
    : stream_(stream), allocator_(std::move(allocator)) {
  cuda_check(cudaGetDevice(&device_), "cudaGetDevice");
  if (!allocator_) {
    try {
      allocator_ = runtime::stream_pool_allocator(device_);
    } catch (const std::exception& e) {
      (void)cudaGetLastError();
      throw Error(std::string("Context: no stream-ordered memory pool on device ") + std::to_string(device_) + ": " +
                  e.what());
    }
  }
}

Context::~Context() {
  // Cached runtimes hand their queues back on the stream; work still in
  // flight that uses them must finish first.
  (void)cudaStreamSynchronize(stream_);
}

void Context::check_device(const char* op) const {
  int current = 0;
  cuda_check(cudaGetDevice(&current), "cudaGetDevice");
  if (current != device_)
    throw Error(std::string(op) + ": the context belongs to device " + std::to_string(device_) +
                " but the current device is " + std::to_string(current));
}

void Context::set_stream(cudaStream_t stream) {
  if (stream == stream_) return;
  release_cached();
  stream_ = stream;
}

std::shared_ptr<runtime::DeviceAllocator> Context::queue_allocator() const {
  return allocator_ == runtime::synchronous_allocator() ? nullptr : allocator_;
}

DeviceBytes Context::allocate_work(std::size_t bytes) const {
  if (allocator_ != runtime::synchronous_allocator()) return allocate(bytes);
  std::shared_ptr<runtime::DeviceAllocator> pool;
  try {
    pool = runtime::stream_pool_allocator(device_);
  } catch (const std::exception&) {
    (void)cudaGetLastError();
    return allocate(bytes);  // a device without memory pools: cudaMalloc, as the allocator says
  }
  return DeviceBytes(bytes, stream_, std::move(pool));
}

void Context::release_cached() {
  cuda_check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize(release_cached)");
  cache_.clear();
}

}  // namespace hisparse::ops
