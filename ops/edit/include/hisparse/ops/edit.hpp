#pragma once
// Editing a matrix: insert, update (set or add to a value) and remove entries,
// in batches or one at a time (issue 16, docs/ops.md "Editing").
//
// An edit rewrites only the nodes on the paths its entries touch: every other
// node keeps its encoding and is copied as it is (a leaf, a COOW node) or with
// its child references moved (an inner node), never decoded and re-encoded.
// Node types are chosen again by the builder's rule where a node changes (a
// sparse leaf that grows past the dense threshold turns dense and back, a
// level depth-2 sub-tree becomes a COOW node or stops being one, an emptied
// node disappears, up to the root), so the result is always the pool the
// builder makes from the same entries, byte for byte, and passes the
// validator.
//
// edit never changes the original: it returns a new matrix (the old one stays
// valid, and so does every matrix sharing its content) whose pool is a new
// allocation: untouched sub-trees are copied. edit_version shares them
// instead: the new matrix is a version in the original's family and stores
// only its new paths (below, "Versions"). edit_in_place rewrites a matrix's
// own nodes where they are when their sizes allow it.
#include <cstdint>

#include "hisparse/formats/coo.hpp"
#include "hisparse/formats/matrix.hpp"

namespace hisparse::ops {

// set:    each listed entry takes the listed value, inserted where absent;
//         of duplicate positions the last one counts.
// add:    the listed value is added to the entry, inserted where absent;
//         duplicate positions are summed in input order.
// remove: the listed positions are removed (values ignored; absent ones
//         ignored).
enum class EditMode { set, add, remove };

const char* to_string(EditMode m);
// "set", "add" or "remove"; anything else throws hisparse::Error.
EditMode parse_edit_mode(const char* s);

struct EditStats {
  std::uint64_t inserted = 0;  // positions that were absent
  std::uint64_t updated = 0;   // positions that were present (set or add)
  std::uint64_t removed = 0;   // positions that were present and are gone
  std::uint64_t nodes_rewritten = 0;  // nodes encoded again (new content or type)
  std::uint64_t nodes_copied = 0;     // leaves and COOW nodes copied as they are
  std::uint64_t nodes_moved = 0;      // untouched inner nodes written with moved child references
  std::uint64_t bytes_copied = 0;     // bytes of the copied leaves and COOW nodes
  std::uint64_t nodes_shared = 0;     // edit_version: untouched sub-trees referenced where they are
  std::uint64_t bytes_written = 0;    // the result's new bytes (edit: its pool; edit_version: appended)
  bool in_place = false;              // edit_in_place rewrote the nodes where they were
};

// op(A) edited by `updates`, whose positions are logical (those of op(A))
// and whose dimensions must be op(A)'s. A transposed matrix stays transposed
// (positions are mapped to its content). A matrix whose scale is not 1 is
// materialized first for set and add (its values multiplied once, the
// result's scale 1: a value set must read back exactly); remove keeps the
// state. Node size and format (wide or standard) are A's.
// Errors (hisparse::Error, nothing changed): dimensions that differ, an
// entry outside the matrix (its index and position named), array lengths
// that differ; a result over the pool limit is a LimitError.
template <class V>
Matrix<V> edit(const Matrix<V>& a, const Coo<V>& updates, EditMode mode, EditStats* stats = nullptr);

// The same edit into `a` itself. Where `a` is the only holder of its content
// (no other Matrix shares it) and every node the updates touch keeps its type
// and size, those nodes are encoded again where they are: no allocation,
// nothing else moves, the cost is the touched paths (value updates always;
// inserts into a sparse node's padding or a dense leaf; removals that keep a
// node's padded size). Otherwise (a new or emptied node, a node that changes
// size or type, a COOW rule that flips, a shared content, set or add on a
// scaled matrix) a = edit(a, ...). Either way the pool is what edit makes,
// byte for byte; stats->in_place says which happened. A version of a family
// is never rewritten where it is (its nodes are shared): a = edit_version(a,
// ...), which keeps it in its family (except set or add on a scaled version,
// materialized first: a new family) and whose compacted() pool is edit's.
// Each such call appends to the family: a loop of them is a growing log (a
// LimitError at 4 GiB; compact to start again). Errors as edit's, with `a`
// unchanged. Not thread-safe against another thread copying `a`.
template <class V>
void edit_in_place(Matrix<V>& a, const Coo<V>& updates, EditMode mode, EditStats* stats = nullptr);

// ---- Versions (docs/ops.md, "Versions") -------------------------------------
// A family of versions keeps its nodes in one NodeArena
// (hisparse/formats/node_arena.hpp): append-only, nodes immutable once
// written, freed when the last version of the family goes. A version is a
// root in that arena; versions share every sub-tree that no edit between
// them touched, at the same pool offsets. Every host op reads a version as it
// reads any matrix; a version is saved, uploaded to the GPU and copied
// (copy_reference) as its own nodes in the builder's layout (compacted()).

// A as the first version of a new family: its pool copied once into an
// arena. A matrix already in a family is returned as it is.
template <class V>
Matrix<V> versioned(const Matrix<V>& a);

// A persistent edit: op(A) edited exactly as edit() edits it (same entries,
// same node types; compacted() of the result is edit()'s pool byte for byte),
// as a new version in A's family. Only the nodes on the touched paths are
// written, appended to the arena; every other sub-tree is referenced where it
// is. A (and every other version) stays unchanged and valid. A matrix in no
// family is put in a new one first (versioned(A)): call versioned() on the
// original once so that the versions share its nodes. Thread-safe: versions
// of one family may be edited from several threads at once. Errors as
// edit's; a family past the 4 GiB the references address is a LimitError
// (compact a version to start a new family).
template <class V>
Matrix<V> edit_version(const Matrix<V>& a, const Coo<V>& updates, EditMode mode, EditStats* stats = nullptr);

struct SharedBytes {
  std::uint64_t a = 0;       // bytes of A's nodes (those its root reaches)
  std::uint64_t b = 0;       // of B's
  std::uint64_t shared = 0;  // of the nodes both reach: A and B versions of one family, or one content
                             // (A and its transpose share everything); 0 for different pools
};
template <class V>
SharedBytes shared_bytes(const Matrix<V>& a, const Matrix<V>& b);

namespace edit_detail {
// A batch of one update, with op(A)'s dimensions.
template <class V>
Coo<V> one_update(const Matrix<V>& a, index_t row, index_t col, V value) {
  Coo<V> u;
  u.rows = a.rows();
  u.cols = a.cols();
  u.push(row, col, value);
  return u;
}
}  // namespace edit_detail

// One entry: op(A) with a(row, col) = value, += value, or removed.
template <class V>
Matrix<V> set_entry(const Matrix<V>& a, index_t row, index_t col, V value) {
  return edit(a, edit_detail::one_update(a, row, col, value), EditMode::set);
}
template <class V>
Matrix<V> add_to_entry(const Matrix<V>& a, index_t row, index_t col, V value) {
  return edit(a, edit_detail::one_update(a, row, col, value), EditMode::add);
}
template <class V>
Matrix<V> remove_entry(const Matrix<V>& a, index_t row, index_t col) {
  return edit(a, edit_detail::one_update(a, row, col, V(0)), EditMode::remove);
}

// The specification: every entry of A in an ordered map, the updates applied
// one after the other, the result built again by the builder (same node size
// and format; the same state rules as edit). edit must equal it byte for byte.
template <class V>
Matrix<V> edit_reference(const Matrix<V>& a, const Coo<V>& updates, EditMode mode);

}  // namespace hisparse::ops
