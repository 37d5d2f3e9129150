// GPU suite: queue stress, overflow, watchdog, every controller on the
// synthetic workloads (chain, tree, fan-out, empty run) and on both example
// workloads against their host implementations. Exits 77 (skipped) when no
// CUDA device is present. HISPARSE_RT_TEST_SCALE=small shrinks the sizes (for
// compute-sanitizer, which is orders of magnitude slower).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../bench/workloads.cuh"
#include "bfs.hpp"
#include "mandelbrot.hpp"

namespace rt = hisparse::runtime;
namespace wl = hisparse::runtime::workloads;
namespace ex = hisparse::runtime::examples;

namespace {

bool small_scale() {
    const char* s = std::getenv("HISPARSE_RT_TEST_SCALE");
    return s != nullptr && std::string(s) == "small";
}

struct Sizes {
    std::uint32_t stress_items, stress_capacity, chain_levels, tree_depth, wide_roots, wide_per_root;
    int mandel_size;
    std::uint32_t bfs_scale;
};
Sizes sizes() {
    if (small_scale()) return {1u << 14, 1u << 8, 200, 4, 4, 2500, 64, 9};
    // Full scale: the issue's numbers (millions of items, 10^4 levels, 10^7 fan-out).
    return {1u << 24, 1u << 16, 10000, 7, 40, 250000, 1024, 16};
}

// Device buffer of totals, cleared before each run.
class TotalsBuffer {
public:
    TotalsBuffer() : buffer_(sizeof(wl::Totals)) { clear(); }
    void clear() { rt::check(cudaMemset(buffer_.get(), 0, sizeof(wl::Totals)), "cudaMemset(totals)"); }
    wl::Totals* device() const { return buffer_.as<wl::Totals>(); }
    wl::Totals read() const {
        wl::Totals t{};
        rt::check(cudaMemcpy(&t, buffer_.get(), sizeof t, cudaMemcpyDeviceToHost), "cudaMemcpy(totals)");
        return t;
    }

private:
    rt::DeviceBuffer buffer_;
};

// ---------------------------------------------------------------- queue stress
// Every block both produces and consumes, so the test needs no co-residency:
// a block that finds the queue full consumes instead. Each id is marked when
// consumed; afterwards every mark must be exactly 1.
struct StressArgs {
    rt::QueueView queue;
    std::uint32_t total;
    std::uint32_t per_thread;
    unsigned* seen;
    unsigned long long* consumed;
    unsigned long long* sum;
};

__global__ void stress_kernel(StressArgs a) {
    __shared__ unsigned long long first;
    __shared__ unsigned count;
    __shared__ int done;
    const unsigned thread = blockIdx.x * blockDim.x + threadIdx.x;
    std::uint32_t next = 0;  // index of this thread's next item to produce
    while (true) {
        if (next < a.per_thread) {
            const std::uint32_t id = thread * a.per_thread + next;
            if (id >= a.total) next = a.per_thread;
            else if (a.queue.try_enqueue(id, nullptr)) ++next;
        }
        if (threadIdx.x == 0) {
            count = a.queue.claim(blockDim.x, first);
            done = 0;
        }
        __syncthreads();
        const unsigned n = count;
        if (threadIdx.x < n) {
            std::uint32_t id = 0;
            (void)a.queue.read(first + threadIdx.x, id);  // no stop flags: waits until published
            atomicAdd(&a.seen[id], 1u);
            atomicAdd(a.sum, static_cast<unsigned long long>(id));
        }
        __syncthreads();
        if (threadIdx.x < n) a.queue.release(first + threadIdx.x);
        if (threadIdx.x == 0) {
            if (n != 0) {
                a.queue.release_room(n);
                atomicAdd(a.consumed, static_cast<unsigned long long>(n));
            }
            done = cuda::atomic_ref<unsigned long long, cuda::thread_scope_device>(*a.consumed).load(
                       cuda::memory_order_relaxed) == a.total;
        }
        __syncthreads();
        if (done && next >= a.per_thread) break;
        if (done) next = a.per_thread;  // cannot happen with a correct queue; keeps the test from hanging
        __syncthreads();
    }
}

__global__ void count_marks(const unsigned* seen, std::uint32_t n, unsigned long long* wrong) {
    for (std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        if (seen[i] != 1u) atomicAdd(wrong, 1ull);
}

TEST(Queue, StressEachItemExactlyOnce) {
    const Sizes s = sizes();
    const std::uint32_t capacity = s.stress_capacity;
    rt::DeviceBuffer counters(sizeof(rt::QueueCounters)), run(sizeof(rt::QueueRunCounters));
    rt::DeviceBuffer storage(std::size_t{capacity} * (sizeof(unsigned) + sizeof(std::uint32_t)));
    rt::DeviceBuffer seen(std::size_t{s.stress_items} * sizeof(unsigned)), stats(3 * sizeof(unsigned long long));
    rt::check(cudaMemset(counters.get(), 0, counters.size()), "memset");
    rt::check(cudaMemset(run.get(), 0, run.size()), "memset");
    rt::check(cudaMemset(seen.get(), 0, seen.size()), "memset");
    rt::check(cudaMemset(stats.get(), 0, stats.size()), "memset");
    rt::QueueView q;
    q.counters = counters.as<rt::QueueCounters>();
    q.run = run.as<rt::QueueRunCounters>();
    q.sequence = storage.as<unsigned>();
    q.items = storage.as<unsigned char>() + std::size_t{capacity} * sizeof(unsigned);
    q.capacity = capacity;
    rt::reinit_queue_kernel<><<<64, 256>>>(q);
    rt::check(cudaGetLastError(), "reinit");

    // Enough blocks to contend hard; fewer under a sanitizer, which runs slowly.
    const unsigned blocks = small_scale() ? 16 : 264, threads = 256;
    StressArgs a{q, s.stress_items, (s.stress_items + blocks * threads - 1) / (blocks * threads), seen.as<unsigned>(),
                 stats.as<unsigned long long>(), stats.as<unsigned long long>() + 1};
    stress_kernel<<<blocks, threads>>>(a);
    rt::check(cudaGetLastError(), "stress_kernel launch");
    rt::check(cudaDeviceSynchronize(), "stress_kernel");
    count_marks<<<256, 256>>>(seen.as<unsigned>(), s.stress_items, stats.as<unsigned long long>() + 2);
    rt::check(cudaDeviceSynchronize(), "count_marks");
    unsigned long long host[3];
    rt::check(cudaMemcpy(host, stats.get(), sizeof host, cudaMemcpyDeviceToHost), "copy");
    const unsigned long long n = s.stress_items;
    EXPECT_EQ(host[0], n);
    EXPECT_EQ(host[1], n * (n - 1) / 2);
    EXPECT_EQ(host[2], 0ull) << "ids not consumed exactly once";
    rt::QueueRunCounters rc{};
    rt::check(cudaMemcpy(&rc, run.get(), sizeof rc, cudaMemcpyDeviceToHost), "copy");
    EXPECT_LE(rc.max_fill, capacity);
    EXPECT_GT(n, capacity) << "the stress must wrap around the ring many times";
}

// ------------------------------------------------------- per-controller tests
class PerController : public ::testing::TestWithParam<rt::Controller> {
protected:
    void SetUp() override {
        if (!rt::controller_compiled(GetParam()))
            GTEST_SKIP() << "built without device-side launches (device_launch=false)";
    }
    rt::RuntimeConfig config() const {
        rt::RuntimeConfig c;
        c.controller = GetParam();
        c.watchdog = std::chrono::milliseconds(small_scale() ? 300000 : 60000);
        return c;
    }
};

// The tree workload (fan-out 8): its leaves at `depth`, and queue room for
// all of them (the most either queue holds).
std::uint64_t tree_leaves(std::uint32_t depth) {
    std::uint64_t leaves = 1;
    for (std::uint32_t i = 0; i < depth; ++i) leaves *= 8;
    return leaves;
}
void room_for_tree(rt::RuntimeConfig& c, std::uint64_t leaves) {
    c.capacities = {static_cast<std::uint32_t>(leaves), static_cast<std::uint32_t>(leaves)};
}

std::string controller_name(const ::testing::TestParamInfo<rt::Controller>& info) {
    return std::string(rt::to_string(info.param));
}

TEST_P(PerController, EmptyRun) {
    TotalsBuffer totals;
    rt::Runtime<wl::ChainSetup, wl::ChainState> runtime(config(), wl::ChainState{totals.device()});
    for (int i = 0; i < 3; ++i) {
        const auto& s = runtime.run();
        EXPECT_EQ(s.total_items(), 0u);
        EXPECT_EQ(s.max_fill(), 0u);
    }
    EXPECT_EQ(totals.read().count, 0u);
}

TEST_P(PerController, ChainOfDependentLevels) {
    const std::uint32_t levels = sizes().chain_levels;
    TotalsBuffer totals;
    rt::Runtime<wl::ChainSetup, wl::ChainState> runtime(config(), wl::ChainState{totals.device()});
    runtime.seed<wl::Ping>(wl::ChainItem{levels - 1});
    const auto& s = runtime.run();
    EXPECT_EQ(totals.read().count, levels);
    EXPECT_EQ(s.total_items(), levels);
    EXPECT_EQ(runtime.items_processed<wl::Ping>(), (levels + 1) / 2);
    EXPECT_EQ(s.max_fill(), 1u);
}

TEST_P(PerController, TreeOfTinyItemsExactlyOnceAndRepeatable) {
    const std::uint32_t depth = sizes().tree_depth;
    const std::uint64_t leaves = tree_leaves(depth);
    TotalsBuffer totals;
    rt::RuntimeConfig c = config();
    room_for_tree(c, leaves);
    rt::Stream stream;  // a user stream, not the default one
    rt::Runtime<wl::TreeSetup, wl::TreeState> runtime(c, wl::TreeState{totals.device(), 8, depth}, stream.get());
    runtime.seed<wl::TreeNode>(wl::TreeItem{0, 0});
    for (int repeat = 0; repeat < 3; ++repeat) {
        totals.clear();
        const auto& s = runtime.run();
        const wl::Totals t = totals.read();
        EXPECT_EQ(t.count, leaves);
        EXPECT_EQ(t.sum, leaves * (leaves - 1) / 2);
        EXPECT_EQ(runtime.items_processed<wl::TreeLeaf>(), leaves);
        EXPECT_EQ(runtime.items_processed<wl::TreeNode>(), (leaves - 1) / 7);
        EXPECT_GT(s.kernel_launches, 0u);
    }
}

// RuntimeConfig::profile: every batch is counted once, under its procedure,
// within the run's time, and in one window of the fill timeline; the fill
// seen never exceeds what the queues held at most.
TEST_P(PerController, ProfileAccountsForEveryBatch) {
    const std::uint32_t depth = sizes().tree_depth;
    const std::uint64_t leaves = tree_leaves(depth);
    TotalsBuffer totals;
    rt::RuntimeConfig c = config();
    room_for_tree(c, leaves);
    c.profile = true;
    rt::Runtime<wl::TreeSetup, wl::TreeState> runtime(c, wl::TreeState{totals.device(), 8, depth});
    runtime.seed<wl::TreeNode>(wl::TreeItem{0, 0});
    for (int repeat = 0; repeat < 2; ++repeat) {  // the profile starts from zero at every run
        const auto& s = runtime.run();
        const rt::RunProfile& p = s.profile;
        ASSERT_EQ(p.procedures.size(), 2u);
        EXPECT_EQ(p.procedures[0].name, "tree_node");
        EXPECT_EQ(p.procedures[1].name, "tree_leaf");
        std::uint64_t batches = 0;
        for (std::size_t i = 0; i < 2; ++i) {
            const rt::ProcedureProfile& pp = p.procedures[i];
            EXPECT_EQ(pp.items, s.items_per_procedure[i]);
            // A batch holds at most a block's worth (256 one-thread items).
            EXPECT_GE(pp.batches * 256u, pp.items) << pp.name;
            EXPECT_LE(pp.batches, pp.items) << pp.name;
            EXPECT_GT(pp.busy_ms, 0.0) << pp.name;
            EXPECT_LE(pp.first_ms, pp.last_ms) << pp.name;
            EXPECT_LE(pp.last_ms, p.device_ms) << pp.name;
            batches += pp.batches;
        }
        EXPECT_LT(p.device_ms, s.milliseconds + 1.0) << "device time within the host's wall time";
        ASSERT_FALSE(p.fill.empty());
        std::uint64_t in_windows = 0;
        double previous_end = 0.0;
        for (const rt::FillWindow& w : p.fill) {
            in_windows += w.batches;
            EXPECT_LT(w.from_ms, w.to_ms);
            EXPECT_GE(w.from_ms, previous_end);
            previous_end = w.to_ms;
            ASSERT_EQ(w.max_fill.size(), 2u);
            for (std::uint32_t q = 0; q < 2; ++q) EXPECT_LE(w.max_fill[q], s.max_fill_per_queue[q]);
        }
        EXPECT_EQ(in_windows, batches);
        EXPECT_GE(p.device_ms, p.fill.back().from_ms);
        EXPECT_NE(rt::format_profile(p).find("| tree_leaf | " + std::to_string(leaves) + " |"), std::string::npos)
            << rt::format_profile(p);
    }
    // Off (the default): nothing recorded.
    rt::RuntimeConfig off = config();
    off.capacities = c.capacities;
    rt::Runtime<wl::TreeSetup, wl::TreeState> plain(off, wl::TreeState{totals.device(), 8, depth});
    plain.seed<wl::TreeNode>(wl::TreeItem{0, 0});
    EXPECT_TRUE(plain.run().profile.empty());
}

// A procedure that takes nearly all of a block's shared memory: the local
// stash does not fit beside it, so the persistent blocks go without (before,
// its fixed 2 KiB made such setups fail to construct under every controller).
struct BigSharedState {
    wl::Totals* totals;
};
struct BigShared {
    using payload_type = wl::ChainItem;
    static constexpr std::uint32_t threads_per_item = 256;
    static constexpr std::uint32_t shared_bytes = 47 * 1024;
    static constexpr const char* name = "big_shared";
    template <class Context>
    __device__ static void run(const wl::ChainItem& item, std::uint32_t lane, std::uint32_t group, const Context& ctx) {
        auto* mem = static_cast<std::uint32_t*>(ctx.shared());
        for (std::uint32_t i = lane; i < shared_bytes / 4; i += group) mem[i] = item.remaining + i;
        ctx.sync_group();
        if (lane == 0) {
            atomicAdd(&ctx.state().totals->count, 1ull);
            atomicAdd(&ctx.state().totals->sum, static_cast<unsigned long long>(mem[shared_bytes / 4 - 1]));
            if (item.remaining > 0) ctx.template enqueue<BigShared>(wl::ChainItem{item.remaining - 1});
        }
    }
};
using BigSharedSetup = rt::QueueSetup<256, rt::ProcedureQueues<BigShared>>;

TEST_P(PerController, ProcedureWithNearlyAllSharedMemory) {
    TotalsBuffer totals;
    rt::Runtime<BigSharedSetup, BigSharedState> runtime(config(), BigSharedState{totals.device()});
    runtime.seed<BigShared>(wl::ChainItem{9});
    EXPECT_EQ(runtime.run().total_items(), 10u);
    const wl::Totals t = totals.read();
    EXPECT_EQ(t.count, 10u);
    const unsigned long long last = BigShared::shared_bytes / 4 - 1;
    EXPECT_EQ(t.sum, 10 * last + 45);  // sum over remaining = 0..9 of (remaining + last)
}

// The persistent controller's blocks run the children they stash themselves
// (the default); the same workloads through the global queues only.
TEST(Persistent, WithoutLocalStash) {
    rt::RuntimeConfig c;
    c.controller = rt::Controller::persistent;
    c.local_stash = false;
    const std::uint32_t levels = sizes().chain_levels;
    TotalsBuffer totals;
    {
        rt::Runtime<wl::ChainSetup, wl::ChainState> runtime(c, wl::ChainState{totals.device()});
        runtime.seed<wl::Ping>(wl::ChainItem{levels - 1});
        EXPECT_EQ(runtime.run().total_items(), levels);
        EXPECT_EQ(totals.read().count, levels);
    }
    const std::uint32_t depth = sizes().tree_depth;
    const std::uint64_t leaves = tree_leaves(depth);
    room_for_tree(c, leaves);
    rt::Runtime<wl::TreeSetup, wl::TreeState> runtime(c, wl::TreeState{totals.device(), 8, depth});
    runtime.seed<wl::TreeNode>(wl::TreeItem{0, 0});
    totals.clear();
    runtime.run();
    const wl::Totals t = totals.read();
    EXPECT_EQ(t.count, leaves);
    EXPECT_EQ(t.sum, leaves * (leaves - 1) / 2);
    EXPECT_EQ(runtime.items_processed<wl::TreeNode>(), (leaves - 1) / 7);
}

TEST_P(PerController, WideFanOut) {
    const Sizes sz = sizes();
    const std::uint64_t leaves = std::uint64_t{sz.wide_roots} * sz.wide_per_root;
    TotalsBuffer totals;
    rt::RuntimeConfig c = config();
    c.capacities = {sz.wide_roots, static_cast<std::uint32_t>(leaves)};
    rt::Runtime<wl::WideSetup, wl::WideState> runtime(c, wl::WideState{totals.device(), sz.wide_per_root});
    std::vector<wl::WideRoot> roots(sz.wide_roots);
    for (std::uint32_t i = 0; i < sz.wide_roots; ++i) roots[i].root = i;
    runtime.seed<wl::WideSpawner>(std::span<const wl::WideRoot>(roots));
    runtime.run();
    const wl::Totals t = totals.read();
    EXPECT_EQ(t.count, leaves);
    EXPECT_EQ(t.sum, leaves * (leaves - 1) / 2);
    EXPECT_EQ(runtime.stats().total_items(), leaves + sz.wide_roots);
}

// Context::enqueue_expand: lanes of one warp expand into very different
// counts (0 to ~4000), written by the whole warp; every leaf exactly once.
TEST_P(PerController, WarpCollectiveExpansion) {
    constexpr std::uint32_t roots = 300;
    std::uint64_t count = 0, sum = 0;
    for (std::uint32_t r = 0; r < roots; ++r)
        for (std::uint32_t l = 0; l < 32; ++l)
            for (std::uint32_t k = 0; k < wl::expand_count(r, l); ++k) {
                ++count;
                sum += std::uint64_t{r * 32 + l} * 4096u + k;
            }
    TotalsBuffer totals;
    rt::RuntimeConfig c = config();
    c.capacities = {roots, static_cast<std::uint32_t>(count)};
    rt::Runtime<wl::ExpandSetup, wl::ExpandState> runtime(c, wl::ExpandState{totals.device()});
    std::vector<wl::ExpandRoot> seeds(roots);
    for (std::uint32_t i = 0; i < roots; ++i) seeds[i].root = i;
    runtime.seed<wl::ExpandSpawner>(std::span<const wl::ExpandRoot>(seeds));
    for (int repeat = 0; repeat < 2; ++repeat) {
        totals.clear();
        const auto& s = runtime.run();
        const wl::Totals t = totals.read();
        EXPECT_EQ(t.count, count);
        EXPECT_EQ(t.sum, sum);
        EXPECT_EQ(runtime.items_processed<wl::ExpandLeaf>(), count);
        EXPECT_EQ(s.total_items(), count + roots);
    }
}

// An expansion larger than the queue is an overflow error, and the runtime
// stays usable.
TEST_P(PerController, ExpansionOverflowIsReported) {
    TotalsBuffer totals;
    rt::RuntimeConfig c = config();
    c.capacities = {64, 1024};
    rt::Runtime<wl::ExpandSetup, wl::ExpandState> runtime(c, wl::ExpandState{totals.device()});
    runtime.seed<wl::ExpandSpawner>(wl::ExpandRoot{0});  // lanes 0, 11 and 22 expand into 1000+ leaves each
    EXPECT_THROW(runtime.run(), rt::QueueOverflow);
    totals.clear();
    runtime.clear_seeds();
    runtime.seed<wl::ExpandLeaf>(wl::ExpandLeafItem{3, 7});
    runtime.run();
    const wl::Totals t = totals.read();
    EXPECT_EQ(t.count, 1u);
    EXPECT_EQ(t.sum, 3u * 4096u + 7u);
}

TEST_P(PerController, OverflowIsReportedAndRecovered) {
    TotalsBuffer totals;
    rt::RuntimeConfig c = config();
    c.capacities = {64, 64};
    rt::Runtime<wl::TreeSetup, wl::TreeState> runtime(c, wl::TreeState{totals.device(), 8, 5});
    runtime.seed<wl::TreeNode>(wl::TreeItem{0, 0});
    try {
        runtime.run();
        ADD_FAILURE() << "8^5 leaves through 64-slot queues did not overflow";
    } catch (const rt::QueueOverflow& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("tree_"), std::string::npos) << what;
        EXPECT_NE(what.find("capacity 64"), std::string::npos) << what;
        EXPECT_EQ(e.capacity(), 64u);
    }
    // The queues are re-initialised: a small run afterwards is exact.
    totals.clear();
    runtime.clear_seeds();
    runtime.seed<wl::TreeLeaf>(wl::TreeItem{5, 41});
    runtime.run();
    const wl::Totals t = totals.read();
    EXPECT_EQ(t.count, 1u);
    EXPECT_EQ(t.sum, 41u);
}

TEST_P(PerController, WatchdogStopsEndlessWork) {
    rt::RuntimeConfig c = config();
    c.watchdog = std::chrono::milliseconds(300);
    rt::Runtime<wl::ForeverSetup> runtime(c);
    runtime.seed<wl::Forever>(wl::ChainItem{0});
    EXPECT_THROW(runtime.run(), rt::WatchdogTimeout);
    runtime.clear_seeds();
    EXPECT_EQ(runtime.run().total_items(), 0u);  // usable again
}

TEST_P(PerController, MandelbrotMatchesHost) {
    ex::MandelbrotParams p;
    p.size = sizes().mandel_size;
    p.initial_tile = std::min(256, p.size);
    if (small_scale()) {
        p.min_tile = 8;
        p.max_dwell = 64;  // racecheck runs every instruction slowly
    }
    const ex::MandelbrotImage gpu = ex::mandelbrot_gpu(p, config());
    const ex::MandelbrotImage host = ex::mandelbrot_host(p);
    ASSERT_EQ(gpu.dwell.size(), host.dwell.size());
    std::size_t differ = 0;
    for (std::size_t i = 0; i < host.dwell.size(); ++i) differ += gpu.dwell[i] != host.dwell[i];
    EXPECT_EQ(differ, 0u);
    EXPECT_GT(gpu.stats.total_items(), std::uint64_t(p.size / p.initial_tile) * (p.size / p.initial_tile))
        << "no tile was subdivided";
}

TEST_P(PerController, BfsMatchesHost) {
    const ex::Graph g = ex::rmat_graph(sizes().bfs_scale, 16, 7);
    const std::uint32_t source = ex::max_degree_vertex(g);
    const ex::BfsResult gpu = ex::bfs_gpu(g, source, config());
    const ex::BfsResult host = ex::bfs_host(g, source);
    std::size_t reached = 0, differ = 0;
    for (std::size_t v = 0; v < host.distance.size(); ++v) {
        reached += host.distance[v] != 0xffffffffu;
        differ += gpu.distance[v] != host.distance[v];
    }
    EXPECT_EQ(differ, 0u);
    EXPECT_GT(reached, g.vertices / 4) << "the graph should reach a good part of itself";
    EXPECT_GE(gpu.stats.total_items(), 1u);
}

INSTANTIATE_TEST_SUITE_P(Controllers, PerController, ::testing::ValuesIn(rt::all_controllers), controller_name);

// ------------------------------------------------------------- bad bin
struct BadBinItem {
    std::uint32_t v;
};
struct Binned {
    using payload_type = BadBinItem;
    static constexpr std::uint32_t threads_per_item = 1;
    static constexpr const char* name = "binned";
    template <class Context>
    __device__ static void run(const BadBinItem& item, std::uint32_t, std::uint32_t, const Context& ctx) {
        if (item.v == 0) ctx.template enqueue<Binned>(BadBinItem{1}, 2);  // bins are 0 and 1
    }
};
using BinnedSetup = rt::QueueSetup<128, rt::ProcedureQueues<Binned, 2>>;

TEST(Errors, EnqueueIntoMissingBinIsReported) {
    rt::Runtime<BinnedSetup> runtime;
    runtime.seed<Binned>(BadBinItem{0}, 1);
    EXPECT_THROW(runtime.run(), rt::DeviceFault);
    EXPECT_THROW(runtime.seed<Binned>(BadBinItem{0}, 2), rt::ConfigError);
    runtime.clear_seeds();
    runtime.seed<Binned>(BadBinItem{1}, 0);
    EXPECT_EQ(runtime.run().total_items(), 1u);
}

TEST(Errors, DeviceLaunchControllersNeedRelocatableCode) {
    if (rt::device_launch_compiled) GTEST_SKIP() << "this build has device-side launches";
    for (rt::Controller c : {rt::Controller::dynamic_parallelism, rt::Controller::tail_launch}) {
        rt::RuntimeConfig config;
        config.controller = c;
        EXPECT_THROW(rt::Runtime<BinnedSetup>{config}, rt::ConfigError) << rt::to_string(c);
    }
}

}  // namespace

int main(int argc, char** argv) {
    if (rt::device_count() == 0) {
        std::printf("no CUDA device: GPU suite skipped\n");
        return 77;
    }
    ::testing::InitGoogleTest(&argc, argv);
    const int status = RUN_ALL_TESTS();
    // Cached blocks back to CUDA: compute-sanitizer's leak check then sees
    // only real leaks.
    rt::release_cached_memory();
    return status;
}
