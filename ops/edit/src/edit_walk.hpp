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

#include "edit_core.hpp"
#include "hisparse/formats/node_writer.hpp"

namespace hisparse::ops::edit_detail {

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
class Editor : public EditCore<V> {
  using Core = EditCore<V>;
  using Core::b_, Core::depth_, Core::pool_, Core::c_, Core::stats_, Core::mode_;
  using Core::digits, Core::is_leaf_level, Core::is_wide_level, Core::node_bytes, Core::leaf_entries, Core::wide_of,
      Core::hi_of, Core::lo_of;
  using typename Core::WideEntry;

 public:
  Editor(const Content<V>& c, EditMode mode, EditStats& stats) : Core(c, mode, stats), levels_(depth_) {}

  // edit(): a new pool in the builder's layout.
  std::shared_ptr<const Content<V>> run(std::span<const Update<V>> batch) {
    const bool any = visit(c_.root(), 0, batch, LocalCoord{0, 0});
    const std::uint64_t bytes = sizeof(PoolHeader) + new_bytes();
    if (bytes > max_pool_bytes)
      throw LimitError("edit: the result needs a node pool of " + std::to_string(bytes) +
                       " bytes, over the 4 GiB limit of 32-bit child references");
    place(sizeof(PoolHeader));
    auto out = result();
    out->pool = AlignedBuffer(bytes);
    std::byte* dst = out->pool.data();
    write_all(dst);
    *reinterpret_cast<PoolHeader*>(dst) = PoolHeader{pool_magic, new_root(any), static_cast<std::uint8_t>(b_),
                                                     static_cast<std::uint8_t>(depth_), sizeof(V), c_.header().flags, 0};
    stats_.bytes_written = bytes;
    return out;
  }

  // edit_version(): c_ is a version of a family; untouched sub-trees are
  // referenced where they are and only the new nodes are appended to the
  // family's arena (deepest level first, each level in tree order, as the
  // builder lays out a pool).
  std::shared_ptr<const Content<V>> run_version(std::span<const Update<V>> batch) {
    share_ = true;
    const bool any = visit(c_.root(), 0, batch, LocalCoord{0, 0});
    const std::uint64_t bytes = new_bytes();
    NodeArena& arena = *c_.arena;
    // Everything that can throw comes before the append: afterwards only
    // writes into the room it handed out.
    auto out = result();
    coords_.reserve(std::size_t{1} << (2 * b_));
    refs_.reserve(std::size_t{1} << (2 * b_));
    const std::uint64_t at = arena.append(bytes);  // LimitError past 4 GiB, nothing written
    place(at);
    write_all(arena.data());
    out->arena = c_.arena;
    out->version_root = new_root(any);
    out->pool = AlignedBuffer::view(c_.arena, arena.data(), at + bytes);
    stats_.bytes_written = bytes;
    return out;
  }

 private:
  std::shared_ptr<Content<V>> result() const {
    auto out = std::make_shared<Content<V>>();
    out->shape = c_.shape;
    out->nnz = c_.nnz + stats_.inserted - stats_.removed;
    return out;
  }
  // Bytes of the nodes to write (a shared node is not written again).
  std::uint64_t new_bytes() const {
    std::uint64_t bytes = 0;
    for (const auto& level : levels_)
      for (const Planned& p : level)
        if (!shared(p)) bytes += p.choice.bytes;
    return bytes;
  }
  void place(std::uint64_t at) {
    for (std::uint32_t l = depth_; l-- > 0;)
      for (Planned& p : levels_[l])
        if (!shared(p)) {
          p.offset = at;
          at += p.choice.bytes;
        }
  }
  void write_all(std::byte* dst) {
    for (std::uint32_t l = depth_; l-- > 0;)
      for (const Planned& p : levels_[l])
        if (!shared(p)) write(dst, l, p);
  }
  [[nodiscard]] bool shared(const Planned& p) const { return share_ && p.kind == Planned::kept; }
  [[nodiscard]] NodeRef ref_of(const Planned& p) const {
    return shared(p) ? p.source : make_ref(p.offset, p.choice.type);
  }
  [[nodiscard]] NodeRef new_root(bool any) const { return any ? ref_of(levels_[0][0]) : null_ref; }

  // The node at `ref` (null: none) with the updates under it; false when
  // nothing is left there.
  bool visit(NodeRef ref, std::uint32_t level, std::span<const Update<V>> ups, LocalCoord pos) {
    if (ups.empty()) {
      if (ref == null_ref) return false;
      keep(ref, level, pos);
      return true;
    }
    if (share_ && ref != null_ref && mode_ == EditMode::remove) {
      // A version shares a sub-tree whose updates change nothing instead of
      // writing it again. Only removals can (of absent positions): a set or
      // an add always counts an insert or an update, so those are not marked.
      const Mark mark = this->mark(level);
      const bool any = merge(ref, level, ups, pos);
      if (changes() != mark.changes) return any;
      rewind(mark, level);
      keep(ref, level, pos);
      return true;
    }
    return merge(ref, level, ups, pos);
  }

  bool merge(NodeRef ref, std::uint32_t level, std::span<const Update<V>> ups, LocalCoord pos) {
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
  // planned again (their children move); a version refers to it whole.
  void keep(NodeRef ref, std::uint32_t level, LocalCoord pos) {
    const NodeType t = ref_type(ref);
    if (share_) {
      // Bytes are needed of leaves only (the COOW rule sums a sub-tree's).
      add(level, Planned{Planned::kept, pos, NodeChoice{t, is_leaf_level(level) ? node_bytes(ref) : 0}, ref, 0, 0});
      ++stats_.nodes_shared;
      return;
    }
    if (is_leaf_level(level) || t == NodeType::coow) {
      const std::uint64_t bytes = node_bytes(ref);
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

  bool merge_leaf(NodeRef ref, std::uint32_t level, std::span<const Update<V>> ups, LocalCoord pos) {
    const auto merged = this->merged_leaf(ref, level, ups);
    if (merged.empty()) return false;
    const std::uint64_t first = leaf_coords_.size();
    for (const auto& e : merged) push_leaf_entry(e);
    const auto count = static_cast<std::uint32_t>(merged.size());
    add(level, Planned{Planned::leaf, pos, choose_node(count, b_, true, sizeof(V)), null_ref, first, count});
    ++stats_.nodes_rewritten;
    return true;
  }
  void push_leaf_entry(const std::pair<LocalCoord, V>& e) {
    leaf_coords_.push_back(e.first);
    leaf_vals_.push_back(e.second);
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
    std::vector<WideEntry> merged;
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
    stats_.nodes_shared = before.nodes_shared;
    add_coow(level, pos, merged);
    return true;
  }

  void add_coow(std::uint32_t level, LocalCoord pos, const std::vector<WideEntry>& entries) {
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
    using Entry = WideEntry;
    const std::vector<Entry> merged = this->merged_coow(ref, level, ups);
    if (merged.empty()) return false;
    if (this->coow_wins(merged)) {
      add_coow(level, pos, merged);
      return true;
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

  // What the plan holds from `level` down, to go back to.
  struct Mark {
    std::vector<std::size_t> planned;
    std::size_t leaf_entries, wide_entries;
    std::uint64_t changes;
    EditStats stats;
  };
  [[nodiscard]] std::uint64_t changes() const { return stats_.inserted + stats_.updated + stats_.removed; }
  [[nodiscard]] Mark mark(std::uint32_t level) const {
    Mark m{{}, leaf_coords_.size(), wide_coords_.size(), changes(), stats_};
    for (std::uint32_t l = level; l < depth_; ++l) m.planned.push_back(levels_[l].size());
    return m;
  }
  void rewind(const Mark& m, std::uint32_t level) {
    for (std::uint32_t l = level; l < depth_; ++l) levels_[l].resize(m.planned[l - level]);
    leaf_coords_.resize(m.leaf_entries);
    leaf_vals_.resize(m.leaf_entries);
    wide_coords_.resize(m.wide_entries);
    wide_vals_.resize(m.wide_entries);
    stats_ = m.stats;
  }

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
          refs_.push_back(ref_of(next[k]));
        }
        write_node<NodeRef>(dst, p.choice, b_, false, coords_, refs_);
        return;
      }
    }
  }

  bool share_ = false;
  std::vector<std::vector<Planned>> levels_;
  std::vector<LocalCoord> leaf_coords_;
  std::vector<V> leaf_vals_;
  std::vector<WideCoord> wide_coords_;
  std::vector<V> wide_vals_;
  std::vector<LocalCoord> coords_;
  std::vector<NodeRef> refs_;
};

}  // namespace hisparse::ops::edit_detail
