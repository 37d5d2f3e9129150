#pragma once
// Procedures shared by the must-not-compile cases. Each case file instantiates
// one setup that a static_assert must reject; ok.cpp is the control that must
// compile with the same flags (so a broken include path cannot pass as "failed").
#include <cstdint>
#include <string>

#include "hisparse/runtime/queue_setup.hpp"

namespace rt = hisparse::runtime;

struct Item {
    std::uint32_t v;
};
struct A {
    using payload_type = Item;
    static constexpr std::uint32_t threads_per_item = 4;
};
struct B {
    using payload_type = Item;
    static constexpr std::uint32_t threads_per_item = 32;
};
