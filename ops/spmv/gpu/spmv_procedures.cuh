#pragma once
// SpMV node procedures (seed 004 section 5): one per node kind and entry-count
// bin. A procedure sees one queue item (a node with its block row/column and
// level) and the SpMV state; it does not know how it is scheduled: the same
// leaf functions run under every runtime controller and in the cached plan.
//
// Accumulation: every leaf entry adds alpha*scale*a*x into y with an atomic
// add (leaves of many entries first sum per output in shared memory, and in
// f32 add four neighbouring outputs with one 16-byte atomic). The order of
// those additions depends on scheduling, so results can differ in the last
// bits between runs (not bit-reproducible); the host reference sums in double
// and is the specification within rounding.
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

// Leaf bins: COO1 (one entry), few entries (<= 32), many (> 32), dense, and
// wide (COOW) nodes: a level depth-2 node with 16-bit coordinates that stands
// for a whole d^2 x d^2 sub-tree (format.md). A wide node is cut into chunks
// of coow_chunk entries, one warp item each; such an item's `level` field holds
// the chunk index instead (its level is always depth - 2), so a power-law
// matrix's heavy corner does not leave one warp working while the rest idle.
enum LeafBin : std::uint32_t {
  bin_one = 0,
  bin_small = 1,
  bin_large = 2,
  bin_dense = 3,
  bin_wide = 4,
  leaf_bin_count = 5
};
inline constexpr std::uint32_t small_leaf_max = 32;
inline constexpr std::uint32_t coow_chunk = 128;  // 32 lanes x 4 entries: one step (perf-log: 1024 -> 128)
// A plan lists one more list: wide nodes in chunks for a whole
// block of wide_block_threads (its SpMV^T agents, spmv_plan_agents.cuh).
inline constexpr std::uint32_t list_wide_blocks = leaf_bin_count;
inline constexpr std::uint32_t plan_list_count = leaf_bin_count + 1;
inline constexpr std::uint32_t wide_block_threads = 1024;
inline constexpr std::uint32_t wide_block_chunk = 4 * wide_block_threads;  // four entries per thread, one step

template <class V>
struct SpmvState {
  const std::byte* pool;
  std::uint32_t log2d;
  std::uint32_t depth;
  bool transposed;
  V k;  // alpha * scale
  const V* x;
  V* y;
  std::uint64_t y_size;  // op(A).rows()
  bool y_vec4;           // y is 16-byte aligned: f32 accumulators are flushed four at a time
  // Entries per item of a large leaf (a multiple of 128): the host picks it so
  // that a small matrix with a few big leaves still gives every SM work.
  std::uint32_t large_chunk;
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

// A product to add into y[key] (for warp_segmented_add: valid = false when a
// lane has none).
template <class V>
struct PendingAdd {
  std::uint64_t key = 0;
  V val = V(0);
  bool valid = false;
};

// The product of content entry (r, c) with value a, keyed by its output:
// row r from x[c] for A, column c from x[r] for A^T.
template <class V>
__device__ inline PendingAdd<V> entry_product(const SpmvState<V>& st, std::uint64_t r, std::uint64_t c, V a) {
  return {st.transposed ? c : r, st.k * a * st.x[st.transposed ? r : c], true};
}

template <class V>
__device__ inline void accumulate(const SpmvState<V>& st, std::uint64_t brow, std::uint64_t bcol, LocalCoord lc, V a) {
  const PendingAdd<V> p = entry_product(st, (brow << st.log2d) | lc.row, (bcol << st.log2d) | lc.col, a);
  atomicAdd(st.y + p.key, p.val);
}

// A lane's run of entries with equal outputs (entries are row-major, so in A
// a row's entries come together): products are summed while the output stays
// the same, and a new output first adds the finished run into y. The last run
// stays open for the caller: its own atomic, or the warp merge.
template <class V>
struct OutputRun {
  std::uint64_t out = ~std::uint64_t{0};
  V sum = V(0);

  __device__ void add(const SpmvState<V>& st, std::uint64_t r, std::uint64_t c, V a) {
    const std::uint64_t o = st.transposed ? c : r, in = st.transposed ? r : c;
    start(st, o);
    sum += a * st.x[in];
  }
  // A product already formed (SpMV^T of wide nodes multiplies in stored
  // order and sums in column order), for output o.
  __device__ void add_product(const SpmvState<V>& st, std::uint64_t o, V product) {
    start(st, o);
    sum += product;
  }

 private:
  __device__ void start(const SpmvState<V>& st, std::uint64_t o) {
    if (o != out) {
      if (out != ~std::uint64_t{0}) atomicAdd(st.y + out, st.k * sum);
      out = o;
      sum = V(0);
    }
  }
};

// Four consecutive values with 16-byte loads (COO4 value arrays are 16-byte
// aligned and padded to a multiple of four).
__device__ inline void load4(const float* p, float (&a)[4]) {
  const float4 v = *reinterpret_cast<const float4*>(p);
  a[0] = v.x; a[1] = v.y; a[2] = v.z; a[3] = v.w;
}
__device__ inline void load4(const double* p, double (&a)[4]) {
  const double2 u = reinterpret_cast<const double2*>(p)[0], v = reinterpret_cast<const double2*>(p)[1];
  a[0] = u.x; a[1] = u.y; a[2] = v.x; a[3] = v.y;
}

// Adds `val` into y[key] for every lane of the warp, one atomic per run of
// equal keys in adjacent lanes (segments by head flags, then a Hillis-Steele
// suffix sum inside each segment). All 32 lanes must call it; lanes without
// a value pass valid = false. Adjacent leaves of one parent share their block
// row, so in SpMV (N) a long row's entries collapse to one atomic per warp
// instead of one per lane: same-address atomics serialise in L2.
template <class V>
__device__ inline void warp_segmented_add(V* y, std::uint64_t key, V val, bool valid) {
  constexpr unsigned full = 0xffffffffu;
  const unsigned lane = threadIdx.x & 31u;
  const unsigned vmask = __ballot_sync(full, valid);
  if (vmask == 0u) return;
  if (!valid) val = V(0);
  // Compare with the previous lane that holds a value: lanes without one lie
  // between the leaves of the small bin (a leaf with fewer entries than its 8
  // lanes) and must not split a long row's segment.
  const unsigned before = vmask & ((1u << lane) - 1u);
  const int prev_lane = before != 0u ? 31 - __clz(before) : static_cast<int>(lane);
  const std::uint64_t prev = __shfl_sync(full, key, prev_lane);
  const bool head = valid && (before == 0u || prev != key);
  const unsigned heads = __ballot_sync(full, head);
  // Nothing to merge (scattered outputs, as in SpMV^T of a power-law matrix):
  // skip the scan, each lane adds its own value.
  if (heads == vmask) {
    if (valid) atomicAdd(y + key, val);
    return;
  }
  const unsigned le = lane == 31 ? full : (2u << lane) - 1u;
  // Lanes without a value (value 0) join the segment of the head before them.
  const unsigned seg = __popc(heads & le);
  for (unsigned off = 1; off < 32; off <<= 1) {
    const V v2 = __shfl_down_sync(full, val, off);
    const unsigned s2 = __shfl_down_sync(full, seg, off);
    if (lane + off < 32 && s2 == seg) val += v2;
  }
  if (head) atomicAdd(y + key, val);
}

// A dense leaf's d^2 cells in chunks of dense_chunk (4 per thread of the
// 256-thread item): one item for a whole 128 x 128 leaf left a block looping
// 64 times while most of the GPU idled on small matrices.
inline constexpr std::uint32_t dense_chunk = 1024;
__host__ __device__ constexpr std::uint32_t dense_chunks(std::uint32_t log2d) {
  const std::uint32_t cells = 1u << (2 * log2d);
  return cells <= dense_chunk ? 1u : cells / dense_chunk;
}

// A wide (COOW) node's arrays, read four entries at a time: two 8-byte
// coordinate loads and one 16-byte value load (the arrays are padded to a
// multiple of 4). A WideCoord word holds the row in its low half.
template <class V>
struct CoowArrays {
  std::uint32_t count;
  const uint2* coords;  // two WideCoords per uint2
  const V* values;

  // Entries e .. e + 3; e is a multiple of 4.
  __device__ void quad(std::uint32_t e, std::uint32_t (&words)[4], V (&a)[4]) const {
    const uint2 w0 = coords[e / 2], w1 = coords[e / 2 + 1];
    words[0] = w0.x, words[1] = w0.y, words[2] = w1.x, words[3] = w1.y;
    load4(values + e, a);
  }
};
template <class V>
__device__ inline CoowArrays<V> coow_arrays(const std::byte* pool, NodeRef ref) {
  const std::byte* node = pool + ref_offset(ref);
  const std::uint32_t n = *reinterpret_cast<const std::uint32_t*>(node);
  const CooLayout l = coow_layout(n, sizeof(V));
  return {n, reinterpret_cast<const uint2*>(node + l.coord_offset), reinterpret_cast<const V*>(node + l.value_offset)};
}

__device__ inline std::uint32_t coow_chunks(const std::byte* pool, NodeRef ref, std::uint32_t chunk = coow_chunk) {
  const std::uint32_t n = *reinterpret_cast<const std::uint32_t*>(pool + ref_offset(ref));
  return (n + chunk - 1) / chunk;
}

// Adds k * acc[o] into y[out_base + o] for the touched outputs o < count and
// clears acc; thread `tid` of `threads` (a warp's lanes or a block's threads).
// An untouched output holds 0 and is skipped. In the f32 vector path (sm_90's
// 16-byte atomic: one L2 operation for four outputs), a zero beside touched
// ones is sent as -0.0, which leaves every value (even -0.0) unchanged, so
// both paths give the same y. It needs y 16-byte aligned (st.y_vec4, checked
// by the host) and all four outputs inside y (st.y_size).
template <class V>
__device__ inline void flush_outputs(V* acc, std::uint32_t count, std::uint64_t out_base, std::uint32_t tid,
                                     std::uint32_t threads, const SpmvState<V>& st) {
  if constexpr (sizeof(V) == 4) {
    if (st.y_vec4 && count % 4 == 0) {
      for (std::uint32_t q = tid; q < count / 4; q += threads) {
        const float4 v = reinterpret_cast<const float4*>(acc)[q];
        if (v.x == 0.f && v.y == 0.f && v.z == 0.f && v.w == 0.f) continue;
        reinterpret_cast<float4*>(acc)[q] = make_float4(0.f, 0.f, 0.f, 0.f);
        const std::uint64_t o = out_base + 4 * q;
        if (o + 4 <= st.y_size) {
          auto part = [&](float a) { return a != 0.f ? st.k * a : -0.f; };
          atomicAdd(reinterpret_cast<float4*>(st.y + o), make_float4(part(v.x), part(v.y), part(v.z), part(v.w)));
        } else {
          const float a[4] = {v.x, v.y, v.z, v.w};
          for (std::uint32_t j = 0; j < 4; ++j)
            if (a[j] != 0.f) atomicAdd(st.y + o + j, st.k * a[j]);
        }
      }
      return;
    }
  }
  for (std::uint32_t o = tid; o < count; o += threads) {
    const V v = acc[o];
    if (v != V(0)) {
      atomicAdd(st.y + out_base + o, st.k * v);
      acc[o] = V(0);
    }
  }
}

// ---- leaf kernels: the work of one leaf, spread over `group` lanes ---------

template <class V>
__device__ inline void leaf_one(const NodeItem& it, const SpmvState<V>& st) {
  const std::byte* node = st.pool + ref_offset(it.ref);
  constexpr CooLayout l = coo_layout(NodeType::coo1, 1, sizeof(V));
  const LocalCoord lc = *reinterpret_cast<const LocalCoord*>(node + l.coord_offset);
  accumulate(st, it.brow, it.bcol, lc, *reinterpret_cast<const V*>(node + l.value_offset));
}

// The one-entry bin in the plan: the lane's product, for warp_segmented_add.
template <class V>
__device__ inline PendingAdd<V> leaf_one_pending(const NodeItem* it, const SpmvState<V>& st) {
  PendingAdd<V> p;
  if (it) {
    const std::byte* node = st.pool + ref_offset(it->ref);
    constexpr CooLayout l = coo_layout(NodeType::coo1, 1, sizeof(V));
    const LocalCoord lc = *reinterpret_cast<const LocalCoord*>(node + l.coord_offset);
    p = entry_product(st, (it->brow << st.log2d) | lc.row, (it->bcol << st.log2d) | lc.col,
                      *reinterpret_cast<const V*>(node + l.value_offset));
  }
  return p;
}

// Few entries (COO2, or COO4 with <= 32): each lane loads 4 coordinates and 4
// values with one vector access each (the reason for COOX padding), and adds
// runs of entries that share an output index before its atomic.
// With `pending` (plan path: group 8, at most 32 entries, so one step per
// lane), the lane's last run is returned there instead of added: the caller
// merges it across the warp.
template <class V>
__device__ inline void leaf_coo(const NodeItem& it, std::uint32_t lane, std::uint32_t group, const SpmvState<V>& st,
                                PendingAdd<V>* pending = nullptr) {
  if (ref_type(it.ref) != NodeType::coo4) {
    const CooView<V> v = coo_view<V>(st.pool, it.ref);
    for (std::uint32_t i = lane; i < v.count; i += group) {
      if (pending && i + group >= v.count) {
        *pending = entry_product(st, (it.brow << st.log2d) | v.coords[i].row, (it.bcol << st.log2d) | v.coords[i].col,
                                 v.values[i]);
      } else {
        accumulate(st, it.brow, it.bcol, v.coords[i], v.values[i]);
      }
    }
    return;
  }
  const std::byte* node = st.pool + ref_offset(it.ref);
  const std::uint32_t n = *reinterpret_cast<const std::uint32_t*>(node);
  const CooLayout l = coo_layout(NodeType::coo4, n, sizeof(V));
  const auto* c4 = reinterpret_cast<const uint2*>(node + l.coord_offset);
  const V* vals = reinterpret_cast<const V*>(node + l.value_offset);
  for (std::uint32_t q = lane; 4 * q < n; q += group) {
    const uint2 cw = c4[q];
    V a[4];
    load4(vals + 4 * q, a);
    const LocalCoord cs[4] = {{std::uint8_t(cw.x), std::uint8_t(cw.x >> 8)}, {std::uint8_t(cw.x >> 16), std::uint8_t(cw.x >> 24)},
                              {std::uint8_t(cw.y), std::uint8_t(cw.y >> 8)}, {std::uint8_t(cw.y >> 16), std::uint8_t(cw.y >> 24)}};
    const std::uint32_t m = min(4u, n - 4 * q);
    OutputRun<V> run;
    for (std::uint32_t j = 0; j < m; ++j)
      run.add(st, (it.brow << st.log2d) | cs[j].row, (it.bcol << st.log2d) | cs[j].col, a[j]);
    if (pending && 4 * (q + group) >= n) *pending = PendingAdd<V>{run.out, st.k * run.sum, true};
    else atomicAdd(st.y + run.out, st.k * run.sum);
  }
}

// Products of a COO4 leaf's entries [begin, min(n, begin + len)) into
// acc[local output] (its block's row in A, column in A^T), one shared atomic
// per entry: lane `lane` of `step` takes every step-th quad. Used by the large
// bin (a warp per chunk) and by the plan's riders (8 lanes per leaf).
// Merging equal outputs across the warp first (as the small bin does) cost
// more than it saved on the stencils' blocks (docs/perf-log.md), where
// conflicts in shared memory are cheap.
template <class V>
__device__ inline void coo4_to_acc(const NodeItem& it, std::uint32_t begin, std::uint32_t len, std::uint32_t lane,
                                   std::uint32_t step, const SpmvState<V>& st, V* acc) {
  const std::byte* node = st.pool + ref_offset(it.ref);
  const std::uint32_t n = *reinterpret_cast<const std::uint32_t*>(node);
  const CooLayout l = coo_layout(NodeType::coo4, n, sizeof(V));
  const auto* c4 = reinterpret_cast<const uint2*>(node + l.coord_offset);
  const V* vals = reinterpret_cast<const V*>(node + l.value_offset);
  const std::uint64_t in_base = (st.transposed ? it.brow : it.bcol) << st.log2d;
  const std::uint32_t end = min(n, begin + len);
  for (std::uint32_t q = begin / 4 + lane; 4 * q < end; q += step) {
    const uint2 cw = c4[q];
    V a[4];
    load4(vals + 4 * q, a);
    const std::uint32_t words[2] = {cw.x, cw.y};
    const std::uint32_t m = min(4u, end - 4 * q);
#pragma unroll
    for (std::uint32_t j = 0; j < 4; ++j) {
      if (j < m) {
        const std::uint32_t row = (words[j / 2] >> (16 * (j % 2))) & 0xFFu, col = (words[j / 2] >> (16 * (j % 2) + 8)) & 0xFFu;
        const std::uint32_t o = st.transposed ? col : row, in = st.transposed ? row : col;
        atomicAdd(acc + o, a[j] * st.x[in_base + in]);
      }
    }
  }
}

// Many entries (COO4, > 32): a warp per leaf, 4 entries per lane per step.
// Products gather in a shared-memory row (N) or column (T) segment of d
// values, then one global atomic per touched output: the same work for A
// and A^T, and about a third of the global atomics of one per entry on a
// stencil's diagonal blocks. The two halves: the sum of this item's chunk of
// the leaf (its `level` is the chunk index) and the flush; the plan adds its
// riders between them (spmv_gpu.cu, spmv_plan_agents.cuh). `acc` holds d
// zeros on entry and (after the flush) on exit.
template <class V>
__device__ inline void large_chunk_to_acc(const NodeItem& it, std::uint32_t lane, const SpmvState<V>& st, V* acc) {
  coo4_to_acc(it, it.level * st.large_chunk, st.large_chunk, lane, 32, st, acc);
}
template <class V>
__device__ inline void flush_large(const NodeItem& it, std::uint32_t lane, const SpmvState<V>& st, V* acc) {
  __syncwarp();
  flush_outputs(acc, 1u << st.log2d, (st.transposed ? it.bcol : it.brow) << st.log2d, lane, 32, st);
  __syncwarp();
}
template <class V>
__device__ inline void leaf_coo_warp(const NodeItem& it, std::uint32_t lane, const SpmvState<V>& st, V* acc) {
  large_chunk_to_acc(it, lane, st, acc);
  flush_large(it, lane, st, acc);
}

// One chunk of a wide (COOW) node, a warp: each lane takes 4 consecutive
// entries per step (two 8-byte coordinate loads, one 16-byte value load;
// the arrays are padded to a multiple of 4), adds its runs of equal outputs,
// and the warp merges equal outputs of adjacent lanes before the atomics:
// entries are row-major, so in SpMV (N) a heavy row's products collapse.
template <class V>
__device__ inline void leaf_coow(const NodeItem& it, std::uint32_t lane, const SpmvState<V>& st) {
  const CoowArrays<V> node = coow_arrays<V>(st.pool, it.ref);
  const std::uint32_t shift = 2 * st.log2d;
  const std::uint64_t row_base = it.brow << shift, col_base = it.bcol << shift;
  const std::uint32_t begin = it.level * coow_chunk, end = min(node.count, begin + coow_chunk);
  for (std::uint32_t base = begin; base < end; base += 128) {  // uniform trip count: the whole warp merges
    const std::uint32_t e = base + 4 * lane;
    const std::uint32_t m = e < end ? min(4u, end - e) : 0u;
    OutputRun<V> run;
    if (m > 0) {
      std::uint32_t words[4];
      V a[4];
      node.quad(e, words, a);
#pragma unroll
      for (std::uint32_t j = 0; j < 4; ++j)
        if (j < m) run.add(st, row_base | (words[j] & 0xFFFFu), col_base | (words[j] >> 16), a[j]);
    }
    warp_segmented_add(st.y, run.out, st.k * run.sum, m > 0);
  }
}

// A chunk of a dense leaf, by a whole block (group 256, a multiple of d):
// lane l takes cells begin + l, begin + l + 256, ... In SpMV^T its output (the cell's column) is the same
// cell after cell, so it sums in a register and adds once; in SpMV a warp's 32
// consecutive cells share rows, so the warp merges them (one atomic per row
// and warp, instead of one per cell). The trip count is uniform: every lane
// reaches the warp merge.
template <class V>
__device__ inline void leaf_dense(const NodeItem& it, std::uint32_t lane, std::uint32_t group, const SpmvState<V>& st) {
  const std::uint32_t b = st.log2d, all_cells = 1u << (2 * b);
  // This item's chunk: cells [begin, begin + cells); begin is a multiple of
  // 1024 and so of d, which keeps a lane's column fixed (below).
  const std::uint32_t begin = it.level * dense_chunk;
  const std::uint32_t cells = min(all_cells, begin + dense_chunk);
  const auto* mask = reinterpret_cast<const std::uint8_t*>(st.pool + ref_offset(it.ref));
  const V* vals = dense_values<V>(st.pool, it.ref, b, true);
  const std::uint64_t row_base = it.brow << b, col_base = it.bcol << b;
  if (st.transposed) {
    V sum = V(0);
    bool any = false;
    for (std::uint32_t cell = begin + lane; cell < cells; cell += group) {
      if (!mask_bit(mask, cell)) continue;  // absent: contributes nothing, not 0 * x
      sum += vals[cell] * st.x[row_base | (cell >> b)];
      any = true;
    }
    if (any) atomicAdd(st.y + (col_base | (lane & ((1u << b) - 1u))), st.k * sum);
    return;
  }
  for (std::uint32_t first = begin; first < cells; first += group) {
    const std::uint32_t cell = first + lane;
    const bool present = cell < cells && mask_bit(mask, cell);
    const std::uint64_t r = row_base | (cell >> b);
    const V p = present ? st.k * vals[cell] * st.x[col_base | (cell & ((1u << b) - 1u))] : V(0);
    warp_segmented_add(st.y, r, p, present);
  }
}

// `acc`: d zeroed values of shared memory per warp, for the large bin.
template <class V>
__device__ inline void run_leaf(std::uint32_t bin, const NodeItem& it, std::uint32_t lane, std::uint32_t group,
                                const SpmvState<V>& st, V* acc) {
  switch (bin) {
    case bin_one: leaf_one(it, st); break;
    case bin_dense: leaf_dense(it, lane, group, st); break;
    case bin_large: leaf_coo_warp(it, lane, st, acc); break;
    case bin_wide: leaf_coow(it, lane, st); break;
    default: leaf_coo(it, lane, group, st); break;
  }
}

// ---- procedures ----------------------------------------------------------

template <class V, std::uint32_t Bin, std::uint32_t Threads>
struct LeafProcedure {
  // The wide bin's warp merge is called by all 32 lanes of a warp, which holds
  // only when a warp is exactly one item (in the runtime too: whole groups are
  // active or not).
  static_assert(Bin != bin_wide || Threads == 32, "the wide bin needs one item per warp");
  // The dense leaf keeps a lane's column fixed across its cells (stride = group).
  static_assert(Bin != bin_dense || Threads == 256, "the dense bin needs 256 threads, a multiple of any d");
  using payload_type = NodeItem;
  static constexpr std::uint32_t threads_per_item = Threads;
  static constexpr std::uint32_t shared_bytes = Bin == bin_large ? 256 * sizeof(V) : 0;
  // Occupancy over registers, as the plan's run_plan: a memory-bound sweep
  // needs warps in flight (48 registers gave 62% occupancy and a leaf pass
  // 1.6x the plan's, perf-log 20).
  static constexpr std::uint32_t min_blocks_per_sm = sizeof(V) == 4 ? 8 : 7;
  static constexpr std::uint32_t bin = Bin;
  static constexpr const char* name = Bin == bin_one     ? "spmv-leaf-coo1"
                                      : Bin == bin_small ? "spmv-leaf-small"
                                      : Bin == bin_large ? "spmv-leaf-large"
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
using LeafOne = LeafProcedure<V, bin_one, leaf_threads<bin_one>>;
template <class V>
using LeafSmall = LeafProcedure<V, bin_small, leaf_threads<bin_small>>;
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

// An inner node's part: a warp walks its children and routes each to the
// inner queue or to its leaf bin (reading a sparse leaf's count, seed 004
// sec. 4.1). A leaf that arrives here (the root of a one-level tree) is
// routed as well.
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
    enum Kind : std::uint32_t { none, inner, wide, dense, large, one, small };
    std::uint32_t kind = none, count = 0;
    if (valid) {
      if (ref_type(child.ref) == NodeType::coow) {
        kind = wide;
        count = coow_chunks(st.pool, child.ref);
      } else if (inner_level(child) + 1 < st.depth) {
        kind = inner;
        count = (inner_children(st.pool, child.ref, st.log2d) + inner_part_children - 1) / inner_part_children;
      } else {
        switch (leaf_bin(st.pool, child.ref)) {
          case bin_dense: kind = dense; count = dense_chunks(st.log2d); break;
          case bin_large: {
            const std::uint32_t n = *reinterpret_cast<const std::uint32_t*>(st.pool + ref_offset(child.ref));
            kind = large;
            count = (n + st.large_chunk - 1) / st.large_chunk;
            break;
          }
          case bin_one: kind = one; count = 1; break;
          default: kind = small; count = 1; break;
        }
      }
    }
    constexpr unsigned full = 0xffffffffu;
    if (__any_sync(full, kind == inner))
      ctx.template enqueue_expand<InnerProcedure>(child, kind == inner ? count : 0u, InnerPartOf{});
    if (__any_sync(full, kind == wide)) ctx.template enqueue_expand<LeafWide<V>>(child, kind == wide ? count : 0u, ChunkOf{});
    if (__any_sync(full, kind == dense)) ctx.template enqueue_expand<LeafDense<V>>(child, kind == dense ? count : 0u, ChunkOf{});
    if (__any_sync(full, kind == large)) ctx.template enqueue_expand<LeafLarge<V>>(child, kind == large ? count : 0u, ChunkOf{});
    if (__any_sync(full, kind == one)) ctx.template enqueue_expand<LeafOne<V>>(child, kind == one ? 1u : 0u, Itself{});
    if (__any_sync(full, kind == small)) ctx.template enqueue_expand<LeafSmall<V>>(child, kind == small ? 1u : 0u, Itself{});
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
    const std::uint32_t n = inner_children(st.pool, it.ref, b);
    std::uint32_t part = inner_part(it);
    if (part == whole_node) {
      const std::uint32_t parts = (n + inner_part_children - 1) / inner_part_children;
      if (parts > 1) {
        ctx.template enqueue_expand<InnerProcedure>(it, lane == 0 ? parts : 0u, InnerPartOf{});
        return;
      }
      part = 0;
    }
    const bool dense = ref_type(it.ref) == NodeType::dense;
    const NodeRef* refs = dense ? dense_values<NodeRef>(st.pool, it.ref, b, false) : nullptr;
    const CooView<NodeRef> v = dense ? CooView<NodeRef>{} : coo_view<NodeRef>(st.pool, it.ref);
    const std::uint32_t begin = part * inner_part_children, end = min(n, begin + inner_part_children);
    // A uniform trip count: route() is warp-collective.
    for (std::uint32_t first = begin; first < end; first += group) {
      const std::uint32_t i = first + lane;
      NodeItem child{};
      bool valid = false;
      if (i < end) {
        LocalCoord lc;
        NodeRef r;
        if (dense) {
          r = refs[i];
          lc = LocalCoord{static_cast<std::uint8_t>(i >> b), static_cast<std::uint8_t>(i & ((1u << b) - 1))};
        } else {
          r = v.values[i];
          lc = v.coords[i];
        }
        valid = r != null_ref;
        // Inner children are whole nodes (route() cuts them into parts); a
        // leaf's `level` is its plain level.
        child = inner_item((it.brow << b) | lc.row, (it.bcol << b) | lc.col, r, level + 1,
                           level + 2 < st.depth ? whole_node : 0u);
      }
      route(child, valid, ctx);
    }
  }
};

}  // namespace hisparse::ops::spmv_gpu
