// libFuzzer harness: the round-trip property (roundtrip_property.hpp) over
// matrices decoded from the fuzz bytes.
#include <cstddef>
#include <cstdint>

#include "roundtrip_property.hpp"
#include "scratch_dir.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  hisparse::fuzz::check_roundtrip({data, size}, hisparse::fuzz::scratch_dir());
  return 0;
}
