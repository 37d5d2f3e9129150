// The real traversal of hisparse-rt-bench (runtime/bench/real_traversal.hpp):
// SpMV of a generated matrix as one full runtime run per call, under each
// controller, against the same SpMV from its plan.
#include "real_traversal.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <stdexcept>
#include <type_traits>

#include "hisparse/formats/builder.hpp"
#include "hisparse/formats/device_matrix.hpp"
#include "hisparse/gen/generators.hpp"
#include "hisparse/ops/gpu_controllers.hpp"
#include "hisparse/ops/spmv_gpu.hpp"
#include "cuda_timing.hpp"

namespace hisparse::runtime::bench {
namespace {

// Median of `repeat` calls, each after the L2 was emptied (a write of twice
// its size, outside the events), timed with CUDA events (`hisparse bench`'s
// timing); two calls first.
template <class F>
double cold_median_ms(F&& f, DeviceBytes& flush, unsigned repeat) {
  return tools::time_calls(f, tools::TimingPlan{2, 0.0, static_cast<int>(repeat)}, &flush, true).median;
}

template <class V>
std::vector<V> download(const DeviceBytes& d, std::size_t n) {
  std::vector<V> v(n);
  cuda_check(cudaMemcpy(v.data(), d.get(), n * sizeof(V), cudaMemcpyDeviceToHost), "download y");
  return v;
}

template <class V>
void measure(const std::string& spec, const Coo<double>& coo64, const std::vector<Controller>& controllers,
             unsigned repeat, DeviceBytes& flush, std::vector<RealTraversalRow>& rows) {
  Coo<V> coo{coo64.rows, coo64.cols, coo64.row, coo64.col, {}};
  coo.val.assign(coo64.val.begin(), coo64.val.end());
  const DeviceMatrix<V> a(build_matrix(coo));
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<V> x(a.cols());
  for (auto& v : x) v = static_cast<V>(u(rng));
  DeviceBytes dx(std::max<std::size_t>(x.size(), 1) * sizeof(V)), dy(std::max<std::size_t>(a.rows(), 1) * sizeof(V));
  cuda_check(cudaMemcpy(dx.get(), x.data(), x.size() * sizeof(V), cudaMemcpyHostToDevice), "upload x");
  // Building a plan, host clock around the constructor (it synchronizes):
  // what a one-shot caller would pay instead of a traversal (issue 14's
  // target: at most 3 plan SpMVs).
  const auto build_ms = [&](const ops::SpmvOptions& o) {
    std::vector<double> builds;
    for (unsigned r = 0; r < std::max(3u, repeat); ++r) {
      cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize(before plan build)");
      const auto t0 = std::chrono::steady_clock::now();
      const ops::GpuSpmv<V> built(a, o);
      cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize(plan build)");
      builds.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(builds.begin(), builds.end());
    return builds[builds.size() / 2];
  };
  const double plan_build_ms = build_ms({});
  const double plan_build_both_ms = build_ms({.orientations = ops::SpmvOptions::Orientations::both});
  const double setup_ms = build_ms({.reuse_traversal = false});
  ops::GpuSpmv<V> plan(a);
  const double plan_ms = cold_median_ms([&] { plan(dx.as<V>(), dy.as<V>()); }, flush, repeat);
  const std::vector<V> want = download<V>(dy, a.rows());
  const double tol = std::is_same_v<V, float> ? 1e-4 : 1e-10;
  for (Controller c : controllers) {
    if (!ops::gpu_controller_available(c)) continue;
    ops::GpuSpmv<V> one_shot(a, ops::SpmvOptions{.controller = c, .reuse_traversal = false});
    cuda_check(cudaMemset(dy.get(), 0xFF, dy.size()), "poison y");
    RealTraversalRow row;
    row.run_ms = cold_median_ms([&] { one_shot(dx.as<V>(), dy.as<V>()); }, flush, repeat);
    const std::vector<V> got = download<V>(dy, a.rows());
    double num = 0, den = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      const double d = static_cast<double>(got[i]) - static_cast<double>(want[i]);
      num += d * d;
      den += static_cast<double>(want[i]) * static_cast<double>(want[i]);
    }
    const double err = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
    if (!(err <= tol))
      throw std::runtime_error("real traversal " + spec + " under " + std::string(to_string(c)) +
                               ": y differs from the plan's (relative error " + std::to_string(err) + ")");
    // A separate profiled run: the profile's clock reads and atomics stay out of the timing.
    ops::GpuSpmv<V> profiled(a, ops::SpmvOptions{.controller = c, .reuse_traversal = false, .profile = true});
    profiled(dx.as<V>(), dy.as<V>());
    cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize(profiled traversal)");
    row.matrix = spec;
    row.precision = std::is_same_v<V, float> ? "f32" : "f64";
    row.controller = c;
    row.nnz = a.nnz();
    row.plan_ms = plan_ms;
    row.plan_build_ms = plan_build_ms;
    row.plan_build_both_ms = plan_build_both_ms;
    row.setup_ms = setup_ms;
    row.stats = profiled.last_run();
    rows.push_back(std::move(row));
  }
}

}  // namespace

std::vector<RealTraversalRow> measure_real_traversals(const std::vector<std::string>& matrices,
                                                      const std::vector<std::string>& precisions,
                                                      const std::vector<Controller>& controllers, unsigned repeat) {
  std::vector<RealTraversalRow> rows;
  int dev = 0, l2 = 0;
  cuda_check(cudaGetDevice(&dev), "cudaGetDevice");
  cuda_check(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev), "cudaDeviceGetAttribute(L2 size)");
  DeviceBytes flush(2 * static_cast<std::size_t>(std::max(l2, 1)));
  for (const std::string& spec : matrices) {
    const Coo<double> coo = gen::generate_coo<double>(gen::parse_spec(spec));
    for (const std::string& p : precisions) {
      if (p == "f32") measure<float>(spec, coo, controllers, repeat, flush, rows);
      else if (p == "f64") measure<double>(spec, coo, controllers, repeat, flush, rows);
      else throw std::runtime_error("unknown precision '" + p + "' (f32, f64)");
    }
  }
  return rows;
}

}  // namespace hisparse::runtime::bench
