// The GPU batch edit (hisparse/ops/edit_gpu.hpp; docs/ops.md, "Editing on the
// GPU"). The host edit (ops/edit/src) and its reference are the
// specification: a version's download() equals edit()'s pool byte for byte.
//
// 1. Sort the batch by tree key (CUB radix sort, stable: set keeps the last
//    update of a position) and reduce it to distinct positions.
// 2. Group those by unit (level u = depth-2 sub-tree, the unit a COOW node
//    replaces; the root in a tree of depth 1) and find each touched unit's
//    path in A (a thread per unit: at most depth-2 dependent loads).
// 3. Extract the touched units' entries (the extraction's frontier kernels),
//    drop the ones the updates replace or remove, and hand the rest with the
//    updates to the GPU builder: its pool holds exactly the touched units,
//    each built by the canonical rules (a unit's node types depend on its own
//    entries only).
// 4. Append that pool's levels u and below to the family's arena (their
//    references moved), then rewrite the inner nodes above, bottom-up, on the
//    touched paths only: a thread block per node merges its old children with
//    the new ones and keeps every other child where it is.
#include <algorithm>
#include <bit>
#include <limits>
#include <string>
#include <vector>

#include "../../convert/gpu/work_memory.cuh"
#include "edit_kernels.cuh"
#include "hisparse/ops/copy_gpu.hpp"
#include "hisparse/ops/edit_gpu.hpp"

namespace hisparse::ops {
namespace edit_gpu_detail {

using convert_detail::Array;
using convert_detail::blocks_for;
using convert_detail::read_back;
using convert_detail::WorkMemory;

inline constexpr unsigned inner_block = 256;

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

// The tree key of a content of `s`'s shape, and the bits it uses (LimitError
// past 64).
inline TreeKey tree_key_of(const Shape& s, int& bits) {
  const std::uint32_t b = s.log2_node_size, low = b * (s.depth - 1);
  const unsigned __int128 r0 = ((s.rows ? s.rows - 1 : 0) >> low) + 1, c0 = ((s.cols ? s.cols - 1 : 0) >> low) + 1;
  const unsigned __int128 top = r0 * c0 - 1;  // the largest top digit pair
  const auto hi = static_cast<std::uint64_t>(top >> 64), lo = static_cast<std::uint64_t>(top);
  const int top_bits = hi ? 64 + std::bit_width(hi) : std::bit_width(lo);
  bits = top_bits + static_cast<int>(2 * low);
  if (bits > 64)
    throw LimitError("GPU edit: a " + std::to_string(s.rows) + " x " + std::to_string(s.cols) +
                     " matrix's tree positions take more than 64 bits");
  return TreeKey{b, s.depth, static_cast<u64>(c0)};
}

struct Result {
  NodeRef root = null_ref;
  std::uint64_t view = 0, nnz = 0;
};

// Everything of one level above the units, kept from the count to the write.
struct Level {
  Array<u64> first, R, C;
  Array<u32> rep, count, ref;
  Array<u64> offset;
  u64 groups = 0, bytes = 0, base = 0;
};

// The edit of version `a` (in a family), appended to its arena; false when
// the arena has no room for it (nothing changed).
template <class V, class I, class J>
bool edit_into(const DeviceMatrix<V>& a, const DeviceCooView<V, I>& up, EditMode mode, cudaStream_t stream,
               EditStats& st, Result& res) {
  const Shape& s = a.shape();
  const u32 b = s.log2_node_size, D = s.depth, u = D >= 2 ? D - 2 : 0;
  const bool tr = a.transposed();
  const u64 n = up.nnz;
  int key_bits = 0;
  const TreeKey tk = tree_key_of(s, key_bits);
  const u32 unit_shift = 2 * b * (D - u), level_shift = b * (D - u);
  WorkMemory w(stream);

  // 1. Sorted distinct positions.
  Array<u64> key(w, n), key_s(w, n);
  Array<u32> idx(w, n), idx_s(w, n);
  {
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
  }
  convert_detail::radix_sort_pairs(w, key.get(), key_s.get(), idx.get(), idx_s.get(), n, key_bits);
  key.release();
  idx.release();
  Array<u32> head(w, n + 1), run(w, n + 1);
  run_heads_kernel<<<blocks_for(n + 1), 256, 0, stream>>>(key_s.get(), n, 0, head.get());
  convert_detail::inclusive_sum(w, head.get(), run.get(), n + 1);
  const u64 m = read_back(w, run.get() + n, "GPU edit: distinct positions");
  Array<u64> ukey(w, m);
  Array<u32> ulast(w, m);
  unique_kernel<<<blocks_for(n), 256, 0, stream>>>(key_s.get(), idx_s.get(), run.get(), n, ukey.get(), ulast.get());
  w.check_launch("GPU edit: unique kernel");
  key_s.release();
  idx_s.release();

  w.phase("edit: sorted batch");
  // 2. Touched units and their paths in A.
  Array<u32> uhead(w, m + 1), urun(w, m + 1);
  run_heads_kernel<<<blocks_for(m + 1), 256, 0, stream>>>(ukey.get(), m, unit_shift, uhead.get());
  convert_detail::inclusive_sum(w, uhead.get(), urun.get(), m + 1);
  const u64 nt = read_back(w, urun.get() + m, "GPU edit: touched units");
  Array<u64> UR(w, nt), UC(w, nt);
  units_kernel<I><<<blocks_for(m), 256, 0, stream>>>(ukey.get(), ulast.get(), urun.get(), m, unit_shift, up.row,
                                                     up.col, tr, level_shift, UR.get(), UC.get());
  w.check_launch("GPU edit: units kernel");
  uhead.release();
  urun.release();
  Array<u32> apath(w, (u + 1) * nt);
  descend_kernel<<<blocks_for(nt), 256, 0, stream>>>(a.pool(), a.root(), b, u, UR.get(), UC.get(), nt, apath.get(),
                                                     nullptr);
  w.check_launch("GPU edit: descent");
  const u32* aunit = apath.get() + u * nt;

  w.phase("edit: units and paths");
  // 3. The touched units' entries, merged with the updates, built again.
  Array<u64> orow, ocol;
  Array<V> oval;
  u64 n_old = 0;
  {
    Array<u32> flag(w, nt + 1), pos(w, nt + 1);
    nonnull_kernel<<<blocks_for(nt + 1), 256, 0, stream>>>(aunit, nt, flag.get());
    convert_detail::exclusive_sum(w, flag.get(), pos.get(), nt + 1);
    u64 size = read_back(w, pos.get() + nt, "GPU edit: units present");
    Array<u32> ref(w, size);
    Array<u64> R(w, size), C(w, size);
    frontier_kernel<<<blocks_for(nt), 256, 0, stream>>>(aunit, UR.get(), UC.get(), pos.get(), nt, ref.get(), R.get(),
                                                        C.get());
    w.check_launch("GPU edit: frontier");
    if (size > 0 && u + 1 < D) {  // down to the leaves (a COOW node passes as it is)
      const convert_detail::Frontier f{ref.get(), R.get(), C.get(), size};
      Array<u64> count(w, size + 1), first(w, size + 1);
      convert_detail::child_count_kernel<<<blocks_for(size + 1), 256, 0, stream>>>(f, a.pool(), b, count.get());
      convert_detail::exclusive_sum(w, count.get(), first.get(), size + 1);
      const u64 next = read_back(w, first.get() + size, "GPU edit: leaves");
      Array<u32> ref2(w, next);
      Array<u64> R2(w, next), C2(w, next);
      convert_detail::expand_kernel<<<blocks_for(size), 256, 0, stream>>>(f, a.pool(), b, first.get(), ref2.get(),
                                                                          R2.get(), C2.get());
      w.check_launch("GPU edit: expand");
      ref = std::move(ref2);
      R = std::move(R2);
      C = std::move(C2);
      size = next;
    }
    if (size > 0) {
      const convert_detail::Frontier f{ref.get(), R.get(), C.get(), size};
      Array<u64> count(w, size + 1), first(w, size + 1);
      convert_detail::entry_count_kernel<<<blocks_for(size + 1), 256, 0, stream>>>(f, a.pool(), b, count.get());
      convert_detail::exclusive_sum(w, count.get(), first.get(), size + 1);
      n_old = read_back(w, first.get() + size, "GPU edit: old entries");
      orow = Array<u64>(w, n_old);
      ocol = Array<u64>(w, n_old);
      oval = Array<V>(w, n_old);
      const unsigned blocks = static_cast<unsigned>(std::min<u64>((size + 7) / 8, 1u << 20));
      convert_detail::entries_kernel<V, u64, V><<<blocks, 256, 0, stream>>>(
          f, a.pool(), b, first.get(), false, V(1), true, orow.get(), ocol.get(), oval.get());
      w.check_launch("GPU edit: old entries");
    }
  }
  w.phase("edit: old entries");
  Array<u32> keep(w, n_old + 1), kpos(w, n_old + 1);
  Array<unsigned long long> found(w, 1);
  cuda_check(cudaMemsetAsync(found.get(), 0, sizeof(unsigned long long), stream), "cudaMemsetAsync");
  match_old_kernel<<<blocks_for(n_old + 1), 256, 0, stream>>>(orow.get(), ocol.get(), n_old, tk, ukey.get(), m,
                                                               mode != EditMode::add, keep.get(), found.get());
  w.check_launch("GPU edit: matching");
  convert_detail::exclusive_sum(w, keep.get(), kpos.get(), n_old + 1);
  const u64 n_keep = read_back(w, kpos.get() + n_old, "GPU edit: kept entries");
  const u64 hits = read_back(w, found.get(), "GPU edit: positions present");
  const u64 n_new = mode == EditMode::add ? n : mode == EditMode::set ? m : 0;
  const u64 n_in = n_keep + n_new;
  w.phase("edit: matched");
  DeviceMatrix<V> built;
  if (n_in > 0) {
    Array<J> brow(w, n_in), bcol(w, n_in);
    Array<V> bval(w, n_in);
    gather_kept_kernel<V, J><<<blocks_for(n_old), 256, 0, stream>>>(orow.get(), ocol.get(), oval.get(), keep.get(),
                                                                    kpos.get(), n_old, brow.get(), bcol.get(),
                                                                    bval.get());
    if (n_new > 0)
      put_updates_kernel<V, I, J><<<blocks_for(n_new), 256, 0, stream>>>(
          up.row, up.col, up.val, mode == EditMode::set ? ulast.get() : nullptr, n_new, tr, brow.get() + n_keep,
          bcol.get() + n_keep, bval.get() + n_keep);
    w.check_launch("GPU edit: builder input");
    orow.release();
    ocol.release();
    oval.release();
    built = build_device_matrix(DeviceCooView<V, J>{s.rows, s.cols, n_in, brow.get(), bcol.get(), bval.get()},
                                BuildOptions{s.node_size(), a.wide_nodes()}, stream);
  }

  w.phase("edit: units rebuilt (GPU build)");
  // 4. The rebuilt units' part of that pool, then the inner nodes above.
  Array<u32> ppath(w, (u + 1) * nt);
  Array<unsigned long long> upper(w, 1);
  const unsigned long long built_end = built.pool_bytes() ? built.pool_bytes() : sizeof(PoolHeader);
  cuda_check(cudaMemcpyAsync(upper.get(), &built_end, sizeof(built_end), cudaMemcpyHostToDevice, stream),
             "cudaMemcpyAsync");
  descend_kernel<<<blocks_for(nt), 256, 0, stream>>>(built.pool(), built.root(), b, u, UR.get(), UC.get(), nt,
                                                     ppath.get(), upper.get());
  w.check_launch("GPU edit: descent of the rebuilt units");
  const u64 unit_end = read_back(w, upper.get(), "GPU edit: rebuilt units");
  const u64 unit_bytes = unit_end - sizeof(PoolHeader);

  // Counts and sizes of every level above, bottom-up (a node's size depends
  // only on which of its children exist).
  std::vector<Level> levels(u);
  Array<unsigned long long> shared(w, 1);
  cuda_check(cudaMemsetAsync(shared.get(), 0, sizeof(unsigned long long), stream), "cudaMemsetAsync");
  Array<u32> unit_rep(w, nt);
  convert_detail::iota_kernel<<<blocks_for(nt), 256, 0, stream>>>(unit_rep.get(), nt);
  const u32* live = ppath.get() + u * nt;
  const u64 *iR = UR.get(), *iC = UC.get();
  const u32* irep = unit_rep.get();
  u64 items = nt, upper_bytes = 0, inner_nodes = 0;
  for (u32 k = 0; k < u; ++k) {  // k = 0: the units' parents (level u-1)
    Level& L = levels[k];
    const u32 lvl = u - 1 - k;
    Array<u32> gh(w, items + 1), gr(w, items + 1);
    group_heads_kernel<<<blocks_for(items + 1), 256, 0, stream>>>(iR, iC, items, b, gh.get());
    convert_detail::inclusive_sum(w, gh.get(), gr.get(), items + 1);
    L.groups = read_back(w, gr.get() + items, "GPU edit: inner nodes");
    L.first = Array<u64>(w, L.groups + 1);
    L.R = Array<u64>(w, L.groups);
    L.C = Array<u64>(w, L.groups);
    L.rep = Array<u32>(w, L.groups);
    groups_kernel<<<blocks_for(items + 1), 256, 0, stream>>>(iR, iC, irep, gh.get(), gr.get(), items, L.groups, b,
                                                             L.first.get(), L.R.get(), L.C.get(), L.rep.get());
    w.check_launch("GPU edit: groups");
    L.count = Array<u32>(w, L.groups);
    Array<u64> bytes(w, L.groups + 1);
    cuda_check(cudaMemsetAsync(bytes.get() + L.groups, 0, sizeof(u64), stream), "cudaMemsetAsync");
    const InnerLevel il{a.pool(), apath.get() + lvl * nt, irep, L.first.get(), iR, iC, live, L.groups, b};
    const unsigned grid = static_cast<unsigned>(std::min<u64>(L.groups, 1u << 16));
    inner_count_kernel<inner_block><<<grid, inner_block, 0, stream>>>(il, L.count.get(), bytes.get(), shared.get());
    w.check_launch("GPU edit: inner counts");
    L.offset = Array<u64>(w, L.groups + 1);
    convert_detail::exclusive_sum(w, bytes.get(), L.offset.get(), L.groups + 1);
    L.bytes = read_back(w, L.offset.get() + L.groups, "GPU edit: inner bytes");
    upper_bytes += L.bytes;
    inner_nodes += L.groups;
    live = L.count.get();
    iR = L.R.get();
    iC = L.C.get();
    irep = L.rep.get();
    items = L.groups;
  }

  w.phase("edit: inner nodes counted");
  // Room in the arena: the units, then each level above (deepest first).
  const u64 total = unit_bytes + upper_bytes;
  u64 base = 0;
  if (!a.arena()->append(total, base)) return false;
  std::byte* arena = a.arena()->data();
  if (unit_bytes > 0)
    cuda_check(cudaMemcpyAsync(arena + base, built.pool() + sizeof(PoolHeader), unit_bytes, cudaMemcpyDeviceToDevice,
                               stream),
               "cudaMemcpyAsync(rebuilt units)");
  if (upper_bytes > 0)
    cuda_check(cudaMemsetAsync(arena + base + unit_bytes, 0, upper_bytes, stream), "cudaMemsetAsync(inner nodes)");
  Array<u32> unit_ref(w, nt);
  const unsigned warps_grid = static_cast<unsigned>(std::min<u64>((nt + 7) / 8, 1u << 20));
  place_units_kernel<<<warps_grid, 256, 0, stream>>>(ppath.get() + u * nt, nt,
                                                     static_cast<u32>(base - sizeof(PoolHeader)), u + 1 == D, b,
                                                     arena, unit_ref.get());
  w.check_launch("GPU edit: placing the units");
  const u32* item_ref = unit_ref.get();
  iR = UR.get();
  iC = UC.get();
  irep = unit_rep.get();
  live = ppath.get() + u * nt;
  u64 at = base + unit_bytes;
  for (u32 k = 0; k < u; ++k) {
    Level& L = levels[k];
    const u32 lvl = u - 1 - k;
    L.ref = Array<u32>(w, L.groups);
    const InnerLevel il{a.pool(), apath.get() + lvl * nt, irep, L.first.get(), iR, iC, live, L.groups, b};
    const unsigned grid = static_cast<unsigned>(std::min<u64>(L.groups, 1u << 16));
    inner_write_kernel<inner_block><<<grid, inner_block, 0, stream>>>(il, item_ref, L.count.get(), L.offset.get(),
                                                                      arena, at, L.ref.get());
    w.check_launch("GPU edit: inner nodes");
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
  res.root = read_back(w, item_ref, "GPU edit: root");
  const u64 shared_children = read_back(w, shared.get(), "GPU edit: shared children");
  u64 units_live = 0;
  {
    Array<u32> flag(w, nt + 1), sum(w, nt + 1);
    nonnull_kernel<<<blocks_for(nt + 1), 256, 0, stream>>>(unit_ref.get(), nt, flag.get());
    convert_detail::exclusive_sum(w, flag.get(), sum.get(), nt + 1);
    units_live = read_back(w, sum.get() + nt, "GPU edit: units rebuilt");
  }
  w.sync("cudaStreamSynchronize(GPU edit)");
  res.view = base + total;
  if (mode == EditMode::remove) {
    st.removed = hits;
    res.nnz = a.nnz() - hits;
  } else {
    st.updated = hits;
    st.inserted = m - hits;
    res.nnz = a.nnz() + (m - hits);
  }
  st.nodes_rewritten = units_live + inner_nodes;
  st.nodes_shared = shared_children;
  st.bytes_written = total;
  return true;
}

template <class V, class I>
bool try_edit(const DeviceMatrix<V>& fam, const DeviceCooView<V, I>& up, EditMode mode, cudaStream_t stream,
              EditStats& st, DeviceMatrix<V>& out) {
  Result res;
  const Shape& s = fam.shape();
  const bool narrow = s.rows <= static_cast<index_t>(std::numeric_limits<std::int32_t>::max()) &&
                      s.cols <= static_cast<index_t>(std::numeric_limits<std::int32_t>::max());
  const bool ok = narrow ? edit_into<V, I, std::int32_t>(fam, up, mode, stream, st, res)
                         : edit_into<V, I, std::int64_t>(fam, up, mode, stream, st, res);
  if (!ok) return false;
  out = DeviceMatrix<V>::version(fam.arena(), res.view, s, res.nnz, res.root, fam.transposed(), fam.scale(),
                                 fam.wide_nodes());
  return true;
}

// The matrix an edit appends to: A's family, or a new one (set and add on a
// scaled matrix: materialized first, as on the host).
template <class V>
DeviceMatrix<V> family_of(const DeviceMatrix<V>& a, EditMode mode, cudaStream_t stream) {
  if (mode != EditMode::remove && a.scale() != V(1)) return start_family(materialize(a, {}, stream), 0, stream);
  if (a.arena())
    return DeviceMatrix<V>::version(a.arena(), a.pool_bytes(), a.shape(), a.nnz(), a.root(), a.transposed(),
                                    a.scale(), a.wide_nodes());
  return start_family(a, 0, stream);
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
  using namespace edit_gpu_detail;
  check_updates(a, updates);
  DeviceMatrix<V> fam = family_of(a, mode, stream);
  if (updates.nnz == 0) {
    if (stats) *stats = EditStats{};
    return fam;
  }
  EditStats st;
  DeviceMatrix<V> out;
  if (!try_edit(fam, updates, mode, stream, st, out))
    throw LimitError("GPU edit: the family's device arena (" + std::to_string(fam.arena()->capacity()) +
                     " bytes, " + std::to_string(fam.arena()->size()) +
                     " used) has no room for this edit; start a new family from a compact copy "
                     "(ops::versioned(ops::copy(a), capacity))");
  if (stats) *stats = st;
  return out;
}

template <class V, class I>
void edit_in_place(DeviceMatrix<V>& a, const DeviceCooView<V, I>& updates, EditMode mode, cudaStream_t stream,
                   EditStats* stats) {
  using namespace edit_gpu_detail;
  check_updates(a, updates);
  DeviceMatrix<V> fam = family_of(a, mode, stream);
  EditStats st;
  DeviceMatrix<V> out;
  if (updates.nnz == 0) {
    out = std::move(fam);
  } else if (!try_edit(fam, updates, mode, stream, st, out)) {
    // No room: a's own nodes into a new family with as much room again (and
    // at least the default's), where the edit then goes.
    DeviceMatrix<V> own = copy(fam, CopyOptions{true}, stream);
    const std::uint64_t room = std::max(default_capacity(own.pool_bytes()),
                                        round_up(2 * own.pool_bytes() + fam.arena()->capacity() / 2, node_alignment));
    fam = start_family(own, std::min<std::uint64_t>(room, max_pool_bytes), stream);
    if (!try_edit(fam, updates, mode, stream, st, out))
      throw LimitError("GPU edit: the edited matrix does not fit a device arena of the 4 GiB the references address");
  }
  if (stats) *stats = st;
  a = std::move(out);
}

#define HISPARSE_EDIT_GPU(V, I)                                                                                     \
  template DeviceMatrix<V> edit_version(const DeviceMatrix<V>&, const DeviceCooView<V, I>&, EditMode, cudaStream_t, \
                                        EditStats*);                                                                \
  template void edit_in_place(DeviceMatrix<V>&, const DeviceCooView<V, I>&, EditMode, cudaStream_t, EditStats*);
HISPARSE_EDIT_GPU(float, std::int32_t)
HISPARSE_EDIT_GPU(float, std::int64_t)
HISPARSE_EDIT_GPU(double, std::int32_t)
HISPARSE_EDIT_GPU(double, std::int64_t)
#undef HISPARSE_EDIT_GPU
template DeviceMatrix<float> versioned(const DeviceMatrix<float>&, std::uint64_t, cudaStream_t);
template DeviceMatrix<double> versioned(const DeviceMatrix<double>&, std::uint64_t, cudaStream_t);

}  // namespace hisparse::ops
