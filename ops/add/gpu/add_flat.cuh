#pragma once
// AddFlat: the add of two depth-2 matrices with wide nodes, by plain kernels,
// a block row ("band") of the result per warp.
//
// Such a matrix is one level-(depth-2) sub-tree: the runtime would hand it to
// AddWide as a single item, one warp for the whole matrix (perf-log A6: 1-10
// ms on matrices of 10-100 k entries). Here every band of d rows is a warp of
// its own, in three steps:
//   flat_bucket_*  (only for a transposed COOW operand, whose band is a block
//                   column of the node and so scattered through it) sorts its
//                   entries into per-band buckets;
//   flat_merge     gathers both operands' entries of the band, sorts them into
//                   the standard order (only the digits that are out of order),
//                   merges them, and counts the band's union and leaves; the
//                   last band to finish lays the node out (COOW or an inner
//                   node and leaves, the builder's rule) and allocates it;
//   flat_write     writes each band's entries into that layout.
// The node is the one AddWide would write (same form and bytes, leaves in
// block order after the inner node), so the result equals the runtime's and
// the host reference's.
#include <cuda_runtime.h>

#include <cstdint>

#include "add_wide.cuh"

namespace hisparse::ops::add_gpu {

// One band's union, then its place in the node (filled by the last band).
struct FlatBand {
  std::uint32_t m;       // union entries
  std::uint32_t blocks;  // its non-empty d x d blocks: leaves in the standard form
  unsigned long long leaf_bytes;
  unsigned long long u;  // scratch index of the union, in standard order
  std::uint32_t m_before, blocks_before;
  unsigned long long leaf_at;  // byte offset in dst of the band's first leaf
};

// A transposed COOW operand's entries of one band (scratch indices).
struct FlatBucket {
  std::uint32_t count, start, cursor, unused;
};

// Per call, zeroed before the first kernel.
struct FlatWork {
  unsigned tickets[4];                 // bucket sides a and b, merge
  unsigned form;                       // 0 none (failed), 1 COOW, 2 standard
  unsigned inner_type;                 // NodeType of the inner node (standard)
  unsigned long long offset;           // the node's byte offset in dst
  unsigned long long bucket_base[2];   // scratch index of each side's buckets
};

// The most bands: d <= 256.
inline constexpr std::uint32_t flat_max_bands = 256;

template <class V>
struct FlatArgs {
  AddState<V> st;
  NodeRef a, b;       // the operands' roots
  NodeRef* slot;      // where the result's root goes
  FlatWork* work;
  FlatBand* bands;    // d
  FlatBucket* buckets;  // 2 x d (side a, then side b)
};

// Band-local sorting and merging in shared memory up to this many entries
// (both operands' together), in scratch beyond.
template <class V>
inline constexpr std::uint32_t flat_shared_entries = 16384 / sizeof(WideEntry<V>);

template <class V>
inline constexpr std::uint32_t flat_merge_shared_bytes =
    flat_max_bands * sizeof(std::uint32_t) + 2 * flat_shared_entries<V> * sizeof(WideEntry<V>);

__device__ inline bool flat_transposed_coow(bool transposed, NodeRef ref) {
  return transposed && ref != null_ref && ref_type(ref) == NodeType::coow;
}

// ---- buckets of a transposed COOW operand ----------------------------------

// Counts each band's entries; the last block turns the counts into starts and
// takes the buckets' room from the scratch.
template <class V>
__global__ void flat_bucket_count(FlatArgs<V> args) {
  const std::uint32_t side = blockIdx.y;
  const Operand<V>& op = side == 0 ? args.st.a : args.st.b;
  const NodeRef ref = side == 0 ? args.a : args.b;
  if (!flat_transposed_coow(op.transposed, ref)) return;
  const std::uint32_t b = args.st.log2d, d = 1u << b;
  __shared__ std::uint32_t hist[flat_max_bands];
  __shared__ bool last;
  for (std::uint32_t i = threadIdx.x; i < d; i += blockDim.x) hist[i] = 0;
  __syncthreads();
  const CoowView<V> w = coow_view<V>(op.pool, ref);
  for (std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < w.count; i += gridDim.x * blockDim.x)
    atomicAdd(hist + (w.coords[i].col >> b), 1u);
  __syncthreads();
  FlatBucket* buckets = args.buckets + side * d;
  for (std::uint32_t i = threadIdx.x; i < d; i += blockDim.x)
    if (hist[i] != 0) atomicAdd(&buckets[i].count, hist[i]);
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(&args.work->tickets[side], 1u) == gridDim.x - 1;
  __syncthreads();
  if (!last || threadIdx.x >= 32) return;
  __threadfence();
  const std::uint32_t lane = threadIdx.x;
  std::uint32_t offset = 0;
  for (std::uint32_t base = 0; base < d; base += 32) {
    const std::uint32_t c = base + lane < d ? __ldcg(&buckets[base + lane].count) : 0u;
    const std::uint32_t incl = warp_inclusive_sum(c, lane);
    if (base + lane < d) buckets[base + lane].start = offset + incl - c;
    offset += __shfl_sync(full_warp, incl, 31);
  }
  const unsigned long long at = allocate(args.st.scratch_alloc, w.count, lane);
  if (lane == 0) {
    if (at + w.count > args.st.scratch_capacity) atomicOr(args.st.flags, flag_scratch_too_small);
    args.work->bucket_base[side] = at;
  }
}

// Puts every entry, keyed in the result's orientation, into its band's bucket
// (in no particular order: flat_merge sorts the band).
template <class V>
__global__ void flat_bucket_fill(FlatArgs<V> args) {
  const std::uint32_t side = blockIdx.y;
  const Operand<V>& op = side == 0 ? args.st.a : args.st.b;
  const NodeRef ref = side == 0 ? args.a : args.b;
  if (!flat_transposed_coow(op.transposed, ref)) return;
  if ((*args.st.flags & flag_scratch_too_small) != 0u) return;
  const std::uint32_t b = args.st.log2d;
  const CoowView<V> w = coow_view<V>(op.pool, ref);
  FlatBucket* buckets = args.buckets + side * (1u << b);
  WideEntry<V>* out = args.st.scratch + args.work->bucket_base[side];
  for (std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < w.count; i += gridDim.x * blockDim.x) {
    const WideCoord c = w.coords[i];
    const std::uint32_t band = c.col >> b;
    // One atomic per band among the lanes of a step.
    const unsigned peers = __match_any_sync(__activemask(), band);
    const std::uint32_t lane = threadIdx.x & 31u;
    const int leader = __ffs(peers) - 1;
    std::uint32_t at = 0;
    if (static_cast<int>(lane) == leader) at = atomicAdd(&buckets[band].cursor, static_cast<unsigned>(__popc(peers)));
    at = __shfl_sync(peers, at, leader) + __popc(peers & lanes_below(lane));
    out[buckets[band].start + at] = WideEntry<V>{wide_key(c.col, c.row, b), w.values[i]};
  }
}

// ---- the band's merge ---------------------------------------------------------

// Finds one operand's entries in band `br` of the result and, with `out`,
// writes them there as keys; returns their count. Returns in `passes` the
// digits (a bit each, applied from the lowest) whose stable counting passes
// put them into standard order.
template <class V>
struct FlatBandSource {
  const Operand<V>& op;
  NodeRef ref;
  const FlatBucket* bucket;        // this side's bucket of the band (transposed COOW)
  const WideEntry<V>* bucketed;    // this side's bucketed entries
  std::uint32_t br, b, lane;

  // A standard node's children in the band, in the result's block-column
  // order, in warp steps: f(child or null, its block row and column in the
  // operand) with every lane of every step.
  template <class F>
  __device__ void for_band_children(F&& f) const {
    const std::byte* pool = op.pool;
    const std::uint32_t d = 1u << b;
    if (ref_type(ref) == NodeType::dense) {
      const NodeRef* cells = dense_values<NodeRef>(pool, ref, b, false);
      for (std::uint32_t base = 0; base < d; base += 32) {
        const std::uint32_t j = base + lane;
        const bool in = j < d;
        const std::uint32_t cell = op.transposed ? (j << b) | br : (br << b) | j;
        const NodeRef child = in ? cells[cell] : null_ref;
        f(child, op.transposed ? j : br, op.transposed ? br : j);
      }
      return;
    }
    const CooView<NodeRef> v = coo_view<NodeRef>(pool, ref);
    std::uint32_t lo = 0, hi = v.count;
    if (!op.transposed) {
      // Sorted by (row, col): the band's children are one run.
      const std::uint32_t target = lane == 0 ? br : br + 1;
      std::uint32_t l = 0, h = v.count;
      while (l < h) {
        const std::uint32_t mid = (l + h) / 2;
        if (v.coords[mid].row < target) l = mid + 1;
        else h = mid;
      }
      lo = __shfl_sync(full_warp, l, 0);
      hi = __shfl_sync(full_warp, l, 1);
    }
    for (std::uint32_t base = lo; base < hi; base += 32) {
      const std::uint32_t s = base + lane;
      NodeRef child = null_ref;
      LocalCoord c{};
      if (s < hi) {
        c = v.coords[s];
        // A block column of the node: every child looked at, one in d kept.
        if (!op.transposed || c.col == br) child = v.values[s];
      }
      f(child, c.row, c.col);
    }
  }

  __device__ std::uint32_t coow_run(const CoowView<V>& w, std::uint32_t& first) const {
    const std::uint32_t d = 1u << b;
    const std::uint32_t target = (lane == 0 ? br : br + 1) * d;
    std::uint32_t l = 0, h = w.count;
    while (l < h) {
      const std::uint32_t mid = (l + h) / 2;
      if (w.coords[mid].row < target) l = mid + 1;
      else h = mid;
    }
    first = __shfl_sync(full_warp, l, 0);
    return __shfl_sync(full_warp, l, 1) - first;
  }

  __device__ std::uint32_t count() const {
    if (ref == null_ref) return 0;
    if (ref_type(ref) == NodeType::coow) {
      if (op.transposed) return bucket->count;
      std::uint32_t first = 0;
      return coow_run(coow_view<V>(op.pool, ref), first);
    }
    std::uint32_t n = 0;
    for_band_children([&](NodeRef child, std::uint32_t, std::uint32_t) {
      if (child != null_ref) n += AddWide<V>::leaf_count(op.pool, child, b);
    });
    return __reduce_add_sync(full_warp, n);
  }

  __device__ std::uint32_t gather(WideEntry<V>* out) const {
    using Entry = WideEntry<V>;
    if (ref == null_ref) return 0u;
    const std::byte* pool = op.pool;
    if (ref_type(ref) == NodeType::coow) {
      if (op.transposed) {
        const Entry* in = bucketed + bucket->start;
        for (std::uint32_t i = lane; i < bucket->count; i += 32) out[i] = in[i];
        return 0b111u;  // in no order
      }
      const CoowView<V> w = coow_view<V>(pool, ref);
      std::uint32_t first = 0;
      const std::uint32_t n = coow_run(w, first);
      for (std::uint32_t i = lane; i < n; i += 32)
        out[i] = Entry{wide_key(w.coords[first + i].row, w.coords[first + i].col, b), w.values[first + i]};
      return 0b100u;  // row-major: by block column it is the standard order
    }
    const std::uint32_t d = 1u << b;
    std::uint32_t offset = 0;
    auto key = [&](std::uint32_t r16, std::uint32_t c16) {
      return op.transposed ? wide_key(c16, r16, b) : wide_key(r16, c16, b);
    };
    for_band_children([&](NodeRef child, std::uint32_t hr, std::uint32_t hc) {
      const std::uint32_t c = child != null_ref ? AddWide<V>::leaf_count(pool, child, b) : 0u;
      const std::uint32_t incl = warp_inclusive_sum(c, lane);
      const std::uint32_t start = offset + incl - c;
      const std::uint32_t hi_bits = (hr << 8) | hc;
      for (std::uint32_t j = 0; j < 32; ++j) {
        const NodeRef leaf = __shfl_sync(full_warp, child, j);
        if (leaf == null_ref) continue;
        const std::uint32_t at = __shfl_sync(full_warp, start, j);
        const std::uint32_t hb = __shfl_sync(full_warp, hi_bits, j);
        const std::uint32_t r0 = (hb >> 8) << b, c0 = (hb & 0xFFu) << b;
        Entry* o = out + at;
        if (ref_type(leaf) == NodeType::dense) {
          const std::uint8_t* mask = dense_mask(pool, leaf);
          const V* vals = dense_values<V>(pool, leaf, b, true);
          std::uint32_t run = 0;
          for (std::uint32_t base = 0; base < d * d; base += 32) {
            const std::uint32_t cell = base + lane;
            const bool present = cell < d * d && mask_bit(mask, cell);
            const unsigned bits = __ballot_sync(full_warp, present);
            if (present)
              o[run + __popc(bits & lanes_below(lane))] = Entry{key(r0 | (cell >> b), c0 | (cell & (d - 1))), vals[cell]};
            run += __popc(bits);
          }
        } else {
          const CooView<V> v = coo_view<V>(pool, leaf);
          for (std::uint32_t i = lane; i < v.count; i += 32)
            o[i] = Entry{key(r0 | v.coords[i].row, c0 | v.coords[i].col), v.values[i]};
        }
      }
      offset += __shfl_sync(full_warp, incl, 31);
    });
    // Leaves come in block-column order; a transposed leaf's entries are in
    // column order, which a stable pass by row (digit 1) fixes within the
    // leaf and a pass by block column (digit 2) puts back into block order.
    return op.transposed ? 0b110u : 0u;
  }
};

// Sorts x[0, n) by the digits in `passes` (stable counting passes from the
// lowest, through y); the result is in x.
template <class V>
__device__ void flat_sort(WideEntry<V>* x, WideEntry<V>* y, std::uint32_t n, unsigned passes, std::uint32_t b,
                          std::uint32_t lane, std::uint32_t* hist) {
  WideEntry<V>* from = x;
  WideEntry<V>* to = y;
  for (std::uint32_t k = 0; k < 3; ++k) {
    if (((passes >> k) & 1u) == 0u) continue;
    gpu::counting_pass(n, 1u << b, lane, hist, [&](std::uint32_t i) { return key_digit(from[i].key, k, b); },
                       [&](std::uint32_t i, std::uint32_t p) { to[p] = from[i]; });
    __syncwarp();
    WideEntry<V>* t = from;
    from = to;
    to = t;
  }
  if (from != x) {
    for (std::uint32_t i = lane; i < n; i += 32) x[i] = from[i];
    __syncwarp();
  }
}

// Lays the node out once every band is counted: the forms' sizes from the
// bands' totals, the node allocated, headers and padding written, every band
// told where its entries go.
template <class V>
__device__ void flat_layout(const FlatArgs<V>& args, std::uint32_t bands, std::uint32_t lane) {
  const AddState<V>& st = args.st;
  const std::uint32_t b = st.log2d;
  std::uint32_t m_total = 0, blocks_total = 0;
  unsigned long long leaf_total = 0;
  for (std::uint32_t base = 0; base < bands; base += 32) {
    const std::uint32_t i = base + lane;
    FlatBand* band = args.bands + i;
    const std::uint32_t m = i < bands ? __ldcg(&band->m) : 0u;
    const std::uint32_t nb = i < bands ? __ldcg(&band->blocks) : 0u;
    const unsigned long long lb = i < bands ? __ldcg(&band->leaf_bytes) : 0ull;
    const std::uint32_t m_incl = warp_inclusive_sum(m, lane);
    const std::uint32_t b_incl = warp_inclusive_sum(nb, lane);
    unsigned long long l_incl = lb;
    for (std::uint32_t o = 1; o < 32; o <<= 1) {
      const unsigned long long t = __shfl_up_sync(full_warp, l_incl, o);
      if (lane >= o) l_incl += t;
    }
    if (i < bands) {
      band->m_before = m_total + m_incl - m;
      band->blocks_before = blocks_total + b_incl - nb;
      band->leaf_at = leaf_total + l_incl - lb;  // relative until the node is placed
    }
    m_total += __shfl_sync(full_warp, m_incl, 31);
    blocks_total += __shfl_sync(full_warp, b_incl, 31);
    leaf_total += __shfl_sync(full_warp, l_incl, 31);
  }
  const NodeChoice inner = choose_node(blocks_total, b, false, sizeof(NodeRef));
  const std::uint64_t standard = inner.bytes + leaf_total;
  const std::uint64_t coow = coow_layout64(m_total, sizeof(V)).bytes;
  const bool as_coow = coow <= standard;
  const std::uint64_t bytes = as_coow ? coow : standard;
  const unsigned long long offset = allocate(st.alloc, bytes, lane);
  if (offset + bytes > st.capacity) {
    if (lane == 0) atomicOr(st.flags, flag_pool_too_small);
    return;  // form stays 0: flat_write does nothing
  }
  std::byte* dst = st.dst + offset;
  if (!as_coow)
    for (std::uint32_t i = lane; i < bands; i += 32) args.bands[i].leaf_at += offset + inner.bytes;
  // What no band writes: the header word and the padding.
  auto zero = [&](std::uint64_t from, std::uint64_t to) {
    for (std::uint64_t i = from + lane; i < to; i += 32) dst[i] = std::byte{0};
  };
  if (as_coow) {
    const CooLayout l = coow_layout(m_total, sizeof(V));
    zero(4, l.coord_offset);
    zero(l.coord_offset + std::uint64_t{4} * m_total, l.value_offset);
    zero(l.value_offset + std::uint64_t{sizeof(V)} * m_total, l.bytes);
    if (lane == 0) *reinterpret_cast<std::uint32_t*>(dst) = m_total;
  } else if (inner.type != NodeType::dense) {
    const CooLayout l = coo_layout(inner.type, blocks_total, sizeof(NodeRef));
    zero(4, l.coord_offset);
    zero(l.coord_offset + std::uint64_t{2} * blocks_total, l.value_offset);
    zero(l.value_offset + std::uint64_t{4} * blocks_total, l.bytes);
    if (lane == 0) *reinterpret_cast<std::uint32_t*>(dst) = blocks_total;
  }  // a dense inner node: each band zeroes and fills its own row of it
  if (lane == 0) {
    args.work->offset = offset;
    args.work->inner_type = static_cast<unsigned>(inner.type);
    args.work->form = as_coow ? 1u : 2u;
    *args.slot = make_ref(offset, as_coow ? NodeType::coow : inner.type);
    atomicAdd(st.nnz, static_cast<unsigned long long>(m_total));
  }
}

// A warp per band (blockIdx.x); dynamic shared memory flat_merge_shared_bytes.
template <class V>
__global__ void __launch_bounds__(32) flat_merge(FlatArgs<V> args) {
  using Entry = WideEntry<V>;
  extern __shared__ __align__(16) unsigned char flat_shared[];
  const AddState<V>& st = args.st;
  const std::uint32_t b = st.log2d, br = blockIdx.x, lane = threadIdx.x;
  if ((*st.flags & flag_scratch_too_small) != 0u) return;  // buckets missing: the call fails
  auto* hist = reinterpret_cast<std::uint32_t*>(flat_shared);
  auto* shared_entries = reinterpret_cast<Entry*>(flat_shared + flat_max_bands * sizeof(std::uint32_t));
  const std::uint32_t d = 1u << b;
  const FlatBandSource<V> sa{st.a, args.a, args.buckets + br, st.scratch + args.work->bucket_base[0], br, b, lane};
  const FlatBandSource<V> sb{st.b, args.b, args.buckets + d + br, st.scratch + args.work->bucket_base[1], br, b, lane};
  const std::uint32_t na = sa.count(), nb = sb.count();
  const std::uint32_t n = na + nb;
  FlatBand* band = args.bands + br;
  std::uint32_t m = 0, blocks = 0;
  unsigned long long leaf_bytes = 0, u_index = 0;
  bool failed = false;
  if (n != 0) {
    Entry *x = shared_entries, *y = shared_entries + flat_shared_entries<V>;
    const bool in_shared = n <= flat_shared_entries<V>;
    if (!in_shared) {
      const unsigned long long s0 = allocate(st.scratch_alloc, 2ull * n, lane);
      failed = s0 + 2ull * n > st.scratch_capacity;
      x = st.scratch + s0;
      y = x + n;
      u_index = s0 + n;
    }
    if (!failed) {
      const unsigned pa = sa.gather(x);
      const unsigned pb = sb.gather(x + na);
      __syncwarp();
      if (pa != 0u) flat_sort(x, y, na, pa, b, lane, hist);
      if (pb != 0u) flat_sort(x + na, y + na, nb, pb, b, lane, hist);
      Entry* u = y;
      m = AddWide<V>::merge(st, x, na, x + na, nb, u, lane);
      AddWide<V>::for_blocks(u, m, b, lane,
                             [&](std::uint32_t i, bool active, bool is_end, std::uint32_t start, std::uint32_t block) {
                               if (active && is_end) {
                                 leaf_bytes += choose_node(i - start + 1, b, true, sizeof(V)).bytes;
                                 blocks = block + 1;
                               }
                             });
      blocks = __reduce_max_sync(full_warp, blocks);
      leaf_bytes = warp_sum64(leaf_bytes);
      if (in_shared) {
        u_index = allocate(st.scratch_alloc, m, lane);
        failed = u_index + m > st.scratch_capacity;
        if (!failed) {
          Entry* g = st.scratch + u_index;
          for (std::uint32_t i = lane; i < m; i += 32) g[i] = u[i];
        }
      }
    }
    if (failed) {
      // Still counted in below, so that the last band finds the flag.
      if (lane == 0) atomicOr(st.flags, flag_scratch_too_small);
    } else if (lane == 0) {
      band->m = m;
      band->blocks = blocks;
      band->leaf_bytes = leaf_bytes;
      band->u = u_index;
    }
  }

  __threadfence();
  __syncwarp();
  unsigned last = 0;
  if (lane == 0) last = atomicAdd(&args.work->tickets[2], 1u) == gridDim.x - 1;
  if (__shfl_sync(full_warp, last, 0) == 0u) return;
  __threadfence();
  if ((*reinterpret_cast<volatile unsigned*>(st.flags) & flag_scratch_too_small) != 0u) return;
  flat_layout(args, gridDim.x, lane);
}

// A warp per band: its entries into the node flat_merge laid out.
template <class V>
__global__ void __launch_bounds__(32) flat_write(FlatArgs<V> args) {
  using Entry = WideEntry<V>;
  __shared__ std::uint32_t hist[flat_max_bands];
  __shared__ uint2 meta[flat_max_bands];
  const AddState<V>& st = args.st;
  const std::uint32_t b = st.log2d, d = 1u << b, br = blockIdx.x, lane = threadIdx.x;
  const unsigned form = args.work->form;
  if (form == 0u) return;
  std::byte* node = st.dst + args.work->offset;
  const auto inner_type = static_cast<NodeType>(args.work->inner_type);
  const bool inner_dense = form == 2u && inner_type == NodeType::dense;
  auto* dense_row = reinterpret_cast<NodeRef*>(node) + (br << b);
  if (inner_dense)
    for (std::uint32_t j = lane; j < d; j += 32) dense_row[j] = null_ref;
  const FlatBand band = args.bands[br];
  if (band.m == 0) return;
  const Entry* u = st.scratch + band.u;
  const std::uint32_t m = band.m;
  if (form == 1u) {
    // Standard order -> (row, col): a stable pass by the row's low digit
    // (within a row of the band the standard order is by column already).
    const CooLayout l = coow_layout(*reinterpret_cast<const std::uint32_t*>(node), sizeof(V));
    auto* dc = reinterpret_cast<WideCoord*>(node + l.coord_offset) + band.m_before;
    V* dv = reinterpret_cast<V*>(node + l.value_offset) + band.m_before;
    gpu::counting_pass(m, d, lane, hist, [&](std::uint32_t i) { return key_digit(u[i].key, 1, b); },
                       [&](std::uint32_t i, std::uint32_t p) {
                         const std::uint32_t k = u[i].key;
                         dc[p] = WideCoord{static_cast<std::uint16_t>((key_digit(k, 3, b) << b) | key_digit(k, 1, b)),
                                           static_cast<std::uint16_t>((key_digit(k, 2, b) << b) | key_digit(k, 0, b))};
                         dv[p] = u[i].value;
                       });
    return;
  }
  // Standard form: the band's leaves, zeroed, then placed (each block's leaf
  // recorded in `meta` as (reference, first entry)), then filled.
  auto* zero = reinterpret_cast<uint4*>(st.dst + band.leaf_at);
  for (std::uint64_t i = lane; i < band.leaf_bytes / 16; i += 32) zero[i] = make_uint4(0, 0, 0, 0);
  __syncwarp();
  const std::uint32_t blocks_total =
      inner_dense ? 0u : *reinterpret_cast<const std::uint32_t*>(node);
  const CooLayout il = inner_dense ? CooLayout{} : coo_layout(inner_type, blocks_total, sizeof(NodeRef));
  auto* inner_refs = reinterpret_cast<NodeRef*>(node + (inner_dense ? 0u : il.value_offset));
  auto* inner_coords = reinterpret_cast<LocalCoord*>(node + il.coord_offset);
  unsigned long long placed = band.leaf_at;
  AddWide<V>::for_blocks(u, m, b, lane, [&](std::uint32_t i, bool active, bool is_end, std::uint32_t start, std::uint32_t block) {
    const std::uint32_t cnt = active && is_end ? i - start + 1 : 0u;
    const NodeChoice leaf = cnt ? choose_node(cnt, b, true, sizeof(V)) : NodeChoice{NodeType::dense, 0};
    unsigned long long incl = leaf.bytes;
    for (std::uint32_t o = 1; o < 32; o <<= 1) {
      const unsigned long long t = __shfl_up_sync(full_warp, incl, o);
      if (lane >= o) incl += t;
    }
    const unsigned long long at = placed + incl - leaf.bytes;
    placed += __shfl_sync(full_warp, incl, 31);
    if (!cnt) return;
    const NodeRef ref = make_ref(at, leaf.type);
    meta[block] = make_uint2(ref, start);
    const auto bc = static_cast<std::uint8_t>(key_digit(u[i].key, 2, b));
    if (inner_dense) {
      dense_row[bc] = ref;
    } else {
      inner_coords[band.blocks_before + block] = LocalCoord{static_cast<std::uint8_t>(br), bc};
      inner_refs[band.blocks_before + block] = ref;
    }
    if (leaf.type != NodeType::dense) *reinterpret_cast<std::uint32_t*>(st.dst + at) = cnt;
  });
  __syncwarp();
  AddWide<V>::for_blocks(u, m, b, lane, [&](std::uint32_t i, bool active, bool, std::uint32_t, std::uint32_t block) {
    if (!active) return;
    const uint2 mt = meta[block];
    const NodeRef ref = mt.x;
    std::byte* leaf = st.dst + ref_offset(ref);
    const std::uint32_t k = u[i].key;
    const LocalCoord lc{static_cast<std::uint8_t>(key_digit(k, 1, b)), static_cast<std::uint8_t>(key_digit(k, 0, b))};
    if (ref_type(ref) == NodeType::dense) {
      const std::uint32_t cell = (std::uint32_t{lc.row} << b) | lc.col;
      reinterpret_cast<V*>(leaf + dense_mask_bytes(b))[cell] = u[i].value;
      set_mask_bit(leaf, cell);
    } else {
      const std::uint32_t cnt = *reinterpret_cast<const std::uint32_t*>(leaf);
      const CooLayout l = coo_layout(ref_type(ref), cnt, sizeof(V));
      reinterpret_cast<LocalCoord*>(leaf + l.coord_offset)[i - mt.y] = lc;
      reinterpret_cast<V*>(leaf + l.value_offset)[i - mt.y] = u[i].value;
    }
  });
}

}  // namespace hisparse::ops::add_gpu
