#pragma once
// The GPU batch edit's merges: touched leaves (and COOW nodes that stay
// COOW) written from their old entries and their updates, without a rebuild.
#include <cub/block/block_scan.cuh>

#include "edit_units.cuh"

namespace hisparse::ops::edit_gpu_detail {

using convert_detail::u32;
using convert_detail::u64;

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
    const NodeRef old = aunit[t];  // null: a new unit, its updates alone
    const u32 n_old = old != null_ref ? convert_detail::node_count_word(a.pool, old) : 0, n_new = count[t];
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

}  // namespace hisparse::ops::edit_gpu_detail
