#pragma once
// SpMV node procedures (seed 004 section 5): inner nodes, leaf-parents (which
// sum their small and medium leaves themselves), and a procedure per bin of
// the leaves that need items of their own (large sparse, dense, wide). The
// bins' leaf functions are also the plan's. A procedure sees one queue item (a node with its block row/column and
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

// The largest sparse leaf a leaf-parent item sums itself (larger ones go to
// the large bin in chunks of large_chunk): at most a warp's eight steps, and
// never more than a chunk, which is smaller on matrices too small to keep
// every SM busy otherwise.
inline constexpr std::uint32_t parent_leaf_max = 1024;
template <class V>
__host__ __device__ constexpr std::uint32_t inline_leaf_max(const SpmvState<V>& st) {
  return st.large_chunk < parent_leaf_max ? st.large_chunk : parent_leaf_max;
}

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

// Entries of a sparse leaf (COO1 without reading its header).
__device__ inline std::uint32_t leaf_entries(const std::byte* pool, NodeRef ref) {
  return ref_type(ref) == NodeType::coo1 ? 1u : *reinterpret_cast<const std::uint32_t*>(pool + ref_offset(ref));
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
// One quad of a COO4 leaf (coordinate words cw, values a; its first m
// entries are real) into acc: the products' outputs are the local rows (A)
// or columns (A^T) of the leaf's block, its inputs from x at in_base.
template <class V>
__device__ inline void quad_to_acc(uint2 cw, const V (&a)[4], std::uint32_t m, std::uint64_t in_base,
                                   const SpmvState<V>& st, V* acc) {
  const std::uint32_t words[2] = {cw.x, cw.y};
#pragma unroll
  for (std::uint32_t j = 0; j < 4; ++j) {
    if (j < m) {
      const std::uint32_t row = (words[j / 2] >> (16 * (j % 2))) & 0xFFu, col = (words[j / 2] >> (16 * (j % 2) + 8)) & 0xFFu;
      const std::uint32_t o = st.transposed ? col : row, in = st.transposed ? row : col;
      atomicAdd(acc + o, a[j] * st.x[in_base + in]);
    }
  }
}

// A's products of a lane's quad of a COO4 leaf (m real entries; all 32
// lanes call, m = 0 where a lane has none) into out[local row], inputs at
// x[local column]; used by the plan's tiles and the one-shot's leaf-parents.
// Rows are sorted, and the lane sums its runs of equal rows. Only its first
// run can share a row with another lane's run (the previous lane's last, or
// more lanes' first runs where a row spans lanes), so the other runs are
// added by a plain read-add-write and the first runs then by atomics, which
// rarely meet. A float shared atomicAdd is a compare-and-swap loop on sm_90
// (ATOMS.CAST.SPIN): with every run added that way it retried 2.8 times a
// unit on the Laplacian (perf-log 20). The barriers order these plain adds
// after the previous quad's and before the next's.
template <class V>
__device__ inline void coo4_rows_to_acc(const std::uint32_t (&words)[2], const V (&a)[4], std::uint32_t m, const V* x,
                                         V* out) {
  __syncwarp();
  const std::uint32_t head_row = words[0] & 0xFFu;
  std::uint32_t row = head_row;
  V head_sum = V(0), sum = V(0);
  bool in_head = true;
#pragma unroll
  for (std::uint32_t j = 0; j < 4; ++j) {
    if (j < m) {
      const std::uint32_t w = words[j / 2] >> (16 * (j % 2));
      const std::uint32_t r = w & 0xFFu;
      if (r != row) {
        if (in_head) head_sum = sum;
        else out[row] += sum;
        in_head = false;
        row = r;
        sum = V(0);
      }
      sum += a[j] * x[(w >> 8) & 0xFFu];
    }
  }
  if (m > 0) {
    if (in_head) head_sum = sum;
    else out[row] += sum;
  }
  __syncwarp();
  if (m > 0) atomicAdd(out + head_row, head_sum);
}

// A COO4 leaf's coordinate quads and value array, from its reference and
// entry count (no header load).
template <class V>
struct Coo4Arrays {
  const uint2* c4 = nullptr;
  const V* vals = nullptr;
  Coo4Arrays() = default;
  __device__ Coo4Arrays(const std::byte* pool, NodeRef ref, std::uint32_t n) {
    const std::byte* node = pool + ref_offset(ref);
    const CooLayout l = coo_layout(NodeType::coo4, n, sizeof(V));
    c4 = reinterpret_cast<const uint2*>(node + l.coord_offset);
    vals = reinterpret_cast<const V*>(node + l.value_offset);
  }
};

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
  const std::uint32_t n = *reinterpret_cast<const std::uint32_t*>(st.pool + ref_offset(it.ref));
  const Coo4Arrays<V> arr(st.pool, it.ref, n);
  const std::uint64_t in_base = (st.transposed ? it.brow : it.bcol) << st.log2d;
  const std::uint32_t end = min(n, begin + len);
  for (std::uint32_t q = begin / 4 + lane; 4 * q < end; q += step) {
    V a[4];
    load4(arr.vals + 4 * q, a);
    quad_to_acc(arr.c4[q], a, min(4u, end - 4 * q), in_base, st, acc);
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

// A COO4 leaf summed by the whole warp (lane_leaf_max < n <= 1024): the
// lane whose child it is, its count, and this lane's first quad, loaded
// ahead. Its block and arrays come from that lane when needed (two leaves
// in flight, each with its block and pointers, spilled at 64 registers).
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
      coo4_rows_to_acc(words, a, m, st.x + in_base, acc);
    }
  }
};

template <class V>
struct LeafParentProcedure {
  using payload_type = NodeItem;
  static constexpr std::uint32_t threads_per_item = 32;  // warp-collective: route() and the warp's leaves
  static constexpr std::uint32_t shared_bytes = 256 * sizeof(V);  // d accumulators, d <= 256
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
