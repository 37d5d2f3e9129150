#pragma once
// How SpMV's products reach y. Every leaf entry adds alpha*scale*a*x into y
// with an atomic add, or first into a warp's accumulators in shared memory
// (leaves of many entries), which are flushed with one atomic per touched
// output (in f32 four neighbouring outputs with one 16-byte atomic); the
// plan's output tiles write y once instead. The order of the additions
// depends on scheduling, so results can differ in the last bits between
// runs (not bit-reproducible); the host reference sums in double and is the
// specification within rounding.
#include "spmv_items.cuh"

namespace hisparse::ops::spmv_gpu {

// Adds v into y[i] with a reduction (red): no value comes back. atomicAdd
// whose result is unused compiled to ATOM here (Nsight Compute: 56 M atom
// sectors in L2 for R-MAT's wide chunks, none red), and an atom's reply
// takes L2 bandwidth the kernel is bound by (perf-log 29).
__device__ inline void add_to_y(float* p, float v) {
  asm volatile("red.global.add.f32 [%0], %1;" ::"l"(__cvta_generic_to_global(p)), "f"(v) : "memory");
}
__device__ inline void add_to_y(double* p, double v) {
  asm volatile("red.global.add.f64 [%0], %1;" ::"l"(__cvta_generic_to_global(p)), "d"(v) : "memory");
}
__device__ inline void add_to_y(float4* p, float4 v) {
  asm volatile("red.global.v4.f32.add [%0], {%1, %2, %3, %4};" ::"l"(__cvta_generic_to_global(p)), "f"(v.x), "f"(v.y),
               "f"(v.z), "f"(v.w)
               : "memory");
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
  add_to_y(st.y + p.key, p.val);
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
      if (out != ~std::uint64_t{0}) add_to_y(st.y + out, st.k * sum);
      out = o;
      sum = V(0);
    }
  }
};

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
    if (valid) add_to_y(y + key, val);
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
  if (head) add_to_y(y + key, val);
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
          add_to_y(reinterpret_cast<float4*>(st.y + o), make_float4(part(v.x), part(v.y), part(v.z), part(v.w)));
        } else {
          const float a[4] = {v.x, v.y, v.z, v.w};
          for (std::uint32_t j = 0; j < 4; ++j)
            if (a[j] != 0.f) add_to_y(st.y + o + j, st.k * a[j]);
        }
      }
      return;
    }
  }
  for (std::uint32_t o = tid; o < count; o += threads) {
    const V v = acc[o];
    if (v != V(0)) {
      add_to_y(st.y + out_base + o, st.k * v);
      acc[o] = V(0);
    }
  }
}

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
// `slot` maps a local row to its place in out (the tiles' accumulators are
// swizzled, tile_slot).
template <class V, class Slot>
__device__ inline void coo4_rows_to_acc(const std::uint32_t (&words)[2], const V (&a)[4], std::uint32_t m, const V* x,
                                         V* out, Slot slot) {
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
        else out[slot(row)] += sum;
        in_head = false;
        row = r;
        sum = V(0);
      }
      sum += a[j] * x[(w >> 8) & 0xFFu];
    }
  }
  if (m > 0) {
    if (in_head) head_sum = sum;
    else out[slot(row)] += sum;
  }
  __syncwarp();
  if (m > 0) atomicAdd(out + slot(head_row), head_sum);
}

}  // namespace hisparse::ops::spmv_gpu
