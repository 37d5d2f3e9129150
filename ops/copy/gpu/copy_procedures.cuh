#pragma once
// The node procedure of GPU copy and materialize: a warp takes one node,
// allocates its bytes from the destination pool with an atomic bump
// allocator, writes it (transposed and scaled for materialize), enqueues its
// children with the address of the slot their new reference goes to, and
// writes its own new reference into its parent's slot.
#include <cuda_runtime.h>

#include <cstdint>

#include "hisparse/formats/node_view.hpp"
#include "hisparse/ops/warp_counting_sort.cuh"

namespace hisparse::ops::copy_gpu {

using gpu::counting_pass;

struct CopyItem {
  NodeRef src;
  std::uint32_t level;
  NodeRef* parent_slot;  // where the new reference of this node is written
};
static_assert(sizeof(CopyItem) == 16);

template <class V>
struct CopyState {
  const std::byte* src;
  std::byte* dst;
  std::byte* sort_buffer;  // pool-sized, for transposing wide nodes (null otherwise)
  unsigned long long* alloc;  // next free byte of dst
  std::uint64_t capacity;
  unsigned* overflow;
  std::uint32_t log2d;
  std::uint32_t depth;
  bool transpose;
  V scale;
  bool apply_scale;
};

template <class V>
struct CopyNode {
  using payload_type = CopyItem;
  static constexpr std::uint32_t threads_per_item = 32;
  // Per-item scratch: one counter per column of a node (d <= 256).
  static constexpr std::uint32_t shared_bytes = 256 * sizeof(std::uint32_t);
  static constexpr const char* name = "copy-node";

  template <class Context>
  __device__ static void run(const CopyItem& it, std::uint32_t lane, std::uint32_t group, const Context& ctx) {
    const CopyState<V>& st = ctx.state();
    if (ref_type(it.src) == NodeType::coow) {
      process_wide(it, lane, ctx, st);
      return;
    }
    const bool leaf = it.level + 1 == st.depth;
    if (leaf) process<V, Context>(it, lane, group, ctx, st, true);
    else process<NodeRef, Context>(it, lane, group, ctx, st, false);
  }

  template <class E, class Context>
  __device__ static void process(const CopyItem& it, std::uint32_t lane, std::uint32_t group, const Context& ctx,
                                 const CopyState<V>& st, bool leaf) {
    const std::uint32_t b = st.log2d, d = 1u << b;
    const std::byte* src = st.src + ref_offset(it.src);
    const NodeType type = ref_type(it.src);
    const bool dense = type == NodeType::dense;
    const std::uint32_t count = dense ? 0u : *reinterpret_cast<const std::uint32_t*>(src);
    const CooLayout l = dense ? CooLayout{} : coo_layout(type, count, sizeof(E));
    const std::uint64_t bytes = dense ? dense_bytes(b, leaf, sizeof(E)) : l.bytes;

    unsigned long long offset = 0;
    if (lane == 0) offset = atomicAdd(st.alloc, static_cast<unsigned long long>(bytes));
    offset = __shfl_sync(0xffffffffu, offset, 0);
    if (offset + bytes > st.capacity) {
      if (lane == 0) atomicOr(st.overflow, 1u);
      return;
    }
    std::byte* dst = st.dst + offset;
    const bool scale = leaf && st.apply_scale;

    if (dense) {
      const std::uint32_t mask_bytes = leaf ? dense_mask_bytes(b) : 0u;
      const E* sv = reinterpret_cast<const E*>(src + mask_bytes);
      E* dv = reinterpret_cast<E*>(dst + mask_bytes);
      const auto* sm = reinterpret_cast<const std::uint8_t*>(src);
      auto* dm = reinterpret_cast<std::uint8_t*>(dst);
      for (std::uint32_t cell = lane; cell < d * d; cell += group) {
        const std::uint32_t r = cell >> b, c = cell & (d - 1);
        const std::uint32_t out = st.transpose ? (c << b) | r : cell;
        E v = sv[cell];
        if constexpr (!std::is_same_v<E, NodeRef>) {
          if (scale) v = v * st.scale;
        }
        if constexpr (std::is_same_v<E, NodeRef>) {
          if (v != null_ref) ctx.template enqueue<CopyNode>(CopyItem{v, it.level + 1, reinterpret_cast<NodeRef*>(dv + out)});
        } else {
          dv[out] = v;
        }
      }
      if (leaf) {
        // The mask: bit `out` for every present source cell. Built byte by byte
        // (each lane owns whole destination bytes, so no atomics are needed).
        for (std::uint32_t byte = lane; byte < (d * d + 7) / 8; byte += group) {
          std::uint8_t m = 0;
          for (std::uint32_t k = 0; k < 8 && byte * 8 + k < d * d; ++k) {
            const std::uint32_t out = byte * 8 + k;
            const std::uint32_t in = st.transpose ? ((out & (d - 1)) << b) | (out >> b) : out;
            if (mask_bit(sm, in)) m = static_cast<std::uint8_t>(m | (1u << k));
          }
          dm[byte] = m;
        }
      }
    } else {
      const auto* sc = reinterpret_cast<const LocalCoord*>(src + l.coord_offset);
      const E* sv = reinterpret_cast<const E*>(src + l.value_offset);
      auto* dc = reinterpret_cast<LocalCoord*>(dst + l.coord_offset);
      E* dv = reinterpret_cast<E*>(dst + l.value_offset);
      if (lane == 0) *reinterpret_cast<std::uint32_t*>(dst) = count;
      auto emit = [&](std::uint32_t i, std::uint32_t p) {
        dc[p] = st.transpose ? LocalCoord{sc[i].col, sc[i].row} : sc[i];
        E v = sv[i];
        if constexpr (std::is_same_v<E, NodeRef>) {
          ctx.template enqueue<CopyNode>(CopyItem{v, it.level + 1, reinterpret_cast<NodeRef*>(dv + p)});
        } else {
          if (scale) v = v * st.scale;
          dv[p] = v;
        }
      };
      if (!st.transpose) {
        for (std::uint32_t i = lane; i < count; i += group) emit(i, i);
      } else {
        // Stable counting sort by column: entries are row-major, so within a
        // column they already come in row order.
        counting_pass(count, d, lane, static_cast<std::uint32_t*>(ctx.shared()),
                      [&](std::uint32_t i) { return static_cast<std::uint32_t>(sc[i].col); }, emit);
      }
    }
    if (lane == 0) *it.parent_slot = make_ref(offset, type);
  }

  // A wide (COOW) node: 16-bit coordinates over a d^2 x d^2 block. Copied
  // entry by entry; transposed by two stable counting passes over the column's
  // two base-d digits (low, then high: LSD order), which leaves the entries
  // sorted by (column, row) = the transposed node's row-major order. The
  // first pass writes into the sort buffer at this node's destination offset.
  template <class Context>
  __device__ static void process_wide(const CopyItem& it, std::uint32_t lane, const Context& ctx, const CopyState<V>& st) {
    const std::uint32_t b = st.log2d, d = 1u << b;
    const std::byte* src = st.src + ref_offset(it.src);
    const std::uint32_t count = *reinterpret_cast<const std::uint32_t*>(src);
    const CooLayout l = coow_layout(count, sizeof(V));
    unsigned long long offset = 0;
    if (lane == 0) offset = atomicAdd(st.alloc, static_cast<unsigned long long>(l.bytes));
    offset = __shfl_sync(0xffffffffu, offset, 0);
    if (offset + l.bytes > st.capacity) {
      if (lane == 0) atomicOr(st.overflow, 1u);
      return;
    }
    std::byte* dst = st.dst + offset;
    const auto* sc = reinterpret_cast<const WideCoord*>(src + l.coord_offset);
    const V* sv = reinterpret_cast<const V*>(src + l.value_offset);
    auto* dc = reinterpret_cast<WideCoord*>(dst + l.coord_offset);
    V* dv = reinterpret_cast<V*>(dst + l.value_offset);
    const V k = st.apply_scale ? st.scale : V(1);
    if (lane == 0) *reinterpret_cast<std::uint32_t*>(dst) = count;
    if (!st.transpose) {
      for (std::uint32_t i = lane; i < count; i += 32) {
        dc[i] = sc[i];
        dv[i] = st.apply_scale ? sv[i] * k : sv[i];
      }
    } else {
      std::byte* tmp = st.sort_buffer + offset;
      auto* tc = reinterpret_cast<WideCoord*>(tmp + l.coord_offset);
      V* tv = reinterpret_cast<V*>(tmp + l.value_offset);
      auto* base = static_cast<std::uint32_t*>(ctx.shared());
      counting_pass(count, d, lane, base, [&](std::uint32_t i) { return sc[i].col & (d - 1u); },
                    [&](std::uint32_t i, std::uint32_t p) {
                      tc[p] = sc[i];
                      tv[p] = sv[i];
                    });
      __syncwarp();
      counting_pass(count, d, lane, base, [&](std::uint32_t i) { return static_cast<std::uint32_t>(tc[i].col >> b); },
                    [&](std::uint32_t i, std::uint32_t p) {
                      dc[p] = WideCoord{tc[i].col, tc[i].row};
                      dv[p] = st.apply_scale ? tv[i] * k : tv[i];
                    });
    }
    if (lane == 0) *it.parent_slot = make_ref(offset, NodeType::coow);
  }
};

}  // namespace hisparse::ops::copy_gpu
