#pragma once
// Kernel layer of the plan's launch (spmv_gpu.cu dispatches them): the leaf
// bins in one launch, the wide bin's warp chunks, the output tiles, and the
// wide nodes by row windows (A) or by column (A^T). Each wraps an agent
// (spmv_plan_agents.cuh, spmv_tile_agent.cuh, spmv_leaves.cuh); launch
// bounds and shared memory are chosen here, with the measurements behind them.
#include <cstddef>
#include <cstdint>

#include "spmv_plan_agents.cuh"
#include "spmv_plan_riders.cuh"
#include "spmv_plan_tiles.cuh"
#include "spmv_plan_wide_order.cuh"
#include "spmv_plan_wide_rows.cuh"
#include "spmv_procedures.cuh"

namespace hisparse::ops::spmv_gpu {

inline constexpr std::uint32_t plan_block = 256;

// The listed leaves of all bins in one launch: blocks [first[b], first[b+1])
// serve bin b, each taking plan_block / threads-per-leaf leaves. One per
// orientation: the small bin's list differs (riders split off).
struct PlanBins {
  const NodeItem* items[leaf_bin_count];
  std::uint64_t count[leaf_bin_count];
  std::uint64_t first_block[leaf_bin_count + 1];
};

// Each bin's first block in the launch, from the bins' item counts.
inline void assign_blocks(PlanBins& p) {
  std::uint64_t first = 0;
  for (std::uint32_t b = 0; b < leaf_bin_count; ++b) {
    p.first_block[b] = first;
    const std::uint32_t per_block = plan_block / leaf_threads_of(b);
    first += (p.count[b] + per_block - 1) / per_block;
  }
  p.first_block[leaf_bin_count] = first;
}

// The riders of one orientation (spmv_plan_riders.cuh). Apart from PlanBins:
// a larger PlanBins alone raised run_plan's f64 spills (ptxas).
struct PlanRiders {
  const RiderRange* ranges = nullptr;  // per output block; null: no riders
  const NodeItem* items = nullptr;
};

template <std::uint32_t Bin, bool Riders = false, class V>
__device__ void plan_bin(const PlanBins& p, std::uint64_t block, const SpmvState<V>& st, V* acc,
                         const PlanRiders& riders = {}) {
  constexpr std::uint32_t threads = leaf_threads<Bin>;
  constexpr std::uint32_t per_block = plan_block / threads;
  const std::uint64_t i = block * per_block + threadIdx.x / threads;
  const NodeItem* it = i < p.count[Bin] ? p.items[Bin] + i : nullptr;
  // The one-entry and small bins merge equal outputs across the warp, so all
  // lanes take part whether or not they have a leaf.
  if constexpr (Bin == bin_one || Bin == bin_small) {
    PendingAdd<V> pending;
    if constexpr (Bin == bin_one) pending = leaf_one_pending<V>(it, st);
    else if (it) leaf_coo<V>(*it, threadIdx.x % threads, threads, st, &pending);
    warp_segmented_add(st.y, pending.key, pending.val, pending.valid);  // one call site: the whole warp
  } else if constexpr (Bin == bin_large && Riders) {
    if (!it) return;
    const std::uint32_t lane = threadIdx.x % 32;
    large_chunk_to_acc(*it, lane, st, acc);
    if (it->level == 0) {
      const RiderRange r = riders.ranges[st.transposed ? it->bcol : it->brow];
      if (r.owner == i) riders_accumulate(r, riders.items, lane, st, acc);
    }
    flush_large(*it, lane, st, acc);
  } else if (it) {
    run_leaf<V>(Bin, *it, threadIdx.x % threads, threads, st, acc);
  }
}

// The node bins (COO1, small, large, dense) in one launch. Its register
// count sets the occupancy of the whole memory-bound sweep: 32 registers give
// 8 blocks of 256 per multiprocessor; the wide bin has a launch of its own
// so that its code does not raise that count (docs/perf-log.md). With
// Riders the large bin also sums its output block's riders: an instance of
// its own, because that code spills under the same bound and slowed the
// stencils (which have no riders) by 5-10% (perf-log 13).
template <class V, bool Riders>
__global__ void __launch_bounds__(plan_block, sizeof(V) == 4 ? 8 : 7) run_plan(PlanBins p, SpmvState<V> st, PlanRiders riders) {
  // d accumulators per warp for the large bin, zero on entry (see leaf_coo_warp).
  extern __shared__ __align__(16) unsigned char plan_shared[];
  V* acc = reinterpret_cast<V*>(plan_shared) + (threadIdx.x / 32) * (1u << st.log2d);
  const std::uint64_t b = blockIdx.x;
  if (b >= p.first_block[2] && b < p.first_block[3]) {
    for (std::uint32_t i = threadIdx.x % 32; i < (1u << st.log2d); i += 32) acc[i] = V(0);
    __syncwarp();
  }
  if (b < p.first_block[1]) plan_bin<bin_one>(p, b, st, acc);
  else if (b < p.first_block[2]) plan_bin<bin_small>(p, b - p.first_block[1], st, acc);
  else if (b < p.first_block[3]) plan_bin<bin_large, Riders>(p, b - p.first_block[2], st, acc, riders);
  else plan_bin<bin_dense>(p, b - p.first_block[3], st, acc);
}

// The chunks of wide (COOW) nodes.
template <class V>
__global__ void __launch_bounds__(plan_block, 8) run_plan_wide(PlanBins p, SpmvState<V> st) {
  plan_bin<bin_wide>(p, blockIdx.x, st, static_cast<V*>(nullptr));
}

// The standard leaves by output tiles (spmv_tile_agent.cuh): writes every
// output of y once, beta included. One instance per orientation: with the
// orientation known at compile time the f32 kernel fits 32 registers without
// spilling, and A's runs in COO4 leaves of more than 32 entries take the path
// with few atomics (perf-log 20). f64 runs 6 blocks an SM of 40 registers
// (its SpMV still spills 8 bytes there): at 8 its SpMV^T spilled (6 were
// 7-12% faster, perf-log 25), and with pack units its SpMV spilled 56 bytes
// and lost 18-20% on the Laplacian and the stencil (perf-log 26; the pack
// code's segmented scan makes 32 of those bytes, ptxas).
template <class V, bool Transposed>
inline constexpr int tile_blocks_per_sm = sizeof(V) == 8 ? 6 : 8;
template <class V, bool Transposed>
__global__ void __launch_bounds__(tile_threads, tile_blocks_per_sm<V, Transposed>)
    run_tiles(TileView<V> tv, std::uint64_t tiles, SpmvState<V> st, V beta) {
  __shared__ __align__(16) TileShared<V> sh;
  if (threadIdx.x < tile_warps) sh.arrivals[threadIdx.x] = 0;
  __syncthreads();
  const std::uint32_t w = threadIdx.x / 32;
  const std::uint64_t t = std::uint64_t{blockIdx.x} * tile_warps + w;
  if (t < tiles) run_tile<V, Transposed>(tv, static_cast<std::uint32_t>(t), w, threadIdx.x % 32, st, beta, sh);
}

// SpMV of wide nodes by row windows: one unit a block (spmv_plan_wide_rows.cuh).
template <class V>
__global__ void __launch_bounds__(wide_rows_threads) run_plan_wide_rows(WideRowsView rows, SpmvState<V> st) {
  __shared__ __align__(16) V acc[wide_window_bytes / sizeof(V)];
  wide_rows_unit(rows, blockIdx.x, threadIdx.x, st, acc);
}

// SpMV^T of wide nodes: whole-block chunks summed per column in shared memory
// (the node's d^2 columns); a block loops over chunks so that it clears its
// accumulator once.
template <class V>
__global__ void __launch_bounds__(wide_block_threads) run_plan_wide_columns(const NodeItem* items, std::uint64_t count,
                                                                            SpmvState<V> st) {
  extern __shared__ __align__(16) unsigned char wide_shared[];
  V* acc = reinterpret_cast<V*>(wide_shared);
  for (std::uint32_t i = threadIdx.x; i < (1u << (2 * st.log2d)); i += blockDim.x) acc[i] = V(0);
  __syncthreads();
  for (std::uint64_t i = blockIdx.x; i < count; i += gridDim.x) wide_columns(items[i], threadIdx.x, st, acc);
}

// SpMV^T of wide nodes in the plan's column order: one block per whole-block
// chunk (spmv_plan_wide_order.cuh).
template <class V>
__global__ void __launch_bounds__(wide_block_threads) run_plan_wide_ordered(const NodeItem* items, SpmvState<V> st,
                                                                            WideOrderView order) {
  __shared__ WideOrderShared<V> sh;
  wide_columns_ordered(items[blockIdx.x], threadIdx.x, st, order, blockIdx.x, sh);
}

// The most shared memory the wide-columns accumulator may take: chosen when a
// block had 1024 threads (two blocks per SM); with 256-thread blocks since
// perf-log 28 it allows three (24 warps), not measured since. f64 with
// d = 128 (128 KiB, one block per SM) measured slower than the warp chunks
// (perf-log 9) and keeps them, as does d = 256.
inline constexpr std::size_t wide_columns_max_bytes = 64 * 1024;

}  // namespace hisparse::ops::spmv_gpu
