#pragma once
// Run-time configuration of a runtime: which controller, block size, queue
// capacities and launch thresholds. Plain C++ (no CUDA include) so that the
// checks are unit-tested on machines without a GPU.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace hisparse::runtime {

class DeviceAllocator;  // allocator.hpp

// The controller decides when worker blocks run on which queue. It is a policy
// of the runtime: the procedures are the same for all four.
enum class Controller {
    dynamic_parallelism,  // seed 004 sec. 4.2: one spinning warp launches workers from the GPU
    tail_launch,          // rounds of workers, the controller relaunches itself as a tail launch
    persistent,           // Whippletree's megakernel: resident blocks loop dequeue -> run
    host_loop,            // the host reads fill levels and launches per queue (baseline)
};

[[nodiscard]] std::string_view to_string(Controller c) noexcept;
// Parses the names above (also "dp", "tail", "megakernel", "host"); throws ConfigError.
[[nodiscard]] Controller parse_controller(std::string_view name);
inline constexpr Controller all_controllers[] = {Controller::dynamic_parallelism, Controller::tail_launch,
                                                 Controller::persistent, Controller::host_loop};

struct RuntimeConfig {
    Controller controller = Controller::persistent;
    // Threads per worker block; 0 takes the setup's block size. Must be a multiple
    // of 32 and of every procedure's thread count, and at most the setup's.
    std::uint32_t block_size = 0;
    // Slots per queue, rounded up to a power of two. `capacities` (indexed by
    // queue id, see QueueSetup::queue_id) overrides the default per queue.
    std::uint32_t default_capacity = 1u << 16;
    std::vector<std::uint32_t> capacities;
    // Items a queue must hold before a controller launches a full-size worker
    // grid for it; 0 means "one block's worth". Below it, a queue is still
    // served when fewer than `min_running_blocks` blocks are running.
    std::uint32_t default_threshold = 0;
    std::vector<std::uint32_t> thresholds;
    std::uint32_t min_running_blocks = 0;      // 0: number of multiprocessors
    std::uint32_t pending_launch_limit = 1024; // device-side launches not yet started (CUDA default limit 2048)
    std::uint32_t persistent_blocks_per_sm = 0; // 0: as many as fit (occupancy)
    // dynamic_parallelism: a worker keeps dequeuing from its queue until it is
    // empty instead of exiting after one batch (fewer launches), and then waits
    // up to `linger_us` for new items of its queue before it exits, so that a
    // chain of dependent items does not pay a device-side launch per level
    // (13 us per level without, 4.4 with; a lingering block leaves as soon as
    // the run's work is done, so the end of a run is not delayed).
    // (tail_launch and host_loop workers take a fixed share of the items that
    // were queued when they were launched; persistent blocks always loop.)
    bool drain = true;
    std::uint32_t linger_us = 20;
    // persistent: items a block enqueues while it runs a batch go first into a
    // stash in its shared memory (up to a batch of one queue, at most 2 KiB of
    // payloads; used when it fits beside the procedures' shared memory), and
    // the block runs them next without the global
    // queue's atomics; the rest go to the global queues. Keeps dependent
    // chains and depth-first work on one multiprocessor (Whippletree's local
    // queues). Off: every item goes through the global queues.
    bool local_stash = true;
    // A run that takes longer is stopped and reported as WatchdogTimeout.
    std::chrono::milliseconds watchdog{30000};
    // Fill RunStats::profile: per procedure, the batches and the time blocks
    // spent on them; per queue, its fill over time. Costs two clock reads and
    // a few atomics per batch; off, nothing.
    bool profile = false;
    // Where the queues' memory (the runtime's only large allocation) comes
    // from, on the runtime's stream; null: cudaMalloc through the runtime's
    // block cache (device.hpp). The few control blocks of a run (under 4 KiB
    // each) always come from that cache.
    std::shared_ptr<DeviceAllocator> allocator;
};

// What the host needs to know about a compile-time setup (built by
// QueueSetup::describe()).
struct ProcedureInfo {
    std::string name;
    std::uint32_t payload_bytes = 0;
    std::uint32_t threads_per_item = 1;
    std::uint32_t shared_bytes = 0;  // per item
    std::uint32_t bins = 1;
    std::uint32_t first_queue = 0;
};

struct SetupDescription {
    std::uint32_t max_block_size = 256;
    std::vector<ProcedureInfo> procedures;
    [[nodiscard]] std::uint32_t queue_count() const;
    [[nodiscard]] std::string queue_name(std::uint32_t queue) const;  // "name[bin]"
};

struct DeviceLimits {
    std::uint32_t multiprocessors = 132;
    std::uint32_t max_shared_per_block = 48 * 1024;
    std::uint32_t device_pending_launch_limit = 2048;
};

// The configuration with every default filled in and every value checked.
struct ResolvedQueue {
    std::uint32_t procedure = 0;
    std::uint32_t bin = 0;
    std::uint32_t capacity = 0;        // power of two
    std::uint32_t threshold = 0;       // items
    std::uint32_t items_per_block = 0;
    std::uint32_t shared_bytes = 0;    // dynamic shared memory of a worker block
};

struct ResolvedConfig {
    Controller controller = Controller::persistent;
    std::uint32_t block_size = 0;
    std::uint32_t min_running_blocks = 0;
    std::uint32_t pending_launch_limit = 0;
    std::uint32_t persistent_blocks_per_sm = 0;
    std::uint32_t max_shared_bytes = 0;  // largest worker shared memory (the megakernel's)
    bool drain = true;
    std::uint32_t linger_us = 0;
    bool local_stash = true;
    std::chrono::milliseconds watchdog{0};
    bool profile = false;
    std::shared_ptr<DeviceAllocator> allocator;  // null: the runtime's block cache
    std::vector<ResolvedQueue> queues;
};

// Throws ConfigError with a message that names the offending value.
[[nodiscard]] ResolvedConfig resolve(const RuntimeConfig& config, const SetupDescription& setup,
                                     const DeviceLimits& limits);

// Where a run's time went (RuntimeConfig::profile). Times are measured on
// the device: from the run's start (before its seeds are enqueued), with the
// GPU's global timer; a batch's duration with its multiprocessor's clock.
struct ProcedureProfile {
    std::string name;
    std::uint64_t items = 0;
    std::uint64_t batches = 0;  // blocks' batches: items / batches is the average batch
    double busy_ms = 0.0;       // block-milliseconds: the batches' durations summed
    double first_ms = 0.0;      // the first batch began
    double last_ms = 0.0;       // the last batch ended
};

// The queues' fill in one window of the run. Windows grow with the time
// since the start (four per doubling from 1 us), so a run of microseconds
// and one of seconds both fit a few dozen rows; only windows in which a
// batch ended are kept.
struct FillWindow {
    double from_ms = 0.0, to_ms = 0.0;
    std::uint64_t batches = 0;             // batches that ended in the window
    std::vector<std::uint32_t> max_fill;   // per queue, the largest fill those batches saw at their end
};

struct RunProfile {
    std::vector<ProcedureProfile> procedures;  // indexed like the setup's procedures
    std::vector<std::string> queue_names;      // for FillWindow::max_fill
    std::vector<FillWindow> fill;
    double device_ms = 0.0;  // run start to the last batch's end
    [[nodiscard]] bool empty() const noexcept { return procedures.empty(); }
};

// Two Markdown tables: procedures, then fill over time.
[[nodiscard]] std::string format_profile(const RunProfile& profile);

// Statistics of the last run.
struct RunStats {
    Controller controller = Controller::persistent;
    std::vector<std::uint64_t> items_per_procedure;  // indexed like the setup's procedures
    std::vector<std::uint32_t> max_fill_per_queue;    // largest fill seen per queue
    std::uint64_t kernel_launches = 0;  // worker grids launched (persistent: 1)
    std::uint64_t blocks_launched = 0;
    std::uint64_t controller_rounds = 0;  // polls (dp), self-launches (tail), host rounds (host_loop)
    double milliseconds = 0.0;            // host wall time of run(), seeding included
    RunProfile profile;                   // empty unless RuntimeConfig::profile
    [[nodiscard]] std::uint64_t total_items() const;
    [[nodiscard]] std::uint32_t max_fill() const;
};

}  // namespace hisparse::runtime
