#pragma once
// The kernels of the four controllers. Each one only decides *when* the
// block-level agent (agent.cuh) runs on *which* queue; the procedures are the
// same for all of them.
#include <cuda_runtime.h>

#include <cstdint>
#include <utility>

#include "agent.cuh"

namespace hisparse::runtime::detail {

enum WorkerMode : unsigned {
    worker_plain = 0,
    worker_count_blocks = 1,  // dp controller: count started/finished blocks
    // The controller has claimed the launch's items (positions [first, first
    // + count)): block b runs the b-th batch of that range, with no claim.
    // The hardware's block scheduler then does what claiming did, as in a
    // plain data-parallel kernel.
    worker_preclaimed = 2,
    // ... and settles them after the grid (settle_kernel, the tail
    // controller's next round): no per-batch atomics on the queue's counters
    // either, and no sequence waits (the items were published before).
    worker_settled_later = 4,
};

// What the pre-claimed launches of one round leave for the controller to
// settle: per queue, the items launched. Passed by value (a kernel parameter).
template <unsigned Queues>
struct Settlements {
    unsigned queue[Queues];
    unsigned count[Queues];
    unsigned n;
};


// A worker about to leave waits a little for new items of its queue (dp
// controller): dependent items then skip a device-side launch. Thread 0 only.
// Returns true when an item showed up. Leaves at once when the run's work is
// done (pending == 0), so the end of a run is not delayed.
template <class Setup, class State>
__device__ bool linger(const DeviceState<Setup, State>* ds, const QueueView& view) {
    // Announced, so that the controller counts this block as covering new
    // items of the queue instead of launching another worker for them.
    atomicAdd(&view.run->lingering, 1u);
    const unsigned long long until = global_ns() + ds->linger_ns;
    unsigned backoff = 32;
    bool found = false;
    while (global_ns() < until) {
        // Stop first: after an error claim_batch refuses to claim, so "items
        // are available" alone would send the block round forever.
        if (run_stopping(ds->counters)) break;
        if (view.available_relaxed() > 0) {
            found = true;
            break;
        }
        if (device_atomic<unsigned long long>(ds->counters->pending).load(cuda::memory_order_relaxed) == 0ull) break;
        __nanosleep(backoff);
        backoff = backoff < 512 ? backoff * 2 : 512;
    }
    atomicSub(&view.run->lingering, 1u);
    return found;
}

// Worker grid for one queue: each block claims a batch and runs it, at most
// `max_batches` times (0: until the queue is empty, then lingers if so
// configured). A fixed budget is what the round-based controllers need: one
// block launched for one item must not take over a whole growing queue.
template <class Setup, std::size_t I>
inline constexpr std::uint32_t worker_min_blocks = min_blocks_of<typename Setup::template procedure_at<I>>();

template <class Setup, class State, std::size_t I>
__global__ void __launch_bounds__(Setup::block_size, (worker_min_blocks<Setup, I>))
    worker_kernel(const DeviceState<Setup, State>* ds, unsigned queue, unsigned mode, unsigned max_batches,
                  unsigned long long first, unsigned count) {
    extern __shared__ __align__(16) unsigned char dynamic_shared[];
    __shared__ BatchClaim claim;
    const unsigned tid = threadIdx.x;
    const QueueView& view = ds->queues[queue];
    if ((mode & worker_preclaimed) != 0u) {
        const bool counted = (mode & worker_count_blocks) != 0u;
        if (counted && blockIdx.x == 0 && tid == 0) atomicAdd(&ds->counters->kernels_started, 1ull);
        const unsigned long long begin = static_cast<unsigned long long>(blockIdx.x) * view.items_per_block;
        // After an error or an abort the items are dropped, as claim_batch would.
        if (begin < count && !run_stopping(ds->counters)) {
            const BatchClaim mine{first + begin,
                                  static_cast<unsigned>(min(static_cast<unsigned long long>(view.items_per_block), count - begin)),
                                  queue, 0};
            run_batch<Setup, State, I>(ds, mine, dynamic_shared, tid, nullptr, (mode & worker_settled_later) != 0u);
        }
        if (counted) {
            __syncthreads();
            if (tid == 0) {
                __threadfence();
                device_atomic<int>(ds->counters->running_blocks).fetch_sub(1, cuda::memory_order_release);
            }
        }
        return;
    }
    bool first_claim = true;
    __shared__ int again;
    unsigned batches = 0;
    while (true) {
        claim_batch(ds, queue, tid, claim);
        if (first_claim && (mode & worker_count_blocks) != 0u && tid == 0) {
            // Counted as started only after its first claim: until then the
            // controller counts this block's items as covered, so it does not
            // launch a second block for an item this one is about to take.
            __threadfence();
            device_atomic<unsigned>(view.run->started_blocks).fetch_add(1u, cuda::memory_order_release);
            if (blockIdx.x == 0) atomicAdd(&ds->counters->kernels_started, 1ull);
        }
        first_claim = false;
        __syncthreads();
        if (claim.count == 0) {  // block-uniform
            if (max_batches != 0 || ds->linger_ns == 0) break;
            if (tid == 0) again = linger(ds, view) ? 1 : 0;
            __syncthreads();
            if (!again) break;
            continue;
        }
        run_batch<Setup, State, I>(ds, claim, dynamic_shared, tid, nullptr);
        if (max_batches != 0 && ++batches >= max_batches) break;
    }
    if ((mode & worker_count_blocks) != 0u) {
        __syncthreads();
        if (tid == 0) {
            __threadfence();
            device_atomic<int>(ds->counters->running_blocks).fetch_sub(1, cuda::memory_order_release);
        }
    }
}

// Launches the worker of queue q's procedure. Two functions, not one
// __host__ __device__: in a build without relocatable device code the device
// side cannot launch, and a host/device function whose device side skipped the
// launch would leave worker_kernel uninstantiated in device code (the host
// loop's launches then fail with "invalid device function"). The device
// version is instantiated only by the device controllers.
template <class Setup, class State, std::size_t... I>
__host__ cudaError_t launch_worker_from_host(const DeviceState<Setup, State>* ds, unsigned procedure, unsigned queue,
                                             unsigned blocks, unsigned block_size, unsigned shared_bytes,
                                             cudaStream_t stream, unsigned mode, unsigned max_batches,
                                     unsigned long long first, unsigned count,
                                             std::index_sequence<I...>) {
    cudaError_t result = cudaSuccess;
    ((procedure == I ? (worker_kernel<Setup, State, I>
                        <<<blocks, block_size, shared_bytes, stream>>>(ds, queue, mode, max_batches, first, count),
                        result = cudaGetLastError(), void())
                     : void()),
     ...);
    return result;
}

template <class Setup, class State, std::size_t... I>
__device__ cudaError_t launch_worker(const DeviceState<Setup, State>* ds, unsigned procedure, unsigned queue,
                                     unsigned blocks, unsigned block_size, unsigned shared_bytes,
                                     cudaStream_t stream, unsigned mode, unsigned max_batches,
                                     unsigned long long first, unsigned count,
                                     std::index_sequence<I...>) {
    cudaError_t result = cudaSuccess;
    ((procedure == I ? (worker_kernel<Setup, State, I>
                        <<<blocks, block_size, shared_bytes, stream>>>(ds, queue, mode, max_batches, first, count),
                        result = cudaGetLastError(), void())
                     : void()),
     ...);
    return result;
}

template <class Setup, class State>
__device__ inline bool launch_failed(const DeviceState<Setup, State>* ds, cudaError_t e) {
    if (e == cudaSuccess) return false;
    atomicOr(&ds->counters->error, static_cast<unsigned>(error_launch));
    return true;
}

// Settles `count` pre-claimed items of one queue after their grid has
// completed: they leave `available` and `head` (nobody else claims from a
// queue whose items are pre-claimed), give their room back and count as
// done. Returns `count`, to be retired from `pending` after a release fence.
template <class Setup, class State>
__device__ unsigned long long settle_queue(const DeviceState<Setup, State>* ds, const QueueView& view, unsigned count) {
    atomicSub(&view.counters->available, static_cast<int>(count));
    atomicAdd(&view.counters->head, static_cast<unsigned long long>(count));
    view.release_room(count);
    atomicAdd(&ds->items_done[view.procedure], static_cast<unsigned long long>(count));
    return count;
}
template <class Setup, class State>
__device__ void retire_pending(const DeviceState<Setup, State>* ds, unsigned long long retired) {
    if (retired == 0ull) return;
    // Release: the grids' writes (their children counted in pending) are
    // ordered before the retirement, as in run_batch.
    cuda::atomic_thread_fence(cuda::memory_order_release, cuda::thread_scope_device);
    atomicAdd(&ds->counters->pending, ~retired + 1ull);  // - retired
}

// 1. Dynamic parallelism (seed 004 sec. 4.2): one warp, launched once. Each
// lane watches its queues and launches worker grids into fire-and-forget
// streams (each launch independent) when a queue reaches its threshold, or
// earlier when few blocks are running. It ends when no block is running and
// every queue is empty.
template <class Setup, class State>
__global__ void __launch_bounds__(32) dp_controller_kernel(const DeviceState<Setup, State>* ds) {
    constexpr unsigned queue_count = Setup::queue_count;
    constexpr unsigned per_lane = (queue_count + 31) / 32;
    constexpr auto procedures = std::make_index_sequence<Setup::procedure_count>{};
    const unsigned lane = threadIdx.x;
    RunCounters* counters = ds->counters;
    unsigned launched_blocks[per_lane] = {};  // self-claiming blocks launched, per queue of this lane
    unsigned long long rounds = 0;
    unsigned backoff = 32;
    while (true) {
        ++rounds;
        // Voted: the lanes must leave together (the loop has warp-wide votes).
        if (__any_sync(0xffffffffu, run_stopping(counters))) break;
        const int running = device_atomic<int>(counters->running_blocks).load(cuda::memory_order_relaxed);
        bool launched = false;
#pragma unroll
        for (unsigned k = 0; k < per_lane; ++k) {
            const unsigned q = lane + 32u * k;
            if (q >= queue_count) break;
            const QueueView& view = ds->queues[q];
            // started first (acquire), then available: a block counted as
            // started has already taken its items out of `available`.
            const unsigned started =
                device_atomic<unsigned>(view.run->started_blocks).load(cuda::memory_order_acquire);
            const int available = view.available_relaxed();
            if (available <= 0) continue;
            const unsigned lingering =
                device_atomic<unsigned>(view.run->lingering).load(cuda::memory_order_relaxed);
            // Items that self-claiming blocks, launched and not started or
            // lingering, will take.
            const long long waiting =
                static_cast<long long>(launched_blocks[k] - started + lingering) * view.items_per_block;
            const long long uncovered = available - waiting;
            if (uncovered <= 0) continue;
            if (uncovered < view.threshold && running >= static_cast<int>(ds->min_running_blocks)) continue;
            // Stay inside the device runtime's pending-launch buffer.
            const unsigned long long issued = atomicAdd(&counters->kernel_launches, 1ull);
            const unsigned long long begun =
                device_atomic<unsigned long long>(counters->kernels_started).load(cuda::memory_order_relaxed);
            if (issued - begun >= ds->pending_launch_limit) {
                atomicAdd(&counters->kernel_launches, ~0ull);  // -1
                continue;
            }
            cudaError_t e = cudaSuccess;
            unsigned blocks = 1;
            if (uncovered <= view.items_per_block) {
                // A batch or less (a dependent chain's next level): one block
                // that claims for itself, drains the queue and lingers for
                // the next level, which then needs no launch.
                atomicAdd(&counters->running_blocks, 1);
                launched_blocks[k] += 1;
                e = launch_worker(ds, view.procedure, q, 1u, ds->block_size, view.shared_bytes, cudaStreamFireAndForget,
                                  worker_count_blocks, ds->drain ? 0u : 1u, 0ull, 0u, procedures);
            } else {
                // More: the controller claims them (an exact claim, so nothing
                // is run twice) and launches a block per batch. Blocks that
                // looped over claims (a grid capped at a few per SM) ran a leaf
                // level 5-10x slower: a chain of claims per block instead of
                // the hardware's block scheduler (perf-log R4).
                unsigned long long first = 0;
                const unsigned got = view.claim(static_cast<unsigned>(uncovered), first, true);
                if (got == 0u) {
                    atomicAdd(&counters->kernel_launches, ~0ull);
                    continue;
                }
                blocks = (got + view.items_per_block - 1) / view.items_per_block;
                atomicAdd(&counters->running_blocks, static_cast<int>(blocks));
                e = launch_worker(ds, view.procedure, q, blocks, ds->block_size, view.shared_bytes,
                                  cudaStreamFireAndForget, worker_count_blocks | worker_preclaimed, 1u, first, got,
                                  procedures);
            }
            atomicAdd(&counters->blocks_launched, static_cast<unsigned long long>(blocks));
            if (launch_failed(ds, e)) {
                atomicSub(&counters->running_blocks, static_cast<int>(blocks));
                break;
            }
            launched = true;
        }
        if (__any_sync(0xffffffffu, launched)) {
            backoff = 32;
            continue;
        }
        // Termination: read the block counter first (acquire: pairs with each
        // finished block's release), then the queues. With no block running
        // nobody can enqueue any more, so empty queues stay empty.
        const int still_running = device_atomic<int>(counters->running_blocks).load(cuda::memory_order_acquire);
        bool empty = true;
#pragma unroll
        for (unsigned k = 0; k < per_lane; ++k) {
            const unsigned q = lane + 32u * k;
            if (q < queue_count && ds->queues[q].fill_relaxed() != 0u) empty = false;
        }
        if (__all_sync(0xffffffffu, still_running == 0 && empty)) break;
        __nanosleep(backoff);
        backoff = backoff < 256 ? backoff * 2 : 256;
    }
    // After an error or an abort, workers may still be running: they leave at
    // their next check of the flags. Wait for them, or finish_run would zero
    // the flags they watch (and a self-feeding workload would never stop).
    while (__any_sync(0xffffffffu,
                      device_atomic<int>(counters->running_blocks).load(cuda::memory_order_acquire) != 0))
        __nanosleep(256);
    if (lane == 0) counters->rounds = rounds;
    // Every worker block has decremented running_blocks after its last
    // write, and the controller is the last to touch the run's counters.
    finish_run(ds, lane);
}

// 2. Documented-safe device controller: a round launches workers for every
// non-empty queue into fire-and-forget streams and then relaunches itself into
// the tail-launch stream. A tail launch starts only after this grid and all the
// work it launched have completed, and it sees their writes, so every round
// reads settled fill levels: no spinning on work that may not be scheduled.
template <class Setup, class State>
__global__ void __launch_bounds__(32) tail_controller_kernel(const DeviceState<Setup, State>* ds) {
    constexpr unsigned queue_count = Setup::queue_count;
    constexpr auto procedures = std::make_index_sequence<Setup::procedure_count>{};
    const unsigned lane = threadIdx.x;
    RunCounters* counters = ds->counters;
    bool launched = false;
    // The last round's grids have completed: settle their pre-claimed items
    // first, so that `available` counts only what is left.
    unsigned long long retired = 0;
    for (unsigned q = lane; q < queue_count; q += 32) {
        const QueueView& view = ds->queues[q];
        const unsigned pre = view.run->preclaimed;
        if (pre == 0u) continue;
        retired += settle_queue(ds, view, pre);
        view.run->preclaimed = 0u;
    }
    retire_pending(ds, retired);
    if (!run_stopping(counters)) {
        for (unsigned q = lane; q < queue_count; q += 32) {
            const QueueView& view = ds->queues[q];
            const int available = view.available_relaxed();
            if (available <= 0) continue;
            // Every grid that wrote into this queue has completed (tail-launch
            // order), so [head, head + available) is published; this round's
            // grid takes it pre-claimed, a block per batch.
            const auto count = static_cast<unsigned>(available);
            const unsigned blocks = (count + view.items_per_block - 1) / view.items_per_block;
            const unsigned long long first = device_atomic<unsigned long long>(view.counters->head).load(cuda::memory_order_relaxed);
            atomicAdd(&counters->kernel_launches, 1ull);
            atomicAdd(&counters->blocks_launched, static_cast<unsigned long long>(blocks));
            const cudaError_t e = launch_worker(ds, view.procedure, q, blocks, ds->block_size, view.shared_bytes,
                                                cudaStreamFireAndForget, worker_preclaimed | worker_settled_later, 1u, first, count,
                                                procedures);
            if (launch_failed(ds, e)) break;
            view.run->preclaimed = count;
            launched = true;
        }
    }
    const bool any = __any_sync(0xffffffffu, launched);
    int finished = 0;
    if (lane == 0) {
        counters->rounds += 1;
        bool relaunched = false;
        if (any) {
            tail_controller_kernel<Setup, State><<<1, 32, 0, cudaStreamTailLaunch>>>(ds);
            relaunched = !launch_failed(ds, cudaGetLastError());
        }
        finished = relaunched ? 0 : 1;
    }
    // The last round: all earlier grids have completed (tail-launch order).
    if (__shfl_sync(0xffffffffu, finished, 0) != 0) finish_run(ds, lane);
}

// 3. Persistent blocks (Whippletree's megakernel): as many blocks as fit, each
// looping claim -> run. Queues are polled from the last to the first, so work
// declared later (typically the leaves) drains first and queues stay short.
// Termination: a block leaves only when `pending` (items enqueued and not yet
// completed) is zero. An item's children are counted before the item itself is
// retired, so pending cannot touch zero while work remains (no early end), and
// when it is non-zero some item is queued or running (no hang).
// The megakernel runs every procedure, so it honours the most permissive of
// their occupancy policies (min_blocks_per_sm): SpMV's 167 registers had left
// it one block per multiprocessor.
template <class Setup>
inline constexpr std::uint32_t megakernel_min_blocks = []<std::size_t... I>(std::index_sequence<I...>) {
    std::uint32_t m = ~0u;
    ((m = min_blocks_of<typename Setup::template procedure_at<I>>() < m
              ? min_blocks_of<typename Setup::template procedure_at<I>>()
              : m),
     ...);
    return m;
}(std::make_index_sequence<Setup::procedure_count>{});

template <class Setup, class State>
__global__ void __launch_bounds__(Setup::block_size, (megakernel_min_blocks<Setup>))
    persistent_kernel(const DeviceState<Setup, State>* ds) {
    constexpr unsigned queue_count = Setup::queue_count;
    constexpr auto procedures = std::make_index_sequence<Setup::procedure_count>{};
    extern __shared__ __align__(16) unsigned char dynamic_shared[];
    __shared__ BatchClaim claim;
    const unsigned tid = threadIdx.x;
    RunCounters* counters = ds->counters;
    // The stash sits after the procedures' shared memory (Runtime::allocate).
    LocalStash* stash =
        ds->local_stash != 0u ? reinterpret_cast<LocalStash*>(dynamic_shared + ds->stash_offset) : nullptr;
    if (tid == 0 && stash != nullptr) {
        stash->queue = no_queue;
        stash->count = 0;
    }
    __syncthreads();
    unsigned local_batches = 0;
    while (true) {
        // The block's own children first: no global atomics, and a dependent
        // chain stays on this multiprocessor. run_batch ended with a barrier,
        // so every thread reads the same count.
        if (stash != nullptr && stash->count != 0u) {
            if (tid == 0) {
                claim.first = 0;
                claim.count = stash->count;
                claim.queue = stash->queue;
                claim.local = 1;
                // An endless local chain must still see the watchdog's abort.
                if ((++local_batches & 15u) == 0u && run_stopping(counters)) claim.queue = queue_count;
            }
        } else if (tid < 32) {
            // Warp 0 looks for work. Its lanes read every queue's `available`
            // and the stop flags at once (one round trip to L2 however many
            // queues), then lane 0 claims from the last non-empty queue: on a
            // dependent chain this scan is on the critical path of every level.
            const unsigned lane = tid;
            unsigned backoff = 16;
            unsigned idle_scans = 0;
            unsigned found_queue = queue_count;  // "stop"
            unsigned found_count = 0;
            unsigned long long found_first = 0;
            while (true) {
                // Every lane reads the same words (one request); the votes make
                // the decisions warp-uniform, so no lane leaves the loop alone.
                const bool stop = __any_sync(0xffffffffu, run_stopping(counters) ||
                                                              device_atomic<const unsigned>(counters->done).load(
                                                                  cuda::memory_order_relaxed) != 0u);
                unsigned masks[(queue_count + 31) / 32];
#pragma unroll
                for (unsigned k = 0; k < (queue_count + 31) / 32; ++k) {
                    const unsigned q = 32u * k + lane;
                    masks[k] = __ballot_sync(0xffffffffu, q < queue_count && ds->queues[q].available_relaxed() > 0);
                }
                if (stop) break;
                for (int k = static_cast<int>((queue_count + 31) / 32) - 1; k >= 0 && found_count == 0; --k) {
                    unsigned mask = masks[k];
                    while (mask != 0u && found_count == 0) {
                        const unsigned bit = 31u - static_cast<unsigned>(__clz(mask));
                        mask &= ~(1u << bit);
                        const unsigned q = 32u * static_cast<unsigned>(k) + bit;
                        if (lane == 0) {
                            const QueueView& view = ds->queues[q];
                            found_count = view.claim(view.items_per_block, found_first, true);
                        }
                        found_count = __shfl_sync(0xffffffffu, found_count, 0);
                        if (found_count != 0) found_queue = q;
                    }
                }
                if (found_count != 0) break;
                if ((++idle_scans & 3u) == 1u) {
                    int done = 0;
                    if (lane == 0)
                        done = device_atomic<unsigned long long>(counters->pending).load(cuda::memory_order_acquire) ==
                               0ull;
                    if (__shfl_sync(0xffffffffu, done, 0) != 0) break;
                }
                // Idle blocks back off far: with hundreds of them polling, one
                // still looks within nanoseconds, and fewer loads on the hot
                // counter lines keep the enqueue/claim atomics fast.
                __nanosleep(backoff);
                backoff = backoff < 4096 ? backoff * 2 : 4096;
            }
            if (lane == 0) {
                claim.first = found_first;
                claim.count = found_count;
                claim.queue = found_count != 0 ? found_queue : queue_count;
                claim.local = 0;
            }
        }
        __syncthreads();
        if (claim.queue == queue_count) break;
        // One call site: inlined, so that the procedures' code is allocated
        // under this kernel's register bound (a called function gets its own
        // allocation, which ptxas then refuses when it exceeds the bound).
        dispatch_batch(ds, claim, dynamic_shared, tid, procedures, stash);
        // run_batch ends with a barrier, so thread 0 may overwrite `claim` now.
    }
    if (tid < 32) {
        int last = 0;
        if (tid == 0) {
            __threadfence();
            last = atomicAdd(&counters->exited_blocks, 1u) == gridDim.x - 1;
            __threadfence();  // the other blocks' writes before the lanes read them
        }
        if (__shfl_sync(0xffffffffu, last, 0) != 0) finish_run(ds, tid);
    }
}

// Settles the pre-claimed launches of one host-loop round, after their grids:
// their items leave `available` and `head` (nobody else claims from those
// queues meanwhile), give their room back, and are retired from `pending`
// and counted as done. One thread: a handful of atomics per round instead of
// several per batch.
template <class Setup, class State>
__global__ void settle_kernel(const DeviceState<Setup, State>* ds, Settlements<Setup::queue_count> list) {
    if (threadIdx.x != 0) return;
    unsigned long long retired = 0;
    for (unsigned i = 0; i < list.n; ++i) retired += settle_queue(ds, ds->queues[list.queue[i]], list.count[i]);
    retire_pending(ds, retired);
}

// Ends a host-loop run (the device controllers end their runs themselves).
template <class Setup, class State>
__global__ void finish_kernel(const DeviceState<Setup, State>* ds) {
    if (threadIdx.x < 32) finish_run(ds, threadIdx.x);
}

// Seeds: the host's items, copied to device memory, are enqueued through the
// same path as device-side enqueues (so every counter stays consistent).
struct SeedRange {
    unsigned queue;
    unsigned count;
    unsigned long long offset;  // bytes into the payload area
};

template <class Setup, class State, std::size_t I>
__device__ void seed_items(const DeviceState<Setup, State>* ds, const SeedRange& range, const unsigned char* bytes) {
    using P = typename Setup::template procedure_at<I>;
    using Payload = typename P::payload_type;
    const Payload* items = reinterpret_cast<const Payload*>(bytes + range.offset);
    const QueueView& q = ds->queues[range.queue];
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < range.count; i += gridDim.x * blockDim.x) {
        union Slot {
            Payload value;
            unsigned char none;
            __device__ Slot() : none(0) {}
        } item;
        memcpy(&item.value, items + i, sizeof(Payload));
        if (!q.try_enqueue(item.value, &ds->counters->pending)) {
            atomicOr(&q.run->overflow, 1u);
            atomicOr(&ds->counters->error, static_cast<unsigned>(error_overflow));
        }
    }
}

template <class Setup, class State>
__global__ void seed_kernel(const DeviceState<Setup, State>* ds, const SeedRange* ranges, const unsigned char* bytes) {
    const SeedRange range = ranges[blockIdx.y];
    const unsigned procedure = ds->queues[range.queue].procedure;
    [&]<std::size_t... I>(std::index_sequence<I...>) {
        ((procedure == I ? seed_items<Setup, State, I>(ds, range, bytes) : void()), ...);
    }(std::make_index_sequence<Setup::procedure_count>{});
}

}  // namespace hisparse::runtime::detail
