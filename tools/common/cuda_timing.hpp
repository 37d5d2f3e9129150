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
  cudaEvent_t a, b;
  cuda_check(cudaEventCreate(&a), "cudaEventCreate");
  cuda_check(cudaEventCreate(&b), "cudaEventCreate");
  std::vector<double> t(static_cast<std::size_t>(std::max(plan.runs, 1)));
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (flush)
      cuda_check(cudaMemsetAsync(flush->get(), static_cast<int>(i & 0xFF), flush->size()), "cudaMemsetAsync(flush)");
    cuda_check(cudaEventRecord(a), "cudaEventRecord");
    if (host_work) cuda_check(cudaEventSynchronize(a), "cudaEventSynchronize");
    f();
    cuda_check(cudaEventRecord(b), "cudaEventRecord");
    cuda_check(cudaEventSynchronize(b), "cudaEventSynchronize");
    float ms = 0;
    cuda_check(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
    t[i] = ms;
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  const double mean = std::accumulate(t.begin(), t.end(), 0.0) / static_cast<double>(t.size());
  double var = 0;
  for (double v : t) var += (v - mean) * (v - mean);
  std::sort(t.begin(), t.end());
  return {t[t.size() / 2], mean, std::sqrt(var / static_cast<double>(t.size()))};
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
  cudaEvent_t a, b;
  cuda_check(cudaEventCreate(&a), "cudaEventCreate");
  cuda_check(cudaEventCreate(&b), "cudaEventCreate");
  std::vector<double> t(static_cast<std::size_t>(std::max(runs, 1)));
  try {
    for (std::size_t i = 0; i < t.size(); ++i) {
      std::optional<Result> kept;  // the result of call i, released after its end event
      cuda_check(cudaEventRecord(a), "cudaEventRecord");
      cuda_check(cudaEventSynchronize(a), "cudaEventSynchronize");
      kept.emplace(make());
      cuda_check(cudaEventRecord(b), "cudaEventRecord");
      cuda_check(cudaEventSynchronize(b), "cudaEventSynchronize");
      float ms = 0;
      cuda_check(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
      t[i] = ms;
    }
  } catch (...) {
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    throw;
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  const double mean = std::accumulate(t.begin(), t.end(), 0.0) / static_cast<double>(t.size());
  double var = 0;
  for (double v : t) var += (v - mean) * (v - mean);
  std::sort(t.begin(), t.end());
  return {t[t.size() / 2], mean, std::sqrt(var / static_cast<double>(t.size()))};
}

}  // namespace hisparse::tools
