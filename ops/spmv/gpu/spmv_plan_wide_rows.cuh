#pragma once
// Plan building, fourth part: SpMV (A, not A^T) of wide (COOW) nodes by row
// windows, which run_plan_wide_rows reads (its agent: wide_rows_unit,
// spmv_plan_agents.cuh).
//
// Why: summed chunk by chunk (leaf_coow), every product of a power-law
// matrix reaches y through an L2 atomic (a row has about one entry per wide
// node): 57 M atomic sectors for R-MAT 2^22's 65 M entries, as many L2
// operations as all of its reads (perf-log 29). Here a thread block owns a
// window of 2^log2w consecutive rows of one wide block row (its
// accumulators, wide_window_bytes of shared memory) and takes, across every
// wide node of that block row, the entries whose rows fall in the window:
// each node's entries are row-major, so those are one range [lo, hi) per
// node, a *piece*. Products meet in shared memory and reach y once per row
// and unit. A window with many pieces is cut into units of at most
// wide_unit_pieces pieces (one thread block each), which add into y.
//
// The plan keeps the pieces (24 bytes each: one or two per 128-entry chunk
// on R-MAT) and the units (16 bytes each), in window order, pieces of a
// window by block column (x is read in column order within a unit); or
// nothing where the pieces would average fewer than
// 128 / wide_pieces_per_chunk_max entries (sparse wide nodes: up to one
// piece per entry), and SpMV then runs the warp chunks.
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cuda/functional>

#include "hisparse/formats/device_matrix.hpp"
#include "hisparse/ops/context.hpp"
#include "hisparse/ops/stride_grid.hpp"
#include "spmv_plan_agents.cuh"
#include "spmv_plan_leaves.cuh"

namespace hisparse::ops::spmv_gpu {

struct WideRows {
  DeviceBytes pieces, units;
  std::uint64_t piece_count = 0, unit_count = 0;
  std::uint32_t log2w = 0;
  [[nodiscard]] std::uint64_t bytes() const { return pieces.size() + units.size(); }
  [[nodiscard]] WideRowsView view() const {
    return {pieces.as<WidePiece>(), units.as<WideRowUnit>(), log2w};
  }
};

namespace wide_rows_detail {

using u32 = std::uint32_t;
using u64 = std::uint64_t;

__device__ inline u64 first_thread() { return blockIdx.x * u64{blockDim.x} + threadIdx.x; }
__device__ inline u64 thread_stride() { return u64{gridDim.x} * blockDim.x; }

// A chunk item's entries [begin, end) and their rows' words.
struct ChunkRange {
  const std::uint32_t* words;
  u32 begin, end;
};
__device__ inline ChunkRange chunk_range(const std::byte* pool, const NodeItem& it) {
  const std::byte* node = pool + ref_offset(it.ref);
  const u32 n = *reinterpret_cast<const u32*>(node);
  const CooLayout l = coow_layout(n, 4);  // the coordinates' offset does not depend on the value size
  const u32 begin = it.level * coow_chunk;
  return {reinterpret_cast<const u32*>(node + l.coord_offset), begin, min(n, begin + coow_chunk)};
}

// The first entry in [lo, hi) whose local row is at least `row` (rows are
// non-decreasing: entries are row-major).
__device__ inline u32 first_row_at_least(const u32* words, u32 lo, u32 hi, u32 row) {
  while (lo < hi) {
    const u32 mid = (lo + hi) / 2;
    if ((words[mid] & 0xFFFFu) < row) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

// The end of the piece that starts at entry lo: the first entry past lo's
// window (rows are non-decreasing). A chunk's pieces are its windows with
// entries only: a sparse node's chunk spans many windows, most of them empty.
__device__ inline u32 piece_end(const ChunkRange& c, u32 lo, u32 log2w) {
  const u32 w = (c.words[lo] & 0xFFFFu) >> log2w;
  return first_row_at_least(c.words, lo, c.end, (w + 1) << log2w);
}

// Pieces per chunk. count[n] = 0, so that the exclusive scan's last element
// is the total.
__global__ void piece_counts(const std::byte* pool, const NodeItem* chunks, u64 n, u32 log2w, u64* count) {
  for (u64 i = first_thread(); i <= n; i += thread_stride()) {
    if (i == n) {
      count[n] = 0;
      continue;
    }
    const ChunkRange c = chunk_range(pool, chunks[i]);
    u64 pieces = 0;
    for (u32 lo = c.begin; lo < c.end; lo = piece_end(c, lo, log2w)) ++pieces;
    count[i] = pieces;
  }
}

// The pieces of each chunk, with their sort keys (window, block column) and
// positions.
__global__ void emit_pieces(const std::byte* pool, const NodeItem* chunks, u64 n, u32 log2d, u32 log2w, int col_bits,
                            const u64* offset, WidePiece* pieces, u64* keys, u32* index) {
  for (u64 i = first_thread(); i < n; i += thread_stride()) {
    const NodeItem it = chunks[i];
    const ChunkRange c = chunk_range(pool, it);
    u64 at = offset[i];
    for (u32 lo = c.begin; lo < c.end; ++at) {
      const u32 hi = piece_end(c, lo, log2w);
      pieces[at] = WidePiece{it.bcol, it.ref, lo, hi};
      const u64 window = (it.brow << (2 * log2d - log2w)) | ((c.words[lo] & 0xFFFFu) >> log2w);  // global row >> log2w
      keys[at] = (window << col_bits) | it.bcol;
      index[at] = static_cast<u32>(at);
      lo = hi;
    }
  }
}

__global__ void gather_pieces(const WidePiece* in, const u32* order, u64 n, WidePiece* out) {
  for (u64 i = first_thread(); i < n; i += thread_stride()) out[i] = in[order[i]];
}

// A piece heads a unit where its window starts or wide_unit_pieces pieces of
// the window came before it: `start` holds each piece's window start (an
// inclusive max-scan of the heads' positions) on entry, the unit flags on exit.
__global__ void window_heads(const u64* keys, u64 n, int col_bits, u64* start) {
  for (u64 i = first_thread(); i < n; i += thread_stride())
    start[i] = i == 0 || (keys[i] >> col_bits) != (keys[i - 1] >> col_bits) ? i : 0;
}
__global__ void unit_flags(const u64* start, u64 n, u64* flag) {
  for (u64 i = first_thread(); i <= n; i += thread_stride())
    flag[i] = i < n && (i - start[i]) % wide_unit_pieces == 0 ? 1 : 0;
}
__global__ void write_units(const u64* keys, const u64* flag, const u64* unit, u64 n, int col_bits, u32 log2w,
                            WideRowUnit* units) {
  for (u64 i = first_thread(); i <= n; i += thread_stride()) {
    if (i == n) units[unit[n]] = WideRowUnit{0, n};
    else if (flag[i] != 0) units[unit[i]] = WideRowUnit{(keys[i] >> col_bits) << log2w, i};
  }
}

}  // namespace wide_rows_detail

// The row windows of the wide bin's `n` chunk items (bin_wide) of a matrix
// with `rows` x `cols` and node size 2^log2d, for values of type V.
// Synchronizes the context's stream (the sizes are read back); kept memory
// from its allocator, the rest from allocate_work.
template <class V>
WideRows plan_wide_rows(const std::byte* pool, const NodeItem* chunks, std::uint64_t n, std::uint64_t rows,
                        std::uint64_t cols, std::uint32_t log2d, const Context& ctx) {
  using namespace wide_rows_detail;
  WideRows out;
  out.log2w = wide_window_log2<V>(log2d);
  if (n == 0) return out;
  const cudaStream_t stream = ctx.stream();
  const int window_bits = static_cast<int>(std::bit_width((rows - 1) >> out.log2w));
  const int col_bits = static_cast<int>(std::bit_width((cols - 1) >> (2 * log2d)));
  if (window_bits + col_bits > 64) throw Error("spmv: wide-node windows and block columns exceed 64 bits");
  const auto size_of_scan = [&](auto&& run) {
    std::size_t bytes = 0;
    cuda_check(run(nullptr, bytes), "cub (size, SpMV wide rows)");
    return ctx.allocate_work(std::max<std::size_t>(bytes, 1));
  };

  DeviceBytes offset = ctx.allocate_work((n + 1) * sizeof(u64));
  auto* off = offset.as<u64>();
  piece_counts<<<stride_grid(n + 1), stride_threads, 0, stream>>>(pool, chunks, n, out.log2w, off);
  cuda_check(cudaGetLastError(), "launch of piece_counts (SpMV wide rows)");
  leaf_walk::exclusive_sum_in_place(off, n + 1, ctx, "cub::DeviceScan::ExclusiveSum (SpMV wide pieces)");
  const u64 p = leaf_walk::read_back(off + n, ctx, "SpMV wide rows: piece count");
  if (p > 0xffffffffu) throw Error("spmv: more than 2^32 wide-node pieces");
  // Sparse wide nodes (a chunk's entries in many windows, a few each) would
  // pay 24 bytes and a shared flush for every few entries: SpMV keeps the
  // warp chunks there (run_plan_wide), and the plan nothing.
  if (p > wide_pieces_per_chunk_max * n) return out;
  out.piece_count = p;

  DeviceBytes unsorted = ctx.allocate_work(p * sizeof(WidePiece));
  DeviceBytes keys = ctx.allocate_work(2 * p * sizeof(u64));
  DeviceBytes index = ctx.allocate_work(2 * p * sizeof(u32));
  auto* k = keys.as<u64>();
  auto* ix = index.as<u32>();
  emit_pieces<<<stride_grid(n), stride_threads, 0, stream>>>(pool, chunks, n, log2d, out.log2w, col_bits, off,
                                                             unsorted.as<WidePiece>(), k, ix);
  cuda_check(cudaGetLastError(), "launch of emit_pieces (SpMV wide rows)");
  {
    // Stable: a node's pieces of one window keep their order.
    auto sort = [&](void* t, std::size_t& b) {
      return cub::DeviceRadixSort::SortPairs(t, b, k, k + p, ix, ix + p, p, 0, window_bits + col_bits, stream);
    };
    DeviceBytes temp = size_of_scan(sort);
    std::size_t bytes = temp.size();
    cuda_check(sort(temp.get(), bytes), "cub::DeviceRadixSort::SortPairs (SpMV wide pieces)");
  }
  out.pieces = ctx.allocate(p * sizeof(WidePiece));
  gather_pieces<<<stride_grid(p), stride_threads, 0, stream>>>(unsorted.as<WidePiece>(), ix + p, p,
                                                               out.pieces.as<WidePiece>());
  cuda_check(cudaGetLastError(), "launch of gather_pieces (SpMV wide rows)");

  const u64* sorted = k + p;
  DeviceBytes start = ctx.allocate_work(p * sizeof(u64));
  DeviceBytes flag = ctx.allocate_work(2 * (p + 1) * sizeof(u64));
  auto* s = start.as<u64>();
  auto* f = flag.as<u64>();
  window_heads<<<stride_grid(p), stride_threads, 0, stream>>>(sorted, p, col_bits, s);
  cuda_check(cudaGetLastError(), "launch of window_heads (SpMV wide rows)");
  {
    auto scan = [&](void* t, std::size_t& b) {
      return cub::DeviceScan::InclusiveScan(t, b, s, s, cuda::maximum<u64>{}, p, stream);
    };
    DeviceBytes temp = size_of_scan(scan);
    std::size_t bytes = temp.size();
    cuda_check(scan(temp.get(), bytes), "cub::DeviceScan::InclusiveScan (SpMV wide windows)");
  }
  unit_flags<<<stride_grid(p + 1), stride_threads, 0, stream>>>(s, p, f);
  cuda_check(cudaGetLastError(), "launch of unit_flags (SpMV wide rows)");
  u64* unit = f + p + 1;
  {
    auto scan = [&](void* t, std::size_t& b) { return cub::DeviceScan::ExclusiveSum(t, b, f, unit, p + 1, stream); };
    DeviceBytes temp = size_of_scan(scan);
    std::size_t bytes = temp.size();
    cuda_check(scan(temp.get(), bytes), "cub::DeviceScan::ExclusiveSum (SpMV wide units)");
  }
  const u64 units = leaf_walk::read_back(unit + p, ctx, "SpMV wide rows: unit count");
  if (units > 0x7fffffffu) throw Error("spmv: more than 2^31 wide-node row units");
  out.unit_count = units;
  out.units = ctx.allocate((units + 1) * sizeof(WideRowUnit));
  write_units<<<stride_grid(p + 1), stride_threads, 0, stream>>>(sorted, f, unit, p, col_bits, out.log2w,
                                                                 out.units.as<WideRowUnit>());
  cuda_check(cudaGetLastError(), "launch of write_units (SpMV wide rows)");
  cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize(SpMV wide rows)");  // work memory returns now
  return out;
}

}  // namespace hisparse::ops::spmv_gpu
