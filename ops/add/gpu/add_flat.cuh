#pragma once
// AddFlat: the add of two depth-2 matrices with wide nodes, by plain kernels:
// a thread block per block row ("band", d rows) of the result and a warp per
// slice of the band's rows ("unit").
//
// Such a matrix is one level-(depth-2) sub-tree: the runtime would hand it to
// AddWide as a single item, one warp for the whole matrix (perf-log A6: 1-10
// ms on matrices of 10-100 k entries). Here, in three steps:
//   flat_bucket_*  sorts each operand's entries into per-unit buckets, in
//                   parallel over all of them (not for a COOW node read as
//                   stored: a unit's rows are a run of it);
//   flat_merge     each warp takes both operands' entries of its rows, sorts
//                   a bucket into row-major order, merges the two; the block counts its band's union and leaves;
//                   the last block lays the node out (COOW, or an inner node
//                   and leaves: the builder's rule) and allocates it;
//   flat_write     writes each unit's entries into that layout.
// The node is the one AddWide would write (same form and bytes, leaves in
// block order after the inner node), so the result equals the runtime's and
// the host reference's.
//
// Keys within a band are row-major: (row in band, column in node), b bits
// and 2b bits: digit 2 is the row, digit 1 the block column, digit 0 the
// column in the block.
#include <cuda_runtime.h>

#include <cstdint>

#include "add_wide.cuh"

namespace hisparse::ops::add_gpu {

inline constexpr std::uint32_t flat_max_bands = 256;  // d <= 256
inline constexpr std::uint32_t flat_warps = 16;       // units per band (at most d)
inline constexpr std::uint32_t flat_threads = 32 * flat_warps;

// log2 of the rows of a unit.
__host__ __device__ constexpr std::uint32_t flat_unit_log2_rows(std::uint32_t log2d) {
  return log2d > 4 ? log2d - 4 : 0u;
}
// Units per band: d / rows of a unit.
__host__ __device__ constexpr std::uint32_t flat_units(std::uint32_t log2d) {
  return 1u << (log2d - flat_unit_log2_rows(log2d));
}

// One band's union and its place in the node (filled by the last band).
struct FlatBand {
  std::uint32_t m;       // union entries
  std::uint32_t blocks;  // its non-empty d x d blocks: leaves in the standard form
  unsigned long long leaf_bytes;
  std::uint32_t m_before, blocks_before;
  unsigned long long leaf_at;  // byte offset in dst of the band's first leaf
};

// One unit's union: m entries at scratch index u, row-major.
struct FlatUnit {
  unsigned long long u;
  std::uint32_t m, unused;
};

// A transposed COOW operand's entries of one unit (scratch indices).
struct FlatBucket {
  std::uint32_t count, start, cursor, unused;
};

// Per call, zeroed before the first kernel.
struct FlatWork {
  unsigned tickets[4];                // bucket sides a and b, merge
  unsigned form;                      // 0 none (failed), 1 COOW, 2 standard
  unsigned inner_type;                // NodeType of the inner node (standard)
  unsigned long long offset;          // the node's byte offset in dst
  unsigned long long bucket_base[2];  // scratch index of each side's buckets
};

template <class V>
struct FlatArgs {
  AddState<V> st;
  const FlatPair* pairs;  // blockIdx.y's pair; null: `root` alone
  FlatPair root;          // the matrices' roots and the result's root slot
  FlatWork* work;         // one per pair
  FlatBand* bands;        // d per pair
  FlatUnit* units;        // d x flat_units per pair
  FlatBucket* buckets;    // 2 x d x flat_units per pair (side a, then side b)
  PoolHeader header;      // the result's, written with its root when `pairs` is null
};

// One pair's operands, slot and work memory.
struct FlatPairView {
  NodeRef a, b;
  NodeRef* slot;
  FlatWork* work;
  FlatBand* bands;
  FlatUnit* units;
  FlatBucket* buckets;
};

template <class V>
__device__ inline FlatPairView flat_pair(const FlatArgs<V>& args, std::uint32_t p) {
  const std::uint32_t d = 1u << args.st.log2d, u = d * flat_units(args.st.log2d);
  const FlatPair fp = args.pairs != nullptr ? args.pairs[p] : args.root;
  return {fp.a, fp.b, fp.slot, args.work + p, args.bands + std::size_t{p} * d, args.units + std::size_t{p} * u,
          args.buckets + std::size_t{p} * 2 * u};
}

// A unit sorts and merges in shared memory: each warp's digit counts, then
// an arena the warps take their room from as they need it (a unit with a
// heavy row can take most of it), in scratch beyond.
inline constexpr std::uint32_t flat_hist_bytes = flat_max_bands * sizeof(std::uint32_t);
inline constexpr std::uint32_t flat_merge_shared_bytes = 200 * 1024;
template <class V>
inline constexpr std::uint32_t flat_arena_entries =
    (flat_merge_shared_bytes - flat_warps * flat_hist_bytes) / sizeof(WideEntry<V>);

__device__ inline std::uint32_t row_key(std::uint32_t row_in_band, std::uint32_t col16, std::uint32_t b) {
  return (row_in_band << (2 * b)) | col16;
}

// ---- buckets --------------------------------------------------------------------
// A transposed operand is first sorted into per-unit buckets, in parallel
// over all its entries: a unit's rows are columns of it, scattered through
// every leaf (or the COOW node) of a block column.

__host__ __device__ inline bool flat_bucketed(bool transposed, NodeRef ref) {
  return ref != null_ref && transposed;
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

// Counts each unit's entries; the last block turns the counts into starts and
// takes the buckets' room from the scratch.
template <class V>
__global__ void flat_bucket_count(FlatArgs<V> args) {
  const std::uint32_t side = blockIdx.y & 1u;
  const FlatPairView pv = flat_pair(args, blockIdx.y >> 1);
  const Operand<V>& op = side == 0 ? args.st.a : args.st.b;
  const NodeRef ref = side == 0 ? pv.a : pv.b;
  if (!flat_bucketed(op.transposed, ref)) return;
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
  const std::uint32_t side = blockIdx.y & 1u;
  const FlatPairView pv = flat_pair(args, blockIdx.y >> 1);
  const Operand<V>& op = side == 0 ? args.st.a : args.st.b;
  const NodeRef ref = side == 0 ? pv.a : pv.b;
  if (!flat_bucketed(op.transposed, ref)) return;
  if ((*args.st.flags & flag_scratch_too_small) != 0u) return;
  const std::uint32_t b = args.st.log2d, d = 1u << b, shift = flat_unit_log2_rows(b);
  FlatBucket* buckets = pv.buckets + side * d * flat_units(b);
  WideEntry<V>* out = args.st.scratch + pv.work->bucket_base[side];
  flat_for_each_entry(op, ref, b, [&](std::uint32_t r16, std::uint32_t c16, V value) {
    const std::uint32_t k = r16 >> shift;
    const std::uint32_t at = flat_bucket_add(&buckets[k].cursor, k);
    out[buckets[k].start + at] = WideEntry<V>{row_key(r16 & (d - 1), c16, b), value};
  });
}

// ---- a unit's entries ---------------------------------------------------------

// One operand's entries of rows [r0, r1) of band br: a run of a COOW node, the
// unit's bucket (transposed operands), or the rows of the band's leaves.
template <class V>
struct FlatUnitSource {
  const Operand<V>& op;
  NodeRef ref;
  const FlatBucket* bucket;      // this side's bucket of the unit
  const WideEntry<V>* bucketed;  // this side's bucketed entries
  std::uint32_t br, r0, r1, b, lane;

  // First index of a sorted run whose row is >= target (coordinates by value).
  template <class Row>
  __device__ static std::uint32_t lower_row(std::uint32_t n, std::uint32_t target, Row&& row_at) {
    std::uint32_t l = 0, h = n;
    while (l < h) {
      const std::uint32_t mid = (l + h) / 2;
      if (row_at(mid) < target) l = mid + 1;
      else h = mid;
    }
    return l;
  }

  // Rows [r0, r1) of a COOW node: one run of it (lanes 0 and 1 search).
  __device__ std::uint32_t coow_run(const CoowView<V>& w, std::uint32_t& first) const {
    const std::uint32_t l =
        lower_row(w.count, (br << b) + (lane == 0 ? r0 : r1), [&](std::uint32_t i) { return w.coords[i].row; });
    first = __shfl_sync(full_warp, l, 0);
    return __shfl_sync(full_warp, l, 1) - first;
  }

  // The band's leaves (block row br, in block-column order) in warp steps:
  // f(leaf or null, its block column).
  template <class F>
  __device__ void for_band_leaves(F&& f) const {
    const std::uint32_t d = 1u << b;
    if (ref_type(ref) == NodeType::dense) {
      const NodeRef* cells = dense_values<NodeRef>(op.pool, ref, b, false);
      for (std::uint32_t base = 0; base < d; base += 32) {
        const std::uint32_t j = base + lane;
        f(j < d ? cells[(br << b) | j] : null_ref, j);
      }
      return;
    }
    const CooView<NodeRef> v = coo_view<NodeRef>(op.pool, ref);
    const std::uint32_t l = lower_row(v.count, lane == 0 ? br : br + 1, [&](std::uint32_t i) { return v.coords[i].row; });
    const std::uint32_t lo = __shfl_sync(full_warp, l, 0), hi = __shfl_sync(full_warp, l, 1);
    for (std::uint32_t base = lo; base < hi; base += 32) {
      const std::uint32_t s = base + lane;
      f(s < hi ? v.values[s] : null_ref, s < hi ? v.coords[s].col : 0u);
    }
  }

  // A leaf's rows [r0, r1), by this lane: [first, first + count) of a COO
  // leaf (sorted by row), or the set bits of a dense leaf's mask there.
  __device__ std::uint32_t leaf_run(NodeRef leaf, std::uint32_t& first) const {
    if (ref_type(leaf) == NodeType::dense) {
      const auto* words = reinterpret_cast<const std::uint32_t*>(dense_mask(op.pool, leaf));
      std::uint32_t n = 0;
      for_mask_words(words, [&](std::uint32_t, std::uint32_t bits) { n += __popc(bits); });
      return n;
    }
    const CooView<V> v = coo_view<V>(op.pool, leaf);
    first = lower_row(v.count, r0, [&](std::uint32_t i) { return v.coords[i].row; });
    return lower_row(v.count, r1, [&](std::uint32_t i) { return v.coords[i].row; }) - first;
  }

  // The mask words of cells [r0 d, r1 d), masked to them: f(word index, bits).
  template <class F>
  __device__ void for_mask_words(const std::uint32_t* words, F&& f) const {
    const std::uint32_t from = r0 << b, to = r1 << b;
    for (std::uint32_t w = from / 32; w * 32 < to; ++w) {
      std::uint32_t bits = words[w];
      if (w * 32 < from) bits &= ~0u << (from - w * 32);
      if (w * 32 + 32 > to) bits &= (1u << (to - w * 32)) - 1u;
      f(w, bits);
    }
  }

  __device__ std::uint32_t count() const {
    if (ref == null_ref) return 0;
    if (flat_bucketed(op.transposed, ref)) return bucket->count;
    if (ref_type(ref) == NodeType::coow) {
      std::uint32_t first = 0;
      return coow_run(coow_view<V>(op.pool, ref), first);
    }
    std::uint32_t n = 0;
    for_band_leaves([&](NodeRef leaf, std::uint32_t) {
      std::uint32_t first = 0;
      if (leaf != null_ref) n += leaf_run(leaf, first);
    });
    return __reduce_add_sync(full_warp, n);
  }

  // Writes the unit's entries to out; returns the digits (a bit each, applied
  // from the lowest) whose stable counting passes make them row-major.
  __device__ unsigned gather(WideEntry<V>* out) const {
    using Entry = WideEntry<V>;
    if (ref == null_ref) return 0u;
    if (flat_bucketed(op.transposed, ref)) {
      const Entry* in = bucketed + bucket->start;
      for (std::uint32_t i = lane; i < bucket->count; i += 32) out[i] = in[i];
      return 0b111u;  // in no order
    }
    const std::uint32_t d = 1u << b;
    if (ref_type(ref) == NodeType::coow) {
      const CoowView<V> w = coow_view<V>(op.pool, ref);
      std::uint32_t first = 0;
      const std::uint32_t n = coow_run(w, first);
      for (std::uint32_t i = lane; i < n; i += 32) {
        const WideCoord c = w.coords[first + i];
        out[i] = Entry{row_key(c.row - (br << b), c.col, b), w.values[first + i]};
      }
      return 0u;  // row-major already
    }
    // A lane per leaf: its run's bounds are searched first, so that the
    // copy's loads do not wait on one another.
    std::uint32_t offset = 0;
    for_band_leaves([&](NodeRef leaf, std::uint32_t bc) {
      std::uint32_t first = 0;
      const std::uint32_t c = leaf != null_ref ? leaf_run(leaf, first) : 0u;
      const std::uint32_t incl = warp_inclusive_sum(c, lane);
      Entry* o = out + offset + incl - c;
      if (c != 0 && ref_type(leaf) == NodeType::dense) {
        const V* vals = dense_values<V>(op.pool, leaf, b, true);
        const auto* words = reinterpret_cast<const std::uint32_t*>(dense_mask(op.pool, leaf));
        std::uint32_t k = 0;
        for_mask_words(words, [&](std::uint32_t w, std::uint32_t bits) {
          for (; bits != 0u; bits &= bits - 1u) {
            const std::uint32_t cell = w * 32 + static_cast<std::uint32_t>(__ffs(bits) - 1);
            o[k++] = Entry{row_key(cell >> b, (bc << b) | (cell & (d - 1)), b), vals[cell]};
          }
        });
      } else if (c != 0) {
        const CooView<V> v = coo_view<V>(op.pool, leaf);
#pragma unroll 4
        for (std::uint32_t k = 0; k < c; ++k) {
          const LocalCoord lc = v.coords[first + k];
          o[k] = Entry{row_key(lc.row, (bc << b) | lc.col, b), v.values[first + k]};
        }
      }
      offset += __shfl_sync(full_warp, incl, 31);
    });
    // Leaves in block-column order, each row-major: a stable pass by the row
    // makes the whole row-major.
    return 0b100u;
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

// ---- the node's layout --------------------------------------------------------

// Once every band is counted: the forms' sizes from the bands' totals, the
// node allocated, headers and padding written, every band told where its
// entries go. By one warp.
template <class V>
__device__ void flat_layout(const FlatArgs<V>& args, const FlatPairView& pv, std::uint32_t bands, std::uint32_t lane) {
  const AddState<V>& st = args.st;
  const std::uint32_t b = st.log2d;
  std::uint32_t m_total = 0, blocks_total = 0;
  unsigned long long leaf_total = 0;
  for (std::uint32_t base = 0; base < bands; base += 32) {
    const std::uint32_t i = base + lane;
    FlatBand* band = pv.bands + i;
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
    for (std::uint32_t i = lane; i < bands; i += 32) pv.bands[i].leaf_at += offset + inner.bytes;
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
    pv.work->offset = offset;
    pv.work->inner_type = static_cast<unsigned>(inner.type);
    pv.work->form = as_coow ? 1u : 2u;
    const NodeRef root = make_ref(offset, as_coow ? NodeType::coow : inner.type);
    *pv.slot = root;
    if (args.pairs == nullptr) {
      PoolHeader h = args.header;
      h.root = root;
      *reinterpret_cast<PoolHeader*>(st.dst) = h;  // no copy from the host after the run
    }
    atomicAdd(st.nnz, static_cast<unsigned long long>(m_total));
  }
}

// ---- the kernels' bodies ------------------------------------------------------

// Histogram of the block columns (digit 1) of u[0, m) into counts (d words),
// by a warp.
template <class V>
__device__ void flat_block_histogram(const WideEntry<V>* u, std::uint32_t m, std::uint32_t b, std::uint32_t lane,
                                     std::uint32_t* counts) {
  for (std::uint32_t c = lane; c < (1u << b); c += 32) counts[c] = 0;
  __syncwarp();
  for (std::uint32_t i = lane; i < m; i += 32) atomicAdd(counts + key_digit(u[i].key, 1, b), 1u);
  __syncwarp();
}

// A block per band (blockIdx.x), a warp per unit; dynamic shared memory
// flat_merge_shared_bytes.
template <class V>
__global__ void __launch_bounds__(flat_threads) flat_merge(FlatArgs<V> args) {
  using Entry = WideEntry<V>;
  const FlatPairView pv = flat_pair(args, blockIdx.y);
  extern __shared__ __align__(16) unsigned char flat_shared[];
  __shared__ std::uint32_t unit_m[flat_warps];
  __shared__ std::uint32_t band_blocks;
  __shared__ unsigned long long band_leaf_bytes;
  __shared__ bool last;
  __shared__ unsigned arena_used;
  const AddState<V>& st = args.st;
  const std::uint32_t b = st.log2d, d = 1u << b, br = blockIdx.x;
  const std::uint32_t warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const std::uint32_t units = flat_units(b), rows = 1u << flat_unit_log2_rows(b);
  if (threadIdx.x == 0) {
    band_blocks = 0;
    band_leaf_bytes = 0;
    arena_used = 0;
  }
  __syncthreads();
  auto* counts = reinterpret_cast<std::uint32_t*>(flat_shared + warp * flat_hist_bytes);
  auto* arena = reinterpret_cast<Entry*>(flat_shared + flat_warps * flat_hist_bytes);
  std::uint32_t m = 0;
  if (warp < units && (*st.flags & flag_scratch_too_small) == 0u) {
    const std::uint32_t unit = br * units + warp, r0 = warp * rows, r1 = r0 + rows;
    const FlatUnitSource<V> sa{st.a, pv.a, pv.buckets + unit, st.scratch + pv.work->bucket_base[0],
                               br, r0, r1, b, lane};
    const FlatUnitSource<V> sb{st.b, pv.b, pv.buckets + d * units + unit, st.scratch + pv.work->bucket_base[1],
                               br, r0, r1, b, lane};
    const std::uint32_t na = sa.count(), nb = sb.count();
    const std::uint32_t n = na + nb;
    unsigned at = 0;
    if (lane == 0 && n != 0) at = atomicAdd(&arena_used, 2 * n);
    at = __shfl_sync(full_warp, at, 0);
    const bool in_shared = n == 0 || (2 * n <= flat_arena_entries<V> && at + 2 * n <= flat_arena_entries<V>);
    Entry* x = arena + at;
    Entry* y = x + n;
    bool failed = false;
    unsigned long long u_index = 0;
    if (!in_shared) {
      const unsigned long long s0 = allocate(st.scratch_alloc, 2ull * n, lane);
      failed = s0 + 2ull * n > st.scratch_capacity;
      x = st.scratch + s0;
      y = x + n;
      u_index = s0 + n;
    }
    if (!failed && n != 0) {
      const unsigned pa = sa.gather(x);
      const unsigned pb = sb.gather(x + na);
      __syncwarp();
      if (pa != 0u) flat_sort(x, y, na, pa, b, lane, counts);
      if (pb != 0u) flat_sort(x + na, y + na, nb, pb, b, lane, counts);
      m = AddWide<V>::merge(st, x, na, x + na, nb, y, lane);
      if (in_shared) {
        u_index = allocate(st.scratch_alloc, m, lane);
        failed = u_index + m > st.scratch_capacity;
        if (!failed)
          for (std::uint32_t i = lane; i < m; i += 32) st.scratch[u_index + i] = y[i];
      }
    }
    if (failed) {
      if (lane == 0) atomicOr(st.flags, flag_scratch_too_small);
      m = 0;
    }
    flat_block_histogram(y, m, b, lane, counts);
    if (lane == 0) {
      unit_m[warp] = m;
      pv.units[unit] = FlatUnit{u_index, m, 0};
    }
  } else if (lane == 0) {
    unit_m[warp] = 0;
  }
  __syncthreads();
  // The band's leaves: a block column a thread.
  for (std::uint32_t c = threadIdx.x; c < d; c += blockDim.x) {
    std::uint32_t total = 0;
    for (std::uint32_t w = 0; w < units; ++w)
      total += reinterpret_cast<const std::uint32_t*>(flat_shared + w * flat_hist_bytes)[c];
    if (total != 0) {
      atomicAdd(&band_blocks, 1u);
      atomicAdd(&band_leaf_bytes, static_cast<unsigned long long>(choose_node(total, b, true, sizeof(V)).bytes));
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    std::uint32_t band_m = 0;
    for (std::uint32_t w = 0; w < flat_warps; ++w) band_m += unit_m[w];
    pv.bands[br].m = band_m;
    pv.bands[br].blocks = band_blocks;
    pv.bands[br].leaf_bytes = band_leaf_bytes;
    __threadfence();
    last = atomicAdd(&pv.work->tickets[2], 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last || warp != 0) return;
  __threadfence();
  if ((*reinterpret_cast<volatile unsigned*>(st.flags) & flag_scratch_too_small) != 0u) return;
  flat_layout(args, pv, gridDim.x, lane);
}

// A block per band, a warp per unit: the units' entries into the node
// flat_merge laid out.
template <class V>
__global__ void __launch_bounds__(flat_threads) flat_write(FlatArgs<V> args) {
  using Entry = WideEntry<V>;
  const FlatPairView pv = flat_pair(args, blockIdx.y);
  __shared__ std::uint32_t before[flat_warps][flat_max_bands];  // per unit and block column
  __shared__ std::uint32_t leaf_total[flat_max_bands];
  __shared__ NodeRef leaf_ref[flat_max_bands];
  __shared__ std::uint32_t unit_m[flat_warps];
  const AddState<V>& st = args.st;
  const std::uint32_t b = st.log2d, d = 1u << b, br = blockIdx.x;
  const std::uint32_t warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const std::uint32_t units = flat_units(b);
  const unsigned form = pv.work->form;
  if (form == 0u) return;
  std::byte* node = st.dst + pv.work->offset;
  const auto inner_type = static_cast<NodeType>(pv.work->inner_type);
  const bool inner_dense = form == 2u && inner_type == NodeType::dense;
  auto* dense_row = reinterpret_cast<NodeRef*>(node) + (br << b);
  // A band a block for the result's rows only: the block of band br also
  // clears the dense inner node's rows br + k x grid beyond them.
  if (inner_dense)
    for (std::uint32_t row = br; row < d; row += gridDim.x)
      for (std::uint32_t j = threadIdx.x; j < d; j += blockDim.x) reinterpret_cast<NodeRef*>(node)[(row << b) | j] = null_ref;
  __syncthreads();
  const FlatBand band = pv.bands[br];
  if (band.m == 0) return;  // the whole block leaves together
  const FlatUnit unit = warp < units ? pv.units[br * units + warp] : FlatUnit{0, 0, 0};
  const Entry* u = st.scratch + unit.u;
  if (lane == 0) unit_m[warp] = unit.m;
  __syncthreads();
  if (form == 1u) {
    // Row-major already: each unit's run of the node's arrays.
    std::uint32_t at = band.m_before;
    for (std::uint32_t w = 0; w < warp; ++w) at += unit_m[w];
    const CooLayout l = coow_layout(*reinterpret_cast<const std::uint32_t*>(node), sizeof(V));
    auto* dc = reinterpret_cast<WideCoord*>(node + l.coord_offset) + at;
    V* dv = reinterpret_cast<V*>(node + l.value_offset) + at;
    for (std::uint32_t i = lane; i < unit.m; i += 32) {
      const std::uint32_t k = u[i].key;
      dc[i] = WideCoord{static_cast<std::uint16_t>((br << b) | (k >> (2 * b))), static_cast<std::uint16_t>(k & (d * d - 1))};
      dv[i] = u[i].value;
    }
    return;
  }
  // Standard form. Each block column's entries before each unit's, then the
  // band's leaves placed in block-column order and zeroed.
  if (warp < units) flat_block_histogram(u, unit.m, b, lane, before[warp]);
  __syncthreads();
  for (std::uint32_t c = threadIdx.x; c < d; c += blockDim.x) {
    std::uint32_t sum = 0;
    for (std::uint32_t w = 0; w < units; ++w) {
      const std::uint32_t n = before[w][c];
      before[w][c] = sum;
      sum += n;
    }
    leaf_total[c] = sum;
  }
  __syncthreads();
  if (warp == 0) {
    unsigned long long placed = band.leaf_at;
    std::uint32_t blocks = 0;
    const std::uint32_t blocks_total = inner_dense ? 0u : *reinterpret_cast<const std::uint32_t*>(node);
    const CooLayout il = inner_dense ? CooLayout{} : coo_layout(inner_type, blocks_total, sizeof(NodeRef));
    auto* inner_refs = reinterpret_cast<NodeRef*>(node + (inner_dense ? 0u : il.value_offset));
    auto* inner_coords = reinterpret_cast<LocalCoord*>(node + il.coord_offset);
    for (std::uint32_t base = 0; base < d; base += 32) {
      const std::uint32_t c = base + lane;
      const std::uint32_t cnt = c < d ? leaf_total[c] : 0u;
      const NodeChoice leaf = cnt ? choose_node(cnt, b, true, sizeof(V)) : NodeChoice{NodeType::dense, 0};
      unsigned long long incl = leaf.bytes;
      for (std::uint32_t o = 1; o < 32; o <<= 1) {
        const unsigned long long t = __shfl_up_sync(full_warp, incl, o);
        if (lane >= o) incl += t;
      }
      const unsigned present = __ballot_sync(full_warp, cnt != 0);
      if (cnt != 0) {
        const NodeRef ref = make_ref(placed + incl - leaf.bytes, leaf.type);
        leaf_ref[c] = ref;
        const std::uint32_t block = band.blocks_before + blocks + __popc(present & lanes_below(lane));
        if (inner_dense) {
          dense_row[c] = ref;
        } else {
          inner_coords[block] = LocalCoord{static_cast<std::uint8_t>(br), static_cast<std::uint8_t>(c)};
          inner_refs[block] = ref;
        }
      }
      placed += __shfl_sync(full_warp, incl, 31);
      blocks += __popc(present);
    }
  }
  auto* zero = reinterpret_cast<uint4*>(st.dst + band.leaf_at);
  for (std::uint64_t i = threadIdx.x; i < band.leaf_bytes / 16; i += blockDim.x) zero[i] = make_uint4(0, 0, 0, 0);
  __syncthreads();
  // Sparse leaves' counts, after the zeroing.
  for (std::uint32_t c = threadIdx.x; c < d; c += blockDim.x)
    if (leaf_total[c] != 0 && ref_type(leaf_ref[c]) != NodeType::dense)
      *reinterpret_cast<std::uint32_t*>(st.dst + ref_offset(leaf_ref[c])) = leaf_total[c];
  if (warp >= units) return;
  // Each entry to its leaf: its place there is the entries of its block
  // column before this unit plus those before it in this unit (a stable
  // rank by match_any per step, as counting_pass).
  std::uint32_t* base = before[warp];
  for (std::uint32_t start = 0; start < unit.m; start += 32) {
    const std::uint32_t i = start + lane;
    const bool active = i < unit.m;
    const std::uint32_t k = active ? u[i].key : 0u;
    const std::uint32_t c = active ? key_digit(k, 1, b) : 0xFFFFu + lane;
    const unsigned peers = __match_any_sync(full_warp, c);
    std::uint32_t p = 0;
    if (active) p = base[c] + __popc(peers & lanes_below(lane));
    __syncwarp();
    if (active) {
      const NodeRef ref = leaf_ref[c];
      std::byte* leaf = st.dst + ref_offset(ref);
      const std::uint32_t row = k >> (2 * b), col = key_digit(k, 0, b);
      if (ref_type(ref) == NodeType::dense) {
        const std::uint32_t cell = (row << b) | col;
        reinterpret_cast<V*>(leaf + dense_mask_bytes(b))[cell] = u[i].value;
        set_mask_bit(leaf, cell);
      } else {
        const CooLayout l = coo_layout(ref_type(ref), leaf_total[c], sizeof(V));
        reinterpret_cast<LocalCoord*>(leaf + l.coord_offset)[p] =
            LocalCoord{static_cast<std::uint8_t>(row), static_cast<std::uint8_t>(col)};
        reinterpret_cast<V*>(leaf + l.value_offset)[p] = u[i].value;
      }
      if ((peers >> lane) == 1u) base[c] += __popc(peers);
    }
    __syncwarp();
  }
}

}  // namespace hisparse::ops::add_gpu
