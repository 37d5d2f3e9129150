#pragma once
// The GPU batch edit's first steps (edit_gpu.cu has the sequence): the batch
// sorted by tree position and reduced to distinct positions, the touched units
// and their paths, the old entries of whole units matched against the
// updates, and the small selection kernels every step uses. Positions are
// content coordinates; a "unit" is a level-u sub-tree (u = depth - 2, or 0 in
// a tree of depth 1), the sub-tree a COOW node replaces; a level l "block" of
// a unit is its coordinates shifted to level l: (R >> b·(u-l), C >> b·(u-l)).
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

// Among n child coordinates sorted row-major: how many lie before (rd, cd)
// (where that child is, if it exists).
__device__ inline u32 coord_rank(const LocalCoord* co, u32 n, u32 rd, u32 cd) {
  const u32 want = (rd << 8) | cd;
  u32 lo = 0, hi = n;
  while (lo < hi) {
    const u32 mid = (lo + hi) / 2;
    const u32 have = (u32(co[mid].row) << 8) | co[mid].col;
    if (have < want) lo = mid + 1; else hi = mid;
  }
  return lo;
}

// The same in a sparse inner node r.
__device__ inline u32 child_rank(const std::byte* pool, NodeRef r, u32 rd, u32 cd) {
  const u32 n = convert_detail::node_count_word(pool, r);
  const auto* co = reinterpret_cast<const LocalCoord*>(pool + ref_offset(r) +
                                                       coo_layout(ref_type(r), n, sizeof(NodeRef)).coord_offset);
  return coord_rank(co, n, rd, cd);
}

// The child at (rd, cd) of an inner node (dense or sparse), or null.
__device__ inline NodeRef find_child(const std::byte* pool, NodeRef r, u32 b, u32 rd, u32 cd) {
  const std::byte* node = pool + ref_offset(r);
  const NodeType t = ref_type(r);
  if (t == NodeType::dense) return reinterpret_cast<const NodeRef*>(node)[(rd << b) | cd];
  const u32 n = convert_detail::node_count_word(pool, r);
  const CooLayout l = coo_layout(t, n, sizeof(NodeRef));
  const auto* co = reinterpret_cast<const LocalCoord*>(node + l.coord_offset);
  const u32 lo = coord_rank(co, n, rd, cd);
  if (lo < n && co[lo].row == rd && co[lo].col == cd) return reinterpret_cast<const NodeRef*>(node + l.value_offset)[lo];
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

// *count += the references among n that are not null (warp-aggregated: the
// loop's bounds are uniform across a warp, so every lane takes part in the
// ballot and lane 0 adds for the warp).
__global__ void count_nonnull_kernel(const u32* ref, u64 n, unsigned long long* count) {
  const u64 stride = u64(gridDim.x) * blockDim.x, warp0 = (blockIdx.x * u64(blockDim.x) + threadIdx.x) & ~u64{31};
  for (u64 w0 = warp0; w0 < n; w0 += stride) {
    const u64 i = w0 + (threadIdx.x & 31u);
    const unsigned ones = __ballot_sync(0xFFFFFFFFu, i < n && ref[i] != null_ref);
    if ((threadIdx.x & 31u) == 0 && ones) atomicAdd(count, static_cast<unsigned long long>(__popc(ones)));
  }
}

// keep[e] = 0 for an old entry an update replaces (set) or removes (remove);
// keep[n] = 0 (for the scan).
__global__ void match_old_kernel(const u64* row, const u64* col, u64 n, TreeKey tk, const u64* ukey, u64 m,
                                 bool drop, u32* keep) {
  for (u64 e = blockIdx.x * u64(blockDim.x) + threadIdx.x; e <= n; e += u64(gridDim.x) * blockDim.x) {
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
    keep[e] = e < n && !(hit && drop);
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

__global__ void minus_one_kernel(const u32* in, u64 n, u32* out) {
  for (u64 i = blockIdx.x * u64(blockDim.x) + threadIdx.x; i < n; i += u64(gridDim.x) * blockDim.x) out[i] = in[i] - 1;
}
__global__ void invert_flags_kernel(const u32* flag, u64 n, u32* out) {
  for (u64 i = blockIdx.x * u64(blockDim.x) + threadIdx.x; i <= n; i += u64(gridDim.x) * blockDim.x)
    out[i] = i < n && !flag[i];
}

// out[i] = in[idx[i] + 1] (the end of item idx[i]'s range).
__global__ void gather_next_kernel(const u32* in, const u32* idx, u64 n, u32* out) {
  for (u64 i = blockIdx.x * u64(blockDim.x) + threadIdx.x; i < n; i += u64(gridDim.x) * blockDim.x) out[i] = in[idx[i] + 1];
}

__global__ void scatter_groups_kernel(const u32* grep, const u32* value, u64 groups, u32* out) {
  for (u64 g = blockIdx.x * u64(blockDim.x) + threadIdx.x; g < groups; g += u64(gridDim.x) * blockDim.x)
    out[grep[g]] = value[g];
}

}  // namespace hisparse::ops::edit_gpu_detail
