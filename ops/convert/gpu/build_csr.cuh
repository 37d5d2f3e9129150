#pragma once
// The CSR path of the GPU build, step by step: the warp kernel
// (build_csr_warps.cuh) takes the block rows it can, one thread block each
// takes the others (build_csr_blocks.cuh).
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
// Where the skeleton has COOW nodes (R-MAT), their entries are placed last:
// where the prune decided them per depth-2 block, by their ranks in CSR order
// within their row band (build_csr_coow_ranks.cuh); otherwise every path's
// pass 2 records each entry's depth-2 node (by CSR index) and, under a COOW
// node, its key there, and one stable radix sort by node lists every COOW
// node's entries in CSR order, its row-major order (fill_coow_nodes_csr, below). On a
// scattered matrix the COOW nodes are decided before the leaves are sorted,
// and their leaves leave the skeleton (build_coow_prune.cuh).
//
// Anything else (an unsorted row, a duplicate, a bad index, a block row
// spanning over 2^(31-b) leaf columns) returns nothing, and the caller takes
// the general path, which handles it all (and words the errors).
#include <bit>
#include <optional>
#include <vector>

#include "build_coow_prune.cuh"
#include "build_csr_block_sums.cuh"
#include "build_csr_blocks.cuh"
#include "build_csr_coow_ranks.cuh"
#include "build_csr_long_rows.cuh"
#include "build_csr_warps.cuh"
#include "build_skeleton.cuh"

namespace hisparse::ops::convert_detail {

// The CSR path's COOW entries: per CSR entry, its depth-2 node (`owner`)
// and, where that is a COOW node, its key. No per-node sort of keys: one
// stable radix sort of the owners over the node index's bits puts each COOW
// node's entries in CSR order, its row-major order.
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

// The whole CSR path; nothing (and nothing left allocated) where it does not
// apply.
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
  // [6] the leaves of the block rows summed first (build_csr_block_sums.cuh),
  // [7] unused.
  // [8] the long block rows' entries, [9, 10] the entries and the number of
  // the block rows sorted after the sums (csr_mixed_rows).
  Array<unsigned long long> counters(w, 11);
  cuda_check(cudaMemsetAsync(counters.get(), 0, 11 * sizeof(unsigned long long), st), "cudaMemsetAsync");
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
  const auto [grid_rows, grid_cols] = depth2_grid(in.rows, in.cols, b);
  CellSums sums{nullptr, nullptr, counters.get() + 6, grid_cols, (in.cols + (u64{1} << b) - 1) >> b};
  const u64 cells = grid_rows * grid_cols;
  // (scouted[3] - scouted[8]: the block kernels' entries; scouted[2] +
  // scouted[3]: a bound on the leaves, which the prune needs to outnumber the
  // blocks: the blocks' sums stay inside the work bound)
  bool sums_first = options.wide_nodes && L >= 2 && !k.key_hi && a.n_block_rows > 0 &&
                    2 * (scouted[3] - scouted[8]) >= n && cells <= scouted[2] + scouted[3] &&
                    cells < 0xFFFFFFFFull && block_sums_fit<V, I>(sums.leaf_cols, sums.grid_cols);
  // The long block rows are summed too (perf-log C32) where their entries
  // under COOW nodes will be filled by ranks: then only those of them with
  // an entry under a standard node emit leaves, once the rule has run.
  // (ranks_fit: the fill by ranks' own limits, which by_ranks below needs too)
  const bool ranks_fit = grid_cols <= coow_rank_bins && 2 * b <= 16 && coow_fill_fits<V, I>(grid_cols);
  bool long_sums = sums_first && n_long > 0 && long_sums_apply(b) && ranks_fit;
  // The leaf arrays: room for the warp kernel's leaves and a leaf per entry
  // of the other block rows; summed first, of the long ones alone (or none),
  // grown once the rule has said which block rows emit theirs.
  u64 room = scouted[2] + (long_sums ? 0 : sums_first ? scouted[8] : scouted[3]);
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
    if (long_sums) launch_csr_long_sums<V, I>(w, a, long_rows.get(), n_long, sums);
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
  if (n_long > 0 && !long_sums) {
    if (!long_rows_leaves(w, a, long_rows.get(), n_long, long_part)) return std::nullopt;
    counted[1] = read_back(w, counter, "read leaf count");
  }
  k.NL = counted[1];
  u64 leaf_blocks = k.NL + (sums_first ? counted[6] : 0);
  w.phase("CSR block rows: leaves");
  CoowPrune pruned;
  bool was_pruned = false;
  bool bad_late = false;
  // The block rows with an entry under a standard node, listed once the rule
  // has run: the block kernels' passes launch for these alone.
  Array<u32> mixed_rows, mixed_long_rows, standard_bands;
  u64 n_mixed = 0, n_mixed_long = 0;
  const auto only_mixed = [&](CsrBlockArgs<V, I> m) {
    m.block_rows = mixed_rows.get();
    m.n_block_rows = n_mixed;
    return m;
  };
  if (sums_first) {
    pre.leaves = counted[6];
    mixed_rows = Array<u32>(w, a.n_block_rows);
    if (long_sums) mixed_long_rows = Array<u32>(w, n_long);
    // Once the rule has run: the leaves of the mixed block rows, long ones
    // (by their runs, build_csr_long_rows.cuh) included where summed.
    pre.emit = [&](const u32* coow, const unsigned long long* le,
                   u64 /* the prune's grid_cols: this grid's */) -> std::optional<u64> {
      a.cell_coow = coow;
      a.grid_cols = grid_cols;
      standard_bands = Array<u32>(w, grid_rows);
      csr_standard_bands(w, le, coow, grid_rows, grid_cols, standard_bands.get());
      a.standard_bands = standard_bands.get();
      const MixedRows mixed = csr_mixed_rows(w, a, counters.get() + 9, mixed_rows.get());
      n_mixed = mixed.rows;
      u64 long_entries = 0;
      if (long_sums) {
        CsrBlockArgs<V, I> al = a;
        al.block_rows = long_rows.get();
        al.n_block_rows = n_long;
        const MixedRows mixed_long = csr_mixed_rows(w, al, counters.get() + 9, mixed_long_rows.get());
        n_mixed_long = mixed_long.rows;
        long_entries = mixed_long.entries;
      }
      grow_leaf_arrays(k.NL + mixed.entries + long_entries, k.NL);
      pre.count = count_by_leaf.get();
      launch_csr_block_kernels<V, I, false>(w, only_mixed(a));
      const std::vector<unsigned long long> c = read_back_n(w, counters.get(), 2, "read CSR mixed leaves");
      if (falls_back(c[0])) {
        bad_late = true;
        return std::nullopt;
      }
      u64 leaves = c[1];
      if (n_mixed_long > 0) {
        if (!long_rows_leaves(w, a, mixed_long_rows.get(), n_mixed_long, long_part)) {
          bad_late = true;
          return std::nullopt;
        }
        leaves = read_back(w, counter, "read leaf count");
      }
      return leaves;
    };
    was_pruned = prune_coow_leaves<V>(w, k, shape, options, n, count_by_leaf.get(), pruned, &pre);
    if (bad_late) return std::nullopt;
    if (!was_pruned) {
      // No COOW node after all (or too few leaves for the prune): the block
      // rows' leaves as without the sums.
      sums_first = false;
      a.cell_coow = nullptr;
      a.standard_bands = nullptr;
      mixed_rows.release();
      mixed_long_rows.release();
      standard_bands.release();
      grow_leaf_arrays(scouted[2] + scouted[3], k.NL);
      launch_csr_block_kernels<V, I, false>(w, a);
      counted = read_back_n(w, counters.get(), 2, "read CSR leaf count");
      if (falls_back(counted[0])) return std::nullopt;
      if (long_sums) {  // the long block rows' leaves too
        long_sums = false;
        if (!long_rows_leaves(w, a, long_rows.get(), n_long, long_part)) return std::nullopt;
        counted[1] = read_back(w, counter, "read leaf count");
      }
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
  // COOW nodes whose blocks the prune decided are filled by ranks, without
  // per-entry arrays (build_csr_coow_ranks.cuh); the others by a sort. (The
  // skeleton's COOW nodes are exactly the prune's stand-ins: the same rule on
  // the same sums; should the two ever differ, the sort takes them, except
  // where block rows were summed and never sorted: those send their entries
  // to the stand-ins' nodes, so the general path takes the matrix.)
  if (sums_first && k.coow_nodes != pruned.stand_ins) return std::nullopt;
  const bool by_ranks = k.coow_nodes && pruned.coow.get() && k.coow_nodes == pruned.stand_ins && ranks_fit;
  // Summed long block rows leave their COOW entries to the fill by ranks
  // (long_sums implies every condition of by_ranks that the guard above does
  // not: this cannot fire, and stays as the statement of that dependence).
  if (long_sums && !by_ranks) return std::nullopt;
  CsrWideEntries wide;
  if (k.coow_nodes && !by_ranks) {
    wide.owner = Array<u32>(w, n);
    wide.key = Array<u32>(w, n);
    a.leaf_parent = k.lv[L - 2].child_parent.get();
    a.wide_owner = wide.owner.get();
    a.wide_key = wide.key.get();
  }
  Array<u32> cell_owner;
  if (sums_first || by_ranks) {
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
  if (sums_first && by_ranks) {  // the others' entries are the COOW fill's alone
    launch_csr_warp_rows<V, I, CsrWarpPass::fill>(w, a);
    launch_csr_block_kernels<V, I, true>(w, only_mixed(a));
  } else {
    launch_csr_block_rows<V, I, true>(w, a);
  }
  long_rows_fill(w, a, long_part);
  w.phase("CSR block rows: fill");
  if (by_ranks)
    fill_coow_nodes_by_ranks<V, I>(w, in.row_ptr, in.col, in.val, in.rows, b, grid_rows, grid_cols, cell_owner.get(),
                                   k.lv[L - 2], k.entry_scan.get(), pool.as<std::byte>());
  else
    fill_coow_nodes_csr<V>(w, k, wide, n, in.val, pool.as<std::byte>());
  const NodeRef root = finish_pool<V>(w, k, pool.as<std::byte>(), options);
  if (stats) {
    stats->entries = n;
    stats->leaves = leaf_blocks;
    stats->sorted_block_rows =
        (sums_first ? n_mixed : a.n_block_rows) + (long_sums ? n_mixed_long : n_long);
    stats->coow_block_rows = sums_first ? a.n_block_rows - n_mixed + (long_sums ? n_long - n_mixed_long : 0) : 0;
  }
  return DeviceMatrix<V>::adopt(std::move(pool), shape, n, root, false, V(1), options.wide_nodes);
}

}  // namespace hisparse::ops::convert_detail
