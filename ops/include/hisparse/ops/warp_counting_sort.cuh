#pragma once
// Warp-level building blocks shared by the op packages' GPU procedures.
#include <cuda_runtime.h>

#include <cstdint>

namespace hisparse::ops::gpu {

// The sum of v over the 32 lanes of a converged warp, in every lane (64-bit
// counters too, which __reduce_add_sync does not take).
template <class T>
__device__ inline T warp_sum(T v) {
  for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

// Entries [first, last) in order, by a warp: emit(i, p) with p = base[digit]
// plus the entry's rank among the equal digits before it in this run, and
// base[digit] advanced past them (the scatter of a stable counting pass:
// lanes of one step that share a digit rank with __match_any_sync).
template <class Digit, class Emit>
__device__ inline void rank_scatter(std::uint32_t first, std::uint32_t last, std::uint32_t lane, std::uint32_t* base,
                                    Digit&& digit_of, Emit&& emit) {
  for (std::uint32_t start = first; start < last; start += 32) {
    const std::uint32_t i = start + lane;
    const bool active = i < last;
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
  // Exclusive scan of the counts: each lane a run of d/32 digits, then the
  // runs' totals across the warp (one lane over 256 digits took ~4 us a pass).
  {
    const std::uint32_t per = (d + 31) / 32;
    const std::uint32_t first = lane * per, last = first + per < d ? first + per : d;
    std::uint32_t run = 0;
    for (std::uint32_t c = first; c < last; ++c) run += base[c];
    std::uint32_t incl = run;
    for (std::uint32_t o = 1; o < 32; o <<= 1) {
      const std::uint32_t t = __shfl_up_sync(0xffffffffu, incl, o);
      if (lane >= o) incl += t;
    }
    std::uint32_t sum = incl - run;
    for (std::uint32_t c = first; c < last; ++c) {
      const std::uint32_t n = base[c];
      base[c] = sum;
      sum += n;
    }
  }
  __syncwarp();
  rank_scatter(0, count, lane, base, digit_of, emit);
}

}  // namespace hisparse::ops::gpu
