#pragma once
// Where a run's time goes (RuntimeConfig::profile): every batch adds its
// duration to its procedure's counters and its queues' fill to a window of
// the run's timeline. Kept apart from the run counters (RunBlock), which the
// run's last thread copies to the host at every run: a profile is copied only
// when one was asked for, so an unprofiled run pays nothing for it.
#include <cstdint>

#include "queue.cuh"

namespace hisparse::runtime::detail {

// Windows of the timeline: [0, 1024 ns) and then four per doubling of the
// time since the start, up to 2^41 ns (about 37 minutes; later batches count
// in the last window).
inline constexpr unsigned profile_windows = 128;

__host__ __device__ constexpr unsigned profile_window(unsigned long long ns) {
    if (ns < 1024ull) return 0u;
    unsigned e = 10;
    while (e < 63u && (ns >> (e + 1)) != 0ull) ++e;  // floor(log2 ns)
    const unsigned w = 1u + 4u * (e - 10u) + static_cast<unsigned>((ns >> (e - 2)) & 3ull);
    return w < profile_windows ? w : profile_windows - 1u;
}

// Start of window w in ns (its end is the next window's start).
__host__ __device__ constexpr double profile_window_start_ns(unsigned w) {
    if (w == 0u) return 0.0;
    const unsigned e = (w - 1u) / 4u, quarter = (w - 1u) % 4u;
    double scale = 1024.0;
    for (unsigned i = 0; i < e; ++i) scale *= 2.0;
    return scale * (1.0 + quarter / 4.0);
}

// Each time falls in the window that starts at or before it and ends after it.
__host__ __device__ constexpr bool window_holds(unsigned long long ns) {
    const unsigned w = profile_window(ns);
    return profile_window_start_ns(w) <= static_cast<double>(ns) &&
           (w == profile_windows - 1u || static_cast<double>(ns) < profile_window_start_ns(w + 1u));
}
static_assert(profile_window(0) == 0 && profile_window(1023) == 0 && profile_window(1024) == 1);
static_assert(window_holds(1500) && window_holds(2047) && window_holds(2048) && window_holds(5000) &&
              window_holds(123456789) && window_holds(1ull << 39) && window_holds((1ull << 39) + 12345));
static_assert(profile_window(~0ull) == profile_windows - 1u);

struct ProcedureTimes {
    unsigned long long batches;
    unsigned long long busy_cycles;        // summed over batches, the multiprocessor's clock
    unsigned long long earliest_inverted;  // ~(first batch's start): atomicMax over zero-initialised memory
    unsigned long long latest;             // the last batch's end (global timer, ns)
};

template <std::uint32_t Queues, std::size_t Procedures>
struct ProfileBlock {
    unsigned long long start_ns;  // the run's start (global timer), written before its seeds
    ProcedureTimes procedures[Procedures];
    unsigned long long batches[profile_windows];
    unsigned fill[profile_windows][Queues];
};

__device__ inline unsigned long long global_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// One thread per batch, before the batch reads its items.
struct BatchClock {
    unsigned long long ns = 0;
    long long cycles = 0;
    __device__ void start() {
        ns = global_ns();
        cycles = clock64();
    }
};

// One thread per batch, after the batch's last barrier.
template <std::size_t I, std::uint32_t Queues, std::size_t Procedures>
__device__ void record_batch(ProfileBlock<Queues, Procedures>* p, const QueueView* queues, const BatchClock& began) {
    const long long cycles = clock64() - began.cycles;
    const unsigned long long now = global_ns();
    ProcedureTimes& t = p->procedures[I];
    atomicAdd(&t.batches, 1ull);
    atomicAdd(&t.busy_cycles, static_cast<unsigned long long>(cycles > 0 ? cycles : 0));
    atomicMax(&t.earliest_inverted, ~began.ns);
    atomicMax(&t.latest, now);
    const unsigned long long start = device_atomic<unsigned long long>(p->start_ns).load(cuda::memory_order_relaxed);
    const unsigned w = profile_window(now > start ? now - start : 0ull);
    atomicAdd(&p->batches[w], 1ull);
    for (std::uint32_t q = 0; q < Queues; ++q) {
        const unsigned fill = device_atomic<unsigned>(queues[q].counters->fill).load(cuda::memory_order_relaxed);
        // Most batches of a window see no new maximum: read before the atomic.
        if (fill > device_atomic<unsigned>(p->fill[w][q]).load(cuda::memory_order_relaxed))
            atomicMax(&p->fill[w][q], fill);
    }
}

template <std::uint32_t Queues, std::size_t Procedures>
__global__ void profile_start_kernel(ProfileBlock<Queues, Procedures>* p) {
    p->start_ns = global_ns();
}

}  // namespace hisparse::runtime::detail
