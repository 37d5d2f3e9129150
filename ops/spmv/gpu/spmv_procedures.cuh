#pragma once
// SpMV node procedures (seed 004 section 5): inner nodes, leaf-parents (which
// sum their small and medium leaves themselves), and a procedure per bin of
// the leaves that need items of their own (large sparse, dense, wide). A
// procedure sees one queue item (a node with its block row/column and level)
// and the SpMV state; it does not know how it is scheduled: the same leaf
// functions (spmv_leaves.cuh) run under every runtime controller and in the
// cached plan.
#include "spmv_leaves.cuh"

namespace hisparse::ops::spmv_gpu {

template <class V, std::uint32_t Bin, std::uint32_t Threads>
struct LeafProcedure {
  // The wide bin's warp merge is called by all 32 lanes of a warp, which holds
  // only when a warp is exactly one item (in the runtime too: whole groups are
  // active or not).
  static_assert(Bin != bin_wide || Threads == 32, "the wide bin needs one item per warp");
  // The dense leaf keeps a lane's column fixed across its cells (stride = group).
  static_assert(Bin != bin_dense || Threads == 256, "the dense bin needs 256 threads, a multiple of any d");
  static_assert(Bin == bin_large || Bin == bin_dense || Bin == bin_wide,
                "one- and few-entry leaves are summed by their parent's item (LeafParentProcedure)");
  using payload_type = NodeItem;
  static constexpr std::uint32_t threads_per_item = Threads;
  static constexpr std::uint32_t shared_bytes = Bin == bin_large ? 256 * sizeof(V) : 0;
  // Occupancy over registers, as the plan's run_plan: a memory-bound sweep
  // needs warps in flight (48 registers gave 62% occupancy and a leaf pass
  // 1.6x the plan's, perf-log 20).
  static constexpr std::uint32_t min_blocks_per_sm = sizeof(V) == 4 ? 8 : 7;
  static constexpr std::uint32_t bin = Bin;
  static constexpr const char* name = Bin == bin_large   ? "spmv-leaf-large"
                                      : Bin == bin_dense ? "spmv-leaf-dense"
                                                         : "spmv-leaf-coow";
  template <class Context>
  __device__ static void run(const NodeItem& it, std::uint32_t lane, std::uint32_t group, const Context& ctx) {
    V* acc = nullptr;
    if constexpr (Bin == bin_large) {
      // The runtime's shared memory holds whatever the last item left: clear it.
      acc = static_cast<V*>(ctx.shared());
      for (std::uint32_t i = lane; i < (1u << ctx.state().log2d); i += group) acc[i] = V(0);
      __syncwarp();
    }
    run_leaf<V>(Bin, it, lane, group, ctx.state(), acc);
  }
};

// Threads per leaf item of each bin (a block of 256 runs 256, 32, 8 or 1 items).
__host__ __device__ constexpr std::uint32_t leaf_threads_of(std::uint32_t bin) {
  return bin == bin_one ? 1 : bin == bin_small ? 8 : bin == bin_dense ? 256 : 32;  // large, wide: a warp
}
template <std::uint32_t Bin>
inline constexpr std::uint32_t leaf_threads = leaf_threads_of(Bin);

template <class V>
using LeafLarge = LeafProcedure<V, bin_large, leaf_threads<bin_large>>;
template <class V>
using LeafDense = LeafProcedure<V, bin_dense, leaf_threads<bin_dense>>;
template <class V>
using LeafWide = LeafProcedure<V, bin_wide, leaf_threads<bin_wide>>;

// An inner node's item covers a part of its children: inner_part_children
// consecutive cells (dense) or entries (sparse), so that a node with
// thousands of children (the root of a scattered matrix: 16384 cells, each
// a wide node of hundreds of chunks) is walked by many warps at once, not by
// one. The item's `level` field holds the level in its low 8 bits and the
// part above them; whole_node (the seed) asks the item to split itself.
inline constexpr std::uint32_t inner_part_children = 256;  // 8 rounds of a warp
inline constexpr std::uint32_t whole_node = 0xFFFFFFu;
__host__ __device__ constexpr std::uint32_t inner_level(const NodeItem& it) { return it.level & 0xFFu; }
__host__ __device__ constexpr std::uint32_t inner_part(const NodeItem& it) { return it.level >> 8; }
__host__ __device__ constexpr NodeItem inner_item(std::uint64_t brow, std::uint64_t bcol, NodeRef ref,
                                                  std::uint32_t level, std::uint32_t part = whole_node) {
  return NodeItem{brow, bcol, ref, (part << 8) | level};
}
// Expansions for Context::enqueue_expand: the k-th part of an inner node,
// the k-th chunk of a leaf (its `level` holds the chunk index), or the item
// itself (one item).
struct InnerPartOf {
  __device__ NodeItem operator()(NodeItem b, std::uint32_t k) const { return inner_item(b.brow, b.bcol, b.ref, inner_level(b), k); }
};
struct ChunkOf {
  __device__ NodeItem operator()(NodeItem b, std::uint32_t k) const { return NodeItem{b.brow, b.bcol, b.ref, k}; }
};
struct Itself {
  __device__ NodeItem operator()(NodeItem b, std::uint32_t) const { return b; }
};

// Children of an inner node: d^2 cells of a dense node, or a sparse node's entries.
__device__ inline std::uint32_t inner_children(const std::byte* pool, NodeRef ref, std::uint32_t log2d) {
  return ref_type(ref) == NodeType::dense ? 1u << (2 * log2d) : *reinterpret_cast<const std::uint32_t*>(pool + ref_offset(ref));
}

// An inner node's children, read by index: a dense node's cells (null where
// empty) or a sparse node's entries, as items one level down. Inner children
// are whole nodes (route() cuts them into parts); a leaf's `level` is its
// plain level.
struct Children {
  bool dense;
  const NodeRef* refs;      // dense
  CooView<NodeRef> sparse;  // sparse
  std::uint32_t count;      // d^2 cells or the entries

  __device__ Children(const std::byte* pool, NodeRef ref, std::uint32_t log2d)
      : dense(ref_type(ref) == NodeType::dense),
        refs(dense ? dense_values<NodeRef>(pool, ref, log2d, false) : nullptr),
        sparse(dense ? CooView<NodeRef>{} : coo_view<NodeRef>(pool, ref)),
        count(dense ? 1u << (2 * log2d) : sparse.count) {}

  // Child i (i < count) of `parent` (at `level`); false where a dense cell is empty.
  __device__ bool get(const NodeItem& parent, std::uint32_t level, std::uint32_t i, std::uint32_t log2d,
                      std::uint32_t depth, NodeItem& child) const {
    LocalCoord lc;
    NodeRef r;
    if (dense) {
      r = refs[i];
      lc = LocalCoord{static_cast<std::uint8_t>(i >> log2d), static_cast<std::uint8_t>(i & ((1u << log2d) - 1))};
    } else {
      r = sparse.values[i];
      lc = sparse.coords[i];
    }
    child = inner_item((parent.brow << log2d) | lc.row, (parent.bcol << log2d) | lc.col, r, level + 1,
                       level + 2 < depth ? whole_node : 0u);
    return r != null_ref;
  }
};

// The largest sparse leaf a leaf-parent item sums itself (larger ones go to
// the large bin in chunks of large_chunk): at most a warp's eight steps, and
// never more than a chunk, which is smaller on matrices too small to keep
// every SM busy otherwise.
inline constexpr std::uint32_t parent_leaf_max = 1024;
template <class V>
__host__ __device__ constexpr std::uint32_t inline_leaf_max(const SpmvState<V>& st) {
  return st.large_chunk < parent_leaf_max ? st.large_chunk : parent_leaf_max;
}

// Children of a leaf-parent (an inner node one level above the leaves) per
// item of LeafParentProcedure: one warp round.
inline constexpr std::uint32_t parent_part_children = 32;

template <class V>
struct LeafParentProcedure;

// An inner node's part: a warp walks its children and routes each to the
// inner queue (or, one level above the leaves, to the leaf-parent queue) or
// to its leaf bin (reading a sparse leaf's count, seed 004 sec. 4.1). A leaf
// that arrives here (the root of a one-level tree) is routed as well.
template <class V>
struct InnerProcedure {
  using payload_type = NodeItem;
  static constexpr std::uint32_t threads_per_item = 32;  // route() is warp-collective
  static constexpr std::uint32_t min_blocks_per_sm = 4;  // 88 registers left 25% occupancy
  static constexpr const char* name = "spmv-inner";

  // A traversal: the whole warp routes one child per lane (`valid` false
  // where a lane has none). Each destination queue takes the warp's items
  // in one collective enqueue, chunked nodes as their chunks: a wide node,
  // a dense leaf or a large leaf is cut into chunks of one item each (the
  // item's `level` holds the chunk index), written by all 32 lanes.
  template <class Context>
  __device__ static void route(const NodeItem& child, bool valid, const Context& ctx) {
    const SpmvState<V>& st = ctx.state();
    enum Kind : std::uint32_t { none, inner, parent, wide, dense, large, self };
    std::uint32_t kind = none, count = 0;
    if (valid) {
      const std::uint32_t level = inner_level(child);
      if (ref_type(child.ref) == NodeType::coow) {
        kind = wide;
        count = coow_chunks(st.pool, child.ref);
      } else if (level + 2 < st.depth) {
        kind = inner;
        count = (inner_children(st.pool, child.ref, st.log2d) + inner_part_children - 1) / inner_part_children;
      } else if (level + 2 == st.depth) {
        kind = parent;
        count = (inner_children(st.pool, child.ref, st.log2d) + parent_part_children - 1) / parent_part_children;
      } else if (ref_type(child.ref) == NodeType::dense) {
        kind = dense;
        count = dense_chunks(st.log2d);
      } else {
        const std::uint32_t n = leaf_entries(st.pool, child.ref);
        if (n > inline_leaf_max(st)) {
          kind = large;
          count = (n + st.large_chunk - 1) / st.large_chunk;
        } else {
          kind = self;  // a small leaf without a parent item (a one-level tree's root)
          count = 1;
        }
      }
    }
    constexpr unsigned full = 0xffffffffu;
    if (__any_sync(full, kind == inner))
      ctx.template enqueue_expand<InnerProcedure>(child, kind == inner ? count : 0u, InnerPartOf{});
    if (__any_sync(full, kind == parent))
      ctx.template enqueue_expand<LeafParentProcedure<V>>(child, kind == parent ? count : 0u, InnerPartOf{});
    if (__any_sync(full, kind == wide)) ctx.template enqueue_expand<LeafWide<V>>(child, kind == wide ? count : 0u, ChunkOf{});
    if (__any_sync(full, kind == dense)) ctx.template enqueue_expand<LeafDense<V>>(child, kind == dense ? count : 0u, ChunkOf{});
    if (__any_sync(full, kind == large)) ctx.template enqueue_expand<LeafLarge<V>>(child, kind == large ? count : 0u, ChunkOf{});
    if (__any_sync(full, kind == self))
      ctx.template enqueue_expand<LeafParentProcedure<V>>(child, kind == self ? 1u : 0u, Itself{});
  }

  template <class Context>
  __device__ static void run(const NodeItem& it, std::uint32_t lane, std::uint32_t group, const Context& ctx) {
    const SpmvState<V>& st = ctx.state();
    const std::uint32_t level = inner_level(it);
    // A leaf or a wide node as the root (a tree of one or two levels).
    if (level + 1 == st.depth || ref_type(it.ref) == NodeType::coow) {
      route(NodeItem{it.brow, it.bcol, it.ref, level}, lane == 0, ctx);
      return;
    }
    const std::uint32_t b = st.log2d;
    const Children children(st.pool, it.ref, b);
    // The root one level above the leaves (a two-level tree): its leaves are
    // summed by leaf-parent items.
    if (level + 2 == st.depth) {
      const std::uint32_t parts = (children.count + parent_part_children - 1) / parent_part_children;
      ctx.template enqueue_expand<LeafParentProcedure<V>>(it, lane == 0 ? parts : 0u, InnerPartOf{});
      return;
    }
    std::uint32_t part = inner_part(it);
    if (part == whole_node) {
      const std::uint32_t parts = (children.count + inner_part_children - 1) / inner_part_children;
      if (parts > 1) {
        ctx.template enqueue_expand<InnerProcedure>(it, lane == 0 ? parts : 0u, InnerPartOf{});
        return;
      }
      part = 0;
    }
    const std::uint32_t begin = part * inner_part_children, end = min(children.count, begin + inner_part_children);
    // A uniform trip count: route() is warp-collective.
    for (std::uint32_t first = begin; first < end; first += group) {
      const std::uint32_t i = first + lane;
      NodeItem child{};
      const bool valid = i < end && children.get(it, level, i, b, st.depth, child);
      route(child, valid, ctx);
    }
  }
};

// A leaf-parent's part: a warp reads parent_part_children children (one
// per lane, all leaves) and sums them itself instead of queueing each as an
// item: a Laplacian 4096^2 has 650 k leaves, most of a few hundred entries or
// one, and as items of their own they were summed in queue order, each large
// leaf flushing its d outputs into y on its own (perf-log R11). Here
// - leaves of up to lane_leaf_max entries are summed by their lane, with
//   global atomics (a COO1 leaf: one);
// - larger leaves up to inline_leaf_max are summed by the whole warp, one
//   after the other in the parent's order, into the warp's d accumulators,
//   flushed once per run of leaves with the same output block (A: a block
//   row, whose leaves are adjacent in the parent's row-major order);
// - dense leaves and larger sparse ones go to their bins, as from an inner
//   node.
// An item whose own node is a leaf (a one-level tree's root) sums just that.
inline constexpr std::uint32_t lane_leaf_max = 8;

// A COO4 leaf summed by the whole warp (lane_leaf_max < n <=
// inline_leaf_max): the lane whose child it is, its count, and this lane's
// first quad, loaded ahead. Its block and arrays come from that lane when
// needed (two leaves in flight, each with its block and pointers, spilled at
// 64 registers).
template <class V>
struct WarpLeaf {
  int j;
  std::uint32_t n;
  uint2 cw;
  V a[4];

  __device__ static WarpLeaf take(const NodeItem& child, std::uint32_t count, int j, std::uint32_t lane,
                                  const SpmvState<V>& st) {
    WarpLeaf w{j, __shfl_sync(0xffffffffu, count, j)};
    const Coo4Arrays<V> arr(st.pool, __shfl_sync(0xffffffffu, child.ref, j), w.n);
    if (4 * lane < w.n) {
      w.cw = arr.c4[lane];
      load4(arr.vals + 4 * lane, w.a);
    }
    return w;
  }
  // The output block (warp-collective).
  __device__ std::uint64_t out(const NodeItem& child, const SpmvState<V>& st) const {
    return __shfl_sync(0xffffffffu, st.transposed ? child.bcol : child.brow, j);
  }
  // Warp-collective (A's quads merge their rows across the warp).
  __device__ void sum(const NodeItem& child, std::uint32_t lane, const SpmvState<V>& st, V* acc) const {
    const std::uint64_t in_base = __shfl_sync(0xffffffffu, st.transposed ? child.brow : child.bcol, j) << st.log2d;
    const std::uint32_t m = 4 * lane < n ? min(4u, n - 4 * lane) : 0u;
    add_quad(cw, a, m, in_base, st, acc);
    if (n <= 128) return;
    const Coo4Arrays<V> arr(st.pool, __shfl_sync(0xffffffffu, child.ref, j), n);
    for (std::uint32_t first = 128; first < n; first += 128) {  // a uniform trip count
      const std::uint32_t e = first + 4 * lane;
      const std::uint32_t mq = e < n ? min(4u, n - e) : 0u;
      uint2 w{};
      V v[4] = {};
      if (mq > 0) {
        w = arr.c4[e / 4];
        load4(arr.vals + e, v);
      }
      add_quad(w, v, mq, in_base, st, acc);
    }
  }
  __device__ static void add_quad(uint2 cw, const V (&a)[4], std::uint32_t m, std::uint64_t in_base,
                                  const SpmvState<V>& st, V* acc) {
    if (st.transposed) {
      quad_to_acc(cw, a, m, in_base, st, acc);
    } else {
      const std::uint32_t words[2] = {cw.x, cw.y};
      coo4_rows_to_acc(words, a, m, st.x + in_base, acc, [](std::uint32_t r) { return r; });
    }
  }
};

template <class V>
struct LeafParentProcedure {
  using payload_type = NodeItem;
  static constexpr std::uint32_t threads_per_item = 32;  // warp-collective: route() and the warp's leaves
  static constexpr std::uint32_t shared_bytes = 256 * sizeof(V);  // d accumulators, d <= 256
  // 64 registers: no spills (at 40, 104 bytes of stack and a slower pass, perf-log R11 b).
  static constexpr std::uint32_t min_blocks_per_sm = 4;
  static constexpr const char* name = "spmv-leaf-parent";

  template <class Context>
  __device__ static void run(const NodeItem& it, std::uint32_t lane, std::uint32_t, const Context& ctx) {
    const SpmvState<V>& st = ctx.state();
    const std::uint32_t b = st.log2d, level = inner_level(it);
    NodeItem child{};
    bool valid;
    if (level + 1 == st.depth) {
      child = it;
      valid = lane == 0;
    } else {
      const Children children(st.pool, it.ref, b);
      const std::uint32_t i = inner_part(it) * parent_part_children + lane;
      valid = i < children.count && children.get(it, level, i, b, st.depth, child);
    }
    std::uint32_t count = 0;
    bool here = false;
    if (valid && ref_type(child.ref) != NodeType::dense) {
      count = leaf_entries(st.pool, child.ref);
      here = count <= inline_leaf_max(st);
    }
    constexpr unsigned full = 0xffffffffu;
    if (__any_sync(full, valid && !here)) to_bins(child, valid && !here, ctx);
    if (here && count <= lane_leaf_max) {
      if (ref_type(child.ref) == NodeType::coo1) leaf_one(child, st);
      else leaf_coo(child, 0, 1, st);
    }
    unsigned warp_leaves = __ballot_sync(full, here && count > lane_leaf_max);
    if (warp_leaves == 0u) return;
    // The runtime's shared memory holds whatever the last item left.
    V* acc = static_cast<V*>(ctx.shared());
    for (std::uint32_t o = lane; o < (1u << b); o += 32) acc[o] = V(0);
    __syncwarp();
    // Leaf by leaf in the parent's order; each leaf's first quads are loaded
    // while the one before is summed (without that, every leaf waited for
    // its entries, then for x).
    WarpLeaf<V> cur = WarpLeaf<V>::take(child, count, __ffs(warp_leaves) - 1, lane, st);
    warp_leaves &= warp_leaves - 1u;
    std::uint64_t open = cur.out(child, st);  // the output block acc holds
    while (true) {
      const bool more = warp_leaves != 0u;
      WarpLeaf<V> next{};
      if (more) {
        next = WarpLeaf<V>::take(child, count, __ffs(warp_leaves) - 1, lane, st);
        warp_leaves &= warp_leaves - 1u;
      }
      cur.sum(child, lane, st, acc);
      if (!more) break;
      const std::uint64_t next_out = next.out(child, st);
      if (next_out != open) {
        flush_block(open, lane, st, acc);
        open = next_out;
      }
      cur = next;
    }
    flush_block(open, lane, st, acc);
  }

 private:
  // Dense leaves and sparse ones above inline_leaf_max, to their bins in
  // chunks (warp-collective; route()'s leaf cases, without its inner ones,
  // whose code would cost this procedure registers).
  template <class Context>
  __device__ static void to_bins(const NodeItem& leaf, bool valid, const Context& ctx) {
    const SpmvState<V>& st = ctx.state();
    const bool dense = valid && ref_type(leaf.ref) == NodeType::dense;
    const bool large = valid && !dense;
    std::uint32_t count = 0;
    if (dense) count = dense_chunks(st.log2d);
    if (large) count = (leaf_entries(st.pool, leaf.ref) + st.large_chunk - 1) / st.large_chunk;
    constexpr unsigned full = 0xffffffffu;
    if (__any_sync(full, dense)) ctx.template enqueue_expand<LeafDense<V>>(leaf, dense ? count : 0u, ChunkOf{});
    if (__any_sync(full, large)) ctx.template enqueue_expand<LeafLarge<V>>(leaf, large ? count : 0u, ChunkOf{});
  }

  __device__ static void flush_block(std::uint64_t block, std::uint32_t lane, const SpmvState<V>& st, V* acc) {
    __syncwarp();
    flush_outputs(acc, 1u << st.log2d, block << st.log2d, lane, 32, st);
    __syncwarp();
  }
};

}  // namespace hisparse::ops::spmv_gpu
