#pragma once
// The CSR path's block kernels: one thread block per block row of d rows
// that the warp kernel (build_csr_warps.cuh) leaves to them (more than 16
// leaf columns beyond its window of 512), at most csr_block_capacity
// entries each; build_csr.cuh runs them.
//
// A CSR whose rows are sorted (strictly: no duplicates) needs no global sort:
// each block row's entries are sorted by (leaf column, row, column) in the
// thread block, which gives its leaves and every entry's rank in its leaf.
// Pass 1 emits the leaves (tree key, entry count); pass 2 repeats the block
// sort and writes every entry straight into its leaf. Where the block rows
// were summed first (build_csr_block_sums.cuh), the passes launch for the
// block rows with an entry under a standard node alone (pass 2 for all
// where the COOW nodes are filled by a sort, which needs the others' nodes
// and keys; by ranks, build_csr_coow_ranks.cuh, it does not).
#include <cub/block/block_discontinuity.cuh>
#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "build_csr_warps.cuh"

namespace hisparse::ops::convert_detail {

inline constexpr int csr_block_threads = 256;
// Two kernel sizes: block rows of up to 1024 entries sort 4 per thread, larger
// ones (up to 4096) 16; a block sorts no more padding than it must.
inline constexpr u32 csr_small_items = 4;
inline constexpr u32 csr_block_items = 16;
inline constexpr u32 csr_block_capacity = csr_block_threads * csr_block_items;
static_assert(csr_block_capacity == csr_block_capacity_entries, "the warp scout checks the block kernels' capacity");


// One block row per iteration. Entries are loaded blocked (thread t holds
// entries t·X .. t·X + X - 1, in CSR order) and sorted stably by (leaf column
// - the block row's smallest, row): a row's entries of one leaf keep their
// column order, so (leaf column, row, column) order needs only those few bits.
template <class V, class I, u32 X, bool Fill>
__global__ void __launch_bounds__(csr_block_threads) csr_block_rows_kernel(CsrBlockArgs<V, I> a) {
  constexpr int T = csr_block_threads;
  constexpr u32 lo_cap = X == csr_small_items ? 0 : csr_small_items * T, cap = X * T;
  using Sort = CUB_NS_QUALIFIER::BlockRadixSort<u32, T, X, u32>;
  using Scan = CUB_NS_QUALIFIER::BlockScan<u32, T>;
  using Disc = CUB_NS_QUALIFIER::BlockDiscontinuity<u32, T>;
  using Reduce = CUB_NS_QUALIFIER::BlockReduce<u64, T>;
  __shared__ union {
    typename Sort::TempStorage sort;
    typename Scan::TempStorage scan;
    typename Disc::TempStorage disc;
    typename Reduce::TempStorage reduce;
  } tmp;
  __shared__ u64 rp[257];
  __shared__ u64 cmin_s, cmax_s;
  __shared__ u32 base_s;
  const u32 b = a.b, d = 1u << b;
  for (u64 i = blockIdx.x; i < a.n_block_rows; i += gridDim.x) {
    const u64 s = a.block_rows[i];  // a block row the warp kernel left (the scout's list)
    const u64 r0 = s << b;
    const u32 nr = static_cast<u32>(a.rows - r0 < d ? a.rows - r0 : d);
    // Which kernel size takes this block row: two loads decide (the other
    // size skips it without reading its row pointers).
    const u64 m = static_cast<u64>(a.row_ptr[r0 + nr]) - static_cast<u64>(a.row_ptr[r0]);
    if (m > csr_block_capacity) {
      if (!Fill && X == csr_block_items && threadIdx.x == 0) atomicOr(a.fallback, 1u);
    } else if (m > lo_cap && m <= cap) {
      for (u32 i = threadIdx.x; i <= nr; i += T) rp[i] = static_cast<u64>(a.row_ptr[r0 + i]);
      __syncthreads();
      const u64 e0 = rp[0];
      u64 c64[X];
      u32 rl[X];
      bool bad = false;
      u64 cmin = ~u64{0}, cmax = 0;
      // A thread's entries are consecutive: one search for the first one's
      // row, then the row advances.
      u32 row = row_of(rp, nr, e0 + threadIdx.x * X);
      for (u32 x = 0; x < X; ++x) {
        const u32 k = threadIdx.x * X + x;
        c64[x] = 0;
        rl[x] = 0;
        if (k >= m) continue;
        const u64 e = e0 + k;
        while (rp[row + 1] <= e) ++row;
        const I c = a.col[e];
        if (!Fill) bad |= !index_ok(c, a.cols) || (e > rp[row] && !(a.col[e - 1] < c));
        rl[x] = row;
        c64[x] = static_cast<u64>(c) >> b;
        cmin = c64[x] < cmin ? c64[x] : cmin;
        cmax = c64[x] > cmax ? c64[x] : cmax;
      }
      // Summed first: a block row with no entry under a standard node is not
      // sorted; pass 2 writes each entry's COOW node and key in CSR order
      // where the COOW nodes are filled by a sort (by ranks, both passes
      // launch for the mixed block rows alone).
      bool standard = false;
      if (a.cell_coow)
        for (u32 x = 0; x < X; ++x)
          standard |= threadIdx.x * X + x < m && under_standard_node(a, s, c64[x]);
      if (a.cell_coow && !__syncthreads_or(standard)) {
        if (Fill && a.wide_owner) {  // (filled by ranks otherwise: build_csr_coow_ranks.cuh)
          const u64 mm = (u64{1} << (2 * b)) - 1;
          for (u32 x = 0; x < X; ++x) {
            const u32 k = threadIdx.x * X + x;
            if (k >= m) continue;
            const u64 e = e0 + k;
            a.wide_owner[e] = a.cell_owner[block_of(a, s, c64[x])];
            a.wide_key[e] = (static_cast<u32>(((s << b) | rl[x]) & mm) << 16) |
                            static_cast<u32>(static_cast<u64>(a.col[e]) & mm);
          }
        }  // (pass 1 sees the mixed block rows alone: csr_mixed_rows)
      } else {
        const u64 bmin = Reduce(tmp.reduce).Reduce(cmin, MinOp{});
        __syncthreads();
        const u64 bmax = Reduce(tmp.reduce).Reduce(cmax, MaxOp{});
        if (threadIdx.x == 0) {
          cmin_s = bmin;
          cmax_s = bmax;
        }
        __syncthreads();
        const u64 span = cmax_s - cmin_s;
        const u32 spread = span ? 64u - static_cast<u32>(__clzll(static_cast<long long>(span))) : 0u;
        const u32 key_bits = spread + b;  // one more bit marks padding
        if (!Fill && __syncthreads_or(bad || key_bits >= 32)) {
          if (threadIdx.x == 0) atomicOr(a.fallback, 2u);
        } else {
          u32 key[X], idx[X];
          for (u32 x = 0; x < X; ++x) {
            const u32 k = threadIdx.x * X + x;
            idx[x] = k;
            key[x] = k < m ? static_cast<u32>(((c64[x] - cmin_s) << b) | rl[x]) : (1u << key_bits);
          }
          Sort(tmp.sort).Sort(key, idx, 0, static_cast<int>(key_bits) + 1);
          __syncthreads();
          // Blocked: item i = threadIdx.x * X + x, in (leaf, row, column) order.
          u32 leaf[X];
          for (u32 x = 0; x < X; ++x) leaf[x] = key[x] >> b;
          int head[X];
          Disc(tmp.disc).FlagHeads(head, leaf, NotEqual{});
          __syncthreads();
          u32 hflag[X], leaf_idx[X], start_in[X], start[X];
          for (u32 x = 0; x < X; ++x) {
            const u32 i = threadIdx.x * X + x;
            hflag[x] = head[x] && i < m;
            start_in[x] = head[x] ? i : 0;
          }
          u32 leaves;
          Scan(tmp.scan).InclusiveSum(hflag, leaf_idx, leaves);  // an item's leaf index + 1
          for (u32 x = 0; x < X; ++x) --leaf_idx[x];
          __syncthreads();
          Scan(tmp.scan).InclusiveScan(start_in, start, MaxOp{});
          __syncthreads();
          if (!Fill) {
            int tail[X];
            Disc(tmp.disc).FlagTails(tail, leaf, NotEqual{});
            if (threadIdx.x == 0) {
              base_s = static_cast<u32>(atomicAdd(a.leaf_counter, static_cast<unsigned long long>(leaves)));
              a.seg_base[s] = base_s;
            }
            __syncthreads();
            for (u32 x = 0; x < X; ++x) {
              const u32 i = threadIdx.x * X + x;
              if (!tail[x] || i >= m) continue;
              const u32 slot = base_s + leaf_idx[x];
              u64 khi, klo;
              leaf_tree_key(s, cmin_s + leaf[x], b, a.upper_levels, khi, klo);
              a.leaf_key_lo[slot] = klo;
              if (a.leaf_key_hi) a.leaf_key_hi[slot] = khi;
              a.leaf_count[slot] = i - start[x] + 1;
            }
          } else {
            const u32 base = a.seg_base[s];
            for (u32 x = 0; x < X; ++x) {
              const u32 i = threadIdx.x * X + x;
              if (i >= m) continue;
              const u32 t = a.linv[base + leaf_idx[x]];
              const u64 e = e0 + idx[x];
              put_leaf_entry(a, t, a.ltype[t], a.lcount[t], a.loff[t], i - start[x], (s << b) | (key[x] & (d - 1)),
                             static_cast<u64>(a.col[e]), e, a.val[e]);
            }
          }
        }
      }
    }
    __syncthreads();  // rp and tmp are reused by the next block row
  }
}

template <class V, class I, CsrWarpPass Pass>
void launch_csr_warp_rows(WorkMemory& w, const CsrBlockArgs<V, I>& a) {
  constexpr u64 warps = csr_warp_threads / 32;
  const u64 blocks = (a.segments + warps - 1) / warps;
  csr_warp_rows_kernel<V, I, Pass>
      <<<static_cast<unsigned>(blocks < (1u << 20) ? blocks : (1u << 20)), csr_warp_threads, 0, w.stream()>>>(a);
  w.check_launch("CSR warp rows kernel");
}

template <class V, class I, bool Fill>
void launch_csr_block_kernels(WorkMemory& w, const CsrBlockArgs<V, I>& a) {
  // (a launch over every block row, most of them the warp kernel's, cost
  // ~0.1 ms a kernel on the Laplacian 4096²'s 131 072: perf-log C18)
  if (a.n_block_rows == 0) return;
  const unsigned grid = static_cast<unsigned>(a.n_block_rows < (1u << 20) ? a.n_block_rows : (1u << 20));
  csr_block_rows_kernel<V, I, csr_small_items, Fill><<<grid, csr_block_threads, 0, w.stream()>>>(a);
  csr_block_rows_kernel<V, I, csr_block_items, Fill><<<grid, csr_block_threads, 0, w.stream()>>>(a);
  w.check_launch("CSR block rows kernel");
}

template <class V, class I, bool Fill>
void launch_csr_block_rows(WorkMemory& w, const CsrBlockArgs<V, I>& a) {
  launch_csr_warp_rows<V, I, Fill ? CsrWarpPass::fill : CsrWarpPass::count>(w, a);
  launch_csr_block_kernels<V, I, Fill>(w, a);
}

}  // namespace hisparse::ops::convert_detail
