#pragma once
// The CSR path's third kind of block row (build_csr.cuh runs it): one
// that neither a warp (over 512 leaf columns) nor a thread block (over
// csr_block_capacity entries) takes: a circuit's dense row, which meets every
// leaf column. Before, one such block row sent the whole matrix to the general
// path (a global sort of every entry: the circuit 8 M's four dense rows made
// its 40 M entries take it).
//
// A leaf's entries are in (row, column) order, and a CSR row is already in
// column order: so a row's consecutive entries in one leaf column (a *run*)
// stay together in the leaf. Only the runs are sorted, by (long block row,
// leaf column, row), with one device radix sort (perf-log C24); a scan of the
// sorted runs' lengths gives each run's first rank, and a change of leaf
// column in the sorted runs a new leaf. Pass 1 emits the leaves (tree key,
// entry count) beside the other kinds' (one reservation of leaf indices);
// pass 2 writes every entry at its run's rank plus its place in the run. The
// rows are checked on the way (sorted, no duplicates, columns in range);
// anything wrong sends the matrix to the general path, which words the error.
#include <bit>
#include <vector>

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

// Where entry i of the long rows (first: their exclusive scan, per long block
// row) lies: its long block row j, its row and its CSR index e.
struct LongEntry {
  u64 j, row, e;
};

// A thread block takes long_chunk consecutive entries of the long rows, which
// meet at most two long block rows (each has more entries than a chunk); their
// row pointers go to shared memory once, and each entry finds its row there
// (it used to search the row pointers in global memory, and the long block
// rows too: two chains of dependent loads an entry; perf-log C28).
inline constexpr u32 long_chunk = 4096;
inline constexpr u32 long_chunk_threads = 256;
static_assert(long_chunk <= csr_block_capacity_entries, "a chunk meets at most two long block rows");

struct LongStage {
  u64 rp[2][257];  // the row pointers of long block rows j0 and j0 + 1
  u64 j0;
  u32 nr[2];
};

// Stages chunk [i0, i1) (every thread of the block calls it).
template <class I>
__device__ inline void long_stage(const I* row_ptr, u64 rows, u32 b, const u32* list, const u64* first, u64 count,
                                  u64 i0, u64 i1, LongStage& st) {
  if (threadIdx.x == 0) {
    u64 lo = 0, hi = count;  // the long block row j with first[j] <= i0 < first[j + 1]
    while (hi - lo > 1) {
      const u64 mid = (lo + hi) / 2;
      if (first[mid] <= i0) lo = mid; else hi = mid;
    }
    st.j0 = lo;
  }
  __syncthreads();
  const u64 d = u64{1} << b;
  for (u32 side = 0; side < 2; ++side) {
    const u64 j = st.j0 + side;
    if (j >= count || (side == 1 && first[j] >= i1)) continue;
    const u64 r0 = u64{list[j]} << b, nr = rows - r0 < d ? rows - r0 : d;
    if (threadIdx.x == 0) st.nr[side] = static_cast<u32>(nr);
    for (u64 k = threadIdx.x; k <= nr; k += blockDim.x) st.rp[side][k] = static_cast<u64>(row_ptr[r0 + k]);
  }
  __syncthreads();
}

__device__ inline LongEntry long_entry(const LongStage& st, u32 b, const u32* list, const u64* first, u64 count,
                                       u64 i) {
  const u32 side = st.j0 + 1 < count && i >= first[st.j0 + 1] ? 1u : 0u;
  const u64 j = st.j0 + side;
  const u64 e = st.rp[side][0] + (i - first[j]);
  return {j, (u64{list[j]} << b) + row_of(st.rp[side], st.nr[side], e), e};
}

// head[i] = 1 where entry i starts a run (a row's first entry, or a leaf
// column other than its predecessor's); *bad where a row is unsorted,
// repeats a column or leaves the matrix.
template <class I>
__global__ void __launch_bounds__(long_chunk_threads)
    long_run_heads_kernel(const I* row_ptr, const I* col, u64 rows, u64 cols, u32 b, const u32* list,
                          const u64* first, u64 count, u64 entries, u32* head, unsigned* bad) {
  __shared__ LongStage st;
  for (u64 i0 = blockIdx.x * u64{long_chunk}; i0 < entries; i0 += u64(gridDim.x) * long_chunk) {
    const u64 i1 = i0 + long_chunk < entries ? i0 + long_chunk : entries;
    long_stage(row_ptr, rows, b, list, first, count, i0, i1, st);
    for (u64 i = i0 + threadIdx.x; i < i1; i += long_chunk_threads) {
      const LongEntry x = long_entry(st, b, list, first, count, i);
      const I c = col[x.e];
      const bool row_first = x.e == static_cast<u64>(row_ptr[x.row]);
      if (!index_ok(c, cols) || (!row_first && !(col[x.e - 1] < c))) atomicOr(bad, 4u);
      head[i] = (row_first || (static_cast<u64>(col[x.e - 1]) >> b) != (static_cast<u64>(c) >> b)) ? 1u : 0u;
    }
    __syncthreads();  // st is restaged for the next chunk
  }
}

// Each run (run_of: the heads' inclusive scan) at its index: its sort key
// (long block row, leaf column, row in the block row), its first entry and
// its CSR index; run_first[runs] = entries.
template <class I>
__global__ void __launch_bounds__(long_chunk_threads)
    long_runs_kernel(const I* row_ptr, const I* col, u64 rows, u32 b, u32 col_bits, const u32* list,
                     const u64* first, u64 count, u64 entries, const u32* head, const u32* run_of, u64* run_key,
                     u32* run_first, u32* run_e) {
  __shared__ LongStage st;
  const u64 m = (u64{1} << b) - 1;
  for (u64 i0 = blockIdx.x * u64{long_chunk}; i0 < entries; i0 += u64(gridDim.x) * long_chunk) {
    const u64 i1 = i0 + long_chunk < entries ? i0 + long_chunk : entries;
    long_stage(row_ptr, rows, b, list, first, count, i0, i1, st);
    for (u64 i = i0 + threadIdx.x; i < i1; i += long_chunk_threads) {
      if (i == entries - 1) run_first[run_of[i]] = static_cast<u32>(entries);
      if (!head[i]) continue;
      const LongEntry x = long_entry(st, b, list, first, count, i);
      const u64 lc = static_cast<u64>(col[x.e]) >> b, r = run_of[i] - 1;
      run_key[r] = (x.j << (col_bits + b)) | (lc << b) | (x.row & m);
      run_first[r] = static_cast<u32>(i);
      run_e[r] = static_cast<u32>(x.e);
    }
    __syncthreads();
  }
}

// Grid of the two kernels above: a block per chunk, at most 2^20.
inline unsigned long_chunk_blocks(u64 entries) {
  const u64 chunks = (entries + long_chunk - 1) / long_chunk;
  return static_cast<unsigned>(chunks < (1u << 20) ? (chunks ? chunks : 1) : (1u << 20));
}

// Per sorted run k (ridx: its index before the sort): its length, and 1 where
// it starts a leaf (a new long block row or leaf column).
__global__ void long_sorted_runs_kernel(const u64* key, const u32* ridx, const u32* run_first, u64 runs, u32 b,
                                        u32* len, u32* leaf_head) {
  for (u64 k = blockIdx.x * u64(blockDim.x) + threadIdx.x; k < runs; k += u64(gridDim.x) * blockDim.x) {
    const u32 r = ridx[k];
    len[k] = run_first[r + 1] - run_first[r];
    leaf_head[k] = (k == 0 || (key[k] >> b) != (key[k - 1] >> b)) ? 1u : 0u;
  }
}

// One reservation of leaf indices for the long rows' leaves.
__global__ void long_leaf_base_kernel(unsigned long long* counter, u64 leaves, u32* base) {
  *base = static_cast<u32>(atomicAdd(counter, static_cast<unsigned long long>(leaves)));
}

// Each leaf's first rank in the sorted entries (start[leaves] = entries).
__global__ void long_leaf_starts_kernel(const u32* leaf_head, const u32* leaf_of, const u32* off, u64 runs,
                                        u64 leaves, u64 entries, u32* start) {
  for (u64 k = blockIdx.x * u64(blockDim.x) + threadIdx.x; k <= runs; k += u64(gridDim.x) * blockDim.x) {
    if (k == runs) start[leaves] = static_cast<u32>(entries);
    else if (leaf_head[k]) start[leaf_of[k] - 1] = off[k];
  }
}

// Per sorted run: its leaf and its first entry's rank there, at its index
// before the sort (pass 2 reads them by entry); and where it starts a leaf,
// the leaf's tree key and entry count at its reserved index.
__global__ void long_leaves_kernel(const u64* key, const u32* ridx, const u32* leaf_head, const u32* leaf_of,
                                   const u32* off, const u32* start, u64 runs, const u32* list, u32 b, u32 col_bits,
                                   u32 upper_levels, const u32* base, u64* key_lo, u64* key_hi, u32* count,
                                   u32* run_leaf, u32* run_rank) {
  for (u64 k = blockIdx.x * u64(blockDim.x) + threadIdx.x; k < runs; k += u64(gridDim.x) * blockDim.x) {
    const u32 q = leaf_of[k] - 1, r = ridx[k];
    run_leaf[r] = q;
    run_rank[r] = off[k] - start[q];
    if (!leaf_head[k]) continue;
    const u64 j = key[k] >> (col_bits + b), C = (key[k] >> b) & ((u64{1} << col_bits) - 1);
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
__global__ void long_rows_fill_kernel(CsrBlockArgs<V, I> a, const u32* list, const u32* run_of, const u64* run_key,
                                      const u32* run_first, const u32* run_e, const u32* run_leaf,
                                      const u32* run_rank, u64 n, const u32* base, u32 col_bits) {
  const u32 b = a.b;
  const u64 m = (u64{1} << b) - 1;
  for (u64 i = blockIdx.x * u64(blockDim.x) + threadIdx.x; i < n; i += u64(gridDim.x) * blockDim.x) {
    const u32 r = run_of[i] - 1, in_run = static_cast<u32>(i) - run_first[r];
    const u32 t = a.linv[*base + run_leaf[r]];
    const u64 k = run_key[r], j = k >> (col_bits + b);
    const u64 row = (u64{list[j]} << b) | (k & m), e = u64{run_e[r]} + in_run;
    const u64 col = static_cast<u64>(a.col[e]);
    put_leaf_entry(a, t, a.ltype[t], a.lcount[t], a.loff[t], run_rank[r] + in_run, row, col, e, a.val[e]);
  }
}

// The long rows' runs and leaves, kept from pass 1 to pass 2: per entry its
// run (1-based), per run (in CSR order) its key, first entry, CSR index,
// leaf and first rank there.
struct LongRows {
  const u32* list = nullptr;  // the long block rows of pass 1 (a run key's index is into it)
  u64 entries = 0, runs = 0, leaves = 0;
  u32 col_bits = 0;
  Array<u64> run_key;
  Array<u32> run_of, run_first, run_e, run_leaf, run_rank, base;
};

// Pass 1 for the listed long block rows; false where the general path must
// take the matrix (bad rows, or keys past 64 bits).
template <class V, class I>
bool long_rows_leaves(WorkMemory& w, const CsrBlockArgs<V, I>& a, const u32* list, u64 count, LongRows& out) {
  const cudaStream_t st = w.stream();
  const u32 b = a.b;
  const u32 col_bits = a.cols ? bit_width_of((a.cols - 1) >> b) : 0;
  const u32 key_bits = bit_width_of(count) + col_bits + b;
  if (key_bits > 64) return false;
  Array<u64> first(w, count + 1);
  {
    Array<u64> counts(w, count + 1);
    long_row_counts_kernel<I><<<blocks_for(count + 1), 256, 0, st>>>(a.row_ptr, a.rows, b, list, count, counts.get());
    exclusive_sum(w, counts.get(), first.get(), count + 1);
  }
  const u64 n = read_back(w, first.get() + count, "read long-row entries");
  if (n == 0) return true;
  out.list = list;
  // [0]: the rows' check (low half), [1]: the number of runs.
  Array<unsigned long long> found(w, 2);
  cuda_check(cudaMemsetAsync(found.get(), 0, 2 * sizeof(unsigned long long), st), "cudaMemsetAsync");
  out.run_of = Array<u32>(w, n);
  std::vector<unsigned long long> got;
  {
    Array<u32> head(w, n);
    long_run_heads_kernel<I><<<long_chunk_blocks(n), long_chunk_threads, 0, st>>>(
        a.row_ptr, a.col, a.rows, a.cols, b, list, first.get(), count, n, head.get(),
        reinterpret_cast<unsigned*>(found.get()));
    w.check_launch("long-row run heads kernel");
    inclusive_sum(w, head.get(), out.run_of.get(), n);
    static_assert(std::endian::native == std::endian::little, "the run count lands in found[1]'s low half");
    cuda_check(cudaMemcpyAsync(found.get() + 1, out.run_of.get() + n - 1, sizeof(u32), cudaMemcpyDeviceToDevice, st),
               "cudaMemcpyAsync");
    got = read_back_n(w, found.get(), 2, "read long-row check and runs");
    if ((got[0] & 0xFFFFFFFFull) != 0) return false;
    out.runs = got[1];
    out.run_key = Array<u64>(w, out.runs);
    out.run_first = Array<u32>(w, out.runs + 1);
    out.run_e = Array<u32>(w, out.runs);
    long_runs_kernel<I><<<long_chunk_blocks(n), long_chunk_threads, 0, st>>>(
        a.row_ptr, a.col, a.rows, b, col_bits, list, first.get(), count, n, head.get(), out.run_of.get(),
        out.run_key.get(), out.run_first.get(), out.run_e.get());
    w.check_launch("long-row runs kernel");
  }
  first.release();
  const u64 R = out.runs;
  out.entries = n;
  out.col_bits = col_bits;
  Array<u64> key(w, R);
  Array<u32> ridx(w, R);
  {
    Array<u32> iota(w, R);
    iota_kernel<<<blocks_for(R), 256, 0, st>>>(iota.get(), R);
    radix_sort_pairs(w, out.run_key.get(), key.get(), iota.get(), ridx.get(), R, static_cast<int>(key_bits));
  }
  Array<u32> off(w, R), leaf_of(w, R), leaf_head(w, R);
  {
    Array<u32> len(w, R);
    long_sorted_runs_kernel<<<blocks_for(R), 256, 0, st>>>(key.get(), ridx.get(), out.run_first.get(), R, b, len.get(),
                                                          leaf_head.get());
    exclusive_sum(w, len.get(), off.get(), R);
    inclusive_sum(w, leaf_head.get(), leaf_of.get(), R);
  }
  out.leaves = read_back(w, leaf_of.get() + R - 1, "read long-row leaves");
  Array<u32> start(w, out.leaves + 1);
  out.base = Array<u32>(w, 1);
  out.run_leaf = Array<u32>(w, R);
  out.run_rank = Array<u32>(w, R);
  long_leaf_starts_kernel<<<blocks_for(R + 1), 256, 0, st>>>(leaf_head.get(), leaf_of.get(), off.get(), R, out.leaves,
                                                             n, start.get());
  long_leaf_base_kernel<<<1, 1, 0, st>>>(a.leaf_counter, out.leaves, out.base.get());
  long_leaves_kernel<<<blocks_for(R), 256, 0, st>>>(key.get(), ridx.get(), leaf_head.get(), leaf_of.get(), off.get(),
                                                    start.get(), R, list, b, col_bits, a.upper_levels, out.base.get(),
                                                    a.leaf_key_lo, a.leaf_key_hi, a.leaf_count, out.run_leaf.get(),
                                                    out.run_rank.get());
  w.check_launch("long-row leaf kernels");
  return true;
}

template <class V, class I>
void long_rows_fill(WorkMemory& w, const CsrBlockArgs<V, I>& a, const LongRows& r) {
  if (r.entries == 0) return;
  long_rows_fill_kernel<V, I><<<blocks_for(r.entries), 256, 0, w.stream()>>>(
      a, r.list, r.run_of.get(), r.run_key.get(), r.run_first.get(), r.run_e.get(), r.run_leaf.get(),
      r.run_rank.get(), r.entries, r.base.get(), r.col_bits);
  w.check_launch("long-row fill kernel");
}

}  // namespace hisparse::ops::convert_detail
