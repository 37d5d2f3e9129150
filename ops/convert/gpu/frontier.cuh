#pragma once
// One level of a walk down a node pool on the GPU: a frontier of nodes (with
// their block coordinates) replaced by their children, in tree order, a warp
// per node, several on a level of few nodes (hisparse/ops/node_walk.cuh).
// Serves the extraction (extract_gpu.cuh) and the GPU edit's reading of old
// entries.
#include <cstdint>

#include "hisparse/formats/node.hpp"
#include "hisparse/ops/node_walk.cuh"
#include "work_memory.cuh"

namespace hisparse::ops::convert_detail {

using u32 = std::uint32_t;
using u64 = std::uint64_t;

// A node of the frontier: its reference and block coordinates at its level.
// A COOW node travels down to the leaf level unchanged (its coordinates stay
// those of level depth-2), so the last frontier holds the leaves and COOW
// nodes in tree order.
struct Frontier {
  const u32* ref;
  const u64* R;
  const u64* C;
  u64 size;
};

__device__ inline u32 node_count_word(const std::byte* pool, NodeRef r) {
  return *reinterpret_cast<const u32*>(pool + ref_offset(r));
}

// Children per node (1 for a COOW node passed down), per warp of the level's
// split (gpu::NodeSplit); count[warps] = 0 so that the exclusive scan's last
// element is the next frontier's size.
__global__ void child_count_kernel(Frontier f, gpu::NodeSplit split, const std::byte* pool, u32 log2_d, u64* count) {
  const u32 lane = threadIdx.x & 31;
  const u64 stride = (u64(gridDim.x) * blockDim.x) / 32, warps = split.warps(f.size);
  for (u64 w = (blockIdx.x * u64(blockDim.x) + threadIdx.x) / 32; w <= warps; w += stride) {
    u32 c = 0;
    if (w < warps) {
      const NodeRef r = f.ref[w / split.per_node];
      const u32 begin = split.begin(w);
      c = ref_type(r) == NodeType::coow ? u32{begin == 0}
                                        : gpu::warp_child_count(pool, r, log2_d, lane, begin, split.length);
    }
    if (lane == 0) count[w] = c;
  }
}

__global__ void expand_kernel(Frontier f, gpu::NodeSplit split, const std::byte* pool, u32 log2_d, const u64* first,
                              u32* ref, u64* R, u64* C) {
  const u32 b = log2_d, lane = threadIdx.x & 31;
  const u64 stride = (u64(gridDim.x) * blockDim.x) / 32, warps = split.warps(f.size);
  for (u64 w = (blockIdx.x * u64(blockDim.x) + threadIdx.x) / 32; w < warps; w += stride) {
    const u64 k = w / split.per_node;
    const NodeRef r = f.ref[k];
    const u64 fr = f.R[k], fc = f.C[k], o = first[w];
    const u32 begin = split.begin(w);
    if (ref_type(r) == NodeType::coow) {
      if (lane == 0 && begin == 0) {
        ref[o] = r;
        R[o] = fr;
        C[o] = fc;
      }
      continue;
    }
    gpu::warp_for_each_child(
        pool, r, b, lane,
        [&](u32 i, NodeRef c, u32 row, u32 col) {
          ref[o + i] = c;
          R[o + i] = (fr << b) | row;
          C[o + i] = (fc << b) | col;
        },
        begin, split.length);
  }
}

// Replaces the frontier (ref, R, C; `size` nodes) by the nodes one level down.
inline void expand_frontier(WorkMemory& w, const std::byte* pool, u32 log2_d, Array<u32>& ref, Array<u64>& R,
                            Array<u64>& C, u64& size, const char* what) {
  const cudaStream_t st = w.stream();
  const Frontier f{ref.get(), R.get(), C.get(), size};
  const gpu::NodeSplit split = gpu::node_split(size, log2_d);
  const u64 warps = split.warps(size);
  Array<u64> count(w, warps + 1), first(w, warps + 1);
  child_count_kernel<<<warp_grid(warps + 1), 256, 0, st>>>(f, split, pool, log2_d, count.get());
  w.check_launch(what);
  exclusive_sum(w, count.get(), first.get(), warps + 1);
  const u64 next = read_back(w, first.get() + warps, what);
  count.release();
  Array<u32> ref2(w, next);
  Array<u64> R2(w, next), C2(w, next);
  expand_kernel<<<warp_grid(warps), 256, 0, st>>>(f, split, pool, log2_d, first.get(), ref2.get(), R2.get(), C2.get());
  w.check_launch(what);
  ref = std::move(ref2);
  R = std::move(R2);
  C = std::move(C2);
  size = next;
}

}  // namespace hisparse::ops::convert_detail
