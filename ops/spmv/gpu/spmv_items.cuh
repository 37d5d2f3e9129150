#pragma once
// SpMV's unit of work and state, shared by the runtime's procedures
// (spmv_procedures.cuh) and the plan's kernels: a node item, the leaf bins,
// the op's state, and the format reads every leaf function needs.
#include <cuda_runtime.h>

#include <cstdint>

#include "hisparse/formats/node_view.hpp"
#include "hisparse/ops/spmv_gpu.hpp"

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
// wide (COOW) nodes. The plan lists every bin; a traversal gives items only
// to the last three (a leaf-parent item sums the rest, spmv_procedures.cuh).
// A wide node is a level depth-2 node with 16-bit coordinates that stands
// for a whole d^2 x d^2 sub-tree (format.md). It is cut into chunks
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
inline constexpr std::uint32_t wide_block_chunk = spmv_wide_chunk_entries;
inline constexpr std::uint32_t wide_block_threads = wide_block_chunk / 4;  // four entries per thread, one step

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

// Entries of a sparse leaf (COO1 without reading its header).
__device__ inline std::uint32_t leaf_entries(const std::byte* pool, NodeRef ref) {
  return ref_type(ref) == NodeType::coo1 ? 1u : *reinterpret_cast<const std::uint32_t*>(pool + ref_offset(ref));
}

// The bin a leaf goes to, from its reference and (for sparse nodes) its count.
__device__ inline std::uint32_t leaf_bin(const std::byte* pool, NodeRef ref) {
  switch (ref_type(ref)) {
    case NodeType::dense: return bin_dense;
    case NodeType::coo1: return bin_one;
    default: return leaf_entries(pool, ref) <= small_leaf_max ? bin_small : bin_large;
  }
}

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

// Four consecutive values with 16-byte stores (shared staging: a lane's
// four scalar stores at 4 l + j met four or eight lanes to a bank).
__device__ inline void store4(float* p, const float (&a)[4]) {
  *reinterpret_cast<float4*>(p) = make_float4(a[0], a[1], a[2], a[3]);
}
__device__ inline void store4(double* p, const double (&a)[4]) {
  reinterpret_cast<double2*>(p)[0] = make_double2(a[0], a[1]);
  reinterpret_cast<double2*>(p)[1] = make_double2(a[2], a[3]);
}

// Loads of the pool's stream, read once: in f64 with __ldcs (evict-first),
// which keeps the lines from pushing x out of the caches (the Laplacian
// 4096^2's tile SpMV -6%); in f32 that cost 1-2% (perf-log 24), so f32
// loads plainly. One policy for the values and the coordinates.
template <class V>
inline constexpr bool evict_first_entries = sizeof(V) == 8;

template <class V>
__device__ inline void load4_streamed(const V* p, V (&a)[4]) {
  if constexpr (evict_first_entries<V>) {
    const double2 u = __ldcs(reinterpret_cast<const double2*>(p)), v = __ldcs(reinterpret_cast<const double2*>(p) + 1);
    a[0] = u.x; a[1] = u.y; a[2] = v.x; a[3] = v.y;
  } else {
    load4(p, a);
  }
}
template <class V>
__device__ inline uint2 load_coords_streamed(const uint2* p) {
  if constexpr (evict_first_entries<V>) return __ldcs(p);
  else return *p;
}

}  // namespace hisparse::ops::spmv_gpu
