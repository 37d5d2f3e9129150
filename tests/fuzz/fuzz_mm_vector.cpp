// libFuzzer harness: the Matrix Market vector reader (--x and --y files),
// with and without the length the operand needs.
#include <cstddef>
#include <cstdint>
#include <optional>

#include "hisparse/formats/matrix_market.hpp"
#include "memory_file.hpp"

namespace {
using namespace hisparse;
using hisparse::fuzz::require;

constexpr MmLimits limits{index_t{1} << 48, std::uint64_t{1} << 16, std::size_t{1} << 14};

template <class V>
void read(MmReader& reader, std::optional<std::uint64_t> expected) {
  const std::vector<V> v = reader.read_vector<V>(expected);
  require(!expected || v.size() == *expected, "a vector of another length than the expected one");
  require(v.size() <= limits.max_entries, "a vector longer than the limit");
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const fuzz::MemoryFile file({data, size});
  try {
    MmReader reader(file.path(), limits);
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
