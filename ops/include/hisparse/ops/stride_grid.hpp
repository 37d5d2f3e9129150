#pragma once
// The grid of a grid-stride kernel of stride_threads threads a block: a
// block per stride_threads items, at least one (a launch of no blocks is an
// error), at most `most` (beyond, the blocks stride over the rest).
#include <algorithm>
#include <cstdint>

namespace hisparse::ops {

inline constexpr unsigned stride_threads = 256;

constexpr unsigned stride_grid(std::uint64_t count, unsigned most = 4096) {
  return static_cast<unsigned>(
      std::clamp<std::uint64_t>((count + stride_threads - 1) / stride_threads, 1, most));
}

// The same for kernels that give each item a warp: a block of stride_threads
// per stride_threads / 32 items, at least one, at most `most` (beyond, the
// warps stride over the rest).
constexpr unsigned warp_grid(std::uint64_t count, unsigned most = 1u << 20) {
  constexpr std::uint64_t warps = stride_threads / 32;
  return static_cast<unsigned>(std::clamp<std::uint64_t>((count + warps - 1) / warps, 1, most));
}

}  // namespace hisparse::ops
