#pragma once
// The device side of planning output tiles (spmv_plan_tiles.cuh runs them):
// per-leaf counts and sort keys, the greedy cut of output blocks into
// tiles, and the units, gathered entries and packed leaves written in place.
#include <algorithm>
#include <cstdint>

#include "hisparse/formats/device_matrix.hpp"
#include "hisparse/ops/context.hpp"
#include "hisparse/ops/stride_grid.hpp"
#include "hisparse/ops/warp_counting_sort.cuh"
#include "spmv_tile_agent.cuh"

namespace hisparse::ops::spmv_gpu {

namespace tile_detail {

// Output blocks per planning thread (at least a tile's most blocks).
inline constexpr std::uint32_t chunk_blocks = 128;

// The units (warp steps) of a leaf of n entries or cells.
HISPARSE_HD constexpr std::uint32_t units_of(std::uint32_t n) { return (n + tile_unit_entries - 1) / tile_unit_entries; }

// What planning downloads: entries, the units of the leaves that have
// their own, leaves with entries, the entries gathered 32 to a unit and the
// leaves packed 4 to a unit.
struct LeafTotals {
  unsigned long long entries, units, leaves, gathered, packed;
};

// Leaves whose entries a gather unit takes (spmv_tile_agent.cuh): the
// one- and two-entry leaves, whole (not a chunk item).
__device__ inline bool gathered_leaf(const NodeItem& it) {
  return ref_type(it.ref) == NodeType::coo1 || ref_type(it.ref) == NodeType::coo2;
}

// How a leaf of n entries (n > 0) is taken, in the order a block's units
// hold them: gathered, packed (a COO4 leaf of at most pack_leaf_entries, a
// whole one: a chunked leaf's first item counts all its entries), or in
// units of its own.
enum LeafClass : std::uint32_t { gathered_class = 0, packed_class = 1, own_class = 2, leaf_classes = 3 };
__device__ inline LeafClass leaf_class(const NodeItem& it, std::uint32_t n) {
  if (gathered_leaf(it)) return gathered_class;
  return ref_type(it.ref) == NodeType::coo4 && n <= pack_leaf_entries ? packed_class : own_class;
}

// Entries (cells, for dense leaves) of each item of the standard bins, 0 for
// the second and later chunk items of a large or dense leaf; their totals,
// summed per block first (four global atomics a warp, on the same four
// words, were 65 of the kernel's 89 us on the Laplacian 4096^2's 650 k
// leaves, perf-log R8).
__global__ void __launch_bounds__(stride_threads) leaf_counts(const NodeItem* items, std::uint32_t count,
                                                            std::uint32_t first_chunked, const std::byte* pool,
                                                            std::uint32_t log2d, std::uint32_t* out,
                                                            LeafTotals* totals) {
  __shared__ unsigned long long block_total[5];
  if (threadIdx.x < 5) block_total[threadIdx.x] = 0;
  __syncthreads();
  unsigned long long entries = 0, units = 0, leaves = 0, gathered = 0, packed = 0;
  for (std::uint64_t i = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; i < count; i += std::uint64_t{gridDim.x} * blockDim.x) {
    const NodeItem it = items[i];
    std::uint32_t n = 0;
    if (i < first_chunked || it.level == 0)
      n = ref_type(it.ref) == NodeType::dense ? 1u << (2 * log2d)
                                              : *reinterpret_cast<const std::uint32_t*>(pool + ref_offset(it.ref));
    out[i] = n;
    if (n == 0) continue;
    const LeafClass c = leaf_class(it, n);
    entries += n;
    units += c == own_class ? units_of(n) : 0u;
    gathered += c == gathered_class ? n : 0u;
    packed += c == packed_class;
    ++leaves;
  }
  entries = gpu::warp_sum(entries);
  units = gpu::warp_sum(units);
  leaves = gpu::warp_sum(leaves);
  gathered = gpu::warp_sum(gathered);
  packed = gpu::warp_sum(packed);
  if (threadIdx.x % 32 == 0 && leaves > 0) {
    atomicAdd(&block_total[0], entries);
    atomicAdd(&block_total[1], units);
    atomicAdd(&block_total[2], leaves);
    atomicAdd(&block_total[3], gathered);
    atomicAdd(&block_total[4], packed);
  }
  __syncthreads();
  if (threadIdx.x == 0 && block_total[2] > 0) {
    atomicAdd(&totals->entries, block_total[0]);
    atomicAdd(&totals->units, block_total[1]);
    atomicAdd(&totals->leaves, block_total[2]);
    atomicAdd(&totals->gathered, block_total[3]);
    atomicAdd(&totals->packed, block_total[4]);
  }
}

// Sort keys: a leaf's output block times leaf_classes plus its class (a
// block's gathered leaves first, then its packed ones); leaf_classes *
// `blocks`, sorted last, where it has no entries. Per block: the units of
// its own leaves (big), the entries gathered (singles), the leaves packed
// (smalls).
__global__ void block_keys(const NodeItem* items, const std::uint32_t* n, std::uint32_t count, bool by_col,
                           std::uint32_t blocks, std::uint32_t* keys, std::uint32_t* index, std::uint32_t* big,
                           std::uint32_t* singles, std::uint32_t* smalls) {
  for (std::uint64_t i = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; i < count; i += std::uint64_t{gridDim.x} * blockDim.x) {
    const NodeItem it = items[i];
    const std::uint32_t b = static_cast<std::uint32_t>(by_col ? it.bcol : it.brow);
    index[i] = static_cast<std::uint32_t>(i);
    if (n[i] == 0) {
      keys[i] = leaf_classes * blocks;
      continue;
    }
    const LeafClass c = leaf_class(it, n[i]);
    keys[i] = leaf_classes * b + c;
    if (c == gathered_class) atomicAdd(singles + b, n[i]);
    else if (c == packed_class) atomicAdd(smalls + b, 1u);
    else atomicAdd(big + b, units_of(n[i]));
  }
}

// Per output block: all its units, its own leaves' units (big), its
// gathered entries (singles) and its packed leaves (smalls); scanned over
// blocks in one pass, the same fields are where each starts.
struct BlockCounts {
  std::uint32_t units, big, singles, smalls;
};
struct AddBlockCounts {
  __host__ __device__ BlockCounts operator()(const BlockCounts& a, const BlockCounts& b) const {
    return {a.units + b.units, a.big + b.big, a.singles + b.singles, a.smalls + b.smalls};
  }
};

// A block's gather and pack units, which come first among its units.
__host__ __device__ inline std::uint32_t gather_units(const BlockCounts& c) { return (c.singles + 31) / 32; }
__host__ __device__ inline std::uint32_t pack_units(const BlockCounts& c) {
  return (c.smalls + pack_leaves - 1) / pack_leaves;
}

// A block's units: its own leaves', one per 32 gathered entries and one per
// pack_leaves packed leaves (zeros at `blocks`, for the scan's total).
__global__ void block_unit_counts(const std::uint32_t* big, const std::uint32_t* singles, const std::uint32_t* smalls,
                                  std::uint32_t blocks, BlockCounts* counts) {
  for (std::uint64_t b = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; b <= blocks; b += std::uint64_t{gridDim.x} * blockDim.x) {
    BlockCounts c{};
    if (b < blocks) {
      c = BlockCounts{0, big[b], singles[b], smalls[b]};
      c.units = c.big + gather_units(c) + pack_units(c);
    }
    counts[b] = c;
  }
}

// Per sorted leaf: its own units (x), its gathered entries (y) and whether
// it is packed (z); scanned in one pass.
struct AddLeafCounts {
  __host__ __device__ uint4 operator()(const uint4& a, const uint4& b) const {
    return {a.x + b.x, a.y + b.y, a.z + b.z, 0};
  }
};
// The class comes from the sorted key (as in write_units), not from the
// item again; an item without entries (its key leaf_classes * blocks, class
// 0, sorted after the leaves) counts nothing.
__global__ void leaf_units(const std::uint32_t* sorted_keys, const std::uint32_t* order, const std::uint32_t* n,
                           std::uint32_t leaves, uint4* units) {
  for (std::uint64_t k = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; k < leaves; k += std::uint64_t{gridDim.x} * blockDim.x) {
    const std::uint32_t cnt = n[order[k]];
    const auto c = static_cast<LeafClass>(sorted_keys[k] % leaf_classes);
    units[k] = c == gathered_class ? uint4{0, cnt, 0, 0}
               : c == packed_class ? uint4{0, 0, 1, 0}
                                   : uint4{units_of(cnt), 0, 0, 0};
  }
}

// A run's tiles, split blocks, sum slots and tiles of split blocks.
struct TileCounts {
  std::uint32_t tiles, groups, slots, split_tiles;
};
struct AddCounts {
  __host__ __device__ TileCounts operator()(const TileCounts& a, const TileCounts& b) const {
    return {a.tiles + b.tiles, a.groups + b.groups, a.slots + b.slots, a.split_tiles + b.split_tiles};
  }
};

// A run's blocks as a warp stages them in shared memory: their units, where
// their units start, and (written) the first block of each one's tile.
struct RunStage {
  std::uint32_t units[chunk_blocks], first[chunk_blocks], tile_start[chunk_blocks];
};

// The greedy cut of one run of output blocks, by a warp: the lanes stage the
// run's counts (coalesced), lane 0 cuts from shared memory, the lanes write
// each block's tile start. A thread per run reading the counts from global
// memory one block after another took 53 + 163 us per orientation on the
// Laplacian 4096^2 (perf-log R8). Counts only (write == false) or writes
// the run's tiles and split groups from its offsets `at`, and for each block
// the first block of its tile (a unit's output block inside the tile is
// relative to it).
struct TileCut {
  const BlockCounts* counts;  // per block
  const BlockCounts* starts;  // per block + 1, scanned
  std::uint32_t blocks, tile_units, max_blocks;
  Tile* tiles;
  SplitGroup* groups;
  std::uint32_t* tile_start;

  // The parts of a heavy block of `units` units that meet in one thread
  // block: the largest power of two not above the count of tiles of at most
  // tile_units units it needs, or 0 where that count is above tile_warps
  // (the parts meet in a global slot). Rounded down, a part may take up to
  // twice tile_units: a stencil's block row in 2 parts ran 2-8% faster than
  // in 4 (perf-log 25).
  __device__ std::uint32_t local_parts(std::uint32_t units) const {
    const std::uint32_t need = (units + tile_units - 1) / tile_units;
    if (need > tile_warps) return 0;
    std::uint32_t p = 1;
    while (p * 2 <= need) p *= 2;
    return p;
  }

  // The run's counts on lane 0 (the other lanes' are zero). Warp-collective.
  // A heavy block split in at most tile_warps parts takes a power of two of
  // them, placed at a tile index aligned to their count so that they are
  // warps of one thread block (run_tile adds them in shared memory): empty
  // tiles pad before such a group, and a run that has any reserves
  // tile_warps - 1 more, split between its start (to align it, from `at`)
  // and its end, so that both passes count the same.
  __device__ TileCounts run(std::uint32_t chunk, TileCounts at, bool write, RunStage& s, std::uint32_t lane) const {
    const std::uint32_t begin = chunk * chunk_blocks, len = min(blocks, begin + chunk_blocks) - begin;
    for (std::uint32_t i = lane; i < len; i += 32) {
      s.units[i] = counts[begin + i].units;
      if (write) s.first[i] = starts[begin + i].units;
    }
    __syncwarp();
    TileCounts c{0, 0, 0, 0};
    if (lane == 0) {
      bool local_groups = false;
      for (std::uint32_t i = 0; i < len; ++i) local_groups |= s.units[i] > tile_units && local_parts(s.units[i]) > 0;
      const std::uint32_t lead = local_groups ? (0u - at.tiles) % tile_warps : 0u;
      // Empty tiles [c.tiles, c.tiles + n) before the units at `unit`.
      const auto pad = [&](std::uint32_t n, std::uint32_t unit, std::uint32_t block) {
        if (write)
          for (std::uint32_t k = 0; k < n; ++k) tiles[at.tiles + lead + c.tiles + k] = Tile{unit, block, 0, no_split};
        c.tiles += n;
      };
      std::uint32_t i = 0;
      while (i < len) {
        const std::uint32_t bu = s.units[i];
        if (bu > tile_units) {
          // A heavy block: its units cut evenly over `parts` tiles.
          const std::uint32_t local = local_parts(bu);
          const std::uint32_t parts = local > 0 ? local : (bu + tile_units - 1) / tile_units;
          if (local > 0) pad((0u - c.tiles) % parts, write ? s.first[i] : 0u, begin + i);
          if (write) {
            const std::uint32_t group = at.groups + c.groups, first = at.tiles + lead + c.tiles;
            groups[group] = SplitGroup{parts, first, local > 0 ? 0u : at.slots + c.slots, 0};
            for (std::uint32_t p = 0; p < parts; ++p)
              tiles[first + p] =
                  Tile{s.first[i] + static_cast<std::uint32_t>(std::uint64_t{bu} * p / parts), begin + i, 1, group};
            s.tile_start[i] = begin + i;
          }
          ++c.groups;
          c.slots += local > 0 ? 0u : 1u;
          c.tiles += parts;
          c.split_tiles += parts;
          ++i;
          continue;
        }
        const std::uint32_t start = i;
        std::uint32_t sum = 0;
        while (i < len && i - start < max_blocks && s.units[i] <= tile_units && sum + s.units[i] <= tile_units) {
          sum += s.units[i];
          if (write) s.tile_start[i] = begin + start;
          ++i;
        }
        if (write) tiles[at.tiles + lead + c.tiles] = Tile{s.first[start], begin + start, i - start, no_split};
        ++c.tiles;
      }
      if (local_groups) {
        // The trailing pads here; the lead pads (at the run's first tile
        // indices, before its tiles) just below.
        const std::uint32_t in_run = c.tiles;
        pad(tile_warps - 1 - lead, write ? starts[begin + len].units : 0u, begin + len - 1);
        if (write)
          for (std::uint32_t k = 0; k < lead; ++k) tiles[at.tiles + k] = Tile{s.first[0], begin, 0, no_split};
        c.tiles = in_run + tile_warps - 1;
      }
    }
    __syncwarp();
    if (write)
      for (std::uint32_t i = lane; i < len; i += 32) tile_start[begin + i] = s.tile_start[i];
    __syncwarp();  // the stage is the next run's
    return c;
  }
};

// Pass 1 (`counts` per run, one extra zero for the scan's total) or pass 2
// (`at`: the scanned counts; the last warp also writes the end tile), a warp
// per run.
__global__ void __launch_bounds__(stride_threads) cut_tiles(TileCut cut, std::uint32_t chunks, TileCounts* counts,
                                                          const TileCounts* at) {
  __shared__ RunStage stage[stride_threads / 32];
  const std::uint32_t lane = threadIdx.x & 31;
  RunStage& s = stage[threadIdx.x / 32];
  const std::uint64_t warps = std::uint64_t{gridDim.x} * blockDim.x / 32;
  for (std::uint64_t c = (blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x) / 32; c <= chunks; c += warps) {
    if (c == chunks) {
      if (lane == 0 && at == nullptr) counts[c] = TileCounts{};
      if (lane == 0 && at != nullptr) cut.tiles[at[chunks].tiles] = Tile{cut.starts[cut.blocks].units, 0, 0, no_split};
      continue;
    }
    const auto chunk = static_cast<std::uint32_t>(c);
    const TileCounts r = cut.run(chunk, at == nullptr ? TileCounts{} : at[chunk], at != nullptr, s, lane);
    if (lane == 0 && at == nullptr) counts[chunk] = r;
  }
}

// Per block its counts and, scanned, where its units start (`units`), its
// own leaves' units (`big`, scanned over blocks like the leaves' units), its
// gathered entries (`singles`) and its packed leaves (`smalls`).
struct BlockStarts {
  const BlockCounts* counts;
  const BlockCounts* starts;
};

// A block's gather and pack units, a thread per block: one per 32 of its
// gathered entries, which are consecutive from its start in `singles`, then
// one per pack_leaves of its packed leaves, consecutive from `smalls`.
__global__ void write_shared_units(BlockStarts at, const std::uint32_t* tile_start, std::uint32_t blocks,
                                   TileUnit* units) {
  for (std::uint64_t b = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; b < blocks; b += std::uint64_t{gridDim.x} * blockDim.x) {
    const BlockCounts c = at.counts[b], first = at.starts[b];
    const auto out = static_cast<std::uint16_t>(b - tile_start[b]);
    TileUnit* u = units + first.units;
    for (std::uint32_t j = 0; 32 * j < c.singles; ++j)
      *u++ = TileUnit{gather_ref, 0, 0, first.singles + 32 * j, static_cast<std::uint16_t>(min(32u, c.singles - 32 * j)),
                      out};
    for (std::uint32_t j = 0; pack_leaves * j < c.smalls; ++j)
      *u++ = TileUnit{pack_ref, 0, 0, first.smalls + pack_leaves * j,
                      static_cast<std::uint16_t>(min(pack_leaves, c.smalls - pack_leaves * j)), out};
  }
}

// The units of each leaf (in output-block order), a thread per leaf; a
// gathered leaf writes its entries' records instead, a packed leaf its
// record for its pack unit.
template <class V>
__global__ void write_units(const NodeItem* items, const std::uint32_t* n, const std::uint32_t* order,
                            const std::uint32_t* sorted_keys, const uint4* leaf_at, BlockStarts at, const std::byte* pool,
                            const std::uint32_t* tile_start, std::uint32_t leaves, bool by_col, std::uint32_t log2d,
                            TileUnit* units, GatherEntry* gathered, TileUnit* packed) {
  for (std::uint64_t k = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; k < leaves; k += std::uint64_t{gridDim.x} * blockDim.x) {
    const NodeItem it = items[order[k]];
    const std::uint32_t cnt = n[order[k]], b = sorted_keys[k] / leaf_classes;
    const NodeType type = ref_type(it.ref);
    const LeafClass c = static_cast<LeafClass>(sorted_keys[k] % leaf_classes);
    if (c == gathered_class) {
      const CooLayout l = coo_layout(type, cnt, sizeof(V));
      const auto* coords = reinterpret_cast<const LocalCoord*>(pool + ref_offset(it.ref) + l.coord_offset);
      const auto in_block = static_cast<std::uint32_t>(by_col ? it.brow : it.bcol);
      const std::uint32_t out_base = (b - tile_start[b]) << log2d;
      for (std::uint32_t i = 0; i < cnt; ++i) {
        const LocalCoord c = coords[i];
        gathered[leaf_at[k].y + i] =
            GatherEntry{static_cast<std::uint32_t>(ref_offset(it.ref) + l.value_offset + i * sizeof(V)), in_block,
                        static_cast<std::uint16_t>(out_base + (by_col ? c.col : c.row)),
                        static_cast<std::uint16_t>(by_col ? c.row : c.col), 0};
      }
      continue;
    }
    const std::uint32_t value_offset =
        type == NodeType::dense ? dense_mask_bytes(log2d) : coo_layout(type, cnt, sizeof(V)).value_offset;
    const auto in_block = static_cast<std::uint32_t>(by_col ? it.brow : it.bcol);
    const auto out = static_cast<std::uint16_t>(b - tile_start[b]);
    if (c == packed_class) {
      packed[leaf_at[k].z] = TileUnit{it.ref, 0, static_cast<std::uint16_t>(value_offset / 4), in_block,
                                      static_cast<std::uint16_t>(cnt), out};
      continue;
    }
    const BlockCounts bc = at.counts[b];
    TileUnit* u = units + at.starts[b].units + gather_units(bc) + pack_units(bc) + (leaf_at[k].x - at.starts[b].big);
    for (std::uint32_t s = 0; s * tile_unit_entries < cnt; ++s)
      u[s] = TileUnit{it.ref, static_cast<std::uint16_t>(s), static_cast<std::uint16_t>(value_offset / 4), in_block,
                      static_cast<std::uint16_t>(min(tile_unit_entries, cnt - s * tile_unit_entries)), out};
  }
}

inline void launched(const char* what) { cuda_check(cudaGetLastError(), what); }

// Arrays carved one after another from one allocation, each 256-byte
// aligned and at least one element long (size_of says how much each takes).
class Carve {
 public:
  explicit Carve(const DeviceBytes& mem) : base_(static_cast<std::byte*>(mem.get())) {}
  template <class T>
  T* take(std::uint64_t count) {
    const std::size_t at = used_;
    used_ += size_of(count, sizeof(T));
    return reinterpret_cast<T*>(base_ + at);
  }
  static constexpr std::size_t size_of(std::uint64_t count, std::size_t elem) {
    return (std::max<std::uint64_t>(count, 1) * elem + 255) / 256 * 256;
  }

 private:
  std::byte* base_;
  std::size_t used_ = 0;
};

// Work memory of one call, carved from one allocation (Context::allocate_work).
class Scratch {
 public:
  Scratch(const Context& ctx, std::size_t bytes) : mem_(ctx.allocate_work(std::max<std::size_t>(bytes, 1))), carve_(mem_) {}
  template <class T>
  T* take(std::uint64_t count) {
    return carve_.template take<T>(count);
  }
  static constexpr std::size_t size_of(std::uint64_t count, std::size_t elem) { return Carve::size_of(count, elem); }

 private:
  DeviceBytes mem_;
  Carve carve_;
};

}  // namespace tile_detail

}  // namespace hisparse::ops::spmv_gpu
