#pragma once
// The device twin of NodeArena (node_arena.hpp): one device allocation that a
// family of DeviceMatrix versions shares (docs/format.md, "Versions"; the GPU
// batch edit, ops/edit_gpu.hpp). Its first bytes are the first version's pool
// (header included); each persistent edit appends the nodes it wrote and
// refers to every other node where it already is.
//
// Child references are 32-bit offsets into the allocation, so it cannot grow
// in place: its capacity is fixed when the family starts (ops::versioned),
// at most the 4 GiB the references address. An append that does not fit is
// refused (LimitError); ops::edit_in_place then compacts its matrix into a new
// family with room. Nodes are immutable once appended and freed with the
// allocation, when the last version of the family goes.
#include <cstdint>
#include <mutex>

#include "hisparse/formats/device_matrix.hpp"

namespace hisparse {

class DeviceArena {
 public:
  // `capacity` bytes (a multiple of 16, at least `first`, at most
  // max_pool_bytes) holding the `first` bytes of `pool` (device memory: the
  // first version's pool), copied on `stream` (synchronised).
  DeviceArena(const std::byte* pool, std::uint64_t first, std::uint64_t capacity, cudaStream_t stream);
  DeviceArena(const DeviceArena&) = delete;
  DeviceArena& operator=(const DeviceArena&) = delete;

  // Room for `bytes` (a multiple of 16) after everything appended so far, for
  // the caller alone to write: its offset; or no room (false), nothing
  // changed. Thread-safe.
  bool append(std::uint64_t bytes, std::uint64_t& offset);
  // Gives back the room of the last append (offset, bytes) when nothing was
  // appended after it: an edit that fails after its append leaves the arena
  // as it found it. Otherwise the bytes stay unused until the family goes.
  void rollback(std::uint64_t offset, std::uint64_t bytes);

  [[nodiscard]] std::byte* data() const { return bytes_.as<std::byte>(); }
  [[nodiscard]] std::uint64_t capacity() const { return bytes_.size(); }
  // Bytes handed out so far (the first version's included).
  [[nodiscard]] std::uint64_t size() const;

 private:
  DeviceBytes bytes_;
  std::uint64_t used_ = 0;
  mutable std::mutex mutex_;
};

}  // namespace hisparse
