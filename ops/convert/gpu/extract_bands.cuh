#pragma once
// The extraction of a pool whose last frontier is COOW nodes alone (plain
// state), by row windows (perf-log C38). R-MAT's pools are such: the builder
// makes every depth-2 block a COOW node, and the row path (extract_rows.cuh)
// takes them as ~8 M slices of ~8 entries each.
//
// A COOW node is one depth-2 block (D = d² rows and columns), its entries
// row-major. Within a row band (the D rows of one depth-2 block row) the
// nodes, in frontier order, are in column order, so a CSR row of the band is
// the concatenation of its run in each node, node after node. So:
// 1. Per row band, its rows' entries counted in shared memory; their scan is
//    every row's start.
// 2. The rows cut into windows: a row of more than band_heavy entries is a
//    window alone; the others go in windows of the rows whose starts lie in
//    one span of band_span entries of their band (at most
//    band_span + band_heavy entries each).
// 3. Per node, where each window of its band begins among its entries (one
//    pass over the nodes' rows: a window's part of a node is one range).
// 4. A block per window stages its entries node after node in shared memory
//    and sorts them stably by row (a window alone for one row: its entries are
//    in place already and go straight out), then writes them out in one
//    coalesced range.
// Where it does not apply (b > band_max_log2_d, a band of more than
// band_max_nodes nodes, a window table larger than its bound) it returns
// false before writing anything, and the row path takes the pool.
#include <algorithm>
#include <bit>

#include "build_kernels.cuh"
#include "extract_band_kernels.cuh"
#include "extract_row_tasks.cuh"
#include "work_memory.cuh"

namespace hisparse::ops::convert_detail {

// The rows path for a pool whose frontier f is COOW nodes alone (the
// caller's check: coow_kinds_kernel); false, with nothing written, where it
// does not apply.
template <class V, class I, class Out>
bool extract_bands(WorkMemory& w, const DeviceMatrix<V>& a, const Frontier& f, I* row_out, I* row_ptr, I* col_out,
                   Out* val_out) {
  const cudaStream_t st = w.stream();
  const u32 b = a.shape().log2_node_size;
  const u64 n = a.nnz(), rows = a.rows();
  if (a.transposed() || b > band_max_log2_d || f.size == 0 || rows == 0 || rows >= 0xFFFFFFFFull) return false;
  const u32 band_bits = 2 * b;
  const u64 bands = (rows + (u64{1} << band_bits) - 1) >> band_bits;
  const std::size_t count_shared = sizeof(u32) << band_bits;
  if (!dynamic_shared_fits(band_row_counts_kernel, count_shared, "cudaFuncGetAttributes(band counts)")) return false;
  constexpr std::size_t fill_shared = band_stage_bytes<I, Out>();
  if (!dynamic_shared_fits(band_fill_kernel<V, I, Out>, fill_shared, "cudaFuncGetAttributes(band fill)")) return false;
  // The nodes grouped by row band, stably (frontier order: column order within one).
  Array<u32> node_of(w, f.size), band_first(w, bands + 1);
  {
    Array<u32> idx(w, f.size);
    Array<u64> sorted(w, f.size);
    iota_kernel<<<blocks_for(f.size), 256, 0, st>>>(idx.get(), f.size);
    radix_sort_pairs(w, f.R, sorted.get(), idx.get(), node_of.get(), f.size,
                     static_cast<int>(bands > 1 ? std::bit_width(bands - 1) : 1));
    block_row_first_kernel<<<blocks_for(bands + 1), 256, 0, st>>>(sorted.get(), f.size, bands, band_first.get());
    Array<unsigned> most(w, 1);
    cuda_check(cudaMemsetAsync(most.get(), 0, sizeof(unsigned), st), "cudaMemsetAsync");
    band_most_nodes_kernel<<<blocks_for(bands), 256, 0, st>>>(band_first.get(), bands, most.get());
    w.check_launch("band kernels");
    if (read_back(w, most.get(), "read band nodes") > band_max_nodes) return false;
  }
  // 1. Rows counted, their starts.
  Array<u32> start(w, rows + 1);
  {
    Array<u32> count(w, rows + 1);
    cuda_check(cudaMemsetAsync(count.get() + rows, 0, sizeof(u32), st), "cudaMemsetAsync");
    allow_dynamic_shared(band_row_counts_kernel, sizeof(u32) << (2 * band_max_log2_d), "cudaFuncSetAttribute(band counts)");
    band_row_counts_kernel<<<static_cast<unsigned>(bands), band_count_threads, count_shared, st>>>(
        f, a.pool(), node_of.get(), band_first.get(), b, rows, count.get());
    w.check_launch("band row count kernel");
    exclusive_sum(w, count.get(), start.get(), rows + 1);
  }
  const u64 total = read_back(w, start.get() + rows, "read entry count");
  if (total != n)
    throw Error("GPU extraction: the pool holds " + std::to_string(total) + " entries, the matrix says " +
                std::to_string(n));
  // 2. Windows.
  Array<u32> win(w, rows);
  u32 windows = 0;
  Array<u32> window_first;
  {
    Array<u32> head(w, rows);
    band_window_heads_kernel<<<blocks_for(rows), 256, 0, st>>>(start.get(), rows, b, head.get());
    inclusive_sum(w, head.get(), win.get(), rows);
    windows = read_back(w, win.get() + rows - 1, "read window count");
    window_first = Array<u32>(w, u64(windows) + 1);
    band_window_first_kernel<<<blocks_for(rows), 256, 0, st>>>(head.get(), win.get(), rows, window_first.get());
    set_u32_kernel<<<1, 1, 0, st>>>(window_first.get() + windows, static_cast<u32>(rows));
    w.check_launch("window kernels");
  }
  // 3. Each window's range in each node of its band.
  Array<u32> wfirst(w, bands + 1);
  Array<u64> table(w, bands + 1);
  {
    Array<u64> size(w, bands + 1);
    band_window_starts_kernel<<<blocks_for(bands + 1), 256, 0, st>>>(win.get(), bands, b, windows, wfirst.get());
    band_table_sizes_kernel<<<blocks_for(bands + 1), 256, 0, st>>>(wfirst.get(), band_first.get(), bands, size.get());
    exclusive_sum(w, size.get(), table.get(), bands + 1);
    w.check_launch("window table kernels");
  }
  const u64 cells = read_back(w, table.get() + bands, "read window table size");
  // (a u32 per window and node: within the work bound where it is at most
  // about an entry's worth; R-MAT 2^22: ~32 000 windows x 256 nodes, 0.13 an entry)
  if (cells > 2 * n + 4096) return false;
  Array<u32> seg(w, cells);
  band_segments_kernel<<<warp_grid(f.size), 256, 0, st>>>(f, a.pool(), node_of.get(), band_first.get(), wfirst.get(),
                                                         table.get(), win.get(), b, seg.get());
  w.check_launch("window segment kernel");
  win.release();
  w.phase("windows");
  // 4. The windows filled.
  Array<unsigned> next(w, 1);
  cuda_check(cudaMemsetAsync(next.get(), 0, sizeof(unsigned), st), "cudaMemsetAsync");
  const BandArgs<V, I, Out> args{f,
                                 a.pool(),
                                 b,
                                 a.scale(),
                                 a.scale() == V(1),
                                 node_of.get(),
                                 band_first.get(),
                                 wfirst.get(),
                                 table.get(),
                                 seg.get(),
                                 window_first.get(),
                                 start.get(),
                                 windows,
                                 next.get(),
                                 row_out,
                                 col_out,
                                 val_out};
  allow_dynamic_shared(band_fill_kernel<V, I, Out>, fill_shared, "cudaFuncSetAttribute(band fill)");
  // Persistent blocks, as many as stay resident (each takes windows by tickets).
  const u64 tickets = (u64(windows) + band_windows_per_ticket - 1) / band_windows_per_ticket;
  const u64 resident = resident_blocks(band_fill_kernel<V, I, Out>, band_threads, fill_shared);
  const auto grid = static_cast<unsigned>(std::min<u64>(tickets, resident));
  if (grid > 0) band_fill_kernel<V, I, Out><<<grid, band_threads, fill_shared, st>>>(args);
  w.check_launch("window fill kernel");
  finish_counted_rows(w, start.get(), rows, row_ptr);
  return true;
}

}  // namespace hisparse::ops::convert_detail
