#pragma once
// Encoding one node into zeroed pool memory, and an append-only writer that
// builds a whole pool child-before-parent. The builder, the reference add and
// materialize all encode through write_node, so every producer emits the same
// canonical node for the same entries.
#include <cstring>
#include <span>
#include <vector>

#include "hisparse/formats/matrix.hpp"
#include "hisparse/formats/node_view.hpp"

namespace hisparse {

// `coords` sorted row-major and unique; dst zeroed, choice.bytes long.
template <class E>
void write_node(std::byte* dst, NodeChoice choice, std::uint32_t log2_d, bool leaf,
                std::span<const LocalCoord> coords, std::span<const E> values) {
  const auto count = static_cast<std::uint32_t>(coords.size());
  if (choice.type == NodeType::dense) {
    E* cells = reinterpret_cast<E*>(dst + (leaf ? dense_mask_bytes(log2_d) : 0u));
    auto* mask = reinterpret_cast<std::uint8_t*>(dst);
    for (std::uint32_t i = 0; i < count; ++i) {
      const std::uint32_t cell = (std::uint32_t{coords[i].row} << log2_d) | coords[i].col;
      std::memcpy(cells + cell, &values[i], sizeof(E));
      if (leaf) mask[cell >> 3] = static_cast<std::uint8_t>(mask[cell >> 3] | (1u << (cell & 7u)));
    }
    return;
  }
  const CooLayout l = coo_layout(choice.type, count, sizeof(E));
  std::memcpy(dst, &count, sizeof(count));
  std::memcpy(dst + l.coord_offset, coords.data(), count * sizeof(LocalCoord));
  std::memcpy(dst + l.value_offset, values.data(), count * sizeof(E));
}

// A COOW node: `coords` sorted by wide_less and unique; dst zeroed.
template <class V>
void write_coow_node(std::byte* dst, std::span<const WideCoord> coords, std::span<const V> values) {
  const auto count = static_cast<std::uint32_t>(coords.size());
  const CooLayout l = coow_layout(count, sizeof(V));
  std::memcpy(dst, &count, sizeof(count));
  std::memcpy(dst + l.coord_offset, coords.data(), count * sizeof(WideCoord));
  std::memcpy(dst + l.value_offset, values.data(), count * sizeof(V));
}

// Appends nodes to a growing pool; children must be written before their
// parent (their references are the parent's values).
template <class V>
class TreeWriter {
 public:
  TreeWriter(Shape shape) : shape_(shape), bytes_(sizeof(PoolHeader)) {}

  template <class E>
  NodeRef node(bool leaf, std::span<const LocalCoord> coords, std::span<const E> values) {
    const NodeChoice choice =
        choose_node(static_cast<std::uint32_t>(coords.size()), shape_.log2_node_size, leaf, sizeof(E));
    const std::uint64_t offset = bytes_.size();
    if (offset + choice.bytes > max_pool_bytes)
      throw LimitError("result needs a node pool larger than the 4 GiB limit");
    bytes_.resize(offset + choice.bytes);
    write_node<E>(bytes_.data() + offset, choice, shape_.log2_node_size, leaf, coords, values);
    if (leaf) nnz_ += coords.size();
    return make_ref(offset, choice.type);
  }

  // A COOW node (only in pools finished with pool_flag_wide).
  NodeRef coow(std::span<const WideCoord> coords, std::span<const V> values) {
    const CooLayout l = coow_layout(static_cast<std::uint32_t>(coords.size()), sizeof(V));
    const std::uint64_t offset = bytes_.size();
    if (offset + l.bytes > max_pool_bytes) throw LimitError("result needs a node pool larger than the 4 GiB limit");
    bytes_.resize(offset + l.bytes);
    write_coow_node<V>(bytes_.data() + offset, coords, values);
    nnz_ += coords.size();
    return make_ref(offset, NodeType::coow);
  }

  std::shared_ptr<const Content<V>> finish(NodeRef root, std::uint8_t flags = 0) {
    auto c = std::make_shared<Content<V>>();
    c->shape = shape_;
    c->nnz = nnz_;
    c->pool = AlignedBuffer(bytes_.size());
    std::memcpy(c->pool.data(), bytes_.data(), bytes_.size());
    auto* h = reinterpret_cast<PoolHeader*>(c->pool.data());
    *h = PoolHeader{pool_magic, root, static_cast<std::uint8_t>(shape_.log2_node_size),
                    static_cast<std::uint8_t>(shape_.depth), sizeof(V), flags, 0};
    return c;
  }

 private:
  Shape shape_;
  std::vector<std::byte> bytes_;
  std::uint64_t nnz_ = 0;
};

}  // namespace hisparse
