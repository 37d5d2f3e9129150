#pragma once
// Plan building: the output tiles of one orientation (spmv_tile_agent.cuh
// says what a tile is), planned on the device from the listed leaves of
// the standard bins:
// 1. each leaf's entry count (chunk items of large and dense leaves after
//    the first count 0: a tile cuts leaves into units itself), and the
//    totals the fill test needs;
// 2. the leaves grouped by output block with a stable radix sort (the
//    traversal's order stays inside a block, a block's one- and two-entry
//    leaves first, then its COO4 leaves of up to 32 entries), each cut into
//    units of at most 128 entries, or its entries gathered (32 to a unit),
//    or packed (4 leaves to a unit): scans over the leaves and over the
//    blocks place every unit, gathered entry and packed leaf;
// 3. the output blocks cut into tiles of at most `tile_units` units and
//    tile_max_outputs outputs, a block with more units than that split over
//    several tiles (where that takes up to tile_warps tiles, the largest
//    power of two of parts not above it, so a part may hold up to twice
//    tile_units, aligned so that they are warps of one thread block, with
//    empty tiles as padding). The
//    cut is greedy inside runs of `chunk_blocks` output blocks, a warp per
//    run (counted, scanned, then written), so a tile never spans two runs.
// Steps 1 and 2 and the cut's counting run back to back (the fill test's
// totals read first where the test may fail); one download then sizes the
// plan's allocation, and the writing follows without another
// synchronisation.
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
#include "spmv_plan_tile_kernels.cuh"
#include "spmv_tile_agent.cuh"

namespace hisparse::ops::spmv_gpu {

// One orientation's tiles, units, split groups (a counter each; d sums for
// each group split over many thread blocks), gathered entries and packed
// leaves, carved from one allocation (with the synchronous allocator each
// cudaMalloc costs tens of microseconds).
template <class V>
struct TilePlan {
  DeviceBytes memory;
  TileView<V> parts{};
  std::uint64_t tile_count = 0;
  std::uint64_t split_tiles = 0;
  std::uint64_t split_blocks = 0, shared_split_blocks = 0;  // every split block, those meeting in shared memory
  std::uint64_t packed_leaves = 0;                          // taken by pack units
  // What a call reads beyond the pool.
  [[nodiscard]] std::uint64_t bytes() const { return memory.size(); }
  [[nodiscard]] TileView<V> view() const { return parts; }
};

// Where tiles can address everything: block indices, unit counts and the
// sort keys (leaf_classes per block, and one past them) in 32 bits (a
// matrix beyond that runs the traversal per call).
inline bool tiles_fit(std::uint64_t rows, std::uint64_t cols, std::uint32_t log2d) {
  const std::uint64_t blocks = (std::max(rows, cols) + (std::uint64_t{1} << log2d) - 1) >> log2d;
  return tile_detail::leaf_classes * blocks < (std::uint64_t{1} << 32);
}

// The listed items of the standard bins, back to back: [0, first_chunked)
// are whole leaves (COO1 and small), the rest large and dense items. The
// plan of orientation `o` (0: A's output blocks are its block rows, 1: A^T's,
// its block columns), unless the leaves fill their units with fewer than
// `min_fill` entries on average (then nothing is built and the result is
// false; the test does not depend on the orientation). Synchronizes the
// context's stream; memory from its allocator.
template <class V>
bool plan_tiles(const std::byte* pool, const NodeItem* items, std::uint64_t count, std::uint64_t first_chunked,
                std::uint64_t rows, std::uint64_t cols, std::uint32_t log2d, std::uint32_t tile_units,
                std::uint32_t min_fill, int o, const Context& ctx, TilePlan<V>& out) {
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
  const auto blocks = static_cast<std::uint32_t>(((o == 0 ? rows : cols) + d - 1) >> log2d);
  const std::uint32_t chunks = (blocks + chunk_blocks - 1) / chunk_blocks;
  const bool by_col = o == 1;
  const int key_bits = static_cast<int>(std::bit_width(leaf_classes * std::uint64_t{blocks}));
  std::size_t sort_bytes = 0;
  cuda_check(cub::DeviceRadixSort::SortPairs(nullptr, sort_bytes, static_cast<const std::uint32_t*>(nullptr),
                                             static_cast<std::uint32_t*>(nullptr),
                                             static_cast<const std::uint32_t*>(nullptr),
                                             static_cast<std::uint32_t*>(nullptr), n_items, 0, key_bits, stream),
             "cub::DeviceRadixSort::SortPairs (size, SpMV tiles)");
  std::size_t leaf_scan_bytes = 0, block_scan_bytes = 0, cut_scan_bytes = 0;
  cuda_check(cub::DeviceScan::ExclusiveScan(nullptr, leaf_scan_bytes, static_cast<const uint4*>(nullptr),
                                            static_cast<uint4*>(nullptr), AddLeafCounts{}, uint4{0, 0, 0, 0}, n_items,
                                            stream),
             "cub::DeviceScan::ExclusiveScan (size, SpMV leaf units)");
  cuda_check(cub::DeviceScan::ExclusiveScan(nullptr, block_scan_bytes, static_cast<const BlockCounts*>(nullptr),
                                            static_cast<BlockCounts*>(nullptr), AddBlockCounts{}, BlockCounts{},
                                            blocks + 1, stream),
             "cub::DeviceScan::ExclusiveScan (size, SpMV block units)");
  cuda_check(cub::DeviceScan::ExclusiveScan(nullptr, cut_scan_bytes, static_cast<const TileCounts*>(nullptr),
                                            static_cast<TileCounts*>(nullptr), AddCounts{}, TileCounts{},
                                            chunks + 1, stream),
             "cub::DeviceScan::ExclusiveScan (size, SpMV tiles)");
  const std::size_t temp_bytes = std::max({sort_bytes, leaf_scan_bytes, block_scan_bytes, cut_scan_bytes});
  const std::size_t u32 = sizeof(std::uint32_t);
  // big, singles and smalls side by side: one memset clears them.
  const std::size_t per_blocks = Scratch::size_of(blocks + 1, u32);
  Scratch scratch(ctx, Scratch::size_of(1, sizeof(LeafTotals)) + 5 * Scratch::size_of(n_items, u32) +
                           2 * Scratch::size_of(n_items, sizeof(uint4)) + 4 * per_blocks +
                           2 * Scratch::size_of(blocks + 1, sizeof(BlockCounts)) +
                           2 * Scratch::size_of(chunks + 1, sizeof(TileCounts)) + Scratch::size_of(temp_bytes, 1));
  auto* totals = scratch.take<LeafTotals>(1);
  auto* n = scratch.take<std::uint32_t>(n_items);
  auto* keys = scratch.take<std::uint32_t>(n_items);
  auto* sorted_keys = scratch.take<std::uint32_t>(n_items);
  auto* index = scratch.take<std::uint32_t>(n_items);
  auto* order = scratch.take<std::uint32_t>(n_items);
  auto* leaf_n = scratch.take<uint4>(n_items);
  auto* leaf_at = scratch.take<uint4>(n_items);
  auto* big = scratch.take<std::uint32_t>(blocks + 1);
  auto* singles = scratch.take<std::uint32_t>(blocks + 1);
  auto* smalls = scratch.take<std::uint32_t>(blocks + 1);
  auto* tile_start = scratch.take<std::uint32_t>(blocks + 1);
  auto* block_counts = scratch.take<BlockCounts>(blocks + 1);
  auto* block_starts = scratch.take<BlockCounts>(blocks + 1);
  auto* counts = scratch.take<TileCounts>(chunks + 1);
  auto* at = scratch.take<TileCounts>(chunks + 1);
  void* temp = scratch.take<std::byte>(temp_bytes);

  cuda_check(cudaMemsetAsync(totals, 0, sizeof(LeafTotals), stream), "cudaMemsetAsync(SpMV tile totals)");
  cuda_check(cudaMemsetAsync(big, 0, 2 * per_blocks + (std::uint64_t{blocks} + 1) * u32, stream),
             "cudaMemsetAsync(SpMV block units)");
  if (n_items > 0) {
    leaf_counts<<<stride_grid(n_items, 1024), stride_threads, 0, stream>>>(
        items, n_items, static_cast<std::uint32_t>(first_chunked), pool, log2d, n, totals);
    launched("launch of leaf_counts (SpMV tiles)");
  }
  LeafTotals total{0, 0, 0, 0, 0};
  std::string phases;
  if (min_fill > 0) {
    // A test that may fail is read first: on a scattered standard-format
    // matrix (tens of millions of one-entry leaves) the sort and scans below
    // would cost milliseconds for a plan without tiles. It counts the
    // gathered entries at 32 to a unit, as run_tile takes them (at least: a
    // block's gathered entries share units only with those of the same
    // output block; so do the packed leaves at pack_leaves to a unit).
    cuda_check(cudaMemcpyAsync(&total, totals, sizeof(total), cudaMemcpyDeviceToHost, stream),
               "cudaMemcpyAsync(SpMV tile totals)");
    cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize(SpMV tile totals)");
    phases = "fill test " + std::to_string(ms(t0)) + ", ";
    if (total.entries <
        std::uint64_t{min_fill} * (total.units + (total.gathered + 31) / 32 + (total.packed + pack_leaves - 1) / pack_leaves))
      return false;
  }
  // The items without entries (a large or dense leaf's later chunks) sort
  // last and count for nothing in the leaf scans: those run over all items.
  if (n_items > 0) {
    block_keys<<<stride_grid(n_items), stride_threads, 0, stream>>>(items, n, n_items, by_col, blocks, keys, index, big,
                                                                    singles, smalls);
    launched("launch of block_keys (SpMV tiles)");
    std::size_t bytes = temp_bytes;
    cuda_check(cub::DeviceRadixSort::SortPairs(temp, bytes, keys, sorted_keys, index, order, n_items, 0, key_bits, stream),
               "cub::DeviceRadixSort::SortPairs (SpMV tiles)");
    leaf_units<<<stride_grid(n_items), stride_threads, 0, stream>>>(sorted_keys, order, n, n_items, leaf_n);
    launched("launch of leaf_units (SpMV tiles)");
    bytes = temp_bytes;
    cuda_check(cub::DeviceScan::ExclusiveScan(temp, bytes, leaf_n, leaf_at, AddLeafCounts{}, uint4{0, 0, 0, 0}, n_items,
                                              stream),
               "cub::DeviceScan::ExclusiveScan (SpMV leaf units)");
  }
  block_unit_counts<<<stride_grid(blocks + 1), stride_threads, 0, stream>>>(big, singles, smalls, blocks, block_counts);
  launched("launch of block_unit_counts (SpMV tiles)");
  {
    std::size_t bytes = temp_bytes;
    cuda_check(cub::DeviceScan::ExclusiveScan(temp, bytes, block_counts, block_starts, AddBlockCounts{}, BlockCounts{},
                                              blocks + 1, stream),
               "cub::DeviceScan::ExclusiveScan (SpMV block units)");
  }
  TileCut cut{block_counts, block_starts, blocks, tile_units, max_blocks, nullptr, nullptr, tile_start};
  cut_tiles<<<warp_grid(chunks + 1), stride_threads, 0, stream>>>(cut, chunks, counts, nullptr);
  launched("launch of cut_tiles (SpMV tiles, counts)");
  {
    std::size_t bytes = temp_bytes;
    cuda_check(cub::DeviceScan::ExclusiveScan(temp, bytes, counts, at, AddCounts{}, TileCounts{}, chunks + 1, stream),
               "cub::DeviceScan::ExclusiveScan (SpMV tile counts)");
  }
  TileCounts sizes{};
  BlockCounts end{};  // all units, all gathered entries, all packed leaves
  if (min_fill == 0)  // not read yet
    cuda_check(cudaMemcpyAsync(&total, totals, sizeof(total), cudaMemcpyDeviceToHost, stream),
               "cudaMemcpyAsync(SpMV tile totals)");
  cuda_check(cudaMemcpyAsync(&sizes, at + chunks, sizeof(sizes), cudaMemcpyDeviceToHost, stream),
             "cudaMemcpyAsync(SpMV tile counts)");
  cuda_check(cudaMemcpyAsync(&end, block_starts + blocks, sizeof(end), cudaMemcpyDeviceToHost, stream),
             "cudaMemcpyAsync(SpMV unit count)");
  cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize(SpMV tile counts)");
  phases += "counted " + std::to_string(ms(t0));
  if (total.units + total.gathered + total.packed >= (std::uint64_t{1} << 32))
    throw LimitError("spmv: the plan needs more than 2^32 units");
  if (sizes.tiles >= (1u << 31)) throw LimitError("spmv: the plan needs more than 2^31 tiles");

  TilePlan<V> p;
  p.tile_count = sizes.tiles;
  p.split_tiles = sizes.split_tiles;
  p.split_blocks = sizes.groups;
  p.shared_split_blocks = sizes.groups - sizes.slots;  // a slot for each block split over thread blocks
  p.packed_leaves = end.smalls;
  const std::uint64_t n_tiles = std::uint64_t{sizes.tiles} + 1, n_sums = std::uint64_t{sizes.slots} << log2d;
  // Arrivals and sums first: one memset clears both.
  const std::size_t zeroed = Scratch::size_of(sizes.groups, sizeof(unsigned)) + Scratch::size_of(n_sums, sizeof(V));
  p.memory = ctx.allocate(zeroed + Scratch::size_of(n_tiles, sizeof(Tile)) + Scratch::size_of(end.units, sizeof(TileUnit)) +
                          Scratch::size_of(end.singles, sizeof(GatherEntry)) + Scratch::size_of(end.smalls, sizeof(TileUnit)) +
                          Scratch::size_of(sizes.groups, sizeof(SplitGroup)));
  Carve carve(p.memory);
  unsigned* arrivals = carve.take<unsigned>(sizes.groups);
  V* sums = carve.take<V>(n_sums);
  cut.tiles = carve.take<Tile>(n_tiles);
  TileUnit* units = carve.take<TileUnit>(end.units);
  GatherEntry* gathered = carve.take<GatherEntry>(end.singles);
  TileUnit* packed = carve.take<TileUnit>(end.smalls);
  cut.groups = carve.take<SplitGroup>(sizes.groups);
  p.parts = TileView<V>{cut.tiles, units, cut.groups, arrivals, sums, gathered, packed};
  cut_tiles<<<warp_grid(chunks + 1), stride_threads, 0, stream>>>(cut, chunks, nullptr, at);
  launched("launch of cut_tiles (SpMV tiles)");
  const BlockStarts starts{block_counts, block_starts};
  write_shared_units<<<stride_grid(blocks), stride_threads, 0, stream>>>(starts, tile_start, blocks, units);
  launched("launch of write_shared_units (SpMV tiles)");
  const auto leaves = static_cast<std::uint32_t>(total.leaves);  // the sorted items with entries come first
  if (leaves > 0) {
    write_units<V><<<stride_grid(leaves), stride_threads, 0, stream>>>(items, n, order, sorted_keys, leaf_at, starts,
                                                                       pool, tile_start, leaves, by_col, log2d, units,
                                                                       gathered, packed);
    launched("launch of write_units (SpMV tiles)");
  }
  cuda_check(cudaMemsetAsync(p.memory.get(), 0, zeroed, stream), "cudaMemsetAsync(SpMV tile arrivals and sums)");
  // No synchronisation: the scratch goes back in stream order (or through a
  // cudaFree, which waits), and the calls run after the writes on the stream.
  out = std::move(p);
  if (runtime::log::enabled(runtime::log::Level::debug))
    runtime::log::debug("spmv tiles of " + std::string(by_col ? "A^T" : "A") + " (" + std::to_string(count) +
                        " leaf items), ms since start: " + phases + ", written " + std::to_string(ms(t0)));
  return true;
}

}  // namespace hisparse::ops::spmv_gpu
