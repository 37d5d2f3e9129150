// libFuzzer harness: the .hsp loader and its validator. Each input is loaded
// twice: as it is (the checksums stand in the way), and with both checksums
// recomputed, so that a mutated pool reaches the validator. A load either
// succeeds with the builder's nodes for its entries (in any order: the
// format leaves the order free) or is refused with hisparse::Error.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

// Header-only XXH3, for resealing mutated files.
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "canonical.hpp"
#include "hisparse/formats/hsp_file.hpp"
#include "memory_file.hpp"

namespace {
using namespace hisparse;

// Header fields by offset (docs/format.md, "The .hsp file").
constexpr std::size_t header_bytes = 96, version_at = 8, value_type_at = 42, pool_sum_at = 72, header_sum_at = 80;

template <class T>
T get(const std::vector<std::uint8_t>& s, std::size_t at) {
  T v;
  std::memcpy(&v, s.data() + at, sizeof(v));
  return v;
}
template <class T>
void put(std::vector<std::uint8_t>& s, std::size_t at, T v) {
  std::memcpy(s.data() + at, &v, sizeof(v));
}

// Both checksums as the file's own version computes them.
void reseal(std::vector<std::uint8_t>& s) {
  const std::uint8_t* pool = s.data() + header_bytes;
  const std::size_t pool_bytes = s.size() - header_bytes;
  if (get<std::uint32_t>(s, version_at) == 1) {
    put<std::uint64_t>(s, pool_sum_at, XXH3_64bits(pool, pool_bytes));
    put<std::uint64_t>(s, header_sum_at, XXH3_64bits(s.data(), header_sum_at));
  } else {
    put<std::uint64_t>(s, pool_sum_at, XXH3_64bits_withSeed(pool, pool_bytes, s[value_type_at]));
    put<std::uint64_t>(s, header_sum_at, 0);
    put<std::uint64_t>(s, header_sum_at, XXH3_64bits(s.data(), header_bytes));
  }
}

template <class V>
void load_checked(const std::filesystem::path& p) {
  const Matrix<V> m = load_hsp<V>(p);
  fuzz::require_canonical_nodes(m, ".hsp");
}

void load_all(const std::vector<std::uint8_t>& bytes) {
  const fuzz::MemoryFile file(bytes);
  try {
    (void)read_hsp_info(file.path());
  } catch (const Error&) {
  }
  try {
    switch (bytes.size() > value_type_at ? bytes[value_type_at] : 0) {
      case 1: load_checked<float>(file.path()); break;
      case 3: load_checked<std::complex<float>>(file.path()); break;
      case 4: load_checked<std::complex<double>>(file.path()); break;
      default: load_checked<double>(file.path()); break;  // a wrong code is refused there
    }
  } catch (const Error&) {
  }
  try {
    // Narrowing and widening conversions rebuild the pool: the result must
    // still hold the builder's nodes.
    fuzz::require_canonical_nodes(load_hsp_as<float>(file.path()), ".hsp as f32");
  } catch (const Error&) {
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::uint8_t> bytes(data, data + size);
  load_all(bytes);
  if (size >= header_bytes) {
    reseal(bytes);
    load_all(bytes);
  }
  return 0;
}
