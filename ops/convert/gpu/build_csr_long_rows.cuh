#pragma once
// The CSR path's third kind of block row (build_csr_blocks.cuh runs it): one
// that neither a warp (over 512 leaf columns) nor a thread block (over
// csr_block_capacity entries) takes: a circuit's dense row, which meets every
// leaf column. Before, one such block row sent the whole matrix to the general
// path (a global sort of every entry: the circuit 8 M's four dense rows made
// its 40 M entries take it).
//
// Their entries alone are sorted, by (long block row, leaf column, row,
// column): one device radix sort over the bits in use. Pass 1 emits their
// leaves (tree key, entry count) beside the other kinds' (one reservation of
// leaf indices); pass 2 writes every entry at its rank in its leaf. The rows
// are checked on the way (sorted, no duplicates, columns in range); anything
// wrong sends the matrix to the general path, which words the error.
#include "build_csr_warps.cuh"
#include "work_memory.cuh"

namespace hisparse::ops::convert_detail {

template <class I>
__global__ void long_row_counts_kernel(const I* row_ptr, u64 rows, u32 b, const u32* list, u64 count, u64* out) {
  for (u64 j = blockIdx.x * u64(blockDim.x) + threadIdx.x; j <= count; j += u64(gridDim.x) * blockDim.x) {
    if (j == count) {
      out[j] = 0;
      continue;
    }
    const u64 r0 = u64{list[j]} << b, r1 = ((u64{list[j]} + 1) << b) < rows ? ((u64{list[j]} + 1) << b) : rows;
    out[j] = static_cast<u64>(row_ptr[r1]) - static_cast<u64>(row_ptr[r0]);
  }
}

// Entry i of the long rows (first: their exclusive scan): its key and its
// index in the CSR; *bad where a row is unsorted, repeats a column or leaves
// the matrix.
template <class I>
__global__ void long_row_keys_kernel(const I* row_ptr, const I* col, u64 rows, u64 cols, u32 b, u32 col_bits,
                                     const u32* list, const u64* first, u64 count, u64 entries, u64* key, u32* idx,
                                     unsigned* bad) {
  const u64 m = (u64{1} << b) - 1;
  for (u64 i = blockIdx.x * u64(blockDim.x) + threadIdx.x; i < entries; i += u64(gridDim.x) * blockDim.x) {
    u64 lo = 0, hi = count;  // the long row j with first[j] <= i < first[j + 1]
    while (hi - lo > 1) {
      const u64 mid = (lo + hi) / 2;
      if (first[mid] <= i) lo = mid; else hi = mid;
    }
    const u64 j = lo, r0 = u64{list[j]} << b;
    const u64 r_end = r0 + m + 1 < rows ? r0 + m + 1 : rows;
    const u64 e = static_cast<u64>(row_ptr[r0]) + (i - first[j]);
    u64 a = r0, z = r_end;  // its row: row_ptr[r] <= e < row_ptr[r + 1]
    while (z - a > 1) {
      const u64 mid = (a + z) / 2;
      if (static_cast<u64>(row_ptr[mid]) <= e) a = mid; else z = mid;
    }
    const I c = col[e];
    if (!index_ok(c, cols) || (e > static_cast<u64>(row_ptr[a]) && !(col[e - 1] < c))) atomicOr(bad, 4u);
    const u64 cc = index_ok(c, cols) ? static_cast<u64>(c) : 0;
    key[i] = (j << (col_bits + 2 * b)) | ((cc >> b) << (2 * b)) | ((a & m) << b) | (cc & m);
    idx[i] = static_cast<u32>(e);
  }
}

__global__ void long_leaf_heads_kernel(const u64* key, u64 n, u32 b, u32* head) {
  for (u64 i = blockIdx.x * u64(blockDim.x) + threadIdx.x; i < n; i += u64(gridDim.x) * blockDim.x)
    head[i] = (i == 0 || (key[i] >> (2 * b)) != (key[i - 1] >> (2 * b))) ? 1u : 0u;
}

// One reservation of leaf indices for the long rows' leaves.
__global__ void long_leaf_base_kernel(unsigned long long* counter, u64 leaves, u32* base) {
  *base = static_cast<u32>(atomicAdd(counter, static_cast<unsigned long long>(leaves)));
}

__global__ void long_leaf_starts_kernel(const u32* leaf_of, u64 n, u64 leaves, u32* start) {
  for (u64 i = blockIdx.x * u64(blockDim.x) + threadIdx.x; i <= n; i += u64(gridDim.x) * blockDim.x) {
    if (i == n) start[leaves] = static_cast<u32>(n);
    else if (i == 0 || leaf_of[i] != leaf_of[i - 1]) start[leaf_of[i] - 1] = static_cast<u32>(i);
  }
}

// Each long-row leaf's tree key and entry count at its reserved index.
__global__ void long_leaves_kernel(const u64* key, const u32* start, u64 leaves, const u32* list, u32 b, u32 col_bits,
                                   u32 upper_levels, const u32* base, u64* key_lo, u64* key_hi, u32* count) {
  for (u64 q = blockIdx.x * u64(blockDim.x) + threadIdx.x; q < leaves; q += u64(gridDim.x) * blockDim.x) {
    const u64 k = key[start[q]];
    const u64 j = k >> (col_bits + 2 * b), C = (k >> (2 * b)) & ((u64{1} << col_bits) - 1);
    const u64 slot = *base + q;
    u64 hi, lo;
    leaf_tree_key(list[j], C, b, upper_levels, hi, lo);
    key_lo[slot] = lo;
    if (key_hi) key_hi[slot] = hi;
    count[slot] = start[q + 1] - start[q];
  }
}

// Pass 2: every long-row entry into its leaf (or its wide position).
template <class V, class I>
__global__ void long_rows_fill_kernel(CsrBlockArgs<V, I> a, const u64* key, const u32* idx, const u32* leaf_of,
                                      const u32* start, u64 n, const u32* base, u32 col_bits) {
  const u32 b = a.b;
  const u64 m = (u64{1} << b) - 1;
  for (u64 i = blockIdx.x * u64(blockDim.x) + threadIdx.x; i < n; i += u64(gridDim.x) * blockDim.x) {
    const u32 q = leaf_of[i] - 1, t = a.linv[*base + q];
    const u64 k = key[i];
    const u64 j = k >> (col_bits + 2 * b), C = (k >> (2 * b)) & ((u64{1} << col_bits) - 1);
    const u64 row = (u64{a.long_rows[j]} << b) | ((k >> b) & m), col = (C << b) | (k & m);
    const u32 e = idx[i];
    put_leaf_entry(a, t, a.ltype[t], a.lcount[t], a.loff[t], static_cast<u32>(i) - start[q], row, col, e, a.val[e]);
  }
}

// The long rows' sorted entries and leaves, kept from pass 1 to pass 2.
struct LongRows {
  u64 entries = 0, leaves = 0;
  u32 col_bits = 0;
  Array<u64> key;
  Array<u32> idx, leaf_of, start, base;
};

// Pass 1 for the listed long block rows; false where the general path must
// take the matrix (bad rows, or keys past 64 bits).
template <class V, class I>
bool long_rows_leaves(WorkMemory& w, const CsrBlockArgs<V, I>& a, const u32* list, u64 count, LongRows& out) {
  const cudaStream_t st = w.stream();
  const u32 b = a.b;
  const u32 col_bits = a.cols ? bit_width_of((a.cols - 1) >> b) : 0;
  const u32 key_bits = bit_width_of(count) + col_bits + 2 * b;
  if (key_bits > 64) return false;
  Array<u64> first(w, count + 1);
  {
    Array<u64> counts(w, count + 1);
    long_row_counts_kernel<I><<<blocks_for(count + 1), 256, 0, st>>>(a.row_ptr, a.rows, b, list, count, counts.get());
    exclusive_sum(w, counts.get(), first.get(), count + 1);
  }
  const u64 n = read_back(w, first.get() + count, "read long-row entries");
  Array<u64> key(w, n);
  Array<u32> idx(w, n);
  Array<unsigned> bad(w, 1);
  cuda_check(cudaMemsetAsync(bad.get(), 0, sizeof(unsigned), st), "cudaMemsetAsync");
  long_row_keys_kernel<I><<<blocks_for(n), 256, 0, st>>>(a.row_ptr, a.col, a.rows, a.cols, b, col_bits, list,
                                                         first.get(), count, n, key.get(), idx.get(), bad.get());
  w.check_launch("long-row keys kernel");
  if (read_back(w, bad.get(), "read long-row check") != 0) return false;
  first.release();
  out.entries = n;
  out.col_bits = col_bits;
  out.key = Array<u64>(w, n);
  out.idx = Array<u32>(w, n);
  radix_sort_pairs(w, key.get(), out.key.get(), idx.get(), out.idx.get(), n, static_cast<int>(key_bits));
  key.release();
  idx.release();
  out.leaf_of = Array<u32>(w, n);
  {
    Array<u32> head(w, n);
    long_leaf_heads_kernel<<<blocks_for(n), 256, 0, st>>>(out.key.get(), n, b, head.get());
    inclusive_sum(w, head.get(), out.leaf_of.get(), n);
  }
  out.leaves = read_back(w, out.leaf_of.get() + n - 1, "read long-row leaves");
  out.start = Array<u32>(w, out.leaves + 1);
  out.base = Array<u32>(w, 1);
  long_leaf_starts_kernel<<<blocks_for(n + 1), 256, 0, st>>>(out.leaf_of.get(), n, out.leaves, out.start.get());
  long_leaf_base_kernel<<<1, 1, 0, st>>>(a.leaf_counter, out.leaves, out.base.get());
  long_leaves_kernel<<<blocks_for(out.leaves), 256, 0, st>>>(out.key.get(), out.start.get(), out.leaves, list, b,
                                                             col_bits, a.upper_levels, out.base.get(), a.leaf_key_lo,
                                                             a.leaf_key_hi, a.leaf_count);
  w.check_launch("long-row leaf kernels");
  return true;
}

template <class V, class I>
void long_rows_fill(WorkMemory& w, const CsrBlockArgs<V, I>& a, const LongRows& r) {
  if (r.entries == 0) return;
  long_rows_fill_kernel<V, I><<<blocks_for(r.entries), 256, 0, w.stream()>>>(
      a, r.key.get(), r.idx.get(), r.leaf_of.get(), r.start.get(), r.entries, r.base.get(), r.col_bits);
  w.check_launch("long-row fill kernel");
}

}  // namespace hisparse::ops::convert_detail
