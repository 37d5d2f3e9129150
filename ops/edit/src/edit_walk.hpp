#pragma once
// The host edit's walk (edit.cpp runs it): one walk down the paths the batch
// touches, one pool written in the builder's layout.
//
// The batch, in content positions, is sorted into tree order (the builder's
// key: (row digit, column digit) pairs from the root down), a position's
// updates kept in input order (a run, applied one after the other). A
// depth-first walk of the old tree then plans the new one level by level: a
// child without updates is kept (a leaf or COOW node as its bytes, an inner
// node with its children's references to be moved), a child with updates is
// merged (a leaf's sorted entries with its sorted updates; at level depth-2 of
// a wide pool the sub-tree as an inner node and leaves, replaced by one COOW
// node where the rule says so). The walk visits children row-major, so each level's
// nodes come out in tree order: offsets deepest level first then give the
// builder's pool, byte for byte.
#include <algorithm>
#include <bit>
#include <cstring>
#include <memory>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "hisparse/formats/node_view.hpp"
#include "hisparse/formats/node_writer.hpp"
#include "hisparse/ops/edit.hpp"

namespace hisparse::ops::edit_detail {

using Key = unsigned __int128;

template <class V>
struct Update {
  Key key;
  V val;
};

// A node of the new tree. Kept nodes point at their old bytes; new leaves and
// COOW nodes at their entries in the editor's arrays; inner nodes at their
// children, which are consecutive in the next level.
struct Planned {
  enum Kind : std::uint8_t { kept, leaf, coow, inner } kind;
  LocalCoord pos;  // inside the parent
  NodeChoice choice;
  NodeRef source = null_ref;  // kept
  std::uint64_t first = 0;    // leaf, coow: entries; inner: children in the next level
  std::uint32_t count = 0;
  std::uint64_t offset = 0;
};

template <class V>
class Editor {
 public:
  Editor(const Content<V>& c, EditMode mode, EditStats& stats)
      : c_(c), pool_(c.pool.data()), b_(c.shape.log2_node_size), depth_(c.shape.depth),
        wide_((c.header().flags & pool_flag_wide) != 0 && depth_ >= 2), mode_(mode), stats_(stats), levels_(depth_) {}

  [[nodiscard]] Key key(index_t row, index_t col) const {
    Key k = 0;
    const index_t mask = (index_t{1} << b_) - 1;
    for (std::uint32_t l = 0; l < depth_; ++l) {
      const std::uint32_t s = b_ * (depth_ - 1 - l);
      k = (k << (2 * b_)) | (Key((row >> s) & mask) << b_) | Key((col >> s) & mask);
    }
    return k;
  }

  std::shared_ptr<const Content<V>> run(std::span<const Update<V>> batch) {
    const NodeRef root = c_.root();
    const bool any = visit(root, 0, batch, LocalCoord{0, 0});
    auto out = std::make_shared<Content<V>>();
    out->shape = c_.shape;
    out->nnz = c_.nnz + stats_.inserted - stats_.removed;
    std::uint64_t bytes = sizeof(PoolHeader);
    for (std::uint32_t l = depth_; l-- > 0;)
      for (Planned& p : levels_[l]) {
        p.offset = bytes;
        bytes += p.choice.bytes;
      }
    if (bytes > max_pool_bytes)
      throw LimitError("edit: the result needs a node pool of " + std::to_string(bytes) +
                       " bytes, over the 4 GiB limit of 32-bit child references");
    out->pool = AlignedBuffer(bytes);
    std::byte* dst = out->pool.data();
    for (std::uint32_t l = depth_; l-- > 0;)
      for (const Planned& p : levels_[l]) write(dst, l, p);
    const NodeRef new_root = any ? make_ref(levels_[0][0].offset, levels_[0][0].choice.type) : null_ref;
    *reinterpret_cast<PoolHeader*>(dst) = PoolHeader{pool_magic, new_root, static_cast<std::uint8_t>(b_),
                                                     static_cast<std::uint8_t>(depth_), sizeof(V), c_.header().flags, 0};
    return out;
  }

 private:
  [[nodiscard]] LocalCoord digits(Key k, std::uint32_t level) const {
    const Key p = k >> (2 * b_ * (depth_ - 1 - level));
    const Key mask = (Key{1} << b_) - 1;
    return {static_cast<std::uint8_t>((p >> b_) & mask), static_cast<std::uint8_t>(p & mask)};
  }
  [[nodiscard]] bool is_leaf_level(std::uint32_t level) const { return level + 1 == depth_; }
  [[nodiscard]] bool is_wide_level(std::uint32_t level) const { return wide_ && level + 2 == depth_; }

  // The node at `ref` (null: none) with the updates under it; false when
  // nothing is left there.
  bool visit(NodeRef ref, std::uint32_t level, std::span<const Update<V>> ups, LocalCoord pos) {
    if (ups.empty()) {
      if (ref == null_ref) return false;
      keep(ref, level, pos);
      return true;
    }
    if (is_wide_level(level))
      return ref != null_ref && ref_type(ref) == NodeType::coow ? merge_coow(ref, level, ups, pos)
                                                                : merge_standard_wide(ref, level, ups, pos);
    if (is_leaf_level(level)) return merge_leaf(ref, level, ups, pos);
    return merge_inner(ref, level, ups, pos);
  }

  // An inner node: old children and the updates' children, both row-major,
  // merged.
  bool merge_inner(NodeRef ref, std::uint32_t level, std::span<const Update<V>> ups, LocalCoord pos) {
    std::vector<std::pair<LocalCoord, NodeRef>> children;
    if (ref != null_ref)
      for_each_entry<NodeRef>(pool_, ref, b_, false, [&](LocalCoord lc, NodeRef r) { children.push_back({lc, r}); });
    auto& next = levels_[level + 1];
    const std::uint64_t first = next.size();
    std::size_t ci = 0, ui = 0;
    while (ci < children.size() || ui < ups.size()) {
      const LocalCoord uc = ui < ups.size() ? digits(ups[ui].key, level) : LocalCoord{};
      const bool take_child = ci < children.size() && (ui == ups.size() || !coord_less(uc, children[ci].first));
      const LocalCoord at = take_child ? children[ci].first : uc;
      std::size_t ue = ui;
      while (ue < ups.size() && !coord_less(at, digits(ups[ue].key, level)) && !coord_less(digits(ups[ue].key, level), at))
        ++ue;
      visit(take_child ? children[ci].second : null_ref, level + 1, ups.subspan(ui, ue - ui), at);
      if (take_child) ++ci;
      ui = ue;
    }
    const auto count = static_cast<std::uint32_t>(next.size() - first);
    if (count == 0) return false;
    add(level, Planned{Planned::inner, pos, choose_node(count, b_, false, sizeof(NodeRef)), null_ref, first, count});
    ++stats_.nodes_rewritten;
    return true;
  }

  // An untouched sub-tree: leaves and COOW nodes as they are, inner nodes
  // planned again (their children move).
  void keep(NodeRef ref, std::uint32_t level, LocalCoord pos) {
    const NodeType t = ref_type(ref);
    if (is_leaf_level(level) || t == NodeType::coow) {
      const std::byte* node = pool_ + ref_offset(ref);
      std::uint64_t bytes = 0;
      if (t == NodeType::coow) bytes = coow_layout(detail::node_count(node), sizeof(V)).bytes;
      else if (t == NodeType::dense) bytes = dense_bytes(b_, true, sizeof(V));
      else bytes = coo_layout(t, detail::node_count(node), sizeof(V)).bytes;
      add(level, Planned{Planned::kept, pos, NodeChoice{t, bytes}, ref, 0, 0});
      ++stats_.nodes_copied;
      stats_.bytes_copied += bytes;
      return;
    }
    auto& next = levels_[level + 1];
    const std::uint64_t first = next.size();
    for_each_entry<NodeRef>(pool_, ref, b_, false, [&](LocalCoord lc, NodeRef r) { keep(r, level + 1, lc); });
    const auto count = static_cast<std::uint32_t>(next.size() - first);
    add(level, Planned{Planned::inner, pos, choose_node(count, b_, false, sizeof(NodeRef)), null_ref, first, count});
    ++stats_.nodes_moved;
  }

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
  // The end of the run of updates at `i` of positions equal under `same`.
  template <class Same>
  static std::size_t run_end(std::span<const Update<V>> ups, std::size_t i, Same same) {
    std::size_t e = i + 1;
    while (e < ups.size() && same(ups[e], ups[i])) ++e;
    return e;
  }

  bool merge_leaf(NodeRef ref, std::uint32_t level, std::span<const Update<V>> ups, LocalCoord pos) {
    const std::uint64_t first = leaf_coords_.size();
    std::vector<std::pair<LocalCoord, V>> old;
    if (ref != null_ref) for_each_entry<V>(pool_, ref, b_, true, [&](LocalCoord lc, V v) { old.push_back({lc, v}); });
    std::size_t oi = 0;
    for (std::size_t i = 0; i < ups.size();) {
      const std::size_t e = run_end(ups, i, [](const Update<V>& x, const Update<V>& y) { return x.key == y.key; });
      const LocalCoord uc = digits(ups[i].key, level);
      while (oi < old.size() && coord_less(old[oi].first, uc)) push_leaf_entry(old[oi++]);
      const bool has_old = oi < old.size() && !coord_less(uc, old[oi].first);
      V v = has_old ? old[oi].second : V(0);
      if (has_old) ++oi;
      if (apply_run(has_old, v, ups.subspan(i, e - i))) push_leaf_entry({uc, v});
      i = e;
    }
    while (oi < old.size()) push_leaf_entry(old[oi++]);
    const auto count = static_cast<std::uint32_t>(leaf_coords_.size() - first);
    if (count == 0) return false;
    add(level, Planned{Planned::leaf, pos, choose_node(count, b_, true, sizeof(V)), null_ref, first, count});
    ++stats_.nodes_rewritten;
    return true;
  }
  void push_leaf_entry(const std::pair<LocalCoord, V>& e) {
    leaf_coords_.push_back(e.first);
    leaf_vals_.push_back(e.second);
  }

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

  // A level depth-2 sub-tree of a wide pool held as an inner node and its
  // leaves (or absent): merged like any inner node, so that untouched leaves
  // are kept; then, if one COOW node of the same entries is not larger (the
  // builder's rule), that node instead.
  bool merge_standard_wide(NodeRef ref, std::uint32_t level, std::span<const Update<V>> ups, LocalCoord pos) {
    auto& leaves = levels_[level + 1];
    const std::size_t first_leaf = leaves.size(), first_entry = leaf_coords_.size();
    const EditStats before = stats_;
    if (!merge_inner(ref, level, ups, pos)) return false;
    std::uint64_t standard = levels_[level].back().choice.bytes, entries = 0;
    for (std::size_t k = first_leaf; k < leaves.size(); ++k) {
      standard += leaves[k].choice.bytes;
      entries += leaves[k].kind == Planned::kept ? leaf_entries(leaves[k].source) : leaves[k].count;
    }
    const std::uint64_t wide_bytes = coow_layout64(entries, sizeof(V)).bytes;
    if (entries > 0xFFFFFFFFull || wide_bytes > standard) return true;
    std::vector<std::pair<WideCoord, V>> merged;
    merged.reserve(entries);
    for (std::size_t k = first_leaf; k < leaves.size(); ++k) {
      const Planned& p = leaves[k];
      if (p.kind == Planned::kept) {
        for_each_entry<V>(pool_, p.source, b_, true, [&](LocalCoord lo, V v) { merged.push_back({wide_of(p.pos, lo), v}); });
      } else {
        for (std::uint64_t e = p.first; e < p.first + p.count; ++e) merged.push_back({wide_of(p.pos, leaf_coords_[e]), leaf_vals_[e]});
      }
    }
    std::sort(merged.begin(), merged.end(), [](const auto& x, const auto& y) { return wide_less(x.first, y.first); });
    levels_[level].pop_back();
    leaves.resize(first_leaf);
    leaf_coords_.resize(first_entry);
    leaf_vals_.resize(first_entry);
    stats_.nodes_rewritten = before.nodes_rewritten;
    stats_.nodes_copied = before.nodes_copied;
    stats_.nodes_moved = before.nodes_moved;
    stats_.bytes_copied = before.bytes_copied;
    add_coow(level, pos, merged);
    return true;
  }

  void add_coow(std::uint32_t level, LocalCoord pos, const std::vector<std::pair<WideCoord, V>>& entries) {
    const std::uint64_t first = wide_coords_.size();
    for (const auto& [wc, v] : entries) {
      wide_coords_.push_back(wc);
      wide_vals_.push_back(v);
    }
    add(level, Planned{Planned::coow, pos, NodeChoice{NodeType::coow, coow_layout64(entries.size(), sizeof(V)).bytes},
                       null_ref, first, static_cast<std::uint32_t>(entries.size())});
    ++stats_.nodes_rewritten;
  }

  // A COOW node with updates: every entry of it merged in the 16-bit
  // coordinates' row-major order, then a COOW node again or an inner node and
  // its leaves, whichever the builder's rule picks.
  bool merge_coow(NodeRef ref, std::uint32_t level, std::span<const Update<V>> ups, LocalCoord pos) {
    using Entry = std::pair<WideCoord, V>;
    std::vector<Entry> old;
    const CoowView<V> w = coow_view<V>(pool_, ref);
    for (std::uint32_t i = 0; i < w.count; ++i) old.push_back({w.coords[i], w.values[i]});
    // The updates in the 16-bit coordinates' row-major order; a position's
    // updates stay in input order.
    std::vector<Update<V>> sorted_ups(ups.begin(), ups.end());
    std::vector<WideCoord> wc_of(ups.size());
    std::vector<std::size_t> perm(ups.size());
    std::iota(perm.begin(), perm.end(), std::size_t{0});
    for (std::size_t i = 0; i < ups.size(); ++i) wc_of[i] = wide_of(digits(ups[i].key, level), digits(ups[i].key, level + 1));
    std::stable_sort(perm.begin(), perm.end(), [&](std::size_t x, std::size_t y) { return wide_less(wc_of[x], wc_of[y]); });
    for (std::size_t i = 0; i < perm.size(); ++i) sorted_ups[i] = ups[perm[i]];
    std::vector<Entry> merged;
    merged.reserve(old.size() + ups.size());
    std::size_t oi = 0;
    const std::span<const Update<V>> su(sorted_ups);
    for (std::size_t i = 0; i < su.size();) {
      const std::size_t e = run_end(su, i, [](const Update<V>& x, const Update<V>& y) { return x.key == y.key; });
      const WideCoord wc = wc_of[perm[i]];
      while (oi < old.size() && wide_less(old[oi].first, wc)) merged.push_back(old[oi++]);
      const bool has_old = oi < old.size() && !wide_less(wc, old[oi].first);
      V v = has_old ? old[oi].second : V(0);
      if (has_old) ++oi;
      if (apply_run(has_old, v, su.subspan(i, e - i))) merged.push_back({wc, v});
      i = e;
    }
    while (oi < old.size()) merged.push_back(old[oi++]);
    if (merged.empty()) return false;

    // The standard sub-tree's bytes, from each leaf's count alone (a counter
    // per leaf position: no sort unless the standard form wins).
    const std::uint32_t low = (1u << b_) - 1;
    const auto hi_of = [&](WideCoord w) { return LocalCoord{static_cast<std::uint8_t>(w.row >> b_), static_cast<std::uint8_t>(w.col >> b_)}; };
    const auto lo_of = [&](WideCoord w) { return LocalCoord{static_cast<std::uint8_t>(w.row & low), static_cast<std::uint8_t>(w.col & low)}; };
    {
      std::vector<std::uint32_t> per_leaf(std::size_t{1} << (2 * b_), 0);
      for (const Entry& e : merged) ++per_leaf[(std::size_t{hi_of(e.first).row} << b_) | hi_of(e.first).col];
      std::uint64_t standard = 0;
      std::uint32_t leaf_count = 0;
      for (const std::uint32_t n : per_leaf)
        if (n > 0) {
          standard += choose_node(n, b_, true, sizeof(V)).bytes;
          ++leaf_count;
        }
      standard += choose_node(leaf_count, b_, false, sizeof(NodeRef)).bytes;
      const std::uint64_t wide_bytes = coow_layout64(merged.size(), sizeof(V)).bytes;
      if (merged.size() <= 0xFFFFFFFFull && wide_bytes <= standard) {
        add_coow(level, pos, merged);
        return true;
      }
    }
    // The standard form: leaves grouped in tree order.
    std::vector<Entry> tree = merged;
    std::stable_sort(tree.begin(), tree.end(), [&](const Entry& x, const Entry& y) {
      const LocalCoord a = hi_of(x.first), c = hi_of(y.first);
      if (a.row != c.row || a.col != c.col) return coord_less(a, c);
      return coord_less(lo_of(x.first), lo_of(y.first));
    });
    std::vector<std::pair<std::size_t, std::size_t>> groups;  // [begin, end) per leaf
    for (std::size_t i = 0; i < tree.size(); ++i) {
      const LocalCoord h = hi_of(tree[i].first);
      if (i == 0 || h.row != hi_of(tree[i - 1].first).row || h.col != hi_of(tree[i - 1].first).col) groups.push_back({i, i});
      groups.back().second = i + 1;
    }
    auto& leaves = levels_[level + 1];
    const std::uint64_t first_leaf = leaves.size();
    for (const auto& [gb, ge] : groups) {
      const std::uint64_t first = leaf_coords_.size();
      for (std::size_t i = gb; i < ge; ++i) push_leaf_entry({lo_of(tree[i].first), tree[i].second});
      const auto count = static_cast<std::uint32_t>(ge - gb);
      add(level + 1, Planned{Planned::leaf, hi_of(tree[gb].first), choose_node(count, b_, true, sizeof(V)), null_ref,
                             first, count});
    }
    const auto count = static_cast<std::uint32_t>(groups.size());
    add(level, Planned{Planned::inner, pos, choose_node(count, b_, false, sizeof(NodeRef)), null_ref, first_leaf, count});
    stats_.nodes_rewritten += 1 + groups.size();
    return true;
  }

  void add(std::uint32_t level, const Planned& p) { levels_[level].push_back(p); }

  void write(std::byte* pool, std::uint32_t level, const Planned& p) {
    std::byte* dst = pool + p.offset;
    switch (p.kind) {
      case Planned::kept: std::memcpy(dst, pool_ + ref_offset(p.source), p.choice.bytes); return;
      case Planned::leaf:
        write_node<V>(dst, p.choice, b_, true, std::span(leaf_coords_).subspan(p.first, p.count),
                      std::span<const V>(leaf_vals_).subspan(p.first, p.count));
        return;
      case Planned::coow:
        write_coow_node<V>(dst, std::span(wide_coords_).subspan(p.first, p.count),
                           std::span<const V>(wide_vals_).subspan(p.first, p.count));
        return;
      case Planned::inner: {
        coords_.clear();
        refs_.clear();
        const auto& next = levels_[level + 1];
        for (std::uint64_t k = p.first; k < p.first + p.count; ++k) {
          coords_.push_back(next[k].pos);
          refs_.push_back(make_ref(next[k].offset, next[k].choice.type));
        }
        write_node<NodeRef>(dst, p.choice, b_, false, coords_, refs_);
        return;
      }
    }
  }

  const Content<V>& c_;
  const std::byte* pool_;
  std::uint32_t b_, depth_;
  bool wide_;
  EditMode mode_;
  EditStats& stats_;
  std::vector<std::vector<Planned>> levels_;
  std::vector<LocalCoord> leaf_coords_;
  std::vector<V> leaf_vals_;
  std::vector<WideCoord> wide_coords_;
  std::vector<V> wide_vals_;
  std::vector<LocalCoord> coords_;
  std::vector<NodeRef> refs_;
};

}  // namespace hisparse::ops::edit_detail
