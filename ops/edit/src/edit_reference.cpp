// The specification of an edit (edit.hpp): the content's entries in an
// ordered map, the updates applied in input order, a fresh build.
#include <complex>
#include <map>
#include <string>
#include <utility>

#include "edit_common.hpp"
#include "hisparse/formats/builder.hpp"
#include "hisparse/formats/traverse.hpp"
#include "hisparse/ops/copy_reference.hpp"

namespace hisparse::ops {

template <class V>
Matrix<V> edit_reference(const Matrix<V>& a_in, const Coo<V>& updates, EditMode mode) {
  edit_detail::check_updates(a_in, updates);
  const Matrix<V> a = edit_detail::edit_base(a_in, mode);
  const Content<V>& c = a.content();
  std::map<std::pair<index_t, index_t>, V> entries;
  for_each_content_entry(c, [&](index_t r, index_t col, V v) { entries[{r, col}] = v; });
  for (std::size_t i = 0; i < updates.nnz(); ++i) {
    // Logical positions to the content's.
    const std::pair<index_t, index_t> at =
        a.transposed() ? std::pair{updates.col[i], updates.row[i]} : std::pair{updates.row[i], updates.col[i]};
    switch (mode) {
      case EditMode::set: entries[at] = updates.val[i]; break;
      case EditMode::add: {
        auto [it, inserted] = entries.try_emplace(at, updates.val[i]);
        if (!inserted) it->second += updates.val[i];
        break;
      }
      case EditMode::remove: entries.erase(at); break;
    }
  }
  Coo<V> coo;
  coo.rows = c.shape.rows;
  coo.cols = c.shape.cols;
  coo.reserve(entries.size());
  for (const auto& [at, v] : entries) coo.push(at.first, at.second, v);
  const Matrix<V> built =
      build_matrix(coo, BuildOptions{c.shape.node_size(), (c.header().flags & pool_flag_wide) != 0});
  return built.with_state(a.transposed(), a.scale());
}

#define HISPARSE_INSTANTIATE(V) template Matrix<V> edit_reference(const Matrix<V>&, const Coo<V>&, EditMode);
HISPARSE_INSTANTIATE(float)
HISPARSE_INSTANTIATE(double)
HISPARSE_INSTANTIATE(std::complex<float>)
HISPARSE_INSTANTIATE(std::complex<double>)
#undef HISPARSE_INSTANTIATE

}  // namespace hisparse::ops
