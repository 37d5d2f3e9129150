// The GPU side of every op package, compiled as one translation unit.
//
// Why: the runtime's setup-independent kernels (queue re-initialisation)
// are templates that every TU using the runtime instantiates. With separate
// TUs in one device-linked library, each TU registers its own copy and the
// CUDA runtime reports duplicate kernel entries. One TU instantiates each
// runtime kernel once. Op packages keep their .cu files in their own folders
// and are listed here.
#include "spmv/gpu/spmv_gpu.cu"
#include "copy/gpu/copy_gpu.cu"
#include "add/gpu/add_gpu.cu"
#include "add/gpu/add_plan.cu"

#include "hisparse/ops/gpu_controllers.hpp"
#include "hisparse/runtime/runtime.cuh"

namespace hisparse::ops {

bool gpu_controller_available(runtime::Controller c) noexcept { return runtime::controller_compiled(c); }

}  // namespace hisparse::ops
