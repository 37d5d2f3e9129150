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
// Files: add_flat_state.cuh (records, launch arguments), add_flat_buckets.cuh
// (the bucket kernels), add_flat_units.cuh (a unit's entries and their sort),
// add_flat_block.cuh (a unit too heavy for a warp, by the whole block), this
// one (the layout and the merge and write kernels). run_flat in add_gpu.cu
// launches them, on the roots of a depth-2 add or on the pairs
// AddWide handed over in a deeper one.
//
// Keys within a band are row-major: (row in band, column in node), b bits
// and 2b bits: digit 2 is the row, digit 1 the block column, digit 0 the
// column in the block.
#include <cuda_runtime.h>

#include <cstdint>

#include "add_flat_block.cuh"

namespace hisparse::ops::add_gpu {

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

// A depth-2 add's result, by the lane that laid the node out (every other
// block is done): into mapped host memory, and the counters this call used
// back to their initial values (add_gpu.cu's Counters). flat_write reads only
// the work record's layout fields, which the next call writes before it does.
template <class V>
__device__ void flat_finish(const FlatArgs<V>& args, const FlatPairView& pv) {
  const AddState<V>& st = args.st;
  volatile auto* alloc = st.alloc;
  volatile auto* nnz = st.nnz;
  volatile auto* flags = st.flags;
  volatile auto* slot = pv.slot;
  FlatResult* r = args.result;
  r->alloc = *alloc;
  r->nnz = *nnz;
  r->root = *slot;
  r->flags = *flags;
  *alloc = sizeof(PoolHeader);
  *nnz = 0;
  *st.scratch_alloc = 0;
  *flags = 0;
  *slot = null_ref;
  for (unsigned& t : pv.work->tickets) t = 0;
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

// A heavy unit of flat_merge, gathered by its warp, left to the block.
template <class V>
struct FlatHeavy {
  WideEntry<V>* x;  // both operands' entries, then as much room (y)
  std::uint32_t na, nb;
  unsigned pa, pb;  // their sorting passes
  unsigned long long u_index;  // where the union goes in scratch (x and y there: y's index)
  std::uint32_t warp;
  bool in_shared;
};

// The heavy unit h of flat_merge by the whole block: sorted, merged, kept in
// scratch, its block columns counted into its warp's histogram.
template <class V>
__device__ void flat_heavy_merge(const FlatArgs<V>& args, const FlatPairView& pv, const FlatHeavy<V>& h,
                                 std::uint32_t br, unsigned char* flat_shared, std::uint32_t* unit_m,
                                 FlatBlockShared& s) {
  const AddState<V>& st = args.st;
  const std::uint32_t b = st.log2d, thread = threadIdx.x, n = h.na + h.nb;
  WideEntry<V>* x = h.x;
  WideEntry<V>* y = x + n;
  if (h.pa != 0u) flat_block_sort(x, y, h.na, h.pa, b, thread, s);
  if (h.pb != 0u) flat_block_sort(x + h.na, y + h.na, h.nb, h.pb, b, thread, s);
  const std::uint32_t m = flat_block_merge(st, x, h.na, x + h.na, h.nb, y, thread, s);
  unsigned long long u_index = h.u_index;
  bool failed = false;
  if (h.in_shared) {
    if (thread == 0) s.at = atomicAdd(st.scratch_alloc, static_cast<unsigned long long>(m));
    __syncthreads();
    u_index = s.at;
    failed = u_index + m > st.scratch_capacity;
    if (!failed)
      for (std::uint32_t i = thread; i < m; i += flat_threads) st.scratch[u_index + i] = y[i];
  }
  auto* counts = reinterpret_cast<std::uint32_t*>(flat_shared + h.warp * flat_hist_bytes);
  for (std::uint32_t c = thread; c < (1u << b); c += flat_threads) counts[c] = 0;
  __syncthreads();
  if (!failed)
    for (std::uint32_t i = thread; i < m; i += flat_threads) atomicAdd(counts + key_digit(y[i].key, 1, b), 1u);
  if (thread == 0) {
    if (failed) atomicOr(st.flags, flag_scratch_too_small);
    unit_m[h.warp] = failed ? 0u : m;
    pv.units[br * flat_units(b) + h.warp] = FlatUnit{u_index, failed ? 0u : m, 0};
  }
  __syncthreads();
}

// A block per band (blockIdx.x), a warp per unit; dynamic shared memory:
// the histograms and an arena of args.arena_entries. At most 64 registers:
// two blocks per multiprocessor (a launch of many blocks; perf-log A10).
template <class V>
__global__ void __launch_bounds__(flat_threads, 2) flat_merge(FlatArgs<V> args) {
  using Entry = WideEntry<V>;
  const FlatPairView pv = flat_pair(args, blockIdx.y);
  extern __shared__ __align__(16) unsigned char flat_shared[];
  __shared__ std::uint32_t unit_m[flat_warps];
  __shared__ std::uint32_t band_blocks;
  __shared__ unsigned long long band_leaf_bytes;
  __shared__ bool last;
  __shared__ unsigned arena_used;
  __shared__ FlatHeavy<V> heavy[flat_warps];
  __shared__ unsigned heavy_count;
  __shared__ FlatBlockShared block_shared;
  const AddState<V>& st = args.st;
  const std::uint32_t b = st.log2d, d = 1u << b, br = blockIdx.x;
  const std::uint32_t warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const std::uint32_t units = flat_units(b), rows = 1u << flat_unit_log2_rows(b);
  if (threadIdx.x == 0) {
    band_blocks = 0;
    band_leaf_bytes = 0;
    arena_used = 0;
    heavy_count = 0;
  }
  __syncthreads();
  auto* counts = reinterpret_cast<std::uint32_t*>(flat_shared + warp * flat_hist_bytes);
  auto* arena = reinterpret_cast<Entry*>(flat_shared + flat_warps * flat_hist_bytes);
  std::uint32_t m = 0;
  if (warp < units && (*st.flags & flag_scratch_too_small) == 0u) {
    const std::uint32_t unit = br * units + warp, r0 = warp * rows, r1 = r0 + rows;
    const FlatUnitSource<V> sa{st.a, pv.a, pv.buckets + unit, st.scratch + pv.work->bucket_base[0],
                               br, r0, r1, b, lane, (args.scanned & 1u) != 0u};
    const FlatUnitSource<V> sb{st.b, pv.b, pv.buckets + d * units + unit, st.scratch + pv.work->bucket_base[1],
                               br, r0, r1, b, lane, (args.scanned & 2u) != 0u};
    const auto fa = sa.count(), fb = sb.count();
    const std::uint32_t na = fa.total, nb = fb.total;
    const std::uint32_t n = na + nb;
    unsigned at = 0;
    if (lane == 0 && n != 0) at = atomicAdd(&arena_used, 2 * n);
    at = __shfl_sync(full_warp, at, 0);
    const bool in_shared = n == 0 || (2 * n <= args.arena_entries && at + 2 * n <= args.arena_entries);
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
    unsigned pa = 0, pb = 0;
    if (!failed && n != 0) {
      pa = sa.gather(x, fa);
      pb = sb.gather(x + na, fb);
      __syncwarp();
    }
    if (!failed && n > flat_heavy_entries) {
      // The block's, once the light units are done (flat_heavy_merge).
      if (lane == 0) heavy[atomicAdd(&heavy_count, 1u)] = FlatHeavy<V>{x, na, nb, pa, pb, u_index, warp, in_shared};
    } else {
      if (!failed && n != 0) {
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
    }
  } else if (lane == 0) {
    unit_m[warp] = 0;
  }
  __syncthreads();
  for (std::uint32_t h = 0; h < heavy_count; ++h)
    flat_heavy_merge(args, pv, heavy[h], br, flat_shared, unit_m, block_shared);
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
  if (lane == 0) pv.work->form = 0;  // flat_write writes nothing unless the layout says so
  __syncwarp();
  if ((*reinterpret_cast<volatile unsigned*>(st.flags) & flag_scratch_too_small) == 0u)
    flat_layout(args, pv, gridDim.x, lane);
  if (args.result != nullptr && lane == 0) flat_finish(args, pv);
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
  __shared__ FlatUnit unit_rec[flat_warps];
  __shared__ FlatBlockShared block_shared;
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
  if (lane == 0) {
    unit_m[warp] = unit.m;
    unit_rec[warp] = unit;
  }
  __syncthreads();
  // Heavy units (flat_heavy_entries): the whole block's, after the others (loops
  // every thread takes alike: unit_m is shared).
  const auto heavy = [](std::uint32_t m) { return m > flat_heavy_entries; };
  const bool light = !heavy(unit.m);
  if (form == 1u) {
    // Row-major already: each unit's run of the node's arrays.
    const CooLayout l = coow_layout(*reinterpret_cast<const std::uint32_t*>(node), sizeof(V));
    const auto copy = [&](const Entry* from, std::uint32_t m, std::uint32_t at, std::uint32_t first, std::uint32_t step) {
      auto* dc = reinterpret_cast<WideCoord*>(node + l.coord_offset) + at;
      V* dv = reinterpret_cast<V*>(node + l.value_offset) + at;
      for (std::uint32_t i = first; i < m; i += step) {
        const std::uint32_t k = from[i].key;
        dc[i] = WideCoord{static_cast<std::uint16_t>((br << b) | (k >> (2 * b))), static_cast<std::uint16_t>(k & (d * d - 1))};
        dv[i] = from[i].value;
      }
    };
    std::uint32_t at = band.m_before;
    for (std::uint32_t w = 0; w < units; ++w) {
      if (w == warp && light) copy(u, unit.m, at, lane, 32);
      if (heavy(unit_m[w])) copy(st.scratch + unit_rec[w].u, unit_m[w], at, threadIdx.x, flat_threads);
      at += unit_m[w];
    }
    return;
  }
  // Standard form. Each block column's entries before each unit's, then the
  // band's leaves placed in block-column order and zeroed.
  if (warp < units) flat_block_histogram(u, light ? unit.m : 0u, b, lane, before[warp]);
  __syncthreads();
  for (std::uint32_t w = 0; w < units; ++w) {
    if (!heavy(unit_m[w])) continue;
    const Entry* hu = st.scratch + unit_rec[w].u;
    for (std::uint32_t i = threadIdx.x; i < unit_m[w]; i += flat_threads) atomicAdd(&before[w][key_digit(hu[i].key, 1, b)], 1u);
  }
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
  // Each entry to its leaf: its place there is the entries of its block
  // column before this unit plus those before it in this unit (a stable
  // rank by match_any per step, as counting_pass).
  const auto put = [&](const Entry& e, std::uint32_t p) {
    const std::uint32_t k = e.key, c = key_digit(k, 1, b);
    const NodeRef ref = leaf_ref[c];
    std::byte* leaf = st.dst + ref_offset(ref);
    const std::uint32_t row = k >> (2 * b), col = key_digit(k, 0, b);
    if (ref_type(ref) == NodeType::dense) {
      const std::uint32_t cell = (row << b) | col;
      reinterpret_cast<V*>(leaf + dense_mask_bytes(b))[cell] = e.value;
      set_mask_bit(leaf, cell);
    } else {
      const CooLayout l = coo_layout(ref_type(ref), leaf_total[c], sizeof(V));
      reinterpret_cast<LocalCoord*>(leaf + l.coord_offset)[p] =
          LocalCoord{static_cast<std::uint8_t>(row), static_cast<std::uint8_t>(col)};
      reinterpret_cast<V*>(leaf + l.value_offset)[p] = e.value;
    }
  };
  if (warp < units && light) {
    gpu::rank_scatter(0, unit.m, lane, before[warp], [&](std::uint32_t i) { return key_digit(u[i].key, 1, b); },
                      [&](std::uint32_t i, std::uint32_t p) { put(u[i], p); });
  }
  // A heavy unit: each warp a chunk of it, ranked after the chunks before.
  for (std::uint32_t w = 0; w < units; ++w) {
    if (!heavy(unit_m[w])) continue;
    const Entry* hu = st.scratch + unit_rec[w].u;
    const auto digit = [&](std::uint32_t i) { return key_digit(hu[i].key, 1, b); };
    flat_chunk_counts(unit_m[w], d, threadIdx.x, block_shared, digit);
    flat_chunk_offsets(d, threadIdx.x, block_shared, [&](std::uint32_t c) { return before[w][c]; });
    flat_chunk_scatter(unit_m[w], threadIdx.x, block_shared, digit, [&](std::uint32_t i, std::uint32_t p) { put(hu[i], p); });
  }
}

}  // namespace hisparse::ops::add_gpu
