#pragma once
// The GPU extraction: node pool -> the logical matrix op(A)·scale as CSR or
// COO, sorted row-major (formats/src/builder.cpp's to_csr/to_coo is the
// specification).
//
// 1. Walk the tree level by level (a frontier of nodes with their block
//    coordinates; a scan of child counts places the next level), keeping the
//    leaves and COOW nodes in tree order.
// 2. Every leaf writes its entries at its scanned position (one warp each).
// 3. A stable radix sort by logical row. For a fixed row, tree order already
//    is column order (the tree key orders a row's blocks by column digits,
//    nodes store entries row-major, and the same holds with rows and columns
//    exchanged for a transposed state), so one sort by row is all it takes.
// Most pools take the row path instead of 2 and 3 (extract_rows.cuh): the
// leaves (and COOW nodes' slices) sorted by block row, a warp per block row
// writing its rows in place.
#include <algorithm>
#include <bit>
#include <limits>
#include <string>

#include "extract_bands.cuh"
#include "extract_kernels.cuh"
#include "extract_row_tasks.cuh"
#include "extract_rows.cuh"
#include "hisparse/ops/convert_gpu.hpp"
#include "work_memory.cuh"

namespace hisparse::ops::convert_detail {

template <class I>
void check_index_range(index_t rows, index_t cols, std::uint64_t nnz) {
  constexpr std::uint64_t lim = static_cast<std::uint64_t>(std::numeric_limits<I>::max());
  if (rows > lim || cols > lim || nnz > lim)
    throw LimitError(std::string("a ") + std::to_string(rows) + " x " + std::to_string(cols) + " matrix with " +
                     std::to_string(nnz) + " entries does not fit " + std::to_string(sizeof(I) * 8) +
                     "-bit signed indices");
}

// The row path (extract_rows.cuh) where no block row is so long that its
// tasks would serialise the call (more than 2^16 entries a block row on
// average; with COOW nodes, more than 2^18 in any: one slice can hold a hub's
// whole block row) and the frontier holds leaves only or the
// state is plain (COOW nodes sliced by block row); false, with nothing
// written, elsewhere. A pool whose entries differ from the matrix's count (a
// corrupt pool) is an Error; on the one-pass path the output arrays are then
// already partly written (never past their n entries), on the two passes not.
template <class V, class I, class Out>
bool extract_rows(WorkMemory& w, const DeviceMatrix<V>& a, const Frontier& f, I* row_out, I* row_ptr, I* col_out,
                  Out* val_out) {
  const cudaStream_t st = w.stream();
  const u32 b = a.shape().log2_node_size;
  const u64 n = a.nnz(), rows = a.rows(), blocks = (rows + (u64{1} << b) - 1) >> b;
  // Per-row arrays no larger than the general path's per-entry ones (the
  // documented work bound).
  if (rows > 2 * n + 4096 || blocks >= 0xFFFFFFFFull) return false;
  unsigned kinds = 0;
  {
    Array<unsigned> k(w, 1);
    cuda_check(cudaMemsetAsync(k.get(), 0, sizeof(unsigned), st), "cudaMemsetAsync");
    coow_kinds_kernel<<<blocks_for(f.size), 256, 0, st>>>(f, k.get());
    w.check_launch("COOW check kernel");
    kinds = read_back(w, k.get(), "read COOW check");
  }
  const bool coow = (kinds & coow_seen) != 0;
  if (coow && a.transposed()) return false;  // a COOW node's columns are not one range of it
  // COOW nodes alone (R-MAT's pools): by row windows (extract_bands.cuh), where that applies.
  // (before the row path's limit on long block rows: a hub's rows are windows alone here)
  if (kinds == coow_seen && extract_bands<V, I, Out>(w, a, f, row_out, row_ptr, col_out, val_out)) return true;
  if (n > (blocks << 16)) return false;  // no block row so long that its warp serialises the call
  // The items (leaves, and the slices of COOW nodes) grouped by logical block
  // row, stably (tree order within one).
  u64 items = f.size;
  Array<u32> item_node, item_lo, item_hi;
  Array<u64> key;
  if (coow) {
    Array<u64> cnt(w, f.size + 1), off(w, f.size + 1);
    slice_count_kernel<<<blocks_for(32 * (f.size + 1)), 256, 0, st>>>(f, a.pool(), b, cnt.get());
    exclusive_sum(w, cnt.get(), off.get(), f.size + 1);
    items = read_back(w, off.get() + f.size, "read extraction items");
    // (every item holds an entry: items <= n, inside the work bound)
    item_node = Array<u32>(w, items);
    item_lo = Array<u32>(w, items);
    item_hi = Array<u32>(w, items);
    key = Array<u64>(w, items);
    slice_emit_kernel<<<blocks_for(32 * f.size), 256, 0, st>>>(f, a.pool(), b, off.get(), item_node.get(),
                                                               item_lo.get(), key.get());
    slice_ends_kernel<<<blocks_for(items), 256, 0, st>>>(f, a.pool(), item_node.get(), item_lo.get(), items,
                                                         item_hi.get());
    w.check_launch("COOW slice kernels");
  }
  Array<u32> leaf(w, items), first(w, blocks + 1);
  {
    Array<u32> idx(w, items);
    Array<u64> sorted(w, items);
    iota_kernel<<<blocks_for(items), 256, 0, st>>>(idx.get(), items);
    radix_sort_pairs(w, coow ? key.get() : a.transposed() ? f.C : f.R, sorted.get(), idx.get(), leaf.get(), items,
                     static_cast<int>(blocks > 1 ? std::bit_width(blocks - 1) : 1));
    block_row_first_kernel<<<blocks_for(blocks + 1), 256, 0, st>>>(sorted.get(), items, blocks, first.get());
    w.check_launch("block row kernel");
  }
  key.release();
  // The tasks (extract_rows.cuh): a block row, or a chunk of a long one's items.
  const u64 task_bound = blocks + items / extract_chunk_items + 1;
  Array<u64> task_first(w, blocks + 1), chunk_first(w, blocks + 1);
  Array<u32> task_q(w, task_bound);
  {
    Array<u64> tasks(w, blocks + 1), chunks(w, blocks + 1);
    task_count_kernel<<<blocks_for(blocks + 1), 256, 0, st>>>(first.get(), blocks, tasks.get(), chunks.get());
    exclusive_sum(w, tasks.get(), task_first.get(), blocks + 1);
    exclusive_sum(w, chunks.get(), chunk_first.get(), blocks + 1);
    task_emit_kernel<<<blocks_for(blocks), 256, 0, st>>>(task_first.get(), blocks, task_q.get());
    w.check_launch("task kernels");
  }
  // (chunks <= 2 items / extract_chunk_items: d / 16 bytes an item at most)
  const u64 chunk_slices = read_back(w, chunk_first.get() + blocks, "read chunk count");
  Array<u32> chunk_counts(w, chunk_slices << b);
  w.phase("leaves by block row");
  RowArgs<V, I, Out> args{f,
                          a.pool(),
                          b,
                          a.transposed(),
                          a.scale(),
                          a.scale() == V(1),
                          false,
                          rows,
                          blocks,
                          n,
                          leaf.get(),
                          item_node.get(),
                          item_lo.get(),
                          item_hi.get(),
                          first.get(),
                          task_q.get(),
                          task_first.get(),
                          chunk_first.get(),
                          chunk_counts.get(),
                          task_bound,
                          nullptr,
                          nullptr,
                          nullptr,
                          nullptr,
                          nullptr,
                          nullptr,
                          row_out,
                          col_out,
                          val_out};
  constexpr u64 warps = extract_row_threads / 32;
  const auto grid = static_cast<unsigned>(std::min<u64>((task_bound + warps - 1) / warps, 1u << 20));
  // CSR: the dynamic shared memory where block rows are assembled, where the
  // device grants it beside the kernel's own (else every entry goes straight).
  auto stage_for = [&](auto kernel) {
    std::size_t stage = row_out ? 0 : std::size_t{extract_stage_bytes<I, Out>()} * warps;
    if (stage > 0 && !dynamic_shared_fits(kernel, stage, "cudaFuncGetAttributes(row fill)")) stage = 0;
    if (stage > 0) allow_dynamic_shared(kernel, stage, "cudaFuncSetAttribute(row fill)");
    args.stage_ok = stage > 0;
    return stage;
  };
  auto check_total = [&](u64 total) {
    if (total != n)
      throw Error("GPU extraction: the pool holds " + std::to_string(total) + " entries, the matrix says " +
                  std::to_string(n));
  };
  if (!coow && chunk_slices == 0) {  // one task a block row: count and fill in one pass
    Array<unsigned long long> status(w, blocks), ticket(w, 1);
    Array<u32> total(w, 1);
    cuda_check(cudaMemsetAsync(status.get(), 0, blocks * sizeof(unsigned long long), st), "cudaMemsetAsync");
    cuda_check(cudaMemsetAsync(ticket.get(), 0, sizeof(unsigned long long), st), "cudaMemsetAsync");
    args.status = status.get();
    args.ticket = ticket.get();
    args.total = total.get();
    args.row_ptr = row_ptr;
    const std::size_t stage = stage_for(extract_rows_kernel<V, I, Out, RowPass::once>);
    extract_rows_kernel<V, I, Out, RowPass::once><<<grid, extract_row_threads, stage, st>>>(args);
    w.check_launch("row kernel");
    check_total(read_back(w, total.get(), "read entry count"));
    w.phase("rows written");
    return true;
  }
  Array<u32> count(w, rows + 1), start(w, rows + 1);
  cuda_check(cudaMemsetAsync(count.get() + rows, 0, sizeof(u32), st), "cudaMemsetAsync");
  args.row_count = count.get();
  extract_rows_kernel<V, I, Out, RowPass::count><<<grid, extract_row_threads, 0, st>>>(args);
  w.check_launch("row count kernel");
  if (chunk_slices > 0) {
    chunk_prefix_kernel<<<blocks_for(rows), 256, 0, st>>>(task_first.get(), chunk_first.get(), rows, b,
                                                          chunk_counts.get(), count.get());
    w.check_launch("chunk prefix kernel");
  }
  exclusive_sum(w, count.get(), start.get(), rows + 1);
  check_total(read_back(w, start.get() + rows, "read entry count"));
  if (coow) {  // a power-law hub's block row would serialise its warp: the general path then
    Array<unsigned long long> largest(w, 1);
    cuda_check(cudaMemsetAsync(largest.get(), 0, sizeof(unsigned long long), st), "cudaMemsetAsync");
    largest_block_row_kernel<<<blocks_for(blocks), 256, 0, st>>>(start.get(), rows, b, blocks, largest.get());
    w.check_launch("largest block row kernel");
    if (read_back(w, largest.get(), "read largest block row") > (u64{1} << 18)) return false;
  }
  w.phase("rows counted");
  args.row_start = start.get();
  const std::size_t stage = stage_for(extract_rows_kernel<V, I, Out, RowPass::fill>);
  extract_rows_kernel<V, I, Out, RowPass::fill><<<grid, extract_row_threads, stage, st>>>(args);
  w.check_launch("row fill kernel");
  finish_counted_rows(w, start.get(), rows, row_ptr);
  return true;
}

// Logical entries in row-major order: row (as sort keys), then gathered into
// the caller's arrays (row_out null for CSR, whose row pointers are written
// from the sorted rows). Out: V for the values, u32 for their positions in
// the pool (entries_kernel).
template <class V, class I, class K, class Out = V>
void extract_keys(WorkMemory& w, const DeviceMatrix<V>& a, I* row_out, I* row_ptr, I* col_out, Out* val_out) {
  const cudaStream_t st = w.stream();
  const Shape& shape = a.shape();
  const u32 b = shape.log2_node_size, L = shape.depth;
  const u64 n = a.nnz();
  const index_t rows = a.rows();
  if (n > 0xFFFFFFFFull) throw LimitError("GPU extraction handles at most 2^32 - 1 entries");
  if (n == 0 || a.root() == null_ref) {
    if (row_ptr) {
      Array<K> none(w, 1);
      row_ptr_kernel<I, K><<<blocks_for(rows + 1), 256, 0, st>>>(none.get(), 0, rows, row_ptr);
      w.check_launch("row pointer kernel");
      w.sync("cudaStreamSynchronize(GPU extraction)");
    }
    return;
  }
  const std::byte* pool = a.pool();

  // 1. The frontier, level by level.
  Array<u32> ref(w, 1);
  Array<u64> R(w, 1), C(w, 1);
  const NodeRef root = a.root();
  cuda_check(cudaMemcpyAsync(ref.get(), &root, sizeof(root), cudaMemcpyHostToDevice, st), "cudaMemcpyAsync");
  cuda_check(cudaMemsetAsync(R.get(), 0, sizeof(u64), st), "cudaMemsetAsync");
  cuda_check(cudaMemsetAsync(C.get(), 0, sizeof(u64), st), "cudaMemsetAsync");
  u64 size = 1;
  w.phase("start");
  for (u32 l = 0; l + 1 < L; ++l) expand_frontier(w, pool, b, ref, R, C, size, "GPU extraction: frontier");

  w.phase("frontier");
  const Frontier f{ref.get(), R.get(), C.get(), size};
  if (extract_rows<V, I, Out>(w, a, f, row_out, row_ptr, col_out, val_out)) return;
  // 2. Entries at their tree-order positions.
  Array<u64> first(w, size + 1);
  {
    Array<u64> count(w, size + 1);
    entry_count_kernel<<<blocks_for(size + 1), 256, 0, st>>>(f, pool, b, count.get());
    exclusive_sum(w, count.get(), first.get(), size + 1);
  }
  const u64 total = read_back(w, first.get() + size, "read entry count");
  if (total != n)
    throw Error("GPU extraction: the pool holds " + std::to_string(total) + " entries, the matrix says " +
                std::to_string(n));
  Array<K> keys(w, n), col(w, n);
  Array<Out> val(w, n);
  const V scale = a.scale();
  entries_kernel<V, K, Out><<<warp_grid(size), 256, 0, st>>>(f, pool, b, first.get(), a.transposed(), scale,
                                                             scale == V(1), keys.get(), col.get(), val.get());
  w.check_launch("entries kernel");
  w.phase("entries");
  first.release();
  ref.release();
  R.release();
  C.release();

  // 3. Stable sort by row; columns and values follow.
  Array<u32> order(w, n), order2(w, n);
  iota_kernel<<<blocks_for(n), 256, 0, st>>>(order.get(), n);
  Array<K> sorted(w, n);
  radix_sort_pairs(w, keys.get(), sorted.get(), order.get(), order2.get(), n,
                   static_cast<int>(rows > 1 ? std::bit_width(rows - 1) : 1));
  w.phase("sort by row");
  keys.release();
  order.release();
  gather_entries_kernel<Out, I, K><<<blocks_for(n), 256, 0, st>>>(sorted.get(), order2.get(), col.get(), val.get(), n,
                                                             row_out, col_out, val_out);
  w.check_launch("gather kernel");
  if (row_ptr) {
    row_ptr_kernel<I, K><<<blocks_for(rows + 1), 256, 0, st>>>(sorted.get(), n, rows, row_ptr);
    w.check_launch("row pointer kernel");
  }
  w.phase("gather");
  w.sync("cudaStreamSynchronize(GPU extraction)");
}

template <class V, class I, class Out = V>
void extract(WorkMemory& w, const DeviceMatrix<V>& a, I* row_out, I* row_ptr, I* col_out, Out* val_out) {
  if (a.rows() <= 0xFFFFFFFFull && a.cols() <= 0xFFFFFFFFull)
    extract_keys<V, I, u32, Out>(w, a, row_out, row_ptr, col_out, val_out);
  else
    extract_keys<V, I, u64, Out>(w, a, row_out, row_ptr, col_out, val_out);
}

}  // namespace hisparse::ops::convert_detail
