#pragma once
// The GPU batch edit's inner nodes: from the units' level up, each node on a
// touched path merges its old children with the new ones, one level at a
// time; and the rebuilt units placed in the arena.
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "edit_batch.cuh"

namespace hisparse::ops::edit_gpu_detail {

using convert_detail::u32;
using convert_detail::u64;

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

__device__ inline u32 item_cell(const InnerLevel& L, u64 k) {
  const u32 m = (1u << L.b) - 1;
  return ((static_cast<u32>(L.R[k]) & m) << L.b) | (static_cast<u32>(L.C[k]) & m);
}

// The first item in [lo, hi) (sorted by cell) at or past `cell`.
__device__ inline u64 first_item_at(const InnerLevel& L, u64 lo, u64 hi, u32 cell) {
  while (lo < hi) {
    const u64 mid = lo + (hi - lo) / 2;
    if (item_cell(L, mid) < cell) lo = mid + 1; else hi = mid;
  }
  return lo;
}

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
      const u64 a = first_item_at(L, lo, hi, cell);
      if (a < hi && item_cell(L, a) == cell) item = static_cast<long long>(a);
    }
    f(base, cell < cells, cell, was, item);
  }
}

// The group's old node where it is dense (those groups go cell by cell; the
// others, sparse or absent, through the flat kernels below).
__device__ inline NodeRef dense_old(const InnerLevel& L, u64 g) {
  const NodeRef old = L.old_node[L.rep[L.first[g]]];
  return old != null_ref && ref_type(old) == NodeType::dense ? old : null_ref;
}

// Per group with a dense old node: its children after the edit, its bytes,
// and how many of them are old children kept where they are.
template <unsigned Block>
__global__ void inner_count_kernel(InnerLevel L, u32* count, u64* bytes, unsigned long long* shared) {
  using Reduce = CUB_NS_QUALIFIER::BlockReduce<u32, Block>;
  __shared__ typename Reduce::TempStorage tmp;
  for (u64 g = blockIdx.x; g < L.groups; g += gridDim.x) {
    if (dense_old(L, g) == null_ref) continue;
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

// Writes each group's node (dense old node) at base + offset[g] (zeroed
// memory) and its reference into out[g] (null for an emptied one). item_ref:
// the items' new references.
template <unsigned Block>
__global__ void inner_write_kernel(InnerLevel L, const u32* item_ref, const u32* count, const u64* offset,
                                   std::byte* arena, u64 base, u32* out) {
  using Scan = CUB_NS_QUALIFIER::BlockScan<u32, Block>;
  __shared__ typename Scan::TempStorage tmp;
  __shared__ u32 done;
  for (u64 g = blockIdx.x; g < L.groups; g += gridDim.x) {
    if (dense_old(L, g) == null_ref) continue;
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

// Groups whose old node is sparse or absent: no pass over the d² cells, only
// over their items and old children. Per item, hl (an exclusive scan over the
// level's items of (hit << 32 | live)) gives the items before it that replace
// an old child (hit) and that exist after the edit (live); an old child's or
// an item's rank in the new node follows from those and one binary search.
struct FlatLevel {
  InnerLevel L;
  const u32* run;    // per item: its group + 1 (the inclusive scan of the group heads)
  const u64* hl;     // items + 1 entries
};

// The group's old node when it is sparse (null when absent or dense).
__device__ inline NodeRef sparse_old(const InnerLevel& L, u64 g) {
  const NodeRef old = L.old_node[L.rep[L.first[g]]];
  return old != null_ref && ref_type(old) != NodeType::dense ? old : null_ref;
}

__device__ inline bool flat_group(const InnerLevel& L, u64 g) { return dense_old(L, g) == null_ref; }

// flag[k] = (hit << 32) | live for the items of flat groups (0 elsewhere);
// flag[items] = 0.
__global__ void item_flags_kernel(InnerLevel L, const u32* run, u64 items, u64* flag) {
  for (u64 k = blockIdx.x * u64(blockDim.x) + threadIdx.x; k <= items; k += u64(gridDim.x) * blockDim.x) {
    u64 f = 0;
    if (k < items) {
      const u64 g = run[k] - 1;
      if (flat_group(L, g)) {
        const NodeRef old = sparse_old(L, g);
        const u32 cell = item_cell(L, k);
        const bool hit = old != null_ref && find_child(L.pool, old, L.b, cell >> L.b, cell & ((1u << L.b) - 1)) != null_ref;
        f = (u64(hit) << 32) | u64(L.live[k] != 0);
      }
    }
    flag[k] = f;
  }
}

__device__ inline u32 hits_between(const u64* hl, u64 lo, u64 hi) { return static_cast<u32>((hl[hi] >> 32) - (hl[lo] >> 32)); }
__device__ inline u32 lives_between(const u64* hl, u64 lo, u64 hi) {
  return static_cast<u32>((hl[hi] & 0xFFFFFFFFull) - (hl[lo] & 0xFFFFFFFFull));
}

// Per flat group: children after the edit, bytes, its old children (for
// their offsets: n_old[groups] = 0) and the kept ones into *shared.
__global__ void flat_count_kernel(FlatLevel F, u32* count, u64* bytes, u64* n_old, unsigned long long* shared) {
  const InnerLevel& L = F.L;
  for (u64 g = blockIdx.x * u64(blockDim.x) + threadIdx.x; g <= L.groups; g += u64(gridDim.x) * blockDim.x) {
    if (g == L.groups) { n_old[g] = 0; continue; }
    if (!flat_group(L, g)) { n_old[g] = 0; continue; }
    const NodeRef old = sparse_old(L, g);
    const u32 no = old != null_ref ? convert_detail::node_count_word(L.pool, old) : 0;
    const u64 lo = L.first[g], hi = L.first[g + 1];
    const u32 kept = no - hits_between(F.hl, lo, hi), n = kept + lives_between(F.hl, lo, hi);
    count[g] = n;
    bytes[g] = n ? choose_node(n, L.b, false, sizeof(NodeRef)).bytes : 0;
    n_old[g] = no;
    if (kept) atomicAdd(shared, static_cast<unsigned long long>(kept));
  }
}

// Per flat group: the count word and the reference (null when emptied).
__global__ void flat_heads_kernel(FlatLevel F, const u32* count, const u64* offset, std::byte* arena, u64 base,
                                  u32* out) {
  const InnerLevel& L = F.L;
  for (u64 g = blockIdx.x * u64(blockDim.x) + threadIdx.x; g < L.groups; g += u64(gridDim.x) * blockDim.x) {
    if (!flat_group(L, g)) continue;
    const u32 n = count[g];
    if (n == 0) { out[g] = null_ref; continue; }
    const NodeChoice choice = choose_node(n, L.b, false, sizeof(NodeRef));
    if (choice.type != NodeType::dense) *reinterpret_cast<u32*>(arena + base + offset[g]) = n;
    out[g] = make_ref(base + offset[g], choice.type);
  }
}

__device__ inline void put_child(std::byte* node, const NodeChoice& choice, u32 n, u32 b, u32 rank, u32 cell,
                                 NodeRef ref) {
  if (choice.type == NodeType::dense) {
    reinterpret_cast<NodeRef*>(node)[cell] = ref;
    return;
  }
  const CooLayout lay = coo_layout(choice.type, n, sizeof(NodeRef));
  reinterpret_cast<LocalCoord*>(node + lay.coord_offset)[rank] =
      LocalCoord{static_cast<std::uint8_t>(cell >> b), static_cast<std::uint8_t>(cell & ((1u << b) - 1))};
  reinterpret_cast<NodeRef*>(node + lay.value_offset)[rank] = ref;
}

// The live items of flat groups, each at its rank: the live items before it
// plus the kept old children before its cell.
__global__ void flat_items_kernel(FlatLevel F, const u32* item_ref, const u32* count, const u64* offset,
                                  std::byte* arena, u64 base, u64 items) {
  const InnerLevel& L = F.L;
  for (u64 k = blockIdx.x * u64(blockDim.x) + threadIdx.x; k < items; k += u64(gridDim.x) * blockDim.x) {
    if (!L.live[k]) continue;
    const u64 g = F.run[k] - 1;
    if (!flat_group(L, g)) continue;
    const u32 n = count[g], cell = item_cell(L, k);
    const u64 lo = L.first[g];
    const NodeRef old = sparse_old(L, g);
    // old children at cells before this one
    const u32 before = old != null_ref ? child_rank(L.pool, old, cell >> L.b, cell & ((1u << L.b) - 1)) : 0;
    const u32 rank = lives_between(F.hl, lo, k) + before - hits_between(F.hl, lo, k);
    put_child(arena + base + offset[g], choose_node(n, L.b, false, sizeof(NodeRef)), n, L.b, rank, cell, item_ref[k]);
  }
}

// The old children of flat groups that no item replaces, each at its rank
// (flat over all of them: o_off is the exclusive scan of their counts).
__global__ void flat_old_kernel(FlatLevel F, const u64* o_off, const u32* count, const u64* offset, std::byte* arena,
                                u64 base) {
  const InnerLevel& L = F.L;
  const u64 total = o_off[L.groups];
  for (u64 j = blockIdx.x * u64(blockDim.x) + threadIdx.x; j < total; j += u64(gridDim.x) * blockDim.x) {
    u64 a = 0, z = L.groups;  // the group: the last with o_off <= j
    while (z - a > 1) {
      const u64 mid = (a + z) / 2;
      if (o_off[mid] <= j) a = mid; else z = mid;
    }
    const u64 g = a;
    const u32 i = static_cast<u32>(j - o_off[g]);
    const NodeRef old = sparse_old(L, g);
    const u32 no = convert_detail::node_count_word(L.pool, old);
    const CooLayout ol = coo_layout(ref_type(old), no, sizeof(NodeRef));
    const std::byte* on = L.pool + ref_offset(old);
    const LocalCoord lc = reinterpret_cast<const LocalCoord*>(on + ol.coord_offset)[i];
    const u32 cell = (u32(lc.row) << L.b) | lc.col;
    const u64 lo = L.first[g], hi = L.first[g + 1];
    const u64 p = first_item_at(L, lo, hi, cell);
    if (p < hi && item_cell(L, p) == cell) continue;  // replaced (or removed) by an item
    const u32 n = count[g];
    const u32 rank = i - hits_between(F.hl, lo, p) + lives_between(F.hl, lo, p);
    put_child(arena + base + offset[g], choose_node(n, L.b, false, sizeof(NodeRef)), n, L.b, rank, cell,
              reinterpret_cast<const NodeRef*>(on + ol.value_offset)[i]);
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
