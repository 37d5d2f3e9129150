#include "hisparse/runtime/config.hpp"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <string>

#include "hisparse/runtime/error.hpp"

namespace hisparse::runtime {

std::string_view to_string(Controller c) noexcept {
    switch (c) {
        case Controller::dynamic_parallelism: return "dynamic_parallelism";
        case Controller::tail_launch: return "tail_launch";
        case Controller::persistent: return "persistent";
        case Controller::host_loop: return "host_loop";
    }
    return "unknown";
}

Controller parse_controller(std::string_view name) {
    if (name == "dynamic_parallelism" || name == "dp") return Controller::dynamic_parallelism;
    if (name == "tail_launch" || name == "tail") return Controller::tail_launch;
    if (name == "persistent" || name == "megakernel") return Controller::persistent;
    if (name == "host_loop" || name == "host") return Controller::host_loop;
    throw ConfigError("unknown controller '" + std::string(name) +
                      "' (expected dynamic_parallelism|dp, tail_launch|tail, persistent|megakernel, host_loop|host)");
}

std::uint32_t SetupDescription::queue_count() const {
    std::uint32_t n = 0;
    for (const auto& p : procedures) n += p.bins;
    return n;
}

std::string SetupDescription::queue_name(std::uint32_t queue) const {
    for (const auto& p : procedures)
        if (queue >= p.first_queue && queue < p.first_queue + p.bins)
            return p.name + "[" + std::to_string(queue - p.first_queue) + "]";
    return "queue#" + std::to_string(queue);
}

std::uint64_t RunStats::total_items() const {
    std::uint64_t n = 0;
    for (auto v : items_per_procedure) n += v;
    return n;
}

std::uint32_t RunStats::max_fill() const {
    std::uint32_t m = 0;
    for (auto v : max_fill_per_queue) m = std::max(m, v);
    return m;
}

std::string format_profile(const RunProfile& p) {
    if (p.empty()) return "(no profile: RuntimeConfig::profile is off)\n";
    char buf[256];
    std::string out = "| procedure | items | batches | items per batch | busy (block-ms) | first batch (ms) | last batch ends (ms) |\n"
                      "| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n";
    for (const auto& pr : p.procedures) {
        if (pr.batches == 0) continue;
        std::snprintf(buf, sizeof buf, "| %s | %llu | %llu | %.1f | %.3f | %.3f | %.3f |\n", pr.name.c_str(),
                      static_cast<unsigned long long>(pr.items), static_cast<unsigned long long>(pr.batches),
                      static_cast<double>(pr.items) / static_cast<double>(pr.batches), pr.busy_ms, pr.first_ms,
                      pr.last_ms);
        out += buf;
    }
    std::snprintf(buf, sizeof buf, "\nrun on the device: %.3f ms; queue fill over time (largest fill seen as a batch ended):\n\n",
                  p.device_ms);
    out += buf;
    out += "| window (ms) | batches |";
    for (const auto& q : p.queue_names) out += " " + q + " |";
    out += "\n| --- | ---: |";
    for (std::size_t q = 0; q < p.queue_names.size(); ++q) out += " ---: |";
    out += "\n";
    for (const auto& w : p.fill) {
        std::snprintf(buf, sizeof buf, "| %.4g-%.4g | %llu |", w.from_ms, w.to_ms,
                      static_cast<unsigned long long>(w.batches));
        out += buf;
        for (auto f : w.max_fill) out += " " + std::to_string(f) + " |";
        out += "\n";
    }
    return out;
}

namespace {
[[noreturn]] void fail(const std::string& what) { throw ConfigError("runtime configuration: " + what); }
}  // namespace

ResolvedConfig resolve(const RuntimeConfig& config, const SetupDescription& setup, const DeviceLimits& limits) {
    ResolvedConfig r;
    r.controller = config.controller;
    const std::uint32_t queues = setup.queue_count();
    if (setup.procedures.empty() || queues == 0) fail("the setup has no procedure");

    r.block_size = config.block_size == 0 ? setup.max_block_size : config.block_size;
    if (r.block_size % 32 != 0 || r.block_size == 0)
        fail("block_size " + std::to_string(r.block_size) + " is not a positive multiple of 32");
    if (r.block_size > setup.max_block_size)
        fail("block_size " + std::to_string(r.block_size) + " exceeds the setup's block size " +
             std::to_string(setup.max_block_size) + " (the kernels' launch bounds)");

    if (!config.capacities.empty() && config.capacities.size() != queues)
        fail("capacities has " + std::to_string(config.capacities.size()) + " entries, the setup has " +
             std::to_string(queues) + " queues");
    if (!config.thresholds.empty() && config.thresholds.size() != queues)
        fail("thresholds has " + std::to_string(config.thresholds.size()) + " entries, the setup has " +
             std::to_string(queues) + " queues");
    if (config.watchdog.count() <= 0) fail("watchdog must be positive");
    if (config.pending_launch_limit == 0 || config.pending_launch_limit > limits.device_pending_launch_limit)
        fail("pending_launch_limit " + std::to_string(config.pending_launch_limit) + " must be in 1.." +
             std::to_string(limits.device_pending_launch_limit) + " (the device runtime's pending-launch limit)");

    r.min_running_blocks = config.min_running_blocks == 0 ? limits.multiprocessors : config.min_running_blocks;
    r.pending_launch_limit = config.pending_launch_limit;
    r.persistent_blocks_per_sm = config.persistent_blocks_per_sm;
    r.drain = config.drain;
    if (config.linger_us > 1000000) fail("linger_us above one second");
    r.linger_us = config.drain ? config.linger_us : 0;
    r.local_stash = config.local_stash;
    r.watchdog = config.watchdog;
    r.profile = config.profile;
    r.allocator = config.allocator;

    for (std::uint32_t p = 0; p < setup.procedures.size(); ++p) {
        const auto& proc = setup.procedures[p];
        const std::uint32_t t = proc.threads_per_item;
        if (t == 0 || !std::has_single_bit(t) || r.block_size % t != 0)
            fail("procedure '" + proc.name + "' has " + std::to_string(t) +
                 " threads per item, which does not divide block_size " + std::to_string(r.block_size));
        const std::uint32_t per_block = r.block_size / t;
        if (t > 32 && t < r.block_size && per_block > 15)
            fail("procedure '" + proc.name + "': " + std::to_string(per_block) + " groups of " + std::to_string(t) +
                 " threads need more than the 15 named barriers; use a smaller block");
        const std::uint64_t shared = std::uint64_t{proc.shared_bytes} * per_block;
        if (shared > limits.max_shared_per_block)
            fail("procedure '" + proc.name + "' needs " + std::to_string(shared) +
                 " bytes of shared memory per block, more than " + std::to_string(limits.max_shared_per_block));
        for (std::uint32_t b = 0; b < proc.bins; ++b) {
            const std::uint32_t q = proc.first_queue + b;
            ResolvedQueue rq;
            rq.procedure = p;
            rq.bin = b;
            const std::uint32_t cap = config.capacities.empty() ? config.default_capacity : config.capacities[q];
            if (cap == 0) fail("queue '" + setup.queue_name(q) + "' has capacity 0");
            if (cap > (1u << 30)) fail("queue '" + setup.queue_name(q) + "' capacity above 2^30");
            rq.capacity = std::max<std::uint32_t>(32, std::bit_ceil(cap));
            rq.items_per_block = per_block;
            const std::uint32_t th = config.thresholds.empty() ? config.default_threshold : config.thresholds[q];
            // The default (one block's worth) is capped by the capacity; an
            // explicit threshold above it could never be reached: an error.
            rq.threshold = th == 0 ? std::min(per_block, rq.capacity) : th;
            if (rq.threshold > rq.capacity)
                fail("queue '" + setup.queue_name(q) + "' threshold " + std::to_string(rq.threshold) +
                     " exceeds its capacity " + std::to_string(rq.capacity));
            rq.shared_bytes = static_cast<std::uint32_t>(shared);
            r.max_shared_bytes = std::max(r.max_shared_bytes, rq.shared_bytes);
            r.queues.push_back(rq);
        }
    }
    return r;
}

}  // namespace hisparse::runtime
