#pragma once
// Block-level agent: one block claims a batch of items from one queue (as many
// as fill its threads: block_size / threads_per_item) and runs them, each group
// of threads_per_item consecutive threads on one item. Shared by every
// controller. Takes a linear thread id instead of reading threadIdx.
#include <cstdint>
#include <utility>

#include "context.cuh"

namespace hisparse::runtime::detail {

// Broadcast slots of a block's claim.
struct BatchClaim {
    unsigned long long first;
    unsigned count;
    unsigned queue;
    unsigned local;  // non-zero: the items are in the block's LocalStash, not in the queue
};

// Thread `tid` == 0 claims up to one block's worth of items from queue q.
template <class Setup, class State>
__device__ inline void claim_batch(const DeviceState<Setup, State>* ds, unsigned q, unsigned tid, BatchClaim& out) {
    if (tid == 0) {
        const QueueView& view = ds->queues[q];
        unsigned long long first = 0;
        const unsigned count = run_stopping(ds->counters) ? 0u : view.claim(view.items_per_block, first);
        out.first = first;
        out.count = count;
        out.queue = q;
        out.local = 0;
    }
}

// Runs a claimed batch of procedure I. All threads of the block call it.
// `stash` (persistent blocks only, else null) receives the items the batch
// enqueues for one queue, up to a batch; the caller runs them next.
// `settled` (a pre-claimed launch, see worker_kernel): the items are
// published before the grid starts, and the controller gives the queue's
// room back and retires the items for the whole launch afterwards
// (settle_kernel), so the block does neither: no waits on sequence words
// and no atomics on the queue's hot counters per batch.
template <class Setup, class State, std::size_t I>
__device__ __forceinline__ void run_batch(const DeviceState<Setup, State>* ds, const BatchClaim& claim,
                                          unsigned char* shared, unsigned tid, LocalStash* stash,
                                          bool settled = false) {
    using P = typename Setup::template procedure_at<I>;
    using Payload = typename P::payload_type;
    constexpr unsigned threads = P::threads_per_item;
    constexpr unsigned shared_per_item = detail::shared_bytes_of<P>();
    const unsigned count = claim.count;
    const unsigned long long first = claim.first;
    const bool local = claim.local != 0u;
    const QueueView& view = ds->queues[claim.queue];
    const unsigned group = tid / threads;
    const unsigned lane = tid % threads;
    const bool active = group < count;
    BatchClock clock;
    if (ds->profile != nullptr && tid == 0) clock.start();

    // A union so that payloads without a default constructor work too.
    union Slot {
        Payload value;
        unsigned char none;
        __device__ Slot() : none(0) {}
    } item;
    // `ready` false: the run stopped before this item was published; the
    // group skips it (the run's results are discarded).
    bool ready = active;
    if (active) {
        if (local)
            item.value = reinterpret_cast<const Payload*>(stash->bytes)[group];
        else if (settled)
            item.value = view.template read_published<Payload>(first + group);
        else
            ready = view.template read<Payload>(first + group, item.value);
    }
    if (settled) {
        // One batch per block: its slots go back to writers when the block
        // is done with them (a barrier here would only add a wait).
        if (active) {
            Context<Setup, State> ctx(ds, shared + static_cast<std::size_t>(group) * shared_per_item, group, threads,
                                      lane, nullptr);
            P::run(static_cast<const Payload&>(item.value), lane, threads, ctx);
        }
        __syncthreads();
        if (active && lane == 0) view.release(first + group);
        if (ds->profile != nullptr && tid == 0) record_batch<I>(ds->profile, ds->queues, clock);
        return;  // the settle kernel gives the room back and retires the items, after this grid
    }
    // Every thread of the group holds its copy: the slot can go back to writers.
    // A read that gave up (the run is stopping) drops the whole batch: the
    // threads of a group must agree, since procedures use warp collectives.
    if (!__syncthreads_and(!active || ready)) ready = false;
    if (!local) {
        if (active && lane == 0) view.release(first + group);
        if (tid == 0) view.release_room(count);
    }
    if (stash != nullptr) {
        // The stash is empty for this batch's children; nobody pushes before
        // the barrier below.
        if (tid == 0) {
            stash->queue = no_queue;
            stash->count = 0;
        }
        __syncthreads();
    }

    if (ready) {
        Context<Setup, State> ctx(ds, shared + static_cast<std::size_t>(group) * shared_per_item, group, threads, lane,
                                  stash);
        P::run(static_cast<const Payload&>(item.value), lane, threads, ctx);
    }
    // Completion is counted after every enqueue of the batch has counted its
    // items in `pending`: pending can only reach zero when no work is left.
    // Stashed children are counted here, in the same atomic that retires their
    // parents, so pending never dips to zero in between.
    __syncthreads();
    if (tid == 0) {
        const unsigned stashed = stash != nullptr ? stash->count : 0u;
        // Release (cumulative over the block's writes ordered by the barrier):
        // lighter than __threadfence's sequentially consistent fence.
        cuda::atomic_thread_fence(cuda::memory_order_release, cuda::thread_scope_device);
        atomicAdd(&ds->items_done[I], static_cast<unsigned long long>(count));
        const unsigned long long delta =
            static_cast<unsigned long long>(stashed) - static_cast<unsigned long long>(count);  // mod 2^64
        if (delta != 0ull && atomicAdd(&ds->counters->pending, delta) + delta == 0ull)
            device_atomic<unsigned>(ds->counters->done).store(1u, cuda::memory_order_relaxed);
        if (ds->profile != nullptr) record_batch<I>(ds->profile, ds->queues, clock);
    }
}

template <class Setup, class State, std::size_t... I>
__device__ __forceinline__ void dispatch_batch(const DeviceState<Setup, State>* ds, const BatchClaim& claim,
                                               unsigned char* shared, unsigned tid, std::index_sequence<I...>,
                                               LocalStash* stash = nullptr) {
    const unsigned procedure = ds->queues[claim.queue].procedure;
    ((procedure == I ? run_batch<Setup, State, I>(ds, claim, shared, tid, stash) : void()), ...);
}

}  // namespace hisparse::runtime::detail
