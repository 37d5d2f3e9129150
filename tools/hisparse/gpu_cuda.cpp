// The command line's GPU paths (built with CUDA): SpMV through the HiSparse
// plan, and the GPU part of the demo beside cuSPARSE.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "bench.hpp"
#include "device.hpp"
#include "gpu_ops.hpp"
#include "hisparse/formats/device_matrix.hpp"
#include "hisparse/ops/spmv_gpu.hpp"
#include "hisparse/ops/add_gpu.hpp"

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

// One line per operation: HiSparse beside the faster cuSPARSE algorithm, from
// the same measurement `hisparse bench` makes (checked before timed).
template <class V>
bool demo_precision(const Matrix<V>& a, const char* name) {
  bool ok = true;
  const std::vector<BenchRecord> rs = bench_spmv(a, "demo", BenchOptions{});
  for (const char* op : {"spmv", "spmv_t"}) {
    const BenchRecord* h = nullptr;
    const BenchRecord* c = nullptr;
    for (const auto& r : rs) {
      if (r.op != op) continue;
      if (r.impl == "hisparse") h = &r;
      // The baseline is cuSPARSE's: the other HiSparse records (no-tiles, ...)
      // measure HiSparse's own options.
      else if (r.impl.rfind("cusparse-", 0) == 0 && r.ok && (!c || r.median_ms < c->median_ms)) c = &r;
    }
    if (!h || !h->ok || !c) {
      std::printf("  %s SpMV%s  FAILED: a result did not match the host reference\n", name, std::string(op) == "spmv_t" ? "^T" : "  ");
      ok = false;
      continue;
    }
    const double bh = double(h->bytes), bc = double(c->bytes);
    std::printf("  %s SpMV%s  HiSparse %7.3f ms (%5.0f GB/s on %5.1f MB)   cuSPARSE %7.3f ms (%5.0f GB/s on %5.1f MB, %s)   %.2fx  ok\n",
                name, std::string(op) == "spmv_t" ? "^T" : "  ", h->median_ms, bh / h->median_ms / 1e6, bh / 1e6,
                c->median_ms, bc / c->median_ms / 1e6, bc / 1e6, c->impl.c_str() + 9, c->median_ms / h->median_ms);
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

template <class V>
Matrix<V> gpu_add(const Matrix<V>& a, const Matrix<V>& b, V alpha, V beta) {
  const DeviceMatrix<V> da(a), db(b);
  return ops::add<V>(da, db, alpha, beta).download();
}
template Matrix<float> gpu_add(const Matrix<float>&, const Matrix<float>&, float, float);
template Matrix<double> gpu_add(const Matrix<double>&, const Matrix<double>&, double, double);

bool gpu_demo(const Matrix<float>& a32, const Matrix<double>& a64) {
  cudaDeviceProp prop{};
  cuda_check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  std::printf("\nGPU: %s. Median of 100 runs after 20 warm-ups, CUDA events; the matrix stays in L2 when it fits (warm).\n",
              prop.name);
  std::printf("Both checked against the host reference first. Bandwidth is each format's own bytes over its time;\n"
              "the ratio is cuSPARSE time / HiSparse time (cuSPARSE: the faster of CSR ALG1 and ALG2).\n");
  const bool ok32 = demo_precision(a32, "f32");
  const bool ok64 = demo_precision(a64, "f64");
  return ok32 && ok64;
}

}  // namespace hisparse::cli
