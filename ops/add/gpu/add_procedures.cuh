#pragma once
// The node procedures of GPU sparse add, C = ka·op(A) + kb·op(B) (seed 004
// section 6): a dual top-down traversal. A warp takes one pair of nodes at the
// same position in both operands (either may be absent), merges their entries
// in logical orientation, allocates the output node from a bump allocator,
// writes it, and enqueues the pairs of children with the address of the slot
// their new reference goes to (as the rebuilding copy does).
//
//  AddNode:  a pair of ordinary nodes, merged through occupancy bitmaps of
//            the node's cells: an entry's output place is its rank in the
//            union, so neither operand is sorted or searched (transposed
//            operands included) and the node type follows from the union's
//            count by the dense/sparse rule. Pairs of at most 32 entries are
//            merged in registers instead, and leaf pairs of at most 8 below
//            level 1 are merged and written by one lane of their parent
//            (SmallLeaf), never queued.
//  AddWide:  a pair of level depth-2 sub-trees in a pool with wide (COOW)
//            nodes. Both are gathered into scratch as (key, value) in the
//            standard tree order (block row, block column, row, column),
//            sorted by counting passes where the gather order is not that,
//            merged, and written either as one COOW node or as an inner node
//            with its leaves, whichever the COOW rule picks (docs/format.md).
//
// Results are bit-identical to add_reference: products and the sum are
// rounded separately (no fused multiply-add), as the host computes them.
//
// A node that does not fit in the output pool raises a flag and is dropped
// with its sub-tree; the host then runs again with a larger pool.
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "hisparse/formats/node_view.hpp"
#include "hisparse/ops/warp_counting_sort.cuh"

namespace hisparse::ops::add_gpu {

using gpu::counting_pass;

struct AddItem {
  NodeRef a, b;  // the operands' nodes at this position; null where absent (never both)
  std::uint32_t level;
  std::uint32_t unused;
  NodeRef* slot;  // where the new node's reference goes
};
static_assert(sizeof(AddItem) == 24);

// One operand: its pool and state.
template <class V>
struct Operand {
  const std::byte* pool;
  bool transposed;
  V k;  // alpha·scale(A) or beta·scale(B)
};

template <class V>
struct WideEntry {
  std::uint32_t key;  // standard tree order: (row_hi, col_hi, row_lo, col_lo), b bits each
  V value;
};

inline constexpr unsigned flag_pool_too_small = 1u;
inline constexpr unsigned flag_scratch_too_small = 2u;

template <class V>
struct AddState {
  Operand<V> a, b;
  std::byte* dst;
  unsigned long long* alloc;  // next free byte of dst
  std::uint64_t capacity;
  unsigned* flags;
  unsigned long long* nnz;
  WideEntry<V>* scratch;  // wide pools: 2 x (nnz(A) + nnz(B)) entries
  unsigned long long* scratch_alloc;
  std::uint64_t scratch_capacity;
  std::uint32_t log2d;
  std::uint32_t depth;
  bool wide;
};

// ---- warp helpers ------------------------------------------------------------

inline constexpr unsigned full_warp = 0xffffffffu;

__device__ inline unsigned lanes_below(std::uint32_t lane) { return (1u << lane) - 1u; }
__device__ inline unsigned lanes_up_to(std::uint32_t lane) { return full_warp >> (31u - lane); }

__device__ inline std::uint32_t warp_inclusive_sum(std::uint32_t v, std::uint32_t lane) {
  for (std::uint32_t o = 1; o < 32; o <<= 1) {
    const std::uint32_t n = __shfl_up_sync(full_warp, v, o);
    if (lane >= o) v += n;
  }
  return v;
}

__device__ inline unsigned long long warp_sum64(unsigned long long v) {
  for (std::uint32_t o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(full_warp, v, o);
  return v;
}

// Zeroes a node's bytes (a multiple of 16, 16-aligned): padding and absent
// dense cells must be zero. The fence orders these stores before the
// children that are enqueued next write their references into this node.
__device__ inline void zero_node(std::byte* dst, std::uint64_t bytes, std::uint32_t lane) {
  auto* q = reinterpret_cast<uint4*>(dst);
  for (std::uint64_t i = lane; i < bytes / 16; i += 32) q[i] = make_uint4(0, 0, 0, 0);
  __threadfence();
  __syncwarp();
}

__device__ inline void set_mask_bit(std::byte* mask, std::uint32_t cell) {
  atomicOr(reinterpret_cast<unsigned*>(mask) + (cell >> 5), 1u << (cell & 31u));
}

// Separate roundings, as on the host (nvcc would otherwise fuse a*b + c).
__device__ inline float mul_rn(float x, float y) { return __fmul_rn(x, y); }
__device__ inline double mul_rn(double x, double y) { return __dmul_rn(x, y); }
__device__ inline float add_rn(float x, float y) { return __fadd_rn(x, y); }
__device__ inline double add_rn(double x, double y) { return __dadd_rn(x, y); }

template <class V>
__device__ inline V combine(const Operand<V>& a, bool has_a, V va, const Operand<V>& b, bool has_b, V vb) {
  return add_rn(has_a ? mul_rn(a.k, va) : V(0), has_b ? mul_rn(b.k, vb) : V(0));
}

__device__ inline unsigned long long allocate(unsigned long long* counter, std::uint64_t n,
                                              std::uint32_t lane) {
  unsigned long long at = 0;
  if (lane == 0) at = atomicAdd(counter, static_cast<unsigned long long>(n));
  return __shfl_sync(full_warp, at, 0);
}

// Adds every active lane's n to the counter with one atomic; returns the
// counter's value before this lane's share. The lanes that call it together
// (as __activemask sees them) take consecutive shares in lane order.
__device__ inline unsigned long long allocate_among_active(unsigned long long* counter, unsigned long long n) {
  const unsigned active = __activemask();
  const std::uint32_t lane = threadIdx.x & 31u;
  unsigned long long below = 0, total = 0;
  for (unsigned m = active; m != 0; m &= m - 1) {
    const int j = __ffs(m) - 1;
    const unsigned long long v = __shfl_sync(active, n, j);
    total += v;
    if (static_cast<std::uint32_t>(j) < lane) below += v;
  }
  const int leader = __ffs(active) - 1;
  unsigned long long base = 0;
  if (static_cast<int>(lane) == leader && total != 0) base = atomicAdd(counter, total);
  return __shfl_sync(active, base, leader) + below;
}

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
  template <class Context>
  __device__ static void enqueue_child(const Context& ctx, const AddState<V>& st, AddItem child) {
    if (st.wide && child.level + 2 == st.depth) {
      ctx.template enqueue<AddWide<V>>(child);
      return;
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
      enqueue_child(ctx, st, AddItem{ra, rb, it.level + 1, 0, reinterpret_cast<NodeRef*>(out_values + p)});
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
                      AddItem{is_a ? v : null_ref, is_a ? (both ? other : null_ref) : v, it.level + 1, 0,
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

// ---- AddWide ------------------------------------------------------------------

__device__ inline std::uint32_t wide_key(std::uint32_t r16, std::uint32_t c16, std::uint32_t b) {
  const std::uint32_t m = (1u << b) - 1u;
  return ((r16 >> b) << (3 * b)) | ((c16 >> b) << (2 * b)) | ((r16 & m) << b) | (c16 & m);
}
__device__ inline std::uint32_t key_digit(std::uint32_t key, std::uint32_t k, std::uint32_t b) {
  return (key >> (k * b)) & ((1u << b) - 1u);
}

template <class V>
struct AddWide {
  using payload_type = AddItem;
  static constexpr std::uint32_t threads_per_item = 32;
  static constexpr std::uint32_t shared_bytes = 256 * sizeof(std::uint32_t);
  static constexpr const char* name = "add-wide";
  using Entry = WideEntry<V>;

  __device__ static std::uint32_t leaf_count(const std::byte* pool, NodeRef leaf, std::uint32_t b) {
    if (ref_type(leaf) != NodeType::dense) return *reinterpret_cast<const std::uint32_t*>(pool + ref_offset(leaf));
    const auto* words = reinterpret_cast<const unsigned*>(dense_mask(pool, leaf));
    std::uint32_t n = 0;
    for (std::uint32_t w = 0; w < dense_mask_bytes(b) / 4; ++w) n += __popc(words[w]);
    return n;
  }

  // The children of an inner node in warp steps: f(step base, child or
  // null, its block coordinate) with every lane in every step.
  template <class F>
  __device__ static void for_children(const std::byte* pool, NodeRef ref, std::uint32_t b, std::uint32_t lane, F&& f) {
    const std::uint32_t d = 1u << b;
    const bool dense = ref_type(ref) == NodeType::dense;
    const NodeRef* cells = dense ? dense_values<NodeRef>(pool, ref, b, false) : nullptr;
    const CooView<NodeRef> v = dense ? CooView<NodeRef>{} : coo_view<NodeRef>(pool, ref);
    const std::uint32_t span = dense ? d * d : v.count;
    for (std::uint32_t base = 0; base < span; base += 32) {
      const std::uint32_t s = base + lane;
      NodeRef child = null_ref;
      LocalCoord hi{};
      if (s < span) {
        if (dense) {
          child = cells[s];
          hi = LocalCoord{static_cast<std::uint8_t>(s >> b), static_cast<std::uint8_t>(s & (d - 1))};
        } else {
          child = v.values[s];
          hi = v.coords[s];
        }
      }
      f(child, hi);
    }
  }

  __device__ static std::uint32_t subtree_count(const std::byte* pool, NodeRef ref, std::uint32_t b, std::uint32_t lane) {
    if (ref == null_ref) return 0;
    if (ref_type(ref) == NodeType::coow) return *reinterpret_cast<const std::uint32_t*>(pool + ref_offset(ref));
    std::uint32_t n = 0;
    for_children(pool, ref, b, lane, [&](NodeRef child, LocalCoord) {
      if (child != null_ref) n += leaf_count(pool, child, b);
    });
    return __reduce_add_sync(full_warp, n);
  }

  // Writes the sub-tree's entries to out[0, count) as logical keys; returns
  // whether they are already in key order.
  __device__ static bool gather(const Operand<V>& op, NodeRef ref, std::uint32_t b, std::uint32_t lane, Entry* out) {
    if (ref == null_ref) return true;
    const std::byte* pool = op.pool;
    auto key = [&](std::uint32_t r16, std::uint32_t c16) { return op.transposed ? wide_key(c16, r16, b) : wide_key(r16, c16, b); };
    if (ref_type(ref) == NodeType::coow) {
      const CoowView<V> w = coow_view<V>(pool, ref);
      for (std::uint32_t i = lane; i < w.count; i += 32) out[i] = Entry{key(w.coords[i].row, w.coords[i].col), w.values[i]};
      return false;
    }
    const std::uint32_t d = 1u << b;
    std::uint32_t offset = 0;
    for_children(pool, ref, b, lane, [&](NodeRef child, LocalCoord hi) {
      const std::uint32_t c = child != null_ref ? leaf_count(pool, child, b) : 0u;
      const std::uint32_t incl = warp_inclusive_sum(c, lane);
      const std::uint32_t total = __shfl_sync(full_warp, incl, 31);
      const std::uint32_t start = offset + incl - c;
      const std::uint32_t hi_bits = (std::uint32_t{hi.row} << 8) | hi.col;
      for (std::uint32_t j = 0; j < 32; ++j) {
        const NodeRef leaf = __shfl_sync(full_warp, child, j);
        if (leaf == null_ref) continue;
        const std::uint32_t at = __shfl_sync(full_warp, start, j);
        const std::uint32_t hb = __shfl_sync(full_warp, hi_bits, j);
        const std::uint32_t r0 = (hb >> 8) << b, c0 = (hb & 0xFFu) << b;
        Entry* o = out + at;
        if (ref_type(leaf) == NodeType::dense) {
          const std::uint8_t* mask = dense_mask(pool, leaf);
          const V* vals = dense_values<V>(pool, leaf, b, true);
          std::uint32_t run = 0;
          for (std::uint32_t base = 0; base < d * d; base += 32) {
            const std::uint32_t cell = base + lane;
            const bool present = cell < d * d && mask_bit(mask, cell);
            const unsigned bits = __ballot_sync(full_warp, present);
            if (present) o[run + __popc(bits & lanes_below(lane))] = Entry{key(r0 | (cell >> b), c0 | (cell & (d - 1))), vals[cell]};
            run += __popc(bits);
          }
        } else {
          const CooView<V> v = coo_view<V>(pool, leaf);
          for (std::uint32_t i = lane; i < v.count; i += 32)
            o[i] = Entry{key(r0 | v.coords[i].row, c0 | v.coords[i].col), v.values[i]};
        }
      }
      offset += total;
    });
    // Row-major children of row-major leaves are the standard order.
    return !op.transposed;
  }

  // Sorts x[0, n) by key (LSD counting passes through y); the result is in x.
  __device__ static void sort(Entry* x, Entry* y, std::uint32_t n, std::uint32_t first_digit, std::uint32_t b,
                              std::uint32_t lane, std::uint32_t* shared) {
    const std::uint32_t d = 1u << b;
    for (std::uint32_t k = first_digit; k < 4; k += 2) {
      counting_pass(n, d, lane, shared, [&](std::uint32_t i) { return key_digit(x[i].key, k, b); },
                    [&](std::uint32_t i, std::uint32_t p) { y[p] = x[i]; });
      __syncwarp();
      counting_pass(n, d, lane, shared, [&](std::uint32_t i) { return key_digit(y[i].key, k + 1, b); },
                    [&](std::uint32_t i, std::uint32_t p) { x[p] = y[i]; });
      __syncwarp();
    }
  }

  __device__ static std::uint32_t lower_bound_key(const Entry* e, std::uint32_t n, std::uint32_t key) {
    std::uint32_t lo = 0, hi = n;
    while (lo < hi) {
      const std::uint32_t mid = (lo + hi) / 2;
      if (e[mid].key < key) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  // Merges sorted x_a[0, na) and x_b[0, nb) into u (union, values combined);
  // returns the union's size.
  __device__ static std::uint32_t merge(const AddState<V>& st, const Entry* xa, std::uint32_t na, const Entry* xb,
                                        std::uint32_t nb, Entry* u, std::uint32_t lane) {
    auto walk = [&](const Entry* self, std::uint32_t ns, const Entry* other, std::uint32_t no, bool is_a) {
      std::uint32_t carry = 0;
      for (std::uint32_t base = 0; base < ns; base += 32) {
        const std::uint32_t i = base + lane;
        const bool active = i < ns;
        std::uint32_t lb = 0;
        bool hit = false;
        if (active) {
          lb = lower_bound_key(other, no, self[i].key);
          hit = lb < no && other[lb].key == self[i].key;
        }
        const unsigned hits = __ballot_sync(full_warp, hit);
        const std::uint32_t common_before = carry + __popc(hits & lanes_below(lane));
        if (active) {
          if (is_a) {
            u[i + lb - common_before] =
                Entry{self[i].key, combine(st.a, true, self[i].value, st.b, hit, hit ? other[lb].value : V(0))};
          } else if (!hit) {
            u[i - common_before + lb] = Entry{self[i].key, combine(st.a, false, V(0), st.b, true, self[i].value)};
          }
        }
        carry += __popc(hits);
      }
      return carry;
    };
    const std::uint32_t common = walk(xa, na, xb, nb, true);
    walk(xb, nb, xa, na, false);
    __syncwarp();
    return na + nb - common;
  }

  // Blocks (leaves) of the union in warp steps: f(i, is_end, start of the
  // entry's block, index of the entry's block) for every lane of every step.
  template <class F>
  __device__ static void for_blocks(const Entry* u, std::uint32_t m, std::uint32_t b, std::uint32_t lane, F&& f) {
    std::uint32_t open_start = 0, blocks_before = 0;
    for (std::uint32_t base = 0; base < m; base += 32) {
      const std::uint32_t i = base + lane;
      const bool active = i < m;
      bool is_start = false, is_end = false;
      if (active) {
        const std::uint32_t blk = u[i].key >> (2 * b);
        is_start = i == 0 || (u[i - 1].key >> (2 * b)) != blk;
        is_end = i + 1 == m || (u[i + 1].key >> (2 * b)) != blk;
      }
      const unsigned starts = __ballot_sync(full_warp, is_start);
      const unsigned mine = starts & lanes_up_to(lane);
      const std::uint32_t start = mine ? base + 31u - __clz(mine) : open_start;
      const std::uint32_t block = blocks_before + __popc(mine) - 1u;  // valid when active
      f(i, active, is_end, start, block);
      if (starts) open_start = base + 31u - __clz(starts);
      blocks_before += __popc(starts);
    }
  }

  template <class Context>
  __device__ static void run(const AddItem& it, std::uint32_t lane, std::uint32_t, const Context& ctx) {
    const AddState<V>& st = ctx.state();
    const std::uint32_t b = st.log2d, d = 1u << b;
    auto* shared = static_cast<std::uint32_t*>(ctx.shared());
    const std::uint32_t na = subtree_count(st.a.pool, it.a, b, lane);
    const std::uint32_t nb = subtree_count(st.b.pool, it.b, b, lane);
    const std::uint64_t n = std::uint64_t{na} + nb;
    const unsigned long long s0 = allocate(st.scratch_alloc, 2 * n, lane);
    if (s0 + 2 * n > st.scratch_capacity) {
      if (lane == 0) atomicOr(st.flags, flag_scratch_too_small);
      return;
    }
    Entry* x = st.scratch + s0;
    Entry* y = x + n;
    // Gather both into x; a COOW node is in (row, col) order, which two passes
    // (column block, then row block) turn into the standard order.
    const bool a_sorted = gather(st.a, it.a, b, lane, x);
    const bool b_sorted = gather(st.b, it.b, b, lane, x + na);
    __syncwarp();
    auto first_digit = [&](const Operand<V>& op, NodeRef ref) {
      return ref_type(ref) == NodeType::coow && !op.transposed ? 2u : 0u;
    };
    if (!a_sorted) sort(x, y, na, first_digit(st.a, it.a), b, lane, shared);
    if (!b_sorted) sort(x + na, y + na, nb, first_digit(st.b, it.b), b, lane, shared);
    Entry* u = y;
    const std::uint32_t m = merge(st, x, na, x + na, nb, u, lane);

    // Bytes in the standard form: an inner node and one leaf per block.
    std::uint32_t blocks = 0;
    unsigned long long leaf_bytes = 0;
    for_blocks(u, m, b, lane, [&](std::uint32_t i, bool active, bool is_end, std::uint32_t start, std::uint32_t block) {
      if (active && is_end) {
        leaf_bytes += choose_node(i - start + 1, b, true, sizeof(V)).bytes;
        blocks = block + 1;
      }
    });
    blocks = __reduce_max_sync(full_warp, blocks);
    leaf_bytes = warp_sum64(leaf_bytes);
    const NodeChoice inner = choose_node(blocks, b, false, sizeof(NodeRef));
    const std::uint64_t standard = inner.bytes + leaf_bytes;
    const std::uint64_t coow = coow_layout(m, sizeof(V)).bytes;
    const bool as_coow = coow <= standard;
    const std::uint64_t bytes = as_coow ? coow : standard;

    const unsigned long long offset = allocate(st.alloc, bytes, lane);
    if (offset + bytes > st.capacity) {
      if (lane == 0) atomicOr(st.flags, flag_pool_too_small);
      return;
    }
    std::byte* dst = st.dst + offset;
    zero_node(dst, bytes, lane);
    if (lane == 0) atomicAdd(st.nnz, static_cast<unsigned long long>(m));

    if (as_coow) {
      // Standard order -> (row, col): stable passes by the row's low, then
      // high digit (within a row the standard order is by column already).
      const CooLayout l = coow_layout(m, sizeof(V));
      auto* dc = reinterpret_cast<WideCoord*>(dst + l.coord_offset);
      V* dv = reinterpret_cast<V*>(dst + l.value_offset);
      counting_pass(m, d, lane, shared, [&](std::uint32_t i) { return key_digit(u[i].key, 1, b); },
                    [&](std::uint32_t i, std::uint32_t p) { x[p] = u[i]; });
      __syncwarp();
      counting_pass(m, d, lane, shared, [&](std::uint32_t i) { return key_digit(x[i].key, 3, b); },
                    [&](std::uint32_t i, std::uint32_t p) {
                      const std::uint32_t k = x[i].key;
                      dc[p] = WideCoord{static_cast<std::uint16_t>((key_digit(k, 3, b) << b) | key_digit(k, 1, b)),
                                        static_cast<std::uint16_t>((key_digit(k, 2, b) << b) | key_digit(k, 0, b))};
                      dv[p] = x[i].value;
                    });
      if (lane == 0) *reinterpret_cast<std::uint32_t*>(dst) = m;
      if (lane == 0) *it.slot = make_ref(offset, NodeType::coow);
      return;
    }

    // Standard form: the inner node, then its leaves in block order. First
    // each block's leaf is placed (at its last entry) and recorded in x, free
    // now, as (reference, first entry); then every entry goes to its leaf.
    auto* meta = reinterpret_cast<uint2*>(x);
    const bool inner_dense = inner.type == NodeType::dense;
    const CooLayout il = inner_dense ? CooLayout{} : coo_layout(inner.type, blocks, sizeof(NodeRef));
    auto* inner_refs = reinterpret_cast<NodeRef*>(dst + (inner_dense ? 0u : il.value_offset));
    auto* inner_coords = reinterpret_cast<LocalCoord*>(dst + il.coord_offset);
    unsigned long long placed = offset + inner.bytes;
    for_blocks(u, m, b, lane, [&](std::uint32_t i, bool active, bool is_end, std::uint32_t start, std::uint32_t block) {
      const std::uint32_t cnt = active && is_end ? i - start + 1 : 0u;
      const NodeChoice leaf = cnt ? choose_node(cnt, b, true, sizeof(V)) : NodeChoice{NodeType::dense, 0};
      // Leaf bytes are multiples of 16 and under 2^32 in total; scan them.
      unsigned long long incl = leaf.bytes;
      for (std::uint32_t o = 1; o < 32; o <<= 1) {
        const unsigned long long nb2 = __shfl_up_sync(full_warp, incl, o);
        if (lane >= o) incl += nb2;
      }
      const unsigned long long at = placed + incl - leaf.bytes;
      placed += __shfl_sync(full_warp, incl, 31);
      if (!cnt) return;
      const NodeRef ref = make_ref(at, leaf.type);
      meta[block] = make_uint2(ref, start);
      const std::uint32_t k = u[i].key;
      const auto br = static_cast<std::uint8_t>(key_digit(k, 3, b)), bc = static_cast<std::uint8_t>(key_digit(k, 2, b));
      if (inner_dense) {
        inner_refs[(std::uint32_t{br} << b) | bc] = ref;
      } else {
        inner_coords[block] = LocalCoord{br, bc};
        inner_refs[block] = ref;
      }
      if (leaf.type != NodeType::dense) *reinterpret_cast<std::uint32_t*>(st.dst + at) = cnt;
    });
    __syncwarp();
    for_blocks(u, m, b, lane, [&](std::uint32_t i, bool active, bool, std::uint32_t, std::uint32_t block) {
      if (!active) return;
      const uint2 mt = meta[block];
      const NodeRef ref = mt.x;
      std::byte* leaf = st.dst + ref_offset(ref);
      const std::uint32_t k = u[i].key;
      const LocalCoord lc{static_cast<std::uint8_t>(key_digit(k, 1, b)), static_cast<std::uint8_t>(key_digit(k, 0, b))};
      if (ref_type(ref) == NodeType::dense) {
        const std::uint32_t cell = (std::uint32_t{lc.row} << b) | lc.col;
        reinterpret_cast<V*>(leaf + dense_mask_bytes(b))[cell] = u[i].value;
        set_mask_bit(leaf, cell);
      } else {
        const std::uint32_t cnt = *reinterpret_cast<const std::uint32_t*>(leaf);
        const CooLayout l = coo_layout(ref_type(ref), cnt, sizeof(V));
        reinterpret_cast<LocalCoord*>(leaf + l.coord_offset)[i - mt.y] = lc;
        reinterpret_cast<V*>(leaf + l.value_offset)[i - mt.y] = u[i].value;
      }
    });
    if (lane == 0 && !inner_dense) *reinterpret_cast<std::uint32_t*>(dst) = blocks;
    if (lane == 0) *it.slot = make_ref(offset, inner.type);
  }
};

}  // namespace hisparse::ops::add_gpu
