#pragma once
// The output-tile agent of the cached SpMV plan: one thread block per tile,
// a tile being a run of consecutive output blocks (block rows in A, block
// columns in A^T) together with every standard leaf that adds into them
// (spmv_plan_tiles.cuh builds them). The block sums the tile's leaves into a
// shared accumulator of its outputs and then writes each output once,
// y = k * sum + beta * y: no pass that scales y first, no global atomics,
// and y is read and written once per call instead of once per leaf.
//
// Work inside a tile comes in units of at most 128 entries (or dense cells)
// of one leaf, one warp step each: lane l takes four consecutive entries with
// one vector load of coordinates and one of values. A unit carries what the
// warp needs to address its data (the value array's offset, the entry range,
// the input block), so its loads do not wait for the node's header.
//
// An output block with more entries than one tile should take (a dense row
// of a circuit) is split over several tiles: each writes its partial sums to
// a slot, and the last one to arrive (a counter per split block, reset by
// that last block for the next call) adds the slots in slot order and writes
// y. Wide (COOW) nodes are not in tiles: their kernels run after this one and
// add into y with atomics.
#include <cuda_runtime.h>

#include <cstdint>

#include "spmv_procedures.cuh"

namespace hisparse::ops::spmv_gpu {

inline constexpr std::uint32_t tile_threads = 256;
inline constexpr std::uint32_t tile_warps = tile_threads / 32;
inline constexpr std::uint32_t tile_unit_entries = 128;  // 32 lanes x 4
// Outputs of one tile: its shared accumulator (8 KiB in f32, 16 in f64).
inline constexpr std::uint32_t tile_max_outputs = 2048;
inline constexpr std::uint32_t no_split = ~0u;

// At most 128 entries (cells) of one leaf. step: the unit's index inside the
// leaf (entries [128 * step, 128 * step + count)); value_offset4: the
// leaf's value array, in 4-byte units from the node; out: the output block
// inside the tile.
struct TileUnit {
  NodeRef ref;
  std::uint16_t step;
  std::uint16_t value_offset4;
  std::uint32_t in_block;
  std::uint16_t count;
  std::uint16_t out;
};
static_assert(sizeof(TileUnit) == 16, "one 16-byte load per unit");

// A warp step is a run of consecutive units of at most 32 quads (four
// entries or cells) together, a quad per lane: a large leaf's unit fills a
// step alone, the small leaves of a circuit's dense line share one. Steps
// [first_step, the next tile's first_step); output blocks [block, block +
// blocks). split: no_split, or the split block's group.
struct Tile {
  std::uint32_t first_step;
  std::uint32_t block;
  std::uint32_t blocks;
  std::uint32_t split;
};

// The tiles of one output block that is split: tiles [first_tile, first_tile
// + tiles), whose partial sums go to slots [first_slot, first_slot + tiles).
struct SplitGroup {
  std::uint32_t first_tile;
  std::uint32_t tiles;
  std::uint32_t first_slot;
  std::uint32_t unused;
};

template <class V>
struct TileView {
  const Tile* tiles;          // tile count + 1: the last holds the steps' end
  const std::uint32_t* steps;  // first unit of each step, step count + 1
  const TileUnit* units;
  const SplitGroup* groups;
  unsigned* arrivals;  // per split group, zero between calls
  V* partials;         // d values per slot
};

// Steps a warp loads together before it uses any: the chain step -> unit ->
// entries -> x is paid once for all of them.
inline constexpr std::uint32_t tile_batch = 4;

// One lane's quad, loaded: four local coordinates (a row byte and a column
// byte each, as COO4 stores them), values, which of the four are present,
// the unit's x and its output block's place in the accumulator.
template <class V>
struct LoadedQuad {
  uint2 coords = {0u, 0u};
  V a[4];
  std::uint32_t present = 0;
  std::uint32_t out = 0;
  const V* x = nullptr;
};

// The units of a step [u0, u1), one per lane below their count.
template <class V>
__device__ inline uint4 load_unit(const TileView<V>& tv, std::uint32_t u0, std::uint32_t u1, std::uint32_t lane) {
  return lane < u1 - u0 ? reinterpret_cast<const uint4*>(tv.units)[u0 + lane] : make_uint4(0, 0, 0, 0);
}

// The lane's unit and quad inside its step, from the step's units as
// load_unit gave them: a scan of their quad counts places each unit's first
// quad, and every lane takes the unit its lane number falls in; then the
// quad's coordinates and values are loaded (not yet used: the caller issues
// the loads of a whole batch before it waits for any).
template <class V>
__device__ inline LoadedQuad<V> load_quad(uint4 raw, std::uint32_t lane, const SpmvState<V>& st) {
  constexpr unsigned full = 0xffffffffu;
  const std::uint32_t q = ((raw.w & 0xFFFFu) + 3) / 4;  // count: low half of the fourth word
  std::uint32_t incl = q;
  for (std::uint32_t off = 1; off < 32; off <<= 1) {
    const std::uint32_t t = __shfl_up_sync(full, incl, off);
    if (lane >= off) incl += t;
  }
  const std::uint32_t start = incl - q;
  const unsigned starts = __reduce_or_sync(full, q > 0 ? 1u << start : 0u);
  const std::uint32_t total = __shfl_sync(full, incl, 31);
  const int k = __popc(starts & ((2u << lane) - 1u)) - 1;  // the unit this lane's quad belongs to
  raw.x = __shfl_sync(full, raw.x, k), raw.y = __shfl_sync(full, raw.y, k);
  raw.z = __shfl_sync(full, raw.z, k), raw.w = __shfl_sync(full, raw.w, k);
  const std::uint32_t quad = lane - __shfl_sync(full, start, k);
  LoadedQuad<V> lq;
  if (lane >= total) return lq;
  const TileUnit u = *reinterpret_cast<const TileUnit*>(&raw);
  const std::uint32_t b = st.log2d;
  lq.out = std::uint32_t{u.out} << b;
  lq.x = st.x + (std::uint64_t{u.in_block} << b);
  const std::byte* node = st.pool + ref_offset(u.ref);
  const V* values = reinterpret_cast<const V*>(node + 4u * u.value_offset4);
  const NodeType type = ref_type(u.ref);
  if (type == NodeType::coo1 || type == NodeType::coo2) {
    const auto* c = reinterpret_cast<const std::uint16_t*>(node + 4);
    lq.coords = make_uint2(c[0] | (u.count > 1 ? std::uint32_t{c[1]} << 16 : 0u), 0u);
    lq.a[0] = values[0];
    lq.a[1] = u.count > 1 ? values[1] : V(0);
    lq.a[2] = lq.a[3] = V(0);
    lq.present = u.count > 1 ? 3u : 1u;
    return lq;
  }
  const std::uint32_t first = tile_unit_entries * u.step + 4 * quad;
  load4(values + first, lq.a);
  if (type == NodeType::dense) {
    // Cells first .. first + 3 (first is a multiple of 4), present by the mask.
    lq.present = (reinterpret_cast<const std::uint8_t*>(node)[first >> 3] >> (first & 7u)) & 0xFu;
    std::uint32_t w[4];
#pragma unroll
    for (std::uint32_t j = 0; j < 4; ++j) w[j] = ((first + j) >> b) | (((first + j) & ((1u << b) - 1u)) << 8);
    lq.coords = make_uint2(w[0] | (w[1] << 16), w[2] | (w[3] << 16));
    return lq;
  }
  lq.coords = reinterpret_cast<const uint2*>(node + 8)[first / 4];  // COO4: coordinates at byte 8
  lq.present = (1u << min(4u, u.count - 4 * quad)) - 1u;
  return lq;
}

// The local row (in A) or column (in A^T) of entry j of a quad, and its
// input (the other one).
__device__ inline std::uint32_t quad_word(const uint2& coords, std::uint32_t j) {
  return ((j < 2 ? coords.x : coords.y) >> (16 * (j % 2))) & 0xFFFFu;
}

// The quad's products a * x (x gathered; 0 where absent).
template <class V>
__device__ inline void quad_products(const LoadedQuad<V>& lq, const SpmvState<V>& st, V (&p)[4]) {
#pragma unroll
  for (std::uint32_t j = 0; j < 4; ++j) {
    const std::uint32_t w = quad_word(lq.coords, j);
    p[j] = (lq.present >> j) & 1u ? lq.a[j] * lq.x[st.transposed ? (w & 0xFFu) : (w >> 8)] : V(0);
  }
}

// Adds a quad's products into acc: runs of equal outputs inside the lane
// are summed first (a row's entries in A, a dense row's cells), and the
// lane's last run is merged with equal ones of neighbouring lanes (a dense
// row of d = 128 is one step: one shared add instead of 32). All lanes call
// it.
template <class V>
__device__ inline void add_products(const LoadedQuad<V>& lq, const V (&p)[4], const SpmvState<V>& st, V* acc) {
  std::uint32_t run_key = 0;
  V sum = V(0);
  bool any = false;
#pragma unroll
  for (std::uint32_t j = 0; j < 4; ++j) {
    if (!((lq.present >> j) & 1u)) continue;
    const std::uint32_t w = quad_word(lq.coords, j);
    const std::uint32_t key = lq.out + (st.transposed ? (w >> 8) : (w & 0xFFu));
    if (any && key != run_key) {
      atomicAdd(acc + run_key, sum);
      sum = V(0);
    }
    run_key = key;
    sum += p[j];
    any = true;
  }
  warp_segmented_add(acc, run_key, sum, any);
}

// The tile's warp steps, by warp: warp w takes steps w, w + 8, ... in
// batches of tile_batch, in phases so that each phase's loads are in flight
// together: step bounds, units, entries, x.
template <class V>
__device__ inline void tile_steps_to_acc(const TileView<V>& tv, std::uint32_t first, std::uint32_t end,
                                         const SpmvState<V>& st, V* acc) {
  const std::uint32_t lane = threadIdx.x % 32;
  for (std::uint32_t base = first + threadIdx.x / 32; base < end; base += tile_warps * tile_batch) {
    uint4 raw[tile_batch];
#pragma unroll
    for (std::uint32_t j = 0; j < tile_batch; ++j) {
      const std::uint32_t s = base + tile_warps * j;
      raw[j] = s < end ? load_unit(tv, tv.steps[s], tv.steps[s + 1], lane) : make_uint4(0, 0, 0, 0);
    }
    LoadedQuad<V> lq[tile_batch];
#pragma unroll
    for (std::uint32_t j = 0; j < tile_batch; ++j) lq[j] = load_quad(raw[j], lane, st);
    V p[tile_batch][4];
#pragma unroll
    for (std::uint32_t j = 0; j < tile_batch; ++j) quad_products(lq[j], st, p[j]);
#pragma unroll
    for (std::uint32_t j = 0; j < tile_batch; ++j) add_products(lq[j], p[j], st, acc);
  }
}

// y[o] = k * acc + beta * y[o] for a tile's outputs o (beta == 0 overwrites:
// NaN in y must not leak), thread `tid` of tile_threads.
template <class V>
__device__ inline void write_outputs(const V* acc, std::uint32_t count, std::uint64_t out_base, V beta,
                                     const SpmvState<V>& st) {
  const std::uint32_t n = out_base + count <= st.y_size ? count : static_cast<std::uint32_t>(st.y_size - out_base);
  for (std::uint32_t i = threadIdx.x; i < n; i += tile_threads) {
    V* y = st.y + out_base + i;
    *y = beta == V(0) ? st.k * acc[i] : st.k * acc[i] + beta * *y;
  }
}

template <class V>
__device__ inline void run_tile(const TileView<V>& tv, std::uint32_t t, const SpmvState<V>& st, V beta, V* acc) {
  const Tile tile = tv.tiles[t];
  const std::uint32_t step_end = tv.tiles[t + 1].first_step;
  const std::uint32_t outputs = tile.blocks << st.log2d;
  for (std::uint32_t i = threadIdx.x; i < outputs; i += tile_threads) acc[i] = V(0);
  __syncthreads();
  tile_steps_to_acc(tv, tile.first_step, step_end, st, acc);
  __syncthreads();
  const std::uint64_t out_base = std::uint64_t{tile.block} << st.log2d;
  if (tile.split == no_split) {
    write_outputs(acc, outputs, out_base, beta, st);
    return;
  }
  // A part of a split block: publish the partial sums, and the last part to
  // arrive adds them all (in slot order) and writes y.
  const SplitGroup g = tv.groups[tile.split];
  V* mine = tv.partials + (std::uint64_t{g.first_slot + (t - g.first_tile)} << st.log2d);
  for (std::uint32_t i = threadIdx.x; i < outputs; i += tile_threads) mine[i] = acc[i];
  __threadfence();
  __syncthreads();
  __shared__ bool last;
  if (threadIdx.x == 0) last = atomicAdd(tv.arrivals + tile.split, 1u) == g.tiles - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();
  for (std::uint32_t i = threadIdx.x; i < outputs; i += tile_threads) {
    V s = V(0);
    for (std::uint32_t p = 0; p < g.tiles; ++p) s += __ldcg(tv.partials + (std::uint64_t{g.first_slot + p} << st.log2d) + i);
    acc[i] = s;
  }
  __syncthreads();
  write_outputs(acc, outputs, out_base, beta, st);
  if (threadIdx.x == 0) tv.arrivals[tile.split] = 0;
}

}  // namespace hisparse::ops::spmv_gpu
