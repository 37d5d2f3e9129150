#pragma once
// How the CSR warp kernel (build_csr_warps.cuh) finds an entry's leaf in its
// block row: by the leaf column's distance from the block row's first, in a
// window of 512 leaf columns whose present ones are bits; or, where the span
// is wider but the leaf columns are at most 16 (a band beside a few dense
// columns), by a binary search of their list (a *listed* block row, perf-log
// C23). Both live in the same 64 bytes per block row. And an entry's row
// from the block row's row pointers.
#include "build_kernels.cuh"

namespace hisparse::ops::convert_detail {

inline constexpr u32 csr_warp_span = 512;  // leaf columns a warp's block row may span
inline constexpr u32 csr_span_words = csr_warp_span / 64;
// A listed block row: its leaf columns (32-bit, ascending) in its present
// words, and csr_listed | their number in its cmin.
inline constexpr u32 csr_list_leaves = 16;
inline constexpr u64 csr_listed = u64{1} << 63;
static_assert(csr_list_leaves * sizeof(u32) == csr_span_words * sizeof(u64));

// How many of the leaf columns before j (j <= csr_warp_span) have entries:
// the leaf's index in its block row.
__device__ inline u32 leaf_rank(const u64* present, u32 j) {
  u32 r = 0;
  for (u32 q = 0; q < csr_span_words; ++q) {
    if (j >= 64 * (q + 1)) r += __popcll(present[q]);
    else if (j > 64 * q) r += __popcll(present[q] & ((u64{1} << (j - 64 * q)) - 1));
  }
  return r;
}

// The row (in [0, nr)) of entry e, from the block row's row pointers rp[0..nr].
__device__ inline u32 row_of(const u64* rp, u32 nr, u64 e) {
  u32 lo = 0, hi = nr;  // rp[lo] <= e < rp[hi]
  while (hi - lo > 1) {
    const u32 mid = (lo + hi) / 2;
    if (rp[mid] <= e) lo = mid;
    else hi = mid;
  }
  return lo;
}

// The i-th leaf column present (i < the block row's leaves), in increasing order.
__device__ inline u32 nth_present(const u64* present, u32 i) {
  for (u32 q = 0; q < csr_span_words; ++q) {
    u64 w = present[q];
    const u32 c = __popcll(w);
    if (i < c) {
      for (; i > 0; --i) w &= w - 1;
      return 64 * q + static_cast<u32>(__ffsll(static_cast<long long>(w)) - 1);
    }
    i -= c;
  }
  return csr_warp_span;
}

// A block row's leaf columns as the passes see them: slots (the index of
// count[], leaf_of[] and the present bits) are a window's offsets from cmin,
// or a listed block row's indices in its list.
struct LeafColumns {
  const u64* present;  // shared: the window's bits, or the list (u32)
  u64 cmin;            // the window's first leaf column, or csr_listed | the number listed
  static constexpr u32 outside = 0xFFFFFFFEu;
  __device__ bool listed() const { return (cmin & csr_listed) != 0; }
  __device__ const u32* list() const { return reinterpret_cast<const u32*>(present); }
  __device__ u32 leaves() const {
    return listed() ? static_cast<u32>(cmin) & 0xFFu : leaf_rank(present, csr_warp_span);
  }
  // The slot of leaf column lc, or `outside`.
  __device__ u32 slot(u64 lc) const {
    if (!listed()) return lc >= cmin && lc - cmin < csr_warp_span ? static_cast<u32>(lc - cmin) : outside;
    const u32* l = list();
    u32 lo = 0;
    for (u32 n = leaves(); n > 1;) {
      const u32 h = n / 2;
      if (l[lo + h] <= lc) lo += h;
      n -= h;
    }
    return lc == l[lo] ? lo : outside;
  }
  __device__ bool has(u32 j) const { return listed() ? j < leaves() : ((present[j / 64] >> (j % 64)) & 1u) != 0; }
  __device__ u32 rank(u32 j) const { return listed() ? j : leaf_rank(present, j); }        // leaf index of slot j
  __device__ u32 nth(u32 i) const { return listed() ? i : nth_present(present, i); }       // slot of the i-th leaf
  __device__ u64 column(u32 j) const { return listed() ? list()[j] : cmin + j; }           // leaf column of slot j
};

// Lists the distinct leaf columns of the entries [e0, e0 + m) ascending in
// list[0, L) (a warp's shared words) and returns L; csr_list_leaves + 1 as
// soon as there are more, or one is past 32 bits (a negative index too: the
// block kernels report it). Reads the block row's columns once more: the
// scout's sweep reads them again from L1 or L2.
template <class I>
__device__ inline u32 list_leaf_columns(const I* col, u64 e0, u64 m, u32 b, u32 lane, u32* list) {
  const unsigned full = 0xFFFFFFFFu;
  u32 n = 0, mine = 0;  // lane i < n holds the i-th leaf column met
  for (u64 base = 0; base < m; base += 32) {
    const bool valid = base + lane < m;
    const u64 lc = valid ? static_cast<u64>(col[e0 + base + lane]) >> b : 0;
    if (__any_sync(full, lc > 0xFFFFFFFFull)) return csr_list_leaves + 1;
    const u32 c = static_cast<u32>(lc);
    bool known = !valid;
    for (u32 i = 0; i < n; ++i) known |= __shfl_sync(full, mine, i) == c;
    for (unsigned fresh = __ballot_sync(full, !known); fresh;) {
      const u32 next = __shfl_sync(full, c, __ffs(fresh) - 1);
      if (n == csr_list_leaves) return csr_list_leaves + 1;
      if (lane == n) mine = next;
      ++n;
      fresh &= ~__ballot_sync(full, c == next);
    }
  }
  u32 rank = 0;  // distinct: each listed lane's place
  for (u32 i = 0; i < n; ++i) rank += __shfl_sync(full, mine, i) < mine ? 1u : 0u;
  if (lane < n) list[rank] = mine;
  __syncwarp();
  return n;
}

}  // namespace hisparse::ops::convert_detail
