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

// The inclusive prefix sum of v over the lanes of a converged warp.
__device__ inline std::uint32_t warp_inclusive_sum(std::uint32_t v, std::uint32_t lane) {
  for (std::uint32_t o = 1; o < 32; o <<= 1) {
    const std::uint32_t n = __shfl_up_sync(0xffffffffu, v, o);
    if (lane >= o) v += n;
  }
  return v;
}

// counts[0, n) (shared memory, n up to a few hundred) become exclusive
// places, by a converged warp: each lane sums a run of (n + 31) / 32 counts,
// one warp scan places the runs, and the first place is base_of(total),
// called by every lane with the counts' total before any place is written
// (a counting pass passes 0; a pass placed after other warps' output, their
// look-back). Returns the total. (One lane over 256 counts took ~4 us.)
template <class BaseOf>
__device__ inline std::uint32_t warp_scan_counts(std::uint32_t* counts, std::uint32_t n, std::uint32_t lane,
                                                 BaseOf&& base_of) {
  const std::uint32_t per = (n + 31) / 32;
  const std::uint32_t first = lane * per < n ? lane * per : n, last = first + per < n ? first + per : n;
  std::uint32_t run = 0;
  for (std::uint32_t c = first; c < last; ++c) run += counts[c];
  const std::uint32_t incl = warp_inclusive_sum(run, lane);
  const std::uint32_t total = __shfl_sync(0xffffffffu, incl, 31);
  std::uint32_t place = base_of(total) + incl - run;
  for (std::uint32_t c = first; c < last; ++c) {
    const std::uint32_t here = counts[c];
    counts[c] = place;
    place += here;
  }
  return total;
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
  warp_scan_counts(base, d, lane, [](std::uint32_t) { return 0u; });
  __syncwarp();
  rank_scatter(0, count, lane, base, digit_of, emit);
}

}  // namespace hisparse::ops::gpu
