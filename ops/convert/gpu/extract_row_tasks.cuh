#pragma once
// The extraction's row path, its planning steps (extract_gpu.cuh runs them
// around extract_rows.cuh's kernel): a block row's tasks (one, or a chunk of
// extract_chunk_items items each where it has more), the COOW nodes' slices
// (one per block row of their unit that holds entries), the block rows' first
// items, and the row pointers from the rows' starts.
#include "extract_rows.cuh"
#include "work_memory.cuh"

namespace hisparse::ops::convert_detail {

// Per block row: its tasks (one, or a chunk per extract_chunk_items items
// where it has more) and, chunked, its slices of chunk_counts; 0 at blocks.
__global__ void task_count_kernel(const u32* first, u64 blocks, u64* tasks, u64* chunks) {
  for (u64 q = blockIdx.x * u64(blockDim.x) + threadIdx.x; q <= blocks; q += u64(gridDim.x) * blockDim.x) {
    const u64 m = q < blocks ? first[q + 1] - first[q] : 0;
    const u64 t = m > extract_chunk_items ? (m + extract_chunk_items - 1) / extract_chunk_items : 1;
    tasks[q] = q < blocks ? t : 0;
    chunks[q] = t > 1 ? t : 0;
  }
}

__global__ void task_emit_kernel(const u64* task_first, u64 blocks, u32* task_q) {
  for (u64 q = blockIdx.x * u64(blockDim.x) + threadIdx.x; q < blocks; q += u64(gridDim.x) * blockDim.x)
    for (u64 t = task_first[q]; t < task_first[q + 1]; ++t) task_q[t] = static_cast<u32>(q);
}

// Per row of a chunked block row: its chunks' counts become exclusive
// prefixes (each chunk's first place past the row's start), and the row's
// count their sum.
__global__ void chunk_prefix_kernel(const u64* task_first, const u64* chunk_first, u64 rows, u32 b, u32* chunk_counts,
                                    u32* row_count) {
  const u32 d = 1u << b;
  for (u64 r = blockIdx.x * u64(blockDim.x) + threadIdx.x; r < rows; r += u64(gridDim.x) * blockDim.x) {
    const u64 q = r >> b, m = task_first[q + 1] - task_first[q];
    if (m <= 1) continue;
    u32* c = chunk_counts + chunk_first[q] * d + (r & (d - 1));
    u32 sum = 0;
    for (u64 j = 0; j < m; ++j) {
      const u32 here = c[j * d];
      c[j * d] = sum;
      sum += here;
    }
    row_count[r] = sum;
  }
}

// Per frontier node: its items (1 for a leaf; for a COOW node, its non-empty
// slices: the block rows of its unit that hold entries, counted as the heads
// of runs of row16 >> b in its row-major entries); count[size] = 0.
__global__ void slice_count_kernel(Frontier f, const std::byte* pool, u32 b, u64* count) {
  const u32 lane = threadIdx.x & 31u;
  const u64 warps = (u64(gridDim.x) * blockDim.x) / 32;
  for (u64 k = (blockIdx.x * u64(blockDim.x) + threadIdx.x) / 32; k <= f.size; k += warps) {
    if (k == f.size || ref_type(f.ref[k]) != NodeType::coow) {
      if (lane == 0) count[k] = k < f.size;
      continue;
    }
    const NodeRef r = f.ref[k];
    const u32 n = node_count_word(pool, r);
    const WideCoord* co = coow_coords(pool, r, n);
    u64 heads = 0;
    for (u32 base = 0; base < n; base += 32)
      heads += __popc(__ballot_sync(0xFFFFFFFFu, slice_head(co, n, base + lane, b)));
    if (lane == 0) count[k] = heads;
  }
}

// The items at their scanned places (first): node, entry range (slices) and
// block-row key; hi of a slice is filled by slice_ends_kernel.
__global__ void slice_emit_kernel(Frontier f, const std::byte* pool, u32 b, const u64* first, u32* node_of, u32* lo,
                                  u64* key) {
  const u32 lane = threadIdx.x & 31u;
  const u64 warps = (u64(gridDim.x) * blockDim.x) / 32;
  for (u64 k = (blockIdx.x * u64(blockDim.x) + threadIdx.x) / 32; k < f.size; k += warps) {
    const NodeRef r = f.ref[k];
    const u64 o = first[k];
    if (ref_type(r) != NodeType::coow) {
      if (lane == 0) {
        node_of[o] = static_cast<u32>(k);
        lo[o] = 0;
        key[o] = f.R[k];
      }
      continue;
    }
    const u32 n = node_count_word(pool, r);
    const WideCoord* co = coow_coords(pool, r, n);
    u64 done = 0;
    for (u32 base = 0; base < n; base += 32) {
      const u32 i = base + lane;
      const bool head = slice_head(co, n, i, b);
      const unsigned ballot = __ballot_sync(0xFFFFFFFFu, head);
      if (head) {
        const u64 s = o + done + __popc(ballot & ((1u << lane) - 1u));
        node_of[s] = static_cast<u32>(k);
        lo[s] = i;
        key[s] = (f.R[k] << b) + (u32(co[i].row) >> b);
      }
      done += __popc(ballot);
    }
  }
}

// hi of every item: the next item's lo where it is a slice of the same node,
// else the node's entry count (unused for leaves).
__global__ void slice_ends_kernel(Frontier f, const std::byte* pool, const u32* node_of, const u32* lo, u64 items,
                                  u32* hi) {
  for (u64 s = blockIdx.x * u64(blockDim.x) + threadIdx.x; s < items; s += u64(gridDim.x) * blockDim.x) {
    const u32 k = node_of[s];
    hi[s] = s + 1 < items && node_of[s + 1] == k ? lo[s + 1] : node_count_word(pool, f.ref[k]);
  }
}

// *largest = the most entries of a block row (row_start: rows + 1 entries).
__global__ void largest_block_row_kernel(const u32* row_start, u64 rows, u32 b, u64 blocks, unsigned long long* largest) {
  for (u64 q = blockIdx.x * u64(blockDim.x) + threadIdx.x; q < blocks; q += u64(gridDim.x) * blockDim.x) {
    const u64 r1 = ((q + 1) << b) < rows ? ((q + 1) << b) : rows;
    atomicMax(largest, static_cast<unsigned long long>(row_start[r1] - row_start[q << b]));
  }
}

// first[q] = the first place in the sorted block-row keys at or past q.
__global__ void block_row_first_kernel(const u64* sorted, u64 n, u64 blocks, u32* first) {
  for (u64 q = blockIdx.x * u64(blockDim.x) + threadIdx.x; q <= blocks; q += u64(gridDim.x) * blockDim.x) {
    u64 lo = 0, hi = n;
    while (lo < hi) {
      const u64 mid = lo + (hi - lo) / 2;
      if (sorted[mid] < q) lo = mid + 1;
      else hi = mid;
    }
    first[q] = static_cast<u32>(lo);
  }
}

// The frontier's node kinds in *kinds: coow_seen where it holds a COOW node,
// other_seen where it holds another (COOW nodes alone: the bands path's). A
// bit already seen set is not set again: a pool of ~650 000 leaves would
// otherwise send as many atomics to one word.
inline constexpr unsigned coow_seen = 1u, other_seen = 2u;
__global__ void coow_kinds_kernel(Frontier f, unsigned* kinds) {
  for (u64 k = blockIdx.x * u64(blockDim.x) + threadIdx.x; k < f.size; k += u64(gridDim.x) * blockDim.x) {
    const unsigned bit = ref_type(f.ref[k]) == NodeType::coow ? coow_seen : other_seen;
    if ((*static_cast<volatile unsigned*>(kinds) & bit) == 0) atomicOr(kinds, bit);
  }
}

template <class I>
__global__ void row_ptr_from_starts_kernel(const u32* start, u64 rows, I* row_ptr) {
  for (u64 r = blockIdx.x * u64(blockDim.x) + threadIdx.x; r <= rows; r += u64(gridDim.x) * blockDim.x)
    row_ptr[r] = static_cast<I>(start[r]);
}

// The end of an extraction that counted its rows first: the CSR's row
// pointers from the rows' starts (COO: row_ptr null), then the stream's work done.
template <class I>
void finish_counted_rows(WorkMemory& w, const u32* start, u64 rows, I* row_ptr) {
  if (row_ptr) {
    row_ptr_from_starts_kernel<I><<<blocks_for(rows + 1), 256, 0, w.stream()>>>(start, rows, row_ptr);
    w.check_launch("row pointer kernel");
  }
  w.phase("rows written");
  w.sync("cudaStreamSynchronize(GPU extraction)");
}

}  // namespace hisparse::ops::convert_detail
