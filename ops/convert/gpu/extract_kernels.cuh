#pragma once
#include <type_traits>
// Kernels of the GPU extraction (node pool -> CSR/COO). The orchestration is
// in extract_gpu.cuh.
#include <cstdint>

#include "frontier.cuh"
#include "hisparse/formats/node.hpp"

namespace hisparse::ops::convert_detail {

using u32 = std::uint32_t;
using u64 = std::uint64_t;

// Entries of leaves and COOW nodes (count[size] = 0 for the scan's total).
__global__ void entry_count_kernel(Frontier f, const std::byte* pool, u32 log2_d, u64* count) {
  const u32 cells = 1u << (2 * log2_d), words = (cells + 31) / 32;
  for (u64 k = blockIdx.x * u64(blockDim.x) + threadIdx.x; k <= f.size; k += u64(gridDim.x) * blockDim.x) {
    if (k == f.size) { count[k] = 0; continue; }
    const NodeRef r = f.ref[k];
    if (ref_type(r) != NodeType::dense) {
      count[k] = node_count_word(pool, r);
      continue;
    }
    const auto* mask = reinterpret_cast<const u32*>(pool + ref_offset(r));
    u64 c = 0;
    for (u32 i = 0; i < words; ++i) c += __popc(cells >= 32 ? mask[i] : mask[i] & ((1u << cells) - 1u));
    count[k] = c;
  }
}

// One warp per leaf or COOW node writes its entries, in node order, as
// logical (row, column, value·scale) at the node's first entry position; or,
// with Out = u32, (row, column, position): where the entry's value lies in
// the pool, in units of V (pools are below 4 GiB).
template <class V, class K, class Out = V>
__global__ void entries_kernel(Frontier f, const std::byte* pool, u32 log2_d, const u64* first, bool transposed,
                               V scale, bool unscaled, K* row_key, K* col, Out* val) {
  const u32 b = log2_d, lane = threadIdx.x & 31u;
  const u64 warps = (u64(gridDim.x) * blockDim.x) / 32;
  for (u64 k = (blockIdx.x * u64(blockDim.x) + threadIdx.x) / 32; k < f.size; k += warps) {
    const NodeRef r = f.ref[k];
    const NodeType t = ref_type(r);
    const std::byte* node = pool + ref_offset(r);
    const u64 o = first[k];
    auto put = [&](u64 i, u64 rr, u64 cc, const V* v) {
      row_key[o + i] = static_cast<K>(transposed ? cc : rr);
      col[o + i] = static_cast<K>(transposed ? rr : cc);
      if constexpr (std::is_same_v<Out, V>)
        val[o + i] = unscaled ? *v : scale * *v;
      else
        val[o + i] = static_cast<Out>(v - reinterpret_cast<const V*>(pool));
    };
    if (t == NodeType::coow) {
      const u32 n = node_count_word(pool, r);
      const CooLayout l = coow_layout(n, sizeof(V));
      const auto* coords = reinterpret_cast<const WideCoord*>(node + l.coord_offset);
      const auto* vals = reinterpret_cast<const V*>(node + l.value_offset);
      for (u32 i = lane; i < n; i += 32)
        put(i, (f.R[k] << (2 * b)) | coords[i].row, (f.C[k] << (2 * b)) | coords[i].col, vals + i);
    } else if (t == NodeType::dense) {
      const u32 cells = 1u << (2 * b);
      const auto* mask = reinterpret_cast<const std::uint8_t*>(node);
      const auto* vals = reinterpret_cast<const V*>(node + dense_mask_bytes(b));
      u64 done = 0;
      for (u32 base = 0; base < cells; base += 32) {
        const u32 cell = base + lane;
        const bool present = cell < cells && ((mask[cell >> 3] >> (cell & 7u)) & 1u);
        const unsigned ballot = __ballot_sync(0xFFFFFFFFu, present);
        if (present) {
          const u64 i = done + __popc(ballot & ((1u << lane) - 1u));
          put(i, (f.R[k] << b) | (cell >> b), (f.C[k] << b) | (cell & ((1u << b) - 1)), vals + cell);
        }
        done += __popc(ballot);
      }
    } else {
      const u32 n = node_count_word(pool, r);
      const CooLayout l = coo_layout(t, n, sizeof(V));
      const auto* coords = reinterpret_cast<const LocalCoord*>(node + l.coord_offset);
      const auto* vals = reinterpret_cast<const V*>(node + l.value_offset);
      for (u32 i = lane; i < n; i += 32)
        put(i, (f.R[k] << b) | coords[i].row, (f.C[k] << b) | coords[i].col, vals + i);
    }
  }
}

// Sorted by row: columns and values follow; rows too for COO. K: u32 where
// rows and columns fit it (half the sort's and the gather's traffic), else u64.
template <class V, class I, class K>
__global__ void gather_entries_kernel(const K* sorted_rows, const u32* order, const K* col, const V* val, u64 n,
                                      I* row_out, I* col_out, V* val_out) {  // V: values or positions
  for (u64 i = blockIdx.x * u64(blockDim.x) + threadIdx.x; i < n; i += u64(gridDim.x) * blockDim.x) {
    const u32 e = order[i];
    if (row_out) row_out[i] = static_cast<I>(sorted_rows[i]);
    col_out[i] = static_cast<I>(col[e]);
    val_out[i] = val[e];
  }
}

// row_ptr[r] = the first sorted entry of row r or later.
template <class I, class K>
__global__ void row_ptr_kernel(const K* sorted_rows, u64 n, u64 rows, I* row_ptr) {
  for (u64 r = blockIdx.x * u64(blockDim.x) + threadIdx.x; r <= rows; r += u64(gridDim.x) * blockDim.x) {
    u64 lo = 0, hi = n;
    while (lo < hi) {
      const u64 mid = lo + (hi - lo) / 2;
      if (sorted_rows[mid] < r) lo = mid + 1; else hi = mid;
    }
    row_ptr[r] = static_cast<I>(lo);
  }
}

}  // namespace hisparse::ops::convert_detail
