#pragma once
// SpMV node procedures (seed 004 section 5): one per node kind and entry-count
// bin. A procedure sees one queue item (a node with its block row/column and
// level) and the SpMV state; it does not know how it is scheduled: the same
// leaf functions run under every runtime controller and in the cached plan.
//
// Accumulation: every leaf entry adds alpha*scale*a*x into y with an atomic
// add. The order of those additions depends on scheduling, so results can
// differ in the last bits between runs (not bit-reproducible); the host
// reference sums in double and is the specification within rounding.
#include <cuda_runtime.h>

#include <cstdint>

#include "hisparse/formats/node_view.hpp"

namespace hisparse::ops::spmv_gpu {

// A node to process: its reference, its level and the block it covers (in
// units of that level's block size), in the content's coordinates.
struct NodeItem {
  std::uint64_t brow;
  std::uint64_t bcol;
  NodeRef ref;
  std::uint32_t level;
};
static_assert(sizeof(NodeItem) == 24);

// Leaf bins: COO1 (one entry), few entries (<= 32), many (> 32), dense.
enum LeafBin : std::uint32_t { bin_one = 0, bin_small = 1, bin_large = 2, bin_dense = 3, leaf_bin_count = 4 };
inline constexpr std::uint32_t small_leaf_max = 32;

template <class V>
struct SpmvState {
  const std::byte* pool;
  std::uint32_t log2d;
  std::uint32_t depth;
  bool transposed;
  V k;  // alpha * scale
  const V* x;
  V* y;
  // Plan building: with `record` set, inner nodes append leaves to the lists
  // (or only count them when the lists are null) instead of enqueueing them.
  bool record;
  unsigned long long* leaf_counts;  // [leaf_bin_count]
  NodeItem* leaf_lists[leaf_bin_count];
};

// The bin a leaf goes to, from its reference and (for sparse nodes) its count.
__device__ inline std::uint32_t leaf_bin(const std::byte* pool, NodeRef ref) {
  switch (ref_type(ref)) {
    case NodeType::dense: return bin_dense;
    case NodeType::coo1: return bin_one;
    default: {
      const std::uint32_t n = *reinterpret_cast<const std::uint32_t*>(pool + ref_offset(ref));
      return n <= small_leaf_max ? bin_small : bin_large;
    }
  }
}

template <class V>
__device__ inline void accumulate(const SpmvState<V>& st, std::uint64_t brow, std::uint64_t bcol, LocalCoord lc, V a) {
  std::uint64_t r = (brow << st.log2d) | lc.row, c = (bcol << st.log2d) | lc.col;
  if (st.transposed) {
    const std::uint64_t t = r;
    r = c;
    c = t;
  }
  atomicAdd(st.y + r, st.k * a * st.x[c]);
}

// ---- leaf kernels: the work of one leaf, spread over `group` lanes ---------

template <class V>
__device__ inline void leaf_one(const NodeItem& it, const SpmvState<V>& st) {
  const std::byte* node = st.pool + ref_offset(it.ref);
  constexpr CooLayout l = coo_layout(NodeType::coo1, 1, sizeof(V));
  const LocalCoord lc = *reinterpret_cast<const LocalCoord*>(node + l.coord_offset);
  accumulate(st, it.brow, it.bcol, lc, *reinterpret_cast<const V*>(node + l.value_offset));
}

template <class V>
__device__ inline void leaf_coo(const NodeItem& it, std::uint32_t lane, std::uint32_t group, const SpmvState<V>& st) {
  const CooView<V> v = coo_view<V>(st.pool, it.ref);
  for (std::uint32_t i = lane; i < v.count; i += group) accumulate(st, it.brow, it.bcol, v.coords[i], v.values[i]);
}

template <class V>
__device__ inline void leaf_dense(const NodeItem& it, std::uint32_t lane, std::uint32_t group, const SpmvState<V>& st) {
  const std::uint32_t cells = 1u << (2 * st.log2d);
  const auto* mask = reinterpret_cast<const std::uint8_t*>(st.pool + ref_offset(it.ref));
  const V* vals = dense_values<V>(st.pool, it.ref, st.log2d, true);
  for (std::uint32_t cell = lane; cell < cells; cell += group) {
    if (!mask_bit(mask, cell)) continue;  // absent: contributes nothing, not 0 * x
    const LocalCoord lc{static_cast<std::uint8_t>(cell >> st.log2d),
                        static_cast<std::uint8_t>(cell & ((1u << st.log2d) - 1))};
    accumulate(st, it.brow, it.bcol, lc, vals[cell]);
  }
}

template <class V>
__device__ inline void run_leaf(std::uint32_t bin, const NodeItem& it, std::uint32_t lane, std::uint32_t group,
                                const SpmvState<V>& st) {
  switch (bin) {
    case bin_one: leaf_one(it, st); break;
    case bin_dense: leaf_dense(it, lane, group, st); break;
    default: leaf_coo(it, lane, group, st); break;
  }
}

// ---- procedures ----------------------------------------------------------

template <class V, std::uint32_t Bin, std::uint32_t Threads>
struct LeafProcedure {
  using payload_type = NodeItem;
  static constexpr std::uint32_t threads_per_item = Threads;
  static constexpr std::uint32_t bin = Bin;
  static constexpr const char* name = Bin == bin_one     ? "spmv-leaf-coo1"
                                      : Bin == bin_small ? "spmv-leaf-small"
                                      : Bin == bin_large ? "spmv-leaf-large"
                                                         : "spmv-leaf-dense";
  template <class Context>
  __device__ static void run(const NodeItem& it, std::uint32_t lane, std::uint32_t group, const Context& ctx) {
    run_leaf<V>(Bin, it, lane, group, ctx.state());
  }
};

// Threads per leaf of each bin (a block of 256 runs 256, 32, 2 or 1 leaves).
template <class V>
using LeafOne = LeafProcedure<V, bin_one, 1>;
template <class V>
using LeafSmall = LeafProcedure<V, bin_small, 8>;
template <class V>
using LeafLarge = LeafProcedure<V, bin_large, 128>;
template <class V>
using LeafDense = LeafProcedure<V, bin_dense, 256>;

template <std::uint32_t Bin>
inline constexpr std::uint32_t leaf_threads = Bin == bin_one ? 1 : Bin == bin_small ? 8 : Bin == bin_large ? 128 : 256;

// An inner node: a warp walks its children and routes each to the inner
// queue or to its leaf bin (reading a sparse leaf's count, seed 004 sec. 4.1).
// A leaf that arrives here (the root of a one-level tree) is routed as well.
template <class V>
struct InnerProcedure {
  using payload_type = NodeItem;
  static constexpr std::uint32_t threads_per_item = 32;
  static constexpr const char* name = "spmv-inner";

  template <class Context>
  __device__ static void route(const NodeItem& child, const Context& ctx) {
    const SpmvState<V>& st = ctx.state();
    if (child.level + 1 < st.depth) {
      ctx.template enqueue<InnerProcedure>(child);
      return;
    }
    const std::uint32_t bin = leaf_bin(st.pool, child.ref);
    if (st.record) {
      const unsigned long long slot = atomicAdd(st.leaf_counts + bin, 1ull);
      if (st.leaf_lists[bin]) st.leaf_lists[bin][slot] = child;
      return;
    }
    switch (bin) {
      case bin_one: ctx.template enqueue<LeafOne<V>>(child); break;
      case bin_small: ctx.template enqueue<LeafSmall<V>>(child); break;
      case bin_large: ctx.template enqueue<LeafLarge<V>>(child); break;
      default: ctx.template enqueue<LeafDense<V>>(child); break;
    }
  }

  template <class Context>
  __device__ static void run(const NodeItem& it, std::uint32_t lane, std::uint32_t group, const Context& ctx) {
    const SpmvState<V>& st = ctx.state();
    if (it.level + 1 == st.depth) {
      if (lane == 0) route(it, ctx);
      return;
    }
    const std::uint32_t b = st.log2d;
    auto child_of = [&](LocalCoord lc, NodeRef ref) {
      return NodeItem{(it.brow << b) | lc.row, (it.bcol << b) | lc.col, ref, it.level + 1};
    };
    if (ref_type(it.ref) == NodeType::dense) {
      const NodeRef* refs = dense_values<NodeRef>(st.pool, it.ref, b, false);
      const std::uint32_t cells = 1u << (2 * b);
      for (std::uint32_t cell = lane; cell < cells; cell += group) {
        const NodeRef r = refs[cell];
        if (r != null_ref)
          route(child_of(LocalCoord{static_cast<std::uint8_t>(cell >> b), static_cast<std::uint8_t>(cell & ((1u << b) - 1))}, r),
                ctx);
      }
    } else {
      const CooView<NodeRef> v = coo_view<NodeRef>(st.pool, it.ref);
      for (std::uint32_t i = lane; i < v.count; i += group) route(child_of(v.coords[i], v.values[i]), ctx);
    }
  }
};

}  // namespace hisparse::ops::spmv_gpu
