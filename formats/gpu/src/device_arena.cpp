#include "hisparse/formats/device_arena.hpp"

#include <string>

namespace hisparse {

DeviceArena::DeviceArena(const std::byte* pool, std::uint64_t first, std::uint64_t capacity, cudaStream_t stream) {
  if (capacity % node_alignment != 0 || first % node_alignment != 0 || first > capacity || capacity > max_pool_bytes)
    throw LimitError("a device arena of " + std::to_string(capacity) + " bytes for a pool of " + std::to_string(first) +
                     " (both multiples of 16, at most " + std::to_string(max_pool_bytes) + ")");
  bytes_ = DeviceBytes(capacity);
  cuda_check(cudaMemcpyAsync(bytes_.get(), pool, first, cudaMemcpyDeviceToDevice, stream),
             "cudaMemcpyAsync(arena start)");
  cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize(arena start)");
  used_ = first;
}

bool DeviceArena::append(std::uint64_t bytes, std::uint64_t& offset) {
  if (bytes % node_alignment != 0) throw Error("DeviceArena::append: " + std::to_string(bytes) + " bytes, not a multiple of 16");
  std::lock_guard lock(mutex_);
  if (bytes > bytes_.size() - used_) return false;
  offset = used_;
  used_ += bytes;
  return true;
}

void DeviceArena::rollback(std::uint64_t offset, std::uint64_t bytes) {
  std::lock_guard lock(mutex_);
  if (offset + bytes == used_) used_ = offset;
}

std::uint64_t DeviceArena::size() const {
  std::lock_guard lock(mutex_);
  return used_;
}

}  // namespace hisparse
