#pragma once
// One step of a level-by-level walk down a node pool, by a warp: how many
// children an inner node has, and each child with its local coordinates, in
// the node's order (row-major). Shared by the walks that list a matrix's
// nodes a level at a time: the conversion's extraction and the GPU edit
// (ops/convert/gpu/frontier.cuh) and SpMV plan building
// (ops/spmv/gpu/spmv_plan_leaves.cuh). Device functions only: each package
// has its own kernels (the op units are separate translation units, and a
// kernel instantiated in both would be registered twice).
//
// A warp per node: an inner node near the root of a large matrix holds up to
// d^2 cells (16 384 at d = 128), and one thread walking them alone was most of
// the extraction's frontier time on R-MAT 2^22 (perf-log C12). A level of few
// nodes splits each node over several warps (NodeSplit): one warp walking
// R-MAT 2^21's dense root, 512 dependent steps of 32 cells, took 0.45 ms of a
// 1.3 ms plan build (perf-log R8).
#include <cuda_runtime.h>

#include <cstdint>

#include "hisparse/formats/node.hpp"

namespace hisparse::ops::gpu {

// How a level's nodes are shared out: `per_node` warps per node, each taking
// `length` consecutive cells (dense) or entries (sparse) of it. Warp w walks
// node w / per_node, from cell or entry (w % per_node) * length on; the
// children of a node's segments are consecutive, in the node's order, so a
// scan over warps places them as a scan over nodes would.
struct NodeSplit {
  std::uint32_t per_node = 1;
  std::uint32_t length = ~0u;
  // The level's warps (segments), one per node unless split.
  [[nodiscard]] __host__ __device__ std::uint64_t warps(std::uint64_t nodes) const { return nodes * per_node; }
  [[nodiscard]] __host__ __device__ std::uint32_t begin(std::uint64_t w) const {
    return static_cast<std::uint32_t>(w % per_node) * length;
  }
};

// A node's most children is d^2; levels of at most `split_nodes_most` nodes
// give each node a warp per `split_length` of them (the rest of the GPU idles
// anyway), larger levels a warp per node.
inline constexpr std::uint32_t split_length = 1024;
inline constexpr std::uint64_t split_nodes_most = 4096;
inline NodeSplit node_split(std::uint64_t nodes, std::uint32_t log2d) {
  const std::uint32_t cells = 1u << (2 * log2d);
  if (nodes > split_nodes_most || cells <= split_length) return {};
  return {cells / split_length, split_length};
}

// The end of a segment [begin, begin + length) of `total` cells or entries
// (begin when it starts past them).
__device__ inline std::uint32_t segment_end(std::uint32_t total, std::uint32_t begin, std::uint32_t length) {
  return begin + (total > begin ? min(total - begin, length) : 0u);
}

// The children of inner node `r` (dense: its present cells; sparse: its
// entries) among its cells or entries [begin, begin + length). Warp-
// collective (a converged warp, `lane` its lane); every lane gets the count.
__device__ inline std::uint32_t warp_child_count(const std::byte* pool, NodeRef r, std::uint32_t log2d,
                                                 std::uint32_t lane, std::uint32_t begin = 0,
                                                 std::uint32_t length = ~0u) {
  if (ref_type(r) != NodeType::dense) {
    return segment_end(*reinterpret_cast<const std::uint32_t*>(pool + ref_offset(r)), begin, length) - begin;
  }
  const std::uint32_t end = segment_end(1u << (2 * log2d), begin, length);
  const auto* refs = reinterpret_cast<const NodeRef*>(pool + ref_offset(r));
  std::uint32_t c = 0;
#pragma unroll 8
  for (std::uint32_t i = begin + lane; i < end; i += 32) c += refs[i] != null_ref;
  return __reduce_add_sync(~0u, c);
}

// emit(k, child, row, col) for the k-th child of inner node `r` among its
// cells or entries [begin, begin + length) (k counts from 0 in the node's
// order there; row, col its local coordinates). Warp-collective; lanes emit
// different children at once.
template <class Emit>
__device__ inline void warp_for_each_child(const std::byte* pool, NodeRef r, std::uint32_t log2d, std::uint32_t lane,
                                           Emit&& emit, std::uint32_t begin = 0, std::uint32_t length = ~0u) {
  const std::uint32_t b = log2d;
  if (ref_type(r) == NodeType::dense) {
    // Present cells keep their order: a ballot per 32 cells places them.
    const std::uint32_t cells = 1u << (2 * b), below = (1u << lane) - 1;
    const std::uint32_t end = segment_end(cells, begin, length);
    const auto* refs = reinterpret_cast<const NodeRef*>(pool + ref_offset(r));
    std::uint32_t k = 0;
    for (std::uint32_t base = begin; base < end; base += 32) {
      const std::uint32_t i = base + lane;
      const NodeRef c = i < end ? refs[i] : null_ref;
      const unsigned present = __ballot_sync(~0u, c != null_ref);
      if (c != null_ref) emit(k + __popc(present & below), c, i >> b, i & ((1u << b) - 1));
      k += __popc(present);
    }
    return;
  }
  const std::uint32_t n = *reinterpret_cast<const std::uint32_t*>(pool + ref_offset(r));
  const CooLayout l = coo_layout(ref_type(r), n, sizeof(NodeRef));
  const auto* coords = reinterpret_cast<const LocalCoord*>(pool + ref_offset(r) + l.coord_offset);
  const auto* refs = reinterpret_cast<const NodeRef*>(pool + ref_offset(r) + l.value_offset);
  const std::uint32_t end = segment_end(n, begin, length);
  for (std::uint32_t i = begin + lane; i < end; i += 32)
    emit(i - begin, refs[i], std::uint32_t{coords[i].row}, std::uint32_t{coords[i].col});
}

}  // namespace hisparse::ops::gpu
