#pragma once
// Counter-based random numbers: every row, block or entry derives its own
// stream from (seed, purpose, index), so output never depends on how the
// work is chunked, and integer-only conversions keep it identical on every
// platform.
#include <cstdint>

namespace hisparse::gen::detail {

// The splitmix64 finalizer: a bijection with full avalanche.
constexpr std::uint64_t mix64(std::uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

constexpr std::uint64_t golden = 0x9e3779b97f4a7c15ULL;

// Chaining through mix64 keeps (a, b) and (b, a) apart.
constexpr std::uint64_t hash(std::uint64_t a, std::uint64_t b) { return mix64(mix64(a + golden) ^ b); }
constexpr std::uint64_t hash(std::uint64_t a, std::uint64_t b, std::uint64_t c) {
  return mix64(hash(a, b) ^ (c * golden));
}

// Purposes, so that two uses of one seed and index never share a stream.
enum class Stream : std::uint64_t {
  values = 1,
  rmat,
  rmat_permute,
  uniform,
  circuit_lines,
  tall,
  special_offset,
  special_fill,
  fem_values,
};

constexpr std::uint64_t stream_seed(std::uint64_t seed, Stream s, std::uint64_t index) {
  return hash(seed, static_cast<std::uint64_t>(s), index);
}

// Multiply-shift (Lemire) without rejection: the bias is below n / 2^64,
// far under anything a benchmark matrix can show, and it keeps one draw per
// number so streams stay aligned.
constexpr std::uint64_t below(std::uint64_t x, std::uint64_t n) {
  return static_cast<std::uint64_t>((static_cast<unsigned __int128>(x) * n) >> 64);
}

// splitmix64 as a sequential generator.
class Rng {
 public:
  constexpr explicit Rng(std::uint64_t state) : state_(state) {}
  constexpr std::uint64_t next() { return mix64(state_ += golden); }
  constexpr std::uint64_t below(std::uint64_t n) { return detail::below(next(), n); }

 private:
  std::uint64_t state_;
};

// Random values are ±k·10^-6 with k in [1, 10^6]: never an explicit zero,
// uniform over [-1, 1] to the resolution any benchmark needs, and short and
// exact as text in both f32 and f64 (at most 7 significant digits).
inline constexpr std::uint64_t value_steps = 1000000;

template <class V>
constexpr V value_from_bits(std::uint64_t x) {
  const std::uint64_t k = 1 + detail::below(x >> 1, value_steps);
  // Dividing in V rounds k/10^6 once, to the nearest V.
  const V v = static_cast<V>(k) / static_cast<V>(value_steps);
  return (x & 1) ? -v : v;
}

}  // namespace hisparse::gen::detail
