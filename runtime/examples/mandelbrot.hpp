#pragma once
// Example workload 1: the Mandelbrot set by Mariani–Silver adaptive subdivision.
// A tile whose border has one dwell everywhere is filled with it; otherwise it
// is split into four (or computed pixel by pixel once it is small). Plain C++
// interface: the runtime is used inside mandelbrot.cu.
#include <cstdint>
#include <string>
#include <vector>

#include "hisparse/runtime/config.hpp"

namespace hisparse::runtime::examples {

struct MandelbrotParams {
    int size = 2048;          // image is size x size; a power of two
    int initial_tile = 256;   // the image is seeded as tiles of this size
    int min_tile = 16;        // tiles this small are computed pixel by pixel
    int max_dwell = 512;
    double x0 = -2.0, y0 = -1.25, x1 = 0.5, y1 = 1.25;
};

struct MandelbrotImage {
    int size = 0;
    std::vector<std::uint16_t> dwell;  // row-major
    RunStats stats;                    // GPU only
};

// On the GPU with the given runtime configuration (controller, capacities...).
MandelbrotImage mandelbrot_gpu(const MandelbrotParams& params, const RuntimeConfig& config);
// The same algorithm on the host, the reference the GPU result must equal.
MandelbrotImage mandelbrot_host(const MandelbrotParams& params);
// Every pixel computed directly (no subdivision), for comparison.
MandelbrotImage mandelbrot_brute_force(const MandelbrotParams& params);
// Dwell mapped to grey levels.
std::vector<std::uint8_t> to_grey(const MandelbrotImage& image, int max_dwell);

}  // namespace hisparse::runtime::examples
