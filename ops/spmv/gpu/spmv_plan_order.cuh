#pragma once
// Plan building, second half: the recorded sparse items (bins one, small and
// large, back to back) ordered by the output block they add into, and that
// order cut into runs for output_run (spmv_plan_agents.cuh). One order per
// orientation: A adds by block row, A^T by block column.
//
// On the device with CUB: a radix sort of (output block, item) pairs (stable,
// so a block's items keep the traversal's order and neighbouring inputs), a
// prefix of entries and items per output block, and run heads where a block
// starts or its prefix crosses a multiple of the run budget.
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

#include <bit>
#include <cstdint>

#include "hisparse/formats/device_matrix.hpp"
#include "spmv_plan_agents.cuh"

namespace hisparse::ops::spmv_gpu {

// A run ends at a new output block, and every run_entries entries or
// run_items items of one block (whichever comes first): a long row's leaves
// become several runs, so no warp is left alone with a whole heavy block.
struct RunBudget {
  std::uint32_t entries;
  std::uint32_t items;
};

struct OutputOrder {
  DeviceBytes order;       // item index at each position (u32)
  DeviceBytes run_starts;  // first position of each run, then the item count (u32, runs + 1)
  std::uint64_t runs = 0;
};

namespace order_detail {

// A prefix packs items (high 24 bits) and entries (low 40 bits): one scan for
// both. Overflow of either field can only move run boundaries, never put an
// item in two runs or none: runs stay inside output blocks by the keys.
inline constexpr std::uint32_t item_shift = 40;
inline constexpr std::uint64_t entry_mask = (std::uint64_t{1} << item_shift) - 1;

__global__ void keys_of(const NodeItem* items, std::uint32_t count, bool by_col, std::uint64_t* keys,
                        std::uint32_t* index) {
  for (std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += gridDim.x * blockDim.x) {
    keys[i] = by_col ? items[i].bcol : items[i].brow;
    index[i] = i;
  }
}

__global__ void sizes_of(const NodeItem* items, const std::uint32_t* order, std::uint32_t count,
                         const std::byte* pool, std::uint32_t large_chunk, std::uint64_t* sizes) {
  for (std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += gridDim.x * blockDim.x)
    sizes[i] = (std::uint64_t{1} << item_shift) | item_span(pool, items[order[i]], large_chunk).count;
}

__device__ inline std::uint64_t window(std::uint64_t exclusive, RunBudget budget) {
  // Distinct for two positions of one block exactly when one of the two
  // budgets was crossed between them (both windows only grow).
  return ((exclusive & entry_mask) / budget.entries) * (std::uint64_t{1} << 32) + (exclusive >> item_shift) / budget.items;
}

__global__ void heads_of(const std::uint64_t* keys, const std::uint64_t* sizes, const std::uint64_t* inclusive,
                         std::uint32_t count, RunBudget budget, std::uint32_t* heads) {
  for (std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += gridDim.x * blockDim.x) {
    bool head = i == 0 || keys[i] != keys[i - 1];
    if (!head) head = window(inclusive[i] - sizes[i], budget) != window(inclusive[i - 1] - sizes[i - 1], budget);
    heads[i] = head ? 1u : 0u;
  }
}

__global__ void starts_of(const std::uint32_t* heads, const std::uint32_t* run_number, std::uint32_t count,
                          std::uint32_t* starts) {
  for (std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += gridDim.x * blockDim.x)
    if (heads[i]) starts[run_number[i] - 1] = i;
  if (blockIdx.x == 0 && threadIdx.x == 0) starts[run_number[count - 1]] = count;
}

inline unsigned grid_for(std::uint32_t count) {
  return static_cast<unsigned>(std::min<std::uint32_t>((count + 255) / 256, 4096));
}

}  // namespace order_detail

// Orders items[0, count) by output block (block column with by_col); blocks
// have indices below `blocks`. Synchronizes `stream` (the run count).
inline OutputOrder order_by_output(const NodeItem* items, std::uint32_t count, bool by_col, std::uint64_t blocks,
                                   const std::byte* pool, std::uint32_t large_chunk, RunBudget budget,
                                   cudaStream_t stream) {
  using namespace order_detail;
  OutputOrder out;
  if (count == 0) return out;
  const unsigned grid = grid_for(count);
  DeviceBytes keys(count * sizeof(std::uint64_t)), sorted_keys(count * sizeof(std::uint64_t));
  DeviceBytes index(count * sizeof(std::uint32_t));
  out.order = DeviceBytes(count * sizeof(std::uint32_t));
  keys_of<<<grid, 256, 0, stream>>>(items, count, by_col, keys.as<std::uint64_t>(), index.as<std::uint32_t>());
  cuda_check(cudaGetLastError(), "launch of keys_of (SpMV plan order)");
  const int end_bit = std::max(1, static_cast<int>(std::bit_width(blocks > 0 ? blocks - 1 : 0)));

  // One temporary buffer, as large as the largest of the three CUB calls needs.
  std::size_t sort_bytes = 0, scan_key_bytes = 0, scan_bytes = 0;
  cuda_check(cub::DeviceRadixSort::SortPairs(nullptr, sort_bytes, keys.as<std::uint64_t>(), sorted_keys.as<std::uint64_t>(),
                                             index.as<std::uint32_t>(), out.order.as<std::uint32_t>(), count, 0, end_bit,
                                             stream),
             "cub::DeviceRadixSort::SortPairs (size)");
  DeviceBytes sizes(count * sizeof(std::uint64_t)), inclusive(count * sizeof(std::uint64_t));
  cuda_check(cub::DeviceScan::InclusiveSumByKey(nullptr, scan_key_bytes, sorted_keys.as<std::uint64_t>(),
                                                sizes.as<std::uint64_t>(), inclusive.as<std::uint64_t>(), count,
                                                ::cuda::std::equal_to<>{}, stream),
             "cub::DeviceScan::InclusiveSumByKey (size)");
  DeviceBytes heads(count * sizeof(std::uint32_t)), run_number(count * sizeof(std::uint32_t));
  cuda_check(cub::DeviceScan::InclusiveSum(nullptr, scan_bytes, heads.as<std::uint32_t>(), run_number.as<std::uint32_t>(),
                                           count, stream),
             "cub::DeviceScan::InclusiveSum (size)");
  DeviceBytes temp(std::max({sort_bytes, scan_key_bytes, scan_bytes, std::size_t{1}}));
  std::size_t temp_bytes = temp.size();

  cuda_check(cub::DeviceRadixSort::SortPairs(temp.get(), temp_bytes, keys.as<std::uint64_t>(), sorted_keys.as<std::uint64_t>(),
                                             index.as<std::uint32_t>(), out.order.as<std::uint32_t>(), count, 0, end_bit,
                                             stream),
             "cub::DeviceRadixSort::SortPairs");
  sizes_of<<<grid, 256, 0, stream>>>(items, out.order.as<std::uint32_t>(), count, pool, large_chunk, sizes.as<std::uint64_t>());
  cuda_check(cudaGetLastError(), "launch of sizes_of (SpMV plan order)");
  temp_bytes = temp.size();
  cuda_check(cub::DeviceScan::InclusiveSumByKey(temp.get(), temp_bytes, sorted_keys.as<std::uint64_t>(),
                                                sizes.as<std::uint64_t>(), inclusive.as<std::uint64_t>(), count,
                                                ::cuda::std::equal_to<>{}, stream),
             "cub::DeviceScan::InclusiveSumByKey");
  heads_of<<<grid, 256, 0, stream>>>(sorted_keys.as<std::uint64_t>(), sizes.as<std::uint64_t>(),
                                     inclusive.as<std::uint64_t>(), count, budget, heads.as<std::uint32_t>());
  cuda_check(cudaGetLastError(), "launch of heads_of (SpMV plan order)");
  temp_bytes = temp.size();
  cuda_check(cub::DeviceScan::InclusiveSum(temp.get(), temp_bytes, heads.as<std::uint32_t>(), run_number.as<std::uint32_t>(),
                                           count, stream),
             "cub::DeviceScan::InclusiveSum");
  std::uint32_t runs = 0;
  cuda_check(cudaMemcpyAsync(&runs, run_number.as<std::uint32_t>() + (count - 1), sizeof(runs), cudaMemcpyDeviceToHost,
                             stream),
             "cudaMemcpyAsync(run count)");
  cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize(run count)");
  out.runs = runs;
  out.run_starts = DeviceBytes((std::uint64_t{runs} + 1) * sizeof(std::uint32_t));
  starts_of<<<grid, 256, 0, stream>>>(heads.as<std::uint32_t>(), run_number.as<std::uint32_t>(), count,
                                      out.run_starts.as<std::uint32_t>());
  cuda_check(cudaGetLastError(), "launch of starts_of (SpMV plan order)");
  // The temporaries are freed on return: finish with them first.
  cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize(plan order)");
  return out;
}

}  // namespace hisparse::ops::spmv_gpu
