#pragma once
// Read-only views of nodes inside a pool, shared by host code and GPU
// procedures. `E` is the element type of the node: the value type for a leaf,
// NodeRef for an inner node.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "hisparse/formats/node.hpp"

namespace hisparse {

// The arrays of a sparse node (COO1/2/4 with 8-bit coordinates, COOW with
// 16-bit ones): same shape, different coordinate type and layout.
template <class Coord, class E>
struct SparseView {
  std::uint32_t count;
  const Coord* coords;
  const E* values;
};
template <class E>
using CooView = SparseView<LocalCoord, E>;
template <class V>
using CoowView = SparseView<WideCoord, V>;

namespace detail {
template <class Coord, class E>
HISPARSE_HD inline SparseView<Coord, E> sparse_view(const std::byte* node, std::uint32_t count, CooLayout l) {
  return {count, reinterpret_cast<const Coord*>(node + l.coord_offset), reinterpret_cast<const E*>(node + l.value_offset)};
}
HISPARSE_HD inline std::uint32_t node_count(const std::byte* node) { return *reinterpret_cast<const std::uint32_t*>(node); }
}  // namespace detail

template <class E>
HISPARSE_HD inline CooView<E> coo_view(const std::byte* pool, NodeRef ref) {
  const std::byte* node = pool + ref_offset(ref);
  const std::uint32_t count = detail::node_count(node);
  return detail::sparse_view<LocalCoord, E>(node, count, coo_layout(ref_type(ref), count, sizeof(E)));
}

template <class V>
HISPARSE_HD inline CoowView<V> coow_view(const std::byte* pool, NodeRef ref) {
  const std::byte* node = pool + ref_offset(ref);
  const std::uint32_t count = detail::node_count(node);
  return detail::sparse_view<WideCoord, V>(node, count, coow_layout(count, sizeof(V)));
}

// The bytes a node occupies in its pool (padding included), from its
// reference and header: `elem_bytes` is sizeof(V) for a leaf or a COOW node,
// sizeof(NodeRef) for an inner node.
HISPARSE_HD inline std::uint64_t stored_node_bytes(const std::byte* pool, NodeRef ref, std::uint32_t log2_d, bool leaf,
                                                   std::uint32_t elem_bytes) {
  const NodeType t = ref_type(ref);
  if (t == NodeType::dense) return dense_bytes(log2_d, leaf, elem_bytes);
  const std::uint32_t count = detail::node_count(pool + ref_offset(ref));
  return t == NodeType::coow ? coow_layout(count, elem_bytes).bytes : coo_layout(t, count, elem_bytes).bytes;
}

// Dense leaf: occupancy mask then values. Dense inner: child references.
HISPARSE_HD inline const std::uint8_t* dense_mask(const std::byte* pool, NodeRef ref) {
  return reinterpret_cast<const std::uint8_t*>(pool + ref_offset(ref));
}
template <class E>
HISPARSE_HD inline const E* dense_values(const std::byte* pool, NodeRef ref, std::uint32_t log2_d, bool leaf) {
  return reinterpret_cast<const E*>(pool + ref_offset(ref) + (leaf ? dense_mask_bytes(log2_d) : 0u));
}
HISPARSE_HD inline bool mask_bit(const std::uint8_t* mask, std::uint32_t i) { return (mask[i >> 3] >> (i & 7u)) & 1u; }

// Visits every entry (leaf) or non-null child (inner) of a node in row-major
// order: f(LocalCoord, E). This is the one generic access path: an op without
// a specialised procedure for a node type still works through it.
template <class E, class F>
HISPARSE_HD void for_each_entry(const std::byte* pool, NodeRef ref, std::uint32_t log2_d, bool leaf, F&& f) {
  if (ref_type(ref) == NodeType::dense) {
    const std::uint32_t d = 1u << log2_d;
    const E* values = dense_values<E>(pool, ref, log2_d, leaf);
    const std::uint8_t* mask = leaf ? dense_mask(pool, ref) : nullptr;
    for (std::uint32_t i = 0; i < d * d; ++i) {
      const bool present = leaf ? mask_bit(mask, i) : (reinterpret_cast<const NodeRef*>(values)[i] != null_ref);
      if (present)
        f(LocalCoord{static_cast<std::uint8_t>(i >> log2_d), static_cast<std::uint8_t>(i & (d - 1))}, values[i]);
    }
  } else {
    const CooView<E> v = coo_view<E>(pool, ref);
    for (std::uint32_t i = 0; i < v.count; ++i) f(v.coords[i], v.values[i]);
  }
}

}  // namespace hisparse
