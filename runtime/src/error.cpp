#include "hisparse/runtime/error.hpp"

#include <cuda_runtime_api.h>

#include <string>

#include "hisparse/runtime/log.hpp"

namespace hisparse::runtime::detail {

void throw_cuda_error(int code, const char* call, std::source_location where) {
    const auto e = static_cast<cudaError_t>(code);
    // Reset the thread's last error, so that a non-sticky failure (an
    // allocation) does not fail the next healthy launch check as well.
    (void)cudaGetLastError();
    std::string message = std::string(call) + " failed: " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) +
                          ") at " + where.file_name() + ":" + std::to_string(where.line());
    log::error(message);
    throw CudaError(code, message);
}

}  // namespace hisparse::runtime::detail
