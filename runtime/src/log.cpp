#include "hisparse/runtime/log.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <memory>
#include <string>

namespace hisparse::runtime::log {
namespace {

spdlog::level::level_enum level_from_environment() {
    const char* value = std::getenv("HISPARSE_RUNTIME_LOG");
    if (value == nullptr || *value == '\0') return spdlog::level::warn;
    return spdlog::level::from_str(value);  // unknown names give "off"
}

// The named logger, created on first use; shares spdlog's registry so an
// application can reconfigure it with spdlog::get("hisparse.runtime").
spdlog::logger& logger() {
    static const std::shared_ptr<spdlog::logger> instance = [] {
        if (auto existing = spdlog::get("hisparse.runtime")) return existing;
        auto created = spdlog::stderr_color_mt("hisparse.runtime");
        created->set_level(level_from_environment());
        return created;
    }();
    return *instance;
}

spdlog::level::level_enum to_spdlog(Level level) {
    switch (level) {
        case Level::trace: return spdlog::level::trace;
        case Level::debug: return spdlog::level::debug;
        case Level::info: return spdlog::level::info;
        case Level::warn: return spdlog::level::warn;
        case Level::error: return spdlog::level::err;
        case Level::off: return spdlog::level::off;
    }
    return spdlog::level::off;
}

}  // namespace

void write(Level level, std::string_view message) { logger().log(to_spdlog(level), "{}", message); }

bool enabled(Level level) { return logger().should_log(to_spdlog(level)); }

}  // namespace hisparse::runtime::log
