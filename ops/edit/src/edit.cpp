// The host edit (edit.hpp): the batch checked, mapped to content positions
// and sorted into tree order, then one walk (edit_walk.hpp).
#include <algorithm>
#include <complex>
#include <numeric>
#include <string>
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

}  // namespace

template <class V>
Matrix<V> edit(const Matrix<V>& a_in, const Coo<V>& updates, EditMode mode, EditStats* stats) {
  edit_detail::check_updates(a_in, updates);
  const Matrix<V> a = edit_detail::edit_base(a_in, mode);
  EditStats local;
  Editor<V> editor(a.content(), mode, local);
  auto content = editor.run(tree_order(editor, a, updates));
  if (stats) *stats = local;
  return Matrix<V>(std::move(content), a.transposed(), a.scale());
}

template <class V>
void edit_in_place(Matrix<V>& a, const Coo<V>& updates, EditMode mode, EditStats* stats) {
  edit_detail::check_updates(a, updates);
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
  a = edit(a, updates, mode, stats);
}

#define HISPARSE_INSTANTIATE(V)                                                       \
  template Matrix<V> edit(const Matrix<V>&, const Coo<V>&, EditMode, EditStats*); \
  template void edit_in_place(Matrix<V>&, const Coo<V>&, EditMode, EditStats*);
HISPARSE_INSTANTIATE(float)
HISPARSE_INSTANTIATE(double)
HISPARSE_INSTANTIATE(std::complex<float>)
HISPARSE_INSTANTIATE(std::complex<double>)
#undef HISPARSE_INSTANTIATE

}  // namespace hisparse::ops
