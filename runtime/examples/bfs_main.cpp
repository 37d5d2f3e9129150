// hisparse-bfs: BFS on a generated R-MAT power-law graph with the GPU runtime,
// checked against a host BFS.
//
//   hisparse-bfs [--controller NAME] [--scale S] [--edge-factor E] [--seed N]
#include <cstdio>
#include <exception>
#include <string>

#include "bfs.hpp"
#include "hisparse/runtime/device.hpp"

namespace rt = hisparse::runtime;
namespace ex = hisparse::runtime::examples;

int main(int argc, char** argv) {
    rt::RuntimeConfig config;
    std::uint32_t scale = 18, edge_factor = 16;
    std::uint64_t seed = 1;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        const bool has_value = i + 1 < argc;
        if (a == "--controller" && has_value) config.controller = rt::parse_controller(argv[++i]);
        else if (a == "--scale" && has_value) scale = static_cast<std::uint32_t>(std::stoul(argv[++i]));
        else if (a == "--edge-factor" && has_value) edge_factor = static_cast<std::uint32_t>(std::stoul(argv[++i]));
        else if (a == "--seed" && has_value) seed = std::stoull(argv[++i]);
        else {
            std::fprintf(stderr,
                         "usage: hisparse-bfs [--controller dp|tail|persistent|host] [--scale S] "
                         "[--edge-factor E] [--seed N]\n");
            return 2;
        }
    }
    try {
        if (rt::device_count() == 0) {
            std::fprintf(stderr, "hisparse-bfs: no CUDA device\n");
            return 77;
        }
        const ex::Graph g = ex::rmat_graph(scale, edge_factor, seed);
        const std::uint32_t source = ex::max_degree_vertex(g);
        const ex::BfsResult gpu = ex::bfs_gpu(g, source, config);
        const ex::BfsResult host = ex::bfs_host(g, source);
        std::size_t reached = 0, diff = 0;
        for (std::size_t v = 0; v < host.distance.size(); ++v) {
            reached += host.distance[v] != 0xffffffffu;
            diff += host.distance[v] != gpu.distance[v];
        }
        std::printf("R-MAT scale %u (%zu edges), source %u: %zu vertices reached, controller %s: %.3f ms, "
                    "%llu visits, %llu launches; host check: %zu distances differ\n",
                    scale, g.targets.size(), source, reached, std::string(rt::to_string(config.controller)).c_str(),
                    gpu.stats.milliseconds, static_cast<unsigned long long>(gpu.stats.total_items()),
                    static_cast<unsigned long long>(gpu.stats.kernel_launches), diff);
        return diff == 0 ? 0 : 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "hisparse-bfs: %s\n", e.what());
        return 1;
    }
}
