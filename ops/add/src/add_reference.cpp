#include "hisparse/ops/add_reference.hpp"

#include <complex>
#include <string>

#include "hisparse/formats/logical_node.hpp"
#include "hisparse/formats/node_writer.hpp"

#include <algorithm>
#include <map>

namespace hisparse::ops {
namespace {

template <class V>
class Adder {
 public:
  Adder(const Matrix<V>& a, const Matrix<V>& b, V alpha, V beta, Shape shape)
      : a_(a), b_(b), ka_(alpha * a.scale()), kb_(beta * b.scale()), shape_(shape), out_(shape),
        wide_(((a.content().header().flags | b.content().header().flags) & pool_flag_wide) != 0) {}

  std::shared_ptr<const Content<V>> run() {
    const NodeRef ra = a_.content().root(), rb = b_.content().root();
    const NodeRef root = (ra == null_ref && rb == null_ref) ? null_ref : node(0, ra, rb);
    return out_.finish(root, wide_ ? pool_flag_wide : std::uint8_t{0});
  }

 private:
  // Merges the node pair (either may be null) at `level`; returns the new node.
  NodeRef node(std::uint32_t level, NodeRef ra, NodeRef rb) {
    const bool leaf = level + 1 == shape_.depth;
    const std::uint32_t bits = shape_.log2_node_size;
    if (wide_ && level + 2 == shape_.depth) return wide_subtree(ra, rb);
    std::vector<LocalCoord> coords;
    if (leaf) {
      LogicalEntries<V> ea, eb;
      gather_logical<V>(a_.content().pool.data(), ra, bits, true, a_.transposed(), ea);
      gather_logical<V>(b_.content().pool.data(), rb, bits, true, b_.transposed(), eb);
      std::vector<V> vals;
      merge(ea, eb, [&](LocalCoord lc, const V* va, const V* vb) {
        coords.push_back(lc);
        vals.push_back((va ? ka_ * *va : V(0)) + (vb ? kb_ * *vb : V(0)));
      });
      return out_.template node<V>(true, coords, vals);
    }
    LogicalEntries<NodeRef> ca, cb;
    gather_logical<NodeRef>(a_.content().pool.data(), ra, bits, false, a_.transposed(), ca);
    gather_logical<NodeRef>(b_.content().pool.data(), rb, bits, false, b_.transposed(), cb);
    std::vector<NodeRef> refs;
    merge(ca, cb, [&](LocalCoord lc, const NodeRef* xa, const NodeRef* xb) {
      coords.push_back(lc);
      refs.push_back(node(level + 1, xa ? *xa : null_ref, xb ? *xb : null_ref));
    });
    return out_.template node<NodeRef>(false, coords, refs);
  }

  using WideEntries = std::vector<std::pair<WideCoord, V>>;

  // The entries of a level depth-2 node (COOW or standard sub-tree), in the
  // operand's logical orientation, sorted by (row16, col16).
  static void gather_wide(const Matrix<V>& m, NodeRef ref, std::uint32_t b, WideEntries& out) {
    out.clear();
    if (ref == null_ref) return;
    const std::byte* pool = m.content().pool.data();
    auto push = [&](std::uint32_t r, std::uint32_t c, V v) {
      const auto r16 = static_cast<std::uint16_t>(r), c16 = static_cast<std::uint16_t>(c);
      out.push_back({m.transposed() ? WideCoord{c16, r16} : WideCoord{r16, c16}, v});
    };
    if (ref_type(ref) == NodeType::coow) {
      const CoowView<V> w = coow_view<V>(pool, ref);
      for (std::uint32_t i = 0; i < w.count; ++i) push(w.coords[i].row, w.coords[i].col, w.values[i]);
    } else {
      for_each_entry<NodeRef>(pool, ref, b, false, [&](LocalCoord hi, NodeRef leaf) {
        for_each_entry<V>(pool, leaf, b, true, [&](LocalCoord lo, V v) {
          push((std::uint32_t{hi.row} << b) | lo.row, (std::uint32_t{hi.col} << b) | lo.col, v);
        });
      });
    }
    std::sort(out.begin(), out.end(), [](const auto& x, const auto& y) { return wide_less(x.first, y.first); });
  }

  // In a wide result, every level depth-2 block is written by the COOW rule:
  // one COOW node where that is no larger than the inner node plus its leaves.
  NodeRef wide_subtree(NodeRef ra, NodeRef rb) {
    const std::uint32_t b = shape_.log2_node_size;
    WideEntries ea, eb, sum;
    gather_wide(a_, ra, b, ea);
    gather_wide(b_, rb, b, eb);
    std::size_t i = 0, j = 0;
    while (i < ea.size() || j < eb.size()) {
      if (j == eb.size() || (i < ea.size() && wide_less(ea[i].first, eb[j].first))) {
        sum.push_back({ea[i].first, ka_ * ea[i].second + V(0)});  // "+ 0" as in node(): -0 becomes +0
        ++i;
      } else if (i == ea.size() || wide_less(eb[j].first, ea[i].first)) {
        sum.push_back({eb[j].first, V(0) + kb_ * eb[j].second});
        ++j;
      } else {
        sum.push_back({ea[i].first, ka_ * ea[i].second + kb_ * eb[j].second});
        ++i;
        ++j;
      }
    }
    // Leaves of the standard form, keyed row-major by their block in the node.
    std::map<std::pair<std::uint32_t, std::uint32_t>, std::vector<std::size_t>> leaves;
    for (std::size_t k = 0; k < sum.size(); ++k) leaves[{sum[k].first.row >> b, sum[k].first.col >> b}].push_back(k);
    std::uint64_t standard = choose_node(static_cast<std::uint32_t>(leaves.size()), b, false, sizeof(NodeRef)).bytes;
    for (const auto& [blk, ks] : leaves) standard += choose_node(static_cast<std::uint32_t>(ks.size()), b, true, sizeof(V)).bytes;
    if (coow_layout64(sum.size(), sizeof(V)).bytes <= standard) {  // 64 bits: see the builder
      std::vector<WideCoord> coords;
      std::vector<V> vals;
      for (const auto& [wc, v] : sum) {
        coords.push_back(wc);
        vals.push_back(v);
      }
      return out_.coow(coords, vals);
    }
    const std::uint32_t mask = (1u << b) - 1;
    std::vector<LocalCoord> child_coords;
    std::vector<NodeRef> child_refs;
    for (const auto& [blk, ks] : leaves) {
      std::vector<LocalCoord> coords;
      std::vector<V> vals;
      for (std::size_t k : ks) {
        coords.push_back({static_cast<std::uint8_t>(sum[k].first.row & mask), static_cast<std::uint8_t>(sum[k].first.col & mask)});
        vals.push_back(sum[k].second);
      }
      child_coords.push_back({static_cast<std::uint8_t>(blk.first), static_cast<std::uint8_t>(blk.second)});
      child_refs.push_back(out_.template node<V>(true, coords, vals));
    }
    return out_.template node<NodeRef>(false, child_coords, child_refs);
  }

  template <class E, class F>
  static void merge(const LogicalEntries<E>& ea, const LogicalEntries<E>& eb, F&& f) {
    std::size_t i = 0, j = 0;
    while (i < ea.size() || j < eb.size()) {
      if (j == eb.size() || (i < ea.size() && coord_less(ea[i].first, eb[j].first))) {
        f(ea[i].first, &ea[i].second, nullptr);
        ++i;
      } else if (i == ea.size() || coord_less(eb[j].first, ea[i].first)) {
        f(eb[j].first, nullptr, &eb[j].second);
        ++j;
      } else {
        f(ea[i].first, &ea[i].second, &eb[j].second);
        ++i;
        ++j;
      }
    }
  }

  const Matrix<V>& a_;
  const Matrix<V>& b_;
  V ka_, kb_;
  Shape shape_;
  TreeWriter<V> out_;
  bool wide_;
};

}  // namespace

void check_add_operands(index_t a_rows, index_t a_cols, std::uint32_t a_node_size, index_t b_rows, index_t b_cols,
                        std::uint32_t b_node_size) {
  if (a_rows != b_rows || a_cols != b_cols)
    throw Error("add: op(A) is " + std::to_string(a_rows) + " x " + std::to_string(a_cols) + " but op(B) is " +
                std::to_string(b_rows) + " x " + std::to_string(b_cols));
  if (a_node_size != b_node_size)
    throw Error("add: node sizes differ (" + std::to_string(a_node_size) + " and " + std::to_string(b_node_size) +
                "); convert one operand first");
}

template <class V>
Matrix<V> add_reference(const Matrix<V>& a, const Matrix<V>& b, V alpha, V beta) {
  check_add_operands(a.rows(), a.cols(), a.node_size(), b.rows(), b.cols(), b.node_size());
  const Shape shape = Shape::make(a.rows(), a.cols(), a.node_size());
  return Matrix<V>(Adder<V>(a, b, alpha, beta, shape).run());
}

template Matrix<float> add_reference(const Matrix<float>&, const Matrix<float>&, float, float);
template Matrix<double> add_reference(const Matrix<double>&, const Matrix<double>&, double, double);
template Matrix<std::complex<float>> add_reference(const Matrix<std::complex<float>>&,
                                                   const Matrix<std::complex<float>>&, std::complex<float>,
                                                   std::complex<float>);
template Matrix<std::complex<double>> add_reference(const Matrix<std::complex<double>>&,
                                                    const Matrix<std::complex<double>>&, std::complex<double>,
                                                    std::complex<double>);

}  // namespace hisparse::ops
