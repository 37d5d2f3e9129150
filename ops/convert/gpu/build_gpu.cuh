#pragma once
// The GPU build: device CSR/COO -> node pool, by the host builder's rules and
// with its bytes (formats/src/builder.cpp is the specification).
//
// A CSR with sorted rows takes its own path (build_csr.cuh) without a
// global sort; everything else (COO, unsorted rows, duplicates) this one:
// 1. Sort the entries by (leaf block row, leaf block column, row, column):
//    one radix sort over the key bits in use (two when the key passes 64
//    bits); a CSR's rows are expanded first.
// 2. Sum duplicates (input order, as the host) and find the leaves.
// 3. Sort the leaves (far fewer than entries) by tree key: the pool's order.
// 4. Top down over the leaves' tree keys: each upper level's nodes, their
//    children, types and bytes (COOW at level depth-2 by the canonical rule).
// 5. Offsets bottom-up (scans), one pool allocation, then the fill: every
//    entry writes itself into its leaf or, under a COOW node, into a wide
//    position sorted per node; every child writes its reference.
#include <bit>
#include <string>
#include <vector>

#include "build_kernels.cuh"
#include "hisparse/ops/convert_gpu.hpp"
#include "work_memory.cuh"

namespace hisparse::ops::convert_detail {

inline constexpr unsigned long long no_bad = ~0ull;

// Sorted distinct-or-not entries: (R, loc) keys and values in sort order,
// which is tree order (the leaves in the pool's order) where tree_order.
template <class V>
struct SortedEntries {
  Array<u64> R, loc;
  Array<V> val;
  u64 n = 0;
  bool tree_order = false;
};

inline Array<unsigned long long> bad_flag(WorkMemory& w) {
  Array<unsigned long long> bad(w, 1);
  cuda_check(cudaMemsetAsync(bad.get(), 0xFF, sizeof(unsigned long long), w.stream()), "cudaMemsetAsync");
  return bad;
}

template <class I>
I read_index(WorkMemory& w, const I* p) {
  return read_back(w, p, "cudaMemcpyAsync(bad input)");
}

// Entries as separate row and column arrays (a COO, or a CSR's rows expanded).
template <class V, class RI, class CI>
struct EntryArrays {
  index_t rows, cols;
  u64 n;
  const RI* row;
  const CI* col;
  const V* val;
};

// Checks every index and sorts; returns the first entry with an index outside
// the matrix (no_bad if none) and leaves `out` empty then.
template <class V, class RI, class CI>
unsigned long long sort_entries(WorkMemory& w, const EntryArrays<V, RI, CI>& in, const Shape& shape,
                                SortedEntries<V>& out) {
  const u64 n = in.n;
  const u32 b = shape.log2_node_size;
  const u32 rb = in.rows ? bit_width_of((in.rows - 1) >> b) : 0;
  const u32 loc_bits = (in.cols ? bit_width_of((in.cols - 1) >> b) : 0) + 2 * b;
  const bool one_sort = rb + loc_bits <= 64;
  // Sorting by (tree key, place in the leaf) costs the same one sort (a few
  // more key bits) and leaves the leaves in the pool's order: the leaves'
  // own sort goes (perf-log C10). Where the tree key and the place pass 64
  // bits, (R, loc) and the leaves' sort.
  const u32 L = shape.depth, upper = L >= 2 ? L - 1 : 1;
  const u32 cb = in.cols ? bit_width_of((in.cols - 1) >> b) : 0;
  // The root digit pair (R's digit above C's) uses only the bits the
  // dimensions reach: the key's highest bit follows from them.
  const u32 below_root = 2 * b * (upper - 1), root_r = rb > b * (upper - 1) ? rb - b * (upper - 1) : 0,
            root_c = cb > b * (upper - 1) ? cb - b * (upper - 1) : 0;
  const u32 tree_bits = 2 * b + (root_r ? below_root + b + root_r : root_c ? below_root + root_c : below_root);
  const bool tree = L >= 2 && tree_bits <= 64;
  auto bad = bad_flag(w);
  Array<u64> key(w, n);
  Array<u32> perm(w, n);
  coo_keys_kernel<<<blocks_for(n), 256, 0, w.stream()>>>(in.row, in.col, n, in.rows, in.cols, b, loc_bits, one_sort,
                                                         tree ? upper : 0u, key.get(), perm.get(), bad.get());
  w.check_launch("keys kernel");
  const auto first_bad = read_back(w, bad.get(), "cudaMemcpyAsync(index check)");
  if (first_bad != no_bad) return first_bad;
  w.phase("keys and checks");
  Array<u64> key2(w, n);
  Array<u32> perm2(w, n);
  radix_sort_pairs(w, key.get(), key2.get(), perm.get(), perm2.get(), n,
                   static_cast<int>(tree ? tree_bits : one_sort ? rb + loc_bits : loc_bits));
  w.phase("radix sort");
  SortedEntries<V>& s = out;
  s.n = n;
  s.tree_order = tree;
  if (tree || one_sort) {
    key.release();
    perm.release();
    s.R = Array<u64>(w, n);
    s.loc = Array<u64>(w, n);
    s.val = Array<V>(w, n);
    sorted_entries_kernel<RI, CI, V><<<blocks_for(n), 256, 0, w.stream()>>>(
        key2.get(), true, loc_bits, tree ? upper : 0u, nullptr, in.row, in.col, b, perm2.get(), in.val, n, s.R.get(),
        s.loc.get(), s.val.get());
    w.check_launch("sorted entries kernel");
    w.phase("sorted entries");
    return no_bad;
  }
  // A key past 64 bits: sorted by loc, now stably by R.
  key2.release();
  gather_block_rows_kernel<<<blocks_for(n), 256, 0, w.stream()>>>(in.row, perm2.get(), n, b, key.get());
  Array<u64> rows_sorted(w, n);
  radix_sort_pairs(w, key.get(), rows_sorted.get(), perm2.get(), perm.get(), n, rb);
  key.release();
  perm2.release();
  s.R = Array<u64>(w, n);
  s.loc = Array<u64>(w, n);
  s.val = Array<V>(w, n);
  sorted_entries_kernel<RI, CI, V><<<blocks_for(n), 256, 0, w.stream()>>>(
      nullptr, false, loc_bits, 0u, rows_sorted.get(), in.row, in.col, b, perm.get(), in.val, n, s.R.get(),
      s.loc.get(), s.val.get());
  w.check_launch("sorted entries kernel");
  w.phase("sorted entries");
  return no_bad;
}

template <class V, class I>
SortedEntries<V> sort_coo(WorkMemory& w, const DeviceCooView<V, I>& in, const Shape& shape) {
  w.phase("start");
  SortedEntries<V> s;
  const auto first_bad = sort_entries(w, EntryArrays<V, I, I>{in.rows, in.cols, in.nnz, in.row, in.col, in.val}, shape, s);
  if (first_bad != no_bad) {
    const long long r = static_cast<long long>(read_index(w, in.row + first_bad));
    const long long c = static_cast<long long>(read_index(w, in.col + first_bad));
    throw Error("COO input: entry " + std::to_string(first_bad) + " at (" + std::to_string(r) + ", " +
                std::to_string(c) + ") lies outside the " + std::to_string(in.rows) + " x " + std::to_string(in.cols) +
                " matrix");
  }
  return s;
}

// CSR row pointers: start at 0, never decrease, end at nnz.
template <class V, class I>
void check_csr_row_ptr(WorkMemory& w, const DeviceCsrView<V, I>& in) {
  const u64 n = in.nnz;
  auto bad = bad_flag(w);
  check_row_ptr_kernel<<<blocks_for(in.rows + 1), 256, 0, w.stream()>>>(in.row_ptr, in.rows, n, bad.get());
  w.check_launch("CSR row pointer check");
  const auto r = read_back(w, bad.get(), "cudaMemcpyAsync(CSR check)");
  if (r == no_bad) return;
  const long long p = static_cast<long long>(read_index(w, in.row_ptr + r));
  if (r == 0) throw Error("CSR input: row pointers must start at 0, row_ptr[0] is " + std::to_string(p));
  if (r == in.rows)
    throw Error("CSR input: the last row pointer row_ptr[" + std::to_string(r) + "] is " + std::to_string(p) +
                ", expected nnz = " + std::to_string(n));
  const long long p1 = static_cast<long long>(read_index(w, in.row_ptr + r + 1));
  throw Error("CSR input: row pointers decrease at row " + std::to_string(r) + " (row_ptr[" + std::to_string(r) +
              "] = " + std::to_string(p) + ", row_ptr[" + std::to_string(r + 1) + "] = " + std::to_string(p1) + ")");
}

// CSR in the general path (row pointers already checked): the rows expanded
// (a max-scan of row starts), then the COO path's sort.
template <class V, class I>
SortedEntries<V> sort_csr(WorkMemory& w, const DeviceCsrView<V, I>& in, const Shape& shape) {
  const u64 n = in.nnz;
  w.phase("start");
  SortedEntries<V> s;
  if (n == 0) return s;
  Array<u64> row_of(w, n);
  {
    Array<u64> starts(w, n);
    cuda_check(cudaMemsetAsync(starts.get(), 0, n * sizeof(u64), w.stream()), "cudaMemsetAsync");
    mark_row_starts_kernel<<<blocks_for(in.rows), 256, 0, w.stream()>>>(in.row_ptr, in.rows, starts.get());
    w.check_launch("row starts kernel");
    inclusive_max(w, starts.get(), row_of.get(), n);
  }
  w.phase("CSR rows expanded");
  const auto first_bad =
      sort_entries(w, EntryArrays<V, u64, I>{in.rows, in.cols, n, row_of.get(), in.col, in.val}, shape, s);
  if (first_bad != no_bad) {
    const u64 r = read_back(w, row_of.get() + first_bad, "cudaMemcpyAsync(bad input)");
    const long long c = static_cast<long long>(read_index(w, in.col + first_bad));
    throw Error("CSR input: entry " + std::to_string(first_bad) + " (row " + std::to_string(r) +
                ") has column index " + std::to_string(c) + ", outside the " + std::to_string(in.cols) + " columns");
  }
  return s;
}

template <class V>
DeviceMatrix<V> build_from_sorted(WorkMemory& w, SortedEntries<V> s, const Shape& shape, const BuildOptions& options,
                                  ConvertStats* stats);

}  // namespace hisparse::ops::convert_detail

#include "build_levels.cuh"
