#pragma once
// A runtime kept in a Context between an op's calls (nvcc only). Building a
// Runtime allocates and initialises its queues and queries the device; a
// cached one is reused while a call's configuration fits it: the same
// controller and profiling, and queues at least as large as the call asks
// for. A call that needs more rebuilds it with the larger of both, so the
// queues grow to the largest matrix the context has seen (release them with
// Context::release_cached()).
#include <algorithm>
#include <array>
#include <optional>

#include "hisparse/ops/context.hpp"
#include "hisparse/runtime/runtime.cuh"

namespace hisparse::ops {

template <class Setup, class State>
class CachedRuntime {
 public:
  using RuntimeT = runtime::Runtime<Setup, State>;

  // The runtime for this call, on the context's stream, with no seeds and
  // the queues' memory from the context's (queue_allocator()). `work_bytes`
  // (the pool bytes the traversal walks) sizes the persistent grid: a block
  // per 4 KiB, at least one per multiprocessor. A one-entry add on the full
  // grid (2112 one-warp blocks) spent more time starting and retiring blocks
  // than working (docs/perf-log.md R5).
  RuntimeT& get(Context& ctx, runtime::RuntimeConfig cfg, const State& state, std::uint64_t work_bytes) {
    std::array<std::uint32_t, Setup::queue_count> need{};
    for (std::uint32_t q = 0; q < Setup::queue_count; ++q)
      need[q] = q < cfg.capacities.size() ? cfg.capacities[q] : cfg.default_capacity;
    const bool fits = rt_ && cfg.controller == controller_ && cfg.profile == profile_ &&
                      std::equal(need.begin(), need.end(), held_.begin(), [](auto n, auto h) { return n <= h; });
    if (!fits) {
      if (rt_ && cfg.controller == controller_ && cfg.profile == profile_)
        for (std::uint32_t q = 0; q < Setup::queue_count; ++q) need[q] = std::max(need[q], held_[q]);
      rt_.reset();  // its queues go back first: the new ones may need the room
      cfg.capacities.assign(need.begin(), need.end());
      cfg.allocator = ctx.queue_allocator();
      rt_.emplace(cfg, state, ctx.stream());
      held_ = need;
      controller_ = cfg.controller;
      profile_ = cfg.profile;
    } else {
      rt_->set_stream(ctx.stream());
      rt_->set_state(state);
      rt_->clear_seeds();
    }
    const std::uint64_t blocks = std::max<std::uint64_t>(rt_->limits().multiprocessors, (work_bytes + 4095) / 4096);
    rt_->limit_persistent_grid(static_cast<std::uint32_t>(std::min<std::uint64_t>(blocks, rt_->persistent_grid())));
    return *rt_;
  }
  // Drops the runtime (a traversal stopped half-way leaves nothing to keep).
  void reset() noexcept { rt_.reset(); }

 private:
  std::optional<RuntimeT> rt_;
  std::array<std::uint32_t, Setup::queue_count> held_{};
  runtime::Controller controller_{};
  bool profile_ = false;
};

}  // namespace hisparse::ops
