#pragma once
// Warp-level building blocks shared by the op packages' GPU procedures.
#include <cuda_runtime.h>

#include <cstdint>

namespace hisparse::ops::gpu {

// One stable counting-sort pass by a digit below d (<= 256) over `count`
// entries, by a warp (`lane` 0..31 is the lane in the warp): emit(i, p) puts
// entry i at position p. `base` is d words of the item's shared memory. Equal
// digits keep their order: lanes of one step that share a digit rank among
// themselves with __match_any_sync, and steps go in entry order.
template <class Digit, class Emit>
__device__ inline void counting_pass(std::uint32_t count, std::uint32_t d, std::uint32_t lane, std::uint32_t* base,
                                     Digit&& digit_of, Emit&& emit) {
  for (std::uint32_t c = lane; c < d; c += 32) base[c] = 0;
  __syncwarp();
  for (std::uint32_t i = lane; i < count; i += 32) atomicAdd(base + digit_of(i), 1u);
  __syncwarp();
  if (lane == 0) {
    std::uint32_t sum = 0;
    for (std::uint32_t c = 0; c < d; ++c) {
      const std::uint32_t n = base[c];
      base[c] = sum;
      sum += n;
    }
  }
  __syncwarp();
  for (std::uint32_t start = 0; start < count; start += 32) {
    const std::uint32_t i = start + lane;
    const bool active = i < count;
    const std::uint32_t digit = active ? digit_of(i) : 0xFFFFu + lane;  // inactive lanes match nobody
    const unsigned peers = __match_any_sync(0xffffffffu, digit);
    const unsigned earlier = peers & ((1u << lane) - 1u);
    std::uint32_t p = 0;
    if (active) p = base[digit] + __popc(earlier);
    __syncwarp();
    if (active) {
      emit(i, p);
      // The last lane of each digit group advances that digit's base.
      if ((peers >> lane) == 1u) base[digit] += __popc(peers);
    }
    __syncwarp();
  }
}

}  // namespace hisparse::ops::gpu
