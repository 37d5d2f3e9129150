#pragma once
// The pool validator: checks every invariant of docs/format.md and throws
// hisparse::Error naming the first violation and the node's offset. Tests, the
// .hsp loader and the GPU ops' tests run every pool they see through it.
#include "hisparse/formats/matrix.hpp"

namespace hisparse {

struct PoolStats {
  std::uint64_t inner = 0, leaf = 0, dense = 0, coo1 = 0, coo2 = 0, coo4 = 0;
  std::uint64_t coow = 0;  // counted apart from inner and leaf: each replaces a sub-tree
  std::uint64_t node_bytes = 0;  // bytes of all distinct nodes
  std::uint64_t entries = 0;     // leaf entries reached
};

// Validates and returns the node statistics it gathered on the way.
template <class V>
PoolStats validate(const Content<V>& content);

}  // namespace hisparse
