#pragma once
// Plan building, second half: which small leaves ride with a large leaf
// (spmv_plan_agents.cuh says why), one answer per orientation, since A adds
// by block row and A^T by block column.
//
// On the device, once per plan: the small leaves per output block are
// counted, each output block's first large item (chunk 0 of a large leaf)
// becomes its owner, and a stable radix sort (CUB) puts the small leaves in
// the order [riders by output block][the others by output block]. The
// stable sort keeps a block's leaves in the traversal's order, so the small
// bin's warp merge still finds a long line's leaves side by side (better than
// the traversal's order for A^T, where a column's leaves were a parent's row
// apart).
#include <cub/device/device_radix_sort.cuh>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <limits>

#include "hisparse/formats/device_matrix.hpp"
#include "hisparse/ops/context.hpp"
#include "hisparse/ops/stride_grid.hpp"
#include "spmv_plan_agents.cuh"

namespace hisparse::ops::spmv_gpu {

struct RiderPlan {
  DeviceBytes items;   // the small leaves: riders grouped by output block, then the others
  DeviceBytes ranges;  // RiderRange per output block
  std::uint64_t riders = 0;         // leading items of `items` that ride
  std::uint64_t rider_entries = 0;  // their entries
};

namespace rider_detail {

__device__ inline std::uint64_t out_block(const NodeItem& it, bool by_col) { return by_col ? it.bcol : it.brow; }

__global__ void clear_ranges(RiderRange* ranges, std::uint64_t blocks) {
  for (std::uint64_t b = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; b < blocks;
       b += std::uint64_t{gridDim.x} * blockDim.x)
    ranges[b] = RiderRange{no_owner, 0, 0, 0};
}

__global__ void count_small(const NodeItem* small, std::uint32_t count, bool by_col, RiderRange* ranges) {
  for (std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += gridDim.x * blockDim.x)
    atomicAdd(&ranges[out_block(small[i], by_col)].count, 1u);
}

__global__ void mark_owners(const NodeItem* large, std::uint32_t count, bool by_col, RiderRange* ranges) {
  for (std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += gridDim.x * blockDim.x)
    if (large[i].level == 0) atomicMin(&ranges[out_block(large[i], by_col)].owner, i);
}

__device__ inline bool rides(const RiderRange& r) { return r.owner != no_owner && r.count <= rider_max; }

// Riders sort first: key = block; the others after them: blocks + block.
// riders[0]: how many ride, riders[1]: their entries.
__global__ void sort_keys(const NodeItem* small, std::uint32_t count, bool by_col, std::uint64_t blocks,
                          const RiderRange* ranges, const std::byte* pool, std::uint64_t* keys, std::uint32_t* index,
                          unsigned long long* riders) {
  for (std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += gridDim.x * blockDim.x) {
    const std::uint64_t b = out_block(small[i], by_col);
    const bool r = rides(ranges[b]);
    keys[i] = r ? b : blocks + b;
    index[i] = i;
    if (r) {
      atomicAdd(riders, 1ull);
      atomicAdd(riders + 1, static_cast<unsigned long long>(*reinterpret_cast<const std::uint32_t*>(pool + ref_offset(small[i].ref))));
    }
  }
}

// Blocks without riders get count 0 (owner no_owner): their large items
// then skip the rider step.
__global__ void settle_ranges(RiderRange* ranges, std::uint64_t blocks) {
  for (std::uint64_t b = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; b < blocks;
       b += std::uint64_t{gridDim.x} * blockDim.x)
    if (!rides(ranges[b])) ranges[b] = RiderRange{no_owner, 0, 0, 0};
}

__global__ void gather(const NodeItem* small, const std::uint64_t* keys, const std::uint32_t* order, std::uint32_t count,
                       std::uint64_t blocks, NodeItem* out, RiderRange* ranges) {
  for (std::uint32_t p = blockIdx.x * blockDim.x + threadIdx.x; p < count; p += gridDim.x * blockDim.x) {
    out[p] = small[order[p]];
    if (keys[p] < blocks && (p == 0 || keys[p - 1] != keys[p])) ranges[keys[p]].first = p;
  }
}

}  // namespace rider_detail

// The rider plan of one orientation (by_col: A^T) for `blocks` output
// blocks. Synchronizes the context's stream; memory from its allocator. Needs small_count and large_count below
// 2^32 (the caller checks).
inline RiderPlan plan_riders(const std::byte* pool, const NodeItem* small, std::uint64_t small_count,
                             const NodeItem* large, std::uint64_t large_count, bool by_col, std::uint64_t blocks,
                             const Context& ctx) {
  using namespace rider_detail;
  const cudaStream_t stream = ctx.stream();
  RiderPlan out;
  out.ranges = ctx.allocate(std::max<std::uint64_t>(blocks, 1) * sizeof(RiderRange));
  out.items = ctx.allocate(std::max<std::uint64_t>(small_count, 1) * sizeof(NodeItem));
  auto* ranges = out.ranges.as<RiderRange>();
  const auto n = static_cast<std::uint32_t>(small_count), m = static_cast<std::uint32_t>(large_count);
  clear_ranges<<<stride_grid(blocks), stride_threads, 0, stream>>>(ranges, blocks);
  cuda_check(cudaGetLastError(), "launch of clear_ranges (SpMV riders)");
  if (n == 0) return out;
  count_small<<<stride_grid(n), stride_threads, 0, stream>>>(small, n, by_col, ranges);
  cuda_check(cudaGetLastError(), "launch of count_small (SpMV riders)");
  if (m > 0) {
    mark_owners<<<stride_grid(m), stride_threads, 0, stream>>>(large, m, by_col, ranges);
    cuda_check(cudaGetLastError(), "launch of mark_owners (SpMV riders)");
  }
  DeviceBytes keys = ctx.allocate(n * sizeof(std::uint64_t)), sorted_keys = ctx.allocate(n * sizeof(std::uint64_t));
  DeviceBytes index = ctx.allocate(n * sizeof(std::uint32_t)), order = ctx.allocate(n * sizeof(std::uint32_t));
  DeviceBytes riders = ctx.allocate(2 * sizeof(unsigned long long));
  cuda_check(cudaMemsetAsync(riders.get(), 0, riders.size(), stream), "cudaMemsetAsync(rider count)");
  sort_keys<<<stride_grid(n), stride_threads, 0, stream>>>(small, n, by_col, blocks, ranges, pool, keys.as<std::uint64_t>(),
                                             index.as<std::uint32_t>(), riders.as<unsigned long long>());
  cuda_check(cudaGetLastError(), "launch of sort_keys (SpMV riders)");
  settle_ranges<<<stride_grid(blocks), stride_threads, 0, stream>>>(ranges, blocks);
  cuda_check(cudaGetLastError(), "launch of settle_ranges (SpMV riders)");
  const int end_bit = std::max(1, static_cast<int>(std::bit_width(2 * blocks)));
  std::size_t temp_bytes = 0;
  cuda_check(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, keys.as<std::uint64_t>(), sorted_keys.as<std::uint64_t>(),
                                             index.as<std::uint32_t>(), order.as<std::uint32_t>(), n, 0, end_bit, stream),
             "cub::DeviceRadixSort::SortPairs (size, SpMV riders)");
  DeviceBytes temp = ctx.allocate(std::max<std::size_t>(temp_bytes, 1));
  cuda_check(cub::DeviceRadixSort::SortPairs(temp.get(), temp_bytes, keys.as<std::uint64_t>(), sorted_keys.as<std::uint64_t>(),
                                             index.as<std::uint32_t>(), order.as<std::uint32_t>(), n, 0, end_bit, stream),
             "cub::DeviceRadixSort::SortPairs (SpMV riders)");
  gather<<<stride_grid(n), stride_threads, 0, stream>>>(small, sorted_keys.as<std::uint64_t>(), order.as<std::uint32_t>(), n, blocks,
                                          out.items.as<NodeItem>(), ranges);
  cuda_check(cudaGetLastError(), "launch of gather (SpMV riders)");
  unsigned long long rider_count[2] = {0, 0};
  cuda_check(cudaMemcpyAsync(rider_count, riders.get(), sizeof(rider_count), cudaMemcpyDeviceToHost, stream),
             "cudaMemcpyAsync(rider count)");
  // The temporaries are freed on return: finish with them first.
  cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize(SpMV riders)");
  out.riders = rider_count[0];
  out.rider_entries = rider_count[1];
  return out;
}

}  // namespace hisparse::ops::spmv_gpu
