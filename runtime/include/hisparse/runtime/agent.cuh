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
};

// Thread `tid` == 0 claims up to one block's worth of items from queue q.
template <class Setup, class State>
__device__ inline void claim_batch(const DeviceState<Setup, State>* ds, unsigned q, unsigned tid, BatchClaim& out) {
    if (tid == 0) {
        const QueueView& view = ds->queues[q];
        unsigned long long first = 0;
        const unsigned count = should_stop(ds->counters) ? 0u : view.claim(view.items_per_block, first);
        out.first = first;
        out.count = count;
        out.queue = q;
    }
}

// Runs a claimed batch of procedure I. All threads of the block call it.
template <class Setup, class State, std::size_t I>
__device__ void run_batch(const DeviceState<Setup, State>* ds, const BatchClaim& claim, unsigned char* shared,
                          unsigned tid) {
    using P = typename Setup::template procedure_at<I>;
    using Payload = typename P::payload_type;
    constexpr unsigned threads = P::threads_per_item;
    constexpr unsigned shared_per_item = detail::shared_bytes_of<P>();
    const unsigned count = claim.count;
    const unsigned long long first = claim.first;
    const QueueView& view = ds->queues[claim.queue];
    const unsigned group = tid / threads;
    const unsigned lane = tid % threads;
    const bool active = group < count;

    // A union so that payloads without a default constructor work too.
    union Slot {
        Payload value;
        unsigned char none;
        __device__ Slot() : none(0) {}
    } item;
    if (active) item.value = view.template read<Payload>(first + group);
    // Every thread of the group holds its copy: the slot can go back to writers.
    __syncthreads();
    if (active && lane == 0) view.release(first + group);
    if (tid == 0) view.release_room(count);

    if (active) {
        Context<Setup, State> ctx(ds, shared + static_cast<std::size_t>(group) * shared_per_item, group, threads, lane);
        P::run(static_cast<const Payload&>(item.value), lane, threads, ctx);
    }
    // Completion is counted after every enqueue of the batch has counted its
    // items in `pending`: pending can only reach zero when no work is left.
    __syncthreads();
    if (tid == 0) {
        __threadfence();
        atomicAdd(&ds->items_done[I], static_cast<unsigned long long>(count));
        atomicAdd(&ds->counters->pending, 0ull - count);  // no 64-bit atomicSub
    }
}

template <class Setup, class State, std::size_t... I>
__device__ void dispatch_batch(const DeviceState<Setup, State>* ds, const BatchClaim& claim, unsigned char* shared,
                               unsigned tid, std::index_sequence<I...>) {
    const unsigned procedure = ds->queues[claim.queue].procedure;
    ((procedure == I ? run_batch<Setup, State, I>(ds, claim, shared, tid) : void()), ...);
}

}  // namespace hisparse::runtime::detail
