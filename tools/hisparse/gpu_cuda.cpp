// The command line's GPU paths (built with CUDA): SpMV through the HiSparse
// plan, and the GPU part of the demo beside cuSPARSE.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "cusparse_csr.hpp"
#include "device.hpp"
#include "gpu_ops.hpp"
#include "hisparse/formats/builder.hpp"
#include "hisparse/formats/device_matrix.hpp"
#include "hisparse/ops/spmv_gpu.hpp"
#include "hisparse/ops/spmv_reference.hpp"

namespace hisparse::cli {

bool gpu_available() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

namespace {

template <class V>
DeviceBytes upload(const std::vector<V>& h) {
  DeviceBytes d(std::max<std::size_t>(h.size(), 1) * sizeof(V));
  cuda_check(cudaMemcpy(d.get(), h.data(), h.size() * sizeof(V), cudaMemcpyHostToDevice), "cudaMemcpy(upload)");
  return d;
}
template <class V>
std::vector<V> download(const DeviceBytes& d, std::size_t n) {
  std::vector<V> h(n);
  cuda_check(cudaMemcpy(h.data(), d.get(), n * sizeof(V), cudaMemcpyDeviceToHost), "cudaMemcpy(download)");
  return h;
}

// Median time of `runs` calls after `warmup`, each timed with CUDA events.
template <class F>
double median_ms(F&& f, int warmup = 20, int runs = 100) {
  for (int i = 0; i < warmup; ++i) f();
  cudaEvent_t a, b;
  cuda_check(cudaEventCreate(&a), "cudaEventCreate");
  cuda_check(cudaEventCreate(&b), "cudaEventCreate");
  std::vector<float> t(runs);
  for (int i = 0; i < runs; ++i) {
    cuda_check(cudaEventRecord(a), "cudaEventRecord");
    f();
    cuda_check(cudaEventRecord(b), "cudaEventRecord");
    cuda_check(cudaEventSynchronize(b), "cudaEventSynchronize");
    cuda_check(cudaEventElapsedTime(&t[i], a, b), "cudaEventElapsedTime");
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::nth_element(t.begin(), t.begin() + runs / 2, t.end());
  return t[runs / 2];
}

template <class V>
double rel_error(const std::vector<V>& got, const std::vector<V>& want) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double d = std::abs(double(got[i]) - double(want[i]));
    num = std::isnan(d) ? INFINITY : std::max(num, d);
    den = std::max(den, std::abs(double(want[i])));
  }
  return den > 0 ? num / den : num;
}

template <class V>
bool demo_precision(const Matrix<V>& a, const char* name) {
  const double tol = std::is_same_v<V, float> ? 1e-5 : 1e-12;
  DeviceMatrix<V> dev(a);
  const Csr<V> csr = to_csr(a);
  CusparseCsr<V> cus(csr);
  ops::GpuSpmv<V> plan(dev);
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(-1, 1);
  bool ok = true;
  for (bool t : {false, true}) {
    if (dev.transposed() != t) dev.transpose();
    const Matrix<V> op = t ? a.transpose() : a;
    std::vector<V> x(op.cols());
    for (auto& v : x) v = static_cast<V>(u(rng));
    std::vector<V> ref(op.rows());
    ops::spmv_reference<V>(op, x, ref);
    DeviceBytes dx = upload(x), dy(std::max<std::size_t>(ref.size(), 1) * sizeof(V)), dz(dy.size());
    const double th = median_ms([&] { plan(dx.as<V>(), dy.as<V>(), V(1), V(0)); });
    const double tc = median_ms([&] { cus.spmv(t, dx.as<V>(), dz.as<V>(), V(1), V(0)); });
    const double eh = rel_error(download<V>(dy, ref.size()), ref), ec = rel_error(download<V>(dz, ref.size()), ref);
    const bool pass = eh < tol && ec < tol;
    ok = ok && pass;
    const double bh = double(dev.pool_bytes()), bc = double(cus.bytes());
    std::printf("  %s SpMV%s  HiSparse %7.3f ms (%5.0f GB/s on %4.1f MB)   cuSPARSE %7.3f ms (%5.0f GB/s on %4.1f MB)   %.2fx   err %.0e/%.0e %s\n",
                name, t ? "^T" : "  ", th, bh / th / 1e6, bh / 1e6, tc, bc / tc / 1e6, bc / 1e6, tc / th, eh, ec,
                pass ? "ok" : "FAILED");
  }
  return ok;
}

}  // namespace

template <class V>
void gpu_spmv(const Matrix<V>& a, std::span<const V> x, std::span<V> y, V alpha, V beta) {
  const DeviceMatrix<V> dev(a);
  DeviceBytes dx = upload(std::vector<V>(x.begin(), x.end())), dy = upload(std::vector<V>(y.begin(), y.end()));
  ops::spmv<V>(dev, dx.as<V>(), dy.as<V>(), alpha, beta);
  const auto out = download<V>(dy, y.size());
  std::copy(out.begin(), out.end(), y.begin());
}
template void gpu_spmv(const Matrix<float>&, std::span<const float>, std::span<float>, float, float);
template void gpu_spmv(const Matrix<double>&, std::span<const double>, std::span<double>, double, double);

bool gpu_demo(const Matrix<float>& a32, const Matrix<double>& a64) {
  cudaDeviceProp prop{};
  cuda_check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  std::printf("\nGPU: %s. Median of 100 runs after 20 warm-ups, CUDA events; the matrix stays in L2 when it fits (warm).\n",
              prop.name);
  std::printf("Bandwidth is each format's own bytes over its time; the ratio is cuSPARSE time / HiSparse time.\n");
  const bool ok32 = demo_precision(a32, "f32");
  const bool ok64 = demo_precision(a64, "f64");
  return ok32 && ok64;
}

}  // namespace hisparse::cli
