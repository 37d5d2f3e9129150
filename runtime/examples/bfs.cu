// BFS on the work-queue runtime. Label-correcting: a vertex is enqueued every
// time its distance improves (atomicMin), so the result is the exact BFS
// distance whatever order the controller runs items in; stale items (whose
// depth is already beaten) return at once.
#include <algorithm>
#include <deque>
#include <stdexcept>

#include "bfs.hpp"
#include "hisparse/runtime/runtime.cuh"

namespace hisparse::runtime::examples {
namespace {

constexpr std::uint32_t unreached = 0xffffffffu;

struct VisitItem {
    std::uint32_t vertex;
    std::uint32_t depth;
};

struct BfsState {
    const std::uint64_t* offsets;
    const std::uint32_t* targets;
    std::uint32_t* distance;
};

// Degree classes: bins of the small procedure, then a warp, then a block.
constexpr std::uint32_t tiny_degree = 4;     // small[0]
constexpr std::uint32_t small_degree = 32;   // small[1]
constexpr std::uint32_t medium_degree = 1024;

struct VisitSmall;
struct VisitMedium;
struct VisitLarge;

template <class Context>
__device__ void enqueue_vertex(const Context& ctx, std::uint32_t v, std::uint32_t depth);

template <class Context>
__device__ void visit(const VisitItem& item, std::uint32_t lane, std::uint32_t group_size, const Context& ctx) {
    const BfsState& s = ctx.state();
    // A later, shorter path already reached this vertex: its own item does the work.
    if (cuda::atomic_ref<std::uint32_t, cuda::thread_scope_device>(s.distance[item.vertex])
            .load(cuda::memory_order_relaxed) < item.depth)
        return;
    const std::uint64_t begin = s.offsets[item.vertex], end = s.offsets[item.vertex + 1];
    const std::uint32_t next = item.depth + 1;
    for (std::uint64_t e = begin + lane; e < end; e += group_size) {
        const std::uint32_t w = s.targets[e];
        if (atomicMin(&s.distance[w], next) > next) enqueue_vertex(ctx, w, next);
    }
}

struct VisitSmall {
    using payload_type = VisitItem;
    static constexpr std::uint32_t threads_per_item = 1;
    static constexpr const char* name = "bfs_small";
    template <class Context>
    __device__ static void run(const VisitItem& i, std::uint32_t l, std::uint32_t g, const Context& c) {
        visit(i, l, g, c);
    }
};
struct VisitMedium {
    using payload_type = VisitItem;
    static constexpr std::uint32_t threads_per_item = 32;
    static constexpr const char* name = "bfs_medium";
    template <class Context>
    __device__ static void run(const VisitItem& i, std::uint32_t l, std::uint32_t g, const Context& c) {
        visit(i, l, g, c);
    }
};
struct VisitLarge {
    using payload_type = VisitItem;
    static constexpr std::uint32_t threads_per_item = 256;
    static constexpr const char* name = "bfs_large";
    template <class Context>
    __device__ static void run(const VisitItem& i, std::uint32_t l, std::uint32_t g, const Context& c) {
        visit(i, l, g, c);
    }
};

using BfsSetup = QueueSetup<256, ProcedureQueues<VisitSmall, 2>, ProcedureQueues<VisitMedium>,
                            ProcedureQueues<VisitLarge>>;

template <class Context>
__device__ void enqueue_vertex(const Context& ctx, std::uint32_t v, std::uint32_t depth) {
    const BfsState& s = ctx.state();
    const std::uint64_t degree = s.offsets[v + 1] - s.offsets[v];
    if (degree == 0) return;  // nothing to expand: its distance is already written
    const VisitItem item{v, depth};
    if (degree <= tiny_degree)
        ctx.template enqueue<VisitSmall>(item, 0);
    else if (degree <= small_degree)
        ctx.template enqueue<VisitSmall>(item, 1);
    else if (degree <= medium_degree)
        ctx.template enqueue<VisitMedium>(item);
    else
        ctx.template enqueue<VisitLarge>(item);
}

std::uint64_t splitmix64(std::uint64_t& state) {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

}  // namespace

Graph rmat_graph(std::uint32_t scale, std::uint32_t edge_factor, std::uint64_t seed) {
    if (scale == 0 || scale > 28) throw std::invalid_argument("rmat_graph: scale must be in 1..28");
    const std::uint32_t n = 1u << scale;
    const std::uint64_t m = std::uint64_t{edge_factor} * n;
    std::vector<std::pair<std::uint32_t, std::uint32_t>> edges(m);
    std::uint64_t state = seed;
    for (auto& e : edges) {
        std::uint32_t u = 0, v = 0;
        for (std::uint32_t bit = 0; bit < scale; ++bit) {
            const double r = static_cast<double>(splitmix64(state) >> 11) * 0x1.0p-53;
            // Quadrants a=.57 (0,0), b=.19 (0,1), c=.19 (1,0), d=.05 (1,1).
            const std::uint32_t du = r >= 0.76 ? 1u : 0u;
            const std::uint32_t dv = (r >= 0.57 && r < 0.76) || r >= 0.95 ? 1u : 0u;
            u = (u << 1) | du;
            v = (v << 1) | dv;
        }
        e = {u, v};
    }
    Graph g;
    g.vertices = n;
    g.offsets.assign(n + 1, 0);
    for (const auto& e : edges) ++g.offsets[e.first + 1];
    for (std::uint32_t i = 0; i < n; ++i) g.offsets[i + 1] += g.offsets[i];
    g.targets.resize(m);
    std::vector<std::uint64_t> cursor(g.offsets.begin(), g.offsets.end() - 1);
    for (const auto& e : edges) g.targets[cursor[e.first]++] = e.second;
    return g;
}

std::uint32_t max_degree_vertex(const Graph& g) {
    std::uint32_t best = 0;
    for (std::uint32_t v = 1; v < g.vertices; ++v)
        if (g.offsets[v + 1] - g.offsets[v] > g.offsets[best + 1] - g.offsets[best]) best = v;
    return best;
}

BfsResult bfs_gpu(const Graph& g, std::uint32_t source, const RuntimeConfig& config) {
    if (source >= g.vertices) throw std::invalid_argument("bfs: source out of range");
    DeviceBuffer offsets(g.offsets.size() * sizeof(std::uint64_t));
    DeviceBuffer targets(std::max<std::size_t>(1, g.targets.size()) * sizeof(std::uint32_t));
    DeviceBuffer distance(std::size_t{g.vertices} * sizeof(std::uint32_t));
    check(cudaMemcpy(offsets.get(), g.offsets.data(), offsets.size(), cudaMemcpyHostToDevice), "cudaMemcpy(offsets)");
    check(cudaMemcpy(targets.get(), g.targets.data(), g.targets.size() * sizeof(std::uint32_t),
                     cudaMemcpyHostToDevice),
          "cudaMemcpy(targets)");
    check(cudaMemset(distance.get(), 0xff, distance.size()), "cudaMemset(distance)");
    const std::uint32_t zero = 0;
    check(cudaMemcpy(distance.as<std::uint32_t>() + source, &zero, sizeof zero, cudaMemcpyHostToDevice),
          "cudaMemcpy(source distance)");

    RuntimeConfig cfg = config;
    if (cfg.capacities.empty()) {
        // An item per improvement: at most one per edge, plus the source.
        const auto cap = static_cast<std::uint32_t>(std::min<std::uint64_t>(g.targets.size() + 1, 1u << 30));
        cfg.capacities.assign(BfsSetup::queue_count, std::max(cap, cfg.default_capacity));
    }
    Runtime<BfsSetup, BfsState> runtime(cfg, BfsState{offsets.as<std::uint64_t>(), targets.as<std::uint32_t>(),
                                                      distance.as<std::uint32_t>()});
    const std::uint64_t degree = g.offsets[source + 1] - g.offsets[source];
    const VisitItem root{source, 0};
    if (degree > medium_degree)
        runtime.seed<VisitLarge>(root);
    else if (degree > small_degree)
        runtime.seed<VisitMedium>(root);
    else
        runtime.seed<VisitSmall>(root, degree <= tiny_degree ? 0 : 1);
    BfsResult out;
    out.stats = runtime.run();
    out.distance.resize(g.vertices);
    check(cudaMemcpy(out.distance.data(), distance.get(), distance.size(), cudaMemcpyDeviceToHost),
          "cudaMemcpy(distance)");
    return out;
}

BfsResult bfs_host(const Graph& g, std::uint32_t source) {
    BfsResult out;
    out.distance.assign(g.vertices, unreached);
    std::deque<std::uint32_t> frontier{source};
    out.distance[source] = 0;
    while (!frontier.empty()) {
        const std::uint32_t v = frontier.front();
        frontier.pop_front();
        for (std::uint64_t e = g.offsets[v]; e < g.offsets[v + 1]; ++e) {
            const std::uint32_t w = g.targets[e];
            if (out.distance[w] == unreached) {
                out.distance[w] = out.distance[v] + 1;
                frontier.push_back(w);
            }
        }
    }
    return out;
}

}  // namespace hisparse::runtime::examples
