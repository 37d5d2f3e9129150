#pragma once
// Fresh random seeds for every test run, printed so a failure can be replayed:
// HISPARSE_SEED=<n> fixes the seed. Each seed is also written to stderr when
// it is drawn: a failure's SCOPED_TRACE names it, but a test that hangs or
// crashes never reaches its trace.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

namespace hisparse::testing {

inline std::uint64_t fresh_seed() {
  if (const char* s = std::getenv("HISPARSE_SEED")) return std::strtoull(s, nullptr, 10);
  std::random_device rd;
  const std::uint64_t seed = (std::uint64_t{rd()} << 32) | rd();
  std::fprintf(stderr, "[seed] %llu\n", static_cast<unsigned long long>(seed));
  return seed;
}

inline std::string seed_note(std::uint64_t seed) {
  return "seed " + std::to_string(seed) + " (replay with HISPARSE_SEED=" + std::to_string(seed) + ")";
}

}  // namespace hisparse::testing
