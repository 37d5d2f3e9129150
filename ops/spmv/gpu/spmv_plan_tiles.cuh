#pragma once
// Plan building: the output tiles of one orientation (spmv_tile_agent.cuh
// says what a tile is). From the recorded leaves of the standard bins:
// 1. on the device, each leaf's entry count (chunk items of large and dense
//    leaves after the first are dropped: a tile cuts leaves into units
//    itself);
// 2. on the host, the leaves grouped by output block (a counting sort that
//    keeps the traversal's order inside a block), each cut into units of at
//    most 128 entries, and the blocks grouped into tiles of at most
//    `tile_units` units and tile_max_outputs outputs; a block with more
//    units than that is split over several tiles;
// 3. the units, tiles and split groups uploaded.
// The host step is linear in the leaves and the output blocks.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "hisparse/formats/device_matrix.hpp"
#include "hisparse/runtime/log.hpp"
#include "spmv_tile_agent.cuh"

namespace hisparse::ops::spmv_gpu {

template <class V>
struct TilePlan {
  DeviceBytes tiles, units, groups, arrivals, sums;
  std::uint64_t tile_count = 0;
  std::uint64_t split_tiles = 0;
  // What a call reads beyond the pool: units and tiles (and per split
  // block a counter and d sums per slot).
  [[nodiscard]] std::uint64_t bytes() const {
    return tiles.size() + units.size() + groups.size() + arrivals.size() + sums.size();
  }
  [[nodiscard]] TileView<V> view() const {
    return {tiles.as<Tile>(), units.as<TileUnit>(), groups.as<SplitGroup>(), arrivals.as<unsigned>(), sums.as<V>()};
  }
};

namespace tile_detail {

// Entries (cells, for dense leaves) of each item of the standard bins, 0 for
// the second and later chunk items of a large or dense leaf.
__global__ void leaf_counts(const NodeItem* items, std::uint64_t count, std::uint64_t first_chunked,
                            const std::byte* pool, std::uint32_t log2d, std::uint32_t* out) {
  for (std::uint64_t i = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; i < count;
       i += std::uint64_t{gridDim.x} * blockDim.x) {
    const NodeItem it = items[i];
    std::uint32_t n = 0;
    if (i < first_chunked || it.level == 0)
      n = ref_type(it.ref) == NodeType::dense ? 1u << (2 * log2d)
                                              : *reinterpret_cast<const std::uint32_t*>(pool + ref_offset(it.ref));
    out[i] = n;
  }
}

// The units (warp steps) of a leaf of n entries or cells.
constexpr std::uint64_t units_of(std::uint32_t n) { return (n + tile_unit_entries - 1) / tile_unit_entries; }

template <class T>
DeviceBytes upload(const std::vector<T>& v, cudaStream_t stream) {
  DeviceBytes d(std::max<std::size_t>(v.size(), 1) * sizeof(T));
  if (!v.empty())
    cuda_check(cudaMemcpyAsync(d.get(), v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice, stream),
               "cudaMemcpyAsync(SpMV tiles)");
  return d;
}

}  // namespace tile_detail

// Where tiles can address everything: block indices and unit counts in 32
// bits (a matrix beyond that runs the traversal per call).
inline bool tiles_fit(std::uint64_t rows, std::uint64_t cols, std::uint32_t log2d) {
  return (std::max(rows, cols) >> log2d) < (std::uint64_t{1} << 31);
}

// The recorded items of the standard bins, back to back: [0, first_chunked)
// are whole leaves (COO1 and small), the rest large and dense items. Both
// orientations' plans from one download, unless the leaves fill their units
// with fewer than `min_fill` entries on average (then nothing is built and
// the result is false). Synchronizes `stream`.
template <class V>
bool plan_tiles(const std::byte* pool, const NodeItem* items, std::uint64_t count, std::uint64_t first_chunked,
                std::uint64_t rows, std::uint64_t cols, std::uint32_t log2d, std::uint32_t tile_units,
                std::uint32_t min_fill, cudaStream_t stream, TilePlan<V> (&out)[2]) {
  using namespace tile_detail;
  using clock = std::chrono::steady_clock;
  const auto ms = [](clock::time_point from) { return std::chrono::duration<double, std::milli>(clock::now() - from).count(); };
  const auto t0 = clock::now();
  std::string phases;
  std::vector<NodeItem> host_items(count);
  std::vector<std::uint32_t> n(count);
  if (count > 0) {
    DeviceBytes counts(count * sizeof(std::uint32_t));
    const auto grid = static_cast<unsigned>(std::clamp<std::uint64_t>((count + 255) / 256, 1, 4096));
    leaf_counts<<<grid, 256, 0, stream>>>(items, count, first_chunked, pool, log2d, counts.as<std::uint32_t>());
    cuda_check(cudaGetLastError(), "launch of leaf_counts (SpMV tiles)");
    cuda_check(cudaMemcpyAsync(n.data(), counts.get(), count * sizeof(std::uint32_t), cudaMemcpyDeviceToHost, stream),
               "cudaMemcpyAsync(SpMV leaf counts)");
    cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize(SpMV tiles)");
  }
  std::uint64_t entries = 0, unit_total = 0;
  for (const std::uint32_t k : n) {
    entries += k;
    unit_total += units_of(k);
  }
  phases += "counts " + std::to_string(ms(t0));
  if (entries < std::uint64_t{min_fill} * unit_total) return false;
  if (count > 0) {
    cuda_check(cudaMemcpyAsync(host_items.data(), items, count * sizeof(NodeItem), cudaMemcpyDeviceToHost, stream),
               "cudaMemcpyAsync(SpMV leaves)");
    cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize(SpMV leaves)");
  }
  phases += ", items " + std::to_string(ms(t0));
  const std::uint32_t d = 1u << log2d;
  for (int o = 0; o < 2; ++o) {
    const std::uint64_t extent = o == 0 ? rows : cols;
    const auto blocks = static_cast<std::uint32_t>((extent + d - 1) >> log2d);
    // Leaves by output block, stable (a counting sort).
    // A block's weight: its units, one warp step each whatever their size
    // (a circuit's dense line of one-entry leaves costs a step per entry).
    std::vector<std::uint32_t> first(std::uint64_t{blocks} + 1, 0);
    std::vector<std::uint64_t> block_units(blocks, 0);
    auto out_of = [&](const NodeItem& it) { return static_cast<std::uint32_t>(o == 0 ? it.brow : it.bcol); };
    for (std::uint64_t i = 0; i < count; ++i) {
      if (n[i] == 0) continue;
      const std::uint32_t block = out_of(host_items[i]);
      ++first[block + 1];
      block_units[block] += units_of(n[i]);
    }
    for (std::uint32_t b = 0; b < blocks; ++b) first[b + 1] += first[b];
    std::vector<std::uint64_t> order(first[blocks]);
    {
      std::vector<std::uint32_t> next(first.begin(), first.end() - 1);
      for (std::uint64_t i = 0; i < count; ++i)
        if (n[i] > 0) order[next[out_of(host_items[i])]++] = i;
    }
    phases += ", sorted " + std::to_string(ms(t0));
    // Units of a block's leaves, appended with their output block `out`
    // inside the tile.
    std::vector<TileUnit> units;
    units.reserve(std::accumulate(block_units.begin(), block_units.end(), std::uint64_t{0}));
    auto add_units = [&](std::uint32_t block, std::uint16_t out) {
      for (std::uint64_t k = first[block]; k < first[block + 1]; ++k) {
        const NodeItem& it = host_items[order[k]];
        const std::uint32_t cnt = n[order[k]];
        const NodeType type = ref_type(it.ref);
        const std::uint32_t value_offset = type == NodeType::dense ? dense_mask_bytes(log2d)
                                                                   : coo_layout(type, cnt, sizeof(V)).value_offset;
        const auto in_block = static_cast<std::uint32_t>(o == 0 ? it.bcol : it.brow);
        for (std::uint32_t s = 0; s * tile_unit_entries < cnt; ++s)
          units.push_back(TileUnit{it.ref, static_cast<std::uint16_t>(s), static_cast<std::uint16_t>(value_offset / 4),
                                   in_block, static_cast<std::uint16_t>(std::min(tile_unit_entries, cnt - s * tile_unit_entries)),
                                   out});
      }
    };
    std::vector<Tile> tiles;
    std::vector<SplitGroup> groups;
    std::uint32_t split_tiles = 0, slots = 0;
    const std::uint32_t max_blocks = std::max(1u, tile_max_outputs >> log2d);
    std::uint32_t b = 0;
    while (b < blocks) {
      if (block_units[b] > tile_units) {
        // A heavy block: its units cut evenly over `parts` tiles.
        const auto begin = static_cast<std::uint32_t>(units.size());
        add_units(b, 0);
        const auto unit_count = static_cast<std::uint32_t>(units.size()) - begin;
        const std::uint32_t parts = static_cast<std::uint32_t>(
            std::min<std::uint64_t>((block_units[b] + tile_units - 1) / tile_units, unit_count));
        groups.push_back(SplitGroup{parts, static_cast<std::uint32_t>(tiles.size()), slots, 0});
        slots += parts <= split_slots_max ? parts : 1;
        for (std::uint32_t p = 0; p < parts; ++p)
          tiles.push_back(Tile{begin + static_cast<std::uint32_t>(std::uint64_t{unit_count} * p / parts), b, 1,
                               static_cast<std::uint32_t>(groups.size() - 1)});
        split_tiles += parts;
        ++b;
        continue;
      }
      Tile t{static_cast<std::uint32_t>(units.size()), b, 0, no_split};
      std::uint64_t sum = 0;
      while (b < blocks && t.blocks < max_blocks && block_units[b] <= tile_units && sum + block_units[b] <= tile_units) {
        sum += block_units[b];
        add_units(b, static_cast<std::uint16_t>(t.blocks));
        ++t.blocks;
        ++b;
      }
      tiles.push_back(t);
    }
    if (units.size() >= (std::uint64_t{1} << 32) || tiles.size() >= (std::uint64_t{1} << 31))
      throw LimitError("spmv: the plan needs more than 2^32 units or 2^31 tiles");
    phases += ", built " + std::to_string(ms(t0));
    TilePlan<V>& p = out[o];
    p.tile_count = tiles.size();
    p.split_tiles = split_tiles;
    tiles.push_back(Tile{static_cast<std::uint32_t>(units.size()), 0, 0, no_split});
    p.tiles = upload(tiles, stream);
    p.units = upload(units, stream);
    p.groups = upload(groups, stream);
    p.arrivals = DeviceBytes(std::max<std::size_t>(groups.size(), 1) * sizeof(unsigned));
    cuda_check(cudaMemsetAsync(p.arrivals.get(), 0, p.arrivals.size(), stream), "cudaMemsetAsync(SpMV tile arrivals)");
    p.sums = DeviceBytes(std::max<std::size_t>(std::uint64_t{slots} << log2d, 1) * sizeof(V));
    cuda_check(cudaMemsetAsync(p.sums.get(), 0, p.sums.size(), stream), "cudaMemsetAsync(SpMV tile sums)");
    // The host vectors die on return: the uploads must be done.
    cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize(SpMV tiles)");
    phases += ", uploaded " + std::to_string(ms(t0));
  }
  if (runtime::log::enabled(runtime::log::Level::debug))
    runtime::log::debug("spmv tiles (" + std::to_string(count) + " leaf items), ms since start: " + phases);
  return true;
}

}  // namespace hisparse::ops::spmv_gpu
