// hisparse-edit-bench without CUDA: no GPU table.
#include "edit_bench_gpu.hpp"

#include "hisparse/formats/error.hpp"

namespace hisparse::edit_bench {

struct GpuEditBench::Impl {};
GpuEditBench::GpuEditBench(const Coo<double>&) { throw Error("this build has no GPU support"); }
GpuEditBench::~GpuEditBench() = default;
GpuEditTiming GpuEditBench::run(const Coo<double>&, int) { return {}; }
bool gpu_edit_bench_available() { return false; }

}  // namespace hisparse::edit_bench
