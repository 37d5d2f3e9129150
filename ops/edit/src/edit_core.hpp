#pragma once
// What both ways of editing share (edit_walk.hpp writes a new pool,
// edit_in_place.hpp rewrites nodes where they are): tree keys, applying a
// position's updates, merging a node's sorted entries with its sorted
// updates, node sizes and the COOW rule's standard side.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <numeric>
#include <span>
#include <utility>
#include <vector>

#include "hisparse/formats/matrix.hpp"
#include "hisparse/formats/node_view.hpp"
#include "hisparse/ops/edit.hpp"

namespace hisparse::ops::edit_detail {

using Key = unsigned __int128;

template <class V>
struct Update {
  Key key;
  V val;
};

template <class V>
class EditCore {
 public:
  EditCore(const Content<V>& c, EditMode mode, EditStats& stats)
      : c_(c), pool_(c.pool.data()), b_(c.shape.log2_node_size), depth_(c.shape.depth),
        wide_((c.header().flags & pool_flag_wide) != 0 && depth_ >= 2), mode_(mode), stats_(stats) {}

  // The builder's key: (row digit, column digit) pairs from the root down.
  [[nodiscard]] Key key(index_t row, index_t col) const {
    Key k = 0;
    const index_t mask = (index_t{1} << b_) - 1;
    for (std::uint32_t l = 0; l < depth_; ++l) {
      const std::uint32_t s = b_ * (depth_ - 1 - l);
      k = (k << (2 * b_)) | (Key((row >> s) & mask) << b_) | Key((col >> s) & mask);
    }
    return k;
  }

 protected:
  using WideEntry = std::pair<WideCoord, V>;

  [[nodiscard]] LocalCoord digits(Key k, std::uint32_t level) const {
    const Key p = k >> (2 * b_ * (depth_ - 1 - level));
    const Key mask = (Key{1} << b_) - 1;
    return {static_cast<std::uint8_t>((p >> b_) & mask), static_cast<std::uint8_t>(p & mask)};
  }
  [[nodiscard]] bool is_leaf_level(std::uint32_t level) const { return level + 1 == depth_; }
  [[nodiscard]] bool is_wide_level(std::uint32_t level) const { return wide_ && level + 2 == depth_; }

  // The updates of one position (a run, in input order) applied to its old
  // value (has_old) or to nothing: whether an entry is left there, its value
  // in v. add sums in input order onto the old value, as one update after
  // the other would.
  bool apply_run(bool has_old, V& v, std::span<const Update<V>> run) {
    bool present = has_old;
    for (const Update<V>& u : run) {
      if (mode_ == EditMode::remove) {
        present = false;
      } else {
        v = mode_ == EditMode::add && present ? v + u.val : u.val;
        present = true;
      }
    }
    if (has_old) ++(present ? stats_.updated : stats_.removed);
    else if (present) ++stats_.inserted;
    return present;
  }

  // A node's old entries (sorted by `less`) merged with its updates, sorted
  // the same way by coord_of(update), a position's updates in input order.
  template <class Coord, class CoordOf, class Less>
  std::vector<std::pair<Coord, V>> merge_entries(const std::vector<std::pair<Coord, V>>& old,
                                                 std::span<const Update<V>> ups, CoordOf coord_of, Less less) {
    std::vector<std::pair<Coord, V>> merged;
    merged.reserve(old.size() + ups.size());
    std::size_t oi = 0;
    for (std::size_t i = 0; i < ups.size();) {
      std::size_t e = i + 1;
      while (e < ups.size() && ups[e].key == ups[i].key) ++e;
      const Coord at = coord_of(i);
      while (oi < old.size() && less(old[oi].first, at)) merged.push_back(old[oi++]);
      const bool has_old = oi < old.size() && !less(at, old[oi].first);
      V v = has_old ? old[oi].second : V(0);
      if (has_old) ++oi;
      if (apply_run(has_old, v, ups.subspan(i, e - i))) merged.push_back({at, v});
      i = e;
    }
    while (oi < old.size()) merged.push_back(old[oi++]);
    return merged;
  }

  // A leaf's updates (at `level`, the leaf level) merged with its entries.
  std::vector<std::pair<LocalCoord, V>> merged_leaf(NodeRef ref, std::uint32_t level, std::span<const Update<V>> ups) {
    std::vector<std::pair<LocalCoord, V>> old;
    if (ref != null_ref) for_each_entry<V>(pool_, ref, b_, true, [&](LocalCoord lc, V v) { old.push_back({lc, v}); });
    return merge_entries(old, ups, [&](std::size_t i) { return digits(ups[i].key, level); },
                         [](LocalCoord x, LocalCoord y) { return coord_less(x, y); });
  }

  // A COOW node's updates (its level `level`) merged with its entries, in the
  // 16-bit coordinates' row-major order.
  std::vector<WideEntry> merged_coow(NodeRef ref, std::uint32_t level, std::span<const Update<V>> ups) {
    std::vector<WideEntry> old;
    const CoowView<V> w = coow_view<V>(pool_, ref);
    for (std::uint32_t i = 0; i < w.count; ++i) old.push_back({w.coords[i], w.values[i]});
    // The updates in that order; a position's updates stay in input order.
    std::vector<WideCoord> wc_of(ups.size());
    for (std::size_t i = 0; i < ups.size(); ++i) wc_of[i] = wide_of(digits(ups[i].key, level), digits(ups[i].key, level + 1));
    std::vector<std::size_t> perm(ups.size());
    std::iota(perm.begin(), perm.end(), std::size_t{0});
    std::stable_sort(perm.begin(), perm.end(), [&](std::size_t x, std::size_t y) { return wide_less(wc_of[x], wc_of[y]); });
    std::vector<Update<V>> sorted(ups.size());
    std::vector<WideCoord> sorted_wc(ups.size());
    for (std::size_t i = 0; i < perm.size(); ++i) {
      sorted[i] = ups[perm[i]];
      sorted_wc[i] = wc_of[perm[i]];
    }
    return merge_entries(old, std::span<const Update<V>>(sorted), [&](std::size_t i) { return sorted_wc[i]; },
                         [](WideCoord x, WideCoord y) { return wide_less(x, y); });
  }

  // Bytes of a leaf or COOW node, from its header.
  [[nodiscard]] std::uint64_t node_bytes(NodeRef ref) const { return stored_node_bytes(pool_, ref, b_, true, sizeof(V)); }

  // Entries of a leaf, read from its node (a dense leaf's mask bits).
  [[nodiscard]] std::uint64_t leaf_entries(NodeRef ref) const {
    if (ref_type(ref) != NodeType::dense) return detail::node_count(pool_ + ref_offset(ref));
    const std::uint8_t* mask = dense_mask(pool_, ref);
    std::uint64_t n = 0;
    for (std::uint32_t i = 0; i < (1u << (2 * b_)) / 8; ++i) n += static_cast<std::uint32_t>(std::popcount(mask[i]));
    if (b_ == 1) n = static_cast<std::uint32_t>(std::popcount(static_cast<unsigned>(mask[0] & 0xFu)));
    return n;
  }

  [[nodiscard]] WideCoord wide_of(LocalCoord hi, LocalCoord lo) const {
    return WideCoord{static_cast<std::uint16_t>((hi.row << b_) | lo.row), static_cast<std::uint16_t>((hi.col << b_) | lo.col)};
  }
  [[nodiscard]] LocalCoord hi_of(WideCoord w) const {
    return {static_cast<std::uint8_t>(w.row >> b_), static_cast<std::uint8_t>(w.col >> b_)};
  }
  [[nodiscard]] LocalCoord lo_of(WideCoord w) const {
    const std::uint32_t low = (1u << b_) - 1;
    return {static_cast<std::uint8_t>(w.row & low), static_cast<std::uint8_t>(w.col & low)};
  }

  // Whether one COOW node of these entries is the canonical form of their
  // level depth-2 sub-tree: not larger than the inner node and its leaves
  // (each leaf sized from its count alone: a counter per leaf position).
  [[nodiscard]] bool coow_wins(const std::vector<WideEntry>& entries) const {
    if (entries.size() > 0xFFFFFFFFull) return false;
    std::vector<std::uint32_t> per_leaf(std::size_t{1} << (2 * b_), 0);
    for (const WideEntry& e : entries) ++per_leaf[(std::size_t{hi_of(e.first).row} << b_) | hi_of(e.first).col];
    std::uint64_t standard = 0;
    std::uint32_t leaves = 0;
    for (const std::uint32_t n : per_leaf)
      if (n > 0) {
        standard += choose_node(n, b_, true, sizeof(V)).bytes;
        ++leaves;
      }
    standard += choose_node(leaves, b_, false, sizeof(NodeRef)).bytes;
    return coow_layout64(entries.size(), sizeof(V)).bytes <= standard;
  }

  const Content<V>& c_;
  const std::byte* pool_;
  std::uint32_t b_, depth_;
  bool wide_;
  EditMode mode_;
  EditStats& stats_;
};

}  // namespace hisparse::ops::edit_detail
