#pragma once
// The runtime's logging interface. spdlog and fmt do not compile under nvcc in
// C++20 mode, so templated host code (compiled by nvcc in the consumer's .cu
// files) logs through these plain functions, implemented in src/log.cpp with a
// named spdlog logger "hisparse.runtime". The level comes from the environment
// variable HISPARSE_RUNTIME_LOG (trace, debug, info, warn, error, off; default warn).
#include <string_view>

namespace hisparse::runtime::log {

enum class Level { trace, debug, info, warn, error, off };

void write(Level level, std::string_view message);
[[nodiscard]] bool enabled(Level level);

inline void trace(std::string_view m) { write(Level::trace, m); }
inline void debug(std::string_view m) { write(Level::debug, m); }
inline void info(std::string_view m) { write(Level::info, m); }
inline void warn(std::string_view m) { write(Level::warn, m); }
inline void error(std::string_view m) { write(Level::error, m); }

}  // namespace hisparse::runtime::log
