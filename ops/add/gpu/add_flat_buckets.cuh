#pragma once
// The flat add's buckets: a transposed operand sorted by unit (add_flat.cuh).
#include <cuda_runtime.h>

#include <cstdint>

#include "add_flat_state.cuh"

namespace hisparse::ops::add_gpu {

// ---- buckets --------------------------------------------------------------------
// A transposed operand is first sorted into per-unit buckets, in parallel
// over all its entries: a unit's rows are columns of it, scattered through
// every leaf (or the COOW node) of a block column.

__host__ __device__ inline bool flat_bucketed(bool transposed, NodeRef ref) {
  return ref != null_ref && transposed;
}

// A transposed root of at most this many entries is not bucketed: each
// unit's warp walks all of it for its rows (FlatUnitSource::scan), which
// saves a tiny add the buckets' zeroing and two launches (perf-log A12).
// Decided on the host for the roots of a depth-2 add (FlatArgs::scanned);
// the sub-tree pairs of deeper adds are always bucketed.
inline constexpr std::uint64_t flat_scan_entries = 1024;

inline bool flat_scanned(bool transposed, NodeRef root, std::uint64_t nnz) {
  return transposed && root != null_ref && nnz <= flat_scan_entries;
}

// Every entry of one operand, in the result's orientation: f(row16, col16,
// value) with 16-bit coordinates local to the node. Grid-stride: a thread
// per entry of a COOW node, a warp per child of an inner node. Lanes call f
// in convergent groups (f may use __activemask()).
template <class V, class F>
__device__ void flat_for_each_entry(const Operand<V>& op, NodeRef ref, std::uint32_t b, F&& f) {
  const std::byte* pool = op.pool;
  const std::uint32_t d = 1u << b;
  auto emit = [&](std::uint32_t r16, std::uint32_t c16, V v) { op.transposed ? f(c16, r16, v) : f(r16, c16, v); };
  if (ref_type(ref) == NodeType::coow) {
    const CoowView<V> w = coow_view<V>(pool, ref);
    for (std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < w.count; i += gridDim.x * blockDim.x)
      emit(w.coords[i].row, w.coords[i].col, w.values[i]);
    return;
  }
  const bool dense = ref_type(ref) == NodeType::dense;
  const NodeRef* cells = dense ? dense_values<NodeRef>(pool, ref, b, false) : nullptr;
  const CooView<NodeRef> v = dense ? CooView<NodeRef>{} : coo_view<NodeRef>(pool, ref);
  const std::uint32_t children = dense ? d * d : v.count;
  const std::uint32_t lane = threadIdx.x % 32;
  for (std::uint32_t ci = (blockIdx.x * blockDim.x + threadIdx.x) / 32; ci < children;
       ci += gridDim.x * blockDim.x / 32) {
    const NodeRef leaf = dense ? cells[ci] : v.values[ci];
    if (leaf == null_ref) continue;
    const std::uint32_t r0 = (dense ? ci >> b : v.coords[ci].row) << b;
    const std::uint32_t c0 = (dense ? ci & (d - 1) : v.coords[ci].col) << b;
    if (ref_type(leaf) == NodeType::dense) {
      const std::uint8_t* mask = dense_mask(pool, leaf);
      const V* vals = dense_values<V>(pool, leaf, b, true);
      for (std::uint32_t cell = lane; cell < d * d; cell += 32)
        if (mask_bit(mask, cell)) emit(r0 | (cell >> b), c0 | (cell & (d - 1)), vals[cell]);
    } else {
      const CooView<V> e = coo_view<V>(pool, leaf);
      for (std::uint32_t i = lane; i < e.count; i += 32) emit(r0 | e.coords[i].row, c0 | e.coords[i].col, e.values[i]);
    }
  }
}

// Every entry of one operand in the result's orientation, by one warp in
// whole-warp steps: f(valid, row16, col16, value) on every lane of each step
// (so that f may use the warp's ballots); the order is the pool's.
template <class V, class F>
__device__ void flat_warp_for_each_entry(const Operand<V>& op, NodeRef ref, std::uint32_t b, std::uint32_t lane,
                                         F&& f) {
  const std::byte* pool = op.pool;
  const std::uint32_t d = 1u << b;
  auto emit = [&](bool valid, std::uint32_t r16, std::uint32_t c16, V v) {
    op.transposed ? f(valid, c16, r16, v) : f(valid, r16, c16, v);
  };
  if (ref_type(ref) == NodeType::coow) {
    const CoowView<V> w = coow_view<V>(pool, ref);
    for (std::uint32_t base = 0; base < w.count; base += 32) {
      const std::uint32_t i = base + lane;
      const bool valid = i < w.count;
      emit(valid, valid ? w.coords[i].row : 0u, valid ? w.coords[i].col : 0u, valid ? w.values[i] : V(0));
    }
    return;
  }
  const bool dense = ref_type(ref) == NodeType::dense;
  const NodeRef* cells = dense ? dense_values<NodeRef>(pool, ref, b, false) : nullptr;
  const CooView<NodeRef> v = dense ? CooView<NodeRef>{} : coo_view<NodeRef>(pool, ref);
  const std::uint32_t children = dense ? d * d : v.count;
  for (std::uint32_t base = 0; base < children; base += 32) {
    const std::uint32_t ci = base + lane;
    const NodeRef mine = ci < children ? (dense ? cells[ci] : v.values[ci]) : null_ref;
    for (unsigned present = __ballot_sync(full_warp, mine != null_ref); present != 0u; present &= present - 1u) {
      const std::uint32_t j = static_cast<std::uint32_t>(__ffs(present) - 1), cj = base + j;
      const NodeRef leaf = __shfl_sync(full_warp, mine, j);
      const std::uint32_t r0 = (dense ? cj >> b : v.coords[cj].row) << b;
      const std::uint32_t c0 = (dense ? cj & (d - 1) : v.coords[cj].col) << b;
      if (ref_type(leaf) == NodeType::dense) {
        const std::uint8_t* mask = dense_mask(pool, leaf);
        const V* vals = dense_values<V>(pool, leaf, b, true);
        for (std::uint32_t cell0 = 0; cell0 < d * d; cell0 += 32) {
          const std::uint32_t cell = cell0 + lane;
          const bool valid = cell < d * d && mask_bit(mask, cell);
          emit(valid, r0 | (cell >> b), c0 | (cell & (d - 1)), valid ? vals[cell] : V(0));
        }
      } else {
        const CooView<V> e = coo_view<V>(pool, leaf);
        for (std::uint32_t i0 = 0; i0 < e.count; i0 += 32) {
          const std::uint32_t i = i0 + lane;
          const bool valid = i < e.count;
          emit(valid, valid ? r0 | e.coords[i].row : 0u, valid ? c0 | e.coords[i].col : 0u, valid ? e.values[i] : V(0));
        }
      }
    }
  }
}

// Adds n to buckets[k] once for the lanes that share k; returns this lane's
// place among them (after the bucket's old value).
__device__ inline std::uint32_t flat_bucket_add(unsigned* counter, std::uint32_t k) {
  const unsigned peers = __match_any_sync(__activemask(), k);
  const std::uint32_t lane = threadIdx.x & 31u;
  const int leader = __ffs(peers) - 1;
  std::uint32_t at = 0;
  if (static_cast<int>(lane) == leader) at = atomicAdd(counter, static_cast<unsigned>(__popc(peers)));
  return __shfl_sync(peers, at, leader) + __popc(peers & lanes_below(lane));
}

// The pair and operand side of a bucket kernel's block (blockIdx.y = 2 x
// pair + side), and whether that operand is bucketed at all.
template <class V>
struct FlatSide {
  FlatPairView pv;
  std::uint32_t side;
  const Operand<V>& op;
  NodeRef ref;
  __device__ FlatSide(const FlatArgs<V>& args)
      : pv(flat_pair(args, blockIdx.y >> 1)),
        side(blockIdx.y & 1u),
        op(side == 0 ? args.st.a : args.st.b),
        ref(side == 0 ? pv.a : pv.b),
        scanned(((args.scanned >> side) & 1u) != 0u) {}
  bool scanned;
  __device__ bool bucketed() const { return flat_bucketed(op.transposed, ref) && !scanned; }
};

// Counts each unit's entries; the last block turns the counts into starts and
// takes the buckets' room from the scratch.
template <class V>
__global__ void flat_bucket_count(FlatArgs<V> args) {
  const FlatSide<V> fs(args);
  if (!fs.bucketed()) return;
  const FlatPairView& pv = fs.pv;
  const std::uint32_t side = fs.side;
  const Operand<V>& op = fs.op;
  const NodeRef ref = fs.ref;
  const std::uint32_t b = args.st.log2d, shift = flat_unit_log2_rows(b);
  const std::uint32_t n_buckets = (1u << b) * flat_units(b);
  FlatBucket* buckets = pv.buckets + side * n_buckets;
  __shared__ bool last;
  flat_for_each_entry(op, ref, b, [&](std::uint32_t r16, std::uint32_t, V) {
    (void)flat_bucket_add(&buckets[r16 >> shift].count, r16 >> shift);
  });
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    last = atomicAdd(&pv.work->tickets[side], 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last || threadIdx.x >= 32) return;
  __threadfence();
  const std::uint32_t lane = threadIdx.x;
  std::uint32_t offset = 0;
  for (std::uint32_t base = 0; base < n_buckets; base += 32) {
    const std::uint32_t c = base + lane < n_buckets ? __ldcg(&buckets[base + lane].count) : 0u;
    const std::uint32_t incl = warp_inclusive_sum(c, lane);
    if (base + lane < n_buckets) buckets[base + lane].start = offset + incl - c;
    offset += __shfl_sync(full_warp, incl, 31);
  }
  const unsigned long long at = allocate(args.st.scratch_alloc, offset, lane);
  if (lane == 0) {
    if (at + offset > args.st.scratch_capacity) atomicOr(args.st.flags, flag_scratch_too_small);
    pv.work->bucket_base[side] = at;
  }
}

// Puts every entry, as a row key, into its unit's bucket (in no particular
// order: flat_merge sorts the unit).
template <class V>
__global__ void flat_bucket_fill(FlatArgs<V> args) {
  const FlatSide<V> fs(args);
  if (!fs.bucketed() || (*args.st.flags & flag_scratch_too_small) != 0u) return;
  const FlatPairView& pv = fs.pv;
  const std::uint32_t side = fs.side;
  const Operand<V>& op = fs.op;
  const NodeRef ref = fs.ref;
  const std::uint32_t b = args.st.log2d, d = 1u << b, shift = flat_unit_log2_rows(b);
  FlatBucket* buckets = pv.buckets + side * d * flat_units(b);
  WideEntry<V>* out = args.st.scratch + pv.work->bucket_base[side];
  flat_for_each_entry(op, ref, b, [&](std::uint32_t r16, std::uint32_t c16, V value) {
    const std::uint32_t k = r16 >> shift;
    const std::uint32_t at = flat_bucket_add(&buckets[k].cursor, k);
    out[buckets[k].start + at] = WideEntry<V>{row_key(r16 & (d - 1), c16, b), value};
  });
}

}  // namespace hisparse::ops::add_gpu
