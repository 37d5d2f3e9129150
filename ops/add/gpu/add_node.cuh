#pragma once
// AddNode: a pair of ordinary nodes (see add_procedures.cuh).
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "add_state.cuh"

namespace hisparse::ops::add_gpu {

// ---- AddNode ------------------------------------------------------------------

template <class V>
struct AddWide;

// A node in logical orientation: f(logical coordinate, value) for every
// entry, lanes in parallel, any order.
template <class E, class F>
__device__ inline void for_each_entry_logical(const std::byte* pool, NodeRef ref, std::uint32_t b, bool leaf,
                                              bool transposed, std::uint32_t lane, F&& f) {
  if (ref == null_ref) return;
  auto logical = [&](LocalCoord lc) { return transposed ? LocalCoord{lc.col, lc.row} : lc; };
  if (ref_type(ref) != NodeType::dense) {
    const CooView<E> v = coo_view<E>(pool, ref);
    for (std::uint32_t i = lane; i < v.count; i += 32) f(logical(v.coords[i]), v.values[i]);
    return;
  }
  const std::uint32_t d = 1u << b;
  const E* cells = dense_values<E>(pool, ref, b, leaf);
  const std::uint8_t* mask = leaf ? dense_mask(pool, ref) : nullptr;
  for (std::uint32_t cell = lane; cell < d * d; cell += 32) {
    bool present;
    if constexpr (std::is_same_v<E, NodeRef>) present = cells[cell] != null_ref;
    else present = mask_bit(mask, cell);
    if (present)
      f(logical(LocalCoord{static_cast<std::uint8_t>(cell >> b), static_cast<std::uint8_t>(cell & (d - 1))}), cells[cell]);
  }
}

// A pair of ordinary nodes. Both operands' entries are marked in occupancy
// bitmaps of the d x d cells (logical orientation, in shared memory), so
// that an entry's place in the output is its rank in the union bitmap: a
// prefix count per word plus a popcount. No operand needs sorting, the
// transposed ones included, and no entry searches the other operand.
// Log2Cap: the largest node size the bitmaps hold (2^Log2Cap).
template <class V, std::uint32_t Log2Cap>
struct AddNode {
  static_assert(Log2Cap >= 5 && Log2Cap <= 8, "node sizes run from 2 to 256; the bitmaps need at least 32 words");
  static constexpr std::uint32_t words = (1u << (2 * Log2Cap)) / 32;
  using payload_type = AddItem;
  static constexpr std::uint32_t threads_per_item = 32;
  // Occupancy of A, of B, and the union's prefix count per word (below
  // 2^16 even for d = 256: at most 32 bits in each earlier word).
  static constexpr std::uint32_t shared_bytes = 2 * words * sizeof(std::uint32_t) + words * sizeof(std::uint16_t);
  static constexpr const char* name = "add-node";

  template <class Context>
  __device__ static void run(const AddItem& it, std::uint32_t lane, std::uint32_t, const Context& ctx) {
    const AddState<V>& st = ctx.state();
    if (it.level + 1 == st.depth) process<V>(it, lane, ctx, st, true);
    else process<NodeRef>(it, lane, ctx, st, false);
  }

  // Leaf pairs of a scattered matrix are many and tiny (R-MAT: 32 M pairs of
  // one or two entries). Queued one per warp, each paid a dequeue, a warp's
  // worth of setup and one atomic add on the pool's single allocation counter
  // (which serialised whole runs). So the parent merges and writes leaf pairs
  // of at most 8 entries itself, one lane each, and allocates for all its
  // lanes that do so at once with one atomic.
  // A level depth-2 pair of a wide pool goes to AddWide unless both sides
  // are in the standard form and a tally is free: then AddNode merges it
  // node by node, and its nodes are tallied (SubtreeTally).
  __device__ static std::uint32_t new_tally(const AddState<V>& st, const AddItem& child) {
    const auto standard = [](NodeRef r) { return r == null_ref || ref_type(r) != NodeType::coow; };
    if (st.tallies == nullptr || !standard(child.a) || !standard(child.b)) return 0;
    const unsigned k = atomicAdd(st.tally_count, 1u);
    if (k >= st.tally_capacity) return 0;
    st.tallies[k] = SubtreeTally{0, 0};
    __threadfence();  // zeroed before any of the sub-tree's nodes adds to it
    return k + 1;
  }
  __device__ static void tally(const AddState<V>& st, std::uint32_t t, std::uint64_t bytes, std::uint32_t entries) {
    if (t == 0) return;
    atomicAdd(&st.tallies[t - 1].bytes, static_cast<unsigned long long>(bytes));
    if (entries != 0) atomicAdd(&st.tallies[t - 1].m, static_cast<unsigned long long>(entries));
  }

  template <class Context>
  __device__ static void enqueue_child(const Context& ctx, const AddState<V>& st, AddItem child) {
    if (st.wide && child.level + 2 == st.depth) {
      child.tally = new_tally(st, child);
      if (child.tally == 0) {
        ctx.template enqueue<AddWide<V>>(child);
        return;
      }
    }
    // Not under the root: there, one warp would write every small leaf of
    // a small matrix while the rest of the GPU waits (crack: 0.6 -> 1.8 ms).
    if (child.level + 1 == st.depth && child.level >= 2) {
      SmallLeaf leaf;
      const bool small = leaf.gather(st, child.a, child.b);
      const NodeChoice choice =
          small ? choose_node(leaf.n, st.log2d, true, sizeof(V)) : NodeChoice{NodeType::dense, 0};
      const unsigned long long at = allocate_among_active(st.alloc, choice.bytes);
      (void)allocate_among_active(st.nnz, small ? leaf.n : 0u);
      if (small) {
        if (at + choice.bytes > st.capacity) atomicOr(st.flags, flag_pool_too_small);
        else leaf.write(st, at, choice, child.slot);
        tally(st, child.tally, choice.bytes, leaf.n);
        return;
      }
    }
    ctx.template enqueue<AddNode>(child);
  }

  // A leaf pair of at most 8 entries, merged by one lane: the union sorted
  // row-major with its combined values.
  struct SmallLeaf {
    static constexpr std::uint32_t max_entries = 8;
    std::uint32_t n = 0;
    LocalCoord coords[max_entries];
    V values[max_entries];
    bool a_only[max_entries];  // an A entry without a B partner (yet)

    __device__ bool gather(const AddState<V>& st, NodeRef ra, NodeRef rb) {
      const std::uint32_t na = sparse_count(st.a.pool, ra), nb = sparse_count(st.b.pool, rb);
      if (na + nb > max_entries) return false;
      insert_all(st.a, ra, na, true);
      insert_all(st.b, rb, nb, false);
      return true;
    }
    // Inserts a side's entries keeping (coordinate order, no duplicates); A
    // first, so a B entry meeting an A entry completes its sum.
    __device__ void insert_all(const Operand<V>& op, NodeRef ref, std::uint32_t count, bool is_a) {
      if (count == 0) return;
      const CooView<V> v = coo_view<V>(op.pool, ref);
      for (std::uint32_t i = 0; i < count; ++i) {
        const LocalCoord lc = op.transposed ? LocalCoord{v.coords[i].col, v.coords[i].row} : v.coords[i];
        const V x = mul_rn(op.k, v.values[i]);
        std::uint32_t p = 0;
        while (p < n && coord_less(coords[p], lc)) ++p;
        if (!is_a && p < n && coords[p].row == lc.row && coords[p].col == lc.col) {
          values[p] = add_rn(values[p], x);
          a_only[p] = false;
          continue;
        }
        for (std::uint32_t q = n; q > p; --q) {
          coords[q] = coords[q - 1];
          values[q] = values[q - 1];
          a_only[q] = a_only[q - 1];
        }
        coords[p] = lc;
        values[p] = is_a ? x : add_rn(V(0), x);
        a_only[p] = is_a;
        ++n;
      }
    }
    // A entries without a B partner get their "+ 0" here (as the host adds
    // them: it turns a product of -0 into +0).
    __device__ void write(const AddState<V>& st, unsigned long long offset, NodeChoice choice, NodeRef* slot) {
      std::byte* dst = st.dst + offset;
      auto* q = reinterpret_cast<uint4*>(dst);
      for (std::uint64_t i = 0; i < choice.bytes / 16; ++i) q[i] = make_uint4(0, 0, 0, 0);
      const std::uint32_t b = st.log2d;
      if (choice.type == NodeType::dense) {
        V* cells = reinterpret_cast<V*>(dst + dense_mask_bytes(b));
        for (std::uint32_t i = 0; i < n; ++i) {
          const std::uint32_t cell = (std::uint32_t{coords[i].row} << b) | coords[i].col;
          cells[cell] = a_only[i] ? add_rn(values[i], V(0)) : values[i];
          reinterpret_cast<std::uint8_t*>(dst)[cell >> 3] |= static_cast<std::uint8_t>(1u << (cell & 7u));
        }
      } else {
        const CooLayout l = coo_layout(choice.type, n, sizeof(V));
        *reinterpret_cast<std::uint32_t*>(dst) = n;
        for (std::uint32_t i = 0; i < n; ++i) {
          reinterpret_cast<LocalCoord*>(dst + l.coord_offset)[i] = coords[i];
          reinterpret_cast<V*>(dst + l.value_offset)[i] = a_only[i] ? add_rn(values[i], V(0)) : values[i];
        }
      }
      *slot = make_ref(offset, choice.type);
    }
  };

  // Entries of a sparse node, 0 for none; dense nodes count as many.
  __device__ static std::uint32_t sparse_count(const std::byte* pool, NodeRef ref) {
    if (ref == null_ref) return 0;
    if (ref_type(ref) == NodeType::dense) return 0xFFFFu;
    return *reinterpret_cast<const std::uint32_t*>(pool + ref_offset(ref));
  }

  template <class E, class Context>
  __device__ static void process(const AddItem& it, std::uint32_t lane, const Context& ctx, const AddState<V>& st,
                                 bool leaf) {
    // Most pairs of a scattered matrix hold a few entries: one per lane,
    // merged in registers, costs less than clearing and scanning bitmaps.
    if (sparse_count(st.a.pool, it.a) + sparse_count(st.b.pool, it.b) <= 32) {
      process_small<E>(it, lane, ctx, st, leaf);
      return;
    }
    const std::uint32_t b = st.log2d, d = 1u << b;
    const std::uint32_t w_used = (d * d + 31) / 32;
    auto* in_a = static_cast<std::uint32_t*>(ctx.shared());
    std::uint32_t* in_b = in_a + words;
    auto* prefix = reinterpret_cast<std::uint16_t*>(in_b + words);
    for (std::uint32_t w = lane; w < w_used; w += 32) in_a[w] = in_b[w] = 0;
    __syncwarp();
    auto cell_of = [&](LocalCoord lc) { return (std::uint32_t{lc.row} << b) | lc.col; };
    auto mark = [&](std::uint32_t* bits) {
      return [=](LocalCoord lc, E) {
        const std::uint32_t c = (std::uint32_t{lc.row} << b) | lc.col;
        atomicOr(bits + (c >> 5), 1u << (c & 31u));
      };
    };
    for_each_entry_logical<E>(st.a.pool, it.a, b, leaf, st.a.transposed, lane, mark(in_a));
    for_each_entry_logical<E>(st.b.pool, it.b, b, leaf, st.b.transposed, lane, mark(in_b));
    __syncwarp();
    // Union prefix counts: each lane sums a run of consecutive words.
    const std::uint32_t per_lane = (w_used + 31) / 32, w0 = lane * per_lane;
    std::uint32_t mine = 0;
    for (std::uint32_t w = w0; w < w0 + per_lane && w < w_used; ++w) mine += __popc(in_a[w] | in_b[w]);
    const std::uint32_t incl = warp_inclusive_sum(mine, lane);
    const std::uint32_t n = __shfl_sync(full_warp, incl, 31);
    std::uint32_t run = incl - mine;
    for (std::uint32_t w = w0; w < w0 + per_lane && w < w_used; ++w) {
      prefix[w] = static_cast<std::uint16_t>(run);
      run += __popc(in_a[w] | in_b[w]);
    }
    __syncwarp();

    const NodeChoice choice = choose_node(n, b, leaf, sizeof(E));
    const bool dense_out = choice.type == NodeType::dense;
    const unsigned long long offset = allocate(st.alloc, choice.bytes, lane);
    if (offset + choice.bytes > st.capacity) {
      if (lane == 0) atomicOr(st.flags, flag_pool_too_small);
      return;  // the host runs again with a larger pool
    }
    std::byte* dst = st.dst + offset;
    zero_node(dst, choice.bytes, lane);
    if (leaf && lane == 0) atomicAdd(st.nnz, static_cast<unsigned long long>(n));
    if (lane == 0) tally(st, it.tally, choice.bytes, leaf ? n : 0u);
    E* out_values;
    LocalCoord* out_coords = nullptr;
    if (dense_out) {
      out_values = reinterpret_cast<E*>(dst + (leaf ? dense_mask_bytes(b) : 0u));
      if (leaf) {
        auto* mask = reinterpret_cast<std::uint32_t*>(dst);
        for (std::uint32_t w = lane; w < w_used; w += 32) mask[w] = in_a[w] | in_b[w];
      }
    } else {
      const CooLayout l = coo_layout(choice.type, n, sizeof(E));
      out_coords = reinterpret_cast<LocalCoord*>(dst + l.coord_offset);
      out_values = reinterpret_cast<E*>(dst + l.value_offset);
      if (lane == 0) *reinterpret_cast<std::uint32_t*>(dst) = n;
    }
    auto bit = [](const std::uint32_t* bits, std::uint32_t c) { return (bits[c >> 5] >> (c & 31u)) & 1u; };
    auto place = [&](std::uint32_t c) -> std::uint32_t {
      if (dense_out) return c;
      const std::uint32_t w = c >> 5;
      return prefix[w] + __popc((in_a[w] | in_b[w]) & ((1u << (c & 31u)) - 1u));
    };
    auto child = [&](NodeRef ra, NodeRef rb, std::uint32_t p) {
      enqueue_child(ctx, st, AddItem{ra, rb, it.level + 1, it.tally, reinterpret_cast<NodeRef*>(out_values + p)});
    };
    // A's entries. Where B has the cell too, the B entry completes it next:
    // a leaf value is summed there (the same two roundings as the host), an
    // inner node parks A's child reference in the output slot for it.
    for_each_entry_logical<E>(st.a.pool, it.a, b, leaf, st.a.transposed, lane, [&](LocalCoord lc, E va) {
      const std::uint32_t c = cell_of(lc), p = place(c);
      const bool both = bit(in_b, c);
      if (!dense_out) out_coords[p] = lc;
      if constexpr (std::is_same_v<E, NodeRef>) {
        if (both) out_values[p] = va;
        else child(va, null_ref, p);
      } else {
        const V x = mul_rn(st.a.k, va);
        out_values[p] = both ? x : add_rn(x, V(0));
      }
    });
    __syncwarp();
    for_each_entry_logical<E>(st.b.pool, it.b, b, leaf, st.b.transposed, lane, [&](LocalCoord lc, E vb) {
      const std::uint32_t c = cell_of(lc), p = place(c);
      const bool both = bit(in_a, c);
      if (!dense_out && !both) out_coords[p] = lc;
      if constexpr (std::is_same_v<E, NodeRef>) {
        child(both ? out_values[p] : null_ref, vb, p);
      } else {
        out_values[p] = add_rn(both ? out_values[p] : V(0), mul_rn(st.b.k, vb));
      }
    });
    if (lane == 0) *it.slot = make_ref(offset, choice.type);
  }

  // Both nodes sparse with at most 32 entries together: lane i < na holds
  // A's entry i, the next nb lanes B's. Equal cells find each other with
  // __match_any_sync; an entry's place is the number of distinct cells below
  // its own.
  template <class E, class Context>
  __device__ static void process_small(const AddItem& it, std::uint32_t lane, const Context& ctx,
                                       const AddState<V>& st, bool leaf) {
    const std::uint32_t b = st.log2d;
    const std::uint32_t na = sparse_count(st.a.pool, it.a), nb = sparse_count(st.b.pool, it.b);
    const bool is_a = lane < na, is_b = !is_a && lane < na + nb;
    LocalCoord lc{};
    E v{};
    if (is_a || is_b) {
      const Operand<V>& op = is_a ? st.a : st.b;
      const CooView<E> view = coo_view<E>(op.pool, is_a ? it.a : it.b);
      const std::uint32_t i = is_a ? lane : lane - na;
      lc = op.transposed ? LocalCoord{view.coords[i].col, view.coords[i].row} : view.coords[i];
      v = view.values[i];
    }
    const std::uint32_t cell = (std::uint32_t{lc.row} << b) | lc.col;
    const std::uint32_t key = is_a || is_b ? cell : 0x10000u + lane;  // idle lanes match nobody
    const unsigned peers = __match_any_sync(full_warp, key);
    const unsigned a_lanes = (na >= 32 ? full_warp : (1u << na) - 1u);
    const bool both = (is_a && (peers & ~a_lanes) != 0) || (is_b && (peers & a_lanes) != 0);
    // A B entry that A also has is written by that A entry.
    const bool writes = is_a || (is_b && !both);
    const unsigned writers = __ballot_sync(full_warp, writes);
    const std::uint32_t n = __popc(writers);
    std::uint32_t rank = 0;
    for (std::uint32_t j = 0; j < 32; ++j) {
      const std::uint32_t kj = __shfl_sync(full_warp, key, j);
      rank += ((writers >> j) & 1u) && kj < key;
    }
    // The partner's value (B's, for an A entry that has one).
    const unsigned partner_lane = both && is_a ? 31u - __clz(peers & ~a_lanes) : lane;
    const E other = __shfl_sync(full_warp, v, partner_lane);

    const NodeChoice choice = choose_node(n, b, leaf, sizeof(E));
    const bool dense_out = choice.type == NodeType::dense;
    const unsigned long long offset = allocate(st.alloc, choice.bytes, lane);
    if (offset + choice.bytes > st.capacity) {
      if (lane == 0) atomicOr(st.flags, flag_pool_too_small);
      return;
    }
    std::byte* dst = st.dst + offset;
    zero_node(dst, choice.bytes, lane);
    if (leaf && lane == 0) atomicAdd(st.nnz, static_cast<unsigned long long>(n));
    if (lane == 0) tally(st, it.tally, choice.bytes, leaf ? n : 0u);
    E* out_values;
    if (dense_out) {
      out_values = reinterpret_cast<E*>(dst + (leaf ? dense_mask_bytes(b) : 0u));
    } else {
      const CooLayout l = coo_layout(choice.type, n, sizeof(E));
      out_values = reinterpret_cast<E*>(dst + l.value_offset);
      if (writes) reinterpret_cast<LocalCoord*>(dst + l.coord_offset)[rank] = lc;
      if (lane == 0) *reinterpret_cast<std::uint32_t*>(dst) = n;
    }
    if (writes) {
      const std::uint32_t p = dense_out ? cell : rank;
      if constexpr (std::is_same_v<E, NodeRef>) {
        enqueue_child(ctx, st,
                      AddItem{is_a ? v : null_ref, is_a ? (both ? other : null_ref) : v, it.level + 1, it.tally,
                              reinterpret_cast<NodeRef*>(out_values + p)});
      } else {
        out_values[p] = is_a ? add_rn(mul_rn(st.a.k, v), both ? mul_rn(st.b.k, other) : V(0))
                             : add_rn(V(0), mul_rn(st.b.k, v));
        if (dense_out && leaf) set_mask_bit(dst, cell);
      }
    }
    if (lane == 0) *it.slot = make_ref(offset, choice.type);
  }
};

}  // namespace hisparse::ops::add_gpu
