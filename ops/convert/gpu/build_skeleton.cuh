#pragma once
// Steps 4-5 of the GPU build, shared by both entry paths (build_gpu.cuh):
// from the leaves in tree order (tree keys, entry counts, node choices) to the
// upper levels, the offsets of every node, and finally the child references
// and the pool header. The entries themselves are written by the paths.
#include <algorithm>
#include <cstdlib>
#include <utility>
#include <vector>

#include "build_kernels.cuh"
#include "hisparse/ops/convert_gpu.hpp"
#include "work_memory.cuh"

namespace hisparse::ops::convert_detail {

// One upper level's skeleton (level depth-1, the leaves, is kept apart).
struct Level {
  u64 nodes = 0;
  Array<u32> first_leaf, first_child, child_parent;  // child_parent: of the level below's nodes
  Array<std::uint8_t> type;
  Array<u64> bytes;  // then their exclusive scan: offsets from base
  u64 base = 0, total = 0;
};

struct Skeleton {
  u32 b = 0, L = 0;
  bool key_hi = false;
  u64 NL = 0;
  Array<u64> klo, khi;  // the leaves' tree keys, sorted (khi: past 64 bits only)
  Array<u32> lcount, linv;  // linv: a path's leaf index -> tree position
  Array<std::uint8_t> ltype;
  Array<u64> lbytes;  // leaves + 1; then their offsets from leaf_base
  u64 leaf_base = sizeof(PoolHeader);
  std::vector<Level> lv;
  Array<u64> entry_scan;  // wide pools: exclusive scan of leaf entry counts in tree order
  u64 bytes = 0;          // the pool
  u64 coow_nodes = 0;
};

// Sorts a path's leaves (tree keys klo/khi by leaf index) into tree order;
// returns the permutation tree position -> leaf index.
inline Array<u32> sort_leaves(WorkMemory& w, Skeleton& k) {
  const cudaStream_t st = w.stream();
  const u64 NL = k.NL;
  const u32 key_bits = 2 * k.b * (k.L - 1);
  Array<u32> lperm(w, NL);
  Array<u32> idx(w, NL);
  iota_kernel<<<blocks_for(NL), 256, 0, st>>>(idx.get(), NL);
  Array<u64> sorted_lo(w, NL);
  radix_sort_pairs(w, k.klo.get(), sorted_lo.get(), idx.get(), lperm.get(), NL, k.key_hi ? 64 : static_cast<int>(key_bits));
  if (k.key_hi) {
    // Stably by the high bits; then the low bits follow the final order.
    gather_kernel<u64><<<blocks_for(NL), 256, 0, st>>>(k.khi.get(), lperm.get(), NL, sorted_lo.get());
    radix_sort_pairs(w, sorted_lo.get(), k.khi.get(), lperm.get(), idx.get(), NL, static_cast<int>(key_bits - 64));
    gather_kernel<u64><<<blocks_for(NL), 256, 0, st>>>(k.klo.get(), idx.get(), NL, sorted_lo.get());
    std::swap(lperm, idx);
  }
  std::swap(k.klo, sorted_lo);
  return lperm;
}

// Leaf node choices in tree order, from each leaf's entry count by leaf index
// (lperm: sort_leaves's permutation; null where the leaves are in tree order).
template <class V>
void choose_leaves(WorkMemory& w, Skeleton& k, const u32* lperm, const u32* count_by_leaf) {
  const u64 NL = k.NL;
  k.lcount = Array<u32>(w, NL);
  k.linv = Array<u32>(w, NL);
  k.ltype = Array<std::uint8_t>(w, NL);
  k.lbytes = Array<u64>(w, NL + 1);
  cuda_check(cudaMemsetAsync(k.lbytes.get(), 0, (NL + 1) * sizeof(u64), w.stream()), "cudaMemsetAsync");
  leaf_choice_kernel<V><<<blocks_for(NL), 256, 0, w.stream()>>>(lperm, count_by_leaf, NL, k.b, k.lcount.get(),
                                                                k.ltype.get(), k.lbytes.get(), k.linv.get());
  w.check_launch("leaf choice kernel");
}

// The pool header, with the root reference of the node at base + offset[0]
// of type type[0].
__global__ void pool_header_kernel(PoolHeader h, u64 base, const u64* offset, const std::uint8_t* type,
                                   std::byte* pool) {
  if (threadIdx.x != 0) return;
  h.root = make_ref(base + offset[0], static_cast<NodeType>(type[0]));
  *reinterpret_cast<PoolHeader*>(pool) = h;
}

// The upper levels top-down (COOW by the canonical rule), then every node's
// offset bottom-up and the pool's size.
template <class V>
void plan_skeleton(WorkMemory& w, Skeleton& k, const BuildOptions& options) {
  const cudaStream_t st = w.stream();
  const u32 b = k.b, L = k.L;
  const u64 NL = k.NL;
  const bool wide = options.wide_nodes && L >= 2;
  Array<u64> leaf_bytes_scan;
  if (wide) {
    Array<u64> counts(w, NL + 1);
    widen_kernel<<<blocks_for(NL + 1), 256, 0, st>>>(k.lcount.get(), NL, counts.get());
    k.entry_scan = Array<u64>(w, NL + 1);
    exclusive_sum(w, counts.get(), k.entry_scan.get(), NL + 1);
    leaf_bytes_scan = Array<u64>(w, NL + 1);
    exclusive_sum(w, k.lbytes.get(), leaf_bytes_scan.get(), NL + 1);
  }
  k.lv = std::vector<Level>(L > 0 ? L - 1 : 0);
  // Level depth-2 groups the leaves; each level above groups the nodes of the
  // one below (far fewer than leaves: R-MAT 2^22 has ~50 M leaves and 65 536
  // nodes at depth-2), by their first leaves' keys.
  for (u32 l = L - 1; l-- > 0;) {
    Level& v = k.lv[l];
    const bool over_leaves = l == L - 2;
    const u64 below = over_leaves ? NL : k.lv[l + 1].nodes;
    const u32* below_first_leaf = over_leaves ? nullptr : k.lv[l + 1].first_leaf.get();
    Array<u32> node_of(w, below);
    {
      Array<u32> h(w, below);
      const u32 shift = 2 * b * (L - 1 - l);
      if (over_leaves)
        level_heads_kernel<<<blocks_for(NL), 256, 0, st>>>(k.klo.get(), k.key_hi ? k.khi.get() : nullptr, NL, shift,
                                                           h.get());
      else
        level_heads_of_nodes_kernel<<<blocks_for(below), 256, 0, st>>>(
            k.klo.get(), k.key_hi ? k.khi.get() : nullptr, below_first_leaf, below, shift, h.get());
      inclusive_sum(w, h.get(), node_of.get(), below);
    }
    v.nodes = read_back(w, node_of.get() + below - 1, "read level size");
    // Each node's first child: a leaf at depth-2, a node of the level below above.
    v.first_child = Array<u32>(w, v.nodes + 1);
    v.child_parent = Array<u32>(w, below);
    level_nodes_kernel<<<blocks_for(below), 256, 0, st>>>(node_of.get(), below, v.first_child.get(),
                                                          v.child_parent.get());
    v.type = Array<std::uint8_t>(w, v.nodes);
    v.bytes = Array<u64>(w, v.nodes + 1);
    cuda_check(cudaMemsetAsync(v.bytes.get(), 0, (v.nodes + 1) * sizeof(u64), st), "cudaMemsetAsync");
    const bool coow_level = wide && over_leaves;
    LevelInput in{v.nodes, v.first_child.get(), b, coow_level ? k.entry_scan.get() : nullptr,
                  coow_level ? leaf_bytes_scan.get() : nullptr, sizeof(V)};
    inner_choice_kernel<<<blocks_for(v.nodes), 256, 0, st>>>(in, v.type.get(), v.bytes.get());
    w.check_launch("level kernel");
    if (coow_level)
      drop_leaves_kernel<<<blocks_for(NL), 256, 0, st>>>(v.child_parent.get(), v.type.get(), NL, k.ltype.get(),
                                                         k.lbytes.get());
    v.first_leaf = Array<u32>(w, v.nodes + 1);
    if (over_leaves) {
      cuda_check(cudaMemcpyAsync(v.first_leaf.get(), v.first_child.get(), (v.nodes + 1) * sizeof(u32),
                                 cudaMemcpyDeviceToDevice, st),
                 "cudaMemcpyAsync(first leaves)");
    } else {
      first_leaf_of_nodes_kernel<<<blocks_for(v.nodes + 1), 256, 0, st>>>(v.first_child.get(), below_first_leaf,
                                                                          v.nodes, NL, v.first_leaf.get());
      w.check_launch("first leaf kernel");
    }
  }
  leaf_bytes_scan.release();
  w.phase("upper levels");

  {
    Array<u64> loff(w, NL + 1);
    exclusive_sum(w, k.lbytes.get(), loff.get(), NL + 1);
    k.lbytes = std::move(loff);
  }
  // Every level's offsets, then their totals (and the COOW nodes' count) in
  // one read-back (perf-log C20): [0] the leaves' bytes, [1 + l] level l's,
  // [L] the COOW nodes.
  for (u32 l = L - 1; l-- > 0;) {
    Level& v = k.lv[l];
    Array<u64> off(w, v.nodes + 1);
    exclusive_sum(w, v.bytes.get(), off.get(), v.nodes + 1);
    v.bytes = std::move(off);
  }
  // Each level's total bytes (its offsets' last element) and the COOW count
  // side by side, so that all of them come back in one copy.
  Array<u64> sums(w, L + 1);
  const auto level_total = [&](const u64* last, u64* to) {
    cuda_check(cudaMemcpyAsync(to, last, sizeof(u64), cudaMemcpyDeviceToDevice, st), "cudaMemcpyAsync(level bytes)");
  };
  level_total(k.lbytes.get() + NL, sums.get());
  for (u32 l = 0; l + 1 < L; ++l) level_total(k.lv[l].bytes.get() + k.lv[l].nodes, sums.get() + 1 + l);
  cuda_check(cudaMemsetAsync(sums.get() + L, 0, sizeof(u64), st), "cudaMemsetAsync");
  if (wide) {
    static_assert(sizeof(u64) == sizeof(unsigned long long));
    count_coow_kernel<<<blocks_for(k.lv[L - 2].nodes), 256, 0, st>>>(
        k.lv[L - 2].type.get(), k.lv[L - 2].nodes, reinterpret_cast<unsigned long long*>(sums.get() + L));
  }
  w.check_launch("level totals");
  const std::vector<u64> totals = read_back_n(w, sums.get(), L + 1, "read level bytes");
  u64 bytes = k.leaf_base + totals[0];
  for (u32 l = L - 1; l-- > 0;) {
    Level& v = k.lv[l];
    v.base = bytes;
    v.total = totals[1 + l];
    bytes += v.total;
  }
  if (bytes > max_pool_bytes)
    throw LimitError("matrix needs a node pool of " + std::to_string(bytes) +
                     " bytes, over the 4 GiB limit of 32-bit child references");
  k.bytes = bytes;
  if (wide) k.coow_nodes = totals[L];
  w.phase("offsets");
}

// The bytes of a leaf that no fill writes, zeroed (one warp per leaf): a
// sparse leaf's padding (between its count and coordinates, after its
// coordinates, after its values), a dense leaf whole (its mask is OR-ed
// into, its absent cells stay zero); a leaf dropped under a COOW node has no
// bytes.
template <class V>
__global__ void clear_leaf_gaps_kernel(const std::uint8_t* ltype, const u32* lcount, const u64* loff, u64 NL,
                                       u64 base, std::byte* pool) {
  const u32 lane = threadIdx.x % 32;
  const u64 warps = u64(gridDim.x) * blockDim.x / 32;
  for (u64 t = (u64(blockIdx.x) * blockDim.x + threadIdx.x) / 32; t < NL; t += warps) {
    const u64 off = loff[t], size = loff[t + 1] - off;
    if (size == 0) continue;
    std::byte* node = pool + base + off;
    if (ltype[t] == static_cast<std::uint8_t>(NodeType::dense)) {
      for (u64 i = lane; i < size / 16; i += 32) reinterpret_cast<uint4*>(node)[i] = uint4{0, 0, 0, 0};
      continue;
    }
    const u32 n = lcount[t];
    const CooLayout l = coo_layout(static_cast<NodeType>(ltype[t]), n, sizeof(V));
    // Three gaps, numbered through: [4, co), [co + 2n, vo), [vo + s·n, bytes).
    const u32 g0 = l.coord_offset - 4, g1_at = l.coord_offset + 2 * n, g1 = l.value_offset - g1_at,
              g2_at = l.value_offset + static_cast<u32>(sizeof(V)) * n, g2 = l.bytes - g2_at;
    for (u32 i = lane; i < g0 + g1 + g2; i += 32) {
      const u32 at = i < g0 ? 4 + i : i < g0 + g1 ? g1_at + (i - g0) : g2_at + (i - g0 - g1);
      node[at] = std::byte{0};
    }
  }
}

// The pool, allocated for the fills: instead of clearing all of it (a
// memset of the whole pool, 0.15-0.2 ms on the large families: perf-log
// C19), the leaves' gaps are cleared and the inner nodes (after the leaves;
// their fill writes child references only) are cleared whole. The pool
// header is written last by finish_pool. HISPARSE_POISON_POOLS (set by the
// GPU test binaries) fills the allocation with 0xA5 first, so that a byte
// no step writes shows in the tests' byte-for-byte comparisons.
template <class V>
DeviceBytes allocate_pool(WorkMemory& w, const Skeleton& k) {
  const cudaStream_t st = w.stream();
  DeviceBytes pool = w.result(k.bytes);
  static const bool poison = std::getenv("HISPARSE_POISON_POOLS") != nullptr;
  if (poison) cuda_check(cudaMemsetAsync(pool.get(), 0xA5, k.bytes, st), "cudaMemsetAsync(pool poison)");
  auto* p = pool.as<std::byte>();
  const u64 leaf_end = k.L >= 2 ? k.lv[k.L - 2].base : k.bytes;
  if (k.NL > 0) {
    const u64 blocks = std::min<u64>((k.NL + 7) / 8, u64{1} << 20);
    clear_leaf_gaps_kernel<V><<<static_cast<unsigned>(blocks), 256, 0, st>>>(k.ltype.get(), k.lcount.get(),
                                                                            k.lbytes.get(), k.NL, k.leaf_base, p);
    w.check_launch("leaf gap kernel");
  }
  if (k.bytes > leaf_end)
    cuda_check(cudaMemsetAsync(p + leaf_end, 0, k.bytes - leaf_end, st), "cudaMemsetAsync(inner nodes)");
  return pool;
}

// Child references level by level, then the header; returns the root.
template <class V>
NodeRef finish_pool(WorkMemory& w, const Skeleton& k, std::byte* pool, const BuildOptions& options) {
  const cudaStream_t st = w.stream();
  const u32 b = k.b, L = k.L;
  for (u32 l = L - 1; l-- > 0;) {
    const Level& v = k.lv[l];
    const bool leaves_below = l + 1 == L - 1;
    const u64 children = leaves_below ? k.NL : k.lv[l + 1].nodes;
    InnerFill g{children,
                leaves_below ? nullptr : k.lv[l + 1].first_leaf.get(),
                v.child_parent.get(),
                leaves_below ? k.ltype.get() : k.lv[l + 1].type.get(),
                leaves_below ? k.lbytes.get() : k.lv[l + 1].bytes.get(),
                leaves_below ? k.leaf_base : k.lv[l + 1].base,
                v.first_child.get(),
                v.type.get(),
                v.bytes.get(),
                v.base,
                b,
                2 * b * (L - 2 - l)};
    fill_inner_kernel<<<blocks_for(children), 256, 0, st>>>(g, k.klo.get(), k.key_hi ? k.khi.get() : nullptr, pool);
    w.check_launch("inner fill kernel");
  }
  w.phase("inner fill");
  // The header written on the device, its root (level 0's only node, the
  // only leaf for depth 1) read back from it: one round trip for the build's
  // last step.
  const PoolHeader h{pool_magic, 0, static_cast<std::uint8_t>(b), static_cast<std::uint8_t>(L), sizeof(V),
                     options.wide_nodes ? pool_flag_wide : std::uint8_t{0}, 0};
  const bool leaf_root = L == 1;
  pool_header_kernel<<<1, 32, 0, st>>>(h, leaf_root ? k.leaf_base : k.lv[0].base,
                                       leaf_root ? k.lbytes.get() : k.lv[0].bytes.get(),
                                       leaf_root ? k.ltype.get() : k.lv[0].type.get(), pool);
  w.check_launch("pool header kernel");
  return NodeRef{read_back(w, reinterpret_cast<const u32*>(pool) + 1, "read root")};
}

}  // namespace hisparse::ops::convert_detail
