#pragma once
// Public entry point of the work-queue runtime.
//
//   using Setup = QueueSetup<256, ProcedureQueues<Split, 2>, ProcedureQueues<Leaf>>;
//   Runtime<Setup, MyState> rt(config, state, stream);
//   rt.seed<Split>(std::span{roots}, /*bin=*/0);
//   const RunStats& s = rt.run();   // repeatable: queues stay allocated, seeds stay
//
// Layers (CUB style): runtime.cuh (host entry) -> kernels.cuh (controllers,
// dispatch) -> agent.cuh (block-level batch) -> queue.cuh (device queue);
// context.cuh is what procedures see; config.hpp holds the tuning policy.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "allocator.hpp"
#include "config.hpp"
#include "context.cuh"
#include "device.hpp"
#include "error.hpp"
#include "kernels.cuh"
#include "log.hpp"
#include "queue_setup.hpp"

namespace hisparse::runtime {

// Whether this translation unit can launch from the device: the
// dynamic-parallelism and tail-launch controllers need relocatable device
// code (-rdc=true, the default build; off with -Ddevice_launch=false, which
// compute-sanitizer's racecheck and synccheck need). A program must not mix
// translation units compiled with and without -rdc that instantiate the same
// Runtime: the templates would differ (the build option is project-wide).
#if defined(__CUDACC_RDC__)
constexpr bool device_launch_compiled = true;
#else
constexpr bool device_launch_compiled = false;
#endif

constexpr bool controller_compiled(Controller c) noexcept {
    return device_launch_compiled || (c != Controller::dynamic_parallelism && c != Controller::tail_launch);
}

template <class Setup, class State = NoState>
class Runtime {
    static_assert(std::is_trivially_copyable_v<State>,
                  "the user state is copied to device memory bytewise: keep pointers and scalars in it");

public:
    using setup_type = Setup;
    using state_type = State;
    static constexpr std::uint32_t queue_count = Setup::queue_count;
    static constexpr std::size_t procedure_count = Setup::procedure_count;

    template <class P>
    static constexpr std::uint32_t queue_id(std::uint32_t bin = 0) {
        return Setup::template queue_id<P>(bin);
    }

    // Allocates every queue once; run() reuses them. `stream` may be null (the
    // legacy default stream) or any stream of the current device.
    explicit Runtime(const RuntimeConfig& config = {}, const State& state = {}, cudaStream_t stream = nullptr)
        : description_(Setup::describe()), stream_(stream) {
        if (!controller_compiled(config.controller))
            throw ConfigError("controller '" + std::string(to_string(config.controller)) +
                              "' launches from the device and needs relocatable device code: compile with "
                              "-rdc=true (meson option device_launch=true)");
        limits_ = query_device_limits();
        config_ = resolve(config, description_, limits_);
        allocate();
        set_state(state);
        reinit_queues();
        check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize(runtime setup)");
        if (log::enabled(log::Level::info)) {
            log::info("runtime ready: " + std::to_string(procedure_count) + " procedure(s), " +
                      std::to_string(queue_count) + " queue(s), controller " +
                      std::string(to_string(config_.controller)) + ", block " + std::to_string(config_.block_size) +
                      ", persistent grid " + std::to_string(persistent_grid_));
        }
    }

    Runtime(const Runtime&) = delete;
    Runtime& operator=(const Runtime&) = delete;
    ~Runtime() = default;

    // The state procedures reach through ctx.state(); uploaded at the next run.
    void set_state(const State& state) {
        state_ = state;
        state_dirty_ = true;
    }
    [[nodiscard]] const State& state() const noexcept { return state_; }

    // Between runs (run() returns with the stream idle); the queues' memory is
    // then returned on this stream.
    void set_stream(cudaStream_t stream) noexcept {
        stream_ = stream;
        for (auto& s : storage_) s.set_stream(stream);
    }
    [[nodiscard]] cudaStream_t stream() const noexcept { return stream_; }

    // Items every run starts with. Seeds stay until clear_seeds(), so repeated
    // runs (iterative solvers) need no new upload.
    template <class P>
    void seed(std::span<const typename P::payload_type> items, std::uint32_t bin = 0) {
        if (bin >= Setup::template bins_of<P>())
            throw ConfigError("seed: bin " + std::to_string(bin) + " does not exist for procedure " +
                              procedure_name<P>(Setup::template procedure_index<P>()));
        if (items.empty()) return;
        detail::SeedRange range{};
        range.queue = queue_id<P>(bin);
        range.count = static_cast<unsigned>(items.size());
        const std::size_t offset = (seed_bytes_.size() + 15) & ~std::size_t{15};
        range.offset = offset;
        seed_bytes_.resize(offset + items.size_bytes());
        std::memcpy(seed_bytes_.data() + offset, items.data(), items.size_bytes());
        seed_ranges_.push_back(range);
        seeds_dirty_ = true;
    }
    template <class P>
    void seed(const typename P::payload_type& item, std::uint32_t bin = 0) {
        seed<P>(std::span<const typename P::payload_type>(&item, 1), bin);
    }
    void clear_seeds() {
        seed_ranges_.clear();
        seed_bytes_.clear();
        seeds_dirty_ = true;
    }

    // Runs until every queue is empty and no item is in flight. Throws
    // QueueOverflow, WatchdogTimeout, DeviceFault or CudaError.
    const RunStats& run() {
        const auto start = std::chrono::steady_clock::now();
        const auto deadline = start + config_.watchdog;
        if (needs_reinit_) reinit_queues();
        if (state_dirty_) upload_state();
        if (seeds_dirty_) upload_seeds();
        if (config_.profile) {
            check(cudaMemsetAsync(profile_.get(), 0, sizeof(ProfileBlock), stream_), "cudaMemsetAsync(profile)");
            detail::profile_start_kernel<<<1, 1, 0, stream_>>>(profile_.as<ProfileBlock>());
            check(cudaGetLastError(), "launch of profile_start_kernel");
        }
        if (!seed_ranges_.empty()) {
            unsigned largest = 0;
            for (const auto& r : seed_ranges_) largest = std::max(largest, r.count);
            const dim3 grid(std::min(1024u, (largest + 255u) / 256u), static_cast<unsigned>(seed_ranges_.size()));
            detail::seed_kernel<Setup, State><<<grid, 256, 0, stream_>>>(
                device_state(), seed_device_.as<detail::SeedRange>(),
                seed_device_.as<unsigned char>() + seed_payload_offset());
            check(cudaGetLastError(), "launch of seed_kernel");
        }
        std::uint64_t host_rounds = 0;
        std::uint64_t host_launches = 0;
        std::uint64_t host_blocks = 0;
        switch (config_.controller) {
            case Controller::dynamic_parallelism:
                // Not instantiated without -rdc (the constructor refused it).
                if constexpr (device_launch_compiled) {
                    detail::dp_controller_kernel<Setup, State><<<1, 32, 0, stream_>>>(device_state());
                    check(cudaGetLastError(), "launch of dp_controller_kernel");
                }
                break;
            case Controller::tail_launch:
                if constexpr (device_launch_compiled) {
                    detail::tail_controller_kernel<Setup, State><<<1, 32, 0, stream_>>>(device_state());
                    check(cudaGetLastError(), "launch of tail_controller_kernel");
                }
                break;
            case Controller::persistent:
                detail::persistent_kernel<Setup, State>
                    <<<run_grid(), config_.block_size, persistent_shared_, stream_>>>(device_state());
                check(cudaGetLastError(), "launch of persistent_kernel");
                break;
            case Controller::host_loop:
                host_loop(deadline, host_rounds, host_launches, host_blocks);
                detail::finish_kernel<Setup, State><<<1, 32, 0, stream_>>>(device_state());
                check(cudaGetLastError(), "launch of finish_kernel");
                break;
        }
        // No copy-back: the run's last device thread wrote its counters to
        // host_run_block_ (mapped memory) and zeroed them for the next run.
        check(cudaEventRecord(done_.get(), stream_), "cudaEventRecord(run end)");
        if (!wait_for(done_.get(), deadline)) abort_run("run");
        const RunBlock& rb = *host_run_block_.as<RunBlock>();
        check_errors(rb);

        stats_.controller = config_.controller;
        stats_.items_per_procedure.assign(rb.items_done, rb.items_done + procedure_count);
        stats_.max_fill_per_queue.resize(queue_count);
        for (std::uint32_t q = 0; q < queue_count; ++q) stats_.max_fill_per_queue[q] = rb.queues[q].max_fill;
        switch (config_.controller) {
            case Controller::persistent:
                stats_.kernel_launches = 1;
                stats_.blocks_launched = run_grid();
                stats_.controller_rounds = 0;
                break;
            case Controller::host_loop:
                stats_.kernel_launches = host_launches;
                stats_.blocks_launched = host_blocks;
                stats_.controller_rounds = host_rounds;
                break;
            default:
                stats_.kernel_launches = rb.counters.kernel_launches;
                stats_.blocks_launched = rb.counters.blocks_launched;
                stats_.controller_rounds = rb.counters.rounds;
                break;
        }
        stats_.milliseconds =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
        if (config_.profile) read_profile();
        if (log::enabled(log::Level::debug)) {
            log::debug("run: " + std::to_string(stats_.total_items()) + " items, " +
                       std::to_string(stats_.kernel_launches) + " launches, max fill " +
                       std::to_string(stats_.max_fill()) + ", " + std::to_string(stats_.milliseconds) + " ms");
            if (config_.profile) log::debug("profile of the run:\n" + format_profile(stats_.profile));
        }
        return stats_;
    }

    [[nodiscard]] const RunStats& stats() const noexcept { return stats_; }
    [[nodiscard]] const ResolvedConfig& config() const noexcept { return config_; }
    [[nodiscard]] const SetupDescription& description() const noexcept { return description_; }
    [[nodiscard]] std::uint32_t persistent_grid() const noexcept { return persistent_grid_; }
    [[nodiscard]] const DeviceLimits& limits() const noexcept { return limits_; }
    // The persistent controller's blocks in the next runs: at most `blocks`
    // (0: all of persistent_grid()). A small run on a full grid pays for
    // every block's start and exit (the last one finishes the run after the
    // others counted out): a caller that knows its work is small asks for
    // fewer. At least one block runs.
    void limit_persistent_grid(std::uint32_t blocks) noexcept { grid_limit_ = blocks; }
    template <class P>
    [[nodiscard]] std::uint64_t items_processed() const {
        return stats_.items_per_procedure.at(Setup::template procedure_index<P>());
    }

private:
    using DeviceStateT = DeviceState<Setup, State>;
    using RunBlock = typename DeviceStateT::RunBlockT;
    using ProfileBlock = typename DeviceStateT::ProfileBlockT;

    [[nodiscard]] const DeviceStateT* device_state() const { return device_state_.as<const DeviceStateT>(); }

    void allocate() {
        queue_counters_ = DeviceBuffer(sizeof(QueueCounters) * queue_count);
        run_block_ = DeviceBuffer(sizeof(RunBlock));
        // Page-locked memory is mapped into the device's address space (unified
        // addressing), so device code writes the run's results straight into it.
        host_run_block_ = PinnedBuffer(sizeof(RunBlock));
        host_flags_ = PinnedBuffer(2 * sizeof(unsigned));
        check(cudaMemset(run_block_.get(), 0, sizeof(RunBlock)), "cudaMemset(run counters)");
        host_counters_ = PinnedBuffer(sizeof(QueueCounters) * queue_count);
        device_state_ = DeviceBuffer(sizeof(DeviceStateT));
        host_state_ = PinnedBuffer(sizeof(DeviceStateT));
        abort_flag_ = PinnedBuffer(sizeof(unsigned));
        if (config_.profile) {
            profile_ = DeviceBuffer(sizeof(ProfileBlock));
            host_profile_ = PinnedBuffer(sizeof(ProfileBlock));
            int device = 0, khz = 0;
            check(cudaGetDevice(&device), "cudaGetDevice");
            check(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, device), "cudaDeviceGetAttribute(clock rate)");
            cycles_per_ms_ = khz > 0 ? static_cast<double>(khz) : 1.0;
        }
        *abort_flag_.as<unsigned>() = 1u;
        check(cudaMemset(queue_counters_.get(), 0, queue_counters_.size()), "cudaMemset(queue counters)");
        storage_.clear();
        for (std::uint32_t q = 0; q < queue_count; ++q) {
            const auto& rq = config_.queues[q];
            const std::size_t payload = description_.procedures[rq.procedure].payload_bytes;
            storage_.emplace_back(std::size_t{rq.capacity} * (sizeof(unsigned) + payload),
                                  config_.allocator ? config_.allocator : cached_device_allocator(), stream_);
        }
        // The megakernel's dynamic shared memory: the hungriest procedure's,
        // then the local stash where it fits (it is an optimisation: without
        // room for it, blocks use the global queues only).
        persistent_shared_ = config_.max_shared_bytes;
        stash_offset_ = 0;
        use_stash_ = false;
        if (config_.local_stash) {
            const std::uint32_t offset = (config_.max_shared_bytes + 15u) & ~15u;
            const auto with_stash = static_cast<std::uint32_t>(offset + sizeof(detail::LocalStash));
            if (with_stash <= limits_.max_shared_per_block) {
                stash_offset_ = offset;
                persistent_shared_ = with_stash;
                use_stash_ = true;
            } else {
                log::info("local stash off: the procedures' shared memory leaves no room for it");
            }
        }
        // Resident blocks of the megakernel, from the occupancy calculator
        // (only the persistent controller launches it).
        persistent_grid_ = 0;
        if (config_.controller != Controller::persistent) return;
        int per_sm = 0;
        check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, detail::persistent_kernel<Setup, State>,
                                                            static_cast<int>(config_.block_size),
                                                            persistent_shared_),
              "cudaOccupancyMaxActiveBlocksPerMultiprocessor(persistent_kernel)");
        if (per_sm < 1) throw ConfigError("the persistent kernel does not fit one multiprocessor with this block size");
        if (config_.persistent_blocks_per_sm != 0)
            per_sm = std::min(per_sm, static_cast<int>(config_.persistent_blocks_per_sm));
        persistent_grid_ = static_cast<std::uint32_t>(per_sm) * limits_.multiprocessors;
    }

    void upload_state() {
        auto* ds = host_state_.as<DeviceStateT>();
        new (ds) DeviceStateT{};
        for (std::uint32_t q = 0; q < queue_count; ++q) {
            const auto& rq = config_.queues[q];
            QueueView& v = ds->queues[q];
            v.counters = queue_counters_.as<QueueCounters>() + q;
            v.run = &run_block_.as<RunBlock>()->queues[q];
            v.sequence = storage_[q].as<unsigned>();
            v.items = storage_[q].as<unsigned char>() + std::size_t{rq.capacity} * sizeof(unsigned);
            v.capacity = rq.capacity;
            v.procedure = rq.procedure;
            v.items_per_block = rq.items_per_block;
            v.threshold = rq.threshold;
            v.shared_bytes = rq.shared_bytes;
            v.stop = &run_block_.as<RunBlock>()->counters;
        }
        ds->counters = &run_block_.as<RunBlock>()->counters;
        ds->items_done = run_block_.as<RunBlock>()->items_done;
        ds->run_block = run_block_.as<RunBlock>();
        ds->result = host_run_block_.as<RunBlock>();
        ds->profile = config_.profile ? profile_.as<ProfileBlock>() : nullptr;
        ds->state = state_;
        ds->block_size = config_.block_size;
        ds->drain = config_.drain ? 1u : 0u;
        ds->linger_ns = config_.linger_us * 1000u;
        ds->local_stash = use_stash_ ? 1u : 0u;
        ds->stash_offset = stash_offset_;
        ds->min_running_blocks = config_.min_running_blocks;
        ds->pending_launch_limit = config_.pending_launch_limit;
        check(cudaMemcpyAsync(device_state_.get(), ds, sizeof(DeviceStateT), cudaMemcpyHostToDevice, stream_),
              "cudaMemcpyAsync(device state)");
        state_dirty_ = false;
    }

    [[nodiscard]] std::size_t seed_payload_offset() const {
        return (seed_ranges_.size() * sizeof(detail::SeedRange) + 15) & ~std::size_t{15};
    }

    void upload_seeds() {
        seeds_dirty_ = false;
        if (seed_ranges_.empty()) return;
        const std::size_t bytes = seed_payload_offset() + seed_bytes_.size();
        if (seed_staging_.size() < bytes) {
            // The previous upload finished (run() waits), so the buffers can go.
            seed_staging_ = PinnedBuffer(bytes);
            seed_device_ = DeviceBuffer(bytes);
        }
        auto* base = seed_staging_.as<unsigned char>();
        std::memcpy(base, seed_ranges_.data(), seed_ranges_.size() * sizeof(detail::SeedRange));
        std::memcpy(base + seed_payload_offset(), seed_bytes_.data(), seed_bytes_.size());
        check(cudaMemcpyAsync(seed_device_.get(), base, bytes, cudaMemcpyHostToDevice, stream_),
              "cudaMemcpyAsync(seeds)");
    }

    void reinit_queues() {
        if (state_dirty_) upload_state();
        const auto* ds = host_state_.as<DeviceStateT>();
        check(cudaMemsetAsync(run_block_.get(), 0, sizeof(RunBlock), stream_), "cudaMemsetAsync(run counters)");
        for (std::uint32_t q = 0; q < queue_count; ++q) {
            const unsigned blocks = std::min(1024u, (config_.queues[q].capacity + 255u) / 256u);
            reinit_queue_kernel<><<<blocks, 256, 0, stream_>>>(ds->queues[q]);
            check(cudaGetLastError(), "launch of reinit_queue_kernel");
        }
        needs_reinit_ = false;
    }

    // 4. Host loop: read the fill levels, launch a worker grid per non-empty
    // queue, repeat. The baseline the device controllers are measured against.
    void host_loop(std::chrono::steady_clock::time_point deadline, std::uint64_t& rounds, std::uint64_t& launches,
                   std::uint64_t& blocks_total) {
        auto* snapshot = host_counters_.as<QueueCounters>();
        auto* flags = host_flags_.as<unsigned>();
        constexpr auto procedures = std::make_index_sequence<procedure_count>{};
        while (true) {
            // Rounds are short, so the deadline is checked here and not only
            // while waiting for one of them.
            if (std::chrono::steady_clock::now() > deadline) abort_run("host loop");
            check(cudaMemcpyAsync(snapshot, queue_counters_.get(), sizeof(QueueCounters) * queue_count,
                                  cudaMemcpyDeviceToHost, stream_),
                  "cudaMemcpyAsync(queue counters to host)");
            check(cudaMemcpyAsync(flags, &run_block_.as<RunBlock>()->counters.error,
                                  2 * sizeof(unsigned), cudaMemcpyDeviceToHost, stream_),
                  "cudaMemcpyAsync(error flags to host)");
            check(cudaEventRecord(done_.get(), stream_), "cudaEventRecord(host loop)");
            if (!wait_for(done_.get(), deadline)) abort_run("host loop");
            if (flags[0] != 0u || flags[1] != 0u) return;  // error or abort: reported by check_errors
            ++rounds;
            // Between rounds the stream is idle, so every reserved item is
            // published and the snapshot's [head, head + available) is the
            // whole queue. Each launch takes its queue's items pre-claimed, a
            // block per batch (no claims, no per-batch atomics); the settle
            // kernel then retires the round's items in one go.
            detail::Settlements<queue_count> settle{};
            for (std::uint32_t q = 0; q < queue_count; ++q) {
                const int available = snapshot[q].available;
                if (available <= 0) continue;
                const auto& rq = config_.queues[q];
                const unsigned blocks = (static_cast<unsigned>(available) + rq.items_per_block - 1) / rq.items_per_block;
                constexpr unsigned mode = detail::worker_preclaimed | detail::worker_settled_later;
                check(detail::launch_worker_from_host(device_state(), rq.procedure, q, blocks, config_.block_size,
                                                      rq.shared_bytes, stream_, mode, 1u, snapshot[q].head,
                                                      static_cast<unsigned>(available), procedures),
                      "launch of worker_kernel (host loop)");
                ++launches;
                blocks_total += blocks;
                settle.queue[settle.n] = q;
                settle.count[settle.n] = static_cast<unsigned>(available);
                ++settle.n;
            }
            if (settle.n == 0) return;
            detail::settle_kernel<Setup, State><<<1, 32, 0, stream_>>>(device_state(), settle);
            check(cudaGetLastError(), "launch of settle_kernel (host loop)");
        }
    }

    // After a run (the stream is idle): the device's profile into stats_.
    void read_profile() {
        check(cudaMemcpyAsync(host_profile_.get(), profile_.get(), sizeof(ProfileBlock), cudaMemcpyDeviceToHost,
                              stream_),
              "cudaMemcpyAsync(profile to host)");
        check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize(profile)");
        const ProfileBlock& pb = *host_profile_.as<ProfileBlock>();
        RunProfile& out = stats_.profile;
        out = RunProfile{};
        const auto since_start_ms = [&](unsigned long long ns) {
            return ns > pb.start_ns ? static_cast<double>(ns - pb.start_ns) * 1e-6 : 0.0;
        };
        for (std::size_t i = 0; i < procedure_count; ++i) {
            const detail::ProcedureTimes& t = pb.procedures[i];
            ProcedureProfile pp;
            pp.name = description_.procedures[i].name;
            pp.items = stats_.items_per_procedure[i];
            pp.batches = t.batches;
            pp.busy_ms = static_cast<double>(t.busy_cycles) / cycles_per_ms_;
            if (t.batches != 0) {
                pp.first_ms = since_start_ms(~t.earliest_inverted);
                pp.last_ms = since_start_ms(t.latest);
                out.device_ms = std::max(out.device_ms, pp.last_ms);
            }
            out.procedures.push_back(std::move(pp));
        }
        for (std::uint32_t q = 0; q < queue_count; ++q) out.queue_names.push_back(description_.queue_name(q));
        for (unsigned w = 0; w < detail::profile_windows; ++w) {
            if (pb.batches[w] == 0) continue;
            FillWindow fw;
            fw.from_ms = detail::profile_window_start_ns(w) * 1e-6;
            fw.to_ms = detail::profile_window_start_ns(w + 1) * 1e-6;
            fw.batches = pb.batches[w];
            fw.max_fill.assign(pb.fill[w], pb.fill[w] + queue_count);
            out.fill.push_back(std::move(fw));
        }
    }

    // Watchdog: ask every device loop to stop, wait a little for them, throw.
    [[noreturn]] void abort_run(const char* phase) {
        needs_reinit_ = true;
        check(cudaMemcpyAsync(&run_block_.as<RunBlock>()->counters.abort, abort_flag_.get(), sizeof(unsigned),
                              cudaMemcpyHostToDevice, abort_stream_.get()),
              "cudaMemcpyAsync(abort flag)");
        const std::string limit = std::to_string(config_.watchdog.count()) + " ms";
        check(cudaEventRecord(done_.get(), stream_), "cudaEventRecord(after abort)");
        const bool stopped = wait_for(done_.get(), std::chrono::steady_clock::now() + std::chrono::seconds(10));
        // The flag must have landed before the re-initialisation of the next
        // run clears it, or that run would start aborted.
        check(cudaStreamSynchronize(abort_stream_.get()), "cudaStreamSynchronize(abort stream)");
        if (!stopped) {
            const std::string state = stuck_state();
            log::error("watchdog: the device did not stop within 10 s of the abort request; " + state);
            throw WatchdogTimeout(std::string("watchdog: the ") + phase + " exceeded " + limit +
                                  " and the device did not stop after the abort request; the CUDA context is "
                                  "probably unusable; " + state);
        }
        log::warn(std::string("watchdog: the ") + phase + " exceeded " + limit + " and was stopped");
        throw WatchdogTimeout(std::string("watchdog: the ") + phase + " exceeded " + limit + " (controller " +
                              std::string(to_string(config_.controller)) +
                              "); the device work was stopped and the queues are re-initialised at the next run");
    }

    // What a run that ignores the abort is doing: its counters and every
    // queue's, copied on the abort stream (the copy engine works while the
    // run's stream is stuck). A loop that never reads the abort flag waits on
    // something these numbers show: items pending that no queue holds,
    // claimed positions (head) that writers never published (tail), room
    // (fill) never given back.
    std::string stuck_state() {
        RunBlock rb{};
        std::vector<QueueCounters> qc(queue_count);
        const cudaError_t e1 =
            cudaMemcpyAsync(&rb, run_block_.get(), sizeof(RunBlock), cudaMemcpyDeviceToHost, abort_stream_.get());
        const cudaError_t e2 = cudaMemcpyAsync(qc.data(), queue_counters_.get(), sizeof(QueueCounters) * queue_count,
                                               cudaMemcpyDeviceToHost, abort_stream_.get());
        if (e1 != cudaSuccess || e2 != cudaSuccess || cudaStreamSynchronize(abort_stream_.get()) != cudaSuccess) {
            (void)cudaGetLastError();  // not left for a later check to report under another name
            return "its counters could not be read";
        }
        const RunCounters& c = rb.counters;
        std::string s = "controller " + std::string(to_string(config_.controller)) +
                        ", pending " + std::to_string(c.pending) + ", running blocks " +
                        std::to_string(c.running_blocks) + ", launches " + std::to_string(c.kernel_launches) +
                        ", rounds " + std::to_string(c.rounds) + ", exited blocks " +
                        std::to_string(c.exited_blocks) + ", done " + std::to_string(c.done) + ", error " +
                        std::to_string(c.error);
        for (std::uint32_t q = 0; q < queue_count; ++q) {
            const QueueCounters& k = qc[q];
            const auto& r = rb.queues[q];
            s += "; queue '" + description_.queue_name(q) + "': head " + std::to_string(k.head) + ", tail " +
                 std::to_string(k.tail) + ", available " + std::to_string(k.available) + ", fill " +
                 std::to_string(k.fill) + ", started " + std::to_string(r.started_blocks) + ", lingering " +
                 std::to_string(r.lingering) + ", preclaimed " + std::to_string(r.preclaimed);
        }
        return s;
    }

    void check_errors(const RunBlock& rb) {
        const unsigned error = rb.counters.error;
        if (error != 0u) needs_reinit_ = true;
        if ((error & error_overflow) != 0u) {
            std::string names;
            std::uint32_t first = queue_count;
            for (std::uint32_t q = 0; q < queue_count; ++q) {
                if (rb.queues[q].overflow == 0u) continue;
                if (first == queue_count) first = q;
                if (!names.empty()) names.append(", ");
                names.append("'").append(description_.queue_name(q)).append("' (queue ");
                names.append(std::to_string(q)).append(", capacity ");
                names.append(std::to_string(config_.queues[q].capacity)).append(")");
            }
            if (first == queue_count) first = 0;
            const std::string message = "queue overflow: " + names +
                                        " ran full and items were dropped; raise RuntimeConfig::capacities or "
                                        "default_capacity";
            // Reported by the exception: a caller may recover from it (an SpMV
            // plan's traversal runs again with larger queues), so not an error
            // in the log.
            log::debug(message);
            throw QueueOverflow(description_.queue_name(first), config_.queues[first].capacity, message);
        }
        if ((error & error_bad_bin) != 0u)
            throw DeviceFault("a procedure enqueued into a bin its target procedure does not have");
        if ((error & error_launch) != 0u)
            throw DeviceFault("a device-side kernel launch failed (pending-launch buffer or resources exhausted)");
        if ((error & error_abort) != 0u || rb.counters.abort != 0u)
            throw WatchdogTimeout("the run was aborted");
        if (rb.counters.pending != 0ull) {
            needs_reinit_ = true;
            throw DeviceFault("internal error: " + std::to_string(rb.counters.pending) +
                              " item(s) still pending after the run ended");
        }
    }

    SetupDescription description_;
    DeviceLimits limits_{};
    ResolvedConfig config_;
    cudaStream_t stream_ = nullptr;
    Stream abort_stream_;
    Event done_;
    State state_{};
    bool state_dirty_ = true;
    bool seeds_dirty_ = false;
    bool needs_reinit_ = true;
    std::uint32_t persistent_grid_ = 0;
    std::uint32_t grid_limit_ = 0;  // limit_persistent_grid
    [[nodiscard]] std::uint32_t run_grid() const noexcept {
        return grid_limit_ == 0 ? persistent_grid_ : std::max(1u, std::min(grid_limit_, persistent_grid_));
    }
    std::uint32_t persistent_shared_ = 0;  // dynamic shared bytes of the megakernel
    std::uint32_t stash_offset_ = 0;       // where its local stash starts in them
    bool use_stash_ = false;

    DeviceBuffer queue_counters_;
    DeviceBuffer run_block_;
    DeviceBuffer device_state_;
    std::vector<AllocatedBuffer> storage_;  // the queues, from RuntimeConfig::allocator
    PinnedBuffer host_run_block_;
    PinnedBuffer host_flags_;
    PinnedBuffer host_counters_;
    PinnedBuffer host_state_;
    PinnedBuffer abort_flag_;
    DeviceBuffer profile_;       // RuntimeConfig::profile only
    PinnedBuffer host_profile_;
    double cycles_per_ms_ = 1.0;
    std::vector<detail::SeedRange> seed_ranges_;
    std::vector<unsigned char> seed_bytes_;
    PinnedBuffer seed_staging_;
    DeviceBuffer seed_device_;
    RunStats stats_;
};

}  // namespace hisparse::runtime
