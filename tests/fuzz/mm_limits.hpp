#pragma once
// The limits both Matrix Market harnesses read with: small, so that one
// run's memory stays bounded and the limit paths themselves are fuzzed (an
// input over them must be refused, not read). docs/reliability.md, "Fuzzing".
#include <cstdint>

#include "hisparse/formats/matrix_market.hpp"

namespace hisparse::fuzz {

inline constexpr MmLimits mm_limits{index_t{1} << 48, std::uint64_t{1} << 16, std::size_t{1} << 14};

}  // namespace hisparse::fuzz
