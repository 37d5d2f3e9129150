#pragma once
// Matrices built with wide (COOW) nodes for the tests that exercise them: a
// case meant to cover wide nodes fails if the builder chose none.
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

}  // namespace hisparse::testing
