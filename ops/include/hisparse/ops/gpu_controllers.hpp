#pragma once
// Which runtime controllers the GPU op library was compiled with. A build
// configured with -Ddevice_launch=false (no relocatable device code, so that
// compute-sanitizer's racecheck and synccheck can check it) has no
// dynamic-parallelism or tail-launch controller; asking an op for one throws
// runtime::ConfigError. Plain C++, like the ops' other entry points.
#include "hisparse/runtime/config.hpp"

namespace hisparse::ops {

[[nodiscard]] bool gpu_controller_available(runtime::Controller c) noexcept;

}  // namespace hisparse::ops
