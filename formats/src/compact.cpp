// compacted(): a content's reachable nodes laid out as the builder lays them
// out. The builder writes each level's nodes in tree order, deepest level
// first; a breadth-first walk that lists every level's nodes in tree order
// (children row-major) therefore gives the same offsets. Leaves and COOW
// nodes are copied as their bytes; inner nodes are encoded again with their
// children's new references (same count, so the same node type).
#include <complex>
#include <cstring>
#include <span>
#include <vector>

#include "hisparse/formats/matrix.hpp"
#include "hisparse/formats/node_view.hpp"
#include "hisparse/formats/node_writer.hpp"

namespace hisparse {
namespace {

struct Placed {
  NodeRef source;
  LocalCoord pos;       // inside the parent
  std::uint64_t first;  // inner: its children in the next level
  std::uint32_t count;
  std::uint64_t bytes;
  std::uint64_t offset;
};

}  // namespace

template <class V>
std::shared_ptr<const Content<V>> compacted(const Content<V>& c) {
  const std::byte* src = c.pool.data();
  const std::uint32_t b = c.shape.log2_node_size, depth = c.shape.depth;
  std::vector<std::vector<Placed>> levels(depth);
  if (c.root() != null_ref) levels[0].push_back({c.root(), {0, 0}, 0, 0, 0, 0});
  for (std::uint32_t l = 0; l < depth; ++l) {
    const bool leaf = l + 1 == depth;
    for (Placed& p : levels[l]) {
      if (!leaf && ref_type(p.source) != NodeType::coow) {
        p.first = levels[l + 1].size();
        for_each_entry<NodeRef>(src, p.source, b, false,
                                [&](LocalCoord lc, NodeRef r) { levels[l + 1].push_back({r, lc, 0, 0, 0, 0}); });
        p.count = static_cast<std::uint32_t>(levels[l + 1].size() - p.first);
        p.bytes = choose_node(p.count, b, false, sizeof(NodeRef)).bytes;
      } else {
        p.bytes = stored_node_bytes(src, p.source, b, leaf, sizeof(V));
      }
    }
  }
  std::uint64_t bytes = sizeof(PoolHeader);
  for (std::uint32_t l = depth; l-- > 0;)
    for (Placed& p : levels[l]) {
      p.offset = bytes;
      bytes += p.bytes;
    }
  auto out = std::make_shared<Content<V>>();
  out->shape = c.shape;
  out->nnz = c.nnz;
  out->pool = AlignedBuffer(bytes);
  std::byte* dst = out->pool.data();
  std::vector<LocalCoord> coords;
  std::vector<NodeRef> refs;
  for (std::uint32_t l = depth; l-- > 0;)
    for (const Placed& p : levels[l]) {
      if (l + 1 == depth || ref_type(p.source) == NodeType::coow) {
        std::memcpy(dst + p.offset, src + ref_offset(p.source), p.bytes);
        continue;
      }
      coords.clear();
      refs.clear();
      for (std::uint64_t k = p.first; k < p.first + p.count; ++k) {
        const Placed& child = levels[l + 1][k];
        coords.push_back(child.pos);
        refs.push_back(make_ref(child.offset, ref_type(child.source)));
      }
      write_node<NodeRef>(dst + p.offset, choose_node(p.count, b, false, sizeof(NodeRef)), b, false, coords, refs);
    }
  PoolHeader h = c.header();
  h.root = levels[0].empty() ? null_ref : make_ref(levels[0][0].offset, ref_type(levels[0][0].source));
  std::memcpy(dst, &h, sizeof(h));
  return out;
}

template std::shared_ptr<const Content<float>> compacted(const Content<float>&);
template std::shared_ptr<const Content<double>> compacted(const Content<double>&);
template std::shared_ptr<const Content<std::complex<float>>> compacted(const Content<std::complex<float>>&);
template std::shared_ptr<const Content<std::complex<double>>> compacted(const Content<std::complex<double>>&);

}  // namespace hisparse
