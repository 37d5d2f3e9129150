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
// the extraction's frontier time on R-MAT 2^22 (perf-log C12).
#include <cuda_runtime.h>

#include <cstdint>

#include "hisparse/formats/node.hpp"

namespace hisparse::ops::gpu {

// The children of inner node `r` (dense: its present cells; sparse: its
// entries). Warp-collective (a converged warp, `lane` its lane); every lane
// gets the count.
__device__ inline std::uint32_t warp_child_count(const std::byte* pool, NodeRef r, std::uint32_t log2d,
                                                 std::uint32_t lane) {
  if (ref_type(r) != NodeType::dense) return *reinterpret_cast<const std::uint32_t*>(pool + ref_offset(r));
  const std::uint32_t cells = 1u << (2 * log2d);
  const auto* refs = reinterpret_cast<const NodeRef*>(pool + ref_offset(r));
  std::uint32_t c = 0;
#pragma unroll 8
  for (std::uint32_t i = lane; i < cells; i += 32) c += refs[i] != null_ref;
  return __reduce_add_sync(~0u, c);
}

// emit(k, child, row, col) for the k-th child of inner node `r` (k counts
// from 0 in the node's order; row, col its local coordinates). Warp-
// collective; lanes emit different children at once.
template <class Emit>
__device__ inline void warp_for_each_child(const std::byte* pool, NodeRef r, std::uint32_t log2d, std::uint32_t lane,
                                           Emit&& emit) {
  const std::uint32_t b = log2d;
  if (ref_type(r) == NodeType::dense) {
    // Present cells keep their order: a ballot per 32 cells places them.
    const std::uint32_t cells = 1u << (2 * b), below = (1u << lane) - 1;
    const auto* refs = reinterpret_cast<const NodeRef*>(pool + ref_offset(r));
    std::uint32_t k = 0;
    for (std::uint32_t base = 0; base < cells; base += 32) {
      const std::uint32_t i = base + lane;
      const NodeRef c = i < cells ? refs[i] : null_ref;
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
  for (std::uint32_t i = lane; i < n; i += 32) emit(i, refs[i], std::uint32_t{coords[i].row}, std::uint32_t{coords[i].col});
}

}  // namespace hisparse::ops::gpu
