// The round-trip property in the host suite: random byte strings from a
// fresh seed (printed on failure; HISPARSE_SEED repeats one) decoded
// into matrices of every value type, node size and format.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "roundtrip_property.hpp"
#include "scratch_dir.hpp"
#include "support/test_seed.hpp"

TEST(RoundTripProperty, BuiltMatricesComeBackUnchanged) {
  const std::uint64_t seed = hisparse::testing::fresh_seed();
  std::mt19937_64 rng(seed);
  for (int round = 0; round < 400; ++round) {
    std::vector<std::uint8_t> bytes(std::uniform_int_distribution<std::size_t>(0, 4096)(rng));
    for (auto& b : bytes) b = static_cast<std::uint8_t>(rng());
    try {
      hisparse::fuzz::check_roundtrip(bytes, hisparse::fuzz::scratch_dir());
    } catch (const std::exception& e) {
      FAIL() << hisparse::testing::seed_note(seed) << ", round " << round << ": " << e.what();
    }
  }
}
