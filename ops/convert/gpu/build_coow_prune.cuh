#pragma once
// The CSR build path's COOW nodes decided before the leaves are sorted
// (perf-log C14). On a scattered matrix (R-MAT 2^22: ~50 M leaves for 65 M
// entries) nearly every leaf lies under a COOW node and never reaches the
// pool, yet each was sorted, chosen a type and grouped into the depth-2
// level. The canonical rule needs only three sums per depth-2 node (its
// leaves, their entries, their bytes), and those come straight from pass 1's
// unsorted leaves: a dense grid of depth-2 blocks, summed by atomics (a
// warp's leaves of one block first reduced together).
//
// A COOW node's leaves then give way to one stand-in leaf (its entries, a key
// inside the node, bytes large enough that the skeleton's own rule, run on
// it, chooses COOW again and drops it). The skeleton is built from the kept
// leaves and the stand-ins: the same pool, with the levels over thousands of
// leaves instead of millions. Pass 2 finds each leaf slot's tree position
// through slot_linv: a kept leaf's own, or its node's stand-in (a dropped
// leaf's entries reach their COOW node by the COOW fill: build_csr.cuh).
#include <functional>
#include <optional>

#include "build_skeleton.cuh"

namespace hisparse::ops::convert_detail {

// Only where it pays and fits: many small leaves (at most 8 entries each on
// average) and a grid of depth-2 blocks no larger than the leaves.
inline constexpr u64 prune_entries_per_leaf = 8;

struct CoowPrune {
  u64 slots = 0;      // pass 1's leaves
  u64 kept = 0;       // of them, under standard nodes
  u64 stand_ins = 0;  // the COOW nodes
  Array<u32> count;   // the new leaf list's entry counts (kept, then stand-ins)
  Array<u32> slot_linv;
  // per depth-2 block (grid_cols a row): 1 where COOW, and its rank among them
  u64 grid_cols = 0;
  Array<u32> coow, coow_rank;
};

// Sums made before the rule for block rows whose leaves were never emitted
// (build_csr_block_sums.cuh): the blocks' sums and how many leaves they
// hold. Once the rule has run, `emit` emits the leaves of the block rows
// with an entry under a standard node (coow: per block) and returns the
// leaves emitted in all, or nothing where the input turned out bad; it may
// move the leaf arrays to make room (k.klo, and `count` for the counts).
struct PresummedCells {
  Array<unsigned long long> le, bytes;
  u64 leaves = 0;
  // called once the rule has run, with its decision and the sums it read
  std::function<std::optional<u64>(const u32* coow, const unsigned long long* le, u64 grid_cols)> emit;
  const u32* count = nullptr;
};

// Depth-2 block (grid cell) of a leaf slot.
__device__ inline u64 prune_cell(u64 key, u32 b, u32 upper_levels, u64 grid_cols) {
  u64 R, C;
  leaf_of_tree_key(key, b, upper_levels, R, C);
  return (R >> b) * grid_cols + (C >> b);
}

// Per cell: (leaves << 32 | entries) and leaf bytes. A warp's slots of one
// cell (a block row's leaves come in column order) add once. The entries
// never carry into the leaves: check_entry_count caps the input below 2^32.
template <class V>
__global__ void prune_sums_kernel(const u64* key, const u32* count, u64 slots, u32 b, u32 upper_levels,
                                  u64 grid_cols, unsigned long long* le, unsigned long long* bytes) {
  const u32 lane = threadIdx.x & 31;
  const u64 stride = u64(gridDim.x) * blockDim.x;
  for (u64 base = blockIdx.x * u64(blockDim.x) + (threadIdx.x & ~31u); base < slots; base += stride) {
    const u64 s = base + lane;
    const bool valid = s < slots;
    const u64 cell = valid ? prune_cell(key[s], b, upper_levels, grid_cols) : ~u64{0};
    const u32 c = valid ? count[s] : 0u;
    const u32 lb = valid ? static_cast<u32>(choose_node(c, b, true, sizeof(V)).bytes) : 0u;
    const unsigned group = __match_any_sync(~0u, cell);
    const u32 n_sum = __reduce_add_sync(group, c), b_sum = __reduce_add_sync(group, lb);
    if (valid && lane == static_cast<u32>(__ffs(group) - 1)) {
      atomicAdd(le + cell, (static_cast<unsigned long long>(__popc(group)) << 32) | n_sum);
      atomicAdd(bytes + cell, static_cast<unsigned long long>(b_sum));
    }
  }
}

// The canonical rule per cell (inner_choice_kernel's, on the same sums).
template <class V>
__global__ void prune_decide_kernel(const unsigned long long* le, const unsigned long long* bytes, u64 cells, u32 b,
                                    u32* coow) {
  for (u64 i = blockIdx.x * u64(blockDim.x) + threadIdx.x; i < cells; i += u64(gridDim.x) * blockDim.x) {
    const u64 leaves = le[i] >> 32, entries = le[i] & 0xFFFFFFFFull;
    u32 c = 0;
    if (leaves > 0) {
      const u64 standard = choose_node(static_cast<u32>(leaves), b, false, sizeof(NodeRef)).bytes + bytes[i];
      c = coow_layout64(entries, sizeof(V)).bytes <= standard ? 1u : 0u;
    }
    coow[i] = c;
  }
}

__global__ void prune_keep_kernel(const u64* key, u64 slots, u32 b, u32 upper_levels, u64 grid_cols, const u32* coow,
                                  u32* keep) {
  for (u64 s = blockIdx.x * u64(blockDim.x) + threadIdx.x; s <= slots; s += u64(gridDim.x) * blockDim.x)
    keep[s] = s < slots && !coow[prune_cell(key[s], b, upper_levels, grid_cols)] ? 1u : 0u;
}

// Kept slots to their places; every slot's index in the new list.
__global__ void prune_compact_kernel(const u64* key, const u32* count, u64 slots, u32 b, u32 upper_levels,
                                     u64 grid_cols, const u32* keep, const u32* pos, const u32* coow_rank, u64 kept,
                                     u64* key2, u32* count2, u32* slot_new) {
  for (u64 s = blockIdx.x * u64(blockDim.x) + threadIdx.x; s < slots; s += u64(gridDim.x) * blockDim.x) {
    if (keep[s]) {
      key2[pos[s]] = key[s];
      count2[pos[s]] = count[s];
      slot_new[s] = pos[s];
    } else {
      slot_new[s] = static_cast<u32>(kept + coow_rank[prune_cell(key[s], b, upper_levels, grid_cols)]);
    }
  }
}

// A stand-in per COOW cell: the key of the node's first leaf block, its
// entries; its place in the list follows the kept leaves.
__global__ void prune_stand_ins_kernel(const unsigned long long* le, const u32* coow, const u32* coow_rank, u64 cells,
                                       u64 grid_cols, u32 b, u32 upper_levels, u64 kept, u64* key2, u32* count2) {
  for (u64 i = blockIdx.x * u64(blockDim.x) + threadIdx.x; i < cells; i += u64(gridDim.x) * blockDim.x) {
    if (!coow[i]) continue;
    u64 hi, lo;
    leaf_tree_key((i / grid_cols) << b, (i % grid_cols) << b, b, upper_levels, hi, lo);
    const u64 j = kept + coow_rank[i];
    key2[j] = lo;
    count2[j] = static_cast<u32>(le[i] & 0xFFFFFFFFull);
  }
}

// A stand-in's bytes: past any COOW node's, so that plan_skeleton's rule
// (standard = the node's bytes with one child + this) chooses COOW, as the
// sums did; drop_leaves_kernel then zeroes them.
inline constexpr u64 stand_in_bytes = u64{1} << 40;
__global__ void prune_stand_in_bytes_kernel(const u32* lperm, u64 leaves, u64 kept, u64* lbytes) {
  for (u64 t = blockIdx.x * u64(blockDim.x) + threadIdx.x; t < leaves; t += u64(gridDim.x) * blockDim.x)
    if (lperm[t] >= kept) lbytes[t] = stand_in_bytes;
}

__global__ void prune_slot_linv_kernel(const u32* slot_new, const u32* linv, u64 slots, u32* slot_linv) {
  for (u64 s = blockIdx.x * u64(blockDim.x) + threadIdx.x; s < slots; s += u64(gridDim.x) * blockDim.x)
    slot_linv[s] = linv[slot_new[s]];
}

// The grid of depth-2 blocks (d² × d² cells each) over rows × cols:
// (grid_rows, grid_cols).
inline std::pair<u64, u64> depth2_grid(u64 rows, u64 cols, u32 b) {
  const u64 d2 = u64{1} << (2 * b);
  return {(rows + d2 - 1) / d2, (cols + d2 - 1) / d2};
}

// The depth-2 grid where the prune applies (at most 8 entries a leaf, no more
// blocks than leaves); nothing otherwise.
inline std::optional<std::pair<u64, u64>> prune_grid(const Skeleton& k, const Shape& shape,
                                                     const BuildOptions& options, u64 entries, u64 leaves) {
  if (!options.wide_nodes || k.L < 2 || k.key_hi || leaves == 0 || entries > prune_entries_per_leaf * leaves)
    return std::nullopt;
  const auto grid = depth2_grid(static_cast<u64>(shape.rows), static_cast<u64>(shape.cols), k.b);
  const u64 cells = grid.first * grid.second;
  if (cells > leaves || cells >= 0xFFFFFFFFull) return std::nullopt;
  return grid;
}

// Sorts and chooses the leaves as sort_leaves + choose_leaves do, with COOW
// nodes decided first where that applies (then true, and `p` holds the slot
// map for pass 2); false: nothing done, and with `pre` nothing emitted either,
// unless `emit` itself returned nothing (bad input: its caller knows).
template <class V>
bool prune_coow_leaves(WorkMemory& w, Skeleton& k, const Shape& shape, const BuildOptions& options, u64 entries,
                       const u32* count_by_leaf, CoowPrune& p, PresummedCells* pre = nullptr) {
  const cudaStream_t st = w.stream();
  const u32 b = k.b, upper = k.L - 1;
  const auto grid = prune_grid(k, shape, options, entries, k.NL + (pre ? pre->leaves : 0));
  if (!grid) return false;
  const u64 grid_cols = grid->second, cells = grid->first * grid_cols;
  Array<unsigned long long> le, bytes;
  if (pre) {
    le = std::move(pre->le);
    bytes = std::move(pre->bytes);
  } else {
    le = Array<unsigned long long>(w, cells);
    bytes = Array<unsigned long long>(w, cells);
    cuda_check(cudaMemsetAsync(le.get(), 0, cells * sizeof(unsigned long long), st), "cudaMemsetAsync");
    cuda_check(cudaMemsetAsync(bytes.get(), 0, cells * sizeof(unsigned long long), st), "cudaMemsetAsync");
  }
  if (k.NL > 0) {
    prune_sums_kernel<V><<<std::min<unsigned>(blocks_for(k.NL), 65536u), 256, 0, st>>>(
        k.klo.get(), count_by_leaf, k.NL, b, upper, grid_cols, le.get(), bytes.get());
    w.check_launch("COOW sums kernel");
  }
  Array<u32> coow(w, cells + 1), coow_rank(w, cells + 1);
  prune_decide_kernel<V><<<blocks_for(cells), 256, 0, st>>>(le.get(), bytes.get(), cells, b, coow.get());
  set_u32_kernel<<<1, 1, 0, st>>>(coow.get() + cells, 0u);
  w.check_launch("COOW rule kernel");
  bytes.release();
  exclusive_sum(w, coow.get(), coow_rank.get(), cells + 1);
  const u64 stand_ins = read_back(w, coow_rank.get() + cells, "read COOW nodes");
  if (stand_ins == 0) return false;
  if (pre) {
    const std::optional<u64> emitted = pre->emit(coow.get(), le.get(), grid_cols);
    if (!emitted) return false;
    k.NL = *emitted;
    count_by_leaf = pre->count;
  }
  const u64 slots = k.NL;
  Array<u32> keep(w, slots + 1), pos(w, slots + 1);
  prune_keep_kernel<<<blocks_for(slots + 1), 256, 0, st>>>(k.klo.get(), slots, b, upper, grid_cols, coow.get(),
                                                          keep.get());
  exclusive_sum(w, keep.get(), pos.get(), slots + 1);
  const u64 kept = read_back(w, pos.get() + slots, "read kept leaves");
  const u64 NL = kept + stand_ins;
  Array<u64> key2(w, NL);
  p.count = Array<u32>(w, NL);
  Array<u32> slot_new(w, slots ? slots : 1);
  prune_compact_kernel<<<blocks_for(slots), 256, 0, st>>>(k.klo.get(), count_by_leaf, slots, b, upper, grid_cols,
                                                          keep.get(), pos.get(), coow_rank.get(), kept, key2.get(),
                                                          p.count.get(), slot_new.get());
  prune_stand_ins_kernel<<<blocks_for(cells), 256, 0, st>>>(le.get(), coow.get(), coow_rank.get(), cells, grid_cols, b,
                                                           upper, kept, key2.get(), p.count.get());
  w.check_launch("COOW compaction kernels");
  keep.release();
  pos.release();
  le.release();
  k.klo = std::move(key2);
  k.NL = NL;
  {
    Array<u32> lperm = sort_leaves(w, k);
    choose_leaves<V>(w, k, lperm.get(), p.count.get());
    prune_stand_in_bytes_kernel<<<blocks_for(NL), 256, 0, st>>>(lperm.get(), NL, kept, k.lbytes.get());
    w.check_launch("COOW stand-in kernel");
  }
  p.slot_linv = Array<u32>(w, slots ? slots : 1);
  prune_slot_linv_kernel<<<blocks_for(slots), 256, 0, st>>>(slot_new.get(), k.linv.get(), slots, p.slot_linv.get());
  w.check_launch("COOW slot kernel");
  p.slots = slots;
  p.kept = kept;
  p.stand_ins = stand_ins;
  p.grid_cols = grid_cols;
  p.coow = std::move(coow);
  p.coow_rank = std::move(coow_rank);
  return true;
}

// Per COOW block of a pruned skeleton, its depth-2 node (a stand-in's
// parent): where pass 2 sends the entries of block rows never sorted.
__global__ void prune_cell_owner_kernel(const u32* coow, const u32* coow_rank, u64 cells, u64 kept, const u32* linv,
                                        const u32* leaf_parent, u32* owner) {
  for (u64 i = blockIdx.x * u64(blockDim.x) + threadIdx.x; i < cells; i += u64(gridDim.x) * blockDim.x)
    owner[i] = coow[i] ? leaf_parent[linv[kept + coow_rank[i]]] : ~0u;
}

}  // namespace hisparse::ops::convert_detail
