#pragma once
// Synthetic matrices, deterministic for their parameters.
#include "hisparse/formats/coo.hpp"

namespace hisparse::cli {

// The 5-point Laplacian of an n x n grid: n^2 rows, about 5 n^2 entries.
template <class V>
Coo<V> laplacian_2d(index_t n);

}  // namespace hisparse::cli
