// hisparse-mandelbrot: renders the Mandelbrot set with Mariani–Silver on the
// GPU runtime, checks it against the host implementation of the same
// algorithm, and writes a PGM image.
//
//   hisparse-mandelbrot [--controller NAME] [--size N] [--out FILE.pgm]
#include <cstdio>
#include <exception>
#include <string>

#include "hisparse/runtime/device.hpp"
#include "image.hpp"
#include "mandelbrot.hpp"

namespace rt = hisparse::runtime;
namespace ex = hisparse::runtime::examples;

int main(int argc, char** argv) {
    rt::RuntimeConfig config;
    ex::MandelbrotParams params;
    std::string out = "mandelbrot.pgm";
    bool check = true;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        const bool has_value = i + 1 < argc;
        if (a == "--controller" && has_value) config.controller = rt::parse_controller(argv[++i]);
        else if (a == "--size" && has_value) params.size = std::stoi(argv[++i]);
        else if (a == "--max-dwell" && has_value) params.max_dwell = std::stoi(argv[++i]);
        else if (a == "--out" && has_value) out = argv[++i];
        else if (a == "--no-check") check = false;
        else {
            std::fprintf(stderr,
                         "usage: hisparse-mandelbrot [--controller dp|tail|persistent|host] [--size N] "
                         "[--max-dwell D] [--out FILE.pgm] [--no-check]\n");
            return 2;
        }
    }
    try {
        if (rt::device_count() == 0) {
            std::fprintf(stderr, "hisparse-mandelbrot: no CUDA device\n");
            return 77;
        }
        const ex::MandelbrotImage gpu = ex::mandelbrot_gpu(params, config);
        std::printf("%dx%d, controller %s: %.3f ms, %llu tiles, %llu launches, largest queue fill %u\n", gpu.size,
                    gpu.size, std::string(rt::to_string(config.controller)).c_str(), gpu.stats.milliseconds,
                    static_cast<unsigned long long>(gpu.stats.total_items()),
                    static_cast<unsigned long long>(gpu.stats.kernel_launches), gpu.stats.max_fill());
        ex::write_pgm(out, gpu.size, gpu.size, ex::to_grey(gpu, params.max_dwell));
        std::printf("wrote %s\n", out.c_str());
        if (check) {
            const ex::MandelbrotImage host = ex::mandelbrot_host(params);
            std::size_t diff = 0;
            for (std::size_t i = 0; i < host.dwell.size(); ++i) diff += host.dwell[i] != gpu.dwell[i];
            std::printf("host check: %zu of %zu pixels differ\n", diff, host.dwell.size());
            if (diff != 0) return 1;
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "hisparse-mandelbrot: %s\n", e.what());
        return 1;
    }
    return 0;
}
