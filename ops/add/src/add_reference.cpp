#include "hisparse/ops/add_reference.hpp"

#include <complex>
#include <string>

#include "hisparse/formats/logical_node.hpp"
#include "hisparse/formats/node_writer.hpp"

namespace hisparse::ops {
namespace {

template <class V>
class Adder {
 public:
  Adder(const Matrix<V>& a, const Matrix<V>& b, V alpha, V beta, Shape shape)
      : a_(a), b_(b), ka_(alpha * a.scale()), kb_(beta * b.scale()), shape_(shape), out_(shape) {}

  std::shared_ptr<const Content<V>> run() {
    const NodeRef ra = a_.content().root(), rb = b_.content().root();
    const NodeRef root = (ra == null_ref && rb == null_ref) ? null_ref : node(0, ra, rb);
    return out_.finish(root);
  }

 private:
  // Merges the node pair (either may be null) at `level`; returns the new node.
  NodeRef node(std::uint32_t level, NodeRef ra, NodeRef rb) {
    const bool leaf = level + 1 == shape_.depth;
    const std::uint32_t bits = shape_.log2_node_size;
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
};

}  // namespace

template <class V>
Matrix<V> add_reference(const Matrix<V>& a, const Matrix<V>& b, V alpha, V beta) {
  if (a.rows() != b.rows() || a.cols() != b.cols())
    throw Error("add: op(A) is " + std::to_string(a.rows()) + " x " + std::to_string(a.cols()) + " but op(B) is " +
                std::to_string(b.rows()) + " x " + std::to_string(b.cols()));
  if (a.node_size() != b.node_size())
    throw Error("add: node sizes differ (" + std::to_string(a.node_size()) + " and " + std::to_string(b.node_size()) +
                "); convert one operand first");
  for (const Matrix<V>* m : {&a, &b})
    if (m->content().header().flags & pool_flag_wide)
      throw Error("add: matrices built with wide (COOW) nodes are not supported by add or materialize yet; "
                  "build them without wide nodes");
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
