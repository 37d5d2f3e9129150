#pragma once
// hisparse-rt-bench's "op latency" rows: what a GPU op of the library costs
// the host on an empty and a one-entry matrix (from the call to its result
// being ready: the op, then a stream synchronisation, host clock), on a
// context and in the call-local form. Supplied by the op packages
// (tools/rt_bench/op_latency.cpp) like the real traversal rows. Plain C++.
#include <string>
#include <vector>

namespace hisparse::runtime::bench {

struct OpLatencyRow {
    std::string op;
    double context_empty_us = 0.0;  // medians
    double context_one_us = 0.0;
    double context_one_standard_us = 0.0;  // the one entry in standard nodes (no wide node)
    double local_empty_us = 0.0;
    double local_one_us = 0.0;
};

[[nodiscard]] std::vector<OpLatencyRow> measure_op_latencies(unsigned calls);

}  // namespace hisparse::runtime::bench
