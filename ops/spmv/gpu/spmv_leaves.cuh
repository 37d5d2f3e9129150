#pragma once
// SpMV's leaf functions: the work of one leaf (or a chunk of it) spread over
// a group of lanes, for every node kind. The runtime's procedures
// (spmv_procedures.cuh) and the plan's kernels call the same functions; the
// one- and few-entry functions (bins one and small) serve the plan only: in a
// traversal a leaf-parent item sums those leaves itself.
#include "spmv_accumulate.cuh"

namespace hisparse::ops::spmv_gpu {

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
  // The same with the pool stream's load policy (load4_streamed: evict-first
  // in f64, so that x stays in L2).
  __device__ void quad_streamed(std::uint32_t e, std::uint32_t (&words)[4], V (&a)[4]) const {
    const uint2 w0 = load_coords_streamed<V>(coords + e / 2), w1 = load_coords_streamed<V>(coords + e / 2 + 1);
    words[0] = w0.x, words[1] = w0.y, words[2] = w1.x, words[3] = w1.y;
    load4_streamed(values + e, a);
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
    else add_to_y(st.y + run.out, st.k * run.sum);
  }
}

// A COO4 leaf's coordinate quads and value array, from its reference and
// entry count (no header load).
template <class V>
struct Coo4Arrays {
  const uint2* c4;
  const V* vals;
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
// riders between them (spmv_plan_kernels.cuh, spmv_plan_agents.cuh). `acc` holds d
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
    if (any) add_to_y(st.y + (col_base | (lane & ((1u << b) - 1u))), st.k * sum);
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

}  // namespace hisparse::ops::spmv_gpu
