#pragma once
// The .hsp binary file: a 96-byte little-endian header (docs/format.md) and
// the node pool, checksummed with XXH3-64. Loading checks sizes, checksums
// and every pool invariant before it returns; a bad file is a clear Error.
#include <filesystem>

#include "hisparse/formats/matrix.hpp"

namespace hisparse {

inline constexpr std::uint32_t hsp_version = 1;
inline constexpr std::uint32_t hsp_header_bytes = 96;

struct HspInfo {
  Shape shape;
  std::uint64_t nnz = 0;
  ValueType value_type = ValueType::f64;
  bool transposed = false;
  double scale_re = 1.0, scale_im = 0.0;
  std::uint64_t pool_bytes = 0;
};

// Reads and checks the header only (for choosing the value type).
HspInfo read_hsp_info(const std::filesystem::path& path);

template <class V>
Matrix<V> load_hsp(const std::filesystem::path& path);

// Written atomically: a temporary file renamed over the target.
template <class V>
void save_hsp(const std::filesystem::path& path, const Matrix<V>& m);

}  // namespace hisparse
