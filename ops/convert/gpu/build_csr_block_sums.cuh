#pragma once
// The block kernels' block rows of a scattered matrix summed, not sorted
// (perf-log C25). On R-MAT 2^22 the block kernels' pass 1 sorted every block
// row to emit ~50 M leaves, and the COOW prune (build_coow_prune.cuh) then
// summed them per depth-2 block and dropped nearly all of them: 2.6 ms of
// sorts, 1.7 ms of pruning and ~1.5 GB of work arrays.
//
// The canonical rule needs, per depth-2 block, its leaves, their entries and
// their bytes, and a leaf's bytes depend on its entry count alone. So a
// thread block counts a block row's entries per leaf column in shared memory
// (16 bits a leaf column: a block row holds at most csr_block_capacity
// entries), the first entry of each leaf adds the leaf to its depth-2 block's
// sums, and those go to the global sums once per block row. Nothing is
// sorted and no leaf is written. After the rule, only the block rows with an
// entry under a standard node (a "mixed" block row, listed by csr_mixed_rows)
// take the block kernels' two passes (pass 1 emits their leaves, of which
// those under COOW nodes give way to stand-ins as before); every other one's
// entries reach their COOW nodes by the COOW fill alone
// (build_csr_coow_ranks.cuh).
#include "build_csr_warps.cuh"
#include "work_memory.cuh"

namespace hisparse::ops::convert_detail {

inline constexpr u32 block_sums_threads = 256;
inline constexpr u32 block_sums_items = csr_block_capacity_entries / block_sums_threads;
static_assert(block_sums_items * block_sums_threads == csr_block_capacity_entries && block_sums_items <= 32,
              "an entry's first-of-its-leaf flag is a bit of one word per thread");
static_assert(csr_block_capacity_entries < (1u << 16),
              "a leaf column's count is 16 bits, and so are a block's leaves and entries in a block row's sums");

// The depth-2 blocks' sums (prune_sums_kernel's layout) and the leaves summed.
struct CellSums {
  unsigned long long* le;     // per block: leaves << 32 | entries
  unsigned long long* bytes;  // per block: the leaves' bytes
  unsigned long long* leaves;  // all leaves summed
  u64 grid_cols, leaf_cols;
};

// Shared memory of the sums kernel: two u32 sums per depth-2 block column
// (leaves << 16 | entries, and bytes: a block row's are below 2^16 and 2^32),
// then a 16-bit count per leaf column.
inline u64 block_sums_shared_bytes(u64 leaf_cols, u64 grid_cols) {
  return grid_cols * 2 * sizeof(u32) + (leaf_cols + 1) / 2 * sizeof(u32);
}
// Up to this much the kernel keeps two blocks a multiprocessor; beyond it the
// block rows are sorted as before.
inline constexpr u64 block_sums_shared_limit = u64{100} << 10;

// The sums kernels' shared memory: per depth-2 block column a packed
// (leaves << shift | entries) and bytes word, then the leaf columns' counts.
struct SharedSums {
  u32 *le, *bytes, *count;
};

__device__ inline SharedSums shared_sums(u32* shared, const CellSums& c) {
  return {shared, shared + c.grid_cols, shared + 2 * c.grid_cols};
}

__device__ inline void clear_shared_sums(const SharedSums& m, const CellSums& c) {
  for (u64 i = threadIdx.x; i < (c.leaf_cols + 1) / 2; i += blockDim.x) m.count[i] = 0;
  for (u64 i = threadIdx.x; i < c.grid_cols; i += blockDim.x) m.le[i] = m.bytes[i] = 0;
}

// A block row's sums (block row s) added to the global ones, and cleared.
// The packed words hold leaves << leaf_shift | entries.
__device__ inline void flush_shared_sums(const SharedSums& m, const CellSums& c, u64 s, u32 b, u32 leaf_shift) {
  const u64 cell_row = (s >> b) * c.grid_cols;
  for (u64 cc = threadIdx.x; cc < c.grid_cols; cc += blockDim.x) {
    const u32 le = m.le[cc];
    if (le == 0) continue;
    atomicAdd(c.le + cell_row + cc,
              (static_cast<unsigned long long>(le >> leaf_shift) << 32) | (le & ((1u << leaf_shift) - 1u)));
    atomicAdd(c.bytes + cell_row + cc, static_cast<unsigned long long>(m.bytes[cc]));
    m.le[cc] = m.bytes[cc] = 0;
  }
}

// The sums kernels' check of an entry (at e0 + k, column col; bit kc of
// `starts` marks a row's first entry): in range, and after its row's entry
// before it (the general path takes a matrix that fails it).
template <class V, class I>
__device__ inline bool sums_entry_ok(const CsrBlockArgs<V, I>& a, const u32* starts, u64 e0, u64 k, u32 kc, I col) {
  const bool row_start = (starts[kc / 32] >> (kc % 32)) & 1u;
  return index_ok(col, a.cols) && (row_start || a.col[e0 + k - 1] < col);
}

__device__ inline void add_leaves(u32 my_leaves, const CellSums& c) {
  const unsigned warp_leaves = __reduce_add_sync(0xFFFFFFFFu, static_cast<unsigned>(my_leaves));
  if (threadIdx.x % 32 == 0 && warp_leaves) atomicAdd(c.leaves, static_cast<unsigned long long>(warp_leaves));
}

// The per-block-row sums in 32 bits: 64-bit shared atomics are compare-and-
// swap loops (perf-log C30). entries < 2^16 (the capacity) bounds leaves too,
// and a leaf takes a few tens of bytes an entry at most: far below 2^32.
template <class V, class I>
__global__ void __launch_bounds__(block_sums_threads) csr_block_sums_kernel(CsrBlockArgs<V, I> a, CellSums c) {
  constexpr u32 T = block_sums_threads;
  extern __shared__ u32 block_sums_shared[];
  const SharedSums sums = shared_sums(block_sums_shared, c);  // packed: leaves << 16 | entries
  u32* count = sums.count;  // leaf column j: bits 16(j&1).. of word j/2
  __shared__ u64 rp[257];
  __shared__ u32 starts[csr_block_capacity_entries / 32];  // bit k: entry e0 + k starts a row
  const u32 b = a.b, d = 1u << b;
  clear_shared_sums(sums, c);
  for (u32 i = threadIdx.x; i < csr_block_capacity_entries / 32; i += T) starts[i] = 0;
  u32 my_leaves = 0;
  __syncthreads();
  for (u64 i = blockIdx.x; i < a.n_block_rows; i += gridDim.x) {
    const u64 s = a.block_rows[i];
    const u64 r0 = s << b;
    const u32 nr = static_cast<u32>(a.rows - r0 < d ? a.rows - r0 : d);
    const u64 first = static_cast<u64>(a.row_ptr[r0]);
    for (u32 k = threadIdx.x; k <= nr; k += T) {
      const u64 p = static_cast<u64>(a.row_ptr[r0 + k]);
      rp[k] = p;
      // A row's first entry as a bit, instead of a search of the row
      // pointers for each entry (the sortedness check below).
      if (k < nr && p - first < csr_block_capacity_entries && p < static_cast<u64>(a.row_ptr[r0 + k + 1])) {
        const u32 at = static_cast<u32>(p - first);
        atomicOr(&starts[at / 32], 1u << (at % 32));
      }
    }
    __syncthreads();
    const u64 e0 = rp[0], m = rp[nr] - e0;
    if (m > csr_block_capacity_entries) {  // (the scout's lists rule it out)
      if (threadIdx.x == 0) atomicOr(a.fallback, 1u);
      return;
    }
    // Entries strided over the threads (coalesced), all loaded before any is
    // counted: bit x of `first_of` marks entry threadIdx.x + x·T as its
    // leaf's first.
    I cv[block_sums_items];
#pragma unroll
    for (u32 x = 0; x < block_sums_items; ++x) {
      const u64 k = threadIdx.x + u64{x} * T;
      cv[x] = k < m ? a.col[e0 + k] : I(0);
    }
    u32 first_of = 0;
    bool bad = false;
#pragma unroll
    for (u32 x = 0; x < block_sums_items; ++x) {
      const u32 k = threadIdx.x + x * T;
      if (k >= m) continue;
      const I col = cv[x];
      if (!sums_entry_ok(a, starts, e0, k, k, col)) {
        bad = true;
        continue;
      }
      const u64 lc = static_cast<u64>(col) >> b;
      const u32 shift = static_cast<u32>(lc & 1) * 16;
      const u32 old = atomicAdd(&count[lc >> 1], 1u << shift);
      if (((old >> shift) & 0xFFFFu) == 0) first_of |= 1u << x;
    }
    if (__syncthreads_or(bad)) {  // the general path words it; nothing here counts any more
      if (threadIdx.x == 0) atomicOr(a.fallback, 2u);
      return;
    }
#pragma unroll
    for (u32 x = 0; x < block_sums_items; ++x) {
      if (!((first_of >> x) & 1u)) continue;
      const u64 lc = static_cast<u64>(cv[x]) >> b;
      const u32 n = (count[lc >> 1] >> (static_cast<u32>(lc & 1) * 16)) & 0xFFFFu;
      atomicAdd(&sums.le[lc >> b], (1u << 16) | n);
      atomicAdd(&sums.bytes[lc >> b], static_cast<u32>(choose_node(n, b, true, sizeof(V)).bytes));
      ++my_leaves;
    }
    __syncthreads();  // every count and row bit read: cleared for the next block row
#pragma unroll
    for (u32 x = 0; x < block_sums_items; ++x)
      if ((first_of >> x) & 1u) count[(static_cast<u64>(cv[x]) >> b) >> 1] = 0;
    for (u32 q = threadIdx.x; q < (m + 31) / 32; q += T) starts[q] = 0;
    flush_shared_sums(sums, c, s, b, 16);
    __syncthreads();  // rp, the counts, the row bits and the block sums are reused by the next block row
  }
  add_leaves(my_leaves, c);
}

// The block rows with an entry under a standard node (the block kernels'
// test for a sorted block row, a.cell_coow set), listed in any order, and
// the room their leaves take: the block kernels then launch for these alone
// (perf-log C31), where each of them otherwise read a whole block row to
// find it had nothing to sort (on R-MAT 2^22 most of ~30 000).
template <class V, class I>
__global__ void csr_mixed_rows_kernel(CsrBlockArgs<V, I> a, unsigned long long* entries,
                                      unsigned long long* n_mixed, u32* mixed) {
  const u32 b = a.b, d = 1u << b;
  for (u64 i = blockIdx.x; i < a.n_block_rows; i += gridDim.x) {
    const u64 s = a.block_rows[i];
    if (a.standard_bands && !a.standard_bands[s >> b]) continue;  // (uniform in the block)
    const u64 r0 = s << b;
    const u32 nr = static_cast<u32>(a.rows - r0 < d ? a.rows - r0 : d);
    const u64 e0 = static_cast<u64>(a.row_ptr[r0]), m = static_cast<u64>(a.row_ptr[r0 + nr]) - e0;
    bool standard = false;
    for (u64 k = threadIdx.x; k < m && !standard; k += blockDim.x)
      standard = under_standard_node(a, s, static_cast<u64>(a.col[e0 + k]) >> b);
    if (__syncthreads_or(standard) && threadIdx.x == 0) {
      atomicAdd(entries, static_cast<unsigned long long>(m));
      mixed[atomicAdd(n_mixed, 1ull)] = static_cast<u32>(s);
    }
  }
}

struct MixedRows {
  u64 entries, rows;  // their entries, and how many (listed)
};

// Per depth-2 row band: whether a block of it that holds entries is a
// standard node's. Where the rule made every block with entries COOW (R-MAT
// 2^22: all 65 536), no block row is mixed, and csr_mixed_rows_kernel reads
// none of them: it read every block row's columns (0.4 ms for the two lists,
// perf-log C34) to learn that.
__global__ void csr_standard_bands_kernel(const unsigned long long* le, const u32* coow, u64 cells, u64 grid_cols,
                                          u32* bands) {
  for (u64 i = blockIdx.x * u64(blockDim.x) + threadIdx.x; i < cells; i += u64(gridDim.x) * blockDim.x)
    if (!coow[i] && le[i] != 0) bands[i / grid_cols] = 1u;  // (every writer writes 1)
}

inline void csr_standard_bands(WorkMemory& w, const unsigned long long* le, const u32* coow, u64 grid_rows,
                               u64 grid_cols, u32* bands) {
  cuda_check(cudaMemsetAsync(bands, 0, grid_rows * sizeof(u32), w.stream()), "cudaMemsetAsync");
  const u64 cells = grid_rows * grid_cols;
  csr_standard_bands_kernel<<<blocks_for(cells), 256, 0, w.stream()>>>(le, coow, cells, grid_cols, bands);
  w.check_launch("CSR standard bands kernel");
}

// counters: two, [entries, rows]; mixed: room for a.n_block_rows.
template <class V, class I>
MixedRows csr_mixed_rows(WorkMemory& w, const CsrBlockArgs<V, I>& a, unsigned long long* counters, u32* mixed) {
  if (a.n_block_rows == 0) return {0, 0};
  cuda_check(cudaMemsetAsync(counters, 0, 2 * sizeof(unsigned long long), w.stream()), "cudaMemsetAsync");
  const unsigned grid = static_cast<unsigned>(a.n_block_rows < (1u << 20) ? a.n_block_rows : (1u << 20));
  csr_mixed_rows_kernel<V, I><<<grid, 128, 0, w.stream()>>>(a, counters, counters + 1, mixed);
  w.check_launch("CSR mixed rows kernel");
  const std::vector<unsigned long long> c = read_back_n(w, counters, 2, "read CSR mixed rows");
  return {c[0], c[1]};
}


// Persistent blocks (each clears its shared counts once, not once a block
// row): as many as stay resident with the sums' shared memory.
template <class Kernel>
unsigned sums_grid(Kernel kernel, u64 shared, u64 block_rows, const char* what) {
  allow_dynamic_shared(kernel, block_sums_shared_limit, what);
  const u64 resident = resident_blocks(kernel, block_sums_threads, shared);
  return static_cast<unsigned>(block_rows < resident ? block_rows : resident);
}

template <class V, class I>
void launch_csr_block_sums(WorkMemory& w, const CsrBlockArgs<V, I>& a, const CellSums& c) {
  if (a.n_block_rows == 0) return;
  const u64 shared = block_sums_shared_bytes(c.leaf_cols, c.grid_cols);
  const unsigned grid =
      sums_grid(csr_block_sums_kernel<V, I>, shared, a.n_block_rows, "cudaFuncSetAttribute(block sums)");
  csr_block_sums_kernel<V, I><<<grid, block_sums_threads, shared, w.stream()>>>(a, c);
  w.check_launch("CSR block sums kernel");
}

// The long block rows (over csr_block_capacity entries each: a scattered
// matrix's heavy rows, a quarter of R-MAT 2^22's entries in 2 254 block rows)
// summed the same way, a chunk of csr_block_capacity entries at a time
// (perf-log C32). Before, their runs were sorted to emit their leaves (~14 M
// on R-MAT, nearly all then dropped for COOW nodes): ~1.7 ms and ~900 MB.
// A leaf's first entry is not known while chunks remain, so a second sweep
// takes each leaf column's count with an atomicAnd that also clears it; the
// one entry that finds it non-zero adds the leaf. Per depth-2 block and
// block row there are at most d leaves of d³ entries and d · (d² · 8 + 16)
// bytes: with b <= 7 (long_sums_apply) leaves << 24 | entries and the bytes
// fit 32 bits, and a leaf column's count (at most d² entries) 16.
inline constexpr bool long_sums_apply(u32 b) { return b <= 7; }

template <class V, class I>
__global__ void __launch_bounds__(block_sums_threads)
    csr_long_sums_kernel(CsrBlockArgs<V, I> a, const u32* list, u64 n_list, CellSums c) {
  constexpr u32 T = block_sums_threads;
  constexpr u32 chunk = csr_block_capacity_entries;
  extern __shared__ u32 block_sums_shared[];
  const SharedSums sums = shared_sums(block_sums_shared, c);  // packed: leaves << 24 | entries
  u32* count = sums.count;  // leaf column j: bits 16(j&1).. of word j/2
  __shared__ u64 rp[257];
  __shared__ u32 starts[chunk / 32];  // bit k: entry e0 + c0 + k starts a row
  const u32 b = a.b, d = 1u << b;
  clear_shared_sums(sums, c);
  u32 my_leaves = 0;
  __syncthreads();
  for (u64 i = blockIdx.x; i < n_list; i += gridDim.x) {
    const u64 s = list[i];
    const u64 r0 = s << b;
    const u32 nr = static_cast<u32>(a.rows - r0 < d ? a.rows - r0 : d);
    for (u32 k = threadIdx.x; k <= nr; k += T) rp[k] = static_cast<u64>(a.row_ptr[r0 + k]);
    __syncthreads();
    const u64 e0 = rp[0], m = rp[nr] - e0;
    bool bad = false;
    for (u64 c0 = 0; c0 < m; c0 += chunk) {
      for (u32 q = threadIdx.x; q < chunk / 32; q += T) starts[q] = 0;
      __syncthreads();
      for (u32 r = threadIdx.x; r < nr; r += T) {
        const u64 p = rp[r] - e0;
        if (p >= c0 && p - c0 < chunk && rp[r] < rp[r + 1]) {
          const u32 at = static_cast<u32>(p - c0);
          atomicOr(&starts[at / 32], 1u << (at % 32));
        }
      }
      __syncthreads();
      I cv[block_sums_items];
#pragma unroll
      for (u32 x = 0; x < block_sums_items; ++x) {
        const u64 k = c0 + threadIdx.x + u64{x} * T;
        cv[x] = k < m ? a.col[e0 + k] : I(0);
      }
#pragma unroll
      for (u32 x = 0; x < block_sums_items; ++x) {
        const u32 kc = threadIdx.x + x * T;
        const u64 k = c0 + kc;
        if (k >= m) continue;
        const I col = cv[x];
        if (!sums_entry_ok(a, starts, e0, k, kc, col)) {
          bad = true;
          continue;
        }
        const u64 lc = static_cast<u64>(col) >> b;
        atomicAdd(&count[lc >> 1], 1u << (static_cast<u32>(lc & 1) * 16));
      }
      __syncthreads();  // the row bits are the next chunk's
    }
    if (__syncthreads_or(bad)) {  // the general path words it
      if (threadIdx.x == 0) atomicOr(a.fallback, 2u);
      return;
    }
    for (u64 k = threadIdx.x; k < m; k += T) {
      const u64 lc = static_cast<u64>(a.col[e0 + k]) >> b;
      const u32 shift = static_cast<u32>(lc & 1) * 16;
      const u32 n = (atomicAnd(&count[lc >> 1], ~(0xFFFFu << shift)) >> shift) & 0xFFFFu;
      if (n == 0) continue;  // another entry of the leaf took it
      atomicAdd(&sums.le[lc >> b], (1u << 24) | n);
      atomicAdd(&sums.bytes[lc >> b], static_cast<u32>(choose_node(n, b, true, sizeof(V)).bytes));
      ++my_leaves;
    }
    __syncthreads();  // every count taken (and so cleared)
    flush_shared_sums(sums, c, s, b, 24);
    __syncthreads();  // rp and the block sums are reused by the next block row
  }
  add_leaves(my_leaves, c);
}

template <class V, class I>
void launch_csr_long_sums(WorkMemory& w, const CsrBlockArgs<V, I>& a, const u32* list, u64 n_list,
                          const CellSums& c) {
  if (n_list == 0) return;
  const u64 shared = block_sums_shared_bytes(c.leaf_cols, c.grid_cols);
  const unsigned grid = sums_grid(csr_long_sums_kernel<V, I>, shared, n_list, "cudaFuncSetAttribute(long sums)");
  csr_long_sums_kernel<V, I><<<grid, block_sums_threads, shared, w.stream()>>>(a, list, n_list, c);
  w.check_launch("CSR long sums kernel");
}

// The counts fit: within block_sums_shared_limit, and with the kernels'
// static shared memory within what this device lets a block opt in to.
template <class V, class I>
bool block_sums_fit(u64 leaf_cols, u64 grid_cols) {
  const u64 dynamic = block_sums_shared_bytes(leaf_cols, grid_cols);
  if (dynamic > block_sums_shared_limit) return false;
  return dynamic_shared_fits(csr_block_sums_kernel<V, I>, dynamic, "cudaFuncGetAttributes(block sums)") &&
         dynamic_shared_fits(csr_long_sums_kernel<V, I>, dynamic, "cudaFuncGetAttributes(long sums)");
}

}  // namespace hisparse::ops::convert_detail
