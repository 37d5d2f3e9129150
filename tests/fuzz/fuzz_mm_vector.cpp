// libFuzzer harness: the Matrix Market vector reader (--x and --y files),
// with and without the length the operand needs.
#include <cstddef>
#include <cstdint>
#include <optional>

#include "hisparse/formats/matrix_market.hpp"
#include "memory_file.hpp"
#include "mm_limits.hpp"

namespace {
using namespace hisparse;
using hisparse::fuzz::require;

using fuzz::mm_limits;

template <class V>
void read(MmReader& reader, std::optional<std::uint64_t> expected) {
  const std::vector<V> v = reader.read_vector<V>(expected);
  require(!expected || v.size() == *expected, "a vector of another length than the expected one");
  require(v.size() <= mm_limits.max_entries, "a vector longer than the limit");
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const fuzz::MemoryFile file({data, size});
  try {
    MmReader reader(file.path(), mm_limits);
    const MmHeader h = reader.header();
    // The expected length: none, the declared one, or one the file does not have.
    std::optional<std::uint64_t> expected;
    if (size % 3 == 1) expected = h.rows;
    if (size % 3 == 2) expected = h.rows + 1;
    switch (size % 4) {
      case 0: read<float>(reader, expected); break;
      case 1: read<double>(reader, expected); break;
      case 2: read<std::complex<float>>(reader, expected); break;
      default: read<std::complex<double>>(reader, expected); break;
    }
  } catch (const hisparse::Error&) {
  }
  return 0;
}
