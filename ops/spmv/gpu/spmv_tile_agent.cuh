#pragma once
// The output-tile agent of the cached SpMV plan: one warp per tile, a tile
// being a run of consecutive output blocks (block rows in A, block columns in
// A^T) together with every standard leaf that adds into them
// (spmv_plan_tiles.cuh builds them). The warp sums the tile's leaves into a
// shared accumulator of its outputs and then writes each output once,
// y = k * sum + beta * y: no pass that scales y first, no global atomics,
// and y is read and written once per call instead of once per leaf.
//
// Work inside a tile comes in units of at most 128 entries (or dense cells)
// of one leaf, one warp step each: lane l takes four consecutive entries with
// one vector load of coordinates and one of values. A unit carries what the
// warp needs to address its data (the value array's offset, the entry range,
// the input block), so its loads do not wait for the node's header. Small
// leaves share units: one- and two-entry leaves' entries are gathered 32 to
// a unit, COO4 leaves of at most 32 entries packed four to a unit.
//
// An output block with more units than one tile should take (a stencil's
// block row, a circuit's dense line) is split over several tiles, whose sums
// meet where the last one to arrive writes y (run_tile): in shared memory
// when the parts are warps of one thread block (up to tile_warps parts), in
// a global slot otherwise (a counter per split block, reset by that last
// tile for the next call). Wide (COOW) nodes are not in tiles: their kernels
// run after this one and add into y with atomics. Since the counters and a
// split block's slot live in the plan, two calls of one plan must not run
// at the same time (they are ordered on the plan's stream).
#include <cuda_runtime.h>

#include <cstdint>

#include "spmv_procedures.cuh"

namespace hisparse::ops::spmv_gpu {

// A tile is a warp's: blocks of 256 threads run eight tiles side by side,
// each warp with its own accumulator and no barrier between warps once they
// have started (the one barrier, at the start, orders the zeroed arrival
// counters; a block waiting for its slowest warp at a barrier cost 18% of
// the stall cycles when a tile was a block's, perf-log 19).
inline constexpr std::uint32_t tile_threads = 256;
inline constexpr std::uint32_t tile_warps = tile_threads / 32;
inline constexpr std::uint32_t tile_unit_entries = 128;  // 32 lanes x 4
// Outputs of one tile: its warp's shared accumulator (1 KiB in f32).
inline constexpr std::uint32_t tile_max_outputs = 256;
inline constexpr std::uint32_t no_split = ~0u;

// At most 128 entries (cells) of one leaf. step: the unit's index inside the
// leaf (entries [128 * step, 128 * step + count)); value_offset4: the
// leaf's value array, in 4-byte units from the node; out: the output block
// inside the tile.
struct alignas(16) TileUnit {
  NodeRef ref;
  std::uint16_t step;
  std::uint16_t value_offset4;
  std::uint32_t in_block;
  std::uint16_t count;
  std::uint16_t out;
};
static_assert(sizeof(TileUnit) == 16, "one 16-byte load per unit");

// A unit from its raw 16 bytes (run_tile keeps the next descriptor raw).
__device__ inline TileUnit as_unit(const uint4& w) {
  return {w.x, static_cast<std::uint16_t>(w.y), static_cast<std::uint16_t>(w.y >> 16), w.z,
          static_cast<std::uint16_t>(w.w), static_cast<std::uint16_t>(w.w >> 16)};
}

// One- and two-entry leaves (COO1, COO2) are not units of their own: a
// tile's output block gathers their entries, up to 32 in a *gather unit*
// (ref == gather_ref, count entries from the record at in_block), one
// record per entry, so that a block row's scattered single entries (a
// Laplacian's two neighbours across block boundaries: 28% of its warp steps
// as units of their own, perf-log 21) take one warp step together.
inline constexpr NodeRef gather_ref = 0xFu;  // type 15: reserved, never in a pool
struct alignas(16) GatherEntry {
  std::uint32_t value_at;  // byte offset of the value in the pool
  std::uint32_t in_block;
  std::uint16_t out;       // the output inside the tile: (block in the tile << log2 d) | local
  std::uint16_t in;        // the input inside in_block
  std::uint32_t unused;
};
static_assert(sizeof(GatherEntry) == 16, "one 16-byte load per gathered entry");

// COO4 leaves of at most 32 entries are not units of their own either: a
// *pack unit* (ref == pack_ref) takes up to four of a tile's output block,
// a quarter warp each, from the records [in_block, in_block + count) of the
// plan's packed leaves (each a TileUnit of step 0). A circuit's dense lines
// are cut into leaves of about 32 entries: as units of their own they were
// two thirds of its warp steps with 8 of 32 lanes busy (perf-log 26).
inline constexpr NodeRef pack_ref = 0xEu;  // type 14: reserved, never in a pool
inline constexpr std::uint32_t pack_leaves = 4;
inline constexpr std::uint32_t pack_leaf_entries = tile_unit_entries / pack_leaves;

// Units [unit_begin, the next tile's unit_begin); output blocks [block,
// block + blocks). split: no_split, or the split block's group.
struct Tile {
  std::uint32_t unit_begin;
  std::uint32_t block;
  std::uint32_t blocks;
  std::uint32_t split;
};

// The tiles of one split output block: [first_tile, first_tile + parts).
// A block split in at most tile_warps parts (a power of two: a stencil's
// block row) has them placed in one thread block's warps, aligned to their
// count, and they meet in shared memory; one split in more (a circuit's
// dense line) meets in its global slot at `first_slot` (d values).
struct SplitGroup {
  std::uint32_t parts;
  std::uint32_t first_tile;
  std::uint32_t first_slot;
  std::uint32_t unused;
};

// A thread block's shared memory: each warp's accumulator, and per split
// group inside the block (by its first part's warp) an arrival counter.
template <class V>
struct TileShared {
  V acc[tile_warps][tile_max_outputs];
  unsigned arrivals[tile_warps];
};

// Where a tile's output o lives in its warp's accumulator. A shared-memory
// wavefront serves 32 banks of 4 bytes: 32 f32 or 16 f64 outputs (a half
// warp). Lanes take four consecutive entries, so a leaf with one entry a row
// (a Laplacian's off-diagonal blocks) sends lane l to output 4 l + j, and
// without the swizzle 4 (f64) or 8 (f32) lanes met in one bank: 3.5-way
// conflicts, 45% of the shared wavefronts of f64 SpMV^T, whose shared
// traffic bounds it (perf-log 27). XOR-ing the output's bits 0-1 with the
// bits above one wavefront's outputs spreads 4 l + j over all banks and
// keeps consecutive outputs (a dense row, the epilogue) apart; it permutes
// aligned groups of four, so every slot stays below tile_max_outputs (with
// d = 2 a tile's outputs may end inside a group, and a slot may then lie
// past them: the clear, the adds and the epilogue map alike, so unused).
// f32 SpMV (N) keeps the plain layout: its shared traffic is a run's sum,
// not an entry's product, and the swizzle's two instructions an access cost
// the stencil 2.3% there while gaining nothing (perf-log 27).
template <class V, bool Transposed>
__device__ inline std::uint32_t tile_slot(std::uint32_t o) {
  if constexpr (sizeof(V) == 4 && !Transposed) return o;
  constexpr std::uint32_t per_wavefront_log2 = sizeof(V) == 8 ? 4 : 5;
  return o ^ ((o >> per_wavefront_log2) & 3u);
}

template <class V>
struct TileView {
  const Tile* tiles;  // tile count + 1: the last holds the units' end
  const TileUnit* units;
  const SplitGroup* groups;  // per split block
  unsigned* arrivals;         // per split block, zero between calls
  V* sums;                    // the slots of blocks split over many thread blocks, zero between calls
  const GatherEntry* gathered;
  const TileUnit* packed;  // the leaves of pack units
};

// Adds a unit's products into acc (the tile's outputs): lane `lane` of a
// warp takes four consecutive entries (cells) with one vector load of
// values and one of coordinates (a dense leaf: the cells' presence bits).
// A unit is part of a COO4 or dense leaf: one- and two-entry leaves are
// gathered (gather_ref), COO4 leaves of up to 32 entries packed (pack_ref,
// add_packed). Absent cells of a dense leaf add nothing (not
// 0 * x, which would turn an infinite x into NaN). (Reading the next unit's
// entries while this unit's x is gathered was slower, into registers
// (perf-log 20: 32 registers, spills) and into shared memory by cp.async
// (perf-log 24: the kernel is bound by L2 throughput, not by latency).)
template <class V, bool Transposed>
__device__ inline void add_unit(const TileUnit& u, std::uint32_t lane, const SpmvState<V>& st, V* acc) {
  const std::uint32_t b = st.log2d;
  const std::byte* node = st.pool + ref_offset(u.ref);
  const NodeType type = ref_type(u.ref);
  const std::uint32_t first = tile_unit_entries * u.step + 4 * lane;
  const bool active = 4 * lane < u.count;
  V a[4] = {};
  std::uint32_t w0 = 0, w1 = 0;
  if (active) {
    load4_streamed(reinterpret_cast<const V*>(node + 4u * u.value_offset4) + first, a);
    if (type == NodeType::dense) {
      w0 = (reinterpret_cast<const std::uint8_t*>(node)[first >> 3] >> (first & 7u)) & 0xFu;
    } else {
      const uint2 cw = load_coords_streamed<V>(reinterpret_cast<const uint2*>(node + 8) + first / 4);
      w0 = cw.x;
      w1 = cw.y;
    }
  }
  const std::uint32_t out = std::uint32_t{u.out} << b;  // the block's first output in the tile
  const V* x = st.x + (std::uint64_t{u.in_block} << b);
  if (type == NodeType::dense) {
    // Four consecutive cells: one row for d >= 4, so in A a row's cells are
    // summed over the d / 4 lanes that share it; in A^T four columns.
    const std::uint32_t d = 1u << b;
    const std::uint32_t bits = w0;
    if (Transposed || d < 4) {
#pragma unroll
      for (std::uint32_t j = 0; j < 4; ++j) {
        if (!((bits >> j) & 1u)) continue;
        const std::uint32_t cell = first + j, r = cell >> b, c = cell & (d - 1);
        if (Transposed) atomicAdd(acc + tile_slot<V, Transposed>(out + c), a[j] * x[r]);
        else atomicAdd(acc + tile_slot<V, Transposed>(out + r), a[j] * x[c]);
      }
      return;
    }
    const std::uint32_t c0 = first & (d - 1);
    V sum = V(0);
#pragma unroll
    for (std::uint32_t j = 0; j < 4; ++j)
      if ((bits >> j) & 1u) sum += a[j] * x[c0 + j];
    const std::uint32_t width = d / 4 < 32 ? d / 4 : 32;  // lanes per row
    for (std::uint32_t off = width / 2; off > 0; off /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, off);
    if (active && lane % width == 0) atomicAdd(acc + tile_slot<V, Transposed>(out + (first >> b)), sum);
    return;
  }
  // COO4: coordinates at byte 8, row-major; padding entries lie beyond count.
  const std::uint32_t words[2] = {w0, w1};
  const std::uint32_t m = active ? min(4u, u.count - 4 * lane) : 0u;
  if (Transposed) {
#pragma unroll
    for (std::uint32_t j = 0; j < 4; ++j) {
      if (j >= m) break;
      const std::uint32_t w = words[j / 2] >> (16 * (j % 2));
      atomicAdd(acc + tile_slot<V, Transposed>(out + ((w >> 8) & 0xFFu)), a[j] * x[w & 0xFFu]);
    }
    return;
  }
  coo4_rows_to_acc(words, a, m, x, acc, [out](std::uint32_t r) { return tile_slot<V, Transposed>(out + r); });
}

// A pack unit's leaves (`leaves`, `count` of them) into acc: lanes
// [8 g, 8 g + 8) take leaf g, four entries a lane. The leaves may share
// outputs (a dense column's leaves in A^T, one dense row's in A), so every
// run is added with an atomic, and a lane's first run is first summed with
// the equal first runs of the lanes after it (a dense row's 32 lanes, which
// otherwise retry the compare-and-swap of a float shared atomic once per
// lane, perf-log 26). Products are summed per lane while the output stays
// the same (in A^T only where consecutive entries share a column).
template <class V, bool Transposed>
__device__ inline void add_packed(const TileUnit* leaves, std::uint32_t count, std::uint32_t lane,
                                  const SpmvState<V>& st, V* acc) {
  constexpr unsigned full = 0xffffffffu;
  const std::uint32_t b = st.log2d, g = lane / 8, q = lane % 8;
  TileUnit u{};
  std::uint32_t m = 0;
  if (g < count) {
    u = leaves[g];
    m = 4 * q < u.count ? min(4u, u.count - 4 * q) : 0u;
  }
  V a[4] = {};
  uint2 cw{0, 0};
  if (m > 0) {
    const std::byte* node = st.pool + ref_offset(u.ref);
    load4_streamed(reinterpret_cast<const V*>(node + 4u * u.value_offset4) + 4 * q, a);
    cw = load_coords_streamed<V>(reinterpret_cast<const uint2*>(node + 8) + q);
  }
  const std::uint32_t words[2] = {cw.x, cw.y};
  const V* x = st.x + (std::uint64_t{u.in_block} << b);
  const std::uint32_t base = std::uint32_t{u.out} << b;
  const auto key_of = [&](std::uint32_t w) { return base + (Transposed ? (w >> 8) & 0xFFu : w & 0xFFu); };
  const std::uint32_t head = key_of(words[0]);
  std::uint32_t key = head;
  V head_sum = V(0), sum = V(0);
  bool in_head = true;
#pragma unroll
  for (std::uint32_t j = 0; j < 4; ++j) {
    if (j < m) {
      const std::uint32_t w = words[j / 2] >> (16 * (j % 2));
      const std::uint32_t k = key_of(w);
      if (k != key) {
        if (in_head) head_sum = sum;
        else atomicAdd(acc + tile_slot<V, Transposed>(key), sum);
        in_head = false;
        key = k;
        sum = V(0);
      }
      sum += a[j] * x[Transposed ? w & 0xFFu : (w >> 8) & 0xFFu];
    }
  }
  if (m > 0) {
    if (in_head) head_sum = sum;
    else atomicAdd(acc + tile_slot<V, Transposed>(key), sum);
  }
  // First runs: segments of lanes with equal keys (a lane without entries
  // starts none and adds 0 to the one before it); each segment's first lane
  // adds the segment's sum.
  const std::uint32_t mine = m > 0 ? head : ~0u;
  const std::uint32_t before = __shfl_up_sync(full, mine, 1);
  const bool leads = m > 0 && (lane == 0 || before != mine);
  const unsigned heads = __ballot_sync(full, leads), busy = __ballot_sync(full, m > 0);
  if (heads != busy) {
    const std::uint64_t later_heads = std::uint64_t{heads} >> (lane + 1);
    for (std::uint32_t off = 1; off < 32; off <<= 1) {
      const V v = __shfl_down_sync(full, head_sum, off);
      if (lane + off < 32 && (later_heads & ((std::uint64_t{1} << off) - 1)) == 0) head_sum += v;
    }
  }
  if (leads) atomicAdd(acc + tile_slot<V, Transposed>(head), head_sum);
}

// y[o] = k * acc + beta * y[o] for a tile's outputs o (beta == 0 overwrites:
// NaN in y must not leak), lane `lane` of the tile's warp.
template <class V, bool Transposed>
__device__ inline void write_outputs(const V* acc, std::uint32_t count, std::uint64_t out_base, V beta,
                                     std::uint32_t lane, const SpmvState<V>& st) {
  const std::uint32_t n = out_base + count <= st.y_size ? count : static_cast<std::uint32_t>(st.y_size - out_base);
  for (std::uint32_t i = lane; i < n; i += 32) {
    V* y = st.y + out_base + i;
    const V s = acc[tile_slot<V, Transposed>(i)];
    *y = beta == V(0) ? st.k * s : st.k * s + beta * *y;
  }
}

// Tile t by warp `w` of its thread block (lane `lane`), with the block's
// shared memory `sh` (the arrivals zeroed at the block's start).
template <class V, bool Transposed>
__device__ inline void run_tile(const TileView<V>& tv, std::uint32_t t, std::uint32_t w, std::uint32_t lane,
                                const SpmvState<V>& st, V beta, TileShared<V>& sh) {
  V* acc = sh.acc[w];
  const Tile tile = tv.tiles[t];
  const std::uint32_t unit_end = tv.tiles[t + 1].unit_begin;
  if (tile.blocks == 0) return;  // padding that aligns a split block's parts (spmv_plan_tile_kernels.cuh)
  const std::uint32_t outputs = tile.blocks << st.log2d;
  for (std::uint32_t i = lane; i < outputs; i += 32) acc[tile_slot<V, Transposed>(i)] = V(0);
  __syncwarp();
  // The next unit's descriptor is loaded before this one's entries are
  // used, as 16 raw bytes: loaded as a TileUnit, the compiler merged its
  // 16-bit halves into registers right after the load, which waited for it
  // (6% of the stencil's stall samples, perf-log 24).
  const auto* raw = reinterpret_cast<const uint4*>(tv.units);
  uint4 next = tile.unit_begin < unit_end ? raw[tile.unit_begin] : uint4{};
  for (std::uint32_t u = tile.unit_begin; u < unit_end; ++u) {
    const TileUnit unit = as_unit(next);
    if (u + 1 < unit_end) next = raw[u + 1];
    if (unit.ref == gather_ref) {
      if (lane < unit.count) {
        const GatherEntry g = tv.gathered[unit.in_block + lane];
        const V a = *reinterpret_cast<const V*>(st.pool + g.value_at);
        atomicAdd(acc + tile_slot<V, Transposed>(g.out), a * st.x[(std::uint64_t{g.in_block} << st.log2d) + g.in]);
      }
      continue;
    }
    if (unit.ref == pack_ref) {
      add_packed<V, Transposed>(tv.packed + unit.in_block, unit.count, lane, st, acc);
      continue;
    }
    add_unit<V, Transposed>(unit, lane, st, acc);
  }
  __syncwarp();
  const std::uint64_t out_base = std::uint64_t{tile.block} << st.log2d;
  if (tile.split == no_split) {
    write_outputs<V, Transposed>(acc, outputs, out_base, beta, lane, st);
    return;
  }
  // A part of a split block: the last part to arrive adds the parts' sums
  // and writes y.
  const SplitGroup g = tv.groups[tile.split];
  if (g.parts <= tile_warps) {
    // The parts are this block's warps [w0, w0 + parts): no global slots,
    // no device-wide fence (the slots of three parts were ~7% of a
    // stencil's bytes, and the fences a tenth of its stall samples, perf-log 24).
    // Ordering: each part's lanes meet at the __syncwarp above, then its
    // lane 0 fences and counts its arrival (release); the last part's lane 0
    // counts, fences (acquire) and passes the word on through the warp's
    // shuffle and __syncwarp. compute-sanitizer's racecheck reports the
    // reads below as hazards: it models barriers, not a release and acquire
    // through a counter. A named barrier per group instead cost 7-40%: its
    // id in a register reserved all 16 hardware barriers, which limit
    // resident blocks (perf-log 25).
    const std::uint32_t w0 = g.first_tile % tile_warps;
    bool last = false;
    if (lane == 0) {
      __threadfence_block();
      last = atomicAdd(&sh.arrivals[w0], 1u) == g.parts - 1;
      __threadfence_block();
    }
    if (!__shfl_sync(0xffffffffu, last, 0)) return;
    __syncwarp();
    for (std::uint32_t i = lane; i < outputs; i += 32) {
      const std::uint32_t k = tile_slot<V, Transposed>(i);
      V s = V(0);
      for (std::uint32_t p = 0; p < g.parts; ++p) s += sh.acc[w0 + p][k];
      acc[k] = s;
    }
    __syncwarp();
    write_outputs<V, Transposed>(acc, outputs, out_base, beta, lane, st);
    return;
  }
  // Many parts, from many thread blocks: each adds its non-zero sums into
  // the group's slot with atomics (a circuit's dense line, a thousand parts:
  // a slot per part left the last part alone adding a thousand slots); the
  // last part clears the slot and resets the counter for the next call.
  V* sums = tv.sums + (std::uint64_t{g.first_slot} << st.log2d);
  for (std::uint32_t i = lane; i < outputs; i += 32) {
    const V s = acc[tile_slot<V, Transposed>(i)];
    if (s != V(0)) atomicAdd(sums + i, s);
  }
  __threadfence();
  __syncwarp();
  bool last = false;
  if (lane == 0) last = atomicAdd(tv.arrivals + tile.split, 1u) == g.parts - 1;
  if (!__shfl_sync(0xffffffffu, last, 0)) return;
  __threadfence();
  for (std::uint32_t i = lane; i < outputs; i += 32) {
    acc[tile_slot<V, Transposed>(i)] = __ldcg(sums + i);
    sums[i] = V(0);
  }
  __syncwarp();
  write_outputs<V, Transposed>(acc, outputs, out_base, beta, lane, st);
  if (lane == 0) tv.arrivals[tile.split] = 0;
}

}  // namespace hisparse::ops::spmv_gpu
