#pragma once
// A 16-byte aligned, zero-initialised byte buffer: the node pool. Owning, or
// (view()) a window on memory another object owns and keeps alive: a
// version's pool in its family's NodeArena. Copies are always owning.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>

#include "hisparse/formats/node.hpp"

namespace hisparse {

class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(std::size_t bytes) : size_(bytes) {
    if (bytes) {
      data_ = std::shared_ptr<std::byte>(static_cast<std::byte*>(::operator new(bytes, std::align_val_t{node_alignment})),
                                         Free{});
      std::memset(data_.get(), 0, bytes);
    }
  }
  // The first `bytes` at `data` (16-byte aligned), kept valid by `owner`.
  static AlignedBuffer view(std::shared_ptr<void> owner, std::byte* data, std::size_t bytes) {
    AlignedBuffer b;
    b.data_ = std::shared_ptr<std::byte>(std::move(owner), data);
    b.size_ = bytes;
    return b;
  }
  AlignedBuffer(const AlignedBuffer& o) : AlignedBuffer(o.size_) {
    if (size_) std::memcpy(data_.get(), o.data_.get(), size_);
  }
  AlignedBuffer& operator=(const AlignedBuffer& o) {
    if (this != &o) *this = AlignedBuffer(o);
    return *this;
  }
  AlignedBuffer(AlignedBuffer&& o) noexcept : data_(std::move(o.data_)), size_(o.size_) { o.size_ = 0; }
  AlignedBuffer& operator=(AlignedBuffer&& o) noexcept {
    if (this != &o) {
      data_ = std::move(o.data_);
      size_ = o.size_;
      o.size_ = 0;
    }
    return *this;
  }

  [[nodiscard]] std::byte* data() { return data_.get(); }
  [[nodiscard]] const std::byte* data() const { return data_.get(); }
  [[nodiscard]] std::size_t size() const { return size_; }

 private:
  struct Free {
    void operator()(std::byte* p) const { ::operator delete(p, std::align_val_t{node_alignment}); }
  };
  std::shared_ptr<std::byte> data_;
  std::size_t size_ = 0;
};

}  // namespace hisparse
