#pragma once
// Turns fuzz bytes into choices (sizes, positions, values). Past the end it
// yields zeros, so every byte string decodes to something.
#include <algorithm>
#include <complex>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <type_traits>

namespace hisparse::fuzz {

class ByteReader {
 public:
  explicit ByteReader(std::span<const std::uint8_t> bytes) : bytes_(bytes) {}

  template <class T>
  T take() {
    static_assert(std::is_trivially_copyable_v<T>);
    T v{};
    const std::size_t n = std::min(sizeof(T), bytes_.size() - pos_);
    if (n != 0) std::memcpy(&v, bytes_.data() + pos_, n);  // data() may be null for an empty input
    pos_ += n;
    return v;
  }

  // Uniform enough in [lo, hi] for fuzzing (a modulo).
  std::uint64_t in_range(std::uint64_t lo, std::uint64_t hi) {
    const std::uint64_t span = hi - lo;
    const std::uint64_t x = span < 256 ? take<std::uint8_t>() : span < 65536 ? take<std::uint16_t>() : take<std::uint64_t>();
    return span == std::numeric_limits<std::uint64_t>::max() ? x : lo + x % (span + 1);
  }

  bool flag() { return take<std::uint8_t>() & 1; }

 private:
  std::span<const std::uint8_t> bytes_;
  std::size_t pos_ = 0;
};

}  // namespace hisparse::fuzz
