#pragma once
// The node procedures of GPU sparse add, C = ka·op(A) + kb·op(B) (seed 004
// section 6): a dual top-down traversal. A warp takes one pair of nodes at the
// same position in both operands (either may be absent), merges their entries
// in logical orientation, allocates the output node from a bump allocator,
// writes it, and enqueues the pairs of children with the address of the slot
// their new reference goes to (as the rebuilding copy does).
//
//  AddNode:  a pair of ordinary nodes. Transposed sparse nodes are first
//            re-sorted into logical order (a stable counting pass by column)
//            into a shadow buffer at the node's own offset. The output is
//            dense exactly when choose_node says so; with canonical operands
//            a dense operand node always gives a dense output node (sparse
//            node bytes never shrink as entries are added), which is what
//            lets the sparse-output path assume two sorted lists.
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
// If the output pool is too small, nodes past its end are still sized and
// allocated (so the allocator ends at the exact size needed) but not written;
// the host then runs again with that size.
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
  NodeRef* slot;  // where the new node's reference goes; null while only counting bytes
};
static_assert(sizeof(AddItem) == 24);

// One operand: its pool and state.
template <class V>
struct Operand {
  const std::byte* pool;
  std::byte* sorted;  // transposed operands: a pool-sized shadow for re-sorted sparse nodes
  bool transposed;
  V k;  // alpha·scale(A) or beta·scale(B)
};

template <class V>
struct WideEntry {
  std::uint32_t key;  // standard tree order: (row_hi, col_hi, row_lo, col_lo), b bits each
  V value;
};

inline constexpr unsigned flag_pool_too_small = 1u;
inline constexpr unsigned flag_not_canonical = 2u;
inline constexpr unsigned flag_scratch_too_small = 4u;

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

// ---- one side of a node pair ---------------------------------------------------

// A node of one operand seen in logical orientation. Sparse: coordinates
// sorted row-major (re-sorted first if the operand is transposed). Dense: the
// cells as stored, with `transposed` telling how to read them.
template <class E>
struct Side {
  std::uint32_t count = 0;
  bool dense = false;
  bool transposed = false;
  const LocalCoord* coords = nullptr;
  const E* values = nullptr;  // sparse values, or dense cells
  const std::uint8_t* mask = nullptr;  // dense leaf
};

template <class E, class V>
__device__ Side<E> open_side(const Operand<V>& op, NodeRef ref, std::uint32_t b, bool leaf, std::uint32_t lane,
                             std::uint32_t* shared) {
  Side<E> s;
  if (ref == null_ref) return s;
  const std::uint32_t d = 1u << b;
  if (ref_type(ref) == NodeType::dense) {
    s.dense = true;
    s.transposed = op.transposed;
    s.values = dense_values<E>(op.pool, ref, b, leaf);
    std::uint32_t n = 0;
    if (leaf) {
      s.mask = dense_mask(op.pool, ref);
      // Bits past d*d are zero (validated), so whole words can be counted.
      const auto* words = reinterpret_cast<const unsigned*>(s.mask);
      for (std::uint32_t w = lane; w < dense_mask_bytes(b) / 4; w += 32) n += __popc(words[w]);
    } else {
      const auto* refs = reinterpret_cast<const NodeRef*>(s.values);
      for (std::uint32_t cell = lane; cell < d * d; cell += 32) n += refs[cell] != null_ref;
    }
    s.count = __reduce_add_sync(full_warp, n);
    return s;
  }
  const CooView<E> v = coo_view<E>(op.pool, ref);
  s.count = v.count;
  if (!op.transposed) {
    s.coords = v.coords;
    s.values = v.values;
    return s;
  }
  // Stored row-major, so a stable pass by column leaves (col, row) order:
  // the logical row-major order of the transposed node.
  const CooLayout l = coo_layout(ref_type(ref), v.count, sizeof(E));
  std::byte* node = op.sorted + ref_offset(ref);
  auto* tc = reinterpret_cast<LocalCoord*>(node + l.coord_offset);
  E* tv = reinterpret_cast<E*>(node + l.value_offset);
  counting_pass(v.count, d, lane, shared, [&](std::uint32_t i) { return static_cast<std::uint32_t>(v.coords[i].col); },
                [&](std::uint32_t i, std::uint32_t p) {
                  tc[p] = LocalCoord{v.coords[i].col, v.coords[i].row};
                  tv[p] = v.values[i];
                });
  __syncwarp();
  s.coords = tc;
  s.values = tv;
  return s;
}

__device__ inline bool same(LocalCoord x, LocalCoord y) { return x.row == y.row && x.col == y.col; }

// Entries of a sparse side before `lc`.
template <class E>
__device__ inline std::uint32_t lower_bound(const Side<E>& s, LocalCoord lc) {
  std::uint32_t lo = 0, hi = s.count;
  while (lo < hi) {
    const std::uint32_t mid = (lo + hi) / 2;
    if (coord_less(s.coords[mid], lc)) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

template <class E>
__device__ inline bool find(const Side<E>& s, std::uint32_t b, LocalCoord lc, E& out) {
  if (s.count == 0) return false;
  if (s.dense) {
    const std::uint32_t cell = s.transposed ? (std::uint32_t{lc.col} << b) | lc.row : (std::uint32_t{lc.row} << b) | lc.col;
    if constexpr (std::is_same_v<E, NodeRef>) {
      if (s.values[cell] == null_ref) return false;
    } else {
      if (!mask_bit(s.mask, cell)) return false;
    }
    out = s.values[cell];
    return true;
  }
  const std::uint32_t p = lower_bound(s, lc);
  if (p < s.count && same(s.coords[p], lc)) {
    out = s.values[p];
    return true;
  }
  return false;
}

// f(logical coordinate, value) for every entry of a side, lanes in parallel.
template <class E, class F>
__device__ inline void for_each_present(const Side<E>& s, std::uint32_t b, std::uint32_t lane, F&& f) {
  if (!s.dense) {
    for (std::uint32_t i = lane; i < s.count; i += 32) f(s.coords[i], s.values[i]);
    return;
  }
  if (s.count == 0) return;
  const std::uint32_t d = 1u << b;
  for (std::uint32_t cell = lane; cell < d * d; cell += 32) {
    bool present;
    if constexpr (std::is_same_v<E, NodeRef>) present = s.values[cell] != null_ref;
    else present = mask_bit(s.mask, cell);
    if (!present) continue;
    const auto r = static_cast<std::uint8_t>(cell >> b), c = static_cast<std::uint8_t>(cell & (d - 1));
    f(s.transposed ? LocalCoord{c, r} : LocalCoord{r, c}, s.values[cell]);
  }
}

// Walks a sorted sparse side against the other sorted sparse side in warp
// steps (every lane runs every step): f(i, coordinate, value, lower bound in
// the other side, whether the other side has the coordinate, how many of
// this side's entries before i it has).
template <class E, class F>
__device__ inline void for_each_ranked(const Side<E>& self, const Side<E>& other, std::uint32_t lane, F&& f) {
  std::uint32_t carry = 0;
  for (std::uint32_t base = 0; base < self.count; base += 32) {
    const std::uint32_t i = base + lane;
    const bool active = i < self.count;
    LocalCoord lc{};
    E v{};
    std::uint32_t lb = 0;
    bool hit = false;
    if (active) {
      lc = self.coords[i];
      v = self.values[i];
      lb = lower_bound(other, lc);
      hit = lb < other.count && same(other.coords[lb], lc);
    }
    const unsigned hits = __ballot_sync(full_warp, hit);
    if (active) f(i, lc, v, lb, hit, carry + __popc(hits & lanes_below(lane)));
    carry += __popc(hits);
  }
}

// ---- AddNode ------------------------------------------------------------------

template <class V>
struct AddWide;

template <class V>
struct AddNode {
  using payload_type = AddItem;
  static constexpr std::uint32_t threads_per_item = 32;
  static constexpr std::uint32_t shared_bytes = 256 * sizeof(std::uint32_t);  // counting-sort digits (d <= 256)
  static constexpr const char* name = "add-node";

  template <class Context>
  __device__ static void run(const AddItem& it, std::uint32_t lane, std::uint32_t, const Context& ctx) {
    const AddState<V>& st = ctx.state();
    if (it.level + 1 == st.depth) process<V>(it, lane, ctx, st, true);
    else process<NodeRef>(it, lane, ctx, st, false);
  }

  template <class Context>
  __device__ static void enqueue_child(const Context& ctx, const AddState<V>& st, AddItem child) {
    if (st.wide && child.level + 2 == st.depth) ctx.template enqueue<AddWide<V>>(child);
    else ctx.template enqueue<AddNode>(child);
  }

  template <class E, class Context>
  __device__ static void process(const AddItem& it, std::uint32_t lane, const Context& ctx, const AddState<V>& st,
                                 bool leaf) {
    const std::uint32_t b = st.log2d;
    auto* shared = static_cast<std::uint32_t*>(ctx.shared());
    const Side<E> sa = open_side<E>(st.a, it.a, b, leaf, lane, shared);
    const Side<E> sb = open_side<E>(st.b, it.b, b, leaf, lane, shared);

    std::uint32_t matches = 0;
    if (sa.count != 0 && sb.count != 0) {
      for_each_present(sa, b, lane, [&](LocalCoord lc, E) {
        E unused;
        matches += find(sb, b, lc, unused) ? 1u : 0u;
      });
      matches = __reduce_add_sync(full_warp, matches);
    }
    const std::uint32_t n = sa.count + sb.count - matches;
    const NodeChoice choice = choose_node(n, b, leaf, sizeof(E));
    const bool dense_out = choice.type == NodeType::dense;
    if (!dense_out && (sa.dense || sb.dense)) {
      if (lane == 0) atomicOr(st.flags, flag_not_canonical);
      return;
    }
    const unsigned long long offset = allocate(st.alloc, choice.bytes, lane);
    const bool write = it.slot != nullptr && offset + choice.bytes <= st.capacity;
    if (it.slot != nullptr && !write && lane == 0) atomicOr(st.flags, flag_pool_too_small);
    std::byte* dst = write ? st.dst + offset : nullptr;
    if (write) zero_node(dst, choice.bytes, lane);
    if (write && leaf && lane == 0) atomicAdd(st.nnz, static_cast<unsigned long long>(n));

    E* out_values = nullptr;
    LocalCoord* out_coords = nullptr;
    if (write) {
      if (dense_out) {
        out_values = reinterpret_cast<E*>(dst + (leaf ? dense_mask_bytes(b) : 0u));
      } else {
        const CooLayout l = coo_layout(choice.type, n, sizeof(E));
        out_coords = reinterpret_cast<LocalCoord*>(dst + l.coord_offset);
        out_values = reinterpret_cast<E*>(dst + l.value_offset);
      }
    }
    // One output entry at position p (sparse) or at its cell (dense).
    auto emit = [&](LocalCoord lc, std::uint32_t p, bool has_a, E va, bool has_b, E vb) {
      const std::uint32_t at = dense_out ? (std::uint32_t{lc.row} << b) | lc.col : p;
      if (write && !dense_out) out_coords[p] = lc;
      if constexpr (std::is_same_v<E, NodeRef>) {
        enqueue_child(ctx, st,
                      AddItem{has_a ? va : null_ref, has_b ? vb : null_ref, it.level + 1, 0, write ? out_values + at : nullptr});
      } else {
        if (!write) return;
        out_values[at] = combine(st.a, has_a, va, st.b, has_b, vb);
        if (dense_out) set_mask_bit(dst, at);
      }
    };

    if (dense_out) {
      for_each_present(sa, b, lane, [&](LocalCoord lc, E va) {
        E vb{};
        const bool hb = find(sb, b, lc, vb);
        emit(lc, 0, true, va, hb, vb);
      });
      for_each_present(sb, b, lane, [&](LocalCoord lc, E vb) {
        E va{};
        if (!find(sa, b, lc, va)) emit(lc, 0, false, va, true, vb);
      });
    } else {
      // Union rank of an A entry: entries of A before it, plus entries of B
      // before it, less the common ones before it (the matched A entries).
      // A B entry that A also has was written with that A entry.
      for_each_ranked(sa, sb, lane,
                      [&](std::uint32_t i, LocalCoord lc, E va, std::uint32_t lb, bool hit, std::uint32_t common_before) {
                        emit(lc, i + lb - common_before, true, va, hit, hit ? sb.values[lb] : E{});
                      });
      for_each_ranked(sb, sa, lane,
                      [&](std::uint32_t j, LocalCoord lc, E vb, std::uint32_t lb, bool hit, std::uint32_t common_before) {
                        if (!hit) emit(lc, j - common_before + lb, false, E{}, true, vb);
                      });
      if (write && lane == 0) *reinterpret_cast<std::uint32_t*>(dst) = n;
    }
    if (write && lane == 0) *it.slot = make_ref(offset, choice.type);
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
    const bool write = it.slot != nullptr && offset + bytes <= st.capacity;
    if (it.slot != nullptr && !write && lane == 0) atomicOr(st.flags, flag_pool_too_small);
    if (!write) return;
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
