#pragma once
// Plan building, third part: the column order of wide (COOW) nodes, which
// SpMV^T reads (its agent, wide_columns_ordered, and why: spmv_plan_agents.cuh).
//
// Per whole-block chunk of a wide node (spmv_wide_chunk_entries), the chunk's positions
// in (column, row) order as 16-bit positions inside the chunk: 2 bytes per
// wide entry plus 8 per chunk, built once by a stable block radix sort (CUB)
// of the column digits. Each chunk is padded to a multiple of 4 positions so
// that a thread reads its four with one 8-byte load.
#include <cub/block/block_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>

#include "hisparse/formats/device_matrix.hpp"
#include "hisparse/ops/context.hpp"
#include "hisparse/runtime/log.hpp"
#include "spmv_plan_agents.cuh"

namespace hisparse::ops::spmv_gpu {

static_assert(wide_block_chunk <= 65536, "positions inside a chunk are 16-bit");

// The column order of every whole-block chunk of the plan's wide nodes.
struct WideOrder {
  DeviceBytes first;  // u64 per chunk item: where its positions start in `order` (a multiple of 4)
  DeviceBytes order;  // u16 positions inside the chunk, each chunk padded to a multiple of 4
  std::uint64_t entries = 0;  // positions stored, padding included
  // Runs of equal columns over all chunks: what SpMV^T adds into y before
  // the warp merge (R-MAT scale 20: 5.93 M for 16.1 M entries in 5 178 chunks
  // of 4096; chunks of 1024 since perf-log 28 make more runs).
  std::uint64_t column_runs = 0;
  [[nodiscard]] std::uint64_t bytes() const { return first.size() + order.size(); }
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
// column's entries stay in row order. Positions past n carry key 0xFFFF,
// which over the sorted bits [0, 2 log2 d) equals the largest column d^2 - 1:
// the sort being stable and those positions the chunk's last, they stay after
// every entry, and the agent never reads them (it stops at n). Also counts
// the chunk's column runs into *runs.
//
// A chunk's keys over 256 threads in digits of 5 bits. With 4096-entry
// chunks (before perf-log 28) R-MAT 2^21's
// 16 384 chunks sorted in 0.64 ms, against 1.27 with 1024 threads x 4 keys
// in 4-bit digits, 1.06 with 512 threads, 0.74 with 256 in 4 bits, 0.68 with
// 256 in 6 bits or 128 in 5 (H100, perf-log R6): fewer threads per block
// scan fewer digit counters per pass.
inline constexpr unsigned sort_threads = 256;
inline constexpr int sort_radix_bits = 5;
__global__ void __launch_bounds__(sort_threads) sort_chunks(const std::byte* pool, const NodeItem* items,
                                                            const std::uint64_t* first, std::uint16_t* order,
                                                            int end_bit, unsigned long long* runs) {
  constexpr unsigned Threads = sort_threads, Items = wide_block_chunk / Threads;
  static_assert(Items * Threads == wide_block_chunk && Items % 4 == 0, "a chunk in whole quads per thread");
  using Sort = cub::BlockRadixSort<std::uint16_t, Threads, Items, std::uint16_t, sort_radix_bits>;
  __shared__ typename Sort::TempStorage temp;
  __shared__ std::uint16_t last_key[Threads];
  __shared__ unsigned block_runs;
  const NodeItem it = items[blockIdx.x];
  const std::uint32_t n = chunk_entries(pool, it);
  const std::byte* node = pool + ref_offset(it.ref);
  const CooLayout l = coow_layout(*reinterpret_cast<const std::uint32_t*>(node), 4);
  const auto* words = reinterpret_cast<const std::uint32_t*>(node + l.coord_offset) + it.level * wide_block_chunk;
  std::uint16_t keys[Items], pos[Items];
#pragma unroll
  for (std::uint32_t j = 0; j < Items; ++j) {
    const std::uint32_t p = Items * threadIdx.x + j;
    keys[j] = p < n ? static_cast<std::uint16_t>(words[p] >> 16) : std::uint16_t{0xFFFF};
    pos[j] = static_cast<std::uint16_t>(p);
  }
  if (threadIdx.x == 0) block_runs = 0;
  Sort(temp).Sort(keys, pos, 0, end_bit);  // blocked: this thread holds sorted slots Items tid .. Items tid + Items - 1
  const std::uint32_t padded = (n + 3u) & ~3u;
#pragma unroll
  for (std::uint32_t j = 0; j < Items; ++j)
    if (Items * threadIdx.x + j < padded) order[first[blockIdx.x] + Items * threadIdx.x + j] = pos[j];
  // A run starts where a slot's column differs from the slot before it
  // (slots below n hold real columns, each below 2^end_bit).
  last_key[threadIdx.x] = keys[Items - 1];
  __syncthreads();
  unsigned heads = 0;
#pragma unroll
  for (std::uint32_t j = 0; j < Items; ++j) {
    const std::uint32_t slot = Items * threadIdx.x + j;
    if (slot >= n) break;
    const std::uint16_t before = j > 0 ? keys[j - 1] : threadIdx.x > 0 ? last_key[threadIdx.x - 1] : std::uint16_t{0};
    if (slot == 0 || keys[j] != before) ++heads;
  }
  if (heads != 0) atomicAdd(&block_runs, heads);
  __syncthreads();
  if (threadIdx.x == 0) atomicAdd(runs, static_cast<unsigned long long>(block_runs));
}

}  // namespace wide_order_detail

// The column order of `count` whole-block chunk items (list_wide_blocks) of a
// pool with node size 2^log2d. Synchronizes the context's stream; memory from its allocator
// (work memory from allocate_work).
inline WideOrder plan_wide_order(const std::byte* pool, const NodeItem* items, std::uint64_t count, std::uint32_t log2d,
                                 const Context& ctx) {
  using namespace wide_order_detail;
  const auto t0 = std::chrono::steady_clock::now();
  const cudaStream_t stream = ctx.stream();
  WideOrder out;
  if (count == 0) return out;
  if (count > 0x7fffffffu) throw Error("spmv: more than 2^31 wide-node chunks");
  DeviceBytes len = ctx.allocate_work(count * sizeof(std::uint64_t));
  out.first = ctx.allocate(count * sizeof(std::uint64_t));
  const auto grid = static_cast<unsigned>(std::clamp<std::uint64_t>((count + 255) / 256, 1, 4096));
  padded_lengths<<<grid, 256, 0, stream>>>(pool, items, count, len.as<std::uint64_t>());
  cuda_check(cudaGetLastError(), "launch of padded_lengths (SpMV wide order)");
  std::size_t temp_bytes = 0;
  cuda_check(cub::DeviceScan::ExclusiveSum(nullptr, temp_bytes, len.as<std::uint64_t>(), out.first.as<std::uint64_t>(),
                                           count, stream),
             "cub::DeviceScan::ExclusiveSum (size, SpMV wide order)");
  DeviceBytes temp = ctx.allocate_work(std::max<std::size_t>(temp_bytes, 1));
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
  out.order = ctx.allocate(std::max<std::uint64_t>(out.entries, 4) * sizeof(std::uint16_t));
  DeviceBytes runs = ctx.allocate_work(sizeof(unsigned long long));
  cuda_check(cudaMemsetAsync(runs.get(), 0, runs.size(), stream), "cudaMemsetAsync(wide column runs)");
  const auto t_sized = std::chrono::steady_clock::now();
  sort_chunks<<<static_cast<unsigned>(count), sort_threads, 0, stream>>>(
      pool, items, out.first.as<std::uint64_t>(), out.order.as<std::uint16_t>(), static_cast<int>(2 * log2d),
      runs.as<unsigned long long>());
  cuda_check(cudaGetLastError(), "launch of sort_chunks (SpMV wide order)");
  unsigned long long column_runs = 0;
  cuda_check(cudaMemcpyAsync(&column_runs, runs.get(), sizeof(column_runs), cudaMemcpyDeviceToHost, stream),
             "cudaMemcpyAsync(wide column runs)");
  cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize(SpMV wide order)");
  out.column_runs = column_runs;
  if (runtime::log::enabled(runtime::log::Level::debug))
    runtime::log::debug("spmv wide order (" + std::to_string(count) + " chunks): sized " + std::to_string(std::chrono::duration<double, std::milli>(t_sized - t0).count()) +
                        " ms, sorted " + std::to_string(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_sized).count()) + " ms");
  return out;
}

}  // namespace hisparse::ops::spmv_gpu
