// The command line's GPU paths (built with CUDA): SpMV through the HiSparse
// plan, the add, the build from a coordinate list, and the GPU part of the
// demo beside cuSPARSE.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

#include "bench.hpp"
#include "cuda_timing.hpp"
#include "device.hpp"
#include "gpu_ops.hpp"
#include "hisparse/formats/device_matrix.hpp"
#include "hisparse/ops/add_gpu.hpp"
#include "hisparse/ops/convert_gpu.hpp"
#include "hisparse/ops/edit_gpu.hpp"
#include "hisparse/ops/spmv_gpu.hpp"

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

// A coordinate list in device memory with signed indices I, as
// ops::build_device_matrix takes it. Arrays never empty, so every pointer is
// valid.
template <class V, class I>
struct CooOnDevice {
  index_t rows = 0, cols = 0;
  std::uint64_t nnz = 0;
  DeviceBytes row, col, val;
  [[nodiscard]] ops::DeviceCooView<V, I> view() const {
    return {rows, cols, nnz, row.as<const I>(), col.as<const I>(), val.as<const V>()};
  }
};

// The host's 64-bit unsigned indices as I. 64-bit ones are the same bits
// (every index is below 2^48); 32-bit ones are narrowed a chunk at a time, so
// the host holds one chunk besides the list.
template <class I>
void upload_indices(const std::vector<index_t>& h, const DeviceBytes& d) {
  if (h.empty()) return;
  if constexpr (sizeof(I) == sizeof(index_t)) {
    cuda_check(cudaMemcpy(d.get(), h.data(), h.size() * sizeof(I), cudaMemcpyHostToDevice), "cudaMemcpy(upload COO)");
  } else {
    constexpr std::size_t chunk = std::size_t{1} << 22;
    std::vector<I> buf(std::min(chunk, h.size()));
    for (std::size_t at = 0; at < h.size(); at += chunk) {
      const std::size_t n = std::min(chunk, h.size() - at);
      std::transform(h.begin() + static_cast<std::ptrdiff_t>(at), h.begin() + static_cast<std::ptrdiff_t>(at + n),
                     buf.begin(), [](index_t x) { return static_cast<I>(x); });
      cuda_check(cudaMemcpy(d.as<I>() + at, buf.data(), n * sizeof(I), cudaMemcpyHostToDevice), "cudaMemcpy(upload COO)");
    }
  }
}

template <class V, class I>
CooOnDevice<V, I> upload_coo(const Coo<V>& coo) {
  CooOnDevice<V, I> d;
  d.rows = coo.rows;
  d.cols = coo.cols;
  d.nnz = coo.nnz();
  const std::size_t n = std::max<std::size_t>(coo.nnz(), 1);
  d.row = DeviceBytes(n * sizeof(I));
  d.col = DeviceBytes(n * sizeof(I));
  d.val = DeviceBytes(n * sizeof(V));
  upload_indices<I>(coo.row, d.row);
  upload_indices<I>(coo.col, d.col);
  if (!coo.val.empty())
    cuda_check(cudaMemcpy(d.val.get(), coo.val.data(), coo.val.size() * sizeof(V), cudaMemcpyHostToDevice),
               "cudaMemcpy(upload COO)");
  return d;
}

// 32-bit indices where rows, cols and nnz all fit 2^31 - 1.
template <class V>
bool fits_int32(const Coo<V>& coo) {
  constexpr auto max32 = static_cast<std::uint64_t>(std::numeric_limits<std::int32_t>::max());
  return coo.rows <= max32 && coo.cols <= max32 && coo.nnz() <= max32;
}

template <class V, class I>
Matrix<V> build_through(const Coo<V>& coo, const BuildOptions& options) {
  DeviceMatrix<V> m;
  {
    // The input is released before the download: the device holds the
    // result only, from then on.
    const CooOnDevice<V, I> d = upload_coo<V, I>(coo);
    m = ops::build_device_matrix(d.view(), options);
  }
  return m.download();
}

struct GpuBuildTiming {
  double median_ms = 0;
  bool identical = false;
  std::uint64_t peak_work_bytes = 0;
};

// The demo's GPU build: the coordinate list uploaded once (not timed), then
// ops::build_device_matrix through a context (as a program that converts
// more than once would: its pool keeps the memory it mapped) timed with CUDA
// events (median of five after a warm-up, the result's allocation
// included); the result checked byte for byte against the host's build.
template <class V, class I>
GpuBuildTiming time_gpu_build(const Coo<V>& coo, const Matrix<V>& host, const BuildOptions& options) {
  const CooOnDevice<V, I> d = upload_coo<V, I>(coo);
  ops::Context ctx;
  GpuBuildTiming t;
  ops::ConvertStats stats;
  t.identical = same_matrix(ops::build_device_matrix(ctx, d.view(), options, &stats).download(), host);
  t.peak_work_bytes = stats.peak_work_bytes;
  t.median_ms = tools::time_allocating_calls([&] { return ops::build_device_matrix(ctx, d.view(), options); }, 5).median;
  return t;
}

struct DemoSpmv {
  bool ok = true;
  double hisparse_ms = 0;  // HiSparse SpMV (not transposed), median
};

// One line per operation: HiSparse beside the faster cuSPARSE algorithm, from
// the same measurement `hisparse bench` makes (checked before timed).
template <class V>
DemoSpmv demo_precision(const Matrix<V>& a, const char* name) {
  DemoSpmv out;
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
      out.ok = false;
      continue;
    }
    if (std::string(op) == "spmv") out.hisparse_ms = h->median_ms;
    const double bh = double(h->bytes), bc = double(c->bytes);
    std::printf("  %s SpMV%s  HiSparse %7.3f ms (%5.0f GB/s on %5.1f MB)   cuSPARSE %7.3f ms (%5.0f GB/s on %5.1f MB, %s)   %.2fx  ok\n",
                name, std::string(op) == "spmv_t" ? "^T" : "  ", h->median_ms, bh / h->median_ms / 1e6, bh / 1e6,
                c->median_ms, bc / c->median_ms / 1e6, bc / 1e6, c->impl.c_str() + 9, c->median_ms / h->median_ms);
  }
  return out;
}

// "f32 build  host 812.4 ms   GPU 3.1 ms (upload excluded)   = 12.3 HiSparse SpMVs": the
// conversion beside the SpMV it serves.
template <class V>
bool demo_build(const DemoBuild<V>& b, const BuildOptions& options, const char* name, double spmv_ms) {
  const GpuBuildTiming t = fits_int32(b.coo) ? time_gpu_build<V, std::int32_t>(b.coo, b.matrix, options)
                                             : time_gpu_build<V, std::int64_t>(b.coo, b.matrix, options);
  char spmvs[64] = "";
  if (spmv_ms > 0) std::snprintf(spmvs, sizeof spmvs, "   = %.1f HiSparse SpMVs", t.median_ms / spmv_ms);
  std::printf("  %s build  host %8.1f ms   GPU %7.1f ms (upload excluded)%s   %.0fx faster, work %.0f MB   %s\n", name,
              b.host_ms, t.median_ms, spmvs, t.median_ms > 0 ? b.host_ms / t.median_ms : 0.0,
              double(t.peak_work_bytes) / 1e6, t.identical ? "same bytes" : "FAILED: differs from the host build");
  return t.identical;
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

template <class V>
Matrix<V> gpu_build(const Coo<V>& coo, const BuildOptions& options) {
  return fits_int32(coo) ? build_through<V, std::int32_t>(coo, options) : build_through<V, std::int64_t>(coo, options);
}
template Matrix<float> gpu_build(const Coo<float>&, const BuildOptions&);
template Matrix<double> gpu_build(const Coo<double>&, const BuildOptions&);

template <class V>
Matrix<V> gpu_edit(const Matrix<V>& a, const Coo<V>& updates, ops::EditMode mode, ops::EditStats* stats) {
  const DeviceMatrix<V> first = ops::versioned(DeviceMatrix<V>(a));
  if (fits_int32(updates))
    return ops::edit_version(first, upload_coo<V, std::int32_t>(updates).view(), mode, nullptr, stats).download();
  return ops::edit_version(first, upload_coo<V, std::int64_t>(updates).view(), mode, nullptr, stats).download();
}
template Matrix<float> gpu_edit(const Matrix<float>&, const Coo<float>&, ops::EditMode, ops::EditStats*);
template Matrix<double> gpu_edit(const Matrix<double>&, const Coo<double>&, ops::EditMode, ops::EditStats*);

bool gpu_demo(const DemoBuild<float>& a32, const DemoBuild<double>& a64, const BuildOptions& options) {
  cudaDeviceProp prop{};
  cuda_check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  std::printf("\nGPU: %s. Median of 100 runs after 20 warm-ups, CUDA events; the matrix stays in L2 when it fits (warm).\n",
              prop.name);
  std::printf("Both checked against the host reference first. Bandwidth is each format's own bytes over its time;\n"
              "the ratio is cuSPARSE time / HiSparse time (cuSPARSE: the faster of CSR ALG1 and ALG2).\n");
  const DemoSpmv s32 = demo_precision(a32.matrix, "f32");
  const DemoSpmv s64 = demo_precision(a64.matrix, "f64");
  std::printf("\nBuilding HiSparse from the coordinate list: the host builder (one run) against the GPU's from the\n"
              "list already in device memory (ops::build_device_matrix through a context, %s indices; median of 5\n"
              "after a warm-up, CUDA events), each checked byte for byte against the host's; in units of one HiSparse\n"
              "SpMV above.\n",
              fits_int32(a64.coo) ? "32-bit" : "64-bit");
  const bool b32 = demo_build(a32, options, "f32", s32.hisparse_ms);
  const bool b64 = demo_build(a64, options, "f64", s64.hisparse_ms);
  return s32.ok && s64.ok && b32 && b64;
}

}  // namespace hisparse::cli
