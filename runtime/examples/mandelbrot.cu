// Mandelbrot by Mariani–Silver on the work-queue runtime: one procedure, two
// queues (bins) by tile size so that a block only takes tiles of one size.
#include <algorithm>
#include <stdexcept>

#include "hisparse/runtime/runtime.cuh"
#include "mandelbrot.hpp"

namespace hisparse::runtime::examples {
namespace {

// Explicit rounding on the device: the compiler must not contract a*b+c into
// an FMA there, or GPU and host dwells would differ near the set's boundary.
__host__ __device__ inline double mul(double a, double b) {
#ifdef __CUDA_ARCH__
    return __dmul_rn(a, b);
#else
    return a * b;
#endif
}
__host__ __device__ inline double add(double a, double b) {
#ifdef __CUDA_ARCH__
    return __dadd_rn(a, b);
#else
    return a + b;
#endif
}

struct View {
    double x0, y0, dx, dy;
    int max_dwell;
};

__host__ __device__ inline int dwell(const View& v, int px, int py) {
    const double cx = add(v.x0, mul(static_cast<double>(px), v.dx));
    const double cy = add(v.y0, mul(static_cast<double>(py), v.dy));
    double zx = 0.0, zy = 0.0;
    int d = 0;
    while (d < v.max_dwell && add(mul(zx, zx), mul(zy, zy)) < 4.0) {
        const double t = add(add(mul(zx, zx), -mul(zy, zy)), cx);
        zy = add(mul(mul(2.0, zx), zy), cy);
        zx = t;
        ++d;
    }
    return d;
}

// Border pixel k (0 <= k < 4*(s-1)) of the tile at (x, y) with side s.
__host__ __device__ inline void border_pixel(int x, int y, int s, int k, int& px, int& py) {
    const int side = s - 1;
    const int edge = k / side, t = k % side;
    switch (edge) {
        case 0: px = x + t; py = y; break;                 // top, left to right
        case 1: px = x + side; py = y + t; break;          // right, top to bottom
        case 2: px = x + side - t; py = y + side; break;   // bottom, right to left
        default: px = x; py = y + side - t; break;         // left, bottom to top
    }
}

struct TileItem {
    std::int32_t x, y, size;
};

struct MandelState {
    std::uint16_t* image;
    int width;
    int min_tile;
    int big_tile;  // tiles at least this big go to bin 0
    View view;
};

struct Tile {
    using payload_type = TileItem;
    static constexpr std::uint32_t threads_per_item = 32;
    static constexpr const char* name = "mandelbrot_tile";

    template <class Context>
    __device__ static void run(const TileItem& t, std::uint32_t lane, std::uint32_t group_size, const Context& ctx) {
        const MandelState& s = ctx.state();
        const int d0 = dwell(s.view, t.x, t.y);
        bool uniform = true;
        const int border = 4 * (t.size - 1);
        for (int k = static_cast<int>(lane); k < border; k += static_cast<int>(group_size)) {
            int px, py;
            border_pixel(t.x, t.y, t.size, k, px, py);
            if (dwell(s.view, px, py) != d0) uniform = false;
        }
        uniform = __all_sync(0xffffffffu, uniform);  // the group is one full warp
        const int n = t.size * t.size;
        if (uniform || t.size <= s.min_tile) {
            for (int i = static_cast<int>(lane); i < n; i += static_cast<int>(group_size)) {
                const int px = t.x + i % t.size, py = t.y + i / t.size;
                s.image[static_cast<std::size_t>(py) * s.width + px] =
                    static_cast<std::uint16_t>(uniform ? d0 : dwell(s.view, px, py));
            }
            return;
        }
        if (lane < 4) {
            const int h = t.size / 2;
            const TileItem child{t.x + static_cast<int>(lane % 2) * h, t.y + static_cast<int>(lane / 2) * h, h};
            ctx.template enqueue<Tile>(child, h >= s.big_tile ? 0u : 1u);
        }
    }
};

using MandelSetup = QueueSetup<256, ProcedureQueues<Tile, 2>>;

View make_view(const MandelbrotParams& p) {
    return View{p.x0, p.y0, (p.x1 - p.x0) / p.size, (p.y1 - p.y0) / p.size, p.max_dwell};
}

void check_params(const MandelbrotParams& p) {
    auto pow2 = [](int v) { return v > 0 && (v & (v - 1)) == 0; };
    if (!pow2(p.size) || !pow2(p.initial_tile) || !pow2(p.min_tile) || p.initial_tile > p.size ||
        p.min_tile > p.initial_tile || p.min_tile < 2)
        throw std::invalid_argument("mandelbrot: sizes must be powers of two with 2 <= min_tile <= initial_tile <= size");
}

void host_tile(const View& v, int width, int min_tile, int x, int y, int size, std::uint16_t* image) {
    const int d0 = dwell(v, x, y);
    bool uniform = true;
    for (int k = 0; k < 4 * (size - 1); ++k) {
        int px, py;
        border_pixel(x, y, size, k, px, py);
        if (dwell(v, px, py) != d0) uniform = false;
    }
    if (uniform || size <= min_tile) {
        for (int i = 0; i < size * size; ++i) {
            const int px = x + i % size, py = y + i / size;
            image[static_cast<std::size_t>(py) * width + px] =
                static_cast<std::uint16_t>(uniform ? d0 : dwell(v, px, py));
        }
        return;
    }
    const int h = size / 2;
    for (int k = 0; k < 4; ++k) host_tile(v, width, min_tile, x + (k % 2) * h, y + (k / 2) * h, h, image);
}

}  // namespace

MandelbrotImage mandelbrot_gpu(const MandelbrotParams& p, const RuntimeConfig& config) {
    check_params(p);
    MandelbrotImage out;
    out.size = p.size;
    const std::size_t pixels = static_cast<std::size_t>(p.size) * p.size;
    DeviceBuffer image(pixels * sizeof(std::uint16_t));
    // Poison: a pixel no tile wrote shows up as 0xffff, never as a valid dwell.
    check(cudaMemset(image.get(), 0xff, image.size()), "cudaMemset(mandelbrot image)");

    MandelState state{image.as<std::uint16_t>(), p.size, p.min_tile, 64, make_view(p)};
    Runtime<MandelSetup, MandelState> runtime(config, state);
    std::vector<TileItem> roots;
    for (int y = 0; y < p.size; y += p.initial_tile)
        for (int x = 0; x < p.size; x += p.initial_tile) roots.push_back(TileItem{x, y, p.initial_tile});
    runtime.seed<Tile>(std::span<const TileItem>(roots), p.initial_tile >= state.big_tile ? 0u : 1u);
    out.stats = runtime.run();
    out.dwell.resize(pixels);
    check(cudaMemcpy(out.dwell.data(), image.get(), image.size(), cudaMemcpyDeviceToHost),
          "cudaMemcpy(mandelbrot image)");
    return out;
}

MandelbrotImage mandelbrot_host(const MandelbrotParams& p) {
    check_params(p);
    MandelbrotImage out;
    out.size = p.size;
    out.dwell.assign(static_cast<std::size_t>(p.size) * p.size, 0xffff);
    const View v = make_view(p);
    for (int y = 0; y < p.size; y += p.initial_tile)
        for (int x = 0; x < p.size; x += p.initial_tile)
            host_tile(v, p.size, p.min_tile, x, y, p.initial_tile, out.dwell.data());
    return out;
}

MandelbrotImage mandelbrot_brute_force(const MandelbrotParams& p) {
    check_params(p);
    MandelbrotImage out;
    out.size = p.size;
    out.dwell.resize(static_cast<std::size_t>(p.size) * p.size);
    const View v = make_view(p);
    for (int y = 0; y < p.size; ++y)
        for (int x = 0; x < p.size; ++x)
            out.dwell[static_cast<std::size_t>(y) * p.size + x] = static_cast<std::uint16_t>(dwell(v, x, y));
    return out;
}

std::vector<std::uint8_t> to_grey(const MandelbrotImage& image, int max_dwell) {
    std::vector<std::uint8_t> grey(image.dwell.size());
    for (std::size_t i = 0; i < grey.size(); ++i) {
        const int d = image.dwell[i];
        grey[i] = d >= max_dwell ? 0 : static_cast<std::uint8_t>(255 - (255 * std::min(d, 64)) / 64);
    }
    return grey;
}

}  // namespace hisparse::runtime::examples
