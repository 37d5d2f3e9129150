#pragma once
// What a procedure sees: its item's group, its share of shared memory, the
// user's state, and enqueue for any procedure of the same setup. A procedure
// does not know which controller runs it.
#include <cstdint>
#include <utility>

#include "profile.cuh"
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
    using ProfileBlockT = detail::ProfileBlock<Setup::queue_count, Setup::procedure_count>;
    QueueView queues[Setup::queue_count];
    RunCounters* counters = nullptr;
    unsigned long long* items_done = nullptr;  // per procedure
    RunBlockT* run_block = nullptr;
    RunBlockT* result = nullptr;  // host-mapped
    ProfileBlockT* profile = nullptr;  // RuntimeConfig::profile, else null
    State state{};
    unsigned block_size = 0;
    unsigned drain = 1;
    unsigned linger_ns = 0;
    unsigned min_running_blocks = 0;
    unsigned pending_launch_limit = 0;
    unsigned local_stash = 0;   // persistent blocks keep a batch of their own children (RuntimeConfig)
    unsigned stash_offset = 0;  // byte offset of that stash in the megakernel's dynamic shared memory
};

namespace detail {

// Ends a run: one full warp (`lane` 0..31), after every other device thread
// of the run is done (see the callers). Copies the run's counters to
// host-mapped memory and zeroes them. The 32 lanes write consecutive words, so
// the copy crosses PCIe in a few transactions instead of one per word: it is
// a large part of an empty run's latency.
template <class Setup, class State>
__device__ void finish_run(const DeviceState<Setup, State>* ds, unsigned lane) {
    using RB = typename DeviceState<Setup, State>::RunBlockT;
    static_assert(sizeof(RB) % sizeof(unsigned long long) == 0);
    __syncwarp();
    __threadfence();
    auto* src = reinterpret_cast<volatile unsigned long long*>(ds->run_block);
    auto* dst = reinterpret_cast<unsigned long long*>(ds->result);
    for (std::size_t i = lane; i < sizeof(RB) / sizeof(unsigned long long); i += 32) {
        dst[i] = src[i];
        src[i] = 0ull;
    }
    __threadfence_system();
}
}  // namespace detail

namespace detail {

// Shared-memory bytes of a persistent block's stash of payloads.
inline constexpr unsigned local_stash_bytes = 2048;
inline constexpr unsigned no_queue = ~0u;

// Items one block enqueued during its current batch, all for one queue, that
// it runs itself as its next batch (persistent controller only). Writers
// take a position with a shared-memory atomic; the batch's closing barrier
// publishes the items to the block, which is the only reader. Nothing here
// is visible to other blocks: the items are counted in `pending` when the
// batch that produced them retires, in the same atomic (see run_batch).
struct LocalStash {
    unsigned queue;  // no_queue while empty
    unsigned count;  // items stored (never above the capacity, see try_push)
    alignas(16) unsigned char bytes[local_stash_bytes];

    // Capacity in items of type T for a queue of `items_per_block`.
    template <class T>
    __device__ static unsigned capacity(unsigned items_per_block) {
        constexpr unsigned fit = local_stash_bytes / sizeof(T);
        return items_per_block < fit ? items_per_block : fit;
    }

    template <class T>
    __device__ bool try_push(unsigned q, const T& item, unsigned items_per_block) {
        unsigned owner = *static_cast<volatile unsigned*>(&queue);
        if (owner == no_queue) {
            owner = atomicCAS(&queue, no_queue, q);
            if (owner == no_queue) owner = q;
        }
        if (owner != q) return false;
        const unsigned cap = capacity<T>(items_per_block);
        // Cheap test first: a wide fan-out finds the stash full for all but
        // its first items, and contended shared atomics serialise.
        if (*static_cast<volatile unsigned*>(&count) >= cap) return false;
        // A push that finds the stash full takes its increment back. Once
        // `count` has reached cap it never drops below it again (every later
        // increment is undone by its own push), so no position below cap is
        // given out twice and the final count is exactly min(pushes, cap).
        const unsigned pos = atomicAdd(&count, 1u);
        if (pos >= cap) {
            atomicSub(&count, 1u);
            return false;
        }
        reinterpret_cast<T*>(bytes)[pos] = item;
        return true;
    }
};

}  // namespace detail

template <class Setup, class State>
class Context {
public:
    __device__ Context(const DeviceState<Setup, State>* ds, void* shared, unsigned group, unsigned group_size,
                       unsigned lane, detail::LocalStash* stash = nullptr)
        : ds_(ds), shared_(shared), group_(group), group_size_(group_size), lane_(lane), stash_(stash) {}

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
        if (stash_ != nullptr && stash_->try_push(first + bin, item, q.items_per_block)) return;
        if (!q.try_enqueue(item, &ds_->counters->pending)) {
            atomicOr(&q.run->overflow, 1u);
            atomicOr(&ds_->counters->error, static_cast<unsigned>(error_overflow));
        }
    }

    // Warp-collective: all 32 lanes of the calling warp call it together,
    // with the same P and bin; lane l enqueues `count` items expand(base, k),
    // k < count (0: none), e.g. the chunks of a big node, which the warp then
    // writes in parallel (QueueView::try_enqueue_expand). For procedures whose
    // items are a warp or smaller; the local stash is not used.
    template <class P, class Expand>
    __device__ void enqueue_expand(const typename P::payload_type& base, std::uint32_t count, Expand expand,
                                   std::uint32_t bin = 0) const {
        constexpr std::uint32_t first = Setup::template first_queue<P>();
        constexpr std::uint32_t bins = Setup::template bins_of<P>();
        if (bin >= bins) {
            if (count != 0u) atomicOr(&ds_->counters->error, static_cast<unsigned>(error_bad_bin));
            return;
        }
        const QueueView& q = ds_->queues[first + bin];
        if (!q.try_enqueue_expand(base, count, expand, &ds_->counters->pending) && (threadIdx.x & 31u) == 0u) {
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
    detail::LocalStash* stash_;
};

}  // namespace hisparse::runtime
