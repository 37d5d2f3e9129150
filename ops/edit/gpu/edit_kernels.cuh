#pragma once
// Kernels of the GPU batch edit (the steps are in edit_gpu.cu). Positions are
// content coordinates; a "unit" is a level-u sub-tree (u = depth - 2, or 0 in
// a tree of depth 1), the one the GPU builder rebuilds; a level l "block" of
// a unit is its coordinates shifted to level l: (R >> b·(u-l), C >> b·(u-l)).
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "../../convert/gpu/extract_kernels.cuh"

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
__global__ void unique_kernel(const u64* key, const u32* idx, const u32* run, u64 n, u64* ukey, u32* ulast) {
  for (u64 i = blockIdx.x * u64(blockDim.x) + threadIdx.x; i < n; i += u64(gridDim.x) * blockDim.x) {
    const u32 j = run[i] - 1;
    if (i == 0 || key[i] != key[i - 1]) ukey[j] = key[i];
    if (i + 1 == n || key[i + 1] != key[i]) ulast[j] = idx[i];
  }
}

// Each touched unit's block coordinates, from its first distinct update.
template <class I>
__global__ void units_kernel(const u64* ukey, const u32* ulast, const u32* run, u64 m, u32 unit_shift, const I* row,
                             const I* col, bool transposed, u32 level_shift, u64* UR, u64* UC) {
  for (u64 j = blockIdx.x * u64(blockDim.x) + threadIdx.x; j < m; j += u64(gridDim.x) * blockDim.x) {
    if (j > 0 && (ukey[j] >> unit_shift) == (ukey[j - 1] >> unit_shift)) continue;
    const u32 t = run[j] - 1, i = ulast[j];
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

// The touched units the matrix has, as an extraction frontier.
__global__ void frontier_kernel(const u32* unit_ref, const u64* UR, const u64* UC, const u32* pos, u64 nt, u32* ref,
                                u64* R, u64* C) {
  for (u64 t = blockIdx.x * u64(blockDim.x) + threadIdx.x; t < nt; t += u64(gridDim.x) * blockDim.x) {
    if (unit_ref[t] == null_ref) continue;
    ref[pos[t]] = unit_ref[t];
    R[pos[t]] = UR[t];
    C[pos[t]] = UC[t];
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
