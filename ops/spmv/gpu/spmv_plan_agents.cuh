#pragma once
// Agent of the cached SpMV plan (spmv_gpu.cu) for SpMV^T of wide (COOW)
// nodes. Their entries are row-major, so in A^T a chunk's outputs (columns)
// are scattered: a warp chunk (leaf_coow) can merge almost none of them and
// adds one global atomic per entry (16 M for R-MAT scale 20). A block instead
// sums a chunk of 4096 entries into a shared accumulator of the node's d^2
// columns and adds only the touched ones, four at a time in f32 (R-MAT: about
// one global operation per distinct column and node, 5.8 M).
#include <cuda_runtime.h>

#include <cstdint>

#include "spmv_procedures.cuh"

namespace hisparse::ops::spmv_gpu {

// SpMV^T of one chunk of a wide (COOW) node (`level` holds the chunk index)
// by a whole block: thread `tid` of `threads` adds its four entries' products
// into acc[column], then the block adds the touched columns into y. `acc`:
// the node's d^2 columns, zeros on entry and on exit. Calls __syncthreads.
template <class V>
__device__ inline void wide_columns(const NodeItem& it, std::uint32_t tid, std::uint32_t threads,
                                    const SpmvState<V>& st, V* acc) {
  const CoowArrays<V> node = coow_arrays<V>(st.pool, it.ref);
  const std::uint32_t shift = 2 * st.log2d;
  const std::uint64_t row_base = it.brow << shift;
  const std::uint32_t begin = it.level * wide_block_chunk, end = min(node.count, begin + wide_block_chunk);
  for (std::uint32_t e = begin + 4 * tid; e < end; e += 4 * threads) {
    const std::uint32_t m = min(4u, end - e);
    std::uint32_t words[4];
    V a[4];
    node.quad(e, words, a);
#pragma unroll
    for (std::uint32_t j = 0; j < 4; ++j)
      if (j < m) atomicAdd(acc + (words[j] >> 16), a[j] * st.x[row_base | (words[j] & 0xFFFFu)]);
  }
  __syncthreads();
  flush_outputs(acc, 1u << shift, it.bcol << shift, tid, threads, st);
  __syncthreads();
}

}  // namespace hisparse::ops::spmv_gpu
