#pragma once
// AddWide: a pair of level depth-2 sub-trees in a pool with wide (COOW)
// nodes (see add_procedures.cuh).
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "add_state.cuh"
#include "hisparse/ops/warp_counting_sort.cuh"

namespace hisparse::ops::add_gpu {

using gpu::counting_pass;

// ---- AddWide ------------------------------------------------------------------

__device__ inline std::uint32_t wide_key(std::uint32_t r16, std::uint32_t c16, std::uint32_t b) {
  const std::uint32_t m = (1u << b) - 1u;
  return ((r16 >> b) << (3 * b)) | ((c16 >> b) << (2 * b)) | ((r16 & m) << b) | (c16 & m);
}
__device__ inline std::uint32_t key_digit(std::uint32_t key, std::uint32_t k, std::uint32_t b) {
  return (key >> (k * b)) & ((1u << b) - 1u);
}

template <class V>
struct AddWide {
  using payload_type = AddItem;
  static constexpr std::uint32_t threads_per_item = 32;
  static constexpr std::uint32_t shared_bytes = 256 * sizeof(std::uint32_t);
  static constexpr const char* name = "add-wide";
  using Entry = WideEntry<V>;

  __device__ static std::uint32_t leaf_count(const std::byte* pool, NodeRef leaf, std::uint32_t b) {
    if (ref_type(leaf) != NodeType::dense) return *reinterpret_cast<const std::uint32_t*>(pool + ref_offset(leaf));
    const auto* words = reinterpret_cast<const unsigned*>(dense_mask(pool, leaf));
    std::uint32_t n = 0;
    for (std::uint32_t w = 0; w < dense_mask_bytes(b) / 4; ++w) n += __popc(words[w]);
    return n;
  }

  // The children of an inner node in warp steps: f(step base, child or
  // null, its block coordinate) with every lane in every step.
  template <class F>
  __device__ static void for_children(const std::byte* pool, NodeRef ref, std::uint32_t b, std::uint32_t lane, F&& f) {
    const std::uint32_t d = 1u << b;
    const bool dense = ref_type(ref) == NodeType::dense;
    const NodeRef* cells = dense ? dense_values<NodeRef>(pool, ref, b, false) : nullptr;
    const CooView<NodeRef> v = dense ? CooView<NodeRef>{} : coo_view<NodeRef>(pool, ref);
    const std::uint32_t span = dense ? d * d : v.count;
    for (std::uint32_t base = 0; base < span; base += 32) {
      const std::uint32_t s = base + lane;
      NodeRef child = null_ref;
      LocalCoord hi{};
      if (s < span) {
        if (dense) {
          child = cells[s];
          hi = LocalCoord{static_cast<std::uint8_t>(s >> b), static_cast<std::uint8_t>(s & (d - 1))};
        } else {
          child = v.values[s];
          hi = v.coords[s];
        }
      }
      f(child, hi);
    }
  }

  __device__ static std::uint32_t subtree_count(const std::byte* pool, NodeRef ref, std::uint32_t b, std::uint32_t lane) {
    if (ref == null_ref) return 0;
    if (ref_type(ref) == NodeType::coow) return *reinterpret_cast<const std::uint32_t*>(pool + ref_offset(ref));
    std::uint32_t n = 0;
    for_children(pool, ref, b, lane, [&](NodeRef child, LocalCoord) {
      if (child != null_ref) n += leaf_count(pool, child, b);
    });
    return __reduce_add_sync(full_warp, n);
  }

  // Writes the sub-tree's entries to out[0, count) as logical keys; returns
  // whether they are already in key order.
  __device__ static bool gather(const Operand<V>& op, NodeRef ref, std::uint32_t b, std::uint32_t lane, Entry* out) {
    if (ref == null_ref) return true;
    const std::byte* pool = op.pool;
    auto key = [&](std::uint32_t r16, std::uint32_t c16) { return op.transposed ? wide_key(c16, r16, b) : wide_key(r16, c16, b); };
    if (ref_type(ref) == NodeType::coow) {
      const CoowView<V> w = coow_view<V>(pool, ref);
      for (std::uint32_t i = lane; i < w.count; i += 32) out[i] = Entry{key(w.coords[i].row, w.coords[i].col), w.values[i]};
      return false;
    }
    const std::uint32_t d = 1u << b;
    std::uint32_t offset = 0;
    for_children(pool, ref, b, lane, [&](NodeRef child, LocalCoord hi) {
      const std::uint32_t c = child != null_ref ? leaf_count(pool, child, b) : 0u;
      const std::uint32_t incl = warp_inclusive_sum(c, lane);
      const std::uint32_t total = __shfl_sync(full_warp, incl, 31);
      const std::uint32_t start = offset + incl - c;
      const std::uint32_t hi_bits = (std::uint32_t{hi.row} << 8) | hi.col;
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
            if (present) o[run + __popc(bits & lanes_below(lane))] = Entry{key(r0 | (cell >> b), c0 | (cell & (d - 1))), vals[cell]};
            run += __popc(bits);
          }
        } else {
          const CooView<V> v = coo_view<V>(pool, leaf);
          for (std::uint32_t i = lane; i < v.count; i += 32)
            o[i] = Entry{key(r0 | v.coords[i].row, c0 | v.coords[i].col), v.values[i]};
        }
      }
      offset += total;
    });
    // Row-major children of row-major leaves are the standard order.
    return !op.transposed;
  }

  // Sorts x[0, n) by key (LSD counting passes through y); the result is in x.
  __device__ static void sort(Entry* x, Entry* y, std::uint32_t n, std::uint32_t first_digit, std::uint32_t b,
                              std::uint32_t lane, std::uint32_t* shared) {
    const std::uint32_t d = 1u << b;
    for (std::uint32_t k = first_digit; k < 4; k += 2) {
      counting_pass(n, d, lane, shared, [&](std::uint32_t i) { return key_digit(x[i].key, k, b); },
                    [&](std::uint32_t i, std::uint32_t p) { y[p] = x[i]; });
      __syncwarp();
      counting_pass(n, d, lane, shared, [&](std::uint32_t i) { return key_digit(y[i].key, k + 1, b); },
                    [&](std::uint32_t i, std::uint32_t p) { x[p] = y[i]; });
      __syncwarp();
    }
  }

  __device__ static std::uint32_t lower_bound_key(const Entry* e, std::uint32_t n, std::uint32_t key) {
    std::uint32_t lo = 0, hi = n;
    while (lo < hi) {
      const std::uint32_t mid = (lo + hi) / 2;
      if (e[mid].key < key) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  // Merges sorted x_a[0, na) and x_b[0, nb) into u (union, values combined);
  // returns the union's size.
  __device__ static std::uint32_t merge(const AddState<V>& st, const Entry* xa, std::uint32_t na, const Entry* xb,
                                        std::uint32_t nb, Entry* u, std::uint32_t lane) {
    auto walk = [&](const Entry* self, std::uint32_t ns, const Entry* other, std::uint32_t no, bool is_a) {
      std::uint32_t carry = 0;
      for (std::uint32_t base = 0; base < ns; base += 32) {
        const std::uint32_t i = base + lane;
        const bool active = i < ns;
        std::uint32_t lb = 0;
        bool hit = false;
        if (active) {
          lb = lower_bound_key(other, no, self[i].key);
          hit = lb < no && other[lb].key == self[i].key;
        }
        const unsigned hits = __ballot_sync(full_warp, hit);
        const std::uint32_t common_before = carry + __popc(hits & lanes_below(lane));
        if (active) {
          if (is_a) {
            u[i + lb - common_before] =
                Entry{self[i].key, combine(st.a, true, self[i].value, st.b, hit, hit ? other[lb].value : V(0))};
          } else if (!hit) {
            u[i - common_before + lb] = Entry{self[i].key, combine(st.a, false, V(0), st.b, true, self[i].value)};
          }
        }
        carry += __popc(hits);
      }
      return carry;
    };
    const std::uint32_t common = walk(xa, na, xb, nb, true);
    walk(xb, nb, xa, na, false);
    __syncwarp();
    return na + nb - common;
  }

  // Blocks (leaves) of the union in warp steps: f(i, is_end, start of the
  // entry's block, index of the entry's block) for every lane of every step.
  template <class F>
  __device__ static void for_blocks(const Entry* u, std::uint32_t m, std::uint32_t b, std::uint32_t lane, F&& f) {
    std::uint32_t open_start = 0, blocks_before = 0;
    for (std::uint32_t base = 0; base < m; base += 32) {
      const std::uint32_t i = base + lane;
      const bool active = i < m;
      bool is_start = false, is_end = false;
      if (active) {
        const std::uint32_t blk = u[i].key >> (2 * b);
        is_start = i == 0 || (u[i - 1].key >> (2 * b)) != blk;
        is_end = i + 1 == m || (u[i + 1].key >> (2 * b)) != blk;
      }
      const unsigned starts = __ballot_sync(full_warp, is_start);
      const unsigned mine = starts & lanes_up_to(lane);
      const std::uint32_t start = mine ? base + 31u - __clz(mine) : open_start;
      const std::uint32_t block = blocks_before + __popc(mine) - 1u;  // valid when active
      f(i, active, is_end, start, block);
      if (starts) open_start = base + 31u - __clz(starts);
      blocks_before += __popc(starts);
    }
  }

  template <class Context>
  __device__ static void run(const AddItem& it, std::uint32_t lane, std::uint32_t, const Context& ctx) {
    const AddState<V>& st = ctx.state();
    const std::uint32_t b = st.log2d, d = 1u << b;
    auto* shared = static_cast<std::uint32_t*>(ctx.shared());
    const std::uint32_t na = subtree_count(st.a.pool, it.a, b, lane);
    const std::uint32_t nb = subtree_count(st.b.pool, it.b, b, lane);
    const std::uint64_t n = std::uint64_t{na} + nb;
    // A large pair is one warp's work for milliseconds: the flat kernels take
    // it after the run, a block per block row (perf-log A9).
    if (st.big_pairs != nullptr && n > flat_pair_entries) {
      unsigned k = 0;
      if (lane == 0) k = atomicAdd(st.big_count, 1u);
      k = __shfl_sync(full_warp, k, 0);
      if (k < st.big_capacity) {
        if (lane == 0) st.big_pairs[k] = FlatPair{it.a, it.b, it.slot};
        return;
      }
    }
    const unsigned long long s0 = allocate(st.scratch_alloc, 2 * n, lane);
    if (s0 + 2 * n > st.scratch_capacity) {
      if (lane == 0) atomicOr(st.flags, flag_scratch_too_small);
      return;
    }
    Entry* x = st.scratch + s0;
    Entry* y = x + n;
    // Gather both into x; a COOW node is in (row, col) order, which two passes
    // (column block, then row block) turn into the standard order.
    const bool a_sorted = gather(st.a, it.a, b, lane, x);
    const bool b_sorted = gather(st.b, it.b, b, lane, x + na);
    __syncwarp();
    auto first_digit = [&](const Operand<V>& op, NodeRef ref) {
      return ref_type(ref) == NodeType::coow && !op.transposed ? 2u : 0u;
    };
    if (!a_sorted) sort(x, y, na, first_digit(st.a, it.a), b, lane, shared);
    if (!b_sorted) sort(x + na, y + na, nb, first_digit(st.b, it.b), b, lane, shared);
    Entry* u = y;
    const std::uint32_t m = merge(st, x, na, x + na, nb, u, lane);

    // Bytes in the standard form: an inner node and one leaf per block.
    std::uint32_t blocks = 0;
    unsigned long long leaf_bytes = 0;
    for_blocks(u, m, b, lane, [&](std::uint32_t i, bool active, bool is_end, std::uint32_t start, std::uint32_t block) {
      if (active && is_end) {
        leaf_bytes += choose_node(i - start + 1, b, true, sizeof(V)).bytes;
        blocks = block + 1;
      }
    });
    blocks = __reduce_max_sync(full_warp, blocks);
    leaf_bytes = warp_sum64(leaf_bytes);
    const NodeChoice inner = choose_node(blocks, b, false, sizeof(NodeRef));
    const std::uint64_t standard = inner.bytes + leaf_bytes;
    const std::uint64_t coow = coow_layout64(m, sizeof(V)).bytes;  // 64 bits: see the builder
    const bool as_coow = coow <= standard;
    const std::uint64_t bytes = as_coow ? coow : standard;

    const unsigned long long offset = allocate(st.alloc, bytes, lane);
    if (offset + bytes > st.capacity) {
      if (lane == 0) atomicOr(st.flags, flag_pool_too_small);
      return;
    }
    std::byte* dst = st.dst + offset;
    zero_node(dst, bytes, lane);
    if (lane == 0) atomicAdd(st.nnz, static_cast<unsigned long long>(m));

    if (as_coow) {
      // Standard order -> (row, col): stable passes by the row's low, then
      // high digit (within a row the standard order is by column already).
      const CooLayout l = coow_layout(m, sizeof(V));
      auto* dc = reinterpret_cast<WideCoord*>(dst + l.coord_offset);
      V* dv = reinterpret_cast<V*>(dst + l.value_offset);
      counting_pass(m, d, lane, shared, [&](std::uint32_t i) { return key_digit(u[i].key, 1, b); },
                    [&](std::uint32_t i, std::uint32_t p) { x[p] = u[i]; });
      __syncwarp();
      counting_pass(m, d, lane, shared, [&](std::uint32_t i) { return key_digit(x[i].key, 3, b); },
                    [&](std::uint32_t i, std::uint32_t p) {
                      const std::uint32_t k = x[i].key;
                      dc[p] = WideCoord{static_cast<std::uint16_t>((key_digit(k, 3, b) << b) | key_digit(k, 1, b)),
                                        static_cast<std::uint16_t>((key_digit(k, 2, b) << b) | key_digit(k, 0, b))};
                      dv[p] = x[i].value;
                    });
      if (lane == 0) *reinterpret_cast<std::uint32_t*>(dst) = m;
      if (lane == 0) *it.slot = make_ref(offset, NodeType::coow);
      return;
    }

    // Standard form: the inner node, then its leaves in block order. First
    // each block's leaf is placed (at its last entry) and recorded in x, free
    // now, as (reference, first entry); then every entry goes to its leaf.
    auto* meta = reinterpret_cast<uint2*>(x);
    const bool inner_dense = inner.type == NodeType::dense;
    const CooLayout il = inner_dense ? CooLayout{} : coo_layout(inner.type, blocks, sizeof(NodeRef));
    auto* inner_refs = reinterpret_cast<NodeRef*>(dst + (inner_dense ? 0u : il.value_offset));
    auto* inner_coords = reinterpret_cast<LocalCoord*>(dst + il.coord_offset);
    unsigned long long placed = offset + inner.bytes;
    for_blocks(u, m, b, lane, [&](std::uint32_t i, bool active, bool is_end, std::uint32_t start, std::uint32_t block) {
      const std::uint32_t cnt = active && is_end ? i - start + 1 : 0u;
      const NodeChoice leaf = cnt ? choose_node(cnt, b, true, sizeof(V)) : NodeChoice{NodeType::dense, 0};
      // Leaf bytes are multiples of 16 and under 2^32 in total; scan them.
      unsigned long long incl = leaf.bytes;
      for (std::uint32_t o = 1; o < 32; o <<= 1) {
        const unsigned long long nb2 = __shfl_up_sync(full_warp, incl, o);
        if (lane >= o) incl += nb2;
      }
      const unsigned long long at = placed + incl - leaf.bytes;
      placed += __shfl_sync(full_warp, incl, 31);
      if (!cnt) return;
      const NodeRef ref = make_ref(at, leaf.type);
      meta[block] = make_uint2(ref, start);
      const std::uint32_t k = u[i].key;
      const auto br = static_cast<std::uint8_t>(key_digit(k, 3, b)), bc = static_cast<std::uint8_t>(key_digit(k, 2, b));
      if (inner_dense) {
        inner_refs[(std::uint32_t{br} << b) | bc] = ref;
      } else {
        inner_coords[block] = LocalCoord{br, bc};
        inner_refs[block] = ref;
      }
      if (leaf.type != NodeType::dense) *reinterpret_cast<std::uint32_t*>(st.dst + at) = cnt;
    });
    __syncwarp();
    for_blocks(u, m, b, lane, [&](std::uint32_t i, bool active, bool, std::uint32_t, std::uint32_t block) {
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
    if (lane == 0 && !inner_dense) *reinterpret_cast<std::uint32_t*>(dst) = blocks;
    if (lane == 0) *it.slot = make_ref(offset, inner.type);
  }
};

}  // namespace hisparse::ops::add_gpu
