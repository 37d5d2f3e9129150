#pragma once
// Plan building, third part, and its agent: SpMV^T of wide (COOW) nodes in
// column order.
//
// A wide node's entries are row-major, so SpMV (N) sums a row's products in
// registers, while in SpMV^T a chunk's outputs (columns) are scattered. On
// R-MAT scale 20 the node's rows and columns are alike (5.76 M distinct
// (node, row) pairs, 5.76 M (node, column) pairs for 16.1 M entries), so
// SpMV^T can need as few atomics as SpMV does, but only if it meets a
// column's entries together. Summing them in a shared accumulator of the
// node's d^2 columns costs a compare-and-swap loop per entry on sm_90 (float
// and double shared adds are not native) and was L1-bound (perf-log 16).
//
// The plan therefore keeps, per whole-block chunk of a wide node (4096
// entries), the chunk's entries in (column, row) order as 16-bit positions
// inside the chunk: 2 bytes per wide entry, built once by a stable block
// radix sort (CUB) of the column digits. A call then reads the chunk's
// entries in stored order (coalesced), puts each product and its column into
// shared memory, and reads them back in column order: a thread's four and the
// warp's 128 consecutive entries share columns, summed in registers and by
// the warp merge, one atomic per column run, as SpMV does per row run. No
// shared atomics, and no accumulator whose size grows with d^2 (so f64 and
// d = 256 take this path too).
#include <cub/block/block_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

#include <algorithm>
#include <cstdint>

#include "hisparse/formats/device_matrix.hpp"
#include "spmv_procedures.cuh"

namespace hisparse::ops::spmv_gpu {

static_assert(wide_block_chunk == 4 * wide_block_threads, "a thread takes one quad of a whole-block chunk");
static_assert(wide_block_chunk <= 65536, "positions inside a chunk are 16-bit");

// The column order of every whole-block chunk of the plan's wide nodes.
struct WideOrder {
  DeviceBytes first;  // u64 per chunk item: where its positions start in `order` (a multiple of 4)
  DeviceBytes order;  // u16 positions inside the chunk, each chunk padded to a multiple of 4
  std::uint64_t entries = 0;  // positions stored, padding included
  [[nodiscard]] std::uint64_t bytes() const { return first.size() + order.size(); }
};

// The device view the agent reads.
struct WideOrderView {
  const std::uint64_t* first;
  const std::uint16_t* order;
};

namespace wide_order_detail {

// Entries of chunk `it` (its `level` holds the chunk index).
__device__ inline std::uint32_t chunk_entries(const std::byte* pool, const NodeItem& it) {
  const std::uint32_t n = *reinterpret_cast<const std::uint32_t*>(pool + ref_offset(it.ref));
  const std::uint32_t begin = it.level * wide_block_chunk;
  return begin < n ? min(wide_block_chunk, n - begin) : 0u;
}

__global__ void padded_lengths(const std::byte* pool, const NodeItem* items, std::uint64_t count, std::uint64_t* len) {
  for (std::uint64_t i = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; i < count;
       i += std::uint64_t{gridDim.x} * blockDim.x)
    len[i] = (chunk_entries(pool, items[i]) + 3u) & ~3u;
}

// One chunk per block: positions 0..n-1 sorted by column, stably, so that a
// column's entries stay in row order. Positions past n carry the largest key
// and sort after every entry (stability keeps them after an entry whose
// column is the largest too, with d = 256).
__global__ void __launch_bounds__(wide_block_threads) sort_chunks(const std::byte* pool, const NodeItem* items,
                                                                 const std::uint64_t* first, std::uint16_t* order,
                                                                 int end_bit) {
  using Sort = cub::BlockRadixSort<std::uint16_t, wide_block_threads, 4, std::uint16_t>;
  __shared__ typename Sort::TempStorage temp;
  const NodeItem it = items[blockIdx.x];
  const std::uint32_t n = chunk_entries(pool, it);
  const std::byte* node = pool + ref_offset(it.ref);
  const CooLayout l = coow_layout(*reinterpret_cast<const std::uint32_t*>(node), 4);
  const auto* words = reinterpret_cast<const std::uint32_t*>(node + l.coord_offset) + it.level * wide_block_chunk;
  std::uint16_t keys[4], pos[4];
#pragma unroll
  for (std::uint32_t j = 0; j < 4; ++j) {
    const std::uint32_t p = 4 * threadIdx.x + j;
    keys[j] = p < n ? static_cast<std::uint16_t>(words[p] >> 16) : std::uint16_t{0xFFFF};
    pos[j] = static_cast<std::uint16_t>(p);
  }
  Sort(temp).Sort(keys, pos, 0, end_bit);
  const std::uint32_t padded = (n + 3u) & ~3u;
#pragma unroll
  for (std::uint32_t j = 0; j < 4; ++j)
    if (4 * threadIdx.x + j < padded) order[first[blockIdx.x] + 4 * threadIdx.x + j] = pos[j];
}

}  // namespace wide_order_detail

// The column order of `count` whole-block chunk items (list_wide_blocks) of a
// pool with node size 2^log2d. Synchronizes `stream`.
inline WideOrder plan_wide_order(const std::byte* pool, const NodeItem* items, std::uint64_t count, std::uint32_t log2d,
                                 cudaStream_t stream) {
  using namespace wide_order_detail;
  WideOrder out;
  if (count == 0) return out;
  if (count > 0x7fffffffu) throw Error("spmv: more than 2^31 wide-node chunks");
  DeviceBytes len(count * sizeof(std::uint64_t));
  out.first = DeviceBytes(count * sizeof(std::uint64_t));
  const auto grid = static_cast<unsigned>(std::clamp<std::uint64_t>((count + 255) / 256, 1, 4096));
  padded_lengths<<<grid, 256, 0, stream>>>(pool, items, count, len.as<std::uint64_t>());
  cuda_check(cudaGetLastError(), "launch of padded_lengths (SpMV wide order)");
  std::size_t temp_bytes = 0;
  cuda_check(cub::DeviceScan::ExclusiveSum(nullptr, temp_bytes, len.as<std::uint64_t>(), out.first.as<std::uint64_t>(),
                                           count, stream),
             "cub::DeviceScan::ExclusiveSum (size, SpMV wide order)");
  DeviceBytes temp(std::max<std::size_t>(temp_bytes, 1));
  cuda_check(cub::DeviceScan::ExclusiveSum(temp.get(), temp_bytes, len.as<std::uint64_t>(), out.first.as<std::uint64_t>(),
                                           count, stream),
             "cub::DeviceScan::ExclusiveSum (SpMV wide order)");
  std::uint64_t tail[2] = {0, 0};
  cuda_check(cudaMemcpyAsync(&tail[0], out.first.as<std::uint64_t>() + count - 1, sizeof(std::uint64_t),
                             cudaMemcpyDeviceToHost, stream),
             "cudaMemcpyAsync(wide order size)");
  cuda_check(cudaMemcpyAsync(&tail[1], len.as<std::uint64_t>() + count - 1, sizeof(std::uint64_t), cudaMemcpyDeviceToHost,
                             stream),
             "cudaMemcpyAsync(wide order size)");
  cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize(SpMV wide order size)");
  out.entries = tail[0] + tail[1];
  out.order = DeviceBytes(std::max<std::uint64_t>(out.entries, 4) * sizeof(std::uint16_t));
  sort_chunks<<<static_cast<unsigned>(count), wide_block_threads, 0, stream>>>(
      pool, items, out.first.as<std::uint64_t>(), out.order.as<std::uint16_t>(), static_cast<int>(2 * log2d));
  cuda_check(cudaGetLastError(), "launch of sort_chunks (SpMV wide order)");
  // `len` and `temp` are freed on return: finish with them first.
  cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize(SpMV wide order)");
  return out;
}

// The shared memory of one block of wide_columns_ordered: each entry's
// product and its column inside the node.
template <class V>
struct WideOrderShared {
  V product[wide_block_chunk];
  std::uint16_t col[wide_block_chunk];
};

// SpMV^T of one whole-block chunk of a wide node (`level` holds the chunk
// index), thread `tid` of wide_block_threads. Calls __syncthreads (twice).
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
#pragma unroll
    for (std::uint32_t j = 0; j < 4; ++j) {
      if (p + j < n) {
        sh.product[p + j] = a[j] * st.x[row_base | (words[j] & 0xFFFFu)];
        sh.col[p + j] = static_cast<std::uint16_t>(words[j] >> 16);
      }
    }
  }
  __syncthreads();
  // Column order: this thread's four positions, one 8-byte load.
  std::uint64_t out = ~std::uint64_t{0};
  V sum = V(0);
  if (p < n) {
    const uint2 q = *reinterpret_cast<const uint2*>(w.order + w.first[item] + p);
    const std::uint32_t pos[4] = {q.x & 0xFFFFu, q.x >> 16, q.y & 0xFFFFu, q.y >> 16};
#pragma unroll
    for (std::uint32_t j = 0; j < 4; ++j) {
      if (p + j < n) {
        const std::uint64_t o = col_base | sh.col[pos[j]];
        if (o != out) {
          if (out != ~std::uint64_t{0}) atomicAdd(st.y + out, st.k * sum);
          out = o;
          sum = V(0);
        }
        sum += sh.product[pos[j]];
      }
    }
  }
  warp_segmented_add(st.y, out, st.k * sum, p < n);
  __syncthreads();  // the next chunk overwrites sh
}

}  // namespace hisparse::ops::spmv_gpu
