#pragma once
// Device queues: fixed-capacity ring buffers in device memory with a sequence
// word per slot (Whippletree's queue with a state per slot, seed 004 ref. [29];
// the slot protocol is Vyukov's bounded MPMC queue). A QueueView wraps memory it
// does not own; the Runtime allocates it.
//
// Slot protocol, for position p (a 64-bit counter) and slot s = p mod capacity:
//   seq[s] == p            the slot is free for the writer of position p
//   seq[s] == p + 1        the item of position p is published (readable)
//   seq[s] == p + capacity the reader of p released it: free for writer p + capacity
// Writers first reserve room in `fill` (reserved and not yet released slots), so
// a writer never laps a reader that has not claimed its slot: when writer p
// waits, reader p - capacity already holds the slot and is about to release it.
// Readers claim a count from `available` (published, unclaimed items) and then
// positions from `head`; the sequence word tells them when the bytes are there.
#include <cuda/atomic>
#include <cuda_runtime.h>

#include <cstdint>

namespace hisparse::runtime {

// Counters a controller polls, each on its own 128-byte line: writers hammer
// tail/fill, readers head/available, and false sharing would serialise them.
struct QueueCounters {
    alignas(128) unsigned long long tail;  // next write position
    alignas(128) unsigned long long head;  // next read position
    alignas(128) int available;            // published and not claimed (may dip below 0 briefly)
    alignas(128) unsigned int fill;        // reserved by writers and not released by readers
};

// Per-run statistics and flags of one queue, reset before each run.
struct QueueRunCounters {
    unsigned int max_fill;
    unsigned int overflow;        // non-zero: an enqueue found the queue full
    unsigned int started_blocks;  // worker blocks that began on this queue (dp controller)
    unsigned int lingering;       // worker blocks waiting for new items of this queue (dp controller)
    unsigned int preclaimed;      // items of the tail controller's last round, settled by its next one
    unsigned int pad[3];
};

// Global per-run counters and flags, reset before each run.
struct RunCounters {
    alignas(128) unsigned long long pending;  // items enqueued and not completed
    alignas(128) int running_blocks;          // worker blocks launched and not finished (dp)
    alignas(128) unsigned int error;          // ErrorBits
    unsigned int abort;                       // set by the host watchdog
    unsigned long long kernel_launches;
    unsigned long long blocks_launched;
    unsigned long long rounds;
    unsigned long long kernels_started;  // worker grids whose block 0 began (pending-launch accounting)
    unsigned int exited_blocks;          // persistent blocks that left (the last one finishes the run)
    // Set by the batch whose retirement brought `pending` to zero: the run's
    // work is over. On the line that idle persistent blocks read at every
    // scan (error, abort), so they leave at their next scan instead of at
    // their next look at `pending`, which they make only every few scans.
    unsigned int done;
};

enum ErrorBits : unsigned int {
    error_overflow = 1u << 0,
    error_bad_bin = 1u << 1,
    error_launch = 1u << 2,
    error_abort = 1u << 3,
};

namespace detail {

template <class T>
using device_atomic = cuda::atomic_ref<T, cuda::thread_scope_device>;

__device__ inline unsigned lane_id() { return threadIdx.x & 31u; }  // hardware lane, only for warp intrinsics
__device__ inline unsigned lanemask_lt() {
    unsigned m;
    asm("mov.u32 %0, %%lanemask_lt;" : "=r"(m));
    return m;
}

// The run is stopping: an error (an overflow, a failed launch) or the host's
// abort. Both are written rarely: a relaxed load notices soon enough.
__device__ inline bool run_stopping(const RunCounters* c) {
    return device_atomic<const unsigned>(c->error).load(cuda::memory_order_relaxed) != 0u ||
           device_atomic<const unsigned>(c->abort).load(cuda::memory_order_relaxed) != 0u;
}

// Spin until the sequence word reaches `want`, backing off so that spinning
// lanes do not steal issue slots from the lane they are waiting for. Gives up
// (false) once the run is stopping (`stop` non-null): a reader that dropped
// its claimed batch because of an error never frees its slots, and a writer
// waiting for one of them would otherwise spin forever, with the controller
// waiting for the writer's block (a dp run hung so after an overflow,
// perf-log R6). The run's results are discarded and its queues re-initialised.
__device__ inline bool wait_sequence(unsigned int* seq, unsigned int want, const RunCounters* stop) {
    device_atomic<unsigned int> s(*seq);
    unsigned ns = 8, spins = 0;
    while (s.load(cuda::memory_order_acquire) != want) {
        if ((++spins & 63u) == 0u && stop != nullptr && run_stopping(stop)) return false;
        __nanosleep(ns);
        ns = ns < 256 ? ns * 2 : 256;
    }
    return true;
}

}  // namespace detail

// A queue of items of type T. Trivially copyable: it is passed to kernels.
struct QueueView {
    QueueCounters* counters = nullptr;
    QueueRunCounters* run = nullptr;
    unsigned int* sequence = nullptr;  // one word per slot
    void* items = nullptr;             // capacity * payload size bytes
    unsigned int capacity = 0;         // power of two
    unsigned int procedure = 0;
    unsigned int items_per_block = 0;
    unsigned int threshold = 0;
    unsigned int shared_bytes = 0;     // dynamic shared memory of a worker block on this queue
    const RunCounters* stop = nullptr; // the run's flags: sequence waits give up once it stops (null: never)

    // Warp-aggregated enqueue by every active lane that calls it with the same
    // queue: one lane reserves room for all of them. Returns false when the
    // queue is full (nothing is written, the caller decides how to report it).
    // `pending` (may be null) counts outstanding work for termination.
    template <class T>
    __device__ bool try_enqueue(const T& item, unsigned long long* pending) const {
        const unsigned active = __activemask();
        // Lanes of one warp may target different queues (a different QueueView
        // object each), so aggregate only lanes whose queue is the same.
        const unsigned peers = __match_any_sync(active, reinterpret_cast<unsigned long long>(counters));
        const unsigned leader = __ffs(peers) - 1;
        const unsigned count = __popc(peers);
        const unsigned rank = __popc(peers & detail::lanemask_lt());
        unsigned long long base = 0;
        int ok = 0;
        if (detail::lane_id() == leader) {
            const unsigned old = atomicAdd(&counters->fill, count);
            if (old + count > capacity) {
                atomicSub(&counters->fill, count);
            } else {
                ok = 1;
                atomicMax(&run->max_fill, old + count);
                // pending goes up before the item can be seen, so that a reader
                // that completes it can never drive pending to zero too early.
                if (pending != nullptr) atomicAdd(pending, static_cast<unsigned long long>(count));
                base = atomicAdd(&counters->tail, static_cast<unsigned long long>(count));
            }
        }
        ok = __shfl_sync(peers, ok, leader);
        if (!ok) return false;
        base = __shfl_sync(peers, base, leader);
        const unsigned long long pos = base + rank;
        const unsigned slot = static_cast<unsigned>(pos) & (capacity - 1);
        unsigned int* seq = sequence + slot;
        // A lane whose wait gave up (the run is stopping) drops its item.
        if (detail::wait_sequence(seq, static_cast<unsigned>(pos), stop)) {
            static_cast<T*>(items)[slot] = item;
            detail::device_atomic<unsigned int>(*seq).store(static_cast<unsigned>(pos) + 1u, cuda::memory_order_release);
        }
        __syncwarp(peers);
        if (detail::lane_id() == leader) atomicAdd(&counters->available, static_cast<int>(count));
        return true;
    }

    // Warp-collective enqueue of expansions: all 32 lanes of a warp call it
    // together (converged), each with its own `base` and `count` (0 where a
    // lane has nothing); lane l adds the items expand(base_l, k), k < count_l.
    // One reservation serves the whole warp, and the items are written by all
    // 32 lanes whichever lane they came from: a lane whose count is in the
    // thousands (a big node's chunks) does not keep the other 31 waiting, as
    // a loop of single enqueues would. Returns false (nothing written) when
    // the queue cannot take them all.
    template <class T, class Expand>
    __device__ bool try_enqueue_expand(const T& base, unsigned count, Expand expand, unsigned long long* pending) const {
        constexpr unsigned full = 0xffffffffu;
        const unsigned lane = detail::lane_id();
        if (__ballot_sync(full, count != 0u) == 0u) return true;
        unsigned incl = count;  // inclusive scan over the lanes
#pragma unroll
        for (unsigned off = 1; off < 32; off <<= 1) {
            const unsigned v = __shfl_up_sync(full, incl, off);
            if (lane >= off) incl += v;
        }
        const unsigned total = __shfl_sync(full, incl, 31);
        unsigned long long first = 0;
        int ok = 0;
        if (lane == 0) {
            const unsigned old = atomicAdd(&counters->fill, total);
            if (total > capacity || old + total > capacity) {
                atomicSub(&counters->fill, total);
            } else {
                ok = 1;
                atomicMax(&run->max_fill, old + total);
                if (pending != nullptr) atomicAdd(pending, static_cast<unsigned long long>(total));
                first = atomicAdd(&counters->tail, static_cast<unsigned long long>(total));
            }
        }
        if (__shfl_sync(full, ok, 0) == 0) return false;
        first = __shfl_sync(full, first, 0);
        // Three passes over the warp's items, so that a warp writing thousands
        // of them pays the memory latency a few times and not once per item:
        // wait until every target slot is free, write the payloads, then one
        // release fence and the sequence words. One item after the other (an
        // acquire load, the payload, a release store) took about 1.5 us per
        // round of 32: 200 us for an R-MAT inner part of 4000 chunks
        // (perf-log R4).
        const auto slot_of = [&](unsigned j) { return static_cast<unsigned>(first + j) & (capacity - 1); };
        constexpr unsigned overlap = 4;  // rounds whose sequence loads are in flight together
        bool waited = true;
        for (unsigned round = 0; round < total; round += 32 * overlap) {
            unsigned seen[overlap];
#pragma unroll
            for (unsigned u = 0; u < overlap; ++u) {
                const unsigned j = round + 32 * u + lane;
                seen[u] = j < total ? detail::device_atomic<unsigned int>(sequence[slot_of(j)])
                                          .load(cuda::memory_order_relaxed)
                                    : 0u;
            }
#pragma unroll
            for (unsigned u = 0; u < overlap; ++u) {
                const unsigned j = round + 32 * u + lane;
                // A ring that has not wrapped finds its slots free at once.
                if (waited && j < total && seen[u] != static_cast<unsigned>(first + j))
                    waited = detail::wait_sequence(sequence + slot_of(j), static_cast<unsigned>(first + j), stop);
            }
        }
        // A wait gave up: the run is stopping and its results are discarded;
        // the warp's items are dropped (the flag that stops it is set already).
        if (__any_sync(full, !waited)) return true;
        // The slots' previous readers are done (relaxed loads above): nothing
        // below may be written before that was seen.
        cuda::atomic_thread_fence(cuda::memory_order_acquire, cuda::thread_scope_device);
        // The payload travels between lanes as 32-bit words.
        constexpr unsigned words = (sizeof(T) + 3) / 4;
        unsigned mine[words] = {};
        memcpy(mine, &base, sizeof(T));
        const unsigned excl = incl - count;
        for (unsigned round = 0; round < total; round += 32) {
            const unsigned j = round + lane;  // this lane writes the warp's j-th item
            // Its source: the first lane whose inclusive count exceeds j.
            unsigned src = 0;
#pragma unroll
            for (unsigned step = 16; step > 0; step >>= 1) {
                const unsigned v = __shfl_sync(full, incl, src + step - 1);
                if (v <= j) src += step;
            }
            const unsigned k = j - __shfl_sync(full, excl, src);
            unsigned theirs[words];
#pragma unroll
            for (unsigned w = 0; w < words; ++w) theirs[w] = __shfl_sync(full, mine[w], src);
            if (j < total) {
                T b;
                memcpy(&b, theirs, sizeof(T));
                static_cast<T*>(items)[slot_of(j)] = expand(b, k);
            }
        }
        // Every payload this lane wrote is visible before any of its sequence
        // words (a reader acquires the word, then reads the payload).
        cuda::atomic_thread_fence(cuda::memory_order_release, cuda::thread_scope_device);
        for (unsigned j = lane; j < total; j += 32)
            detail::device_atomic<unsigned int>(sequence[slot_of(j)])
                .store(static_cast<unsigned>(first + j) + 1u, cuda::memory_order_relaxed);
        __syncwarp();
        if (lane == 0) atomicAdd(&counters->available, static_cast<int>(total));
        return true;
    }

    // Claims up to `want` published items; one thread calls it. Returns the
    // count and sets `first` to the first position. Exact: the sum of claims
    // never exceeds the published items (see the file comment).
    // `seen_available`: the caller has just read `available` > 0, so the
    // early-out load (a round trip to L2) is skipped.
    __device__ unsigned claim(unsigned want, unsigned long long& first, bool seen_available = false) const {
        detail::device_atomic<int> avail(counters->available);
        if (!seen_available && avail.load(cuda::memory_order_relaxed) <= 0) return 0;
        const int old = atomicSub(&counters->available, static_cast<int>(want));
        const int got = old <= 0 ? 0 : (old < static_cast<int>(want) ? old : static_cast<int>(want));
        if (got < static_cast<int>(want)) atomicAdd(&counters->available, static_cast<int>(want) - got);
        if (got == 0) return 0;
        first = atomicAdd(&counters->head, static_cast<unsigned long long>(got));
        return static_cast<unsigned>(got);
    }

    // Reads the item at a claimed position into `out` (any number of threads
    // may read it). False, `out` untouched, when the run stopped before the
    // item was published.
    template <class T>
    __device__ bool read(unsigned long long pos, T& out) const {
        const unsigned slot = static_cast<unsigned>(pos) & (capacity - 1);
        if (!detail::wait_sequence(sequence + slot, static_cast<unsigned>(pos) + 1u, stop)) return false;
        out = static_cast<const T*>(items)[slot];
        return true;
    }

    // Reads an item known to be published (a pre-claimed launch: every
    // writer finished before the grid started), without the sequence wait.
    template <class T>
    __device__ T read_published(unsigned long long pos) const {
        return static_cast<const T*>(items)[static_cast<unsigned>(pos) & (capacity - 1)];
    }

    // Releases the slot of a claimed position once every reader has copied it.
    __device__ void release(unsigned long long pos) const {
        const unsigned slot = static_cast<unsigned>(pos) & (capacity - 1);
        detail::device_atomic<unsigned int>(sequence[slot])
            .store(static_cast<unsigned>(pos) + capacity, cuda::memory_order_release);
    }
    // After all slots of a claim are released: make room for writers.
    __device__ void release_room(unsigned count) const { atomicSub(&counters->fill, count); }

    __device__ int available_relaxed() const {
        return detail::device_atomic<int>(counters->available).load(cuda::memory_order_relaxed);
    }
    __device__ unsigned fill_relaxed() const {
        return detail::device_atomic<unsigned>(counters->fill).load(cuda::memory_order_relaxed);
    }
};

// Re-initialises a queue (sequence words, counters): after errors, or once after allocation.
// A template so that every translation unit may instantiate it (no ODR clash
// between relocatable objects).
template <int = 0>
__global__ void reinit_queue_kernel(QueueView q) {
    const unsigned stride = gridDim.x * blockDim.x;
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < q.capacity; i += stride) q.sequence[i] = i;
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        q.counters->tail = 0;
        q.counters->head = 0;
        q.counters->available = 0;
        q.counters->fill = 0;
    }
}

}  // namespace hisparse::runtime
