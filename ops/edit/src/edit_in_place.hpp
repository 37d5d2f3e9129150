#pragma once
// Editing a pool where it is (edit_in_place, edit.hpp): when every node the
// batch touches keeps its type and its size, nothing else moves, so each
// touched leaf (or COOW node) is encoded again over its old bytes and the
// pool stays what it was, the builder's pool included. Value updates always
// qualify (where every updated entry of a node is present, only those values
// are overwritten); so do inserts that fill a sparse node's padding or a dense
// leaf's cells, and removals that leave its padded size. Anything else (a new
// node, a node that grows, shrinks, changes type or empties, a level depth-2
// sub-tree whose COOW rule flips) makes plan() return false before anything
// is written.
#include <cstring>
#include <map>
#include <vector>

#include "edit_core.hpp"
#include "hisparse/formats/node_writer.hpp"

namespace hisparse::ops::edit_detail {

template <class V>
class InPlaceEditor : public EditCore<V> {
  using Core = EditCore<V>;
  using Core::b_, Core::depth_, Core::pool_, Core::c_, Core::wide_, Core::stats_;
  using Core::digits, Core::is_leaf_level, Core::node_bytes, Core::leaf_entries;
  using typename Core::WideEntry;

 public:
  using Core::Core;

  // Plans the batch (tree order); false where it cannot be done in place.
  bool plan(std::span<const Update<V>> batch) {
    if (c_.root() == null_ref) return false;
    for (std::size_t i = 0; i < batch.size();) {
      // Down to the leaf of batch[i], or to the COOW node above it.
      NodeRef ref = c_.root(), parent = null_ref;
      std::uint32_t level = 0;
      for (; !is_leaf_level(level) && ref_type(ref) != NodeType::coow; ++level) {
        const NodeRef child = child_at(ref, digits(batch[i].key, level));
        if (child == null_ref) return false;
        parent = ref;
        ref = child;
      }
      // The updates under that node share the digits of the levels above it.
      std::size_t e = i + 1;
      while (e < batch.size() && same_node(batch[e].key, batch[i].key, level)) ++e;
      const std::span<const Update<V>> ups = batch.subspan(i, e - i);
      if (plan_values(ref, level, ups)) {
        i = e;
        continue;
      }
      if (ref_type(ref) == NodeType::coow ? !plan_coow(ref, level, ups) : !plan_leaf(ref, parent, level, ups))
        return false;
      i = e;
    }
    // A standard level depth-2 sub-tree whose leaves gained entries may now
    // be smaller as one COOW node: then it is not edited in place.
    for (const auto& [offset, p] : parents_)
      if (p.entries + p.delta <= 0xFFFFFFFFull && coow_layout64(p.entries + p.delta, sizeof(V)).bytes <= p.standard)
        return false;
    return true;
  }

  // Writes the planned values and nodes over their old bytes.
  void write(std::byte* pool) {
    for (const auto& [offset, v] : values_) std::memcpy(pool + offset, &v, sizeof(V));
    for (const Rewrite& r : rewrites_) {
      std::byte* dst = pool + ref_offset(r.ref);
      std::memset(dst, 0, r.choice.bytes);
      if (r.choice.type == NodeType::coow)
        write_coow_node<V>(dst, std::span(wide_coords_).subspan(r.first, r.count),
                           std::span<const V>(wide_vals_).subspan(r.first, r.count));
      else
        write_node<V>(dst, r.choice, b_, true, std::span(leaf_coords_).subspan(r.first, r.count),
                      std::span<const V>(leaf_vals_).subspan(r.first, r.count));
      ++stats_.nodes_rewritten;
    }
  }

 private:
  struct Rewrite {
    NodeRef ref;
    NodeChoice choice;
    std::uint64_t first;
    std::uint32_t count;
  };
  // A standard level depth-2 sub-tree of a wide pool with edited leaves:
  // its bytes (unchanged: its leaves keep their sizes), entries before, and
  // the entries its edited leaves gained.
  struct Parent {
    std::uint64_t standard = 0, entries = 0;
    std::int64_t delta = 0;
  };

  [[nodiscard]] bool same_node(Key a, Key b, std::uint32_t level) const {
    const std::uint32_t shift = 2 * b_ * (depth_ - level);
    return shift >= 128 || (a >> shift) == (b >> shift);
  }

  [[nodiscard]] NodeRef child_at(NodeRef inner, LocalCoord lc) const {
    if (ref_type(inner) == NodeType::dense)
      return dense_values<NodeRef>(pool_, inner, b_, false)[(std::uint32_t{lc.row} << b_) | lc.col];
    const CooView<NodeRef> v = coo_view<NodeRef>(pool_, inner);
    const LocalCoord* at = std::lower_bound(v.coords, v.coords + v.count, lc, [](LocalCoord x, LocalCoord y) { return coord_less(x, y); });
    return at != v.coords + v.count && at->row == lc.row && at->col == lc.col ? v.values[at - v.coords] : null_ref;
  }

  // Updates (set, add) of entries that are all present: only their values
  // change, found by a binary search (a cell, in a dense leaf). False, with
  // nothing planned, where any position is absent.
  bool plan_values(NodeRef ref, std::uint32_t level, std::span<const Update<V>> ups) {
    if (this->mode_ == EditMode::remove) return false;
    const NodeType t = ref_type(ref);
    const V* values = nullptr;
    std::vector<std::uint32_t> at;  // value index per run
    if (t == NodeType::coow) {
      const CoowView<V> w = coow_view<V>(pool_, ref);
      values = w.values;
      for (std::size_t i = 0; i < ups.size(); i = run_end(ups, i)) {
        const WideCoord wc = this->wide_of(digits(ups[i].key, level), digits(ups[i].key, level + 1));
        const WideCoord* f = std::lower_bound(w.coords, w.coords + w.count, wc, [](WideCoord x, WideCoord y) { return wide_less(x, y); });
        if (f == w.coords + w.count || f->row != wc.row || f->col != wc.col) return false;
        at.push_back(static_cast<std::uint32_t>(f - w.coords));
      }
    } else if (t == NodeType::dense) {
      values = dense_values<V>(pool_, ref, b_, true);
      const std::uint8_t* mask = dense_mask(pool_, ref);
      for (std::size_t i = 0; i < ups.size(); i = run_end(ups, i)) {
        const LocalCoord lc = digits(ups[i].key, level);
        const std::uint32_t cell = (std::uint32_t{lc.row} << b_) | lc.col;
        if (!mask_bit(mask, cell)) return false;
        at.push_back(cell);
      }
    } else {
      const CooView<V> v = coo_view<V>(pool_, ref);
      values = v.values;
      for (std::size_t i = 0; i < ups.size(); i = run_end(ups, i)) {
        const LocalCoord lc = digits(ups[i].key, level);
        const LocalCoord* f = std::lower_bound(v.coords, v.coords + v.count, lc, [](LocalCoord x, LocalCoord y) { return coord_less(x, y); });
        if (f == v.coords + v.count || f->row != lc.row || f->col != lc.col) return false;
        at.push_back(static_cast<std::uint32_t>(f - v.coords));
      }
    }
    std::size_t k = 0;
    for (std::size_t i = 0; i < ups.size(); ++k) {
      const std::size_t e = run_end(ups, i);
      V v = values[at[k]];
      this->apply_run(true, v, ups.subspan(i, e - i));
      values_.push_back({static_cast<std::uint64_t>(reinterpret_cast<const std::byte*>(values + at[k]) - pool_), v});
      i = e;
    }
    return true;
  }

  // The end of the run of updates of one position starting at i.
  static std::size_t run_end(std::span<const Update<V>> ups, std::size_t i) {
    std::size_t e = i + 1;
    while (e < ups.size() && ups[e].key == ups[i].key) ++e;
    return e;
  }

  bool plan_leaf(NodeRef ref, NodeRef parent, std::uint32_t level, std::span<const Update<V>> ups) {
    const std::uint64_t before = leaf_entries(ref);
    const auto merged = this->merged_leaf(ref, level, ups);
    if (merged.empty()) return false;
    const NodeChoice choice = choose_node(static_cast<std::uint32_t>(merged.size()), b_, true, sizeof(V));
    if (choice.type != ref_type(ref) || choice.bytes != node_bytes(ref)) return false;
    rewrites_.push_back(Rewrite{ref, choice, leaf_coords_.size(), static_cast<std::uint32_t>(merged.size())});
    for (const auto& [lc, v] : merged) {
      leaf_coords_.push_back(lc);
      leaf_vals_.push_back(v);
    }
    if (wide_ && level == depth_ - 1) {
      auto [it, fresh] = parents_.try_emplace(ref_offset(parent));
      Parent& p = it->second;
      if (fresh) {
        std::uint32_t children = 0;
        for_each_entry<NodeRef>(pool_, parent, b_, false, [&](LocalCoord, NodeRef leaf) {
          p.standard += node_bytes(leaf);
          p.entries += leaf_entries(leaf);
          ++children;
        });
        p.standard += choose_node(children, b_, false, sizeof(NodeRef)).bytes;
      }
      p.delta += static_cast<std::int64_t>(merged.size()) - static_cast<std::int64_t>(before);
    }
    return true;
  }

  bool plan_coow(NodeRef ref, std::uint32_t level, std::span<const Update<V>> ups) {
    const std::vector<WideEntry> merged = this->merged_coow(ref, level, ups);
    if (merged.empty() || coow_layout(static_cast<std::uint32_t>(merged.size()), sizeof(V)).bytes != node_bytes(ref) ||
        !this->coow_wins(merged))
      return false;
    rewrites_.push_back(Rewrite{ref, NodeChoice{NodeType::coow, node_bytes(ref)}, wide_coords_.size(),
                                static_cast<std::uint32_t>(merged.size())});
    for (const auto& [wc, v] : merged) {
      wide_coords_.push_back(wc);
      wide_vals_.push_back(v);
    }
    return true;
  }

  std::vector<std::pair<std::uint64_t, V>> values_;  // pool offset, new value
  std::vector<Rewrite> rewrites_;
  std::map<std::uint32_t, Parent> parents_;
  std::vector<LocalCoord> leaf_coords_;
  std::vector<V> leaf_vals_;
  std::vector<WideCoord> wide_coords_;
  std::vector<V> wide_vals_;
};

}  // namespace hisparse::ops::edit_detail
