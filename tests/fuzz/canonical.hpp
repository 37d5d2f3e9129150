#pragma once
// Checks the harnesses share: a pool the validator accepts is the one the
// builder makes from its entries ("same entries, same bytes",
// docs/format.md), and a matrix the builder makes passes the validator.
#include <complex>
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

// The stored entries (untransposed, unscaled), rebuilt with the pool's own
// node size and format, must give the same pool byte for byte.
template <class V>
void require_canonical(const Matrix<V>& m, const std::string& where) {
  const Content<V>& c = m.content();
  Coo<V> entries;
  Matrix<V> again;
  try {
    entries = to_coo(m.with_state(false, V(1)));
    BuildOptions options;
    options.node_size = c.shape.node_size();
    options.wide_nodes = is_wide_pool(c);
    again = build_matrix(entries, options);
  } catch (const Error& e) {
    throw PropertyViolation(where + ": a validated pool's entries do not rebuild: " + e.what());
  }
  require(entries.nnz() == c.nnz, where + ": the pool reaches " + std::to_string(entries.nnz()) +
                                      " entries, the header says " + std::to_string(c.nnz));
  require(again.content().shape == c.shape, where + ": the rebuilt matrix has another shape");
  require(again.pool_bytes() == m.pool_bytes() &&
              std::memcmp(again.content().pool.data(), c.pool.data(), m.pool_bytes()) == 0,
          where + ": the pool is not the builder's for its own entries (" + std::to_string(m.pool_bytes()) +
              " bytes, rebuilt " + std::to_string(again.pool_bytes()) + ")");
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
