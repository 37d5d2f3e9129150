#pragma once
// Synthetic workloads shared by the microbenchmark and the GPU tests: a chain of
// dependent items, a fan-out tree of tiny items, and a wide fan-out from a few
// roots. Each counts what it processed so that a lost or duplicated item shows.
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>

#include <cstdint>

#include "hisparse/runtime/runtime.cuh"

namespace hisparse::runtime::workloads {

namespace cg = cooperative_groups;

// Adds `value` with one atomic per group of converged lanes.
__device__ inline void aggregated_add(unsigned long long* target, unsigned long long value) {
    const cg::coalesced_group active = cg::coalesced_threads();
    const unsigned long long sum = cg::reduce(active, value, cg::plus<unsigned long long>());
    if (active.thread_rank() == 0) atomicAdd(target, sum);
}

struct Totals {
    unsigned long long count;
    unsigned long long sum;
};

// --- Chain: levels alternate between two procedures, so each level needs a
// new dispatch by the controller (a worker that drains its own queue cannot
// pick the next level up).
struct ChainItem {
    std::uint32_t remaining;
};
struct ChainState {
    Totals* totals;
};
struct Pong;
struct Ping {
    using payload_type = ChainItem;
    static constexpr std::uint32_t threads_per_item = 1;
    static constexpr const char* name = "ping";
    template <class Context>
    __device__ static void run(const ChainItem& item, std::uint32_t, std::uint32_t, const Context& ctx);
};
struct Pong {
    using payload_type = ChainItem;
    static constexpr std::uint32_t threads_per_item = 1;
    static constexpr const char* name = "pong";
    template <class Context>
    __device__ static void run(const ChainItem& item, std::uint32_t, std::uint32_t, const Context& ctx) {
        atomicAdd(&ctx.state().totals->count, 1ull);
        if (item.remaining > 0) ctx.template enqueue<Ping>(ChainItem{item.remaining - 1});
    }
};
template <class Context>
__device__ void Ping::run(const ChainItem& item, std::uint32_t, std::uint32_t, const Context& ctx) {
    atomicAdd(&ctx.state().totals->count, 1ull);
    if (item.remaining > 0) ctx.template enqueue<Pong>(ChainItem{item.remaining - 1});
}
using ChainSetup = QueueSetup<256, ProcedureQueues<Ping>, ProcedureQueues<Pong>>;

// --- Tree of tiny items: an inner node enqueues `fanout` children; a leaf adds
// its id to the totals. Leaf ids are 0..fanout^depth-1, each exactly once.
struct TreeItem {
    std::uint32_t level;
    std::uint32_t id;
};
struct TreeState {
    Totals* totals;
    std::uint32_t fanout;
    std::uint32_t depth;
};
struct TreeLeaf {
    using payload_type = TreeItem;
    static constexpr std::uint32_t threads_per_item = 1;
    static constexpr const char* name = "tree_leaf";
    template <class Context>
    __device__ static void run(const TreeItem& item, std::uint32_t, std::uint32_t, const Context& ctx) {
        aggregated_add(&ctx.state().totals->sum, item.id);
        aggregated_add(&ctx.state().totals->count, 1ull);
    }
};
struct TreeNode {
    using payload_type = TreeItem;
    static constexpr std::uint32_t threads_per_item = 1;
    static constexpr const char* name = "tree_node";
    template <class Context>
    __device__ static void run(const TreeItem& item, std::uint32_t, std::uint32_t, const Context& ctx) {
        const auto& s = ctx.state();
        for (std::uint32_t k = 0; k < s.fanout; ++k) {
            const TreeItem child{item.level + 1, item.id * s.fanout + k};
            if (child.level == s.depth)
                ctx.template enqueue<TreeLeaf>(child);
            else
                ctx.template enqueue<TreeNode>(child);
        }
    }
};
using TreeSetup = QueueSetup<256, ProcedureQueues<TreeNode>, ProcedureQueues<TreeLeaf>>;

// --- Wide fan-out: a root is run by a whole block; its threads enqueue
// `per_root` leaves together (ids root*per_root + i).
struct WideRoot {
    std::uint32_t root;
};
struct WideLeafItem {
    std::uint32_t id;
};
struct WideState {
    Totals* totals;
    std::uint32_t per_root;
};
struct WideLeaf {
    using payload_type = WideLeafItem;
    static constexpr std::uint32_t threads_per_item = 1;
    static constexpr const char* name = "wide_leaf";
    template <class Context>
    __device__ static void run(const WideLeafItem& item, std::uint32_t, std::uint32_t, const Context& ctx) {
        aggregated_add(&ctx.state().totals->sum, item.id);
        aggregated_add(&ctx.state().totals->count, 1ull);
    }
};
struct WideSpawner {
    using payload_type = WideRoot;
    static constexpr std::uint32_t threads_per_item = 256;
    static constexpr const char* name = "wide_root";
    template <class Context>
    __device__ static void run(const WideRoot& item, std::uint32_t lane, std::uint32_t group_size,
                               const Context& ctx) {
        const std::uint32_t n = ctx.state().per_root;
        for (std::uint32_t i = lane; i < n; i += group_size)
            ctx.template enqueue<WideLeaf>(WideLeafItem{item.root * n + i});
    }
};
using WideSetup = QueueSetup<256, ProcedureQueues<WideSpawner>, ProcedureQueues<WideLeaf>>;

// --- Uneven expansion: a warp per root, lane l of root r expands into
// expand_count(r, l) leaves (0 to a few thousand, most small) through the
// warp-collective Context::enqueue_expand. Leaf ids are source * 4096 + k.
struct ExpandRoot {
    std::uint32_t root;
};
struct ExpandLeafItem {
    std::uint32_t source;  // root * 32 + lane
    std::uint32_t k;
};
struct ExpandState {
    Totals* totals;
};
__host__ __device__ constexpr std::uint32_t expand_count(std::uint32_t root, std::uint32_t lane) {
    return (root * 31u + lane * 17u) % 11u == 0u ? 1000u + (root * 97u + lane) % 3000u : (root + lane) % 5u;
}
struct ExpandLeaf {
    using payload_type = ExpandLeafItem;
    static constexpr std::uint32_t threads_per_item = 1;
    static constexpr const char* name = "expand_leaf";
    template <class Context>
    __device__ static void run(const ExpandLeafItem& item, std::uint32_t, std::uint32_t, const Context& ctx) {
        aggregated_add(&ctx.state().totals->sum, std::uint64_t{item.source} * 4096u + item.k);
        aggregated_add(&ctx.state().totals->count, 1ull);
    }
};
struct ExpandSpawner {
    using payload_type = ExpandRoot;
    static constexpr std::uint32_t threads_per_item = 32;
    static constexpr const char* name = "expand_root";
    template <class Context>
    __device__ static void run(const ExpandRoot& item, std::uint32_t lane, std::uint32_t, const Context& ctx) {
        const ExpandLeafItem base{item.root * 32u + lane, 0};
        ctx.template enqueue_expand<ExpandLeaf>(base, expand_count(item.root, lane),
                                                [](ExpandLeafItem b, std::uint32_t k) { return ExpandLeafItem{b.source, k}; });
    }
};
using ExpandSetup = QueueSetup<256, ProcedureQueues<ExpandSpawner>, ProcedureQueues<ExpandLeaf>>;

// --- Empty setup for empty runs and a procedure that never stops (watchdog).
struct Forever {
    using payload_type = ChainItem;
    static constexpr std::uint32_t threads_per_item = 32;
    static constexpr const char* name = "forever";
    template <class Context>
    __device__ static void run(const ChainItem& item, std::uint32_t lane, std::uint32_t, const Context& ctx) {
        if (lane == 0) ctx.template enqueue<Forever>(item);
    }
};
using ForeverSetup = QueueSetup<256, ProcedureQueues<Forever>>;

}  // namespace hisparse::runtime::workloads
