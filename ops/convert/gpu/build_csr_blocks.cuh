#pragma once
// The CSR path of the GPU build: one thread block per block row of d rows
// that the warp kernel (build_csr_warps.cuh, run first) leaves.
//
// A CSR whose rows are sorted (strictly: no duplicates) needs no global sort:
// each block row's entries, at most csr_block_capacity of them, are sorted by
// (leaf column, row, column) in a thread block, which gives its leaves and
// every entry's rank in its leaf. Pass 1 emits the leaves (tree key, entry
// count); the leaves alone are sorted and planned (build_skeleton.cuh); pass 2
// repeats the block sort and writes every entry straight into its leaf. The
// CSR is read twice and the pool written once: no per-entry work arrays
// (but for long block rows: build_csr_long_rows.cuh, ~8 bytes an entry and
// ~60 a run of a row in one leaf column).
//
// A block row too long for a block and too wide for a warp (a dense row)
// takes the long-row path (build_csr_long_rows.cuh): its runs alone sorted.
// Where the skeleton has COOW nodes (R-MAT), every path's pass 2 records each
// entry's depth-2 node (by CSR index) and, under a COOW node, its key there;
// one stable radix sort by node then lists every COOW node's entries in CSR
// order, its row-major order (fill_coow_nodes_csr, below). On a
// scattered matrix the COOW nodes are decided before the leaves are sorted,
// and their leaves leave the skeleton (build_coow_prune.cuh).
//
// Anything else (an unsorted row, a duplicate, a bad index, a block row
// spanning over 2^(31-b) leaf columns) returns nothing, and the caller takes
// the general path, which handles it all (and words the errors).
#include <cub/block/block_discontinuity.cuh>
#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include <bit>
#include <optional>
#include <vector>

#include "build_coow_prune.cuh"
#include "build_csr_block_sums.cuh"
#include "build_csr_long_rows.cuh"
#include "build_csr_warps.cuh"
#include "build_skeleton.cuh"

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
      // sorted; pass 2 writes each entry's COOW node and key in CSR order.
      bool standard = false;
      if (a.cell_coow)
        for (u32 x = 0; x < X; ++x)
          standard |= threadIdx.x * X + x < m && !a.cell_coow[(s >> b) * a.grid_cols + (c64[x] >> b)];
      if (a.cell_coow && !__syncthreads_or(standard)) {
        if (Fill) {
          const u64 mm = (u64{1} << (2 * b)) - 1;
          for (u32 x = 0; x < X; ++x) {
            const u32 k = threadIdx.x * X + x;
            if (k >= m) continue;
            const u64 e = e0 + k;
            a.wide_owner[e] = a.cell_owner[(s >> b) * a.grid_cols + (c64[x] >> b)];
            a.wide_key[e] = (static_cast<u32>(((s << b) | rl[x]) & mm) << 16) |
                            static_cast<u32>(static_cast<u64>(a.col[e]) & mm);
          }
        } else if (threadIdx.x == 0) {
          atomicAdd(a.coow_block_rows, 1ull);
        }
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

// The whole CSR path; nothing (and nothing left allocated) where it does not
// apply.
// The CSR path's COOW entries: per CSR entry, its
// depth-2 node (`owner`) and, where that is a COOW node, its key. No per-node
// sort of keys: one stable radix sort of the owners over the node index's
// bits puts each COOW node's entries in CSR order, its row-major order.
struct CsrWideEntries {
  Array<u32> owner, key;
};

template <class V>
void fill_coow_nodes_csr(WorkMemory& w, const Skeleton& k, CsrWideEntries& e, u64 n, const V* val,
                         std::byte* pool) {
  if (!k.coow_nodes) return;
  const cudaStream_t st = w.stream();
  const Level& v = k.lv[k.L - 2];
  Array<u32> owner2(w, n), entry2(w, n);
  {
    Array<u32> idx(w, n);
    iota_kernel<<<blocks_for(n), 256, 0, st>>>(idx.get(), n);
    radix_sort_pairs(w, e.owner.get(), owner2.get(), idx.get(), entry2.get(), n,
                     static_cast<int>(bit_width_of(v.nodes > 1 ? v.nodes - 1 : u64{1})));
  }
  e.owner.release();
  fill_coow_csr_kernel<V><<<blocks_for(n), 256, 0, st>>>(owner2.get(), entry2.get(), e.key.get(), n, v.type.get(),
                                                         v.first_leaf.get(), k.entry_scan.get(), v.bytes.get(), v.base,
                                                         val, pool);
  w.check_launch("COOW fill kernel");
  e.key.release();
  w.phase("COOW fill");
}

template <class V, class I>
std::optional<DeviceMatrix<V>> build_csr_blocks(WorkMemory& w, const DeviceCsrView<V, I>& in, const Shape& shape,
                                                const BuildOptions& options, ConvertStats* stats) {
  const cudaStream_t st = w.stream();
  const u64 n = in.nnz;
  const u32 b = shape.log2_node_size, L = shape.depth;
  const u64 segments = (in.rows + (u64{1} << b) - 1) >> b;
  // Mostly empty block rows are not worth a warp or a block each, and their
  // per-block-row arrays (77 bytes each: the warp path's 512-column presence
  // masks) must stay inside convert_work_bound: at most one block row per
  // entry (plus slack) takes this path.
  if (n == 0 || segments > n + 4096 || segments > 0xFFFFFFFFull) return std::nullopt;  // (u32 block-row lists)
  Skeleton k;
  k.b = b;
  k.L = L;
  k.key_hi = 2 * b * (L - 1) > 64;
  // The passes' counters side by side, so that each step reads back what it
  // needs in one round trip (perf-log C20): [0] the fallback flags (in its
  // low 32 bits), [1] pass 1's leaves, [2, 3] the scout's totals, [4] long
  // block rows, [5] the block kernels' block rows.
  // [6] the leaves of the block rows summed first, [7] those of them never
  // sorted (build_csr_block_sums.cuh).
  // [8] the long block rows' entries, [9] the entries of the block rows
  // sorted after the sums.
  Array<unsigned long long> counters(w, 10);
  cuda_check(cudaMemsetAsync(counters.get(), 0, 10 * sizeof(unsigned long long), st), "cudaMemsetAsync");
  static_assert(std::endian::native == std::endian::little, "the fallback flags are counters[0]'s low half");
  unsigned* fallback = reinterpret_cast<unsigned*>(counters.get());
  const auto falls_back = [](unsigned long long counters0) { return (counters0 & 0xFFFFFFFFull) != 0; };
  unsigned long long *counter = counters.get() + 1, *totals = counters.get() + 2;
  Array<u32> seg_base(w, segments);
  Array<std::uint8_t> taken(w, segments);
  Array<u64> seg_cmin(w, segments), seg_present(w, segments * csr_span_words);
  // Long block rows have more than csr_block_capacity entries each.
  const u64 long_cap = n / csr_block_capacity + 1;
  Array<u32> long_rows(w, long_cap);
  unsigned long long *long_count = counters.get() + 4, *block_count = counters.get() + 5;
  Array<u32> block_rows(w, segments);
  CsrBlockArgs<V, I> a{in.row_ptr, in.col, in.val, in.rows, in.cols, segments, b, L - 1,
                       fallback, counter, seg_base.get(), nullptr, nullptr, nullptr,
                       totals, taken.get(), seg_cmin.get(), seg_present.get(),
                       nullptr, nullptr, nullptr, nullptr, 0, nullptr,
                       long_rows.get(), long_count, long_cap};
  // The scout keeps the leaf counts of block rows of at most 32 leaves
  // where that costs at most 4 bytes per entry (a block row of 32 entries or
  // more on average: every banded matrix).
  Array<u32> seg_counts;
  if (segments * csr_warp_leaves <= n) {
    seg_counts = Array<u32>(w, segments * csr_warp_leaves);
    a.seg_counts = seg_counts.get();
  }
  a.block_rows = block_rows.get();
  a.block_count = block_count;
  a.long_entries = counters.get() + 8;
  launch_csr_warp_rows<V, I, CsrWarpPass::scout>(w, a);
  const std::vector<unsigned long long> scouted = read_back_n(w, counters.get(), 9, "read CSR scout counters");
  if (falls_back(scouted[0])) return std::nullopt;
  const u64 n_long = scouted[4];
  a.n_block_rows = scouted[5];
  w.phase("CSR rows scouted");
  // A scattered matrix whose entries lie mostly in the block kernels' block
  // rows (R-MAT) sums those first, per depth-2 block, without their leaves
  // (build_csr_block_sums.cuh), where the counts fit in shared memory.
  const u64 d2 = u64{1} << (2 * b);
  CellSums sums{nullptr, nullptr, counters.get() + 6, (in.cols + d2 - 1) / d2, (in.cols + (u64{1} << b) - 1) >> b};
  const u64 cells = ((in.rows + d2 - 1) / d2) * sums.grid_cols;
  // (scouted[3] - scouted[8]: the block kernels' entries; scouted[2] +
  // scouted[3]: a bound on the leaves, which the prune needs to outnumber the
  // blocks: the blocks' sums stay inside the work bound)
  bool sums_first = options.wide_nodes && L >= 2 && !k.key_hi && a.n_block_rows > 0 &&
                    2 * (scouted[3] - scouted[8]) >= n && cells <= scouted[2] + scouted[3] &&
                    cells < 0xFFFFFFFFull && block_sums_fit<V, I>(sums.leaf_cols, sums.grid_cols);
  // The leaf arrays: room for the warp kernel's leaves and a leaf per entry
  // of the other block rows; summed first, of the long ones alone, grown once
  // the rule has said which block rows emit theirs.
  u64 room = scouted[2] + (sums_first ? scouted[8] : scouted[3]);
  Array<u32> count_by_leaf(w, room);
  k.klo = Array<u64>(w, room);
  if (k.key_hi) k.khi = Array<u64>(w, room);
  a.leaf_key_lo = k.klo.get();
  a.leaf_key_hi = k.key_hi ? k.khi.get() : nullptr;
  a.leaf_count = count_by_leaf.get();
  // (without k.khi: sums first only where the keys fit in 64 bits)
  const auto grow_leaf_arrays = [&](u64 need, u64 held) {
    if (need <= room) return;
    Array<u32> count2(w, need);
    Array<u64> klo2(w, need);
    if (held) {
      cuda_check(cudaMemcpyAsync(count2.get(), count_by_leaf.get(), held * sizeof(u32), cudaMemcpyDeviceToDevice, st),
                 "cudaMemcpyAsync");
      cuda_check(cudaMemcpyAsync(klo2.get(), k.klo.get(), held * sizeof(u64), cudaMemcpyDeviceToDevice, st),
                 "cudaMemcpyAsync");
    }
    count_by_leaf = std::move(count2);
    k.klo = std::move(klo2);
    a.leaf_key_lo = k.klo.get();
    a.leaf_count = count_by_leaf.get();
    room = need;
  };
  PresummedCells pre;
  if (sums_first) {
    pre.le = Array<unsigned long long>(w, cells);
    pre.bytes = Array<unsigned long long>(w, cells);
    cuda_check(cudaMemsetAsync(pre.le.get(), 0, cells * sizeof(unsigned long long), st), "cudaMemsetAsync");
    cuda_check(cudaMemsetAsync(pre.bytes.get(), 0, cells * sizeof(unsigned long long), st), "cudaMemsetAsync");
    sums.le = pre.le.get();
    sums.bytes = pre.bytes.get();
    launch_csr_warp_rows<V, I, CsrWarpPass::count>(w, a);
    launch_csr_block_sums<V, I>(w, a, sums);
  } else {
    launch_csr_block_rows<V, I, false>(w, a);
  }
  // The fallback flags and the leaf counts together; where there are long
  // rows, the flags first: they are sorted only for a matrix that does not
  // fall back (and refuse bad rows themselves).
  std::vector<unsigned long long> counted = read_back_n(w, counters.get(), 8, "read CSR leaf count");
  if (falls_back(counted[0])) return std::nullopt;
  seg_counts.release();
  a.seg_counts = nullptr;
  LongRows long_part;
  if (n_long > 0) {
    if (!long_rows_leaves(w, a, long_rows.get(), n_long, long_part)) return std::nullopt;
    counted[1] = read_back(w, counter, "read leaf count");
  }
  k.NL = counted[1];
  u64 leaf_blocks = k.NL + (sums_first ? counted[6] : 0);
  w.phase("CSR block rows: leaves");
  CoowPrune pruned;
  bool was_pruned = false;
  bool bad_late = false;
  if (sums_first) {
    pre.leaves = counted[6];
    // Once the rule has run: the leaves of the block rows with an entry under
    // a standard node (the others are counted and skipped).
    pre.emit = [&](const u32* coow, u64 grid_cols) -> std::optional<u64> {
      a.cell_coow = coow;
      a.grid_cols = grid_cols;
      a.coow_block_rows = counters.get() + 7;
      grow_leaf_arrays(k.NL + csr_mixed_entries(w, a, counters.get() + 9), k.NL);
      pre.count = count_by_leaf.get();
      launch_csr_block_kernels<V, I, false>(w, a);
      const std::vector<unsigned long long> c = read_back_n(w, counters.get(), 8, "read CSR mixed leaves");
      if (falls_back(c[0])) {
        bad_late = true;
        return std::nullopt;
      }
      counted[7] = c[7];
      return c[1];
    };
    was_pruned = prune_coow_leaves<V>(w, k, shape, options, n, count_by_leaf.get(), pruned, &pre);
    if (bad_late) return std::nullopt;
    if (!was_pruned) {
      // No COOW node after all (or too few leaves for the prune): the block
      // rows' leaves as without the sums.
      sums_first = false;
      a.cell_coow = nullptr;
      a.coow_block_rows = nullptr;
      grow_leaf_arrays(scouted[2] + scouted[3], k.NL);
      launch_csr_block_kernels<V, I, false>(w, a);
      counted = read_back_n(w, counters.get(), 2, "read CSR leaf count");
      if (falls_back(counted[0])) return std::nullopt;
      k.NL = leaf_blocks = counted[1];
    }
  }
  if (!was_pruned && !prune_coow_leaves<V>(w, k, shape, options, n, count_by_leaf.get(), pruned)) {
    Array<u32> lperm = sort_leaves(w, k);
    choose_leaves<V>(w, k, lperm.get(), count_by_leaf.get());
  }
  count_by_leaf.release();
  w.phase("leaves sorted");
  plan_skeleton<V>(w, k, options);
  DeviceBytes pool = allocate_pool<V>(w, k);
  CsrWideEntries wide;
  if (k.coow_nodes) {
    wide.owner = Array<u32>(w, n);
    wide.key = Array<u32>(w, n);
    a.leaf_parent = k.lv[L - 2].child_parent.get();
    a.wide_owner = wide.owner.get();
    a.wide_key = wide.key.get();
  }
  Array<u32> cell_owner;
  if (sums_first) {
    cell_owner = Array<u32>(w, cells);
    prune_cell_owner_kernel<<<blocks_for(cells), 256, 0, st>>>(pruned.coow.get(), pruned.coow_rank.get(), cells,
                                                               pruned.kept, k.linv.get(),
                                                               k.lv[L - 2].child_parent.get(), cell_owner.get());
    w.check_launch("COOW block owners kernel");
    a.cell_owner = cell_owner.get();
  }
  w.phase("pool allocated");
  a.linv = pruned.coow.get() ? pruned.slot_linv.get() : k.linv.get();
  a.ltype = k.ltype.get();
  a.lcount = k.lcount.get();
  a.loff = k.lbytes.get();
  a.leaf_base = k.leaf_base;
  a.pool = pool.as<std::byte>();
  launch_csr_block_rows<V, I, true>(w, a);
  long_rows_fill(w, a, long_part);
  w.phase("CSR block rows: fill");
  fill_coow_nodes_csr<V>(w, k, wide, n, in.val, pool.as<std::byte>());
  const NodeRef root = finish_pool<V>(w, k, pool.as<std::byte>(), options);
  if (stats) {
    stats->entries = n;
    stats->leaves = leaf_blocks;
    stats->sorted_block_rows = a.n_block_rows - (sums_first ? counted[7] : 0) + n_long;
    stats->coow_block_rows = sums_first ? counted[7] : 0;
  }
  return DeviceMatrix<V>::adopt(std::move(pool), shape, n, root, false, V(1), options.wide_nodes);
}

}  // namespace hisparse::ops::convert_detail
