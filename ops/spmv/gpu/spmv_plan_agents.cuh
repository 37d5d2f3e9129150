#pragma once
// Agents of the cached SpMV plan (spmv_gpu.cu): work that needs the whole
// plan in view, so the runtime's one-item-per-leaf procedures cannot do it.
//
// - Output-block runs (warp): the plan sorts its sparse leaves by the block of
//   d outputs they add into (block row for A, block column for A^T) and cuts
//   them into runs; a warp sums a run's products in shared memory and adds
//   the block into y once. A circuit's long column (in A) puts one entry per
//   row into each leaf: per leaf, that was one global atomic per entry; in a
//   run it is a shared-memory add beside the band's leaf of the same rows.
// - Wide-node columns (block, A^T): COOW entries are row-major, so in A^T a
//   chunk's outputs (columns) are scattered and a warp cannot merge them; a
//   block sums a chunk into a shared accumulator of the node's d^2 columns
//   and adds only the touched ones.
//
// Both flush through flush_outputs: f32 blocks go out four at a time with the
// sm_90 vector atomic (one L2 operation for 16 bytes).
#include <cuda_runtime.h>

#include <cstdint>

#include "spmv_procedures.cuh"

namespace hisparse::ops::spmv_gpu {

// The entries of a recorded sparse item: a leaf of the one-entry or small bin
// is whole; a large leaf's item is a chunk of st.large_chunk entries (its
// `level` holds the chunk index). Large is recognised by its count, as the
// bins were chosen (leaf_bin).
struct ItemSpan {
  std::uint32_t begin;
  std::uint32_t count;
};
__device__ inline ItemSpan item_span(const std::byte* pool, const NodeItem& it, std::uint32_t large_chunk) {
  if (ref_type(it.ref) == NodeType::coo1) return {0, 1};
  const std::uint32_t n = *reinterpret_cast<const std::uint32_t*>(pool + ref_offset(it.ref));
  if (n <= small_leaf_max) return {0, n};
  const std::uint32_t b = it.level * large_chunk;
  return {b, min(n, b + large_chunk) - b};
}

// Adds k * acc[o] into y[out_base + o] for the touched outputs o < count and
// clears acc; thread `tid` of `threads` (a warp's lanes or a block's threads).
// An untouched output holds 0 and is skipped. In the f32 vector path, a zero
// beside touched ones is sent as -0.0, which leaves every value (even -0.0)
// unchanged, so both paths give the same y. The vector path needs 16-byte
// alignment of y (checked by the host: st.y_vec4) and all four outputs inside
// y (st.y_size).
template <class V>
__device__ inline void flush_outputs(V* acc, std::uint32_t count, std::uint64_t out_base, std::uint32_t tid,
                                     std::uint32_t threads, const SpmvState<V>& st) {
  if constexpr (sizeof(V) == 4) {
    if (st.y_vec4 && count % 4 == 0) {
      for (std::uint32_t q = tid; q < count / 4; q += threads) {
        float4 v = reinterpret_cast<const float4*>(acc)[q];
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

// A run of the plan's order: positions [first, last) of `order`, indices of
// items whose leaves add into the same output block. The warp takes 32 items
// at a time and spreads their entries over its lanes in groups of four (an
// item's quads, found by a search over the warp's prefix of quad counts), so
// a run of one-entry leaves keeps every lane busy as a large leaf does.
// `acc`: d zeros of shared memory on entry and on exit.
template <class V>
__device__ inline void output_run(const NodeItem* items, const std::uint32_t* order, std::uint32_t first,
                                  std::uint32_t last, std::uint32_t lane, const SpmvState<V>& st, V* acc) {
  constexpr unsigned full = 0xffffffffu;
  const std::uint32_t b = st.log2d;
  const NodeItem head = items[order[first]];
  const std::uint64_t out_block = st.transposed ? head.bcol : head.brow;
  for (std::uint32_t batch = first; batch < last; batch += 32) {
    // This lane's item: reference, entry span, input block, quads.
    NodeRef ref = null_ref;
    ItemSpan span{0, 0};
    std::uint64_t in_block = 0;
    std::uint32_t n = 0;
    if (batch + lane < last) {
      const NodeItem it = items[order[batch + lane]];
      ref = it.ref;
      n = ref_type(ref) == NodeType::coo1 ? 1u : *reinterpret_cast<const std::uint32_t*>(st.pool + ref_offset(ref));
      span = item_span(st.pool, it, st.large_chunk);
      in_block = st.transposed ? it.brow : it.bcol;
    }
    const std::uint32_t quads = (span.count + 3) / 4;
    std::uint32_t incl = quads;  // inclusive prefix over the lanes
    for (std::uint32_t off = 1; off < 32; off <<= 1) {
      const std::uint32_t t = __shfl_up_sync(full, incl, off);
      if (lane >= off) incl += t;
    }
    const std::uint32_t total = __shfl_sync(full, incl, 31);
    for (std::uint32_t q0 = 0; q0 < total; q0 += 32) {  // uniform trip count: every lane shuffles
      const std::uint32_t q = q0 + lane;
      // The item holding quad q: the number of lanes whose prefix is <= q.
      std::uint32_t j = 0;
      for (std::uint32_t step = 16; step > 0; step >>= 1)
        if (__shfl_sync(full, incl, j + step - 1) <= q) j += step;
      const NodeRef jref = __shfl_sync(full, ref, j);
      const std::uint32_t jn = __shfl_sync(full, n, j);
      const std::uint32_t jbegin = __shfl_sync(full, span.begin, j);
      const std::uint32_t jend = jbegin + __shfl_sync(full, span.count, j);
      const std::uint32_t jfirst_quad = __shfl_sync(full, incl - quads, j);
      const std::uint64_t in_base = __shfl_sync(full, in_block, j) << b;
      if (q >= total) continue;
      const std::uint32_t e = jbegin + 4 * (q - jfirst_quad);
      const std::uint32_t m = min(4u, jend - e);
      const std::byte* node = st.pool + ref_offset(jref);
      if (ref_type(jref) == NodeType::coo4) {
        // e is a multiple of 4 (chunks are multiples of 128): one vector load each.
        const CooLayout l = coo_layout(NodeType::coo4, jn, sizeof(V));
        const uint2 cw = reinterpret_cast<const uint2*>(node + l.coord_offset)[e / 4];
        V a[4];
        load4(reinterpret_cast<const V*>(node + l.value_offset) + e, a);
        const std::uint32_t words[2] = {cw.x, cw.y};
#pragma unroll
        for (std::uint32_t k = 0; k < 4; ++k) {
          if (k < m) {
            const std::uint32_t row = (words[k / 2] >> (16 * (k % 2))) & 0xFFu;
            const std::uint32_t col = (words[k / 2] >> (16 * (k % 2) + 8)) & 0xFFu;
            atomicAdd(acc + (st.transposed ? col : row), a[k] * st.x[in_base + (st.transposed ? row : col)]);
          }
        }
      } else {
        const CooLayout l = coo_layout(ref_type(jref), jn, sizeof(V));
        const auto* coords = reinterpret_cast<const LocalCoord*>(node + l.coord_offset);
        const V* vals = reinterpret_cast<const V*>(node + l.value_offset);
        for (std::uint32_t k = 0; k < m; ++k) {
          const LocalCoord lc = coords[e + k];
          atomicAdd(acc + (st.transposed ? lc.col : lc.row), vals[e + k] * st.x[in_base + (st.transposed ? lc.row : lc.col)]);
        }
      }
    }
  }
  __syncwarp();
  flush_outputs(acc, 1u << b, out_block << b, lane, 32, st);
  __syncwarp();
}

// SpMV^T of one chunk of a wide (COOW) node (`level` holds the chunk index)
// by a whole block: thread `tid` of `threads` adds its four entries' products
// into acc[column], then the block adds the touched columns into y. `acc`:
// the node's d^2 columns, zeros on entry and on exit. Calls __syncthreads.
template <class V>
__device__ inline void wide_columns(const NodeItem& it, std::uint32_t tid, std::uint32_t threads,
                                    const SpmvState<V>& st, V* acc) {
  const std::byte* node = st.pool + ref_offset(it.ref);
  const std::uint32_t n = *reinterpret_cast<const std::uint32_t*>(node);
  const CooLayout l = coow_layout(n, sizeof(V));
  const auto* c2 = reinterpret_cast<const uint2*>(node + l.coord_offset);
  const V* vals = reinterpret_cast<const V*>(node + l.value_offset);
  const std::uint32_t shift = 2 * st.log2d;
  const std::uint64_t row_base = it.brow << shift;
  const std::uint32_t begin = it.level * wide_block_chunk, end = min(n, begin + wide_block_chunk);
  for (std::uint32_t e = begin + 4 * tid; e < end; e += 4 * threads) {
    const std::uint32_t m = min(4u, end - e);
    const uint2 w0 = c2[e / 2], w1 = c2[e / 2 + 1];
    V a[4];
    load4(vals + e, a);
    const std::uint32_t words[4] = {w0.x, w0.y, w1.x, w1.y};  // WideCoord: row in the low half
#pragma unroll
    for (std::uint32_t j = 0; j < 4; ++j)
      if (j < m) atomicAdd(acc + (words[j] >> 16), a[j] * st.x[row_base | (words[j] & 0xFFFFu)]);
  }
  __syncthreads();
  flush_outputs(acc, 1u << shift, it.bcol << shift, tid, threads, st);
  __syncthreads();
}

}  // namespace hisparse::ops::spmv_gpu
