#pragma once
// A decoupled look-back (the single-pass scan of Merrill and Garland, as in
// CUB's tile scans) for tasks that warps take in order: task t publishes its
// total, adds up its predecessors' totals back to the nearest one that has
// published its inclusive prefix, and publishes its own prefix. A pass that
// needs each task's place among all tasks' outputs then counts and writes in
// one kernel instead of a count kernel, a scan and a fill kernel.
//
// Tasks must be claimed in order (a ticket counter, not blockIdx): every
// predecessor a warp waits for has then been claimed by a running warp, so
// the wait ends. Values are 32-bit: every prefix must stay below 2^32 (the
// extraction's entries do, unless a pool claims more entries than its
// matrix holds; the sum then wraps, and the caller's total check is what
// remains).
#include <cuda/atomic>

#include <cstdint>

namespace hisparse::ops::convert_detail {

// A task's status word: its flag in bits 32-33, its value in bits 0-31; zero
// until the task publishes (the array is cleared before the launch).
inline constexpr unsigned long long lookback_total = 1ull << 32;
inline constexpr unsigned long long lookback_prefix = 2ull << 32;

// Called by all 32 lanes of a warp with the same t and total; returns the
// sum of the totals of tasks [0, t) to every lane. Relaxed atomics suffice:
// the status word is the only datum exchanged.
__device__ inline std::uint32_t warp_lookback(unsigned long long* status, std::uint64_t t, std::uint32_t total,
                                              std::uint32_t lane) {
  using Ref = cuda::atomic_ref<unsigned long long, cuda::thread_scope_device>;
  constexpr unsigned full = 0xFFFFFFFFu;
  if (lane == 0) Ref(status[t]).store((t == 0 ? lookback_prefix : lookback_total) | total, cuda::memory_order_relaxed);
  if (t == 0) return 0;
  std::uint32_t before = 0;
  // Each round looks at 32 predecessors, lane l at end - 1 - l; a lane past
  // task 0 reads as a prefix of 0.
  for (std::uint64_t end = t;; end -= 32) {
    unsigned long long s = lookback_prefix;
    if (lane < end) {
      // A predecessor still counting: poll with a growing pause (32 ns to
      // 0.5 us), so that spinning warps leave issue slots and L2 to the
      // warps they wait for.
      Ref word(status[end - 1 - lane]);
      std::uint32_t pause = 32;
      for (s = word.load(cuda::memory_order_relaxed); (s >> 32) == 0; s = word.load(cuda::memory_order_relaxed)) {
        __nanosleep(pause);
        if (pause < 512) pause *= 2;
      }
    }
    const unsigned prefixes = __ballot_sync(full, (s >> 32) == 2);
    const std::uint32_t stop = prefixes ? __ffs(prefixes) - 1 : 31;
    before += __reduce_add_sync(full, lane <= stop ? static_cast<std::uint32_t>(s) : 0u);
    if (prefixes) break;
  }
  if (lane == 0) Ref(status[t]).store(lookback_prefix | (before + total), cuda::memory_order_relaxed);
  return before;
}

}  // namespace hisparse::ops::convert_detail
