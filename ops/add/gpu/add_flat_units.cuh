#pragma once
// The flat add's units: one operand's entries of a slice of a band, and
// their sort into row-major order (add_flat.cuh).
#include <cuda_runtime.h>

#include <cstdint>

#include "add_flat_buckets.cuh"

namespace hisparse::ops::add_gpu {

// ---- a unit's entries ---------------------------------------------------------

// One operand's entries of rows [r0, r1) of band br: a run of a COOW node, the
// unit's bucket (transposed operands), or the rows of the band's leaves.
template <class V>
struct FlatUnitSource {
  const Operand<V>& op;
  NodeRef ref;
  const FlatBucket* bucket;      // this side's bucket of the unit
  const WideEntry<V>* bucketed;  // this side's bucketed entries
  std::uint32_t br, r0, r1, b, lane;
  bool scanned;  // a small transposed root, walked whole (scan)

  // First index of a sorted run whose row is >= target (coordinates by value).
  template <class Row>
  __device__ static std::uint32_t lower_row(std::uint32_t n, std::uint32_t target, Row&& row_at) {
    std::uint32_t l = 0, h = n;
    while (l < h) {
      const std::uint32_t mid = (l + h) / 2;
      if (row_at(mid) < target) l = mid + 1;
      else h = mid;
    }
    return l;
  }

  // Rows [r0, r1) of a COOW node: one run of it (lanes 0 and 1 search).
  __device__ std::uint32_t coow_run(const CoowView<V>& w, std::uint32_t& first) const {
    const std::uint32_t l =
        lower_row(w.count, (br << b) + (lane == 0 ? r0 : r1), [&](std::uint32_t i) { return w.coords[i].row; });
    first = __shfl_sync(full_warp, l, 0);
    return __shfl_sync(full_warp, l, 1) - first;
  }

  // The band's leaves (block row br, in block-column order) in warp steps:
  // f(leaf or null, its block column).
  template <class F>
  __device__ void for_band_leaves(F&& f) const {
    const std::uint32_t d = 1u << b;
    if (ref_type(ref) == NodeType::dense) {
      const NodeRef* cells = dense_values<NodeRef>(op.pool, ref, b, false);
      for (std::uint32_t base = 0; base < d; base += 32) {
        const std::uint32_t j = base + lane;
        f(j < d ? cells[(br << b) | j] : null_ref, j);
      }
      return;
    }
    const CooView<NodeRef> v = coo_view<NodeRef>(op.pool, ref);
    const std::uint32_t l = lower_row(v.count, lane == 0 ? br : br + 1, [&](std::uint32_t i) { return v.coords[i].row; });
    const std::uint32_t lo = __shfl_sync(full_warp, l, 0), hi = __shfl_sync(full_warp, l, 1);
    for (std::uint32_t base = lo; base < hi; base += 32) {
      const std::uint32_t s = base + lane;
      f(s < hi ? v.values[s] : null_ref, s < hi ? v.coords[s].col : 0u);
    }
  }

  // A leaf's rows [r0, r1), by this lane: [first, first + count) of a COO
  // leaf (sorted by row), or the set bits of a dense leaf's mask there.
  __device__ std::uint32_t leaf_run(NodeRef leaf, std::uint32_t& first) const {
    if (ref_type(leaf) == NodeType::dense) {
      const auto* words = reinterpret_cast<const std::uint32_t*>(dense_mask(op.pool, leaf));
      std::uint32_t n = 0;
      for_mask_words(words, [&](std::uint32_t, std::uint32_t bits) { n += __popc(bits); });
      return n;
    }
    const CooView<V> v = coo_view<V>(op.pool, leaf);
    first = lower_row(v.count, r0, [&](std::uint32_t i) { return v.coords[i].row; });
    return lower_row(v.count, r1, [&](std::uint32_t i) { return v.coords[i].row; }) - first;
  }

  // The mask words of cells [r0 d, r1 d), masked to them: f(word index, bits).
  template <class F>
  __device__ void for_mask_words(const std::uint32_t* words, F&& f) const {
    const std::uint32_t from = r0 << b, to = r1 << b;
    for (std::uint32_t w = from / 32; w * 32 < to; ++w) {
      std::uint32_t bits = words[w];
      if (w * 32 < from) bits &= ~0u << (from - w * 32);
      if (w * 32 + 32 > to) bits &= (1u << (to - w * 32)) - 1u;
      f(w, bits);
    }
  }

  // A dense leaf's cells in rows [r0, r1), in order, by the whole warp (the
  // leaf is the same in every lane): a mask word a lane, the words' counts
  // scanned. One lane alone waited on each cell's value in turn: a unit's
  // slice of a full 128 x 128 leaf is 1024 cells (perf-log A11).
  __device__ void copy_dense(NodeRef leaf, std::uint32_t bc, WideEntry<V>* o) const {
    const std::uint32_t d = 1u << b;
    const V* vals = dense_values<V>(op.pool, leaf, b, true);
    const auto* words = reinterpret_cast<const std::uint32_t*>(dense_mask(op.pool, leaf));
    const std::uint32_t from = r0 << b, to = r1 << b;
    std::uint32_t done = 0;
    for (std::uint32_t w0 = from / 32; w0 * 32 < to; w0 += 32) {
      const std::uint32_t w = w0 + lane;
      std::uint32_t bits = w * 32 < to ? words[w] : 0u;
      if (w * 32 < from) bits &= ~0u << (from - w * 32);
      if (w * 32 < to && w * 32 + 32 > to) bits &= (1u << (to - w * 32)) - 1u;
      const std::uint32_t c = __popc(bits);
      const std::uint32_t incl = warp_inclusive_sum(c, lane);
      std::uint32_t k = done + incl - c;
      for (; bits != 0u; bits &= bits - 1u) {
        const std::uint32_t cell = w * 32 + static_cast<std::uint32_t>(__ffs(bits) - 1);
        o[k++] = WideEntry<V>{row_key(cell >> b, (bc << b) | (cell & (d - 1)), b), vals[cell]};
      }
      done += __shfl_sync(full_warp, incl, 31);
    }
  }

  // The dense leaves of this warp step, one after the other: those of the
  // lanes in `lanes`, each at out + at (this lane's values).
  __device__ void copy_dense_leaves(unsigned lanes, NodeRef leaf, std::uint32_t bc, std::uint32_t at,
                                    WideEntry<V>* out) const {
    while (lanes != 0u) {
      const int j = __ffs(lanes) - 1;
      lanes &= lanes - 1u;
      copy_dense(__shfl_sync(full_warp, leaf, j), __shfl_sync(full_warp, bc, j), out + __shfl_sync(full_warp, at, j));
    }
  }

  // Entry i of a COO leaf in block column bc, keyed within the band.
  __device__ WideEntry<V> coo_entry(const CooView<V>& v, std::uint32_t i, std::uint32_t bc) const {
    const LocalCoord lc = v.coords[i];
    return WideEntry<V>{row_key(lc.row, (bc << b) | lc.col, b), v.values[i]};
  }

  // What count() found, for gather(): the COOW run's first index, or, where
  // the band's leaves took one warp step (at most 32 of them: a banded
  // matrix's few), this lane's leaf and its run, so that gather neither
  // searches again nor copies a leaf by one lane (perf-log A10).
  struct Found {
    std::uint32_t total = 0;
    std::uint32_t first = 0, count = 0, col = 0;  // this lane's leaf run (one step)
    NodeRef leaf = null_ref;
    bool one_step = false;
  };

  // A small transposed root (FlatArgs::scanned): the warp walks all of it
  // for the entries in its rows; writes them to out unless null (in the
  // pool's order: every digit still to sort); returns how many.
  __device__ std::uint32_t scan(WideEntry<V>* out) const {
    const std::uint32_t first_row = br << b, lo = first_row + r0, hi = first_row + r1;
    std::uint32_t n = 0;
    flat_warp_for_each_entry(op, ref, b, lane, [&](bool valid, std::uint32_t r16, std::uint32_t c16, V v) {
      const bool in = valid && r16 >= lo && r16 < hi;
      const unsigned hits = __ballot_sync(full_warp, in);
      if (in && out != nullptr) out[n + __popc(hits & lanes_below(lane))] = WideEntry<V>{row_key(r16 - first_row, c16, b), v};
      n += __popc(hits);
    });
    return n;
  }

  __device__ Found count() const {
    Found f;
    if (ref == null_ref) return f;
    if (scanned) {
      f.total = scan(nullptr);
      return f;
    }
    if (flat_bucketed(op.transposed, ref)) {
      f.total = bucket->count;
      return f;
    }
    if (ref_type(ref) == NodeType::coow) {
      f.total = coow_run(coow_view<V>(op.pool, ref), f.first);
      return f;
    }
    std::uint32_t n = 0, steps = 0;
    for_band_leaves([&](NodeRef leaf, std::uint32_t bc) {
      std::uint32_t first = 0;
      const std::uint32_t c = leaf != null_ref ? leaf_run(leaf, first) : 0u;
      n += c;
      f.first = first;
      f.count = c;
      f.col = bc;
      f.leaf = leaf;
      ++steps;
    });
    f.one_step = steps == 1;
    f.total = __reduce_add_sync(full_warp, n);
    return f;
  }

  // Writes the unit's entries to out; returns the digits (a bit each, applied
  // from the lowest) whose stable counting passes make them row-major.
  __device__ unsigned gather(WideEntry<V>* out, const Found& found) const {
    using Entry = WideEntry<V>;
    if (ref == null_ref) return 0u;
    if (scanned) {
      scan(out);
      return 0b111u;
    }
    if (flat_bucketed(op.transposed, ref)) {
      const Entry* in = bucketed + bucket->start;
      for (std::uint32_t i = lane; i < bucket->count; i += 32) out[i] = in[i];
      return 0b111u;  // in no order
    }
    if (ref_type(ref) == NodeType::coow) {
      const CoowView<V> w = coow_view<V>(op.pool, ref);
      for (std::uint32_t i = lane; i < found.total; i += 32) {
        const WideCoord c = w.coords[found.first + i];
        out[i] = Entry{row_key(c.row - (br << b), c.col, b), w.values[found.first + i]};
      }
      return 0u;  // row-major already
    }
    if (found.one_step) {
      // Each lane's leaf run is known: the warp copies the sparse runs one
      // after the other, a lane per entry; a dense leaf's cells, by its lane.
      const std::uint32_t incl = warp_inclusive_sum(found.count, lane);
      const bool dense = found.count != 0 && ref_type(found.leaf) == NodeType::dense;
      copy_dense_leaves(__ballot_sync(full_warp, dense), found.leaf, found.col, incl - found.count, out);
      unsigned sparse = __ballot_sync(full_warp, found.count != 0 && !dense);
      while (sparse != 0u) {
        const std::uint32_t j = static_cast<std::uint32_t>(__ffs(sparse) - 1);
        sparse &= sparse - 1u;
        const NodeRef leaf = __shfl_sync(full_warp, found.leaf, j);
        const std::uint32_t first = __shfl_sync(full_warp, found.first, j);
        const std::uint32_t c = __shfl_sync(full_warp, found.count, j);
        const std::uint32_t bc = __shfl_sync(full_warp, found.col, j);
        Entry* o = out + __shfl_sync(full_warp, incl, j) - c;
        const CooView<V> v = coo_view<V>(op.pool, leaf);
        for (std::uint32_t k = lane; k < c; k += 32) o[k] = coo_entry(v, first + k, bc);
      }
      return 0b100u;
    }
    // A lane per leaf: its run's bounds are searched first, so that the
    // copy's loads do not wait on one another.
    std::uint32_t offset = 0;
    for_band_leaves([&](NodeRef leaf, std::uint32_t bc) {
      std::uint32_t first = 0;
      const std::uint32_t c = leaf != null_ref ? leaf_run(leaf, first) : 0u;
      const std::uint32_t incl = warp_inclusive_sum(c, lane);
      Entry* o = out + offset + incl - c;
      const bool dense = c != 0 && ref_type(leaf) == NodeType::dense;
      copy_dense_leaves(__ballot_sync(full_warp, dense), leaf, bc, offset + incl - c, out);
      if (c != 0 && !dense) {
        const CooView<V> v = coo_view<V>(op.pool, leaf);
#pragma unroll 4
        for (std::uint32_t k = 0; k < c; ++k) o[k] = coo_entry(v, first + k, bc);
      }
      offset += __shfl_sync(full_warp, incl, 31);
    });
    // Leaves in block-column order, each row-major: a stable pass by the row
    // makes the whole row-major.
    return 0b100u;
  }
};

// Sorts x[0, n) by the digits in `passes` (stable counting passes from the
// lowest, through y); the result is in x.
template <class V>
__device__ void flat_sort(WideEntry<V>* x, WideEntry<V>* y, std::uint32_t n, unsigned passes, std::uint32_t b,
                          std::uint32_t lane, std::uint32_t* hist) {
  WideEntry<V>* from = x;
  WideEntry<V>* to = y;
  for (std::uint32_t k = 0; k < 3; ++k) {
    if (((passes >> k) & 1u) == 0u) continue;
    gpu::counting_pass(n, 1u << b, lane, hist, [&](std::uint32_t i) { return key_digit(from[i].key, k, b); },
                       [&](std::uint32_t i, std::uint32_t p) { to[p] = from[i]; });
    __syncwarp();
    WideEntry<V>* t = from;
    from = to;
    to = t;
  }
  if (from != x) {
    for (std::uint32_t i = lane; i < n; i += 32) x[i] = from[i];
    __syncwarp();
  }
}

}  // namespace hisparse::ops::add_gpu
