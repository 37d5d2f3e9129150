#pragma once
// What the edit and its reference share: checking a batch and the matrix an
// edit starts from.
#include <string>

#include "hisparse/formats/error.hpp"
#include "hisparse/ops/copy_reference.hpp"
#include "hisparse/ops/edit.hpp"

namespace hisparse::ops::edit_detail {

// Dimensions equal op(A)'s, arrays of one length, every position inside.
template <class V>
void check_updates(const Matrix<V>& a, const Coo<V>& u) {
  if (u.row.size() != u.val.size() || u.col.size() != u.val.size())
    throw Error("edit: the updates' row, column and value arrays differ in length (" + std::to_string(u.row.size()) +
                ", " + std::to_string(u.col.size()) + ", " + std::to_string(u.val.size()) + ")");
  if (u.rows != a.rows() || u.cols != a.cols())
    throw Error("edit: the updates are " + std::to_string(u.rows) + " x " + std::to_string(u.cols) + ", the matrix " +
                std::to_string(a.rows()) + " x " + std::to_string(a.cols()));
  for (std::size_t i = 0; i < u.val.size(); ++i)
    if (u.row[i] >= u.rows || u.col[i] >= u.cols)
      throw Error("edit: update " + std::to_string(i) + " at (" + std::to_string(u.row[i]) + ", " +
                  std::to_string(u.col[i]) + ") lies outside the " + std::to_string(u.rows) + " x " +
                  std::to_string(u.cols) + " matrix (0-based)");
}

// The matrix an edit starts from: A itself, or for set and add on a scaled
// matrix A with its state written into the content (a value set must read
// back exactly; dividing it by the scale would round).
template <class V>
Matrix<V> edit_base(const Matrix<V>& a, EditMode mode) {
  if (mode == EditMode::remove || a.scale() == V(1)) return a;
  return materialize_reference(a);
}

}  // namespace hisparse::ops::edit_detail
