#include "device.hpp"

#include "hisparse/formats/error.hpp"
#include "matrix_io.hpp"

namespace hisparse::cli {

Device resolve_device(const std::string& requested) {
  if (requested.empty()) return gpu_available() ? Device::gpu : Device::host;
  if (requested == "host") return Device::host;
  if (requested == "gpu") {
    if (!gpu_available()) throw Error("--device gpu: no CUDA device is available to this build");
    return Device::gpu;
  }
  throw UsageError("--device must be host or gpu, not '" + printable_text(requested) + "'");
}

}  // namespace hisparse::cli
