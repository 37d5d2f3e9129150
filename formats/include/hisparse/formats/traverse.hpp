#pragma once
// Host traversal of the hierarchy: every leaf entry with its global content
// coordinates (before the matrix state is applied), in tree order.
#include "hisparse/formats/matrix.hpp"
#include "hisparse/formats/node_view.hpp"

namespace hisparse {

namespace detail {
template <class V, class F>
void visit_node(const Content<V>& c, NodeRef ref, std::uint32_t level, index_t block_row, index_t block_col, F& f) {
  const std::uint32_t b = c.shape.log2_node_size;
  if (ref_type(ref) == NodeType::coow) {  // a whole level depth-2 sub-tree, 16-bit coordinates
    const CoowView<V> w = coow_view<V>(c.pool.data(), ref);
    for (std::uint32_t i = 0; i < w.count; ++i)
      f((block_row << (2 * b)) | w.coords[i].row, (block_col << (2 * b)) | w.coords[i].col, w.values[i]);
    return;
  }
  if (level + 1 == c.shape.depth) {
    for_each_entry<V>(c.pool.data(), ref, b, true, [&](LocalCoord lc, V v) {
      f((block_row << b) | lc.row, (block_col << b) | lc.col, v);
    });
  } else {
    for_each_entry<NodeRef>(c.pool.data(), ref, b, false, [&](LocalCoord lc, NodeRef child) {
      visit_node(c, child, level + 1, (block_row << b) | lc.row, (block_col << b) | lc.col, f);
    });
  }
}
}  // namespace detail

// f(index_t row, index_t col, V value) for every stored entry of the content.
template <class V, class F>
void for_each_content_entry(const Content<V>& c, F&& f) {
  if (c.root() != null_ref) detail::visit_node(c, c.root(), 0, 0, 0, f);
}

// The same with the matrix state applied: logical coordinates of op(A) and
// the value multiplied by the scale.
template <class V, class F>
void for_each_logical_entry(const Matrix<V>& m, F&& f) {
  const bool t = m.transposed();
  const V s = m.scale();
  // A scale of exactly one leaves values as stored: a complex product by
  // (1, 0) is not the identity (an infinite part gives 0 * inf = NaN, and
  // (-0, -y) * (1, 0) has real part +0), and to_coo of a matrix must return
  // its entries bit for bit (the round-trip property, tests/fuzz).
  const bool unscaled = s == V(1);
  for_each_content_entry(m.content(), [&](index_t r, index_t c, V v) {
    const V x = unscaled ? v : s * v;
    if (t) f(c, r, x);
    else f(r, c, x);
  });
}

}  // namespace hisparse
