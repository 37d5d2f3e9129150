#pragma once
// The GPU build: device CSR/COO -> node pool, by the host builder's rules and
// with its bytes (formats/src/builder.cpp is the specification).
//
// 1. Sort the entries by (leaf block row, leaf block column, row, column):
//    COO by one radix sort (two when the key passes 64 bits); CSR by a
//    segmented sort within each block row of d rows only, since its rows are
//    already grouped: no global sort.
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

inline u32 bit_width_of(u64 v) { return static_cast<u32>(std::bit_width(v)); }

// Sorted distinct-or-not entries: (R, loc) keys and values in sort order.
template <class V>
struct SortedEntries {
  Array<u64> R, loc;
  Array<V> val;
  u64 n = 0;
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

template <class V, class I>
SortedEntries<V> sort_coo(WorkMemory& w, const DeviceCooView<V, I>& in, const Shape& shape) {
  const u64 n = in.nnz;
  const u32 b = shape.log2_node_size;
  const u32 rb = in.rows ? bit_width_of((in.rows - 1) >> b) : 0;
  const u32 loc_bits = (in.cols ? bit_width_of((in.cols - 1) >> b) : 0) + 2 * b;
  const bool one_sort = rb + loc_bits <= 64;
  auto bad = bad_flag(w);
  Array<u64> key(w, n);
  Array<u32> perm(w, n);
  coo_keys_kernel<<<blocks_for(n), 256, 0, w.stream()>>>(in.row, in.col, n, in.rows, in.cols, b, loc_bits, one_sort,
                                                         key.get(), perm.get(), bad.get());
  w.check_launch("COO keys kernel");
  const auto first_bad = read_back(w, bad.get(), "cudaMemcpyAsync(COO check)");
  if (first_bad != no_bad) {
    const long long r = static_cast<long long>(read_index(w, in.row + first_bad));
    const long long c = static_cast<long long>(read_index(w, in.col + first_bad));
    throw Error("COO input: entry " + std::to_string(first_bad) + " at (" + std::to_string(r) + ", " +
                std::to_string(c) + ") lies outside the " + std::to_string(in.rows) + " x " + std::to_string(in.cols) +
                " matrix");
  }
  Array<u64> key2(w, n);
  Array<u32> perm2(w, n);
  radix_sort_pairs(w, key.get(), key2.get(), perm.get(), perm2.get(), n, one_sort ? rb + loc_bits : loc_bits);
  SortedEntries<V> s;
  s.n = n;
  if (one_sort) {
    key.release();
    perm.release();
    s.R = Array<u64>(w, n);
    s.loc = Array<u64>(w, n);
    s.val = Array<V>(w, n);
    sorted_entries_kernel<I, V><<<blocks_for(n), 256, 0, w.stream()>>>(
        key2.get(), true, loc_bits, nullptr, nullptr, 0, in.row, in.col, b, perm2.get(), in.val, n, s.R.get(),
        s.loc.get(), s.val.get());
    w.check_launch("sorted entries kernel");
    return s;
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
  sorted_entries_kernel<I, V><<<blocks_for(n), 256, 0, w.stream()>>>(nullptr, false, loc_bits, rows_sorted.get(),
                                                                     nullptr, 0, in.row, in.col, b, perm.get(), in.val,
                                                                     n, s.R.get(), s.loc.get(), s.val.get());
  w.check_launch("sorted entries kernel");
  return s;
}

template <class V, class I>
SortedEntries<V> sort_csr(WorkMemory& w, const DeviceCsrView<V, I>& in, const Shape& shape) {
  const u64 n = in.nnz;
  const u32 b = shape.log2_node_size;
  {
    auto bad = bad_flag(w);
    check_row_ptr_kernel<<<blocks_for(in.rows + 1), 256, 0, w.stream()>>>(in.row_ptr, in.rows, n, bad.get());
    w.check_launch("CSR row pointer check");
    const auto r = read_back(w, bad.get(), "cudaMemcpyAsync(CSR check)");
    if (r != no_bad) {
      const long long p = static_cast<long long>(read_index(w, in.row_ptr + r));
      if (r == 0) throw Error("CSR input: row pointers must start at 0, row_ptr[0] is " + std::to_string(p));
      if (r == in.rows)
        throw Error("CSR input: the last row pointer row_ptr[" + std::to_string(r) + "] is " + std::to_string(p) +
                    ", expected nnz = " + std::to_string(n));
      const long long p1 = static_cast<long long>(read_index(w, in.row_ptr + r + 1));
      throw Error("CSR input: row pointers decrease at row " + std::to_string(r) + " (row_ptr[" + std::to_string(r) +
                  "] = " + std::to_string(p) + ", row_ptr[" + std::to_string(r + 1) + "] = " + std::to_string(p1) + ")");
    }
  }
  auto bad = bad_flag(w);
  Array<u64> key(w, n);
  Array<u32> perm(w, n);
  csr_keys_kernel<<<blocks_for(n), 256, 0, w.stream()>>>(in.row_ptr, in.col, n, in.rows, in.cols, b, key.get(),
                                                         perm.get(), bad.get());
  w.check_launch("CSR keys kernel");
  const auto first_bad = read_back(w, bad.get(), "cudaMemcpyAsync(CSR check)");
  if (first_bad != no_bad) {
    const long long c = static_cast<long long>(read_index(w, in.col + first_bad));
    throw Error("CSR input: entry " + std::to_string(first_bad) + " has column index " + std::to_string(c) +
                ", outside the " + std::to_string(in.cols) + " columns");
  }
  const u64 segments = (in.rows + (u64{1} << b) - 1) >> b;
  Array<u64> begin(w, segments), end(w, segments);
  block_row_segments_kernel<<<blocks_for(segments), 256, 0, w.stream()>>>(in.row_ptr, in.rows, b, segments,
                                                                          begin.get(), end.get());
  w.check_launch("CSR segments kernel");
  Array<u64> key2(w, n);
  Array<u32> perm2(w, n);
  segmented_sort_pairs(w, key.get(), key2.get(), perm.get(), perm2.get(), n, segments, begin.get(), end.get());
  key.release();
  perm.release();
  end.release();
  SortedEntries<V> s;
  s.n = n;
  s.R = Array<u64>(w, n);
  s.loc = Array<u64>(w, n);
  s.val = Array<V>(w, n);
  sorted_entries_kernel<I, V><<<blocks_for(n), 256, 0, w.stream()>>>(key2.get(), false, 0, nullptr, begin.get(),
                                                                     segments, static_cast<const I*>(nullptr),
                                                                     static_cast<const I*>(nullptr), b, perm2.get(),
                                                                     in.val, n, s.R.get(), s.loc.get(), s.val.get());
  w.check_launch("sorted entries kernel");
  return s;
}

__global__ void set_u32_kernel(u32* p, u32 v) { *p = v; }
__global__ void count_coow_kernel(const std::uint8_t* type, u64 nodes, unsigned long long* count) {
  for (u64 i = blockIdx.x * u64(blockDim.x) + threadIdx.x; i < nodes; i += u64(gridDim.x) * blockDim.x)
    if (type[i] == static_cast<std::uint8_t>(NodeType::coow)) atomicAdd(count, 1ull);
}
__global__ void coow_segments_kernel(const std::uint8_t* type, u64 nodes, const u32* first_leaf, const u64* entry_scan,
                                     unsigned long long* next, u64* begin, u64* end) {
  for (u64 i = blockIdx.x * u64(blockDim.x) + threadIdx.x; i < nodes; i += u64(gridDim.x) * blockDim.x) {
    if (type[i] != static_cast<std::uint8_t>(NodeType::coow)) continue;
    const auto s = atomicAdd(next, 1ull);
    begin[s] = entry_scan[first_leaf[i]];
    end[s] = entry_scan[first_leaf[i + 1]];
  }
}
__global__ void widen_kernel(const u32* in, u64 n, u64* out) {
  for (u64 i = blockIdx.x * u64(blockDim.x) + threadIdx.x; i <= n; i += u64(gridDim.x) * blockDim.x)
    out[i] = i < n ? in[i] : 0;
}

// One upper level's skeleton (level depth-1, the leaves, is kept apart).
struct Level {
  u64 nodes = 0;
  Array<u32> first_leaf, first_child, child_parent;  // child_parent: of the level below's nodes
  Array<std::uint8_t> type;
  Array<u64> bytes;  // then their exclusive scan: offsets from base
  u64 base = 0, total = 0;
};

template <class V>
DeviceMatrix<V> build_from_sorted(WorkMemory& w, SortedEntries<V> s, const Shape& shape, const BuildOptions& options,
                                  ConvertStats* stats);

}  // namespace hisparse::ops::convert_detail

#include "build_levels.cuh"
