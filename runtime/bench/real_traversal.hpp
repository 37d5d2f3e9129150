#pragma once
// hisparse-rt-bench's "real traversal" rows: the runtime running the SpMV
// traversal of a generated matrix, beside its synthetic workloads. The SpMV
// package supplies them (tools/rt_bench/spmv_traversal.cpp, linked into the
// bench by tools/meson.build), so the runtime's own code stays free of sparse
// matrices. Plain C++.
#include <cstdint>
#include <string>
#include <vector>

#include "hisparse/runtime/config.hpp"

namespace hisparse::runtime::bench {

struct RealTraversalRow {
    std::string matrix;     // the generator spec, e.g. "laplace2d:n=4096"
    std::string precision;  // f32 or f64
    Controller controller = Controller::persistent;
    std::uint64_t nnz = 0;
    double run_ms = 0.0;   // one-shot SpMV, a full traversal: median, cold L2, CUDA events
    double plan_ms = 0.0;  // the same SpMV from the recorded plan (what the traversal's leaves cost alone)
    double plan_build_ms = 0.0;  // building that plan (the leaf walk, tiles, sorts; A's part): median, host clock
    double plan_build_both_ms = 0.0;  // the same with A's and A^T's parts (SpmvOptions::orientations = both)
    double setup_ms = 0.0;       // of which the runtime's set-up alone (a GpuSpmv without a plan): median, host clock
    RunStats stats;        // a profiled run (RuntimeConfig::profile)
};

// Generates each matrix once and measures it under every controller given.
// Checks each traversal's y against the plan's; throws std::runtime_error on
// a mismatch.
[[nodiscard]] std::vector<RealTraversalRow> measure_real_traversals(const std::vector<std::string>& matrices,
                                                                    const std::vector<std::string>& precisions,
                                                                    const std::vector<Controller>& controllers,
                                                                    unsigned repeat);

}  // namespace hisparse::runtime::bench
