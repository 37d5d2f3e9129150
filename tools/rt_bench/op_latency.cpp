// The op latency rows of hisparse-rt-bench (runtime/bench/op_latency.hpp).
#include "op_latency.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <string>

#include "hisparse/formats/builder.hpp"
#include "hisparse/formats/device_matrix.hpp"
#include "hisparse/ops/add_gpu.hpp"
#include "hisparse/ops/add_plan.hpp"
#include "hisparse/ops/context.hpp"
#include "hisparse/ops/copy_gpu.hpp"
#include "hisparse/ops/spmv_gpu.hpp"

namespace hisparse::runtime::bench {
namespace {

// Median over `calls` of f() then a synchronisation of `stream`, after five
// calls of warm-up (the context's cached state, the CUDA module loads).
double median_us(const std::function<void()>& f, unsigned calls, cudaStream_t stream) {
  for (int i = 0; i < 5; ++i) f();
  cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize(op latency warm-up)");
  std::vector<double> t;
  t.reserve(calls);
  for (unsigned i = 0; i < calls; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize(op latency)");
    t.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

struct Operand {
  DeviceMatrix<float> a, at;  // at: transposed and scaled state, for materialize
  DeviceBytes x, y;
  explicit Operand(const Matrix<float>& host) : a(host), at(host), x(host.cols() * sizeof(float)), y(host.rows() * sizeof(float)) {
    at.transpose();
    at.scale_by(2.0f);
    cuda_check(cudaMemset(x.get(), 0, x.size()), "cudaMemset(x)");
  }
};

}  // namespace

std::vector<OpLatencyRow> measure_op_latencies(unsigned calls) {
  Coo<float> empty{1000, 1000, {}, {}, {}};
  Coo<float> one = empty;
  one.push(3, 7, 1.5f);
  // The one-entry matrix twice: the default build (wide nodes allowed; one
  // entry takes an inner node and a leaf, a COOW node being no smaller, but
  // the pool is wide: depth 2 takes the flat kernels) and the standard node
  // types (no wide nodes: the runtime's traversal).
  Operand m[3] = {Operand(build_matrix(empty)), Operand(build_matrix(one)),
                  Operand(build_matrix(one, BuildOptions{.wide_nodes = false}))};
  ops::Context ctx;
  const cudaStream_t s = ctx.stream();
  std::vector<OpLatencyRow> rows;
  // f(operand, use the context) for both matrices and both forms.
  const auto row = [&](const char* name, const std::function<void(Operand&, bool)>& f) {
    OpLatencyRow r;
    r.op = name;
    r.context_empty_us = median_us([&] { f(m[0], true); }, calls, s);
    r.context_one_us = median_us([&] { f(m[1], true); }, calls, s);
    r.context_one_standard_us = median_us([&] { f(m[2], true); }, calls, s);
    r.local_empty_us = median_us([&] { f(m[0], false); }, calls, s);
    r.local_one_us = median_us([&] { f(m[1], false); }, calls, s);
    rows.push_back(r);
  };
  {
    ops::GpuSpmv<float> plans[3][2] = {{ops::GpuSpmv<float>(ctx, m[0].a), ops::GpuSpmv<float>(m[0].a)},
                                       {ops::GpuSpmv<float>(ctx, m[1].a), ops::GpuSpmv<float>(m[1].a)},
                                       {ops::GpuSpmv<float>(ctx, m[2].a), ops::GpuSpmv<float>(m[2].a)}};
    row("SpMV through a plan", [&](Operand& o, bool c) { plans[&o - m][c ? 0 : 1](o.x.as<float>(), o.y.as<float>()); });
  }
  row("SpMV, one runtime traversal", [&](Operand& o, bool c) {
    if (c) ops::spmv(ctx, o.a, o.x.as<float>(), o.y.as<float>());
    else ops::spmv(o.a, o.x.as<float>(), o.y.as<float>());
  });
  row("add", [&](Operand& o, bool c) { (void)(c ? ops::add(ctx, o.a, o.a) : ops::add(o.a, o.a)); });
  {
    // The two-phase add's second phase (no call-local form: both columns run
    // the plan on the context).
    ops::AddPlan<float> plans[3] = {ops::AddPlan<float>(ctx, m[0].a, m[0].a), ops::AddPlan<float>(ctx, m[1].a, m[1].a),
                                    ops::AddPlan<float>(ctx, m[2].a, m[2].a)};
    row("add, second phase of a plan", [&](Operand& o, bool) { plans[&o - m].compute(o.a, o.a); });
  }
  // The other controllers of the runtime ops, for the choice of defaults on tiny inputs.
  for (runtime::Controller k : {runtime::Controller::host_loop, runtime::Controller::persistent}) {
    const std::string name = "add, " + std::string(runtime::to_string(k));
    const ops::AddOptions ao{k};
    row(name.c_str(), [&](Operand& o, bool c) { (void)(c ? ops::add(ctx, o.a, o.a, 1.0f, 1.0f, ao) : ops::add(o.a, o.a, 1.0f, 1.0f, ao)); });
    const std::string sname = "SpMV traversal, " + std::string(runtime::to_string(k));
    const ops::SpmvOptions so{.controller = k};
    row(sname.c_str(), [&](Operand& o, bool c) {
      if (c) ops::spmv(ctx, o.a, o.x.as<float>(), o.y.as<float>(), 1.0f, 0.0f, so);
      else ops::spmv(o.a, o.x.as<float>(), o.y.as<float>(), 1.0f, 0.0f, so);
    });
  }
  row("copy", [&](Operand& o, bool c) { (void)(c ? ops::copy(ctx, o.a) : ops::copy(o.a)); });
  row("copy, rebuilt", [&](Operand& o, bool c) {
    (void)(c ? ops::copy(ctx, o.a, {.rebuild = true}) : ops::copy(o.a, {.rebuild = true}));
  });
  row("materialize", [&](Operand& o, bool c) { (void)(c ? ops::materialize(ctx, o.at) : ops::materialize(o.at)); });
  return rows;
}

}  // namespace hisparse::runtime::bench
