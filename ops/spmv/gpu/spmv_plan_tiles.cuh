#pragma once
// Plan building: the output tiles of one orientation (spmv_tile_agent.cuh
// says what a tile is), planned on the device from the recorded leaves of
// the standard bins:
// 1. each leaf's entry count (chunk items of large and dense leaves after
//    the first count 0: a tile cuts leaves into units itself), and the
//    totals the fill test needs (the only download besides the sizes);
// 2. per orientation, the leaves grouped by output block with a stable
//    radix sort (the traversal's order stays inside a block), each cut into
//    units of at most 128 entries: a scan gives each leaf its first unit;
// 3. the output blocks cut into tiles of at most `tile_units` units and
//    tile_max_outputs outputs, a block with more units than that split over
//    several tiles. The cut is greedy inside runs of `chunk_blocks` output
//    blocks, a thread per run (counted, scanned, then written), so a tile
//    never spans two runs.
// Nothing is planned on the host: the Laplacian 4096^2's 650 k leaves took
// 120-170 ms there (perf-log R4 i).
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdint>
#include <string>

#include "hisparse/formats/device_matrix.hpp"
#include "hisparse/ops/context.hpp"
#include "hisparse/runtime/log.hpp"
#include "spmv_tile_agent.cuh"

namespace hisparse::ops::spmv_gpu {

template <class V>
struct TilePlan {
  DeviceBytes tiles, units, groups, arrivals, sums, gathered;
  std::uint64_t tile_count = 0;
  std::uint64_t split_tiles = 0;
  // What a call reads beyond the pool: units and tiles (and per split
  // block a counter and d sums per slot).
  [[nodiscard]] std::uint64_t bytes() const {
    return tiles.size() + units.size() + groups.size() + arrivals.size() + sums.size() + gathered.size();
  }
  [[nodiscard]] TileView<V> view() const {
    return {tiles.as<Tile>(), units.as<TileUnit>(), groups.as<SplitGroup>(), arrivals.as<unsigned>(), sums.as<V>(),
            gathered.as<GatherEntry>()};
  }
};

namespace tile_detail {

// Output blocks per planning thread (at least a tile's most blocks).
inline constexpr std::uint32_t chunk_blocks = 128;

// The units (warp steps) of a leaf of n entries or cells.
HISPARSE_HD constexpr std::uint32_t units_of(std::uint32_t n) { return (n + tile_unit_entries - 1) / tile_unit_entries; }

// What planning downloads: entries, units and leaves with entries.
struct LeafTotals {
  unsigned long long entries, units, leaves;
};

// Entries (cells, for dense leaves) of each item of the standard bins, 0 for
// the second and later chunk items of a large or dense leaf; their totals.
__global__ void leaf_counts(const NodeItem* items, std::uint32_t count, std::uint32_t first_chunked,
                            const std::byte* pool, std::uint32_t log2d, std::uint32_t* out, LeafTotals* totals) {
  unsigned long long entries = 0, units = 0, leaves = 0;
  for (std::uint64_t i = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; i < count; i += std::uint64_t{gridDim.x} * blockDim.x) {
    const NodeItem it = items[i];
    std::uint32_t n = 0;
    if (i < first_chunked || it.level == 0)
      n = ref_type(it.ref) == NodeType::dense ? 1u << (2 * log2d)
                                              : *reinterpret_cast<const std::uint32_t*>(pool + ref_offset(it.ref));
    out[i] = n;
    entries += n;
    units += units_of(n);
    leaves += n > 0;
  }
  for (int off = 16; off > 0; off /= 2) {
    entries += __shfl_xor_sync(0xffffffffu, entries, off);
    units += __shfl_xor_sync(0xffffffffu, units, off);
    leaves += __shfl_xor_sync(0xffffffffu, leaves, off);
  }
  if (threadIdx.x % 32 == 0 && leaves > 0) {
    atomicAdd(&totals->entries, entries);
    atomicAdd(&totals->units, units);
    atomicAdd(&totals->leaves, leaves);
  }
}

// Leaves whose entries a gather unit takes (spmv_tile_agent.cuh): the
// one- and two-entry leaves, whole (not a chunk item).
__device__ inline bool gathered_leaf(const NodeItem& it) {
  return ref_type(it.ref) == NodeType::coo1 || ref_type(it.ref) == NodeType::coo2;
}

// Sort keys: a leaf's output block, twice, plus 1 for a leaf of units of its
// own (so that a block's gathered leaves come first); 2 * `blocks`, sorted
// last, where it has no entries. Per block: the units of its own leaves
// (big) and the entries gathered (singles).
__global__ void block_keys(const NodeItem* items, const std::uint32_t* n, std::uint32_t count, bool by_col,
                           std::uint32_t blocks, std::uint32_t* keys, std::uint32_t* index, std::uint32_t* big,
                           std::uint32_t* singles) {
  for (std::uint64_t i = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; i < count; i += std::uint64_t{gridDim.x} * blockDim.x) {
    const NodeItem it = items[i];
    const std::uint32_t b = static_cast<std::uint32_t>(by_col ? it.bcol : it.brow);
    const bool gathered = gathered_leaf(it);
    keys[i] = n[i] > 0 ? 2 * b + (gathered ? 0u : 1u) : 2 * blocks;
    index[i] = static_cast<std::uint32_t>(i);
    if (n[i] == 0) continue;
    if (gathered) atomicAdd(singles + b, n[i]);
    else atomicAdd(big + b, units_of(n[i]));
  }
}

// A block's units: its own leaves' and one per 32 gathered entries.
__global__ void block_unit_counts(const std::uint32_t* big, const std::uint32_t* singles, std::uint32_t blocks,
                                  std::uint32_t* units) {
  for (std::uint64_t b = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; b <= blocks; b += std::uint64_t{gridDim.x} * blockDim.x)
    units[b] = b < blocks ? big[b] + (singles[b] + 31) / 32 : 0;
}

// Per sorted leaf: its own units, and its gathered entries.
__global__ void leaf_units(const NodeItem* items, const std::uint32_t* order, const std::uint32_t* n,
                           std::uint32_t leaves, std::uint32_t* units, std::uint32_t* gathered) {
  for (std::uint64_t k = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; k < leaves; k += std::uint64_t{gridDim.x} * blockDim.x) {
    const std::uint32_t i = order[k];
    const bool g = gathered_leaf(items[i]);
    units[k] = g ? 0 : units_of(n[i]);
    gathered[k] = g ? n[i] : 0;
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

// The greedy cut of one run of output blocks. Counts only (out == nullptr)
// or writes the run's tiles and split groups from its offsets `at`, and for
// each block the first block of its tile (a unit's output block inside the
// tile is relative to it).
struct TileCut {
  const std::uint32_t* block_units;  // per block
  const std::uint32_t* unit_first;   // per block + 1, scanned
  std::uint32_t blocks, tile_units, max_blocks;
  Tile* tiles;
  SplitGroup* groups;
  std::uint32_t* tile_start;

  __device__ TileCounts run(std::uint32_t chunk, TileCounts at, bool write) const {
    const std::uint32_t end = min(blocks, (chunk + 1) * chunk_blocks);
    TileCounts c{0, 0, 0, 0};
    std::uint32_t b = chunk * chunk_blocks;
    while (b < end) {
      const std::uint32_t bu = block_units[b];
      if (bu > tile_units) {
        // A heavy block: its units cut evenly over `parts` tiles.
        const std::uint32_t parts = (bu + tile_units - 1) / tile_units;
        if (write) {
          const std::uint32_t group = at.groups + c.groups, first = at.tiles + c.tiles;
          groups[group] = SplitGroup{parts, first, at.slots + c.slots, 0};
          for (std::uint32_t p = 0; p < parts; ++p)
            tiles[first + p] = Tile{unit_first[b] + static_cast<std::uint32_t>(std::uint64_t{bu} * p / parts), b, 1, group};
          tile_start[b] = b;
        }
        ++c.groups;
        c.slots += parts <= split_slots_max ? parts : 1;
        c.tiles += parts;
        c.split_tiles += parts;
        ++b;
        continue;
      }
      const std::uint32_t start = b;
      std::uint32_t sum = 0;
      while (b < end && b - start < max_blocks && block_units[b] <= tile_units && sum + block_units[b] <= tile_units) {
        sum += block_units[b];
        if (write) tile_start[b] = start;
        ++b;
      }
      if (write) tiles[at.tiles + c.tiles] = Tile{unit_first[start], start, b - start, no_split};
      ++c.tiles;
    }
    return c;
  }
};

// Pass 1 (`counts` per run, one extra zero for the scan's total) or pass 2
// (`at`: the scanned counts; the last run also writes the end tile).
__global__ void cut_tiles(TileCut cut, std::uint32_t chunks, TileCounts* counts, const TileCounts* at) {
  for (std::uint32_t c = blockIdx.x * blockDim.x + threadIdx.x; c <= chunks; c += gridDim.x * blockDim.x) {
    if (at == nullptr) {
      counts[c] = c < chunks ? cut.run(c, {}, false) : TileCounts{};
    } else if (c < chunks) {
      cut.run(c, at[c], true);
    } else {
      cut.tiles[at[chunks].tiles] = Tile{cut.unit_first[cut.blocks], 0, 0, no_split};
    }
  }
}

// Where a block's units start (`unit_first`), its own leaves' units
// (`big_first`, scanned over blocks like the leaves' `unit_at`), and its
// gathered entries (`gather_first`).
struct BlockStarts {
  const std::uint32_t* unit_first;
  const std::uint32_t* big_first;
  const std::uint32_t* gather_first;
  const std::uint32_t* singles;
};

// A block's gather units, a thread per block: one per 32 of its gathered
// entries, which are consecutive from gather_first.
__global__ void write_gather_units(BlockStarts at, const std::uint32_t* tile_start, std::uint32_t blocks,
                                   TileUnit* units) {
  for (std::uint64_t b = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; b < blocks; b += std::uint64_t{gridDim.x} * blockDim.x) {
    const std::uint32_t s = at.singles[b];
    const auto out = static_cast<std::uint16_t>(b - tile_start[b]);
    for (std::uint32_t j = 0; 32 * j < s; ++j)
      units[at.unit_first[b] + j] = TileUnit{gather_ref, 0, 0, at.gather_first[b] + 32 * j,
                                             static_cast<std::uint16_t>(min(32u, s - 32 * j)), out};
  }
}

// The units of each leaf (in output-block order), a thread per leaf; a
// gathered leaf writes its entries' records instead.
template <class V>
__global__ void write_units(const NodeItem* items, const std::uint32_t* n, const std::uint32_t* order,
                            const std::uint32_t* sorted_keys, const std::uint32_t* unit_at,
                            const std::uint32_t* gather_at, BlockStarts at, const std::byte* pool,
                            const std::uint32_t* tile_start, std::uint32_t leaves, bool by_col, std::uint32_t log2d,
                            TileUnit* units, GatherEntry* gathered) {
  for (std::uint64_t k = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; k < leaves; k += std::uint64_t{gridDim.x} * blockDim.x) {
    const NodeItem it = items[order[k]];
    const std::uint32_t cnt = n[order[k]], b = sorted_keys[k] >> 1;
    const NodeType type = ref_type(it.ref);
    if (gathered_leaf(it)) {
      const CooLayout l = coo_layout(type, cnt, sizeof(V));
      const auto* coords = reinterpret_cast<const LocalCoord*>(pool + ref_offset(it.ref) + l.coord_offset);
      const auto in_block = static_cast<std::uint32_t>(by_col ? it.brow : it.bcol);
      const std::uint32_t out_base = (b - tile_start[b]) << log2d;
      for (std::uint32_t i = 0; i < cnt; ++i) {
        const LocalCoord c = coords[i];
        gathered[gather_at[k] + i] =
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
    TileUnit* u = units + at.unit_first[b] + (at.singles[b] + 31) / 32 + (unit_at[k] - at.big_first[b]);
    for (std::uint32_t s = 0; s * tile_unit_entries < cnt; ++s)
      u[s] = TileUnit{it.ref, static_cast<std::uint16_t>(s), static_cast<std::uint16_t>(value_offset / 4), in_block,
                      static_cast<std::uint16_t>(min(tile_unit_entries, cnt - s * tile_unit_entries)), out};
  }
}

inline unsigned grid_of(std::uint64_t count) {
  return static_cast<unsigned>(std::clamp<std::uint64_t>((count + 255) / 256, 1, 4096));
}

inline void launched(const char* what) { cuda_check(cudaGetLastError(), what); }

// Work memory of one call, carved from one allocation (with the synchronous
// allocator, cudaFree synchronizes: one of them, not a dozen).
class Scratch {
 public:
  Scratch(const Context& ctx, std::size_t bytes) : mem_(ctx.allocate(std::max<std::size_t>(bytes, 1))) {}
  template <class T>
  T* take(std::uint64_t count) {
    const std::size_t at = used_;
    used_ += (std::max<std::uint64_t>(count, 1) * sizeof(T) + 255) / 256 * 256;
    return reinterpret_cast<T*>(static_cast<std::byte*>(mem_.get()) + at);
  }
  static constexpr std::size_t size_of(std::uint64_t count, std::size_t elem) {
    return (std::max<std::uint64_t>(count, 1) * elem + 255) / 256 * 256;
  }

 private:
  DeviceBytes mem_;
  std::size_t used_ = 0;
};

}  // namespace tile_detail

// Where tiles can address everything: block indices and unit counts in 32
// bits (a matrix beyond that runs the traversal per call).
inline bool tiles_fit(std::uint64_t rows, std::uint64_t cols, std::uint32_t log2d) {
  return (std::max(rows, cols) >> log2d) < (std::uint64_t{1} << 31);
}

// The recorded items of the standard bins, back to back: [0, first_chunked)
// are whole leaves (COO1 and small), the rest large and dense items. Both
// orientations' plans, unless the leaves fill their units with fewer than
// `min_fill` entries on average (then nothing is built and the result is
// false). Synchronizes the context's stream; memory from its allocator.
template <class V>
bool plan_tiles(const std::byte* pool, const NodeItem* items, std::uint64_t count, std::uint64_t first_chunked,
                std::uint64_t rows, std::uint64_t cols, std::uint32_t log2d, std::uint32_t tile_units,
                std::uint32_t min_fill, const Context& ctx, TilePlan<V> (&out)[2]) {
  using namespace tile_detail;
  const cudaStream_t stream = ctx.stream();
  using clock = std::chrono::steady_clock;
  const auto ms = [](clock::time_point from) { return std::chrono::duration<double, std::milli>(clock::now() - from).count(); };
  const auto t0 = clock::now();
  if (count >= (std::uint64_t{1} << 32)) return false;  // leaf indices are 32-bit
  const auto n_items = static_cast<std::uint32_t>(count);
  const std::uint32_t d = 1u << log2d;
  const std::uint32_t max_blocks = std::max(1u, tile_max_outputs >> log2d);
  static_assert(chunk_blocks >= tile_max_outputs / 2, "a run holds a tile's most blocks (d = 2)");
  const auto blocks_of = [&](int o) { return static_cast<std::uint32_t>(((o == 0 ? rows : cols) + d - 1) >> log2d); };
  const std::uint32_t most_blocks = std::max(blocks_of(0), blocks_of(1));
  const std::uint32_t most_chunks = (most_blocks + chunk_blocks - 1) / chunk_blocks;
  // Sort temporaries: the larger of the two orientations' needs.
  std::size_t sort_bytes = 0;
  for (int o = 0; o < 2; ++o) {
    std::size_t b = 0;
    cuda_check(cub::DeviceRadixSort::SortPairs(nullptr, b, static_cast<const std::uint32_t*>(nullptr),
                                               static_cast<std::uint32_t*>(nullptr), static_cast<const std::uint32_t*>(nullptr),
                                               static_cast<std::uint32_t*>(nullptr), n_items, 0,
                                               static_cast<int>(std::bit_width(2 * std::uint64_t{blocks_of(o)})), stream),
               "cub::DeviceRadixSort::SortPairs (size, SpMV tiles)");
    sort_bytes = std::max(sort_bytes, b);
  }
  std::size_t scan_bytes = 0, cut_scan_bytes = 0;
  const std::uint64_t longest = std::max<std::uint64_t>(n_items, most_blocks + 1);
  cuda_check(cub::DeviceScan::ExclusiveSum(nullptr, scan_bytes, static_cast<const std::uint32_t*>(nullptr),
                                           static_cast<std::uint32_t*>(nullptr), longest, stream),
             "cub::DeviceScan::ExclusiveSum (size, SpMV tiles)");
  cuda_check(cub::DeviceScan::ExclusiveScan(nullptr, cut_scan_bytes, static_cast<const TileCounts*>(nullptr),
                                            static_cast<TileCounts*>(nullptr), AddCounts{}, TileCounts{},
                                            most_chunks + 1, stream),
             "cub::DeviceScan::ExclusiveScan (size, SpMV tiles)");
  const std::size_t temp_bytes = std::max({sort_bytes, scan_bytes, cut_scan_bytes});
  const std::size_t u32 = sizeof(std::uint32_t);
  // The entry counts first: the fill test may end the planning there.
  Scratch counting(ctx, Scratch::size_of(1, sizeof(LeafTotals)) + Scratch::size_of(n_items, u32));
  auto* totals = counting.take<LeafTotals>(1);
  auto* n = counting.take<std::uint32_t>(n_items);
  LeafTotals total{0, 0, 0};
  cuda_check(cudaMemsetAsync(totals, 0, sizeof(LeafTotals), stream), "cudaMemsetAsync(SpMV tile totals)");
  if (n_items > 0) {
    leaf_counts<<<grid_of(n_items), 256, 0, stream>>>(items, n_items, static_cast<std::uint32_t>(first_chunked), pool,
                                                       log2d, n, totals);
    launched("launch of leaf_counts (SpMV tiles)");
  }
  cuda_check(cudaMemcpyAsync(&total, totals, sizeof(total), cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync(SpMV tile totals)");
  cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize(SpMV tiles)");
  std::string phases = "counts " + std::to_string(ms(t0));
  if (total.entries < std::uint64_t{min_fill} * total.units) return false;
  if (total.units >= (std::uint64_t{1} << 32)) throw LimitError("spmv: the plan needs more than 2^32 units");
  const auto leaves = static_cast<std::uint32_t>(total.leaves);

  Scratch scratch(ctx, 6 * Scratch::size_of(n_items, u32) + 7 * Scratch::size_of(most_blocks + 1, u32) +
                  2 * Scratch::size_of(most_chunks + 1, sizeof(TileCounts)) + Scratch::size_of(temp_bytes, 1));
  auto* keys = scratch.take<std::uint32_t>(n_items);
  auto* sorted_keys = scratch.take<std::uint32_t>(n_items);
  auto* index = scratch.take<std::uint32_t>(n_items);
  auto* order = scratch.take<std::uint32_t>(n_items);
  auto* gather_count = scratch.take<std::uint32_t>(n_items);
  auto* gather_at = scratch.take<std::uint32_t>(n_items);
  auto* block_units = scratch.take<std::uint32_t>(most_blocks + 1);
  auto* unit_first = scratch.take<std::uint32_t>(most_blocks + 1);
  auto* tile_start = scratch.take<std::uint32_t>(most_blocks + 1);
  auto* big = scratch.take<std::uint32_t>(most_blocks + 1);
  auto* big_first = scratch.take<std::uint32_t>(most_blocks + 1);
  auto* singles = scratch.take<std::uint32_t>(most_blocks + 1);
  auto* gather_first = scratch.take<std::uint32_t>(most_blocks + 1);
  auto* counts = scratch.take<TileCounts>(most_chunks + 1);
  auto* at = scratch.take<TileCounts>(most_chunks + 1);
  void* temp = scratch.take<std::byte>(temp_bytes);
  auto* unit_at = keys;  // keys and index are dead once sorted

  for (int o = 0; o < 2; ++o) {
    const std::uint32_t blocks = blocks_of(o);
    const std::uint32_t chunks = (blocks + chunk_blocks - 1) / chunk_blocks;
    const bool by_col = o == 1;
    cuda_check(cudaMemsetAsync(big, 0, (std::uint64_t{blocks} + 1) * u32, stream), "cudaMemsetAsync(SpMV block units)");
    cuda_check(cudaMemsetAsync(singles, 0, (std::uint64_t{blocks} + 1) * u32, stream), "cudaMemsetAsync(SpMV block singles)");
    const auto scan = [&](const std::uint32_t* in, std::uint32_t* out, std::uint64_t count, const char* what) {
      std::size_t bytes = temp_bytes;
      cuda_check(cub::DeviceScan::ExclusiveSum(temp, bytes, in, out, count, stream), what);
    };
    if (n_items > 0) {
      block_keys<<<grid_of(n_items), 256, 0, stream>>>(items, n, n_items, by_col, blocks, keys, index, big, singles);
      launched("launch of block_keys (SpMV tiles)");
      std::size_t bytes = temp_bytes;
      cuda_check(cub::DeviceRadixSort::SortPairs(temp, bytes, keys, sorted_keys, index, order, n_items, 0,
                                                 static_cast<int>(std::bit_width(2 * std::uint64_t{blocks})), stream),
                 "cub::DeviceRadixSort::SortPairs (SpMV tiles)");
      leaf_units<<<grid_of(leaves), 256, 0, stream>>>(items, order, n, leaves, index, gather_count);
      launched("launch of leaf_units (SpMV tiles)");
      scan(index, unit_at, leaves, "cub::DeviceScan::ExclusiveSum (SpMV leaf units)");
      scan(gather_count, gather_at, leaves, "cub::DeviceScan::ExclusiveSum (SpMV gathered entries)");
    }
    block_unit_counts<<<grid_of(blocks + 1), 256, 0, stream>>>(big, singles, blocks, block_units);
    launched("launch of block_unit_counts (SpMV tiles)");
    scan(block_units, unit_first, blocks + 1, "cub::DeviceScan::ExclusiveSum (SpMV block units)");
    scan(big, big_first, blocks + 1, "cub::DeviceScan::ExclusiveSum (SpMV block leaf units)");
    scan(singles, gather_first, blocks + 1, "cub::DeviceScan::ExclusiveSum (SpMV block gathered)");
    TileCut cut{block_units, unit_first, blocks, tile_units, max_blocks, nullptr, nullptr, tile_start};
    cut_tiles<<<grid_of(chunks + 1), 256, 0, stream>>>(cut, chunks, counts, nullptr);
    launched("launch of cut_tiles (SpMV tiles, counts)");
    std::size_t bytes = temp_bytes;
    cuda_check(cub::DeviceScan::ExclusiveScan(temp, bytes, counts, at, AddCounts{}, TileCounts{}, chunks + 1, stream),
               "cub::DeviceScan::ExclusiveScan (SpMV tile counts)");
    TileCounts sizes{};
    std::uint32_t ends[2] = {0, 0};  // all units, all gathered entries
    cuda_check(cudaMemcpyAsync(&sizes, at + chunks, sizeof(sizes), cudaMemcpyDeviceToHost, stream),
               "cudaMemcpyAsync(SpMV tile counts)");
    cuda_check(cudaMemcpyAsync(ends, unit_first + blocks, u32, cudaMemcpyDeviceToHost, stream),
               "cudaMemcpyAsync(SpMV unit count)");
    cuda_check(cudaMemcpyAsync(ends + 1, gather_first + blocks, u32, cudaMemcpyDeviceToHost, stream),
               "cudaMemcpyAsync(SpMV gathered count)");
    cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize(SpMV tile counts)");
    if (sizes.tiles >= (1u << 31)) throw LimitError("spmv: the plan needs more than 2^31 tiles");
    TilePlan<V>& p = out[o];
    p.tile_count = sizes.tiles;
    p.split_tiles = sizes.split_tiles;
    p.tiles = ctx.allocate((std::uint64_t{sizes.tiles} + 1) * sizeof(Tile));
    p.units = ctx.allocate(std::max<std::uint64_t>(ends[0], 1) * sizeof(TileUnit));
    p.gathered = ctx.allocate(std::max<std::uint64_t>(ends[1], 1) * sizeof(GatherEntry));
    p.groups = ctx.allocate(std::max<std::uint64_t>(sizes.groups, 1) * sizeof(SplitGroup));
    p.arrivals = ctx.allocate(std::max<std::uint64_t>(sizes.groups, 1) * sizeof(unsigned));
    p.sums = ctx.allocate(std::max<std::uint64_t>(std::uint64_t{sizes.slots} << log2d, 1) * sizeof(V));
    cut.tiles = p.tiles.template as<Tile>();
    cut.groups = p.groups.template as<SplitGroup>();
    cut_tiles<<<grid_of(chunks + 1), 256, 0, stream>>>(cut, chunks, nullptr, at);
    launched("launch of cut_tiles (SpMV tiles)");
    const BlockStarts starts{unit_first, big_first, gather_first, singles};
    write_gather_units<<<grid_of(blocks), 256, 0, stream>>>(starts, tile_start, blocks, p.units.template as<TileUnit>());
    launched("launch of write_gather_units (SpMV tiles)");
    if (leaves > 0) {
      write_units<V><<<grid_of(leaves), 256, 0, stream>>>(items, n, order, sorted_keys, unit_at, gather_at, starts, pool,
                                                          tile_start, leaves, by_col, log2d,
                                                          p.units.template as<TileUnit>(),
                                                          p.gathered.template as<GatherEntry>());
      launched("launch of write_units (SpMV tiles)");
    }
    cuda_check(cudaMemsetAsync(p.arrivals.get(), 0, p.arrivals.size(), stream), "cudaMemsetAsync(SpMV tile arrivals)");
    cuda_check(cudaMemsetAsync(p.sums.get(), 0, p.sums.size(), stream), "cudaMemsetAsync(SpMV tile sums)");
    phases += ", orientation " + std::to_string(o) + " " + std::to_string(ms(t0));
  }
  cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize(SpMV tiles)");  // the scratch dies on return
  if (runtime::log::enabled(runtime::log::Level::debug))
    runtime::log::debug("spmv tiles (" + std::to_string(count) + " leaf items), ms since start: " + phases);
  return true;
}

}  // namespace hisparse::ops::spmv_gpu
