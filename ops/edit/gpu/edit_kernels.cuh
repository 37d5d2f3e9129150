#pragma once
// Kernels of the GPU batch edit (the steps are in edit_gpu.cu). Positions are
// content coordinates; a "unit" is a level-u sub-tree (u = depth - 2, or 0 in
// a tree of depth 1), the one the GPU builder rebuilds; a level l "block" of
// a unit is its coordinates shifted to level l: (R >> b·(u-l), C >> b·(u-l)).
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "../../convert/gpu/extract_kernels.cuh"
#include "hisparse/ops/edit.hpp"

namespace hisparse::ops::edit_gpu_detail {

using convert_detail::u32;
using convert_detail::u64;

// The tree order as one 64-bit key: the base-d digit pairs (row digit, column
// digit) of every level, the root's first. The root's pair is mixed-radix
// (row digit · its column digit count + column digit) so that the key of a
// matrix whose rows and columns fit 32 bits fits 64 bits at every node size.
struct TreeKey {
  u32 b, depth;
  u64 top_cols;
  __host__ __device__ u64 operator()(u64 r, u64 c) const {
    const u32 low = b * (depth - 1);
    u64 key = (r >> low) * top_cols + (c >> low);
    const u64 m = (u64{1} << b) - 1;
    for (u32 l = 1; l < depth; ++l) {
      const u32 s = b * (depth - 1 - l);
      key = (key << (2 * b)) | (((r >> s) & m) << b) | ((c >> s) & m);
    }
    return key;
  }
};

// Sort keys of the updates (content positions), and the first update outside
// the logical rows x cols.
template <class I>
__global__ void update_keys_kernel(const I* row, const I* col, u64 n, u64 rows, u64 cols, bool transposed, TreeKey tk,
                                   u64* key, u32* idx, unsigned long long* bad) {
  for (u64 i = blockIdx.x * u64(blockDim.x) + threadIdx.x; i < n; i += u64(gridDim.x) * blockDim.x) {
    const long long r = static_cast<long long>(row[i]), c = static_cast<long long>(col[i]);
    idx[i] = static_cast<u32>(i);
    if (r < 0 || c < 0 || u64(r) >= rows || u64(c) >= cols) {
      atomicMin(bad, static_cast<unsigned long long>(i));
      key[i] = 0;
      continue;
    }
    key[i] = transposed ? tk(u64(c), u64(r)) : tk(u64(r), u64(c));
  }
}

// head[i] = 1 where key[i] >> shift starts a run; head[n] = 0 (for the scan).
__global__ void run_heads_kernel(const u64* key, u64 n, u32 shift, u32* head) {
  for (u64 i = blockIdx.x * u64(blockDim.x) + threadIdx.x; i <= n; i += u64(gridDim.x) * blockDim.x)
    head[i] = i < n && (i == 0 || (key[i] >> shift) != (key[i - 1] >> shift));
}

// One entry per distinct position: its key and the last update at it (the
// one set keeps). run[i] = the inclusive scan of the heads.
// ustart[j]: the run's first position in sorted order (ustart[m] = n: the
// add sums a position's updates over its run).
__global__ void unique_kernel(const u64* key, const u32* idx, const u32* run, u64 n, u64* ukey, u32* ulast,
                              u32* ustart) {
  for (u64 i = blockIdx.x * u64(blockDim.x) + threadIdx.x; i < n; i += u64(gridDim.x) * blockDim.x) {
    const u32 j = run[i] - 1;
    if (i + 1 == n) ustart[j + 1] = static_cast<u32>(n);
    if (i == 0 || key[i] != key[i - 1]) {
      ukey[j] = key[i];
      ustart[j] = static_cast<u32>(i);
    }
    if (i + 1 == n || key[i + 1] != key[i]) ulast[j] = idx[i];
  }
}

// Each touched unit's block coordinates, from its first distinct update;
// ufirst[t]: that update (ufirst[nt] = m).
template <class I>
__global__ void units_kernel(const u64* ukey, const u32* ulast, const u32* run, u64 m, u32 unit_shift, const I* row,
                             const I* col, bool transposed, u32 level_shift, u64* UR, u64* UC, u32* ufirst) {
  for (u64 j = blockIdx.x * u64(blockDim.x) + threadIdx.x; j < m; j += u64(gridDim.x) * blockDim.x) {
    if (j + 1 == m) ufirst[run[j]] = static_cast<u32>(m);
    if (j > 0 && (ukey[j] >> unit_shift) == (ukey[j - 1] >> unit_shift)) continue;
    const u32 t = run[j] - 1, i = ulast[j];
    ufirst[t] = static_cast<u32>(j);
    const u64 r = static_cast<u64>(row[i]), c = static_cast<u64>(col[i]);
    UR[t] = (transposed ? c : r) >> level_shift;
    UC[t] = (transposed ? r : c) >> level_shift;
  }
}

// The child at (rd, cd) of an inner node (dense or sparse), or null.
__device__ inline NodeRef find_child(const std::byte* pool, NodeRef r, u32 b, u32 rd, u32 cd) {
  const std::byte* node = pool + ref_offset(r);
  const NodeType t = ref_type(r);
  if (t == NodeType::dense) return reinterpret_cast<const NodeRef*>(node)[(rd << b) | cd];
  const u32 n = convert_detail::node_count_word(pool, r);
  const CooLayout l = coo_layout(t, n, sizeof(NodeRef));
  const auto* co = reinterpret_cast<const LocalCoord*>(node + l.coord_offset);
  const u32 want = (rd << 8) | cd;
  u32 lo = 0, hi = n;
  while (lo < hi) {
    const u32 mid = (lo + hi) / 2;
    const u32 have = (u32(co[mid].row) << 8) | co[mid].col;
    if (have < want) lo = mid + 1; else hi = mid;
  }
  if (lo < n && ((u32(co[lo].row) << 8) | co[lo].col) == want)
    return reinterpret_cast<const NodeRef*>(node + l.value_offset)[lo];
  return null_ref;
}

// path[l·nt + t], l = 0..u: the node at level l above (and at) unit t, null
// where the pool has none. upper_start (when given): the lowest offset of a
// level u-1 node on a path (the builder lays levels out deepest first, so
// everything before it belongs to level u and below).
__global__ void descend_kernel(const std::byte* pool, NodeRef root, u32 b, u32 u, const u64* UR, const u64* UC, u64 nt,
                               u32* path, unsigned long long* upper_start) {
  const u32 m = (1u << b) - 1;
  for (u64 t = blockIdx.x * u64(blockDim.x) + threadIdx.x; t < nt; t += u64(gridDim.x) * blockDim.x) {
    NodeRef node = root;
    path[t] = node;
    for (u32 l = 0; l < u; ++l) {
      if (node != null_ref) {
        const u32 s = b * (u - 1 - l);
        node = find_child(pool, node, b, static_cast<u32>(UR[t] >> s) & m, static_cast<u32>(UC[t] >> s) & m);
      }
      path[(l + 1) * nt + t] = node;
    }
    if (upper_start && u >= 1) {
      const NodeRef p = path[(u - 1) * nt + t];
      if (p != null_ref) atomicMin(upper_start, static_cast<unsigned long long>(ref_offset(p)));
    }
  }
}

// flag[i] = 1 for a present node (ref[i] not null) that is taken (take null
// or take[i] == want); flag[n] = 0.
__global__ void take_kernel(const u32* ref, const u32* take, u32 want, u64 n, u32* flag) {
  for (u64 i = blockIdx.x * u64(blockDim.x) + threadIdx.x; i <= n; i += u64(gridDim.x) * blockDim.x)
    flag[i] = i < n && ref[i] != null_ref && (!take || take[i] == want);
}
__global__ void frontier_select_kernel(const u32* ref, const u64* R, const u64* C, const u32* flag, const u32* pos,
                                       u64 n, u32* fref, u64* fR, u64* fC) {
  for (u64 i = blockIdx.x * u64(blockDim.x) + threadIdx.x; i < n; i += u64(gridDim.x) * blockDim.x) {
    if (!flag[i]) continue;
    fref[pos[i]] = ref[i];
    fR[pos[i]] = R[i];
    fC[pos[i]] = C[i];
  }
}

__global__ void nonnull_kernel(const u32* ref, u64 n, u32* flag) {
  for (u64 i = blockIdx.x * u64(blockDim.x) + threadIdx.x; i <= n; i += u64(gridDim.x) * blockDim.x)
    flag[i] = i < n && ref[i] != null_ref;
}

// keep[e] = 0 for an old entry an update replaces (set) or removes (remove);
// *found counts the old entries at an update's position.
__global__ void match_old_kernel(const u64* row, const u64* col, u64 n, TreeKey tk, const u64* ukey, u64 m,
                                 bool drop, u32* keep, unsigned long long* found) {
  const u64 stride = u64(gridDim.x) * blockDim.x;
  for (u64 base = blockIdx.x * u64(blockDim.x); base <= n; base += stride) {
    const u64 e = base + threadIdx.x;
    bool hit = false;
    if (e < n) {
      const u64 k = tk(row[e], col[e]);
      u64 lo = 0, hi = m;
      while (lo < hi) {
        const u64 mid = lo + (hi - lo) / 2;
        if (ukey[mid] < k) lo = mid + 1; else hi = mid;
      }
      hit = lo < m && ukey[lo] == k;
    }
    if (e <= n) keep[e] = e < n && !(hit && drop);
    const unsigned ballot = __ballot_sync(0xFFFFFFFFu, hit);
    if ((threadIdx.x & 31u) == 0 && ballot) atomicAdd(found, static_cast<unsigned long long>(__popc(ballot)));
  }
}

// The kept old entries, first in the builder's input (an add sums the old
// value first, then the updates in input order).
template <class V, class J>
__global__ void gather_kept_kernel(const u64* row, const u64* col, const V* val, const u32* keep, const u32* pos, u64 n,
                                   J* brow, J* bcol, V* bval) {
  for (u64 e = blockIdx.x * u64(blockDim.x) + threadIdx.x; e < n; e += u64(gridDim.x) * blockDim.x) {
    if (!keep[e]) continue;
    brow[pos[e]] = static_cast<J>(row[e]);
    bcol[pos[e]] = static_cast<J>(col[e]);
    bval[pos[e]] = val[e];
  }
}

// Updates after them: all in input order (sel null: add), or the last of each
// position (set).
template <class V, class I, class J>
__global__ void put_updates_kernel(const I* row, const I* col, const V* val, const u32* sel, u64 count, bool transposed,
                                   J* brow, J* bcol, V* bval) {
  for (u64 k = blockIdx.x * u64(blockDim.x) + threadIdx.x; k < count; k += u64(gridDim.x) * blockDim.x) {
    const u64 i = sel ? sel[k] : k;
    const J r = static_cast<J>(row[i]), c = static_cast<J>(col[i]);
    brow[k] = transposed ? c : r;
    bcol[k] = transposed ? r : c;
    bval[k] = val[i];
  }
}

// ---- leaves and the unit rule ------------------------------------------------
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

// Per unit: rebuilt whole (1: absent, COOW, a depth-1 tree, or a standard
// unit whose COOW rule flips) or leaf by leaf (0). lfirst: per unit, its first
// touched leaf (nt + 1 entries; leaves of a unit are contiguous, in cell order).
template <unsigned Block>
__global__ void unit_mode_kernel(const std::byte* pool, const u32* aunit, u64 nt, const u64* lfirst, const u64* LR,
                                 const u64* LC, const u32* lold, const int* ldelta, u32 b, bool wide, bool unit_is_leaf,
                                 u32 value_bytes, u32* whole) {
  using Reduce = CUB_NS_QUALIFIER::BlockReduce<u64, Block>;
  __shared__ typename Reduce::TempStorage tmp;
  const u32 m1 = (1u << b) - 1;
  for (u64 t = blockIdx.x; t < nt; t += gridDim.x) {
    const NodeRef unit = aunit[t];
    if (unit_is_leaf || unit == null_ref || ref_type(unit) == NodeType::coow || !wide) {
      if (threadIdx.x == 0) whole[t] = unit_is_leaf || unit == null_ref || ref_type(unit) == NodeType::coow;
      continue;
    }
    const u64 lo = lfirst[t], hi = lfirst[t + 1];
    u64 bytes = 0, entries = 0, children = 0;
    // Old children the edit leaves alone.
    const bool dense = ref_type(unit) == NodeType::dense;
    const std::byte* node = pool + ref_offset(unit);
    const u32 n_old = dense ? 1u << (2 * b) : convert_detail::node_count_word(pool, unit);
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
    const u64 total_bytes = Reduce(tmp).Sum(bytes);
    __syncthreads();
    const u64 total_entries = Reduce(tmp).Sum(entries);
    __syncthreads();
    const u64 total_children = Reduce(tmp).Sum(children);
    __syncthreads();
    if (threadIdx.x == 0) {
      bool flip = false;
      if (total_entries > 0 && total_entries <= 0xFFFFFFFFull) {
        const u64 standard = total_bytes + choose_node(static_cast<u32>(total_children), b, false, sizeof(NodeRef)).bytes;
        flip = coow_layout64(total_entries, value_bytes).bytes <= standard;
      }
      whole[t] = flip;
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
    for (u32 i = threadIdx.x; i < n; i += Block) atomicAdd(bins + (((u32(co[i].row) >> b) << b) | (u32(co[i].col) >> b)), 1);
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
    const u64 total_bytes = Reduce(tmp).Sum(bytes);
    __syncthreads();
    const u64 total_entries = Reduce(tmp).Sum(entries);
    __syncthreads();
    const u64 total_children = Reduce(tmp).Sum(children);
    if (threadIdx.x == 0) {
      bool stays = false;
      if (total_entries > 0 && total_entries <= 0xFFFFFFFFull) {
        const u64 standard = total_bytes + choose_node(static_cast<u32>(total_children), b, false, sizeof(NodeRef)).bytes;
        stays = coow_layout64(total_entries, value_bytes).bytes <= standard;
      }
      whole[t] = stays ? unit_coow_merged : unit_whole;
      count[t] = static_cast<u32>(total_entries);
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

// flag[i] = whether item i's unit is (want) whole; flag[n] = 0.
__global__ void mode_flags_kernel(const u32* unit_of, u64 n, const u32* whole, u32 want, u32* flag) {
  for (u64 i = blockIdx.x * u64(blockDim.x) + threadIdx.x; i <= n; i += u64(gridDim.x) * blockDim.x)
    flag[i] = i < n && whole[unit_of ? unit_of[i] : i] == want;
}

// out[pos[i]] = value[i] (or i) where flag[i].
__global__ void select_kernel(const u32* flag, const u32* pos, u64 n, const u32* value, u32* out) {
  for (u64 i = blockIdx.x * u64(blockDim.x) + threadIdx.x; i < n; i += u64(gridDim.x) * blockDim.x)
    if (flag[i]) out[pos[i]] = value ? value[i] : static_cast<u32>(i);
}

template <class T>
__global__ void gather_kernel(const T* in, const u32* idx, u64 n, T* out) {
  for (u64 i = blockIdx.x * u64(blockDim.x) + threadIdx.x; i < n; i += u64(gridDim.x) * blockDim.x) out[i] = in[idx[i]];
}

// The unit of every update (in input order), from the sorted order.
__global__ void raw_unit_kernel(const u32* idx_s, const u32* run, const u32* urun, u64 n, u32* unit_of) {
  for (u64 p = blockIdx.x * u64(blockDim.x) + threadIdx.x; p < n; p += u64(gridDim.x) * blockDim.x)
    unit_of[idx_s[p]] = urun[run[p] - 1] - 1;
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
__global__ void minus_one_kernel(const u32* in, u64 n, u32* out) {
  for (u64 i = blockIdx.x * u64(blockDim.x) + threadIdx.x; i < n; i += u64(gridDim.x) * blockDim.x) out[i] = in[i] - 1;
}
__global__ void scatter_groups_kernel(const u32* grep, const u32* value, u64 groups, u32* out) {
  for (u64 g = blockIdx.x * u64(blockDim.x) + threadIdx.x; g < groups; g += u64(gridDim.x) * blockDim.x)
    out[grep[g]] = value[g];
}

// ---- leaves merged in place of a rebuild ---------------------------------------
// A touched leaf of a leaf-by-leaf unit is its old entries with its distinct
// updates applied: sparse both ways by a warp placing entries by rank, dense
// on either side by a thread block through a dense image of the leaf in
// shared memory (d^2 values and occupancy bits: node sizes up to 128).

template <class V>
struct LeafMerge {
  const std::byte* pool;  // the old nodes
  std::byte* arena;       // the new leaves: at base + offset[l] (zeroed)
  u64 base;
  const u32* old;         // per leaf: its old reference (or null)
  const u32* first;       // per leaf: its distinct updates [first[l], last[l])
  const u32* last;
  const u32* count;       // per leaf: its entries after the edit
  const u64* offset;
  const u64* ukey;        // per distinct update: its tree key (the low 2b bits: its cell)
  const u32* ulast;       // the last update at it (set)
  const u32* ustart;      // its updates in sorted order [ustart[j], ustart[j+1]) (add)
  const u32* idx_s;       // sorted order -> input index
  const u32* present;     // whether A holds it
  const V* val;           // the updates' values (input order)
  EditMode mode;
  u32 b;
  u32* out;               // per leaf: its new reference (null: emptied)
};

// The value an update leaves at its position (set: the last; add: the old
// value if present, then each update in input order).
template <class V>
__device__ inline V updated_value(const LeafMerge<V>& a, u32 j, bool present, V old) {
  if (a.mode == EditMode::set) return a.val[a.ulast[j]];
  u32 p = a.ustart[j];
  V v = present ? old + a.val[a.idx_s[p]] : a.val[a.idx_s[p]];
  for (++p; p < a.ustart[j + 1]; ++p) v += a.val[a.idx_s[p]];
  return v;
}

// A warp merges a sorted old node (n_old entries: old_pos(i), old_val(i))
// with its sorted distinct updates (k: upd_pos(t), their update indices
// upd_j(t), pp: the exclusive scan of their presence from the first): every
// entry goes to its rank through put(rank, position, value). An old entry moves
// by the inserts before it (or back by the removals before it); an insert goes
// after the old entries before it.
template <class V, class OldPos, class OldVal, class UpdPos, class UpdJ, class Put>
__device__ void warp_merge_by_rank(const LeafMerge<V>& a, u32 lane, u32 n_old, OldPos old_pos, OldVal old_val, u32 k,
                                   UpdPos upd_pos, UpdJ upd_j, const u32* pp, Put put) {
  for (u32 i = lane; i < n_old; i += 32) {
    const u32 p = old_pos(i);
    u32 lo = 0, hi = k;
    while (lo < hi) {
      const u32 mid = (lo + hi) / 2;
      if (upd_pos(mid) < p) lo = mid + 1; else hi = mid;
    }
    const bool hit = lo < k && upd_pos(lo) == p;
    const u32 present_before = pp[lo] - pp[0];
    if (a.mode == EditMode::remove) {
      if (!hit) put(i - present_before, p, old_val(i));
    } else {
      put(i + (lo - present_before), p, hit ? updated_value(a, upd_j(lo), true, old_val(i)) : old_val(i));
    }
  }
  if (a.mode == EditMode::remove) return;
  for (u32 t = lane; t < k; t += 32) {
    const u32 j = upd_j(t);
    if (a.present[j]) continue;
    const u32 p = upd_pos(t);
    u32 lo = 0, hi = n_old;
    while (lo < hi) {
      const u32 mid = (lo + hi) / 2;
      if (old_pos(mid) < p) lo = mid + 1; else hi = mid;
    }
    put(lo + (t - (pp[t] - pp[0])), p, updated_value(a, j, false, V(0)));
  }
}

// Leaves whose old and new forms are both sparse (or that empty): a warp
// each, no image, by rank (warp_merge_by_rank). ppos: the exclusive scan of
// `present`.
template <class V>
__global__ void leaf_merge_sparse_kernel(LeafMerge<V> a, const u32* list, u64 n_list, const u32* ppos) {
  const u32 b = a.b, cells = 1u << (2 * b), lane = threadIdx.x & 31u;
  const u64 warps = (u64(gridDim.x) * blockDim.x) / 32;
  for (u64 q = (blockIdx.x * u64(blockDim.x) + threadIdx.x) / 32; q < n_list; q += warps) {
    const u64 l = list[q];
    const u32 n_new = a.count[l];
    if (n_new == 0) {
      if (lane == 0) a.out[l] = null_ref;
      continue;
    }
    const u32 j0 = a.first[l], k = a.last[l] - j0;
    const NodeRef old = a.old[l];
    u32 n_old = 0;
    const LocalCoord* oco = nullptr;
    const V* ov = nullptr;
    if (old != null_ref) {
      const std::byte* node = a.pool + ref_offset(old);
      n_old = convert_detail::node_count_word(a.pool, old);
      const CooLayout lay = coo_layout(ref_type(old), n_old, sizeof(V));
      oco = reinterpret_cast<const LocalCoord*>(node + lay.coord_offset);
      ov = reinterpret_cast<const V*>(node + lay.value_offset);
    }
    const NodeChoice choice = choose_node(n_new, b, true, sizeof(V));
    std::byte* dst = a.arena + a.base + a.offset[l];
    const CooLayout lay = coo_layout(choice.type, n_new, sizeof(V));
    auto* nco = reinterpret_cast<LocalCoord*>(dst + lay.coord_offset);
    V* nv = reinterpret_cast<V*>(dst + lay.value_offset);
    warp_merge_by_rank(
        a, lane, n_old, [&](u32 i) { return (u32(oco[i].row) << b) | oco[i].col; }, [&](u32 i) { return ov[i]; }, k,
        [&](u32 t) { return static_cast<u32>(a.ukey[j0 + t]) & (cells - 1); }, [&](u32 t) { return j0 + t; },
        ppos + j0, [&](u32 rank, u32 c, V v) {
          nco[rank] = LocalCoord{static_cast<std::uint8_t>(c >> b), static_cast<std::uint8_t>(c & ((1u << b) - 1))};
          nv[rank] = v;
        });
    if (lane == 0) {
      *reinterpret_cast<u32*>(dst) = n_new;
      a.out[l] = make_ref(a.base + a.offset[l], choice.type);
    }
  }
}

// Merged COOW units: a warp each, by rank (warp_merge_by_rank) over the
// node's 32-bit positions; its updates in COOW order (jsorted: distinct
// update indices; ppos2: the exclusive scan of their presence in that order).
template <class V>
__global__ void coow_merge_kernel(LeafMerge<V> a, const u32* aunit, const u32* whole, const u32* count, u64 nt,
                                  const u32* first, const u32* jsorted, const u32* ppos2, const u32* wpos,
                                  const u64* offset, u32* out) {
  const u32 b = a.b, lane = threadIdx.x & 31u;
  const u64 warps = (u64(gridDim.x) * blockDim.x) / 32;
  for (u64 t = (blockIdx.x * u64(blockDim.x) + threadIdx.x) / 32; t < nt; t += warps) {
    if (whole[t] != unit_coow_merged) continue;
    const NodeRef old = aunit[t];
    const u32 n_old = convert_detail::node_count_word(a.pool, old), n_new = count[t];
    const CooLayout ol = coow_layout(n_old, sizeof(V));
    const auto* oco = reinterpret_cast<const WideCoord*>(a.pool + ref_offset(old) + ol.coord_offset);
    const V* ov = reinterpret_cast<const V*>(a.pool + ref_offset(old) + ol.value_offset);
    std::byte* dst = a.arena + a.base + offset[t];
    const CooLayout nl = coow_layout(n_new, sizeof(V));
    auto* nco = reinterpret_cast<WideCoord*>(dst + nl.coord_offset);
    V* nv = reinterpret_cast<V*>(dst + nl.value_offset);
    const u32 q0 = first[t];
    warp_merge_by_rank(
        a, lane, n_old, [&](u32 i) { return (u32(oco[i].row) << 16) | oco[i].col; }, [&](u32 i) { return ov[i]; },
        first[t + 1] - q0, [&](u32 i) { return wpos[jsorted[q0 + i]]; }, [&](u32 i) { return jsorted[q0 + i]; },
        ppos2 + q0, [&](u32 rank, u32 p, V v) {
          nco[rank] = WideCoord{static_cast<std::uint16_t>(p >> 16), static_cast<std::uint16_t>(p & 0xFFFFu)};
          nv[rank] = v;
        });
    if (lane == 0) {
      *reinterpret_cast<u32*>(dst) = n_new;
      out[t] = make_ref(a.base + offset[t], NodeType::coow);
    }
  }
}

// Bytes of each merged COOW node (0 for other units; bytes[nt] = 0).
__global__ void coow_bytes_kernel(const u32* whole, const u32* count, u64 nt, u32 value_bytes, u64* bytes) {
  for (u64 t = blockIdx.x * u64(blockDim.x) + threadIdx.x; t <= nt; t += u64(gridDim.x) * blockDim.x)
    bytes[t] = t < nt && whole[t] == unit_coow_merged ? coow_layout64(count[t], value_bytes).bytes : 0;
}

// Leaves that are or become dense: a thread block each, through the image.
template <class V, unsigned Block>
__global__ void leaf_merge_kernel(LeafMerge<V> a, const u32* list, u64 n_list) {
  using Scan = CUB_NS_QUALIFIER::BlockScan<u32, Block>;
  __shared__ typename Scan::TempStorage tmp;
  extern __shared__ __align__(16) unsigned char image[];
  const u32 b = a.b, cells = 1u << (2 * b), words = (cells + 31) / 32;
  V* vals = reinterpret_cast<V*>(image);
  u32* mask = reinterpret_cast<u32*>(image + cells * sizeof(V));
  for (u64 q = blockIdx.x; q < n_list; q += gridDim.x) {
    const u64 l = list[q];
    const u32 n_new = a.count[l];
    for (u32 w = threadIdx.x; w < words; w += Block) mask[w] = 0;
    __syncthreads();
    const NodeRef old = a.old[l];
    if (old != null_ref) {
      const std::byte* node = a.pool + ref_offset(old);
      if (ref_type(old) == NodeType::dense) {
        const auto* m8 = reinterpret_cast<const std::uint8_t*>(node);
        for (u32 w = threadIdx.x; w < words; w += Block) {
          u32 word = 0;
          for (u32 k = 0; k < 4 && 4 * w + k < (cells + 7) / 8; ++k) word |= u32(m8[4 * w + k]) << (8 * k);
          mask[w] = word;
        }
        const V* src = reinterpret_cast<const V*>(node + dense_mask_bytes(b));
        for (u32 c = threadIdx.x; c < cells; c += Block) vals[c] = src[c];
      } else {
        const u32 n = convert_detail::node_count_word(a.pool, old);
        const CooLayout lay = coo_layout(ref_type(old), n, sizeof(V));
        const auto* co = reinterpret_cast<const LocalCoord*>(node + lay.coord_offset);
        const V* src = reinterpret_cast<const V*>(node + lay.value_offset);
        for (u32 i = threadIdx.x; i < n; i += Block) {
          const u32 c = (u32(co[i].row) << b) | co[i].col;
          vals[c] = src[i];
          atomicOr(mask + (c >> 5), 1u << (c & 31));
        }
      }
    }
    __syncthreads();
    for (u32 j = a.first[l] + threadIdx.x; j < a.last[l]; j += Block) {
      const u32 c = static_cast<u32>(a.ukey[j]) & (cells - 1);
      if (a.mode == EditMode::remove) {
        atomicAnd(mask + (c >> 5), ~(1u << (c & 31)));
        continue;
      }
      vals[c] = updated_value(a, j, a.present[j] != 0, a.present[j] ? vals[c] : V(0));
      atomicOr(mask + (c >> 5), 1u << (c & 31));
    }
    __syncthreads();
    const NodeChoice choice = choose_node(n_new, b, true, sizeof(V));
    std::byte* dst = a.arena + a.base + a.offset[l];
    if (choice.type == NodeType::dense) {
      auto* m8 = reinterpret_cast<std::uint8_t*>(dst);
      for (u32 w = threadIdx.x; w < words; w += Block)
        for (u32 k = 0; k < 4 && 4 * w + k < (cells + 7) / 8; ++k) m8[4 * w + k] = static_cast<std::uint8_t>(mask[w] >> (8 * k));
      V* out = reinterpret_cast<V*>(dst + dense_mask_bytes(b));
      for (u32 c = threadIdx.x; c < cells; c += Block) out[c] = (mask[c >> 5] >> (c & 31)) & 1u ? vals[c] : V(0);
    } else {
      const CooLayout lay = coo_layout(choice.type, n_new, sizeof(V));
      auto* co = reinterpret_cast<LocalCoord*>(dst + lay.coord_offset);
      V* out = reinterpret_cast<V*>(dst + lay.value_offset);
      u32 done = 0;
      for (u32 w0 = 0; w0 < words; w0 += Block) {
        const u32 w = w0 + threadIdx.x;
        const u32 word = w < words ? mask[w] : 0u;
        u32 rank = 0, total = 0;
        Scan(tmp).ExclusiveSum(static_cast<u32>(__popc(word)), rank, total);
        for (u32 bits = word; bits; bits &= bits - 1) {
          const u32 c = 32 * w + (__ffs(bits) - 1);
          co[done + rank] = LocalCoord{static_cast<std::uint8_t>(c >> b), static_cast<std::uint8_t>(c & ((1u << b) - 1))};
          out[done + rank] = vals[c];
          ++rank;
        }
        done += total;
        __syncthreads();
      }
      if (threadIdx.x == 0) *reinterpret_cast<u32*>(dst) = n_new;
    }
    if (threadIdx.x == 0) a.out[l] = make_ref(a.base + a.offset[l], choice.type);
    __syncthreads();
  }
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
__global__ void invert_flags_kernel(const u32* flag, u64 n, u32* out) {
  for (u64 i = blockIdx.x * u64(blockDim.x) + threadIdx.x; i <= n; i += u64(gridDim.x) * blockDim.x)
    out[i] = i < n && !flag[i];
}

// out[i] = in[idx[i] + 1] (the end of item idx[i]'s range).
__global__ void gather_next_kernel(const u32* in, const u32* idx, u64 n, u32* out) {
  for (u64 i = blockIdx.x * u64(blockDim.x) + threadIdx.x; i < n; i += u64(gridDim.x) * blockDim.x) out[i] = in[idx[i] + 1];
}

// ---- the inner nodes above the units, one level at a time ------------------
// A level's "items" are the new (or emptied) nodes one level down, sorted by
// tree position: their block coordinates (R, C), whether they exist (live) and
// their new references; a "group" is the items of one parent. The parent's
// old node is rep's path entry at the parent's level.

struct InnerLevel {
  const std::byte* pool;  // the old tree's (the arena)
  const u32* old_node;    // per unit: the old node at the parents' level
  const u32* rep;         // per item: a unit under it
  const u64* first;       // per group: its first item (ng + 1 entries)
  const u64* R;           // per item
  const u64* C;
  const u32* live;        // per item: non-zero when the item's node exists
  u64 groups;
  u32 b;
};

// The child at `cell` after the edit (touched: the item's, else the old one).
template <class F>
__device__ inline void for_each_cell(const InnerLevel& L, u64 g, F&& f) {
  const u32 b = L.b, cells = 1u << (2 * b), m = (1u << b) - 1;
  const u64 lo = L.first[g], hi = L.first[g + 1];
  const NodeRef old = L.old_node[L.rep[lo]];
  for (u32 base = 0; base < cells; base += blockDim.x) {
    const u32 cell = base + threadIdx.x;
    NodeRef was = null_ref;
    long long item = -1;
    if (cell < cells) {
      if (old != null_ref) was = find_child(L.pool, old, b, cell >> b, cell & m);
      u64 a = lo, z = hi;
      while (a < z) {
        const u64 mid = a + (z - a) / 2;
        const u32 c = ((static_cast<u32>(L.R[mid]) & m) << b) | (static_cast<u32>(L.C[mid]) & m);
        if (c < cell) a = mid + 1; else z = mid;
      }
      if (a < hi && (((static_cast<u32>(L.R[a]) & m) << b) | (static_cast<u32>(L.C[a]) & m)) == cell)
        item = static_cast<long long>(a);
    }
    f(base, cell < cells, cell, was, item);
  }
}

// Per group: its children after the edit, its bytes, and how many of them are
// old children kept where they are.
template <unsigned Block>
__global__ void inner_count_kernel(InnerLevel L, u32* count, u64* bytes, unsigned long long* shared) {
  using Reduce = CUB_NS_QUALIFIER::BlockReduce<u32, Block>;
  __shared__ typename Reduce::TempStorage tmp;
  for (u64 g = blockIdx.x; g < L.groups; g += gridDim.x) {
    u32 n = 0, kept = 0;
    for_each_cell(L, g, [&](u32, bool valid, u32, NodeRef was, long long item) {
      if (!valid) return;
      if (item >= 0) n += L.live[item] != 0;
      else if (was != null_ref) { ++n; ++kept; }
    });
    const u32 total = Reduce(tmp).Sum(n);
    __syncthreads();
    const u32 total_kept = Reduce(tmp).Sum(kept);
    __syncthreads();
    if (threadIdx.x == 0) {
      count[g] = total;
      bytes[g] = total ? choose_node(total, L.b, false, sizeof(NodeRef)).bytes : 0;
      if (total_kept) atomicAdd(shared, static_cast<unsigned long long>(total_kept));
    }
  }
}

// Writes each group's node at base + offset[g] (zeroed memory) and its
// reference into out[g] (null for an emptied one). item_ref: the items' new
// references.
template <unsigned Block>
__global__ void inner_write_kernel(InnerLevel L, const u32* item_ref, const u32* count, const u64* offset,
                                   std::byte* arena, u64 base, u32* out) {
  using Scan = CUB_NS_QUALIFIER::BlockScan<u32, Block>;
  __shared__ typename Scan::TempStorage tmp;
  __shared__ u32 done;
  for (u64 g = blockIdx.x; g < L.groups; g += gridDim.x) {
    const u32 n = count[g];
    if (n == 0) {
      if (threadIdx.x == 0) out[g] = null_ref;
      continue;
    }
    const NodeChoice choice = choose_node(n, L.b, false, sizeof(NodeRef));
    std::byte* node = arena + base + offset[g];
    if (threadIdx.x == 0) done = 0;
    __syncthreads();
    const CooLayout lay = choice.type == NodeType::dense ? CooLayout{} : coo_layout(choice.type, n, sizeof(NodeRef));
    for_each_cell(L, g, [&](u32, bool valid, u32 cell, NodeRef was, long long item) {
      NodeRef now = null_ref;
      if (valid) now = item >= 0 ? item_ref[item] : was;
      if (choice.type == NodeType::dense) {
        if (now != null_ref) reinterpret_cast<NodeRef*>(node)[cell] = now;
        return;
      }
      u32 rank = 0, chunk = 0;
      Scan(tmp).ExclusiveSum(now != null_ref ? 1u : 0u, rank, chunk);
      if (now != null_ref) {
        const u32 at = done + rank;
        reinterpret_cast<LocalCoord*>(node + lay.coord_offset)[at] =
            LocalCoord{static_cast<std::uint8_t>(cell >> L.b), static_cast<std::uint8_t>(cell & ((1u << L.b) - 1))};
        reinterpret_cast<NodeRef*>(node + lay.value_offset)[at] = now;
      }
      __syncthreads();
      if (threadIdx.x == 0) done += chunk;
      __syncthreads();
    });
    if (threadIdx.x == 0) {
      if (choice.type != NodeType::dense) *reinterpret_cast<u32*>(node) = n;
      out[g] = make_ref(base + offset[g], choice.type);
    }
    __syncthreads();
  }
}

// Groups of a level: head[k] = 1 where item k's parent block differs from
// item k-1's; head[n] = 0.
__global__ void group_heads_kernel(const u64* R, const u64* C, u64 n, u32 b, u32* head) {
  for (u64 k = blockIdx.x * u64(blockDim.x) + threadIdx.x; k <= n; k += u64(gridDim.x) * blockDim.x)
    head[k] = k < n && (k == 0 || (R[k] >> b) != (R[k - 1] >> b) || (C[k] >> b) != (C[k - 1] >> b));
}

// Per group (run = inclusive scan of the heads): its first item, its block,
// a unit under it. first[groups] = n.
__global__ void groups_kernel(const u64* R, const u64* C, const u32* rep, const u32* head, const u32* run, u64 n,
                              u64 groups, u32 b, u64* first, u64* GR, u64* GC, u32* grep) {
  for (u64 k = blockIdx.x * u64(blockDim.x) + threadIdx.x; k <= n; k += u64(gridDim.x) * blockDim.x) {
    if (k == n) { first[groups] = n; continue; }
    if (!head[k]) continue;
    const u32 g = run[k] - 1;
    first[g] = k;
    GR[g] = R[k] >> b;
    GC[g] = C[k] >> b;
    grep[g] = rep[k];
  }
}

// The units' new references: the rebuilt sub-trees moved by `delta` bytes
// (where they were copied into the arena), null for an emptied one; a
// standard unit node (not COOW, not a leaf) has its children moved too.
__global__ void place_units_kernel(const u32* built, u64 nt, u32 delta, bool leaves, u32 b, std::byte* arena,
                                   u32* out) {
  const u64 warps = (u64(gridDim.x) * blockDim.x) / 32;
  const u32 lane = threadIdx.x & 31u;
  for (u64 t = (blockIdx.x * u64(blockDim.x) + threadIdx.x) / 32; t < nt; t += warps) {
    const NodeRef p = built[t];
    if (lane == 0) out[t] = p == null_ref ? null_ref : p + delta;
    if (p == null_ref || leaves || ref_type(p) == NodeType::coow) continue;
    std::byte* node = arena + ref_offset(p) + delta;
    if (ref_type(p) == NodeType::dense) {
      auto* refs = reinterpret_cast<NodeRef*>(node);
      for (u32 i = lane; i < (1u << (2 * b)); i += 32)
        if (refs[i] != null_ref) refs[i] += delta;
    } else {
      const u32 n = *reinterpret_cast<const u32*>(node);
      auto* refs = reinterpret_cast<NodeRef*>(node + coo_layout(ref_type(p), n, sizeof(NodeRef)).value_offset);
      for (u32 i = lane; i < n; i += 32) refs[i] += delta;
    }
  }
}

}  // namespace hisparse::ops::edit_gpu_detail
