#pragma once
// The flat add's heavy units: a unit (a slice of a band's rows) holding more
// entries than one warp should walk alone is sorted, merged and written by
// the whole block of its band, after the band's light units.
//
// Why: a warp's passes over a unit are chains of dependent loads, one warp
// step (32 entries) at a time; a dense row of a few thousand entries kept its
// band's block, and so the whole add, waiting 100-250 us on one warp while
// the other fifteen were idle (perf-log A11: rajat01, hangGlider_2,
// adder_dcop_05, G51). Here each warp takes a contiguous chunk of the unit;
// per-chunk counts and a scan over (digit, chunk) keep every pass stable, and
// a scan of the chunks' hit counts places the merge's output.
//
// Every function here is called by all threads of the block (it has
// barriers); `thread` is the thread's index in the block.
#include <cuda_runtime.h>

#include <cstdint>

#include "add_flat_units.cuh"

namespace hisparse::ops::add_gpu {

// A unit of more entries than this (both operands' in flat_merge, the
// union's in flat_write) is the block's. The block takes its heavy units one
// after the other, several us each (H100), so a band of many moderately heavy
// units is faster a warp each: at 512, bcsstk13's 16 units of ~700 entries
// took 0.24 ms by the block against 0.15 a warp each; a choice relative to
// the band's mean cost every band two barriers, and the Laplacian's add 9%
// (perf-log A11).
inline constexpr std::uint32_t flat_heavy_entries = 1536;

// The block-wide passes' shared memory (static: flat_merge's dynamic arena is
// sized apart from it).
struct FlatBlockShared {
  std::uint32_t hist[flat_warps][flat_max_bands];  // per chunk and digit
  std::uint32_t digit_base[flat_max_bands];
  std::uint32_t warp_hits[flat_warps];
  unsigned long long at;  // a scratch index thread 0 allocated
};

// Warp w's chunk of n entries: [first, last), whole warp steps but the last.
__device__ inline void flat_chunk(std::uint32_t n, std::uint32_t w, std::uint32_t& first, std::uint32_t& last) {
  const std::uint32_t per = ((n + flat_warps - 1) / flat_warps + 31u) & ~31u;
  first = min(n, w * per);
  last = min(n, first + per);
}

// Exclusive offsets in (digit, chunk) order from s.hist's per-chunk counts,
// each chunk's starting at `start(digit)`: s.hist then holds, for every chunk
// and digit, where the chunk's first entry of that digit goes.
template <class Start>
__device__ void flat_chunk_offsets(std::uint32_t d, std::uint32_t thread, FlatBlockShared& s, Start&& start) {
  for (std::uint32_t c = thread; c < d; c += flat_threads) {
    std::uint32_t run = start(c);
    for (std::uint32_t w = 0; w < flat_warps; ++w) {
      const std::uint32_t n = s.hist[w][c];
      s.hist[w][c] = run;
      run += n;
    }
  }
  __syncthreads();
}

// Counts of digit_of(i) per chunk into s.hist (zeroed here).
template <class Digit>
__device__ void flat_chunk_counts(std::uint32_t n, std::uint32_t d, std::uint32_t thread, FlatBlockShared& s,
                                  Digit&& digit_of) {
  const std::uint32_t warp = thread / 32, lane = thread % 32;
  std::uint32_t first = 0, last = 0;
  flat_chunk(n, warp, first, last);
  for (std::uint32_t c = lane; c < d; c += 32) s.hist[warp][c] = 0;
  __syncwarp();
  for (std::uint32_t i = first + lane; i < last; i += 32) atomicAdd(&s.hist[warp][digit_of(i)], 1u);
  __syncthreads();
}

// Each chunk's entries in order, a warp each: emit(i, p) with p the entry's
// place (s.hist's offset of its digit plus its rank among the chunk's equal
// digits before it).
template <class Digit, class Emit>
__device__ void flat_chunk_scatter(std::uint32_t n, std::uint32_t thread, FlatBlockShared& s, Digit&& digit_of,
                                   Emit&& emit) {
  const std::uint32_t warp = thread / 32, lane = thread % 32;
  std::uint32_t first = 0, last = 0;
  flat_chunk(n, warp, first, last);
  gpu::rank_scatter(first, last, lane, s.hist[warp], digit_of, emit);
  __syncthreads();
}

// One stable counting pass by a digit below d (<= 256), by the block.
template <class Digit, class Emit>
__device__ void flat_block_pass(std::uint32_t n, std::uint32_t d, std::uint32_t thread, FlatBlockShared& s,
                                Digit&& digit_of, Emit&& emit) {
  flat_chunk_counts(n, d, thread, s, digit_of);
  // The digits' totals, their exclusive scan by warp 0 (a run of d/32 digits
  // a lane), then each chunk's offsets.
  for (std::uint32_t c = thread; c < d; c += flat_threads) {
    std::uint32_t total = 0;
    for (std::uint32_t w = 0; w < flat_warps; ++w) total += s.hist[w][c];
    s.digit_base[c] = total;
  }
  __syncthreads();
  if (thread < 32) {
    const std::uint32_t per = (d + 31) / 32, first = thread * per, last = min(d, first + per);
    std::uint32_t run = 0;
    for (std::uint32_t c = first; c < last; ++c) run += s.digit_base[c];
    std::uint32_t sum = warp_inclusive_sum(run, thread) - run;
    for (std::uint32_t c = first; c < last; ++c) {
      const std::uint32_t t = s.digit_base[c];
      s.digit_base[c] = sum;
      sum += t;
    }
  }
  __syncthreads();
  flat_chunk_offsets(d, thread, s, [&](std::uint32_t c) { return s.digit_base[c]; });
  flat_chunk_scatter(n, thread, s, digit_of, emit);
}

// flat_sort by the block: x[0, n) by the digits in `passes`, through y.
template <class V>
__device__ void flat_block_sort(WideEntry<V>* x, WideEntry<V>* y, std::uint32_t n, unsigned passes, std::uint32_t b,
                                std::uint32_t thread, FlatBlockShared& s) {
  WideEntry<V>* from = x;
  WideEntry<V>* to = y;
  for (std::uint32_t k = 0; k < 3; ++k) {
    if (((passes >> k) & 1u) == 0u) continue;
    flat_block_pass(n, 1u << b, thread, s, [&](std::uint32_t i) { return key_digit(from[i].key, k, b); },
                    [&](std::uint32_t i, std::uint32_t p) { to[p] = from[i]; });
    WideEntry<V>* t = from;
    from = to;
    to = t;
  }
  if (from != x) {
    for (std::uint32_t i = thread; i < n; i += flat_threads) x[i] = from[i];
    __syncthreads();
  }
}

// AddWide::merge by the block: sorted xa[0, na) and xb[0, nb) into u, the
// union with values combined; returns its size. Entry g of the
// concatenation [xa | xb] finds its key in the other list; the hits before
// it (a scan of the chunks' counts) place it.
template <class V>
__device__ std::uint32_t flat_block_merge(const AddState<V>& st, const WideEntry<V>* xa, std::uint32_t na,
                                          const WideEntry<V>* xb, std::uint32_t nb, WideEntry<V>* u,
                                          std::uint32_t thread, FlatBlockShared& s) {
  using Entry = WideEntry<V>;
  const std::uint32_t n = na + nb, warp = thread / 32, lane = thread % 32;
  std::uint32_t first = 0, last = 0;
  flat_chunk(n, warp, first, last);
  const auto probe = [&](std::uint32_t g, std::uint32_t& lb) {
    if (g < na) {
      lb = AddWide<V>::lower_bound_key(xb, nb, xa[g].key);
      return lb < nb && xb[lb].key == xa[g].key;
    }
    lb = AddWide<V>::lower_bound_key(xa, na, xb[g - na].key);
    return lb < na && xa[lb].key == xb[g - na].key;
  };
  std::uint32_t hits = 0;
  for (std::uint32_t start = first; start < last; start += 32) {
    std::uint32_t lb = 0;
    hits += __popc(__ballot_sync(full_warp, start + lane < last && probe(start + lane, lb)));
  }
  if (lane == 0) s.warp_hits[warp] = hits;
  __syncthreads();
  std::uint32_t carry = 0, total = 0;
  for (std::uint32_t w = 0; w < flat_warps; ++w) {
    const std::uint32_t t = s.warp_hits[w];
    if (w < warp) carry += t;
    total += t;
  }
  const std::uint32_t common = total / 2;  // each common key is a hit on both sides
  for (std::uint32_t start = first; start < last; start += 32) {
    const std::uint32_t g = start + lane;
    const bool active = g < last;
    std::uint32_t lb = 0;
    const bool hit = active && probe(g, lb);
    const unsigned mask = __ballot_sync(full_warp, hit);
    const std::uint32_t before = carry + __popc(mask & lanes_below(lane));
    if (active && g < na) {
      u[g + lb - before] = Entry{xa[g].key, combine(st.a, true, xa[g].value, st.b, hit, hit ? xb[lb].value : V(0))};
    } else if (active && !hit) {
      const std::uint32_t j = g - na;  // the hits before it on b's side: before - common
      u[j + lb - (before - common)] = Entry{xb[j].key, combine(st.a, false, V(0), st.b, true, xb[j].value)};
    }
    carry += __popc(mask);
  }
  __syncthreads();
  return n - common;
}

}  // namespace hisparse::ops::add_gpu
