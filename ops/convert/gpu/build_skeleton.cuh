#pragma once
// Steps 4-5 of the GPU build, shared by both entry paths (build_gpu.cuh):
// from the leaves in tree order (tree keys, entry counts, node choices) to the
// upper levels, the offsets of every node, and finally the child references
// and the pool header. The entries themselves are written by the paths.
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
  u64 bytes = k.leaf_base + read_back(w, k.lbytes.get() + NL, "read leaf bytes");
  for (u32 l = L - 1; l-- > 0;) {
    Level& v = k.lv[l];
    Array<u64> off(w, v.nodes + 1);
    exclusive_sum(w, v.bytes.get(), off.get(), v.nodes + 1);
    v.bytes = std::move(off);
    v.base = bytes;
    v.total = read_back(w, v.bytes.get() + v.nodes, "read level bytes");
    bytes += v.total;
  }
  if (bytes > max_pool_bytes)
    throw LimitError("matrix needs a node pool of " + std::to_string(bytes) +
                     " bytes, over the 4 GiB limit of 32-bit child references");
  k.bytes = bytes;
  if (wide) {
    Array<unsigned long long> c(w, 1);
    cuda_check(cudaMemsetAsync(c.get(), 0, sizeof(unsigned long long), st), "cudaMemsetAsync");
    count_coow_kernel<<<blocks_for(k.lv[L - 2].nodes), 256, 0, st>>>(k.lv[L - 2].type.get(), k.lv[L - 2].nodes, c.get());
    k.coow_nodes = read_back(w, c.get(), "read COOW count");
  }
  w.phase("offsets");
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
  // The root is level 0's only node (the only leaf for depth 1).
  NodeRef root;
  if (L == 1) {
    root = make_ref(k.leaf_base + read_back(w, k.lbytes.get(), "read root"),
                    static_cast<NodeType>(read_back(w, k.ltype.get(), "read root")));
  } else {
    root = make_ref(k.lv[0].base + read_back(w, k.lv[0].bytes.get(), "read root"),
                    static_cast<NodeType>(read_back(w, k.lv[0].type.get(), "read root")));
  }
  const PoolHeader h{pool_magic, root, static_cast<std::uint8_t>(b), static_cast<std::uint8_t>(L), sizeof(V),
                     options.wide_nodes ? pool_flag_wide : std::uint8_t{0}, 0};
  cuda_check(cudaMemcpyAsync(pool, &h, sizeof(h), cudaMemcpyHostToDevice, st), "cudaMemcpyAsync(pool header)");
  w.sync("cudaStreamSynchronize(GPU build)");
  return root;
}

}  // namespace hisparse::ops::convert_detail
