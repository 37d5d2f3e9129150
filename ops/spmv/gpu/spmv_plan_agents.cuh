#pragma once
// Agents of the cached SpMV plan (their kernels: spmv_plan_kernels.cuh): riders of large leaves,
// SpMV^T of wide nodes, and SpMV of wide nodes by row windows (at the end).
//
// Riders. A small leaf (<= 32 entries) adds its products into y with global
// atomics, one per output it touches; where a line crosses many block rows
// (the circuit's dense columns in A, its dense rows in A^T) every entry is a
// different output, one scattered atomic each (2 M on the circuit family).
// When the leaf's output block is also a large leaf's, the large leaf's warp
// already holds that block's d outputs in shared memory and adds them into y
// once: the plan hands it the small leaves of its output block as riders
// (spmv_plan_riders.cuh decides which), so their products ride along in that
// flush. A block with more than rider_max small leaves (a long line along
// the output) keeps them in the small bin, where the warp merge collapses
// them, so that no warp is left alone with a long line (perf-log 9).
//
// Wide nodes in SpMV^T. A wide (COOW) node's entries are row-major, so SpMV
// sums a row's products in registers, while in SpMV^T neighbouring entries
// have different outputs (columns): a warp chunk (leaf_coow) can merge almost
// none of them and adds one global atomic per entry (16 M for R-MAT scale
// 20). A power-law node has as many column runs as row runs (R-MAT: 5.76 M
// distinct (node, row) and (node, column) pairs), so SpMV^T can do with as
// few atomics as SpMV if it meets a column's entries together:
// - wide_columns_ordered (the default): the plan keeps each chunk's
//   (spmv_wide_chunk_entries) positions in column order (spmv_plan_wide_order.cuh); products
//   go to shared memory in stored order and come back in column order, and
//   column runs are summed in registers and by the warp merge. No shared
//   atomics (a float or double shared add is a compare-and-swap loop on
//   sm_90) and no accumulator that grows with d^2 (perf-log 17).
// - wide_columns (SpmvOptions::wide_column_order = false, no plan memory): a
//   chunk is summed into a shared accumulator of the node's d^2 columns,
//   then only the touched ones are added into y, at the price of a shared
//   compare-and-swap loop per entry (perf-log 11, 14-16).
#include <cuda_runtime.h>

#include <cstdint>

#include "spmv_procedures.cuh"

namespace hisparse::ops::spmv_gpu {

inline constexpr std::uint32_t rider_max = 16;      // small leaves per large leaf, at most
inline constexpr std::uint32_t no_owner = ~0u;
// Per output block and orientation: the large-bin item that takes the
// block's riders (no_owner: none) and where they lie in the rider list.
struct RiderRange {
  std::uint32_t owner;
  std::uint32_t first;
  std::uint32_t count;
  std::uint32_t unused;
};
static_assert(sizeof(RiderRange) == 16, "one 16-byte load per large item");

// A rider's products into `acc` (its output block's d outputs), lane `lane8`
// of the 8 that share it: a small leaf has at most 32 entries, so one quad
// (COO4) or four single entries (COO2) per lane. One shared add per entry, no
// run merging: this code shares run_plan's 32 registers, and the riders that
// the plan picks cross the output (their outputs are distinct).
template <class V>
__device__ inline void rider_accumulate(const NodeItem& r, std::uint32_t lane8, const SpmvState<V>& st, V* acc) {
  if (ref_type(r.ref) == NodeType::coo4) {
    coo4_to_acc(r, 0, small_leaf_max, lane8, 8, st, acc);
    return;
  }
  const std::uint64_t in_base = (st.transposed ? r.brow : r.bcol) << st.log2d;
  const CooView<V> v = coo_view<V>(st.pool, r.ref);
  for (std::uint32_t i = lane8; i < v.count; i += 8) {
    const LocalCoord c = v.coords[i];
    atomicAdd(acc + (st.transposed ? c.col : c.row), v.values[i] * st.x[in_base | (st.transposed ? c.row : c.col)]);
  }
}

// The riders of a large item's output block, four at a time across the warp.
template <class V>
__device__ inline void riders_accumulate(const RiderRange& range, const NodeItem* riders, std::uint32_t lane,
                                         const SpmvState<V>& st, V* acc) {
  for (std::uint32_t k = lane / 8; k < range.count; k += 4) rider_accumulate(riders[range.first + k], lane % 8, st, acc);
}

// Reads and clears a shared accumulator slot in one native shared atomic
// (an exchange; float adds are compare-and-swap loops on sm_90).
__device__ inline float take(float* p) { return atomicExch(p, 0.f); }
__device__ inline double take(double* p) {
  return __longlong_as_double(static_cast<long long>(atomicExch(reinterpret_cast<unsigned long long*>(p), 0ull)));
}

// SpMV^T of one chunk of a wide (COOW) node (`level` holds the chunk index)
// by a whole block: thread `tid` of the block's threads adds its four
// entries' products into acc[column]; then each thread takes the sums of its
// own entries' columns (the first to reach a column gets it, the others 0)
// and adds them into y. A hypersparse node touches ~1 400 of its 16 384
// columns, so this costs less than scanning the whole accumulator per chunk
// (perf-log 16). `acc`: the node's d^2 columns, zeros on entry and on exit.
// Calls __syncthreads.
template <class V>
__device__ inline void wide_columns(const NodeItem& it, std::uint32_t tid, const SpmvState<V>& st, V* acc) {
  static_assert(wide_block_chunk == 4 * wide_block_threads, "a thread takes one quad of a chunk");
  const CoowArrays<V> node = coow_arrays<V>(st.pool, it.ref);
  const std::uint32_t shift = 2 * st.log2d;
  const std::uint64_t row_base = it.brow << shift, col_base = it.bcol << shift;
  const std::uint32_t e = it.level * wide_block_chunk + 4 * tid;
  const std::uint32_t m = e < node.count ? min(4u, node.count - e) : 0u;
  std::uint32_t words[4] = {0, 0, 0, 0};
  if (m > 0) {
    V a[4];
    node.quad(e, words, a);
#pragma unroll
    for (std::uint32_t j = 0; j < 4; ++j)
      if (j < m) atomicAdd(acc + (words[j] >> 16), a[j] * st.x[row_base | (words[j] & 0xFFFFu)]);
  }
  __syncthreads();
#pragma unroll
  for (std::uint32_t j = 0; j < 4; ++j) {
    if (j < m) {
      const std::uint32_t col = words[j] >> 16;
      const V v = take(acc + col);
      if (v != V(0)) add_to_y(st.y + (col_base | col), st.k * v);
    }
  }
  __syncthreads();
}

// The plan's column order of wide nodes (spmv_plan_wide_order.cuh), for
// the agent below.
struct WideOrderView {
  const std::uint64_t* first;  // per chunk item: its first position in `order`
  const std::uint16_t* order;
};

// The shared memory of wide_columns_ordered: each entry's product and its
// column inside the node, in stored order (a thread's four side by side,
// written with one vector store each).
template <class V>
struct alignas(16) WideOrderShared {
  V product[wide_block_chunk];
  std::uint16_t col[wide_block_chunk];
};

// SpMV^T of one whole-block chunk of a wide node (`level` holds the chunk
// index; `item` is its index in the plan's list), thread `tid` of
// wide_block_threads; one chunk per block, so `sh` is written once. Calls
// __syncthreads.
template <class V>
__device__ inline void wide_columns_ordered(const NodeItem& it, std::uint32_t tid, const SpmvState<V>& st,
                                            const WideOrderView& w, std::uint64_t item, WideOrderShared<V>& sh) {
  const CoowArrays<V> node = coow_arrays<V>(st.pool, it.ref);
  const std::uint32_t shift = 2 * st.log2d;
  const std::uint64_t row_base = it.brow << shift, col_base = it.bcol << shift;
  const std::uint32_t begin = it.level * wide_block_chunk;
  const std::uint32_t n = min(wide_block_chunk, node.count - begin);
  const std::uint32_t p = 4 * tid;
  // Stored (row-major) order: the quad loads are coalesced and a row's x is
  // read by neighbouring lanes together.
  if (p < n) {
    std::uint32_t words[4];
    V a[4];
    node.quad(begin + p, words, a);
    V prod[4];
#pragma unroll
    for (std::uint32_t j = 0; j < 4; ++j) prod[j] = p + j < n ? a[j] * st.x[row_base | (words[j] & 0xFFFFu)] : V(0);
    store4(sh.product + p, prod);
    *reinterpret_cast<uint2*>(sh.col + p) = uint2{(words[0] >> 16) | (words[1] & 0xFFFF0000u),
                                                  (words[2] >> 16) | (words[3] & 0xFFFF0000u)};
  }
  __syncthreads();
  // Each chunk's positions are padded to a multiple of 4: one 8-byte load.
  OutputRun<V> run;
  if (p < n) {
    const uint2 q = *reinterpret_cast<const uint2*>(w.order + w.first[item] + p);
    const std::uint32_t pos[4] = {q.x & 0xFFFFu, q.x >> 16, q.y & 0xFFFFu, q.y >> 16};
#pragma unroll
    for (std::uint32_t j = 0; j < 4; ++j)
      if (p + j < n) run.add_product(st, col_base | sh.col[pos[j]], sh.product[pos[j]]);
  }
  warp_segmented_add(st.y, run.out, st.k * run.sum, p < n);
}

// SpMV of wide nodes by row windows (plan: spmv_plan_wide_rows.cuh, which
// says why). A window's accumulators: 4096 rows in f32, 2048 in f64 (fewer
// when a wide node spans fewer rows, d^2).
inline constexpr std::uint32_t wide_window_bytes = 16 * 1024;
inline constexpr std::uint32_t wide_rows_threads = 256;
inline constexpr std::uint32_t wide_unit_pieces = 256;  // pieces per unit, at most
inline constexpr std::uint64_t wide_pieces_per_chunk_max = 4;  // more on average: no row windows

// The entries [lo, hi) of one wide node whose rows lie in one window.
struct WidePiece {
  std::uint64_t bcol;  // the node's block column, in d^2 columns
  NodeRef ref;
  std::uint32_t lo, hi;
};
// A thread block's work: pieces [first, the next unit's first) of the window
// whose first row is `row`.
struct WideRowUnit {
  std::uint64_t row;
  std::uint64_t first;
};
static_assert(sizeof(WidePiece) == 24 && sizeof(WideRowUnit) == 16);

struct WideRowsView {
  const WidePiece* pieces;
  const WideRowUnit* units;  // one more than there are units: the last holds the end
  std::uint32_t log2w;       // rows per window, log2
};

template <class V>
__host__ __device__ constexpr std::uint32_t wide_window_log2(std::uint32_t log2d) {
  constexpr std::uint32_t most = sizeof(V) == 4 ? 12 : 11;
  static_assert((std::size_t{1} << most) * sizeof(V) == wide_window_bytes);
  return 2 * log2d < most ? 2 * log2d : most;
}

// One unit by a block of wide_rows_threads: warps take its pieces in turn,
// a lane four entries per step; a lane's run of equal rows (entries are
// row-major) is summed in a register and added into the window's
// accumulator once; then the block adds the touched rows into y. `acc`:
// 2^log2w values of shared memory. Calls __syncthreads.
template <class V>
__device__ inline void wide_rows_unit(const WideRowsView& v, std::uint64_t unit, std::uint32_t tid,
                                      const SpmvState<V>& st, V* acc) {
  const std::uint32_t window = 1u << v.log2w;
  for (std::uint32_t i = tid; i < window; i += wide_rows_threads) acc[i] = V(0);
  __syncthreads();
  const WideRowUnit u = v.units[unit];
  const std::uint64_t end = v.units[unit + 1].first;
  const std::uint32_t shift = 2 * st.log2d, lane = tid % 32;
  for (std::uint64_t i = u.first + tid / 32; i < end; i += wide_rows_threads / 32) {
    const WidePiece piece = v.pieces[i];
    const CoowArrays<V> node = coow_arrays<V>(st.pool, piece.ref);
    const std::uint64_t col_base = piece.bcol << shift;
    for (std::uint32_t e = (piece.lo & ~3u) + 4 * lane; e < piece.hi; e += 128) {
      std::uint32_t words[4];
      V a[4];
      node.quad_streamed(e, words, a);
      // f32: the four gathers of x first. Interleaved with the shared adds
      // (compare-and-swap loops), each waited for the previous add: four
      // round trips in a row, the kernel's top stall (perf-log 31). f64 ran
      // 10% slower so, at the old occupancy too (its L1 is 78% busy already),
      // and keeps the interleaved order.
      constexpr bool gather_first = sizeof(V) == 4;
      V p[4];
      if constexpr (gather_first) {
#pragma unroll
        for (std::uint32_t j = 0; j < 4; ++j)
          p[j] = e + j >= piece.lo && e + j < piece.hi ? a[j] * st.x[col_base | (words[j] >> 16)] : V(0);
      }
      std::uint32_t row = ~0u;
      V sum = V(0);
#pragma unroll
      for (std::uint32_t j = 0; j < 4; ++j) {
        if (e + j < piece.lo || e + j >= piece.hi) continue;
        const std::uint32_t r = words[j] & (window - 1u);
        if (r != row) {
          if (row != ~0u) atomicAdd(acc + row, sum);
          row = r;
          sum = V(0);
        }
        sum += gather_first ? p[j] : a[j] * st.x[col_base | (words[j] >> 16)];
      }
      if (row != ~0u) atomicAdd(acc + row, sum);
    }
  }
  __syncthreads();
  flush_outputs(acc, window, u.row, tid, wide_rows_threads, st);
}

}  // namespace hisparse::ops::spmv_gpu
