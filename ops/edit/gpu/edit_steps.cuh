#pragma once
// The GPU batch edit's host-side steps (edit_gpu.cu runs them in order): the
// tree key of a shape, the entries of whole units extracted and built again,
// selections, and each level of inner nodes counted, then written.
#include <algorithm>
#include <bit>
#include <string>

#include "../../convert/gpu/work_memory.cuh"
#include "edit_inner.cuh"
#include "hisparse/ops/convert_gpu.hpp"

namespace hisparse::ops::edit_gpu_detail {

using convert_detail::Array;
using convert_detail::blocks_for;
using convert_detail::read_back;
using convert_detail::WorkMemory;

inline constexpr unsigned inner_block = 256;

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
  std::uint64_t needed = 0;  // the bytes the edit appends (set also when they did not fit)
};

// The kernels with a dense image or a histogram take the builder's path where
// theirs does not fit convert_detail::shared_memory_optin().
using convert_detail::shared_memory_optin;

// The runs of keys >> shift among the n sorted keys: run[i] = the run of key i
// plus 1 (the inclusive scan of the run heads, n + 1 entries, run[n] = the
// number of runs); returns the number of runs.
inline u64 runs_of(WorkMemory& w, const u64* keys, u64 n, u32 shift, Array<u32>& run, const char* what) {
  run = Array<u32>(w, n + 1);
  Array<u32> head(w, n + 1);
  run_heads_kernel<<<blocks_for(n + 1), 256, 0, w.stream()>>>(keys, n, shift, head.get());
  convert_detail::inclusive_sum(w, head.get(), run.get(), n + 1);
  return read_back(w, run.get() + n, what);
}

// Everything of one level of inner nodes, kept from the count to the write.
struct Level {
  Array<u64> first, R, C;
  Array<u32> rep, count, ref;
  Array<u64> offset;
  Array<u32> run;        // per item: its group + 1
  Array<u64> hl, o_off;  // the flat groups' item scans and old-child offsets (edit_inner.cuh)
  u64 groups = 0, bytes = 0, items = 0;
};

template <class V>
struct Entries {
  Array<u64> row, col;
  Array<V> val;
  u64 n = 0;
};

// The entries of the taken, present nodes among `n` (references at block
// coordinates R, C), in tree order: units are expanded to their leaves first
// (a COOW node passes as it is), leaves are read as they are.
template <class V>
Entries<V> extract_entries(WorkMemory& w, const std::byte* pool, u32 b, bool units, const u32* refs, const u64* R,
                           const u64* C, u64 n, const u32* take, u32 want) {
  const cudaStream_t st = w.stream();
  Entries<V> out;
  Array<u32> flag(w, n + 1), pos(w, n + 1);
  take_kernel<<<blocks_for(n + 1), 256, 0, st>>>(refs, take, want, n, flag.get());
  convert_detail::exclusive_sum(w, flag.get(), pos.get(), n + 1);
  u64 size = read_back(w, pos.get() + n, "GPU edit: nodes to read");
  if (size == 0) return out;
  Array<u32> ref(w, size);
  Array<u64> fR(w, size), fC(w, size);
  frontier_select_kernel<<<blocks_for(n), 256, 0, st>>>(refs, R, C, flag.get(), pos.get(), n, ref.get(), fR.get(),
                                                        fC.get());
  w.check_launch("GPU edit: frontier");
  flag.release();
  pos.release();
  if (units) convert_detail::expand_frontier(w, pool, b, ref, fR, fC, size, "GPU edit: expand");
  const convert_detail::Frontier f{ref.get(), fR.get(), fC.get(), size};
  Array<u64> count(w, size + 1), first(w, size + 1);
  convert_detail::entry_count_kernel<<<blocks_for(size + 1), 256, 0, st>>>(f, pool, b, count.get());
  convert_detail::exclusive_sum(w, count.get(), first.get(), size + 1);
  out.n = read_back(w, first.get() + size, "GPU edit: old entries");
  out.row = Array<u64>(w, out.n);
  out.col = Array<u64>(w, out.n);
  out.val = Array<V>(w, out.n);
  convert_detail::entries_kernel<V, u64, V><<<warp_grid(size), 256, 0, st>>>(
      f, pool, b, first.get(), false, V(1), true, out.row.get(), out.col.get(), out.val.get());
  w.check_launch("GPU edit: old entries");
  return out;
}

// The old entries the updates leave (set and remove drop those at an update's
// position), then the selected updates (sel: indices into the batch, in the
// order the builder must see them), built again.
template <class V, class I, class J>
DeviceMatrix<V> rebuild(WorkMemory& w, Entries<V>& old, const u64* ukey, u64 m, TreeKey tk, EditMode mode,
                        const DeviceCooView<V, I>& up, bool tr, const u32* sel, u64 n_sel, const Shape& s, bool wide) {
  const cudaStream_t st = w.stream();
  Array<u32> keep(w, old.n + 1), kpos(w, old.n + 1);
  match_old_kernel<<<blocks_for(old.n + 1), 256, 0, st>>>(old.row.get(), old.col.get(), old.n, tk, ukey, m,
                                                           mode != EditMode::add, keep.get());
  w.check_launch("GPU edit: matching");
  convert_detail::exclusive_sum(w, keep.get(), kpos.get(), old.n + 1);
  const u64 n_keep = read_back(w, kpos.get() + old.n, "GPU edit: kept entries");
  const u64 n_in = n_keep + n_sel;
  if (n_in == 0) return {};
  Array<J> brow(w, n_in), bcol(w, n_in);
  Array<V> bval(w, n_in);
  gather_kept_kernel<V, J><<<blocks_for(old.n), 256, 0, st>>>(old.row.get(), old.col.get(), old.val.get(), keep.get(),
                                                              kpos.get(), old.n, brow.get(), bcol.get(), bval.get());
  if (n_sel > 0)
    put_updates_kernel<V, I, J><<<blocks_for(n_sel), 256, 0, st>>>(up.row, up.col, up.val, sel, n_sel, tr,
                                                                   brow.get() + n_keep, bcol.get() + n_keep,
                                                                   bval.get() + n_keep);
  w.check_launch("GPU edit: builder input");
  old = Entries<V>{};
  keep.release();
  kpos.release();
  const DeviceCooView<V, J> in{s.rows, s.cols, n_in, brow.get(), bcol.get(), bval.get()};
  const BuildOptions options{s.node_size(), wide};
  return w.context() ? build_device_matrix(*w.context(), in, options) : build_device_matrix(in, options, st);
}

// How many of the n flags (flag[n] = 0) are set.
inline u64 count_flagged(WorkMemory& w, const u32* flag, u64 n) {
  Array<u32> pos(w, n + 1);
  convert_detail::exclusive_sum(w, flag, pos.get(), n + 1);
  return read_back(w, pos.get() + n, "GPU edit: count");
}

// The indices i < n with flag[i] (flag[n] = 0), in order, or value[i] for
// them where value is given.
inline Array<u32> flagged(WorkMemory& w, const u32* flag, u64 n, u64& count, const u32* value = nullptr) {
  Array<u32> pos(w, n + 1);
  convert_detail::exclusive_sum(w, flag, pos.get(), n + 1);
  count = read_back(w, pos.get() + n, "GPU edit: selection");
  Array<u32> out(w, count);
  select_kernel<<<blocks_for(n), 256, 0, w.stream()>>>(flag, pos.get(), n, value, out.get());
  w.check_launch("GPU edit: selection");
  return out;
}

// flag[i] = 1 for the items whose unit (unit_of[i], or i itself) is
// whole == want (n + 1 flags, the last 0).
inline Array<u32> mode_flags(WorkMemory& w, const u32* unit_of, const u32* whole, u32 want, u64 n) {
  Array<u32> flag(w, n + 1);
  mode_flags_kernel<<<blocks_for(n + 1), 256, 0, w.stream()>>>(unit_of, n, whole, want, flag.get());
  return flag;
}

// The items whose unit is whole == want: their indices, or value[i].
inline Array<u32> select_by_mode(WorkMemory& w, const u32* unit_of, const u32* whole, u32 want, u64 n,
                                 const u32* value, u64& count) {
  return flagged(w, mode_flags(w, unit_of, whole, want, n).get(), n, count, value);
}

// Counts and sizes of one level of inner nodes over `items` (sorted children
// one level down: block coordinates, whether each exists, a unit under it).
inline void count_level(WorkMemory& w, Level& L, const std::byte* pool, const u32* old_node, const u64* iR,
                        const u64* iC, const u32* irep, const u32* live, u64 items, u32 b, unsigned long long* shared) {
  const cudaStream_t st = w.stream();
  L.items = items;
  Array<u32> gh(w, items + 1);
  L.run = Array<u32>(w, items + 1);
  group_heads_kernel<<<blocks_for(items + 1), 256, 0, st>>>(iR, iC, items, b, gh.get());
  convert_detail::inclusive_sum(w, gh.get(), L.run.get(), items + 1);
  L.groups = read_back(w, L.run.get() + items, "GPU edit: inner nodes");
  L.first = Array<u64>(w, L.groups + 1);
  L.R = Array<u64>(w, L.groups);
  L.C = Array<u64>(w, L.groups);
  L.rep = Array<u32>(w, L.groups);
  groups_kernel<<<blocks_for(items + 1), 256, 0, st>>>(iR, iC, irep, gh.get(), L.run.get(), items, L.groups, b,
                                                       L.first.get(), L.R.get(), L.C.get(), L.rep.get());
  w.check_launch("GPU edit: groups");
  gh.release();
  L.count = Array<u32>(w, L.groups);
  Array<u64> bytes(w, L.groups + 1);
  cuda_check(cudaMemsetAsync(bytes.get() + L.groups, 0, sizeof(u64), st), "cudaMemsetAsync");
  const InnerLevel il{pool, old_node, irep, L.first.get(), iR, iC, live, L.groups, b};
  // Groups whose old node is sparse or absent: flat over items and old children.
  {
    Array<u64> flag(w, items + 1);
    item_flags_kernel<<<blocks_for(items + 1), 256, 0, st>>>(il, L.run.get(), items, flag.get());
    L.hl = Array<u64>(w, items + 1);
    convert_detail::exclusive_sum(w, flag.get(), L.hl.get(), items + 1);
  }
  Array<u64> n_old(w, L.groups + 1);
  flat_count_kernel<<<blocks_for(L.groups + 1), 256, 0, st>>>(FlatLevel{il, L.run.get(), L.hl.get()}, L.count.get(),
                                                              bytes.get(), n_old.get(), shared);
  L.o_off = Array<u64>(w, L.groups + 1);
  convert_detail::exclusive_sum(w, n_old.get(), L.o_off.get(), L.groups + 1);
  // Groups whose old node is dense: a thread block each, cell by cell.
  const unsigned grid = static_cast<unsigned>(std::min<u64>(L.groups, 1u << 16));
  inner_count_kernel<inner_block><<<grid, inner_block, 0, st>>>(il, L.count.get(), bytes.get(), shared);
  w.check_launch("GPU edit: inner counts");
  L.offset = Array<u64>(w, L.groups + 1);
  convert_detail::exclusive_sum(w, bytes.get(), L.offset.get(), L.groups + 1);
  L.bytes = read_back(w, L.offset.get() + L.groups, "GPU edit: inner bytes");
}

// The nodes of a level, written at arena + at (zeroed); their references
// into L.ref.
inline void write_level(WorkMemory& w, Level& L, const std::byte* pool, const u32* old_node, const u64* iR,
                        const u64* iC, const u32* irep, const u32* live, const u32* item_ref, u32 b, std::byte* arena,
                        u64 at) {
  const cudaStream_t st = w.stream();
  L.ref = Array<u32>(w, L.groups);
  const InnerLevel il{pool, old_node, irep, L.first.get(), iR, iC, live, L.groups, b};
  const FlatLevel fl{il, L.run.get(), L.hl.get()};
  flat_heads_kernel<<<blocks_for(L.groups), 256, 0, st>>>(fl, L.count.get(), L.offset.get(), arena, at, L.ref.get());
  flat_items_kernel<<<blocks_for(L.items), 256, 0, st>>>(fl, item_ref, L.count.get(), L.offset.get(), arena, at,
                                                        L.items);
  // The old children's total stays on the device (o_off[groups]): a fixed
  // grid strides over them instead of a read-back.
  flat_old_kernel<<<4096, 256, 0, st>>>(fl, L.o_off.get(), L.count.get(), L.offset.get(), arena, at);
  const unsigned grid = static_cast<unsigned>(std::min<u64>(L.groups, 1u << 16));
  inner_write_kernel<inner_block><<<grid, inner_block, 0, st>>>(il, item_ref, L.count.get(), L.offset.get(), arena, at,
                                                                L.ref.get());
  w.check_launch("GPU edit: inner nodes");
}

// Where a built pool's nodes of level `level` and below end (the builder
// writes the deepest levels first): the lowest offset of a level-1 node on
// the given paths, or the pool's end.
inline u64 prefix_end(WorkMemory& w, const std::byte* pool, NodeRef root, u64 pool_bytes, u32 b, u32 level,
                      const u64* R, const u64* C, u64 n, Array<u32>& path) {
  Array<unsigned long long> upper(w, 1);
  const unsigned long long end = pool_bytes ? pool_bytes : sizeof(PoolHeader);
  cuda_check(cudaMemcpyAsync(upper.get(), &end, sizeof(end), cudaMemcpyHostToDevice, w.stream()), "cudaMemcpyAsync");
  path = Array<u32>(w, (level + 1) * n);
  descend_kernel<<<blocks_for(n), 256, 0, w.stream()>>>(pool, root, b, level, R, C, n, path.get(), upper.get());
  w.check_launch("GPU edit: descent of a rebuilt pool");
  return read_back(w, upper.get(), "GPU edit: rebuilt nodes");
}

}  // namespace hisparse::ops::edit_gpu_detail
