#pragma once
// Plan building: A's leaves listed into the plan's lists (the leaf bins of
// spmv_procedures.cuh, then the wide nodes in whole-block chunks), by a walk
// down the tree a level at a time:
// 1. per level, a warp per node (several per node on a level of few nodes)
//    counts its children, a scan places them and the same warps write them
//    (hisparse/ops/node_walk.cuh); a wide node goes down unchanged, so the
//    last level holds the leaves and wide nodes in tree order;
// 2. per list, a thread per leaf counts its items there (a large leaf's
//    chunks of large_chunk entries, a dense leaf's dense_chunks, a wide
//    node's chunks of either size), a scan places them, and they are written.
// Every list keeps tree order, so leaves of one block row stay adjacent (the
// leaf bins' warp merge combines their outputs; the tiles sort by output
// block stably).
//
// Why not the runtime: a plan only lists leaves, and each level's size is
// known after a scan. Two runtime traversals (one counting, one recording
// with atomics per warp) and the runtime's set-up were about 2 of a
// Laplacian 4096^2's 3.3 ms plan build (perf-log R6). The runtime stays the
// engine of calls without a plan, which multiply the leaves as they find them.
#include <cub/device/device_scan.cuh>

#include <algorithm>
#include <cstdint>

#include "hisparse/formats/device_matrix.hpp"
#include "hisparse/ops/context.hpp"
#include "hisparse/ops/node_walk.cuh"
#include "hisparse/ops/stride_grid.hpp"
#include "spmv_procedures.cuh"

namespace hisparse::ops::spmv_gpu {

// The lists back to back, in list order (LeafBin, then list_wide_blocks).
struct LeafLists {
  DeviceBytes items;
  std::uint64_t count[plan_list_count]{};
  [[nodiscard]] NodeItem* list(std::uint32_t l) const {
    std::uint64_t at = 0;
    for (std::uint32_t k = 0; k < l; ++k) at += count[k];
    return items.as<NodeItem>() + at;
  }
};

namespace leaf_walk {

using u32 = std::uint32_t;
using u64 = std::uint64_t;

__device__ inline u64 first_warp() { return (blockIdx.x * u64{blockDim.x} + threadIdx.x) / 32; }
__device__ inline u64 warp_stride() { return u64{gridDim.x} * blockDim.x / 32; }

// Children of each frontier node (1 for a wide node, passed down), per warp
// of the level's split (gpu::NodeSplit); count[warps] = 0, so that the
// exclusive scan's last element is the next level's size.
__global__ void __launch_bounds__(stride_threads) walk_counts(const NodeItem* f, u64 n, gpu::NodeSplit split,
                                                            const std::byte* pool, u32 log2d, u64* count) {
  const u32 lane = threadIdx.x & 31;
  const u64 warps = split.warps(n);
  for (u64 w = first_warp(); w <= warps; w += warp_stride()) {
    u32 c = 0;
    if (w < warps) {
      const NodeRef r = f[w / split.per_node].ref;
      const u32 begin = split.begin(w);
      c = ref_type(r) == NodeType::coow ? u32{begin == 0}
                                        : gpu::warp_child_count(pool, r, log2d, lane, begin, split.length);
    }
    if (lane == 0) count[w] = c;
  }
}

__global__ void __launch_bounds__(stride_threads) walk_expand(const NodeItem* f, u64 n, gpu::NodeSplit split,
                                                            const std::byte* pool, u32 log2d, const u64* first,
                                                            NodeItem* next) {
  const u32 lane = threadIdx.x & 31;
  const u64 warps = split.warps(n);
  for (u64 w = first_warp(); w < warps; w += warp_stride()) {
    const NodeItem it = f[w / split.per_node];
    const u64 o = first[w];
    const u32 begin = split.begin(w);
    if (ref_type(it.ref) == NodeType::coow) {
      if (lane == 0 && begin == 0) next[o] = it;
      continue;
    }
    gpu::warp_for_each_child(
        pool, it.ref, log2d, lane,
        [&](u32 i, NodeRef c, u32 row, u32 col) {
          next[o + i] = NodeItem{(it.brow << log2d) | row, (it.bcol << log2d) | col, c, it.level + 1};
        },
        begin, split.length);
  }
}

// The list a leaf (or wide node) goes to first; a wide node also goes to
// list_wide_blocks.
__device__ inline u32 list_of(const std::byte* pool, NodeRef r) {
  return ref_type(r) == NodeType::coow ? u32{bin_wide} : leaf_bin(pool, r);
}

// The items of leaf `r` in list `l` (0 where it has none).
__device__ inline u32 items_in(const std::byte* pool, NodeRef r, u32 l, u32 log2d, u32 large_chunk) {
  if (ref_type(r) == NodeType::coow) {
    if (l == list_wide_blocks) return coow_chunks(pool, r, wide_block_chunk);
    return l == bin_wide ? coow_chunks(pool, r) : 0u;
  }
  if (l >= bin_wide || leaf_bin(pool, r) != l) return 0;
  if (l == bin_dense) return dense_chunks(log2d);
  if (l == bin_large) return (*reinterpret_cast<const u32*>(pool + ref_offset(r)) + large_chunk - 1) / large_chunk;
  return 1;
}

// Items per list over all leaves (totals zeroed first): warp sums, one
// shared add per warp and list, one global add per block and list.
__global__ void __launch_bounds__(stride_threads) list_totals(const NodeItem* leaves, u64 n, const std::byte* pool,
                                                            u32 log2d, u32 large_chunk, unsigned long long* totals) {
  __shared__ unsigned long long t[plan_list_count];
  if (threadIdx.x < plan_list_count) t[threadIdx.x] = 0;
  __syncthreads();
  const u32 lane = threadIdx.x & 31;
  for (u64 base = first_warp() * 32; base < n; base += warp_stride() * 32) {
    const u64 i = base + lane;
    u32 list = plan_list_count, items = 0, blocks = 0;
    if (i < n) {
      const NodeRef r = leaves[i].ref;
      list = list_of(pool, r);
      items = items_in(pool, r, list, log2d, large_chunk);
      if (list == bin_wide) blocks = items_in(pool, r, list_wide_blocks, log2d, large_chunk);
    }
    for (u32 l = 0; l < leaf_bin_count; ++l) {
      const u32 s = __reduce_add_sync(~0u, list == l ? items : 0u);
      if (lane == 0 && s != 0) atomicAdd(&t[l], static_cast<unsigned long long>(s));
    }
    const u32 s = __reduce_add_sync(~0u, blocks);
    if (lane == 0 && s != 0) atomicAdd(&t[list_wide_blocks], static_cast<unsigned long long>(s));
  }
  __syncthreads();
  if (threadIdx.x < plan_list_count && t[threadIdx.x] != 0) atomicAdd(totals + threadIdx.x, t[threadIdx.x]);
}

__global__ void list_counts(const NodeItem* leaves, u64 n, const std::byte* pool, u32 l, u32 log2d, u32 large_chunk,
                            u64* count) {
  for (u64 i = blockIdx.x * u64{blockDim.x} + threadIdx.x; i < n; i += u64{gridDim.x} * blockDim.x)
    count[i] = items_in(pool, leaves[i].ref, l, log2d, large_chunk);
}

// A leaf's items in list `l` from `first[i]` on: its block coordinates and
// reference, the chunk index in `level`. A thread per leaf writes the
// standard bins (a dense leaf's dense_chunks items, 16 at d = 128; a large
// leaf's chunks, few on large matrices, whose large_chunk is large).
__global__ void write_list(const NodeItem* leaves, u64 n, const std::byte* pool, u32 l, u32 log2d, u32 large_chunk,
                           const u64* first, NodeItem* out) {
  for (u64 i = blockIdx.x * u64{blockDim.x} + threadIdx.x; i < n; i += u64{gridDim.x} * blockDim.x) {
    const NodeItem it = leaves[i];
    const u32 c = items_in(pool, it.ref, l, log2d, large_chunk);
    for (u32 k = 0; k < c; ++k) out[first[i] + k] = NodeItem{it.brow, it.bcol, it.ref, k};
  }
}

// The same by a warp per leaf, for the wide lists: a power-law matrix's
// heaviest wide node has thousands of chunks, which one thread wrote alone.
__global__ void __launch_bounds__(stride_threads) write_wide_list(const NodeItem* leaves, u64 n, const std::byte* pool,
                                                                u32 l, const u64* first, NodeItem* out) {
  const u32 lane = threadIdx.x & 31;
  for (u64 i = first_warp(); i < n; i += warp_stride()) {
    const NodeItem it = leaves[i];
    const u32 c = items_in(pool, it.ref, l, 0, 1);  // wide lists: log2d and large_chunk unused
    for (u32 k = lane; k < c; k += 32) out[first[i] + k] = NodeItem{it.brow, it.bcol, it.ref, k};
  }
}

// In-place exclusive sum of `n` counts (CUB's scan takes d_in == d_out).
inline void exclusive_sum_in_place(u64* v, u64 n, const Context& ctx, const char* what) {
  std::size_t bytes = 0;
  cuda_check(cub::DeviceScan::ExclusiveSum(nullptr, bytes, v, v, n, ctx.stream()), what);
  DeviceBytes temp = ctx.allocate_work(std::max<std::size_t>(bytes, 1));
  cuda_check(cub::DeviceScan::ExclusiveSum(temp.get(), bytes, v, v, n, ctx.stream()), what);
}

template <class T>
T read_back(const T* at, const Context& ctx, const char* what) {
  T v{};
  cuda_check(cudaMemcpyAsync(&v, at, sizeof(T), cudaMemcpyDeviceToHost, ctx.stream()), what);
  cuda_check(cudaStreamSynchronize(ctx.stream()), what);
  return v;
}

}  // namespace leaf_walk

// A's leaves in the plan's lists (the items from the context's allocator,
// the walk's work memory from allocate_work). Synchronizes the stream once
// per level and once for the totals.
inline LeafLists list_leaves(const std::byte* pool, NodeRef root, std::uint32_t log2d, std::uint32_t depth,
                             std::uint32_t large_chunk, const Context& ctx) {
  using namespace leaf_walk;
  const cudaStream_t stream = ctx.stream();
  LeafLists out;
  if (root == null_ref) {
    out.items = ctx.allocate(sizeof(NodeItem));
    return out;
  }
  DeviceBytes frontier = ctx.allocate_work(sizeof(NodeItem));
  const NodeItem top{0, 0, root, 0};
  cuda_check(cudaMemcpyAsync(frontier.get(), &top, sizeof(top), cudaMemcpyHostToDevice, stream), "cudaMemcpyAsync(SpMV plan root)");
  u64 n = 1;
  // Leaves sit at level depth - 1, wide nodes at depth - 2 (passed down).
  for (std::uint32_t level = 0; level + 1 < depth && n > 0; ++level) {
    const gpu::NodeSplit split = gpu::node_split(n, log2d);
    const u64 warps = split.warps(n);
    DeviceBytes first = ctx.allocate_work((warps + 1) * sizeof(u64));
    walk_counts<<<warp_grid(warps + 1), stride_threads, 0, stream>>>(frontier.as<NodeItem>(), n, split, pool, log2d,
                                                                   first.as<u64>());
    cuda_check(cudaGetLastError(), "launch of walk_counts (SpMV plan)");
    exclusive_sum_in_place(first.as<u64>(), warps + 1, ctx, "cub::DeviceScan::ExclusiveSum (SpMV plan walk)");
    const u64 next_n = read_back(first.as<u64>() + warps, ctx, "SpMV plan walk: level size");
    DeviceBytes next = ctx.allocate_work(std::max<u64>(next_n, 1) * sizeof(NodeItem));
    walk_expand<<<warp_grid(warps), stride_threads, 0, stream>>>(frontier.as<NodeItem>(), n, split, pool, log2d,
                                                               first.as<u64>(), next.as<NodeItem>());
    cuda_check(cudaGetLastError(), "launch of walk_expand (SpMV plan)");
    frontier = std::move(next);
    n = next_n;
  }
  DeviceBytes totals = ctx.allocate_work(plan_list_count * sizeof(unsigned long long));
  cuda_check(cudaMemsetAsync(totals.get(), 0, totals.size(), stream), "cudaMemsetAsync(SpMV plan list totals)");
  if (n > 0) {
    list_totals<<<warp_grid(n / 32 + 1), stride_threads, 0, stream>>>(frontier.as<NodeItem>(), n, pool, log2d, large_chunk,
                                                                     totals.as<unsigned long long>());
    cuda_check(cudaGetLastError(), "launch of list_totals (SpMV plan)");
  }
  cuda_check(cudaMemcpyAsync(out.count, totals.get(), sizeof(out.count), cudaMemcpyDeviceToHost, stream),
             "cudaMemcpyAsync(SpMV plan list totals)");
  cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize(SpMV plan list totals)");
  u64 total = 0;
  for (u64 c : out.count) total += c;
  out.items = ctx.allocate(std::max<u64>(total, 1) * sizeof(NodeItem));
  DeviceBytes first = ctx.allocate_work(std::max<u64>(n, 1) * sizeof(u64));
  for (std::uint32_t l = 0; l < plan_list_count; ++l) {
    if (out.count[l] == 0) continue;
    list_counts<<<stride_grid(n), stride_threads, 0, stream>>>(frontier.as<NodeItem>(), n, pool, l, log2d, large_chunk,
                                                               first.as<u64>());
    cuda_check(cudaGetLastError(), "launch of list_counts (SpMV plan)");
    exclusive_sum_in_place(first.as<u64>(), n, ctx, "cub::DeviceScan::ExclusiveSum (SpMV plan lists)");
    if (l >= bin_wide) {
      write_wide_list<<<warp_grid(n), stride_threads, 0, stream>>>(frontier.as<NodeItem>(), n, pool, l, first.as<u64>(),
                                                                 out.list(l));
      cuda_check(cudaGetLastError(), "launch of write_wide_list (SpMV plan)");
    } else {
      write_list<<<stride_grid(n), stride_threads, 0, stream>>>(frontier.as<NodeItem>(), n, pool, l, log2d, large_chunk,
                                                                first.as<u64>(), out.list(l));
      cuda_check(cudaGetLastError(), "launch of write_list (SpMV plan)");
    }
  }
  return out;
}

}  // namespace hisparse::ops::spmv_gpu
