#pragma once
// Checks the harnesses share: a pool the validator accepts is the one the
// builder makes from its entries ("same entries, same bytes",
// docs/format.md), and a matrix the builder makes passes the validator.
#include <algorithm>
#include <complex>
#include <cstdint>
#include <cstring>
#include <string>

#include "hisparse/formats/builder.hpp"
#include "hisparse/formats/error.hpp"
#include "hisparse/formats/validate.hpp"
#include "memory_file.hpp"

namespace hisparse::fuzz {


template <class V>
bool is_wide_pool(const Content<V>& c) {
  return (c.header().flags & pool_flag_wide) != 0;
}

// The builder's matrix of a pool's stored entries (untransposed, unscaled),
// with the pool's own node size and format.
template <class V>
Matrix<V> rebuild(const Matrix<V>& m, const std::string& where) {
  const Content<V>& c = m.content();
  try {
    const Coo<V> entries = to_coo(m.with_state(false, V(1)));
    require(entries.nnz() == c.nnz, where + ": the pool reaches " + std::to_string(entries.nnz()) +
                                        " entries, the header says " + std::to_string(c.nnz));
    BuildOptions options;
    options.node_size = c.shape.node_size();
    options.wide_nodes = is_wide_pool(c);
    Matrix<V> again = build_matrix(entries, options);
    require(again.content().shape == c.shape, where + ": the rebuilt matrix has another shape");
    return again;
  } catch (const Error& e) {
    throw PropertyViolation(where + ": a validated pool's entries do not rebuild: " + e.what());
  }
}

// A matrix the builder made is the builder's for its own entries, byte for
// byte ("the same entries give the same bytes", docs/format.md).
template <class V>
void require_canonical(const Matrix<V>& m, const std::string& where) {
  const Matrix<V> again = rebuild(m, where);
  const std::uint64_t n = std::min(again.pool_bytes(), m.pool_bytes());
  const std::byte* a = again.content().pool.data();
  const std::byte* b = m.content().pool.data();
  std::uint64_t first = 0;
  while (first < n && a[first] == b[first]) ++first;
  require(again.pool_bytes() == m.pool_bytes() && first == n,
          where + ": the pool is not the builder's for its own entries (" + std::to_string(m.pool_bytes()) +
              " bytes, rebuilt " + std::to_string(again.pool_bytes()) + ", first difference at pool byte " +
              std::to_string(first) + ")");
}

// A pool the validator accepted (from a file, or from another producer) may
// place its nodes in any order (docs/format.md, "The pool"), but holds the
// builder's nodes: the same types, the same bytes in all, nothing else.
template <class V>
void require_canonical_nodes(const Matrix<V>& m, const std::string& where) {
  const Matrix<V> again = rebuild(m, where);
  const PoolStats a = validate(m.content()), b = validate(again.content());
  require(a.inner == b.inner && a.leaf == b.leaf && a.dense == b.dense && a.coo1 == b.coo1 && a.coo2 == b.coo2 &&
              a.coo4 == b.coo4 && a.coow == b.coow && a.node_bytes == b.node_bytes && a.entries == b.entries,
          where + ": the pool's nodes are not the builder's for its entries");
  require(again.pool_bytes() == m.pool_bytes(), where + ": the pool has " + std::to_string(m.pool_bytes()) +
                                                    " bytes, the builder's " + std::to_string(again.pool_bytes()));
}

// What the builder makes must pass the validator; an Error here is a bug,
// not a rejected input.
template <class V>
void require_valid(const Matrix<V>& m, const std::string& where) {
  try {
    (void)validate(m.content());
  } catch (const Error& e) {
    throw PropertyViolation(where + ": the builder's pool fails the validator: " + e.what());
  }
}

}  // namespace hisparse::fuzz
