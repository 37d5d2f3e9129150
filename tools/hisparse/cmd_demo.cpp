// hisparse demo: the main job on a built-in matrix. It shows what the format
// is for: the memory it saves against CSR and COO, and SpMV / transposed SpMV
// checked against a plain CSR product (on the GPU beside cuSPARSE when there
// is one), and what building the format costs on the host and on the GPU,
// in units of its SpMV.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>

#include "commands.hpp"
#include "device.hpp"
#include "generators.hpp"
#include "gpu_ops.hpp"
#include "hisparse/formats/builder.hpp"
#include "hisparse/formats/stats.hpp"
#include "hisparse/ops/spmv_reference.hpp"
#include "matrix_io.hpp"

namespace hisparse::cli {
namespace {

struct DemoOptions {
  index_t grid = 1024;
  std::string device;
  WideNodesFlags wide;
};

// y = op(A) x from CSR arrays: the independent check.
template <class V>
std::vector<double> csr_product(const Csr<V>& a, const std::vector<V>& x, bool transpose) {
  std::vector<double> y(transpose ? a.cols : a.rows, 0.0);
  for (index_t r = 0; r < a.rows; ++r)
    for (index_t k = a.row_ptr[r]; k < a.row_ptr[r + 1]; ++k) {
      if (transpose) y[a.col[k]] += double(a.val[k]) * double(x[r]);
      else y[r] += double(a.val[k]) * double(x[a.col[k]]);
    }
  return y;
}

template <class V>
double max_rel_error(const std::vector<V>& got, const std::vector<double>& want) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    num = std::max(num, std::abs(double(got[i]) - want[i]));
    den = std::max(den, std::abs(want[i]));
  }
  return den > 0 ? num / den : num;
}

}  // namespace

void add_demo_command(CLI::App& app) {
  auto opt = std::make_shared<DemoOptions>();
  auto* sub = app.add_subcommand(
      "demo", "memory comparison, checked SpMV and build times (host against GPU) on a built-in matrix");
  sub->add_option("--grid", opt->grid, "grid side n of the built-in 2D Laplacian (n^2 rows; default 1024)")
      ->check(CLI::Range(2, 8192));
  sub->add_option("--device", opt->device,
                  "host or gpu (default: gpu when present): gpu adds SpMV beside cuSPARSE and the GPU build's time");
  add_wide_nodes_flags(sub, opt->wide, false);
  sub->callback([opt] {
    const Device device = resolve_device(opt->device);
    const index_t n = opt->grid;
    std::printf("HiSparse demo: 5-point convection-diffusion operator on a %llu x %llu grid\n\n", static_cast<unsigned long long>(n),
                static_cast<unsigned long long>(n));

    // Convection-diffusion: a Laplacian with upwinded east/west couplings, so
    // that A^T differs from A and the transposed check means something.
    Coo<double> coo64 = laplacian_2d<double>(n);
    for (std::size_t k = 0; k < coo64.nnz(); ++k) {
      if (coo64.col[k] == coo64.row[k] + 1) coo64.val[k] = -1.5;
      if (coo64.col[k] + 1 == coo64.row[k]) coo64.val[k] = -0.5;
    }
    Coo<float> coo32{coo64.rows, coo64.cols, coo64.row, coo64.col, {}};
    coo32.val.assign(coo64.val.begin(), coo64.val.end());
    BuildOptions options;
    if (const auto wide = opt->wide.choice()) options.wide_nodes = *wide;
    // The host builds both precisions, timed once each; with a GPU, its build
    // of the same lists is timed beside them and checked byte for byte
    // against these.
    using clock = std::chrono::steady_clock;
    const auto t0 = clock::now();
    const Matrix<double> a64 = build_matrix(coo64, options);
    const auto t1 = clock::now();
    const Matrix<float> a32 = build_matrix(coo32, options);
    const auto t2 = clock::now();
    const double host64_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
    const double host32_ms = std::chrono::duration<double, std::milli>(t2 - t1).count();
    const MatrixStats s64 = matrix_stats(a64), s32 = matrix_stats(a32);
    std::printf("%llu rows, %llu entries; built HiSparse (node size %u, depth %u) on the host in %.0f ms (f64), %.0f ms (f32)\n\n",
                static_cast<unsigned long long>(s64.rows), static_cast<unsigned long long>(s64.nnz), s64.node_size,
                s64.depth, host64_ms, host32_ms);
    std::printf("Memory, bytes per nonzero          f32       f64\n");
    std::printf("  HiSparse                    %8.2f  %8.2f\n", s32.per_nnz(s32.bytes_hisparse), s64.per_nnz(s64.bytes_hisparse));
    std::printf("  CSR (32-bit indices)        %8.2f  %8.2f\n", s32.per_nnz(s32.bytes_csr), s64.per_nnz(s64.bytes_csr));
    std::printf("  COO (32-bit indices)        %8.2f  %8.2f\n", s32.per_nnz(s32.bytes_coo), s64.per_nnz(s64.bytes_coo));
    std::printf("  HiSparse / CSR              %8.2f  %8.2f\n",
                double(s32.bytes_hisparse) / double(s32.bytes_csr), double(s64.bytes_hisparse) / double(s64.bytes_csr));
    std::printf("  HiSparse / COO              %8.2f  %8.2f\n\n",
                double(s32.bytes_hisparse) / double(s32.bytes_coo), double(s64.bytes_hisparse) / double(s64.bytes_coo));
    std::printf("  nodes: %llu inner, %llu leaf (%llu dense, %llu COO1, %llu COO2, %llu COO4), %llu COOW\n\n",
                static_cast<unsigned long long>(s64.nodes.inner), static_cast<unsigned long long>(s64.nodes.leaf),
                static_cast<unsigned long long>(s64.nodes.dense), static_cast<unsigned long long>(s64.nodes.coo1),
                static_cast<unsigned long long>(s64.nodes.coo2), static_cast<unsigned long long>(s64.nodes.coo4),
                static_cast<unsigned long long>(s64.nodes.coow));

    std::mt19937_64 rng(42);
    std::uniform_real_distribution<double> u(-1, 1);
    std::vector<double> x(a64.cols());
    for (auto& v : x) v = u(rng);
    const Csr<double> csr = to_csr(a64);
    bool ok = true;
    for (bool t : {false, true}) {
      const Matrix<double> op = t ? a64.transpose() : a64;
      std::vector<double> y(op.rows());
      const auto h0 = std::chrono::steady_clock::now();
      ops::spmv_reference<double>(op, x, y);
      const auto h1 = std::chrono::steady_clock::now();
      const double err = max_rel_error(y, csr_product(csr, x, t));
      const bool pass = err < 1e-12;
      ok = ok && pass;
      std::printf("SpMV%s host reference (f64): %8.2f ms, max relative error vs CSR %.1e  %s\n", t ? "^T" : "  ",
                  std::chrono::duration<double, std::milli>(h1 - h0).count(), err, pass ? "ok" : "FAILED");
    }
    if (device == Device::gpu)
      ok = gpu_demo(DemoBuild<float>{coo32, a32, host32_ms}, DemoBuild<double>{coo64, a64, host64_ms}, options) && ok;
    else
      std::printf("\n(no GPU in this build or on this machine: GPU SpMV, cuSPARSE and GPU build timings skipped)\n");
    if (!ok) throw Error("demo: a result did not match its check");
  });
}

}  // namespace hisparse::cli
