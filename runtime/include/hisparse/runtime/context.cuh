#pragma once
// What a procedure sees: its item's group, its share of shared memory, the
// user's state, and enqueue for any procedure of the same setup. A procedure
// does not know which controller runs it.
#include <cstdint>
#include <utility>

#include "queue.cuh"
#include "queue_setup.hpp"

namespace hisparse::runtime {

// Empty user state for setups that need none.
struct NoState {};

// Per-run counters of a setup, in one block of device memory. The last device
// thread of a run copies it to host-mapped memory and zeroes it, so a run needs
// neither a reset nor a copy-back operation of its own (empty-run latency).
template <std::uint32_t Queues, std::size_t Procedures>
struct RunBlock {
    RunCounters counters;
    QueueRunCounters queues[Queues];
    unsigned long long items_done[Procedures];
};

// Everything the device side of one runtime needs, kept in device memory; the
// kernels receive a pointer to it.
template <class Setup, class State>
struct DeviceState {
    using RunBlockT = RunBlock<Setup::queue_count, Setup::procedure_count>;
    QueueView queues[Setup::queue_count];
    RunCounters* counters = nullptr;
    unsigned long long* items_done = nullptr;  // per procedure
    RunBlockT* run_block = nullptr;
    RunBlockT* result = nullptr;  // host-mapped
    State state{};
    unsigned block_size = 0;
    unsigned drain = 1;
    unsigned linger_ns = 0;
    unsigned min_running_blocks = 0;
    unsigned max_blocks_per_launch = 0;
    unsigned pending_launch_limit = 0;
};

namespace detail {
__device__ inline bool should_stop(const RunCounters* c) {
    // error or abort: both are written rarely, a relaxed load is enough to notice soon.
    return device_atomic<const unsigned>(c->error).load(cuda::memory_order_relaxed) != 0u ||
           device_atomic<const unsigned>(c->abort).load(cuda::memory_order_relaxed) != 0u;
}

// Ends a run: one thread, after every other device thread of the run is done
// (see the callers). Copies the run's counters to the host and zeroes them.
template <class Setup, class State>
__device__ void finish_run(const DeviceState<Setup, State>* ds) {
    using RB = typename DeviceState<Setup, State>::RunBlockT;
    static_assert(sizeof(RB) % sizeof(unsigned long long) == 0);
    __threadfence();
    auto* src = reinterpret_cast<volatile unsigned long long*>(ds->run_block);
    auto* dst = reinterpret_cast<volatile unsigned long long*>(ds->result);
    for (std::size_t i = 0; i < sizeof(RB) / sizeof(unsigned long long); ++i) {
        dst[i] = src[i];
        src[i] = 0ull;
    }
    __threadfence_system();
}
}  // namespace detail

template <class Setup, class State>
class Context {
public:
    __device__ Context(const DeviceState<Setup, State>* ds, void* shared, unsigned group, unsigned group_size,
                       unsigned lane)
        : ds_(ds), shared_(shared), group_(group), group_size_(group_size), lane_(lane) {}

    // Enqueues an item for procedure P into its queue `bin`. Lanes of a warp
    // that enqueue into the same queue at the same time share one reservation.
    // A full queue or a bin that does not exist raises an error flag that
    // run() turns into an exception; the item is dropped.
    template <class P>
    __device__ void enqueue(const typename P::payload_type& item, std::uint32_t bin = 0) const {
        constexpr std::uint32_t first = Setup::template first_queue<P>();
        constexpr std::uint32_t bins = Setup::template bins_of<P>();
        if (bin >= bins) {
            atomicOr(&ds_->counters->error, static_cast<unsigned>(error_bad_bin));
            return;
        }
        const QueueView& q = ds_->queues[first + bin];
        if (!q.try_enqueue(item, &ds_->counters->pending)) {
            atomicOr(&q.run->overflow, 1u);
            atomicOr(&ds_->counters->error, static_cast<unsigned>(error_overflow));
        }
    }

    [[nodiscard]] __device__ const State& state() const { return ds_->state; }
    // This item's slice of shared memory (the procedure's shared_bytes).
    [[nodiscard]] __device__ void* shared() const { return shared_; }
    [[nodiscard]] __device__ unsigned group() const { return group_; }
    [[nodiscard]] __device__ unsigned group_size() const { return group_size_; }

    // Barrier among the threads of this item's group. Groups of up to 32 threads
    // sit in one warp; larger ones use a named barrier per group (ids 1..15).
    __device__ void sync_group() const {
        if (group_size_ <= 32) {
            const unsigned width_mask = group_size_ == 32 ? 0xffffffffu : ((1u << group_size_) - 1u);
            const unsigned shift = (threadIdx.x & 31u) & ~(group_size_ - 1u);
            __syncwarp(width_mask << shift);
        } else if (group_size_ == blockDim.x) {
            __syncthreads();
        } else {
            asm volatile("bar.sync %0, %1;" ::"r"(1u + group_), "r"(group_size_) : "memory");
        }
    }

private:
    const DeviceState<Setup, State>* ds_;
    void* shared_;
    unsigned group_;
    unsigned group_size_;
    unsigned lane_;
};

}  // namespace hisparse::runtime
