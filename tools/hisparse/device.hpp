#pragma once
// Which implementation a command runs on: the host reference or the GPU.
#include <optional>
#include <string>

namespace hisparse::cli {

enum class Device { host, gpu };

// True when this build has the GPU operations and a CUDA device is present.
bool gpu_available();

// "--device" as given (empty: gpu when available, else host). Asking for the
// GPU where there is none is an error of the work (exit 1), not of usage.
Device resolve_device(const std::string& requested);

}  // namespace hisparse::cli
