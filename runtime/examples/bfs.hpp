#pragma once
// Example workload 2: breadth-first search on a generated power-law (R-MAT)
// graph, a recursive workload with very uneven fan-out. Vertices go to
// procedures by their degree (1 thread, a warp, or a whole block per vertex).
#include <cstdint>
#include <vector>

#include "hisparse/runtime/config.hpp"

namespace hisparse::runtime::examples {

struct Graph {
    std::uint32_t vertices = 0;
    std::vector<std::uint64_t> offsets;  // CSR, vertices + 1 entries
    std::vector<std::uint32_t> targets;
};

// R-MAT (a=.57, b=c=.19) with 2^scale vertices and edge_factor * 2^scale
// directed edges; deterministic for a given seed.
Graph rmat_graph(std::uint32_t scale, std::uint32_t edge_factor, std::uint64_t seed);
// Vertex with the most out-edges (a good BFS source: it reaches a lot).
std::uint32_t max_degree_vertex(const Graph& g);

struct BfsResult {
    std::vector<std::uint32_t> distance;  // unreachable: 0xffffffff
    RunStats stats;                       // GPU only
};

BfsResult bfs_gpu(const Graph& g, std::uint32_t source, const RuntimeConfig& config);
BfsResult bfs_host(const Graph& g, std::uint32_t source);

}  // namespace hisparse::runtime::examples
