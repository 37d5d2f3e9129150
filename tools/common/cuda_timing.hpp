#pragma once
// Timing GPU calls with CUDA events, shared by `hisparse bench` and
// hisparse-rt-bench's real-traversal rows, so both measure the same way.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <optional>
#include <vector>

#include "hisparse/formats/device_matrix.hpp"  // DeviceBytes, cuda_check

namespace hisparse::tools {

struct TimingPlan {
  int warmup = 20;          // untimed calls first, at least this many...
  double warmup_ms = 50;    // ...lasting at least this long together
  int runs = 100;           // timed calls
};

struct Timing {
  double median, mean, std;  // ms
};

namespace detail {

// Two CUDA events, destroyed on every path out.
class EventPair {
 public:
  EventPair() {
    cuda_check(cudaEventCreate(&a_), "cudaEventCreate");
    try {
      cuda_check(cudaEventCreate(&b_), "cudaEventCreate");
    } catch (...) {
      cudaEventDestroy(a_);
      throw;
    }
  }
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;
  ~EventPair() {
    cudaEventDestroy(a_);
    cudaEventDestroy(b_);
  }
  // Milliseconds between an event before f() and one after it. wait_start:
  // the start event is waited for before f is called (see time_calls).
  template <class F>
  double time(F&& f, bool wait_start) {
    cuda_check(cudaEventRecord(a_), "cudaEventRecord");
    if (wait_start) cuda_check(cudaEventSynchronize(a_), "cudaEventSynchronize");
    f();
    cuda_check(cudaEventRecord(b_), "cudaEventRecord");
    cuda_check(cudaEventSynchronize(b_), "cudaEventSynchronize");
    float ms = 0;
    cuda_check(cudaEventElapsedTime(&ms, a_, b_), "cudaEventElapsedTime");
    return ms;
  }

 private:
  cudaEvent_t a_{}, b_{};
};

inline Timing summarize(std::vector<double> t) {
  const double mean = std::accumulate(t.begin(), t.end(), 0.0) / static_cast<double>(t.size());
  double var = 0;
  for (double v : t) var += (v - mean) * (v - mean);
  std::sort(t.begin(), t.end());
  return {t[t.size() / 2], mean, std::sqrt(var / static_cast<double>(t.size()))};
}

}  // namespace detail

// Times f() with CUDA events, after the plan's warm-up. With a flush buffer,
// every timed call is preceded (outside the events) by a write of it (twice
// the L2 size), so the matrix and vectors come from HBM: cold L2.
// `host_work`: f also works on the host (allocates, sets up a runtime); the
// start event is then waited for before f is called, since an event only
// gets its time stamp when the GPU reaches it, which can be as late as the
// first command f submits, leaving f's host time out.
template <class F>
Timing time_calls(F&& f, const TimingPlan& plan, DeviceBytes* flush, bool host_work = false) {
  const auto warm_start = std::chrono::steady_clock::now();
  for (int i = 0;; ++i) {
    if (i >= plan.warmup) {
      cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize(warm-up)");
      if (std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - warm_start).count() >=
          plan.warmup_ms)
        break;
    }
    f();
  }
  detail::EventPair events;
  std::vector<double> t(static_cast<std::size_t>(std::max(plan.runs, 1)));
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (flush)
      cuda_check(cudaMemsetAsync(flush->get(), static_cast<int>(i & 0xFF), flush->size()), "cudaMemsetAsync(flush)");
    t[i] = events.time(f, host_work);
  }
  return detail::summarize(std::move(t));
}

// Times calls that return a result owning device memory (a conversion, a
// copy): `make()` once untimed, then `runs` calls each timed with CUDA events.
// The start event is waited for before each call (host work counts, see
// time_calls), and each result is released after the call's end event, so its
// allocation is inside the timed span and its release outside. No flush: the
// L2 holds what the previous call left.
template <class F>
Timing time_allocating_calls(F&& make, int runs) {
  using Result = decltype(make());
  {
    Result warm = make();
    cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize(warm-up)");
  }
  detail::EventPair events;
  std::vector<double> t(static_cast<std::size_t>(std::max(runs, 1)));
  for (std::size_t i = 0; i < t.size(); ++i) {
    std::optional<Result> kept;  // the result of call i, released after its end event
    t[i] = events.time([&] { kept.emplace(make()); }, true);
  }
  return detail::summarize(std::move(t));
}

}  // namespace hisparse::tools
