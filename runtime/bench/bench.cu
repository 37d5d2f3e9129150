// hisparse-rt-bench: per controller, the latency of an empty run, the latency
// per level of a chain of dependent items, and items per second for a tree of
// tiny items and for a wide fan-out; then a real traversal: the SpMV of
// generated matrices as one runtime run per call (real_traversal.hpp), with
// its profile; then the ops' latency on tiny matrices (op_latency.hpp).
// Prints Markdown tables.
//
//   hisparse-rt-bench [--controller NAME] [--levels N] [--depth D] [--repeat R] [--blocks-per-sm N]
//                     [--real SPEC]... [--no-real] [--real-precision f32,f64] [--profile] [--op-calls N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include "op_latency.hpp"
#include "real_traversal.hpp"
#include "workloads.cuh"

namespace rt = hisparse::runtime;
namespace wl = hisparse::runtime::workloads;

namespace {

std::vector<rt::Controller> compiled_controllers() {
    std::vector<rt::Controller> v;
    for (rt::Controller c : rt::all_controllers)
        if (rt::controller_compiled(c)) v.push_back(c);
    return v;
}

struct Options {
    std::vector<rt::Controller> controllers = compiled_controllers();
    std::uint32_t levels = 2000;
    std::uint32_t depth = 8;  // tree: 8^depth leaves
    std::uint32_t repeat = 5;
    std::uint32_t empty_runs = 200;
    std::uint32_t blocks_per_sm = 0;  // persistent: 0 = as many as fit
    // The issue-14 yardsticks: a 2D Laplacian of 84 M entries, an R-MAT graph of 32 M.
    std::vector<std::string> real = {"laplace2d:n=4096", "rmat:scale=21"};
    std::vector<std::string> real_precisions = {"f32"};
    bool profile = false;  // print each real traversal's profile
    std::uint32_t op_calls = 200;  // per op latency measurement; 0: none
};

std::vector<std::string> split_commas(const std::string& s) {
    std::vector<std::string> out;
    for (std::size_t at = 0; at <= s.size();) {
        const std::size_t end = std::min(s.find(',', at), s.size());
        out.push_back(s.substr(at, end - at));
        at = end + 1;
    }
    return out;
}

void print_op_latencies(const Options& o) {
    const auto rows = rt::bench::measure_op_latencies(o.op_calls);
    std::printf("\nop latency: a GPU op on a 1000 x 1000 matrix, empty or with one entry, f32: from the call to its "
                "result ready (the op, then a stream synchronisation), host clock, median of %u calls after 5; on "
                "a context (its cached runtimes, stream-ordered pool) and in the call-local form\n\n",
                o.op_calls);
    std::printf("| op | context, empty (us) | context, one entry (us) | context, one entry, standard nodes (us) | "
                "call-local, empty (us) | call-local, one entry (us) |\n");
    std::printf("| --- | --- | --- | --- | --- | --- |\n");
    for (const auto& r : rows)
        std::printf("| %s | %.1f | %.1f | %.1f | %.1f | %.1f |\n", r.op.c_str(), r.context_empty_us, r.context_one_us,
                    r.context_one_standard_us, r.local_empty_us, r.local_one_us);
}

void print_real_traversals(const Options& o) {
    const auto rows = rt::bench::measure_real_traversals(o.real, o.real_precisions, o.controllers, o.repeat);
    std::printf("\nreal traversal: SpMV of generated matrices, one full runtime run per call against the recorded "
                "plan's SpMV; median of %u, cold L2, CUDA events; items, launches and device time from a separate "
                "profiled run\n\n",
                o.repeat);
    std::printf("| matrix | prec | controller | nnz | one-shot (ms) | plan (ms) | x plan | plan build (ms) | "
                "build x plan | A and A^T (ms) | of it, set-up (ms) | items | launches | device (ms) |\n");
    std::printf("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    for (const auto& r : rows)
        std::printf("| %s | %s | %s | %llu | %.3f | %.3f | %.2f | %.3f | %.1f | %.3f | %.3f | %llu | %llu | %.3f |\n",
                    r.matrix.c_str(), r.precision.c_str(), std::string(rt::to_string(r.controller)).c_str(),
                    static_cast<unsigned long long>(r.nnz), r.run_ms, r.plan_ms, r.run_ms / r.plan_ms,
                    r.plan_build_ms, r.plan_build_ms / r.plan_ms, r.plan_build_both_ms, r.setup_ms,
                    static_cast<unsigned long long>(r.stats.total_items()),
                    static_cast<unsigned long long>(r.stats.kernel_launches), r.stats.profile.device_ms);
    if (!o.profile) return;
    for (const auto& r : rows)
        std::printf("\nprofile: %s %s, %s\n\n%s", r.matrix.c_str(), r.precision.c_str(),
                    std::string(rt::to_string(r.controller)).c_str(), rt::format_profile(r.stats.profile).c_str());
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

__global__ void empty_kernel() {}

// The floor under any run(): one empty kernel launch and the same event wait
// that run() uses, host wall time.
double bare_launch_us(std::uint32_t runs) {
    rt::Event done;
    std::vector<double> us;
    for (std::uint32_t i = 0; i < runs + 20; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        empty_kernel<<<1, 32>>>();
        rt::check(cudaGetLastError(), "launch of empty_kernel");
        rt::check(cudaEventRecord(done.get(), nullptr), "cudaEventRecord");
        if (!rt::wait_for(done.get(), t0 + std::chrono::seconds(10))) throw std::runtime_error("empty kernel hung");
        const auto t1 = std::chrono::steady_clock::now();
        if (i >= 20) us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    }
    return median(us);
}

struct Row {
    std::string label;
    double empty_us = 0, level_us = 0, launches_per_level = 0, tiny_items_per_s = 0, wide_items_per_s = 0;
};

template <class Setup, class State>
double timed_run(rt::Runtime<Setup, State>& runtime, std::uint32_t repeat) {
    runtime.run();  // warm-up: module load, first-touch of the queues
    std::vector<double> ms;
    for (std::uint32_t i = 0; i < repeat; ++i) ms.push_back(runtime.run().milliseconds);
    return median(ms);
}

void expect(bool ok, const char* what) {
    if (!ok) {
        std::fprintf(stderr, "check failed: %s\n", what);
        std::exit(1);
    }
}

Row measure(const std::string& label, const rt::RuntimeConfig& cfg, const Options& o, wl::Totals* totals) {
    Row row{label};
    {
        rt::Runtime<wl::ChainSetup, wl::ChainState> runtime(cfg, wl::ChainState{totals});
        for (int i = 0; i < 20; ++i) runtime.run();
        std::vector<double> ms;
        for (std::uint32_t i = 0; i < o.empty_runs; ++i) ms.push_back(runtime.run().milliseconds);
        row.empty_us = median(ms) * 1e3;
        expect(runtime.stats().total_items() == 0, "empty run processed items");

        runtime.seed<wl::Ping>(wl::ChainItem{o.levels - 1});
        const double chain_ms = timed_run(runtime, o.repeat);
        expect(runtime.stats().total_items() == o.levels, "chain length");
        row.level_us = (chain_ms * 1e3 - row.empty_us) / o.levels;
        row.launches_per_level = static_cast<double>(runtime.stats().kernel_launches) / o.levels;
    }
    {
        rt::RuntimeConfig tcfg = cfg;
        std::uint64_t leaves = 1;
        for (std::uint32_t i = 0; i < o.depth; ++i) leaves *= 8;
        tcfg.capacities = {static_cast<std::uint32_t>(std::min<std::uint64_t>(leaves, 1u << 30)),
                           static_cast<std::uint32_t>(std::min<std::uint64_t>(leaves, 1u << 30))};
        rt::Runtime<wl::TreeSetup, wl::TreeState> runtime(tcfg, wl::TreeState{totals, 8, o.depth});
        runtime.seed<wl::TreeNode>(wl::TreeItem{0, 0});
        const double ms = timed_run(runtime, o.repeat);
        const auto items = runtime.stats().total_items();
        expect(items == leaves + (leaves - 1) / 7, "tree item count");
        row.tiny_items_per_s = static_cast<double>(items) / (ms * 1e-3);
    }
    {
        rt::RuntimeConfig wcfg = cfg;
        const std::uint32_t roots = 64, per_root = 1u << 17;
        wcfg.capacities = {64, roots * per_root};
        rt::Runtime<wl::WideSetup, wl::WideState> runtime(wcfg, wl::WideState{totals, per_root});
        std::vector<wl::WideRoot> seeds(roots);
        for (std::uint32_t i = 0; i < roots; ++i) seeds[i].root = i;
        runtime.seed<wl::WideSpawner>(std::span<const wl::WideRoot>(seeds));
        const double ms = timed_run(runtime, o.repeat);
        const auto items = runtime.stats().total_items();
        expect(items == roots + std::uint64_t{roots} * per_root, "wide fan-out item count");
        row.wide_items_per_s = static_cast<double>(items) / (ms * 1e-3);
    }
    return row;
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    bool real_named = false;  // the first --real replaces the defaults
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "%s needs a value\n", a.c_str());
                std::exit(2);
            }
            return argv[++i];
        };
        if (a == "--controller") o.controllers = {rt::parse_controller(next())};
        else if (a == "--levels") o.levels = static_cast<std::uint32_t>(std::stoul(next()));
        else if (a == "--depth") o.depth = static_cast<std::uint32_t>(std::stoul(next()));
        else if (a == "--repeat") o.repeat = static_cast<std::uint32_t>(std::stoul(next()));
        else if (a == "--blocks-per-sm") o.blocks_per_sm = static_cast<std::uint32_t>(std::stoul(next()));
        else if (a == "--real") {
            if (!real_named) o.real.clear();
            real_named = true;
            o.real.push_back(next());
        } else if (a == "--no-real") o.real.clear();
        else if (a == "--real-precision") o.real_precisions = split_commas(next());
        else if (a == "--profile") o.profile = true;
        else if (a == "--op-calls") o.op_calls = static_cast<std::uint32_t>(std::stoul(next()));
        else {
            std::fprintf(stderr,
                         "usage: hisparse-rt-bench [--controller dp|tail|persistent|host] [--levels N] "
                         "[--depth D] [--repeat R] [--blocks-per-sm N] [--real GENERATOR_SPEC]... [--no-real] "
                         "[--real-precision f32,f64] [--profile] [--op-calls N]\n");
            return 2;
        }
    }
    try {
        if (rt::device_count() == 0) {
            std::fprintf(stderr, "hisparse-rt-bench: no CUDA device\n");
            return 77;
        }
        cudaDeviceProp prop{};
        rt::check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
        rt::DeviceBuffer totals_buffer(sizeof(wl::Totals));
        auto* totals = totals_buffer.as<wl::Totals>();
        std::vector<Row> rows;
        for (auto c : o.controllers) {
            rt::RuntimeConfig cfg;
            cfg.controller = c;
            cfg.persistent_blocks_per_sm = o.blocks_per_sm;
            rows.push_back(measure(std::string(rt::to_string(c)), cfg, o, totals));
            if (c == rt::Controller::persistent) {
                // Every item through the global queues (no block-local stash).
                cfg.local_stash = false;
                rows.push_back(measure("persistent, local_stash=false", cfg, o, totals));
            }
            if (c == rt::Controller::dynamic_parallelism) {
                // The paper's form: workers exit once their queue is empty, so
                // every dependent level pays a device-side launch.
                cfg.linger_us = 0;
                rows.push_back(measure("dynamic_parallelism, linger_us=0", cfg, o, totals));
            }
        }
        std::printf("device: %s; chain %u levels, tree 8^%u leaves, wide 64 x 2^17; median of %u runs "
                    "(empty: of %u), host wall time per run()\n\n",
                    prop.name, o.levels, o.depth, o.repeat, o.empty_runs);
        std::printf("| controller | empty run (us) | per dependent level (us) | launches per level | tiny items/s | "
                    "wide fan-out items/s |\n");
        std::printf("| --- | --- | --- | --- | --- | --- |\n");
        for (const auto& r : rows)
            std::printf("| %s | %.1f | %.2f | %.2f | %.3g | %.3g |\n", r.label.c_str(),
                        r.empty_us, r.level_us, r.launches_per_level, r.tiny_items_per_s, r.wide_items_per_s);
        std::printf("\nfloor: one empty kernel launch and the event wait run() uses: %.1f us (median of %u)\n",
                    bare_launch_us(o.empty_runs), o.empty_runs);
        if (o.op_calls != 0) print_op_latencies(o);
        if (!o.real.empty()) print_real_traversals(o);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "hisparse-rt-bench: %s\n", e.what());
        return 1;
    }
    return 0;
}
