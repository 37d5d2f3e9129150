#pragma once
// The .hsp binary file: a 96-byte little-endian header (docs/format.md) and
// the node pool, checksummed with XXH3-64. Loading checks sizes, checksums
// and every pool invariant before it returns; a bad file is a clear Error.
#include <filesystem>

#include "hisparse/formats/matrix.hpp"

namespace hisparse {

// The version save_hsp writes. Version 2 checksums the whole header and seeds
// the pool checksum with the value type code; version 1 files (header
// checksum over bytes 0..79, unseeded pool checksum) are still read with
// their own rules. docs/format.md, "The .hsp file".
inline constexpr std::uint32_t hsp_version = 2;
inline constexpr std::uint32_t hsp_oldest_version = 1;
inline constexpr std::uint32_t hsp_header_bytes = 96;

struct HspInfo {
  Shape shape;
  std::uint64_t nnz = 0;
  ValueType value_type = ValueType::f64;
  bool transposed = false;
  double scale_re = 1.0, scale_im = 0.0;
  std::uint64_t pool_bytes = 0;
  std::uint32_t version = hsp_version;
};

// Reads and checks the header only (for choosing the value type).
HspInfo read_hsp_info(const std::filesystem::path& path);

// Loads a file that holds values of type V (any other type is an error).
template <class V>
Matrix<V> load_hsp(const std::filesystem::path& path);

// Loads a file of any value type as V. Widening (f32 -> f64, real -> complex)
// is exact. Narrowing (f64 -> f32, c128 -> c64, f64 -> c64) follows the
// Matrix Market reader's rules for every value and the scale: a finite value
// that overflows the narrower type is an error, an integer value (|x| < 2^63)
// must be exactly representable, other values round to nearest; infinities
// and NaN stay what they are. Complex -> real is refused (the imaginary parts
// would be lost). A conversion rebuilds the pool with the file's node size
// and format (wide nodes or not) and keeps the transpose flag.
template <class V>
Matrix<V> load_hsp_as(const std::filesystem::path& path);

// Written atomically: a temporary file renamed over the target. A matrix
// whose scale is not finite is refused (no reader would accept the file).
template <class V>
void save_hsp(const std::filesystem::path& path, const Matrix<V>& m);

}  // namespace hisparse
