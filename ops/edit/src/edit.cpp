// The host edit (edit.hpp): the batch checked, mapped to content positions
// and sorted into tree order, then one walk (edit_walk.hpp).
#include <algorithm>
#include <complex>
#include <numeric>
#include <string>
#include <unordered_map>
#include <vector>

#include "edit_common.hpp"
#include "edit_in_place.hpp"
#include "edit_walk.hpp"

namespace hisparse::ops {

using edit_detail::Editor;
using edit_detail::InPlaceEditor;
using edit_detail::Key;
using edit_detail::Update;

const char* to_string(EditMode m) {
  switch (m) {
    case EditMode::set: return "set";
    case EditMode::add: return "add";
    case EditMode::remove: return "remove";
  }
  return "?";
}

EditMode parse_edit_mode(const char* s) {
  const std::string m = s;
  if (m == "set") return EditMode::set;
  if (m == "add") return EditMode::add;
  if (m == "remove") return EditMode::remove;
  throw Error("edit: unknown mode '" + printable_text(m) + "' (set, add or remove)");
}

namespace {

// The updates in content positions and tree order; a position's updates stay
// in input order (set keeps the last, add sums them in order).
template <class V>
std::vector<Update<V>> tree_order(const edit_detail::EditCore<V>& core, const Matrix<V>& a, const Coo<V>& updates) {
  const std::size_t n = updates.nnz();
  std::vector<Key> keys(n);
  for (std::size_t i = 0; i < n; ++i)
    keys[i] = a.transposed() ? core.key(updates.col[i], updates.row[i]) : core.key(updates.row[i], updates.col[i]);
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) { return keys[x] < keys[y]; });
  std::vector<Update<V>> batch(n);
  for (std::size_t k = 0; k < n; ++k) batch[k] = Update<V>{keys[order[k]], updates.val[order[k]]};
  return batch;
}

// Every node the content's root reaches: offset -> bytes.
template <class V>
void reached_nodes(const Content<V>& c, NodeRef ref, std::uint32_t level,
                   std::unordered_map<std::uint32_t, std::uint64_t>& out) {
  const std::uint32_t b = c.shape.log2_node_size;
  const bool leaf = level + 1 == c.shape.depth, inner = !leaf && ref_type(ref) != NodeType::coow;
  out.emplace(ref_offset(ref), stored_node_bytes(c.pool.data(), ref, b, leaf, inner ? sizeof(NodeRef) : sizeof(V)));
  if (inner)
    for_each_entry<NodeRef>(c.pool.data(), ref, b, false,
                            [&](LocalCoord, NodeRef child) { reached_nodes(c, child, level + 1, out); });
}
template <class V>
std::unordered_map<std::uint32_t, std::uint64_t> reached_nodes(const Content<V>& c) {
  std::unordered_map<std::uint32_t, std::uint64_t> out;
  if (c.root() != null_ref) reached_nodes(c, c.root(), 0, out);
  return out;
}
std::uint64_t total(const std::unordered_map<std::uint32_t, std::uint64_t>& nodes) {
  std::uint64_t n = 0;
  for (const auto& [offset, bytes] : nodes) n += bytes;
  return n;
}

// The walk behind edit (a new pool) and edit_version (a new version in the
// family); the updates are checked by the caller.
template <class V>
Matrix<V> walk(const Matrix<V>& a_in, const Coo<V>& updates, EditMode mode, EditStats* stats, bool version) {
  const Matrix<V> base = edit_detail::edit_base(a_in, mode);
  const Matrix<V> a = version ? versioned(base) : base;
  EditStats local;
  Editor<V> editor(a.content(), mode, local);
  const std::vector<Update<V>> batch = tree_order(editor, a, updates);
  auto content = version ? editor.run_version(batch) : editor.run(batch);
  if (stats) *stats = local;
  return Matrix<V>(std::move(content), a.transposed(), a.scale());
}

}  // namespace

template <class V>
Matrix<V> edit(const Matrix<V>& a, const Coo<V>& updates, EditMode mode, EditStats* stats) {
  edit_detail::check_updates(a, updates);
  return walk(a, updates, mode, stats, false);
}

template <class V>
void edit_in_place(Matrix<V>& a, const Coo<V>& updates, EditMode mode, EditStats* stats) {
  edit_detail::check_updates(a, updates);
  if (a.content().arena) {  // a version: its nodes are shared with its family
    a = walk(a, updates, mode, stats, true);
    return;
  }
  // edit_base would materialize a scaled matrix for set and add: a new pool.
  if (a.content_ptr().use_count() == 1 && (mode == EditMode::remove || a.scale() == V(1))) {
    EditStats local;
    InPlaceEditor<V> editor(a.content(), mode, local);
    if (editor.plan(tree_order(editor, a, updates))) {
      // The sole holder of a content that was made non-const (every Content
      // is created by make_shared<Content<V>> and only then shared as const).
      auto& content = const_cast<Content<V>&>(a.content());
      editor.write(content.pool.data());
      content.nnz = content.nnz + local.inserted - local.removed;
      local.in_place = true;
      if (stats) *stats = local;
      return;
    }
  }
  a = walk(a, updates, mode, stats, false);
}

template <class V>
Matrix<V> versioned(const Matrix<V>& a) {
  const Content<V>& c = a.content();
  if (c.arena) return a;
  auto arena = std::make_shared<NodeArena>(c.pool.data(), c.pool.size());
  auto v = std::make_shared<Content<V>>();
  v->shape = c.shape;
  v->nnz = c.nnz;
  v->version_root = c.root();
  v->pool = AlignedBuffer::view(arena, arena->data(), c.pool.size());
  v->arena = std::move(arena);
  return Matrix<V>(std::move(v), a.transposed(), a.scale());
}

template <class V>
Matrix<V> edit_version(const Matrix<V>& a, const Coo<V>& updates, EditMode mode, EditStats* stats) {
  edit_detail::check_updates(a, updates);
  return walk(a, updates, mode, stats, true);
}

template <class V>
SharedBytes shared_bytes(const Matrix<V>& a, const Matrix<V>& b) {
  const auto na = reached_nodes(a.content()), nb = reached_nodes(b.content());
  SharedBytes s{total(na), total(nb), 0};
  // Offsets name the same node only inside one pool: one family's arena, or one content.
  const bool one_pool = a.content_ptr() == b.content_ptr() ||
                        (a.content().arena && a.content().arena == b.content().arena);
  if (one_pool)
    for (const auto& [offset, bytes] : na)
      if (nb.count(offset)) s.shared += bytes;
  return s;
}

#define HISPARSE_INSTANTIATE(V)                                                       \
  template Matrix<V> edit(const Matrix<V>&, const Coo<V>&, EditMode, EditStats*); \
  template void edit_in_place(Matrix<V>&, const Coo<V>&, EditMode, EditStats*);               \
  template Matrix<V> versioned(const Matrix<V>&);                                               \
  template Matrix<V> edit_version(const Matrix<V>&, const Coo<V>&, EditMode, EditStats*);        \
  template SharedBytes shared_bytes(const Matrix<V>&, const Matrix<V>&);
HISPARSE_INSTANTIATE(float)
HISPARSE_INSTANTIATE(double)
HISPARSE_INSTANTIATE(std::complex<float>)
HISPARSE_INSTANTIATE(std::complex<double>)
#undef HISPARSE_INSTANTIATE

}  // namespace hisparse::ops
