#pragma once
// The general path's steps 2-5 (see build_gpu.cuh): from sorted entries to
// the finished pool. Any input takes it: duplicates, unsorted rows, COOW nodes.
#include "build_gpu.cuh"
#include "build_skeleton.cuh"

namespace hisparse::ops::convert_detail {

// Where the skeleton has COOW nodes, the leaf fill leaves the entries of
// the dropped leaves at the leaves' wide positions (entry_scan[leaf] +
// rank), each with its key (row16 << 16 | col16 in the node), its index into
// `val` and its node (`owner`, all ones where no entry is). Sorted per node,
// they become the nodes' row-major entries.
struct WideEntries {
  Array<u32> key, entry, owner;
};

inline WideEntries wide_entries(WorkMemory& w, const Skeleton& k, u64 n) {
  WideEntries e;
  if (!k.coow_nodes) return e;
  e.key = Array<u32>(w, n);
  e.entry = Array<u32>(w, n);
  e.owner = Array<u32>(w, n);
  cuda_check(cudaMemsetAsync(e.owner.get(), 0xFF, n * sizeof(u32), w.stream()), "cudaMemsetAsync");
  return e;
}

template <class V>
void fill_coow_nodes(WorkMemory& w, const Skeleton& k, WideEntries& e, u64 n, const V* val, std::byte* pool) {
  if (!k.coow_nodes) return;
  const cudaStream_t st = w.stream();
  const Level& v = k.lv[k.L - 2];
  Array<u64> begin(w, k.coow_nodes), end(w, k.coow_nodes);
  Array<unsigned long long> next(w, 1);
  cuda_check(cudaMemsetAsync(next.get(), 0, sizeof(unsigned long long), st), "cudaMemsetAsync");
  coow_segments_kernel<<<blocks_for(v.nodes), 256, 0, st>>>(v.type.get(), v.nodes, v.first_leaf.get(),
                                                           k.entry_scan.get(), next.get(), begin.get(), end.get());
  Array<u32> key2(w, n), entry2(w, n);
  segmented_sort_pairs(w, e.key.get(), key2.get(), e.entry.get(), entry2.get(), n, k.coow_nodes, begin.get(),
                       end.get());
  e.key.release();
  e.entry.release();
  fill_coow_kernel<V><<<blocks_for(n), 256, 0, st>>>(key2.get(), entry2.get(), e.owner.get(), n, v.first_leaf.get(),
                                                     k.entry_scan.get(), v.bytes.get(), v.base, val, pool);
  w.check_launch("COOW fill kernel");
  e.owner.release();
  w.phase("COOW fill");
}

template <class V>
DeviceMatrix<V> build_from_sorted(WorkMemory& w, SortedEntries<V> s, const Shape& shape, const BuildOptions& options,
                                  ConvertStats* stats) {
  const cudaStream_t st = w.stream();
  const u32 b = shape.log2_node_size, L = shape.depth;
  const u64 n = s.n;
  const bool tree_order = s.tree_order;

  // 2. Distinct entries, duplicates summed in input order. Most inputs have
  // none (every CSR with sorted rows): one flag finds that, and the sorted
  // arrays are the distinct ones.
  bool duplicates = false;
  {
    Array<unsigned> any(w, 1);
    cuda_check(cudaMemsetAsync(any.get(), 0, sizeof(unsigned), st), "cudaMemsetAsync");
    any_duplicate_kernel<<<blocks_for(n), 256, 0, st>>>(s.R.get(), s.loc.get(), n, any.get());
    w.check_launch("duplicate check kernel");
    duplicates = read_back(w, any.get(), "read duplicate check") != 0;
  }
  u64 U = n;
  Array<u64> uR, uloc;
  Array<V> uval;
  if (!duplicates) {
    uR = std::move(s.R);
    uloc = std::move(s.loc);
    uval = std::move(s.val);
  } else {
    Array<u32> head(w, n), pos(w, n);
    entry_heads_kernel<<<blocks_for(n), 256, 0, st>>>(s.R.get(), s.loc.get(), n, head.get());
    exclusive_sum(w, head.get(), pos.get(), n);
    U = u64{read_back(w, pos.get() + n - 1, "read distinct count")} + read_back(w, head.get() + n - 1, "read");
    uR = Array<u64>(w, U);
    uloc = Array<u64>(w, U);
    uval = Array<V>(w, U);
    sum_duplicates_kernel<V><<<blocks_for(n), 256, 0, st>>>(s.R.get(), s.loc.get(), s.val.get(), head.get(),
                                                            pos.get(), n, uR.get(), uloc.get(), uval.get());
    w.check_launch("duplicates kernel");
  }
  s = SortedEntries<V>{};
  w.phase("duplicates summed");

  // Leaves, in (R, C) order, then sorted by tree key (or in tree order already).
  Array<u32> leaf_of(w, U);
  {
    Array<u32> lhead(w, U);
    leaf_heads_kernel<<<blocks_for(U), 256, 0, st>>>(uR.get(), uloc.get(), U, b, lhead.get());
    inclusive_sum(w, lhead.get(), leaf_of.get(), U);
  }
  Skeleton k;
  k.b = b;
  k.L = L;
  k.NL = read_back(w, leaf_of.get() + U - 1, "read leaf count");
  k.key_hi = 2 * b * (L - 1) > 64;
  const u64 NL = k.NL;
  Array<u32> leaf_start(w, NL + 1);
  set_u32_kernel<<<1, 1, 0, st>>>(leaf_start.get() + NL, static_cast<u32>(U));
  k.klo = Array<u64>(w, NL);
  if (k.key_hi) k.khi = Array<u64>(w, NL);
  leaves_kernel<<<blocks_for(U), 256, 0, st>>>(uR.get(), uloc.get(), leaf_of.get(), U, b, L - 1, leaf_start.get(),
                                              k.klo.get(), k.key_hi ? k.khi.get() : nullptr);
  w.check_launch("leaves kernel");
  w.phase("leaf heads");
  {
    // (where the entries' sort left the leaves in the pool's order, as they are)
    Array<u32> lperm = tree_order ? Array<u32>() : sort_leaves(w, k);
    Array<u32> counts(w, NL);
    leaf_counts_kernel<<<blocks_for(NL), 256, 0, st>>>(leaf_start.get(), NL, counts.get());
    choose_leaves<V>(w, k, lperm.get(), counts.get());
  }
  w.phase("leaves sorted");

  // 4. The upper levels and the offsets.
  plan_skeleton<V>(w, k, options);

  // 5. The pool: entries into leaves; under COOW nodes into wide positions,
  // sorted per node.
  DeviceBytes pool = allocate_pool<V>(w, k);
  auto* p = pool.as<std::byte>();
  WideEntries wide = wide_entries(w, k, U);
  LeafFill f{leaf_of.get(), leaf_start.get(), k.linv.get(), k.ltype.get(), k.lcount.get(), k.lbytes.get(),
             k.leaf_base, b, k.entry_scan.size() ? k.entry_scan.get() : nullptr,
             L >= 2 ? k.lv[L - 2].child_parent.get() : nullptr, wide.key.get(), wide.entry.get(), wide.owner.get()};
  fill_leaves_kernel<V><<<blocks_for(U), 256, 0, st>>>(f, uR.get(), uloc.get(), uval.get(), U, p);
  w.check_launch("leaf fill kernel");
  leaf_of.release();
  leaf_start.release();
  uR.release();
  uloc.release();
  w.phase("leaf fill");
  fill_coow_nodes<V>(w, k, wide, U, uval.get(), p);
  uval.release();

  const NodeRef root = finish_pool<V>(w, k, p, options);
  if (stats) {
    stats->entries = U;
    stats->leaves = NL;
  }
  return DeviceMatrix<V>::adopt(std::move(pool), shape, U, root, false, V(1), options.wide_nodes);
}

}  // namespace hisparse::ops::convert_detail
