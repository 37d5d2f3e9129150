#pragma once
// An owning, 16-byte aligned, zero-initialised byte buffer: the node pool.
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
      data_.reset(static_cast<std::byte*>(::operator new(bytes, std::align_val_t{node_alignment})));
      std::memset(data_.get(), 0, bytes);
    }
  }
  AlignedBuffer(const AlignedBuffer& o) : AlignedBuffer(o.size_) {
    if (size_) std::memcpy(data_.get(), o.data_.get(), size_);
  }
  AlignedBuffer& operator=(const AlignedBuffer& o) {
    if (this != &o) *this = AlignedBuffer(o);
    return *this;
  }
  AlignedBuffer(AlignedBuffer&&) noexcept = default;
  AlignedBuffer& operator=(AlignedBuffer&&) noexcept = default;

  [[nodiscard]] std::byte* data() { return data_.get(); }
  [[nodiscard]] const std::byte* data() const { return data_.get(); }
  [[nodiscard]] std::size_t size() const { return size_; }

 private:
  struct Free {
    void operator()(std::byte* p) const { ::operator delete(p, std::align_val_t{node_alignment}); }
  };
  std::unique_ptr<std::byte[], Free> data_;
  std::size_t size_ = 0;
};

}  // namespace hisparse
