#pragma once
// How each touched unit of the GPU batch edit is rewritten (leaf by leaf,
// whole, or a COOW node merged), which of its leaves are touched and what
// they will hold.
#include <cub/block/block_reduce.cuh>

#include "edit_batch.cuh"

namespace hisparse::ops::edit_gpu_detail {

using convert_detail::u32;
using convert_detail::u64;

// How a touched unit is rewritten: leaf by leaf, whole (by the builder), or,
// a COOW node that stays one, merged like a sparse leaf.
inline constexpr u32 unit_by_leaves = 0, unit_whole = 1, unit_coow_merged = 2;

// Each distinct update's position inside its unit as a COOW coordinate, row
// << 16 | column (from its position: the tree key's top digit pair is
// mixed-radix, so a depth-2 tree's unit digits are not bits of the key).
template <class I>
__global__ void wide_pos_kernel(const u32* ulast, u64 m, const I* row, const I* col, bool transposed, u32 b,
                                u32* wpos) {
  const u64 mask = (u64{1} << (2 * b)) - 1;
  for (u64 j = blockIdx.x * u64(blockDim.x) + threadIdx.x; j < m; j += u64(gridDim.x) * blockDim.x) {
    const u64 r0 = static_cast<u64>(row[ulast[j]]), c0 = static_cast<u64>(col[ulast[j]]);
    const u64 r = transposed ? c0 : r0, c = transposed ? r0 : c0;
    wpos[j] = static_cast<u32>(((r & mask) << 16) | (c & mask));
  }
}

// Whether the leaf or COOW node `r` holds local position (rr, cc) (leaf:
// digits below d; COOW: positions below d^2).
__device__ inline bool holds_entry(const std::byte* pool, NodeRef r, u32 b, u32 rr, u32 cc) {
  const std::byte* node = pool + ref_offset(r);
  const NodeType t = ref_type(r);
  if (t == NodeType::dense) {
    const u32 cell = (rr << b) | cc;
    return (reinterpret_cast<const std::uint8_t*>(node)[cell >> 3] >> (cell & 7u)) & 1u;
  }
  const u32 n = convert_detail::node_count_word(pool, r);
  u32 lo = 0, hi = n;
  if (t == NodeType::coow) {
    const auto* co = reinterpret_cast<const WideCoord*>(node + coow_layout(n, 4).coord_offset);
    const u32 want = (rr << 16) | cc;
    while (lo < hi) {
      const u32 mid = (lo + hi) / 2;
      if (((u32(co[mid].row) << 16) | co[mid].col) < want) lo = mid + 1; else hi = mid;
    }
    return lo < n && ((u32(co[lo].row) << 16) | co[lo].col) == want;
  }
  const auto* co = reinterpret_cast<const LocalCoord*>(node + coo_layout(t, n, 4).coord_offset);
  const u32 want = (rr << 8) | cc;
  while (lo < hi) {
    const u32 mid = (lo + hi) / 2;
    if (((u32(co[mid].row) << 8) | co[mid].col) < want) lo = mid + 1; else hi = mid;
  }
  return lo < n && ((u32(co[lo].row) << 8) | co[lo].col) == want;
}

// Entries of a leaf (dense: its mask's bits).
__device__ inline u32 leaf_entries(const std::byte* pool, NodeRef r, u32 b) {
  if (ref_type(r) != NodeType::dense) return convert_detail::node_count_word(pool, r);
  const u32 cells = 1u << (2 * b), words = (cells + 31) / 32;
  const auto* mask = reinterpret_cast<const u32*>(pool + ref_offset(r));
  u32 c = 0;
  for (u32 i = 0; i < words; ++i) c += __popc(cells >= 32 ? mask[i] : mask[i] & ((1u << cells) - 1u));
  return c;
}

// Each distinct update: present in A (its leaf's or COOW node's entry), and
// its leaf (lrun = the inclusive scan of leaf heads; none in a depth-1 tree).
template <class I>
__global__ void presence_kernel(const std::byte* pool, const u32* aunit, const u32* urun, const u32* ulast, u64 m,
                                const I* row, const I* col, bool transposed, u32 b, bool unit_is_leaf, u32* present) {
  for (u64 j = blockIdx.x * u64(blockDim.x) + threadIdx.x; j < m; j += u64(gridDim.x) * blockDim.x) {
    const u32 i = ulast[j];
    const u64 r0 = static_cast<u64>(row[i]), c0 = static_cast<u64>(col[i]);
    const u64 r = transposed ? c0 : r0, c = transposed ? r0 : c0;
    const u32 m1 = (1u << b) - 1;
    NodeRef node = aunit[urun[j] - 1];
    bool hit = false;
    if (node != null_ref) {
      if (ref_type(node) == NodeType::coow) {
        const u32 m2 = (1u << (2 * b)) - 1;
        hit = holds_entry(pool, node, b, static_cast<u32>(r) & m2, static_cast<u32>(c) & m2);
      } else {
        if (!unit_is_leaf) node = find_child(pool, node, b, static_cast<u32>(r >> b) & m1, static_cast<u32>(c >> b) & m1);
        hit = node != null_ref && holds_entry(pool, node, b, static_cast<u32>(r) & m1, static_cast<u32>(c) & m1);
      }
    }
    present[j] = hit;
  }
}

// The touched leaves (one per run of leaf keys): block coordinates, unit,
// first distinct update, old reference (null where absent or inside a COOW
// unit), and the change of its entry count (inserts minus removals).
template <class I>
__global__ void leaves_kernel(const u64* ukey, const u32* ulast, const u32* urun, const u32* lrun, const u32* present,
                              u64 m, u32 leaf_shift, const I* row, const I* col, bool transposed, u32 b,
                              const std::byte* pool, const u32* aunit, bool remove, u64* LR, u64* LC, u32* lunit,
                              u32* lold, int* ldelta, u32* lstart) {
  for (u64 j = blockIdx.x * u64(blockDim.x) + threadIdx.x; j < m; j += u64(gridDim.x) * blockDim.x) {
    const u32 l = lrun[j] - 1;
    if (j + 1 == m) lstart[l + 1] = static_cast<u32>(m);
    const int d = remove ? -static_cast<int>(present[j]) : static_cast<int>(!present[j]);
    if (d) atomicAdd(ldelta + l, d);
    if (j > 0 && (ukey[j] >> leaf_shift) == (ukey[j - 1] >> leaf_shift)) continue;
    const u32 i = ulast[j], t = urun[j] - 1;
    const u64 r0 = static_cast<u64>(row[i]), c0 = static_cast<u64>(col[i]);
    LR[l] = (transposed ? c0 : r0) >> b;
    LC[l] = (transposed ? r0 : c0) >> b;
    lunit[l] = t;
    lstart[l] = static_cast<u32>(j);
    const NodeRef unit = aunit[t];
    const u32 m1 = (1u << b) - 1;
    lold[l] = unit == null_ref || ref_type(unit) == NodeType::coow
                  ? null_ref
                  : find_child(pool, unit, b, static_cast<u32>(LR[l]) & m1, static_cast<u32>(LC[l]) & m1);
  }
}

// The builder's COOW rule for a unit whose leaves would take `bytes` for
// `entries` entries in `children` leaves (this thread's shares): block-wide
// sums; thread 0 gets whether a COOW node is the unit's canonical form, and
// the unit's entries in *total.
template <unsigned Block>
__device__ bool coow_rule(typename CUB_NS_QUALIFIER::BlockReduce<u64, Block>::TempStorage& tmp, u64 bytes, u64 entries,
                          u64 children, u32 b, u32 value_bytes, u64* total) {
  using Reduce = CUB_NS_QUALIFIER::BlockReduce<u64, Block>;
  const u64 total_bytes = Reduce(tmp).Sum(bytes);
  __syncthreads();
  const u64 total_entries = Reduce(tmp).Sum(entries);
  __syncthreads();
  const u64 total_children = Reduce(tmp).Sum(children);
  __syncthreads();
  *total = total_entries;
  if (total_entries == 0 || total_entries > 0xFFFFFFFFull) return false;
  const u64 standard = total_bytes + choose_node(static_cast<u32>(total_children), b, false, sizeof(NodeRef)).bytes;
  return coow_layout64(total_entries, value_bytes).bytes <= standard;
}

// Per unit: rebuilt whole (1: absent, COOW, a depth-1 tree, or a standard
// unit whose COOW rule flips) or leaf by leaf (0). lfirst: per unit, its first
// touched leaf (nt + 1 entries; leaves of a unit are contiguous, in cell order).
template <unsigned Block>
__global__ void unit_mode_kernel(const std::byte* pool, const u32* aunit, u64 nt, const u64* lfirst, const u64* LR,
                                 const u64* LC, const u32* lold, const int* ldelta, u32 b, bool wide, bool unit_is_leaf,
                                 u32 value_bytes, u32* whole, u32* coow_count) {
  using Reduce = CUB_NS_QUALIFIER::BlockReduce<u64, Block>;
  __shared__ typename Reduce::TempStorage tmp;
  const u32 m1 = (1u << b) - 1;
  for (u64 t = blockIdx.x; t < nt; t += gridDim.x) {
    const NodeRef unit = aunit[t];
    // A unit A lacks is written from its updates like the others: leaf by
    // leaf, or in a wide pool as a COOW node where the rule says so (its
    // leaves are its touched ones, counted below); without the COOW merge
    // (node size 256) the builder writes it.
    const bool fresh = unit == null_ref && wide && coow_count;
    if (!fresh && (unit_is_leaf || unit == null_ref || ref_type(unit) == NodeType::coow || !wide)) {
      if (threadIdx.x == 0)
        whole[t] = unit_is_leaf || ref_type(unit) == NodeType::coow ? unit_whole
                   : unit == null_ref && wide                         ? unit_whole
                                                                       : unit_by_leaves;
      continue;
    }
    const u64 lo = lfirst[t], hi = lfirst[t + 1];
    u64 bytes = 0, entries = 0, children = 0;
    // Old children the edit leaves alone.
    const bool dense = ref_type(unit) == NodeType::dense;
    const std::byte* node = pool + ref_offset(unit);
    const u32 n_old = fresh ? 0 : dense ? 1u << (2 * b) : convert_detail::node_count_word(pool, unit);
    const CooLayout lay = dense ? CooLayout{} : coo_layout(ref_type(unit), n_old, sizeof(NodeRef));
    for (u32 k = threadIdx.x; k < n_old; k += blockDim.x) {
      u32 cell;
      NodeRef leaf;
      if (dense) {
        cell = k;
        leaf = reinterpret_cast<const NodeRef*>(node)[k];
        if (leaf == null_ref) continue;
      } else {
        const LocalCoord lc = reinterpret_cast<const LocalCoord*>(node + lay.coord_offset)[k];
        cell = (u32(lc.row) << b) | lc.col;
        leaf = reinterpret_cast<const NodeRef*>(node + lay.value_offset)[k];
      }
      u64 a = lo, z = hi;
      while (a < z) {
        const u64 mid = a + (z - a) / 2;
        const u32 c = ((static_cast<u32>(LR[mid]) & m1) << b) | (static_cast<u32>(LC[mid]) & m1);
        if (c < cell) a = mid + 1; else z = mid;
      }
      if (a < hi && (((static_cast<u32>(LR[a]) & m1) << b) | (static_cast<u32>(LC[a]) & m1)) == cell) continue;
      const u32 n = leaf_entries(pool, leaf, b);
      bytes += choose_node(n, b, true, value_bytes).bytes;
      entries += n;
      ++children;
    }
    // The touched ones as they will be.
    for (u64 l = lo + threadIdx.x; l < hi; l += blockDim.x) {
      const long long n = (lold[l] != null_ref ? static_cast<long long>(leaf_entries(pool, lold[l], b)) : 0) + ldelta[l];
      if (n <= 0) continue;
      bytes += choose_node(static_cast<u32>(n), b, true, value_bytes).bytes;
      entries += static_cast<u64>(n);
      ++children;
    }
    u64 total = 0;
    const bool flip = coow_rule<Block>(tmp, bytes, entries, children, b, value_bytes, &total);
    if (threadIdx.x == 0) {
      whole[t] = fresh ? (flip ? unit_coow_merged : unit_by_leaves) : flip ? unit_whole : unit_by_leaves;
      if (fresh) coow_count[t] = static_cast<u32>(total);
    }
  }
}

// COOW units (node sizes up to 128): does the node stay COOW after the edit?
// A thread block per unit counts the entries every leaf block would hold (a
// histogram of d^2 bins in shared memory, old entries plus the inserts minus
// the removals) and applies the builder's rule to the sizes: whole[t] becomes
// unit_coow_merged (its entries after the edit in count[t]) where it stays,
// unit_whole where it flips or empties.
template <unsigned Block>
__global__ void coow_mode_kernel(const std::byte* pool, const u32* aunit, u64 nt, const u32* ufirst, const u32* wpos,
                                 const u32* present, bool remove, u32 b, u32 value_bytes, u32* whole, u32* count) {
  using Reduce = CUB_NS_QUALIFIER::BlockReduce<u64, Block>;
  __shared__ typename Reduce::TempStorage tmp;
  extern __shared__ int bins[];
  const u32 cells = 1u << (2 * b);
  for (u64 t = blockIdx.x; t < nt; t += gridDim.x) {
    const NodeRef unit = aunit[t];
    if (unit == null_ref || ref_type(unit) != NodeType::coow) continue;
    for (u32 c = threadIdx.x; c < cells; c += Block) bins[c] = 0;
    __syncthreads();
    const u32 n = convert_detail::node_count_word(pool, unit);
    const auto* co = reinterpret_cast<const WideCoord*>(pool + ref_offset(unit) + coow_layout(n, 4).coord_offset);
    for (u32 i = threadIdx.x; i < n; i += Block)
      atomicAdd(bins + (((u32(co[i].row) >> b) << b) | (u32(co[i].col) >> b)), 1);
    for (u32 j = ufirst[t] + threadIdx.x; j < ufirst[t + 1]; j += Block) {
      const int d = remove ? -static_cast<int>(present[j]) : static_cast<int>(!present[j]);
      if (d) atomicAdd(bins + (((wpos[j] >> 16) >> b) << b | ((wpos[j] & 0xFFFFu) >> b)), d);
    }
    __syncthreads();
    u64 bytes = 0, entries = 0, children = 0;
    for (u32 c = threadIdx.x; c < cells; c += Block) {
      if (bins[c] <= 0) continue;
      bytes += choose_node(static_cast<u32>(bins[c]), b, true, value_bytes).bytes;
      entries += static_cast<u64>(bins[c]);
      ++children;
    }
    u64 total = 0;
    const bool stays = coow_rule<Block>(tmp, bytes, entries, children, b, value_bytes, &total);
    if (threadIdx.x == 0) {
      // A COOW node that would stop being one is rebuilt whole (its entries
      // spread into leaves).
      whole[t] = stays ? unit_coow_merged : unit_whole;
      count[t] = static_cast<u32>(total);
    }
    __syncthreads();
  }
}

// Sort keys of the distinct updates of merged COOW units: unit, then COOW
// position (the node's row-major order, not the tree's).
__global__ void coow_keys_kernel(const u32* sel, u64 n, const u32* urun, const u32* wpos, u64* key) {
  for (u64 q = blockIdx.x * u64(blockDim.x) + threadIdx.x; q < n; q += u64(gridDim.x) * blockDim.x) {
    const u32 j = sel[q];
    key[q] = (u64(urun[j] - 1) << 32) | wpos[j];
  }
}

// Per unit, its updates [first[t], first[t+1]) in the sorted order (empty
// for units not merged): the first sorted key of unit t or later.
__global__ void coow_ranges_kernel(const u64* key, u64 n, u64 nt, u32* first) {
  for (u64 t = blockIdx.x * u64(blockDim.x) + threadIdx.x; t <= nt; t += u64(gridDim.x) * blockDim.x) {
    u64 lo = 0, hi = n;
    while (lo < hi) {
      const u64 mid = lo + (hi - lo) / 2;
      if ((key[mid] >> 32) < t) lo = mid + 1; else hi = mid;
    }
    first[t] = static_cast<u32>(lo);
  }
}

// lfirst[t] = the first touched leaf of unit t (lfirst[nt] = nl): every
// touched unit of a tree with leaves below its units has one.
__global__ void leaf_first_kernel(const u32* lunit, u64 nl, u64 nt, u64* lfirst) {
  for (u64 l = blockIdx.x * u64(blockDim.x) + threadIdx.x; l <= nl; l += u64(gridDim.x) * blockDim.x) {
    if (l == nl) lfirst[nt] = nl;
    else if (l == 0 || lunit[l] != lunit[l - 1]) lfirst[lunit[l]] = l;
  }
}

// Units that exist after the edit, and their references where already known
// (whole units: the rebuilt ones); leaf-by-leaf units are filled from their
// merged nodes (group g is unit rep[g]).
__global__ void unit_live_kernel(const u32* whole, const u32* rebuilt, u64 nt, u32* live) {
  for (u64 t = blockIdx.x * u64(blockDim.x) + threadIdx.x; t < nt; t += u64(gridDim.x) * blockDim.x)
    live[t] = whole[t] == unit_coow_merged || (whole[t] == unit_whole && rebuilt[t] != null_ref);
}
__global__ void scatter_live_kernel(const u32* grep, const u32* count, u64 groups, u32* live) {
  for (u64 g = blockIdx.x * u64(blockDim.x) + threadIdx.x; g < groups; g += u64(gridDim.x) * blockDim.x)
    live[grep[g]] = count[g] > 0;
}
// Per leaf of a leaf-by-leaf unit: its entries after the edit and its bytes.
__global__ void leaf_sizes_kernel(const std::byte* pool, const u32* old, const int* delta, u64 n, u32 b, u32 value_bytes,
                                  u32* count, u64* bytes) {
  for (u64 l = blockIdx.x * u64(blockDim.x) + threadIdx.x; l <= n; l += u64(gridDim.x) * blockDim.x) {
    if (l == n) { bytes[n] = 0; continue; }
    const long long c = (old[l] != null_ref ? static_cast<long long>(leaf_entries(pool, old[l], b)) : 0) + delta[l];
    count[l] = c > 0 ? static_cast<u32>(c) : 0;
    bytes[l] = c > 0 ? choose_node(static_cast<u32>(c), b, true, value_bytes).bytes : 0;
  }
}

// flag[l] = 1 for a leaf that is or becomes dense (the image kernel's), and
// flag[n] = 0; the others (sparse both ways, or emptied) take the warp kernel.
__global__ void dense_leaves_kernel(const std::byte* pool, const u32* old, const u32* count, u64 n, u32 b,
                                    u32 value_bytes, u32* flag) {
  for (u64 l = blockIdx.x * u64(blockDim.x) + threadIdx.x; l <= n; l += u64(gridDim.x) * blockDim.x)
    flag[l] = l < n && count[l] > 0 &&
              ((old[l] != null_ref && ref_type(old[l]) == NodeType::dense) ||
               choose_node(count[l], b, true, value_bytes).type == NodeType::dense);
}
}  // namespace hisparse::ops::edit_gpu_detail
