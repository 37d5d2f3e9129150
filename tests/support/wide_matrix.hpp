#pragma once
// Matrices of either format for the tests. The builder allows wide (COOW)
// nodes by default; build_wide is the default with a check that the case
// really contains some (a case meant to cover wide nodes fails if the builder
// chose none), and build_standard is the opt-out: the standard format, without
// COOW nodes, for tests of it.
#include <gtest/gtest.h>

#include <cstdint>

#include "hisparse/formats/builder.hpp"
#include "hisparse/formats/validate.hpp"

namespace hisparse::testing {

template <class V>
Matrix<V> build_wide(const Coo<V>& coo, std::uint32_t node_size) {
  Matrix<V> m = build_matrix(coo, BuildOptions{node_size, true});
  EXPECT_GT(validate(m.content()).coow, 0u) << "the case must contain wide nodes";
  return m;
}

template <class V>
Matrix<V> build_standard(const Coo<V>& coo, std::uint32_t node_size = default_node_size) {
  return build_matrix(coo, BuildOptions{node_size, false});
}

}  // namespace hisparse::testing
