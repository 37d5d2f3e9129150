// Host suite: compile-time validation of queue setups (the positive side; the
// setups that must not compile are in must_not_compile/) and the run-time
// configuration checks. Needs no GPU.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "hisparse/runtime/config.hpp"
#include "hisparse/runtime/error.hpp"
#include "hisparse/runtime/queue_setup.hpp"

namespace rt = hisparse::runtime;

namespace {

struct Small {
    std::uint32_t a, b;
};
struct Big {
    std::uint64_t words[8];
};
struct Leaf {
    using payload_type = Small;
    static constexpr std::uint32_t threads_per_item = 4;
    static constexpr const char* name = "leaf";
};
struct Inner {
    using payload_type = Big;
    static constexpr std::uint32_t threads_per_item = 32;
    static constexpr std::uint32_t shared_bytes = 512;
    static constexpr const char* name = "inner";
};
struct Whole {
    using payload_type = Small;
    static constexpr std::uint32_t threads_per_item = 256;  // no name: a default one is made
};

using Setup = rt::QueueSetup<256, rt::ProcedureQueues<Inner, 3>, rt::ProcedureQueues<Leaf>, rt::ProcedureQueues<Whole, 2>>;

// Compile-time layout of the setup.
static_assert(Setup::procedure_count == 3);
static_assert(Setup::queue_count == 6);
static_assert(Setup::procedure_index<Inner>() == 0 && Setup::procedure_index<Leaf>() == 1 &&
              Setup::procedure_index<Whole>() == 2);
static_assert(Setup::queue_id<Inner>(2) == 2 && Setup::queue_id<Leaf>() == 3 && Setup::queue_id<Whole>(1) == 5);
static_assert(Setup::bins_of<Inner>() == 3 && Setup::bins_of<Whole>() == 2);
static_assert(std::is_same_v<Setup::procedure_at<1>, Leaf>);
static_assert(sizeof(Big) == rt::max_payload_bytes, "the largest allowed payload compiles");

struct Hungry {
    using payload_type = Small;
    static constexpr std::uint32_t threads_per_item = 1;
    static constexpr std::uint32_t shared_bytes = 1024;  // x 256 items per block = 256 KiB
    static constexpr const char* name = "hungry";
};
struct Pairs {
    using payload_type = Small;
    static constexpr std::uint32_t threads_per_item = 64;
};

rt::DeviceLimits h100() { return rt::DeviceLimits{132, 48 * 1024, 2048}; }

std::string config_error(const rt::RuntimeConfig& c, const rt::SetupDescription& d = Setup::describe()) {
    try {
        (void)rt::resolve(c, d, h100());
    } catch (const rt::ConfigError& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST(Setup, DescribeListsProceduresAndQueues) {
    const auto d = Setup::describe();
    ASSERT_EQ(d.procedures.size(), 3u);
    EXPECT_EQ(d.queue_count(), 6u);
    EXPECT_EQ(d.procedures[0].name, "inner");
    EXPECT_EQ(d.procedures[0].payload_bytes, 64u);
    EXPECT_EQ(d.procedures[0].shared_bytes, 512u);
    EXPECT_EQ(d.procedures[1].first_queue, 3u);
    EXPECT_EQ(d.procedures[2].name, "procedure#2");
    EXPECT_EQ(d.queue_name(1), "inner[1]");
    EXPECT_EQ(d.queue_name(5), "procedure#2[1]");
}

TEST(Config, DefaultsResolve) {
    const auto r = rt::resolve(rt::RuntimeConfig{}, Setup::describe(), h100());
    EXPECT_EQ(r.block_size, 256u);
    ASSERT_EQ(r.queues.size(), 6u);
    EXPECT_EQ(r.queues[0].items_per_block, 8u);   // 256 / 32
    EXPECT_EQ(r.queues[3].items_per_block, 64u);  // 256 / 4 (seed 004, sec. 4.2)
    EXPECT_EQ(r.queues[4].items_per_block, 1u);
    EXPECT_EQ(r.queues[0].threshold, 8u);          // one block's worth
    EXPECT_EQ(r.queues[0].shared_bytes, 8u * 512u);
    EXPECT_EQ(r.max_shared_bytes, 4096u);
    EXPECT_EQ(r.min_running_blocks, 132u);
}

TEST(Config, CapacitiesRoundUpToPowersOfTwo) {
    rt::RuntimeConfig c;
    c.capacities = {1000, 1, 1u << 20, 3, 4096, 5000};
    const auto r = rt::resolve(c, Setup::describe(), h100());
    EXPECT_EQ(r.queues[0].capacity, 1024u);
    EXPECT_EQ(r.queues[1].capacity, 32u);  // minimum
    EXPECT_EQ(r.queues[2].capacity, 1u << 20);
    EXPECT_EQ(r.queues[5].capacity, 8192u);
    EXPECT_EQ(r.queues[3].threshold, 32u);  // one block's worth (64) capped by the capacity
}

TEST(Config, SmallerBlockChangesItemsPerBlock) {
    using Narrow = rt::QueueSetup<256, rt::ProcedureQueues<Inner, 3>, rt::ProcedureQueues<Leaf>>;
    rt::RuntimeConfig c;
    c.block_size = 128;
    c.thresholds.assign(4, 100);
    const auto r = rt::resolve(c, Narrow::describe(), h100());
    EXPECT_EQ(r.queues[3].items_per_block, 32u);
    EXPECT_EQ(r.queues[3].threshold, 100u);
    EXPECT_EQ(r.queues[0].items_per_block, 4u);
}

TEST(Config, RejectsBadValues) {
    auto expect_error = [](rt::RuntimeConfig c, const char* fragment) {
        const std::string message = config_error(c);
        EXPECT_NE(message.find(fragment), std::string::npos) << "message: '" << message << "', wanted: " << fragment;
    };
    rt::RuntimeConfig c;
    c.block_size = 100;
    expect_error(c, "multiple of 32");
    c = {};
    c.block_size = 512;
    expect_error(c, "exceeds the setup's block size");
    c = {};
    c.block_size = 96;  // not divisible by 32 threads? it is; by 256 not: Whole needs 256
    expect_error(c, "does not divide block_size");
    c = {};
    c.capacities = {1, 2, 3};
    expect_error(c, "capacities has 3 entries");
    c = {};
    c.thresholds = {1};
    expect_error(c, "thresholds has 1 entries");
    c = {};
    c.capacities = {64, 64, 0, 64, 64, 64};
    expect_error(c, "'inner[2]' has capacity 0");
    c = {};
    c.capacities.assign(6, 64);
    c.thresholds.assign(6, 65);
    expect_error(c, "threshold 65 exceeds its capacity 64");
    c = {};
    c.default_capacity = (1u << 30) + 1;
    expect_error(c, "capacity above 2^30");
    c = {};
    c.pending_launch_limit = 4096;
    expect_error(c, "pending_launch_limit");
    c = {};
    c.pending_launch_limit = 0;
    expect_error(c, "pending_launch_limit");
    c = {};
    c.watchdog = std::chrono::milliseconds(0);
    expect_error(c, "watchdog");
}

TEST(Config, RejectsTooMuchSharedMemory) {
    using S = rt::QueueSetup<256, rt::ProcedureQueues<Hungry>>;
    const std::string message = config_error(rt::RuntimeConfig{}, S::describe());
    EXPECT_NE(message.find("'hungry' needs 262144 bytes of shared memory"), std::string::npos) << message;
}

TEST(Config, RejectsMoreGroupsThanNamedBarriers) {
    using S = rt::QueueSetup<1024, rt::ProcedureQueues<Pairs>>;  // 16 groups of 64 threads
    EXPECT_NE(config_error(rt::RuntimeConfig{}, S::describe()).find("named barriers"), std::string::npos);
    rt::RuntimeConfig c;
    c.block_size = 512;  // 8 groups: fine
    EXPECT_EQ(config_error(c, S::describe()), "");
}

TEST(Config, ControllerNames) {
    EXPECT_EQ(rt::parse_controller("dp"), rt::Controller::dynamic_parallelism);
    EXPECT_EQ(rt::parse_controller("tail_launch"), rt::Controller::tail_launch);
    EXPECT_EQ(rt::parse_controller("megakernel"), rt::Controller::persistent);
    EXPECT_EQ(rt::parse_controller("host"), rt::Controller::host_loop);
    for (auto c : rt::all_controllers) EXPECT_EQ(rt::parse_controller(rt::to_string(c)), c);
    EXPECT_THROW((void)rt::parse_controller("gpu"), rt::ConfigError);
}

TEST(Stats, Totals) {
    rt::RunStats s;
    s.items_per_procedure = {3, 4};
    s.max_fill_per_queue = {7, 2, 9};
    EXPECT_EQ(s.total_items(), 7u);
    EXPECT_EQ(s.max_fill(), 9u);
}
