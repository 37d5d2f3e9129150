#pragma once
// A node's entries in the orientation of the matrix state: with the transpose
// flag set, local coordinates are swapped and re-sorted row-major. Host code
// that rewrites trees (add, materialize) works on these lists.
#include <algorithm>
#include <utility>
#include <vector>

#include "hisparse/formats/node_view.hpp"

namespace hisparse {

template <class E>
using LogicalEntries = std::vector<std::pair<LocalCoord, E>>;

template <class E>
void gather_logical(const std::byte* pool, NodeRef ref, std::uint32_t log2_d, bool leaf, bool transposed,
                    LogicalEntries<E>& out) {
  out.clear();
  if (ref == null_ref) return;
  for_each_entry<E>(pool, ref, log2_d, leaf, [&](LocalCoord lc, E v) {
    out.emplace_back(transposed ? LocalCoord{lc.col, lc.row} : lc, v);
  });
  if (transposed)
    std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return coord_less(a.first, b.first); });
}

}  // namespace hisparse
