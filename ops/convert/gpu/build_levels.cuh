#pragma once
// Steps 2-5 of the GPU build (see build_gpu.cuh): from sorted entries to the
// finished pool.
#include "build_gpu.cuh"

namespace hisparse::ops::convert_detail {

template <class V>
DeviceMatrix<V> build_from_sorted(WorkMemory& w, SortedEntries<V> s, const Shape& shape, const BuildOptions& options,
                                  ConvertStats* stats) {
  const cudaStream_t st = w.stream();
  const u32 b = shape.log2_node_size, L = shape.depth;
  const u64 n = s.n;

  // 2. Distinct entries, duplicates summed in input order.
  Array<u32> head(w, n), pos(w, n);
  entry_heads_kernel<<<blocks_for(n), 256, 0, st>>>(s.R.get(), s.loc.get(), n, head.get());
  exclusive_sum(w, head.get(), pos.get(), n);
  const u64 U = u64{read_back(w, pos.get() + n - 1, "read distinct count")} + read_back(w, head.get() + n - 1, "read");
  Array<u64> uR(w, U), uloc(w, U);
  Array<V> uval(w, U);
  sum_duplicates_kernel<V><<<blocks_for(n), 256, 0, st>>>(s.R.get(), s.loc.get(), s.val.get(), head.get(), pos.get(),
                                                          n, uR.get(), uloc.get(), uval.get());
  w.check_launch("duplicates kernel");
  s = SortedEntries<V>{};
  w.phase("duplicates summed");
  head.release();
  pos.release();

  // Leaves, in (R, C) order, then sorted by tree key.
  Array<u32> leaf_of(w, U);
  {
    Array<u32> lhead(w, U);
    leaf_heads_kernel<<<blocks_for(U), 256, 0, st>>>(uR.get(), uloc.get(), U, b, lhead.get());
    inclusive_sum(w, lhead.get(), leaf_of.get(), U);
  }
  const u64 NL = read_back(w, leaf_of.get() + U - 1, "read leaf count");
  w.phase("leaf heads");
  const u32 upper = L - 1;
  const u32 key_bits = 2 * b * upper;
  const bool key_hi = key_bits > 64;
  Array<u32> leaf_start(w, NL + 1);
  set_u32_kernel<<<1, 1, 0, st>>>(leaf_start.get() + NL, static_cast<u32>(U));
  Array<u64> klo(w, NL), khi;
  if (key_hi) khi = Array<u64>(w, NL);
  leaves_kernel<<<blocks_for(U), 256, 0, st>>>(uR.get(), uloc.get(), leaf_of.get(), U, b, upper, leaf_start.get(),
                                              klo.get(), key_hi ? khi.get() : nullptr);
  w.check_launch("leaves kernel");
  Array<u32> lperm(w, NL);
  {
    Array<u32> idx(w, NL);
    iota_kernel<<<blocks_for(NL), 256, 0, st>>>(idx.get(), NL);
    Array<u64> sorted_lo(w, NL);
    radix_sort_pairs(w, klo.get(), sorted_lo.get(), idx.get(), lperm.get(), NL, key_hi ? 64 : static_cast<int>(key_bits));
    if (key_hi) {
      // Stably by the high bits; then the low bits follow the final order.
      gather_kernel<u64><<<blocks_for(NL), 256, 0, st>>>(khi.get(), lperm.get(), NL, sorted_lo.get());
      radix_sort_pairs(w, sorted_lo.get(), khi.get(), lperm.get(), idx.get(), NL, static_cast<int>(key_bits - 64));
      gather_kernel<u64><<<blocks_for(NL), 256, 0, st>>>(klo.get(), idx.get(), NL, sorted_lo.get());
      std::swap(lperm, idx);
    }
    std::swap(klo, sorted_lo);
  }
  Array<u32> lcount(w, NL), linv(w, NL);
  w.phase("leaves sorted");
  Array<std::uint8_t> ltype(w, NL);
  Array<u64> lbytes(w, NL + 1);
  cuda_check(cudaMemsetAsync(lbytes.get(), 0, (NL + 1) * sizeof(u64), st), "cudaMemsetAsync");
  leaf_choice_kernel<V><<<blocks_for(NL), 256, 0, st>>>(lperm.get(), leaf_start.get(), NL, b, lcount.get(),
                                                        ltype.get(), lbytes.get(), linv.get());
  w.check_launch("leaf choice kernel");
  lperm.release();

  // 4. The upper levels, top level last computed (index l = level).
  const bool wide = options.wide_nodes && L >= 2;
  Array<u64> entry_scan, leaf_bytes_scan;
  if (wide) {
    Array<u64> counts(w, NL + 1);
    widen_kernel<<<blocks_for(NL + 1), 256, 0, st>>>(lcount.get(), NL, counts.get());
    entry_scan = Array<u64>(w, NL + 1);
    exclusive_sum(w, counts.get(), entry_scan.get(), NL + 1);
    leaf_bytes_scan = Array<u64>(w, NL + 1);
    exclusive_sum(w, lbytes.get(), leaf_bytes_scan.get(), NL + 1);
  }
  std::vector<Level> lv(L > 0 ? L - 1 : 0);
  Array<u32> below_node_of;  // node_of of level l + 1 (empty: the leaves)
  u64 below_nodes = NL;
  for (u32 l = L - 1; l-- > 0;) {
    Level& v = lv[l];
    Array<u32> node_of(w, NL);
    {
      Array<u32> h(w, NL);
      level_heads_kernel<<<blocks_for(NL), 256, 0, st>>>(klo.get(), key_hi ? khi.get() : nullptr, NL,
                                                         2 * b * (L - 1 - l), h.get());
      inclusive_sum(w, h.get(), node_of.get(), NL);
    }
    v.nodes = read_back(w, node_of.get() + NL - 1, "read level size");
    v.first_leaf = Array<u32>(w, v.nodes + 1);
    level_nodes_kernel<<<blocks_for(NL), 256, 0, st>>>(node_of.get(), NL, v.first_leaf.get());
    v.first_child = Array<u32>(w, v.nodes + 1);
    v.child_parent = Array<u32>(w, below_nodes);
    v.type = Array<std::uint8_t>(w, v.nodes);
    v.bytes = Array<u64>(w, v.nodes + 1);
    cuda_check(cudaMemsetAsync(v.bytes.get(), 0, (v.nodes + 1) * sizeof(u64), st), "cudaMemsetAsync");
    const bool coow_level = wide && l == L - 2;
    LevelInput in{v.nodes, v.first_leaf.get(), below_node_of.size() ? below_node_of.get() : nullptr, below_nodes, b,
                  coow_level ? entry_scan.get() : nullptr, coow_level ? leaf_bytes_scan.get() : nullptr, sizeof(V)};
    inner_choice_kernel<<<blocks_for(v.nodes), 256, 0, st>>>(in, v.first_child.get(), v.type.get(), v.bytes.get(),
                                                            v.child_parent.get());
    w.check_launch("level kernel");
    if (coow_level)
      drop_leaves_kernel<<<blocks_for(NL), 256, 0, st>>>(v.child_parent.get(), v.type.get(), NL, ltype.get(),
                                                         lbytes.get());
    below_node_of = std::move(node_of);
    below_nodes = v.nodes;
  }
  below_node_of.release();
  w.phase("upper levels");
  leaf_bytes_scan.release();

  // 5. Offsets bottom-up: the leaves first, then each level above.
  Array<u64> loff(w, NL + 1);
  exclusive_sum(w, lbytes.get(), loff.get(), NL + 1);
  lbytes.release();
  const u64 leaf_base = sizeof(PoolHeader);
  u64 bytes = leaf_base + read_back(w, loff.get() + NL, "read leaf bytes");
  for (u32 l = L - 1; l-- > 0;) {
    Level& v = lv[l];
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

  DeviceBytes pool(bytes);
  w.phase("offsets");
  cuda_check(cudaMemsetAsync(pool.get(), 0, bytes, st), "cudaMemsetAsync(pool)");
  auto* p = pool.as<std::byte>();

  // Entries into leaves; under COOW nodes into wide positions, sorted per node.
  unsigned long long coow_nodes = 0;
  if (wide) {
    Array<unsigned long long> c(w, 1);
    cuda_check(cudaMemsetAsync(c.get(), 0, sizeof(unsigned long long), st), "cudaMemsetAsync");
    count_coow_kernel<<<blocks_for(lv[L - 2].nodes), 256, 0, st>>>(lv[L - 2].type.get(), lv[L - 2].nodes, c.get());
    coow_nodes = read_back(w, c.get(), "read COOW count");
  }
  Array<u32> wkey, wentry, wowner;
  if (coow_nodes) {
    wkey = Array<u32>(w, U);
    wentry = Array<u32>(w, U);
    wowner = Array<u32>(w, U);
    cuda_check(cudaMemsetAsync(wowner.get(), 0xFF, U * sizeof(u32), st), "cudaMemsetAsync");
  }
  LeafFill f{leaf_of.get(), leaf_start.get(), linv.get(), ltype.get(), lcount.get(), loff.get(), leaf_base, b,
             entry_scan.size() ? entry_scan.get() : nullptr, L >= 2 ? lv[L - 2].child_parent.get() : nullptr,
             wkey.get(), wentry.get(), wowner.get()};
  fill_leaves_kernel<V><<<blocks_for(U), 256, 0, st>>>(f, uR.get(), uloc.get(), uval.get(), U, p);
  w.check_launch("leaf fill kernel");
  leaf_of.release();
  w.phase("leaf fill");
  linv.release();
  leaf_start.release();
  uR.release();
  uloc.release();
  if (coow_nodes) {
    const Level& v = lv[L - 2];
    Array<u64> begin(w, coow_nodes), end(w, coow_nodes);
    Array<unsigned long long> next(w, 1);
    cuda_check(cudaMemsetAsync(next.get(), 0, sizeof(unsigned long long), st), "cudaMemsetAsync");
    coow_segments_kernel<<<blocks_for(v.nodes), 256, 0, st>>>(v.type.get(), v.nodes, v.first_leaf.get(),
                                                             entry_scan.get(), next.get(), begin.get(), end.get());
    Array<u32> wkey2(w, U), wentry2(w, U);
    segmented_sort_pairs(w, wkey.get(), wkey2.get(), wentry.get(), wentry2.get(), U, coow_nodes, begin.get(), end.get());
    wkey.release();
    wentry.release();
    fill_coow_kernel<V><<<blocks_for(U), 256, 0, st>>>(wkey2.get(), wentry2.get(), wowner.get(), U, v.first_leaf.get(),
                                                       entry_scan.get(), v.bytes.get(), v.base, uval.get(), p);
    w.check_launch("COOW fill kernel");
  }
  wowner.release();
  w.phase("COOW fill");
  uval.release();

  // Child references, level by level.
  for (u32 l = L - 1; l-- > 0;) {
    const Level& v = lv[l];
    const bool leaves_below = l + 1 == L - 1;
    const u64 children = leaves_below ? NL : lv[l + 1].nodes;
    InnerFill g{children,
                leaves_below ? nullptr : lv[l + 1].first_leaf.get(),
                v.child_parent.get(),
                leaves_below ? ltype.get() : lv[l + 1].type.get(),
                leaves_below ? loff.get() : lv[l + 1].bytes.get(),
                leaves_below ? leaf_base : lv[l + 1].base,
                v.first_child.get(),
                v.type.get(),
                v.bytes.get(),
                v.base,
                b,
                2 * b * (L - 2 - l)};
    fill_inner_kernel<<<blocks_for(children), 256, 0, st>>>(g, klo.get(), key_hi ? khi.get() : nullptr, p);
    w.check_launch("inner fill kernel");
  }

  w.phase("inner fill");
  // The header: the root is level 0's only node (the only leaf for depth 1).
  NodeRef root;
  if (L == 1) {
    root = make_ref(leaf_base + read_back(w, loff.get(), "read root"),
                    static_cast<NodeType>(read_back(w, ltype.get(), "read root")));
  } else {
    root = make_ref(lv[0].base + read_back(w, lv[0].bytes.get(), "read root"),
                    static_cast<NodeType>(read_back(w, lv[0].type.get(), "read root")));
  }
  const PoolHeader h{pool_magic, root, static_cast<std::uint8_t>(b), static_cast<std::uint8_t>(L), sizeof(V),
                     options.wide_nodes ? pool_flag_wide : std::uint8_t{0}, 0};
  cuda_check(cudaMemcpyAsync(p, &h, sizeof(h), cudaMemcpyHostToDevice, st), "cudaMemcpyAsync(pool header)");
  w.sync("cudaStreamSynchronize(GPU build)");
  if (stats) {
    stats->entries = U;
    stats->leaves = NL;
    stats->pool_bytes = bytes;
  }
  return DeviceMatrix<V>::adopt(std::move(pool), shape, U, root, false, V(1), options.wide_nodes);
}

}  // namespace hisparse::ops::convert_detail
