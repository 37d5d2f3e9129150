// The GPU batch edit (hisparse/ops/edit_gpu.hpp; docs/ops.md, "Editing on the
// GPU"): the entry points and the sequence of an edit. The host edit
// (ops/edit/src) and its reference are the specification: a version's
// download() equals edit()'s pool byte for byte.
//
// 1. Sort the batch by tree key (CUB radix sort, stable: set keeps the last
//    update of a position), reduce it to distinct positions, find each touched
//    unit's path in A and which updates find an entry (edit_batch.cuh).
// 2. Decide per unit: leaf by leaf, whole, or a COOW node merged, by the
//    builder's COOW rule on the sizes after the edit (edit_units.cuh).
// 3. Whole units: extracted, merged with their updates and built by the GPU
//    builder, whose levels u and below are appended with their references
//    moved (edit_steps.cuh). Touched leaves and kept COOW nodes: merged from
//    their old entries and updates (edit_merge.cuh).
// 4. The inner nodes above, bottom-up on the touched paths only: a thread
//    block per node merges its old children with the new ones and keeps every
//    other child where it is (edit_inner.cuh).
#include <algorithm>
#include <bit>
#include <limits>
#include <string>
#include <vector>

#include "edit_merge.cuh"
#include "edit_steps.cuh"
#include "hisparse/ops/copy_gpu.hpp"
#include "hisparse/ops/edit_gpu.hpp"

namespace hisparse::ops {
namespace edit_gpu_detail {

inline std::uint64_t default_capacity(std::uint64_t pool) {
  const std::uint64_t want = std::max<std::uint64_t>(2 * pool, std::uint64_t{16} << 20);
  return std::min<std::uint64_t>(round_up(want, node_alignment), max_pool_bytes);
}

template <class V>
DeviceMatrix<V> start_family(const DeviceMatrix<V>& a, std::uint64_t capacity, cudaStream_t stream) {
  if (capacity == 0) capacity = default_capacity(a.pool_bytes());
  capacity = round_up(std::max<std::uint64_t>(capacity, a.pool_bytes()), node_alignment);
  auto arena = std::make_shared<DeviceArena>(a.pool(), a.pool_bytes(), capacity, stream);
  const std::uint64_t view = arena->size();
  return DeviceMatrix<V>::version(std::move(arena), view, a.shape(), a.nnz(), a.root(), a.transposed(), a.scale(),
                                  a.wide_nodes());
}

template <class V, class I>
void check_updates(const DeviceMatrix<V>& a, const DeviceCooView<V, I>& u) {
  if (u.rows != a.rows() || u.cols != a.cols())
    throw Error("GPU edit: the updates are " + std::to_string(u.rows) + " x " + std::to_string(u.cols) +
                ", the matrix " + std::to_string(a.rows()) + " x " + std::to_string(a.cols()));
  if (u.nnz > 0 && (!u.row || !u.col || !u.val))
    throw Error("GPU edit: a null array for " + std::to_string(u.nnz) + " updates");
  if (u.nnz > 0xFFFFFFFFull)
    throw LimitError("GPU edit: at most 2^32 - 1 updates in one batch, got " + std::to_string(u.nnz));
}

// The edit of version `a` (in a family), appended to its arena; false when
// the arena has no room for it (nothing changed).
template <class V, class I, class J>
bool edit_into(const DeviceMatrix<V>& a, const DeviceCooView<V, I>& up, EditMode mode, cudaStream_t stream,
               Context* ctx, EditStats& st, Result& res) {
  const Shape& s = a.shape();
  const u32 b = s.log2_node_size, D = s.depth, u = D >= 2 ? D - 2 : 0;
  const bool tr = a.transposed(), unit_is_leaf = u + 1 == D;
  const std::byte* pool = a.pool();
  const u64 n = up.nnz;
  int key_bits = 0;
  const TreeKey tk = tree_key_of(s, key_bits);
  const u32 unit_shift = 2 * b * (D - u), level_shift = b * (D - u);
  WorkMemory w(stream, ctx);

  // 1. Sorted distinct positions.
  Array<u64> key_s(w, n);
  Array<u32> idx_s(w, n);
  {
    Array<u64> key(w, n);
    Array<u32> idx(w, n);
    Array<unsigned long long> bad(w, 1);
    cuda_check(cudaMemsetAsync(bad.get(), 0xFF, sizeof(unsigned long long), stream), "cudaMemsetAsync");
    update_keys_kernel<I><<<blocks_for(n), 256, 0, stream>>>(up.row, up.col, n, a.rows(), a.cols(), tr, tk, key.get(),
                                                             idx.get(), bad.get());
    w.check_launch("GPU edit: keys kernel");
    const unsigned long long first_bad = read_back(w, bad.get(), "cudaMemcpyAsync(update check)");
    if (first_bad != ~0ull) {
      const I r = read_back(w, up.row + first_bad, "cudaMemcpyAsync(bad update)");
      const I c = read_back(w, up.col + first_bad, "cudaMemcpyAsync(bad update)");
      throw Error("GPU edit: update " + std::to_string(first_bad) + " at (" + std::to_string(r) + ", " +
                  std::to_string(c) + ") lies outside the " + std::to_string(a.rows()) + " x " +
                  std::to_string(a.cols()) + " matrix (0-based)");
    }
    convert_detail::radix_sort_pairs(w, key.get(), key_s.get(), idx.get(), idx_s.get(), n, key_bits);
  }
  Array<u32> run;
  u64 m = runs_of(w, key_s.get(), n, 0, run, "GPU edit: distinct positions");
  Array<u64> ukey(w, m);
  Array<u32> ulast(w, m), ustart(w, m + 1);
  unique_kernel<<<blocks_for(n), 256, 0, stream>>>(key_s.get(), idx_s.get(), run.get(), n, ukey.get(), ulast.get(),
                                                   ustart.get());
  w.check_launch("GPU edit: unique kernel");
  key_s.release();
  w.phase("edit: sorted batch");

  // 2. Touched units, their paths in A, which updates find an entry.
  Array<u32> urun, ufirst, apath, present, ppos;
  Array<u64> UR, UC;
  u64 nt = 0, hits = 0;
  auto find_units = [&] {
    nt = runs_of(w, ukey.get(), m, unit_shift, urun, "GPU edit: touched units");
    UR = Array<u64>(w, nt);
    UC = Array<u64>(w, nt);
    ufirst = Array<u32>(w, nt + 1);
    units_kernel<I><<<blocks_for(m), 256, 0, stream>>>(ukey.get(), ulast.get(), urun.get(), m, unit_shift, up.row,
                                                       up.col, tr, level_shift, UR.get(), UC.get(), ufirst.get());
    w.check_launch("GPU edit: units kernel");
    apath = Array<u32>(w, (u + 1) * nt);
    descend_kernel<<<blocks_for(nt), 256, 0, stream>>>(pool, a.root(), b, u, UR.get(), UC.get(), nt, apath.get(),
                                                       nullptr);
    w.check_launch("GPU edit: descent");
    present = Array<u32>(w, m + 1);
    presence_kernel<I><<<blocks_for(m), 256, 0, stream>>>(pool, apath.get() + u * nt, urun.get(), ulast.get(), m,
                                                          up.row, up.col, tr, b, unit_is_leaf, present.get());
    cuda_check(cudaMemsetAsync(present.get() + m, 0, sizeof(u32), stream), "cudaMemsetAsync");
    w.check_launch("GPU edit: presence");
    ppos = Array<u32>(w, m + 1);  // present updates before each
    convert_detail::exclusive_sum(w, present.get(), ppos.get(), m + 1);
    hits = read_back(w, ppos.get() + m, "GPU edit: positions present");
  };
  find_units();
  // A removal that finds no entry changes nothing: such positions are dropped
  // before anything is decided, so that a leaf (or a whole version) whose
  // removals all miss is shared, as the host edit shares it.
  if (mode == EditMode::remove && hits < m) {
    if (hits == 0) {
      res.root = a.root();
      res.view = a.pool_bytes();
      res.nnz = a.nnz();
      return true;
    }
    Array<u32> keep = flagged(w, present.get(), m, hits);
    Array<u64> k2(w, hits);
    Array<u32> l2(w, hits);
    gather_kernel<u64><<<blocks_for(hits), 256, 0, stream>>>(ukey.get(), keep.get(), hits, k2.get());
    gather_kernel<u32><<<blocks_for(hits), 256, 0, stream>>>(ulast.get(), keep.get(), hits, l2.get());
    w.check_launch("GPU edit: present removals");
    ukey = std::move(k2);
    ulast = std::move(l2);
    m = hits;
    find_units();
  }
  const u32* aunit = apath.get() + u * nt;

  // 3. The touched leaves, and which units are rebuilt whole (absent, COOW,
  // or a COOW rule that flips) rather than leaf by leaf.
  u64 nl = 0;
  Array<u64> LR, LC, lfirst;
  Array<u32> lunit, lold, lstart;
  Array<int> ldelta;
  Array<u32> whole(w, nt);
  // COOW units that stay COOW are merged like sparse leaves where their
  // histogram of leaf blocks fits shared memory (node sizes up to 128 on an
  // H100); leaves are merged through a dense image where that fits. 1 KiB is
  // left for the kernels' own shared memory (CUB's temporary storage).
  // ccount: the entries of every merged COOW node after the edit.
  const std::size_t smem = shared_memory_optin(), cells = std::size_t{1} << (2 * b);
  const std::size_t image_bytes = cells * sizeof(V) + (cells + 31) / 32 * 4, bin_bytes = cells * sizeof(int);
  const bool coow_merges = !unit_is_leaf && a.wide_nodes() && bin_bytes + 1024 <= smem;
  Array<u32> ccount, wpos;
  if (coow_merges) ccount = Array<u32>(w, nt);
  if (!unit_is_leaf) {
    const u32 leaf_shift = 2 * b;
    Array<u32> lrun;
    nl = runs_of(w, ukey.get(), m, leaf_shift, lrun, "GPU edit: touched leaves");
    LR = Array<u64>(w, nl);
    LC = Array<u64>(w, nl);
    lunit = Array<u32>(w, nl);
    lold = Array<u32>(w, nl);
    ldelta = Array<int>(w, nl);
    lstart = Array<u32>(w, nl + 1);
    cuda_check(cudaMemsetAsync(ldelta.get(), 0, nl * sizeof(int), stream), "cudaMemsetAsync");
    leaves_kernel<I><<<blocks_for(m), 256, 0, stream>>>(ukey.get(), ulast.get(), urun.get(), lrun.get(), present.get(),
                                                        m, leaf_shift, up.row, up.col, tr, b, pool, aunit,
                                                        mode == EditMode::remove, LR.get(), LC.get(), lunit.get(),
                                                        lold.get(), ldelta.get(), lstart.get());
    w.check_launch("GPU edit: leaves");
    lfirst = Array<u64>(w, nt + 1);
    leaf_first_kernel<<<blocks_for(nl + 1), 256, 0, stream>>>(lunit.get(), nl, nt, lfirst.get());
    const unsigned grid = static_cast<unsigned>(std::min<u64>(nt, 1u << 16));
    unit_mode_kernel<inner_block><<<grid, inner_block, 0, stream>>>(pool, aunit, nt, lfirst.get(), LR.get(), LC.get(),
                                                                    lold.get(), ldelta.get(), b, a.wide_nodes(), false,
                                                                    sizeof(V), whole.get(), ccount.get());
    w.check_launch("GPU edit: unit modes");
  } else {
    unit_mode_kernel<inner_block><<<1, inner_block, 0, stream>>>(pool, aunit, nt, nullptr, nullptr, nullptr, nullptr,
                                                                 nullptr, b, a.wide_nodes(), true, sizeof(V),
                                                                 whole.get(), nullptr);
    w.check_launch("GPU edit: unit modes");
  }
  // COOW units that stay COOW are merged like sparse leaves (coow_merges,
  // decided above).
  if (coow_merges) {
    wpos = Array<u32>(w, m);
    wide_pos_kernel<I><<<blocks_for(m), 256, 0, stream>>>(ulast.get(), m, up.row, up.col, tr, b, wpos.get());
    cuda_check(cudaFuncSetAttribute(coow_mode_kernel<inner_block>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(bin_bytes)),
               "cudaFuncSetAttribute(COOW rule)");
    coow_mode_kernel<inner_block><<<static_cast<unsigned>(std::min<u64>(nt, 1u << 16)), inner_block, bin_bytes,
                                    stream>>>(
        pool, aunit, nt, ufirst.get(), wpos.get(), present.get(), mode == EditMode::remove, b, sizeof(V), whole.get(),
        ccount.get());
    w.check_launch("GPU edit: COOW rule");
  }
  w.phase("edit: units, leaves and modes");

  // 4. The updates each rebuild takes: set, the last per position (sorted);
  // add, every update in input order; remove, none.
  Array<u32> raw_unit;
  if (mode == EditMode::add) {
    raw_unit = Array<u32>(w, n);
    raw_unit_kernel<<<blocks_for(n), 256, 0, stream>>>(idx_s.get(), run.get(), urun.get(), n, raw_unit.get());
    w.check_launch("GPU edit: update units");
  }
  run.release();
  Array<u32> dunit(w, m);  // per distinct update: its unit
  minus_one_kernel<<<blocks_for(m), 256, 0, stream>>>(urun.get(), m, dunit.get());
  w.check_launch("GPU edit: units of updates");
  auto updates_of = [&](u32 want, u64& count) -> Array<u32> {
    count = 0;
    if (mode == EditMode::remove) return {};
    if (mode == EditMode::add) return select_by_mode(w, raw_unit.get(), whole.get(), want, n, nullptr, count);
    return select_by_mode(w, dunit.get(), whole.get(), want, m, ulast.get(), count);
  };

  // 5. Whole units: extracted, merged, built by the builder's rules (their
  // COOW rule included); leaves of the other units: the same, built as a
  // standard pool (a leaf's type depends on its own entries only).
  // Without whole units (the common case: a unit flips its COOW rule rarely)
  // the extraction and the builder's dozen steps are skipped: whole_built
  // stays empty (no root, nothing appended).
  DeviceMatrix<V> whole_built, leaf_built;
  if (count_flagged(w, mode_flags(w, nullptr, whole.get(), unit_whole, nt).get(), nt) > 0) {
    Entries<V> old = extract_entries<V>(w, pool, b, !unit_is_leaf, aunit, UR.get(), UC.get(), nt, whole.get(), 1);
    u64 k = 0;
    Array<u32> sel = updates_of(1, k);
    whole_built = rebuild<V, I, J>(w, old, ukey.get(), m, tk, mode, up, tr, sel.get(), k, s, a.wide_nodes());
  }
  w.phase("edit: whole units rebuilt");
  // The touched leaves of leaf-by-leaf units: merged in place of a rebuild
  // (a thread block each, through a dense image in shared memory) where the
  // image fits (node size up to 128), else built by the builder.
  const bool merge_leaves = image_bytes + 1024 <= smem;
  Array<u32> lsel;
  u64 nll = 0;
  Array<u64> lR, lC;
  Array<u32> lrep, lref_old, lj0, lj1, lcount;
  Array<u64> loff;
  u64 lbytes = 0;
  if (nl > 0) {
    lsel = select_by_mode(w, lunit.get(), whole.get(), 0, nl, nullptr, nll);
    lR = Array<u64>(w, nll);
    lC = Array<u64>(w, nll);
    lrep = Array<u32>(w, nll);
    lref_old = Array<u32>(w, nll);
    gather_kernel<u64><<<blocks_for(nll), 256, 0, stream>>>(LR.get(), lsel.get(), nll, lR.get());
    gather_kernel<u64><<<blocks_for(nll), 256, 0, stream>>>(LC.get(), lsel.get(), nll, lC.get());
    gather_kernel<u32><<<blocks_for(nll), 256, 0, stream>>>(lunit.get(), lsel.get(), nll, lrep.get());
    gather_kernel<u32><<<blocks_for(nll), 256, 0, stream>>>(lold.get(), lsel.get(), nll, lref_old.get());
    w.check_launch("GPU edit: leaves of leaf-by-leaf units");
    if (nll > 0 && merge_leaves) {
      Array<int> ld(w, nll);
      lj0 = Array<u32>(w, nll);
      lj1 = Array<u32>(w, nll);
      gather_kernel<int><<<blocks_for(nll), 256, 0, stream>>>(ldelta.get(), lsel.get(), nll, ld.get());
      gather_kernel<u32><<<blocks_for(nll), 256, 0, stream>>>(lstart.get(), lsel.get(), nll, lj0.get());
      gather_next_kernel<<<blocks_for(nll), 256, 0, stream>>>(lstart.get(), lsel.get(), nll, lj1.get());
      lcount = Array<u32>(w, nll);
      Array<u64> bytes(w, nll + 1);
      leaf_sizes_kernel<<<blocks_for(nll + 1), 256, 0, stream>>>(pool, lref_old.get(), ld.get(), nll, b, sizeof(V),
                                                                 lcount.get(), bytes.get());
      w.check_launch("GPU edit: leaf sizes");
      loff = Array<u64>(w, nll + 1);
      convert_detail::exclusive_sum(w, bytes.get(), loff.get(), nll + 1);
      lbytes = read_back(w, loff.get() + nll, "GPU edit: leaf bytes");
    } else if (nll > 0) {
      Entries<V> old = extract_entries<V>(w, pool, b, false, lref_old.get(), lR.get(), lC.get(), nll, nullptr, 0);
      u64 k = 0;
      Array<u32> sel = updates_of(0, k);
      leaf_built = rebuild<V, I, J>(w, old, ukey.get(), m, tk, mode, up, tr, sel.get(), k, s, false);
    }
  }
  w.phase("edit: leaves rebuilt");

  // The merged COOW units: their updates in COOW order, their sizes.
  u64 m2 = 0, cbytes = 0, n_coow = 0;
  Array<u32> j2, ppos2, cfirst;
  Array<u64> coff;
  if (ccount.size() > 0) {
    Array<u32> sel2 = select_by_mode(w, dunit.get(), whole.get(), unit_coow_merged, m, nullptr, m2);
    if (m2 > 0) {
      Array<u64> k2(w, m2), k2s(w, m2);
      j2 = Array<u32>(w, m2);
      coow_keys_kernel<<<blocks_for(m2), 256, 0, stream>>>(sel2.get(), m2, urun.get(), wpos.get(), k2.get());
      convert_detail::radix_sort_pairs(w, k2.get(), k2s.get(), sel2.get(), j2.get(), m2,
                                       32 + std::max(1, static_cast<int>(std::bit_width(nt))));
      Array<u32> pres2(w, m2 + 1);
      cuda_check(cudaMemsetAsync(pres2.get() + m2, 0, sizeof(u32), stream), "cudaMemsetAsync");
      gather_kernel<u32><<<blocks_for(m2), 256, 0, stream>>>(present.get(), j2.get(), m2, pres2.get());
      ppos2 = Array<u32>(w, m2 + 1);
      convert_detail::exclusive_sum(w, pres2.get(), ppos2.get(), m2 + 1);
      cfirst = Array<u32>(w, nt + 1);
      coow_ranges_kernel<<<blocks_for(nt + 1), 256, 0, stream>>>(k2s.get(), m2, nt, cfirst.get());
      Array<u64> bytes(w, nt + 1);
      coow_bytes_kernel<<<blocks_for(nt + 1), 256, 0, stream>>>(whole.get(), ccount.get(), nt, sizeof(V), bytes.get());
      w.check_launch("GPU edit: COOW merges");
      coff = Array<u64>(w, nt + 1);
      convert_detail::exclusive_sum(w, bytes.get(), coff.get(), nt + 1);
      cbytes = read_back(w, coff.get() + nt, "GPU edit: COOW bytes");
      n_coow = count_flagged(w, mode_flags(w, nullptr, whole.get(), unit_coow_merged, nt).get(), nt);
    }
  }

  // 6. What of the two built pools is appended: their levels u and below
  // (whole units) and their leaves (leaf by leaf), prefixes of each.
  Array<u32> wpath, lpath;
  const u64 wend = prefix_end(w, whole_built.pool(), whole_built.root(), whole_built.pool_bytes(), b, u, UR.get(),
                              UC.get(), nt, wpath);
  const u64 wbytes = wend - sizeof(PoolHeader);
  if (nll > 0 && !merge_leaves)
    lbytes = prefix_end(w, leaf_built.pool(), leaf_built.root(), leaf_built.pool_bytes(), b, D - 1, lR.get(), lC.get(),
                        nll, lpath) - sizeof(PoolHeader);

  // Counts and sizes of every level of inner nodes, bottom-up (a node's size
  // depends only on which of its children exist): the leaf-by-leaf units
  // (level u), then the levels above.
  Array<unsigned long long> shared(w, 1);
  cuda_check(cudaMemsetAsync(shared.get(), 0, sizeof(unsigned long long), stream), "cudaMemsetAsync");
  const u32* wunit = wpath.get() + u * nt;
  Level unit_level;
  const u32* leaf_live = nll == 0 ? nullptr : merge_leaves ? lcount.get() : lpath.get() + (D - 1) * nll;
  if (nll > 0) count_level(w, unit_level, pool, aunit, lR.get(), lC.get(), lrep.get(), leaf_live, nll, b, shared.get());
  Array<u32> unit_live(w, nt);
  unit_live_kernel<<<blocks_for(nt), 256, 0, stream>>>(whole.get(), wunit, nt, unit_live.get());
  if (unit_level.groups > 0)
    scatter_live_kernel<<<blocks_for(unit_level.groups), 256, 0, stream>>>(unit_level.rep.get(), unit_level.count.get(),
                                                                           unit_level.groups, unit_live.get());
  w.check_launch("GPU edit: live units");
  std::vector<Level> levels(u);
  Array<u32> unit_rep(w, nt);
  convert_detail::iota_kernel<<<blocks_for(nt), 256, 0, stream>>>(unit_rep.get(), nt);
  const u32* live = unit_live.get();
  const u64 *iR = UR.get(), *iC = UC.get();
  const u32* irep = unit_rep.get();
  u64 items = nt, upper_bytes = unit_level.bytes;
  for (u32 k = 0; k < u; ++k) {  // k = 0: the units' parents (level u-1)
    Level& L = levels[k];
    count_level(w, L, pool, apath.get() + (u - 1 - k) * nt, iR, iC, irep, live, items, b, shared.get());
    upper_bytes += L.bytes;
    live = L.count.get();
    iR = L.R.get();
    iC = L.C.get();
    irep = L.rep.get();
    items = L.groups;
  }
  w.phase("edit: inner nodes counted");

  // 7. Room in the arena: whole units, leaves, then each level of inner nodes
  // (deepest first), and the writes.
  const u64 total = wbytes + lbytes + cbytes + upper_bytes;
  res.needed = total;
  if (merge_leaves)
    cuda_check(cudaFuncSetAttribute(leaf_merge_kernel<V, inner_block>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(image_bytes)),
               "cudaFuncSetAttribute(leaf merge)");
  u64 base = 0;
  if (!a.arena()->append(total, base)) return false;
  // From here on a failure (an allocation, a CUDA error) gives the room back:
  // the arena is left as it was and no version exists.
  try {
  std::byte* arena = a.arena()->data();
  if (wbytes > 0)
    cuda_check(cudaMemcpyAsync(arena + base, whole_built.pool() + sizeof(PoolHeader), wbytes, cudaMemcpyDeviceToDevice,
                               stream),
               "cudaMemcpyAsync(rebuilt units)");
  if (lbytes > 0 && !merge_leaves)
    cuda_check(cudaMemcpyAsync(arena + base + wbytes, leaf_built.pool() + sizeof(PoolHeader), lbytes,
                               cudaMemcpyDeviceToDevice, stream),
               "cudaMemcpyAsync(rebuilt leaves)");
  const u64 zeroed = merge_leaves ? wbytes : wbytes + lbytes;  // merged leaves are written into zeroed memory too
  if (total > zeroed) cuda_check(cudaMemsetAsync(arena + base + zeroed, 0, total - zeroed, stream), "cudaMemsetAsync");
  Array<u32> unit_ref(w, nt);
  place_units_kernel<<<warp_grid(nt), 256, 0, stream>>>(
      wunit, nt, static_cast<u32>(base - sizeof(PoolHeader)), unit_is_leaf, b, arena, unit_ref.get());
  w.check_launch("GPU edit: placing the units");
  const LeafMerge<V> merge_args{pool, arena, 0, lref_old.get(), lj0.get(), lj1.get(), lcount.get(), loff.get(),
                                ukey.get(), ulast.get(),
                                // a remove reads no value (and after its misses are dropped these
                                // describe the uncompacted positions)
                                mode == EditMode::remove ? nullptr : ustart.get(),
                                mode == EditMode::remove ? nullptr : idx_s.get(), present.get(), up.val, mode, b,
                                nullptr};
  if (m2 > 0) {
    LeafMerge<V> cm = merge_args;
    cm.base = base + wbytes + lbytes;
    coow_merge_kernel<V><<<warp_grid(nt), 256, 0, stream>>>(
        cm, aunit, whole.get(), ccount.get(), nt, cfirst.get(), j2.get(), ppos2.get(), wpos.get(), coff.get(),
        unit_ref.get());
    w.check_launch("GPU edit: COOW merge");
  }
  u64 at = base + wbytes + lbytes + cbytes;
  Array<u32> leaf_ref;
  if (nll > 0) {
    leaf_ref = Array<u32>(w, nll);
    if (merge_leaves) {
      LeafMerge<V> lm = merge_args;
      lm.base = base + wbytes;
      lm.out = leaf_ref.get();
      Array<u32> dense_flag(w, nll + 1), other_flag(w, nll + 1);
      dense_leaves_kernel<<<blocks_for(nll + 1), 256, 0, stream>>>(pool, lref_old.get(), lcount.get(), nll, b,
                                                                   sizeof(V), dense_flag.get());
      invert_flags_kernel<<<blocks_for(nll + 1), 256, 0, stream>>>(dense_flag.get(), nll, other_flag.get());
      u64 n_dense = 0, n_sparse = 0;
      const Array<u32> dense_list = flagged(w, dense_flag.get(), nll, n_dense);
      const Array<u32> sparse_list = flagged(w, other_flag.get(), nll, n_sparse);
      if (n_sparse > 0)
        leaf_merge_sparse_kernel<V><<<warp_grid(n_sparse), 256, 0,
                                      stream>>>(lm, sparse_list.get(), n_sparse, ppos.get());
      if (n_dense > 0)
        leaf_merge_kernel<V, inner_block><<<static_cast<unsigned>(std::min<u64>(n_dense, 1u << 16)), inner_block,
                                            image_bytes, stream>>>(lm, dense_list.get(), n_dense);
      w.check_launch("GPU edit: leaf merge");
    } else {
      place_units_kernel<<<warp_grid(nll), 256, 0, stream>>>(
          lpath.get() + (D - 1) * nll, nll, static_cast<u32>(base + wbytes - sizeof(PoolHeader)), true, b, arena,
          leaf_ref.get());
    }
    write_level(w, unit_level, pool, aunit, lR.get(), lC.get(), lrep.get(), leaf_live, leaf_ref.get(), b, arena, at);
    scatter_groups_kernel<<<blocks_for(unit_level.groups), 256, 0, stream>>>(
        unit_level.rep.get(), unit_level.ref.get(), unit_level.groups, unit_ref.get());
    w.check_launch("GPU edit: leaf-by-leaf units");
    at += unit_level.bytes;
  }
  const u32* item_ref = unit_ref.get();
  iR = UR.get();
  iC = UC.get();
  irep = unit_rep.get();
  live = unit_live.get();
  for (u32 k = 0; k < u; ++k) {
    Level& L = levels[k];
    write_level(w, L, pool, apath.get() + (u - 1 - k) * nt, iR, iC, irep, live, item_ref, b, arena, at);
    at += L.bytes;
    item_ref = L.ref.get();
    live = L.count.get();
    iR = L.R.get();
    iC = L.C.get();
    irep = L.rep.get();
  }
  // The root: level 0's one node (the unit itself in a tree of depth 1 or 2),
  // null when the edit left no entry.
  w.phase("edit: appended and written");
  // The root, the shared children and the nodes written, read back at once:
  // counts[0] units rebuilt, [1] leaves written, [2] inner nodes written.
  Array<unsigned long long> counts(w, 3);
  cuda_check(cudaMemsetAsync(counts.get(), 0, 3 * sizeof(unsigned long long), stream), "cudaMemsetAsync");
  auto count_into = [&](const u32* ref, u64 k, int slot) {
    if (k > 0) count_nonnull_kernel<<<blocks_for(k), 256, 0, stream>>>(ref, k, counts.get() + slot);
  };
  count_into(wunit, nt, 0);
  if (nll > 0) count_into(leaf_ref.get(), nll, 1);
  count_into(unit_level.ref.get(), unit_level.groups, 2);
  for (Level& L : levels) count_into(L.ref.get(), L.groups, 2);
  w.check_launch("GPU edit: counts");
  unsigned long long host_counts[3] = {};
  NodeRef root = null_ref;
  unsigned long long shared_children = 0;
  cuda_check(cudaMemcpyAsync(host_counts, counts.get(), sizeof(host_counts), cudaMemcpyDeviceToHost, stream),
             "cudaMemcpyAsync(GPU edit counts)");
  cuda_check(cudaMemcpyAsync(&root, item_ref, sizeof(root), cudaMemcpyDeviceToHost, stream),
             "cudaMemcpyAsync(GPU edit root)");
  cuda_check(cudaMemcpyAsync(&shared_children, shared.get(), sizeof(shared_children), cudaMemcpyDeviceToHost, stream),
             "cudaMemcpyAsync(GPU edit shared children)");
  w.sync("cudaStreamSynchronize(GPU edit)");
  res.root = root;
  const u64 units_rebuilt = host_counts[0], leaves_rebuilt = host_counts[1], inner_written = host_counts[2];
  res.view = base + total;
  if (mode == EditMode::remove) {
    st.removed = hits;
    res.nnz = a.nnz() - hits;
  } else {
    st.updated = hits;
    st.inserted = m - hits;
    res.nnz = a.nnz() + (m - hits);
  }
  st.nodes_rewritten = units_rebuilt + leaves_rebuilt + n_coow + inner_written;
  st.nodes_shared = shared_children;
  st.bytes_written = total;
  return true;
  } catch (...) {
    cudaStreamSynchronize(stream);  // nothing of this edit still writes
    a.arena()->rollback(base, total);
    throw;
  }
}

// needed: the bytes the edit appends (also when they did not fit).
template <class V, class I>
bool try_edit(const DeviceMatrix<V>& fam, const DeviceCooView<V, I>& up, EditMode mode, cudaStream_t stream,
              Context* ctx, EditStats& st, DeviceMatrix<V>& out, std::uint64_t* needed = nullptr) {
  Result res;
  const Shape& s = fam.shape();
  const bool narrow = s.rows <= static_cast<index_t>(std::numeric_limits<std::int32_t>::max()) &&
                      s.cols <= static_cast<index_t>(std::numeric_limits<std::int32_t>::max());
  const bool ok = narrow ? edit_into<V, I, std::int32_t>(fam, up, mode, stream, ctx, st, res)
                         : edit_into<V, I, std::int64_t>(fam, up, mode, stream, ctx, st, res);
  if (needed) *needed = res.needed;
  if (!ok) return false;
  out = DeviceMatrix<V>::version(fam.arena(), res.view, s, res.nnz, res.root, fam.transposed(), fam.scale(),
                                 fam.wide_nodes());
  return true;
}

// The matrix an edit appends to: A's family, or a new one (set and add on a
// scaled matrix: materialized first, as on the host).
template <class V>
DeviceMatrix<V> family_of(const DeviceMatrix<V>& a, EditMode mode, cudaStream_t stream, Context* ctx) {
  if (mode != EditMode::remove && a.scale() != V(1))
    return start_family(ctx ? materialize(*ctx, a) : materialize(a, {}, stream), 0, stream);
  return versioned(a, 0, stream);
}

template <class V, class I>
DeviceMatrix<V> edit_version(const DeviceMatrix<V>& a, const DeviceCooView<V, I>& updates, EditMode mode,
                             cudaStream_t stream, Context* ctx, EditStats* stats) {
  check_updates(a, updates);
  DeviceMatrix<V> fam = family_of(a, mode, stream, ctx);
  if (updates.nnz == 0) {
    if (stats) *stats = EditStats{};
    return fam;
  }
  EditStats st;
  DeviceMatrix<V> out;
  if (!try_edit(fam, updates, mode, stream, ctx, st, out))
    throw LimitError("GPU edit: the family's device arena (" + std::to_string(fam.arena()->capacity()) +
                     " bytes, " + std::to_string(fam.arena()->size()) +
                     " used) has no room for this edit; start a new family from a compact copy "
                     "(ops::versioned(ops::copy(a), capacity))");
  if (stats) *stats = st;
  return out;
}

template <class V, class I>
void edit_in_place(DeviceMatrix<V>& a, const DeviceCooView<V, I>& updates, EditMode mode, cudaStream_t stream,
                   Context* ctx, EditStats* stats) {
  check_updates(a, updates);
  DeviceMatrix<V> fam = family_of(a, mode, stream, ctx);
  EditStats st;
  DeviceMatrix<V> out;
  if (updates.nnz == 0) {
    out = std::move(fam);
  } else if (std::uint64_t needed = 0; !try_edit(fam, updates, mode, stream, ctx, st, out, &needed)) {
    // No room: a's own nodes into a new family with room for this edit and as
    // much again (at least the default's), where the edit then goes; what it
    // appends depends on the entries only, not on where the old nodes lie.
    DeviceMatrix<V> own = ctx ? copy(*ctx, fam, CopyOptions{true}) : copy(fam, CopyOptions{true}, stream);
    if (own.pool_bytes() + needed > max_pool_bytes)
      throw LimitError("GPU edit: the matrix (" + std::to_string(own.pool_bytes()) + " bytes) and this edit's " +
                       std::to_string(needed) + " new bytes pass the 4 GiB a device arena addresses");
    const std::uint64_t room = std::max(default_capacity(own.pool_bytes()),
                                        round_up(2 * (own.pool_bytes() + needed), node_alignment));
    fam = start_family(own, std::min<std::uint64_t>(room, max_pool_bytes), stream);
    if (!try_edit(fam, updates, mode, stream, ctx, st, out))
      throw Error("GPU edit: the edit found no room in a new family sized for it (" + std::to_string(needed) +
                  " bytes)");
  }
  if (stats) *stats = st;
  a = std::move(out);
}

}  // namespace edit_gpu_detail

template <class V>
DeviceMatrix<V> versioned(const DeviceMatrix<V>& a, std::uint64_t capacity, cudaStream_t stream) {
  if (a.arena())
    return DeviceMatrix<V>::version(a.arena(), a.pool_bytes(), a.shape(), a.nnz(), a.root(), a.transposed(),
                                    a.scale(), a.wide_nodes());
  return edit_gpu_detail::start_family(a, capacity, stream);
}

template <class V, class I>
DeviceMatrix<V> edit_version(const DeviceMatrix<V>& a, const DeviceCooView<V, I>& updates, EditMode mode,
                             cudaStream_t stream, EditStats* stats) {
  return edit_gpu_detail::edit_version(a, updates, mode, stream, nullptr, stats);
}

template <class V, class I>
DeviceMatrix<V> edit_version(Context& ctx, const DeviceMatrix<V>& a, const DeviceCooView<V, I>& updates, EditMode mode,
                             EditStats* stats) {
  ctx.check_device("GPU edit");
  return edit_gpu_detail::edit_version(a, updates, mode, ctx.stream(), &ctx, stats);
}

template <class V, class I>
void edit_in_place(DeviceMatrix<V>& a, const DeviceCooView<V, I>& updates, EditMode mode, cudaStream_t stream,
                   EditStats* stats) {
  edit_gpu_detail::edit_in_place(a, updates, mode, stream, nullptr, stats);
}

template <class V, class I>
void edit_in_place(Context& ctx, DeviceMatrix<V>& a, const DeviceCooView<V, I>& updates, EditMode mode,
                   EditStats* stats) {
  ctx.check_device("GPU edit");
  edit_gpu_detail::edit_in_place(a, updates, mode, ctx.stream(), &ctx, stats);
}

#define HISPARSE_EDIT_GPU(V, I)                                                                                     \
  template DeviceMatrix<V> edit_version(const DeviceMatrix<V>&, const DeviceCooView<V, I>&, EditMode, cudaStream_t, \
                                        EditStats*);                                                                \
  template void edit_in_place(DeviceMatrix<V>&, const DeviceCooView<V, I>&, EditMode, cudaStream_t, EditStats*);  \
  template DeviceMatrix<V> edit_version(Context&, const DeviceMatrix<V>&, const DeviceCooView<V, I>&, EditMode,     \
                                        EditStats*);                                                                \
  template void edit_in_place(Context&, DeviceMatrix<V>&, const DeviceCooView<V, I>&, EditMode, EditStats*);
HISPARSE_EDIT_GPU(float, std::int32_t)
HISPARSE_EDIT_GPU(float, std::int64_t)
HISPARSE_EDIT_GPU(double, std::int32_t)
HISPARSE_EDIT_GPU(double, std::int64_t)
#undef HISPARSE_EDIT_GPU
template DeviceMatrix<float> versioned(const DeviceMatrix<float>&, std::uint64_t, cudaStream_t);
template DeviceMatrix<double> versioned(const DeviceMatrix<double>&, std::uint64_t, cudaStream_t);

}  // namespace hisparse::ops
