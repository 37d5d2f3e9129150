// The GPU side of `hisparse bench`.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <random>

#include "bench.hpp"
#include "cusparse_csr.hpp"
#include "hisparse/formats/builder.hpp"
#include "hisparse/formats/device_matrix.hpp"
#include "hisparse/ops/add_gpu.hpp"
#include "hisparse/ops/add_plan.hpp"
#include "hisparse/ops/convert_gpu.hpp"
#include "hisparse/ops/copy_gpu.hpp"
#include "hisparse/ops/gpu_controllers.hpp"
#include "hisparse/ops/spmv_gpu.hpp"
#include "hisparse/ops/spmv_reference.hpp"
#include "cuda_timing.hpp"

namespace hisparse::cli {
namespace {

// Largest absolute difference over the largest magnitude wanted; infinite
// where a NaN appears.
template <class V>
double relative_difference(const std::vector<V>& got, const std::vector<V>& want) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double e = std::abs(double(got[i]) - double(want[i]));
    if (std::isnan(e)) return INFINITY;
    num = std::max(num, e);
    den = std::max(den, std::abs(double(want[i])));
  }
  return den > 0 ? num / den : num;
}

template <class V>
double rel_error(const DeviceBytes& d, const std::vector<V>& want) {
  std::vector<V> got(want.size());
  cuda_check(cudaMemcpy(got.data(), d.get(), got.size() * sizeof(V), cudaMemcpyDeviceToHost), "download");
  return relative_difference(got, want);
}

// Relative difference of two CSR matrices with the same structure; infinite
// when the structures differ.
template <class V>
double csr_difference(const Csr<V>& got, const Csr<V>& want) {
  if (got.rows != want.rows || got.cols != want.cols || got.row_ptr != want.row_ptr || got.col != want.col) return INFINITY;
  return relative_difference(got.val, want.val);
}

// Makes the records of one matrix and precision: each with its error
// measured first and timed only when the result was right (a wrong result
// is flagged and never reported as a speed). Owns the buffer that empties
// the L2 before every timed call of a cold run.
class Recorder {
 public:
  Recorder(const std::string& matrix, const char* precision, const BenchOptions& o)
      : matrix_(matrix), precision_(precision), o_(o) {
    if (!o.cold) return;
    int dev = 0;
    cuda_check(cudaGetDevice(&dev), "cudaGetDevice");
    int l2 = 0;
    cuda_check(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev), "cudaDeviceGetAttribute");
    flush_ = DeviceBytes(2 * static_cast<std::size_t>(l2));
  }

  // `host_work`: see time_calls.
  template <class F>
  void record(const char* op, const char* impl, std::uint64_t rows, std::uint64_t cols, std::uint64_t nnz,
              std::uint64_t bytes, double err, bool ok, F&& timed, bool host_work) {
    BenchRecord r;
    r.matrix = matrix_;
    r.op = op;
    r.impl = impl;
    r.precision = precision_;
    r.l2 = o_.cold ? "cold" : "warm";
    r.rows = rows;
    r.cols = cols;
    r.nnz = nnz;
    r.bytes = bytes;
    r.rel_error = err;
    r.ok = ok;
    // HISPARSE_BENCH_TIME_WRONG: time wrong results too (still marked so), for
    // upper-bound experiments that remove a cost at the price of correctness.
    static const bool time_wrong = std::getenv("HISPARSE_BENCH_TIME_WRONG") != nullptr;
    if (ok || time_wrong) {
      const tools::Timing tm = tools::time_calls(timed, tools::TimingPlan{o_.warmup, o_.warmup_ms, o_.runs},
                                                   o_.cold ? &flush_ : nullptr, host_work);
      r.median_ms = tm.median;
      r.mean_ms = tm.mean;
      r.std_ms = tm.std;
    }
    out_.push_back(r);
  }
  [[nodiscard]] std::vector<BenchRecord> take() { return std::move(out_); }

 private:
  std::string matrix_;
  const char* precision_;
  const BenchOptions& o_;
  DeviceBytes flush_;
  std::vector<BenchRecord> out_;
};

template <class V>
constexpr const char* precision_name() {
  return std::is_same_v<V, float> ? "f32" : "f64";
}

// The same CSR matrix bit for bit (values compared as bytes: -0 and NaN too).
template <class V>
bool same_csr(const Csr<V>& a, const Csr<V>& b) {
  return a.rows == b.rows && a.cols == b.cols && a.row_ptr == b.row_ptr && a.col == b.col &&
         a.val.size() == b.val.size() && (a.val.empty() || std::memcmp(a.val.data(), b.val.data(), a.val.size() * sizeof(V)) == 0);
}

}  // namespace

template <class V>
std::vector<BenchRecord> bench_spmv(const Matrix<V>& host, const std::string& name, const BenchOptions& o) {
  const double tol = std::is_same_v<V, float> ? 1e-4 : 1e-10;
  DeviceMatrix<V> a(host);
  ops::GpuSpmv<V> plan(a);
  const Csr<V> csr = to_csr(host);
  CusparseCsr<V> alg1(csr, CUSPARSE_SPMV_CSR_ALG1), alg2(csr, CUSPARSE_SPMV_CSR_ALG2);
  Recorder rec(name, precision_name<V>(), o);
  std::mt19937_64 rng(12345);
  std::uniform_real_distribution<double> u(-1, 1);
  std::optional<ops::GpuSpmv<V>> no_riders, no_wide_order, no_tiles;  // both orientations: their bytes are read first
  constexpr auto both = ops::SpmvOptions::Orientations::both;
  for (bool t : {false, true}) {
    if (a.transposed() != t) a.transpose();
    const Matrix<V> op = t ? host.transpose() : host;
    std::vector<V> x(op.cols());
    for (auto& v : x) v = static_cast<V>(u(rng));
    std::vector<V> ref(op.rows());
    ops::spmv_reference<V>(op, x, ref);
    DeviceBytes dx(std::max<std::size_t>(x.size(), 1) * sizeof(V)), dy(std::max<std::size_t>(ref.size(), 1) * sizeof(V));
    cuda_check(cudaMemcpy(dx.get(), x.data(), x.size() * sizeof(V), cudaMemcpyHostToDevice), "upload x");
    auto measure = [&](const char* op_name, const char* impl, std::uint64_t bytes, double err, auto&& timed,
                       bool host_work = false) {
      rec.record(op_name, impl, op.rows(), op.cols(), host.nnz(), bytes, err, err < tol, timed, host_work);
    };
    auto record = [&](const char* impl, std::uint64_t bytes, auto&& f) {
      // Poison y first: every row must be written (beta = 0).
      cuda_check(cudaMemset(dy.get(), 0xFF, dy.size()), "poison y");
      f();
      cuda_check(cudaDeviceSynchronize(), "spmv");
      measure(t ? "spmv_t" : "spmv", impl, bytes, rel_error<V>(dy, ref), f);
    };
    // The plan prepares A^T's part at the first call in that orientation.
    if (!plan.stats().prepared[t ? 1 : 0]) plan(dx.as<V>(), dy.as<V>(), V(1), V(0));
    // SpMV^T also reads the plan's column order of wide nodes, SpMV their row
    // windows, where it has them; and the output tiles' units of this orientation.
    const auto wide_bytes = [&](const ops::SpmvPlanStats& s) { return t ? s.wide_order_bytes : s.wide_rows_bytes; };
    const std::uint64_t plan_bytes = a.pool_bytes() + wide_bytes(plan.stats()) + plan.stats().tile_bytes[t ? 1 : 0];
    if (o.spmv) record("hisparse", plan_bytes, [&] { plan(dx.as<V>(), dy.as<V>(), V(1), V(0)); });
    if (o.spmv && plan.stats().tiles[t ? 1 : 0] > 0) {
      // What the output tiles bring: the leaf bins with atomics into y.
      if (!no_tiles) no_tiles.emplace(a, ops::SpmvOptions{.tiles = ops::SpmvOptions::Tiles::never, .orientations = both});
      record("hisparse-no-tiles", a.pool_bytes() + wide_bytes(no_tiles->stats()),
             [&] { (*no_tiles)(dx.as<V>(), dy.as<V>(), V(1), V(0)); });
    }
    if (o.spmv && t && plan.stats().wide_order_bytes > 0) {
      // What the column order brings: the same plan without (no extra memory).
      if (!no_wide_order) no_wide_order.emplace(a, ops::SpmvOptions{.wide_column_order = false, .orientations = both});
      record("hisparse-no-wide-order", a.pool_bytes(), [&] { (*no_wide_order)(dx.as<V>(), dy.as<V>(), V(1), V(0)); });
    }
    if (o.spmv && plan.stats().riders[t ? 1 : 0] > 0) {
      // What the riders bring, where there are any: the same plan without.
      if (!no_riders) no_riders.emplace(a, ops::SpmvOptions{.riders = ops::SpmvOptions::Riders::never, .orientations = both});
      record("hisparse-no-riders", a.pool_bytes() + wide_bytes(no_riders->stats()), [&] { (*no_riders)(dx.as<V>(), dy.as<V>(), V(1), V(0)); });
    }
    if (o.spmv && o.controllers) {
      // The paper's way: a full runtime traversal per call, under each controller.
      for (runtime::Controller c : runtime::all_controllers) {
        if (!ops::gpu_controller_available(c)) continue;  // device_launch=false build
        ops::GpuSpmv<V> rt_plan(a, ops::SpmvOptions{c, false});
        const std::string impl = "hisparse-runtime-" + std::string(runtime::to_string(c));
        record(impl.c_str(), a.pool_bytes(), [&] { rt_plan(dx.as<V>(), dy.as<V>(), V(1), V(0)); });
      }
    }
    if (o.spmv) {
      record("cusparse-alg1", alg1.bytes(), [&] { alg1.spmv(t, dx.as<V>(), dy.as<V>(), V(1), V(0)); });
      record("cusparse-alg2", alg2.bytes(), [&] { alg2.spmv(t, dx.as<V>(), dy.as<V>(), V(1), V(0)); });
    }
    if (t || !o.copy) continue;
    // Deep copies, allocation included: HiSparse's pool copy, its rebuild
    // through the runtime (every node allocated anew), and the three CSR
    // arrays copied the same way. Each copy is
    // checked first: an SpMV of the HiSparse copy against the reference, the
    // CSR arrays byte for byte.
    auto record_copy = [&](const char* impl, std::uint64_t bytes, auto&& make, auto&& error_of) {
      measure("copy", impl, bytes, error_of(make()), [&] { (void)make(); }, true);
    };
    auto spmv_error = [&](const DeviceMatrix<V>& c) {
      cuda_check(cudaMemset(dy.get(), 0xFF, dy.size()), "poison y");
      ops::spmv(c, dx.as<V>(), dy.as<V>());
      return rel_error<V>(dy, ref);
    };
    // On a context (what a program that calls ops repeatedly uses), and the
    // rebuild also in the call-local form, which sets everything up per call.
    ops::Context ctx;
    record_copy("hisparse", a.pool_bytes(), [&] { return ops::copy(ctx, a); }, spmv_error);
    record_copy("hisparse-rebuild", a.pool_bytes(), [&] { return ops::copy(ctx, a, ops::CopyOptions{true}); }, spmv_error);
    record_copy("hisparse-rebuild-no-context", a.pool_bytes(), [&] { return ops::copy(a, ops::CopyOptions{true}); },
                spmv_error);
    if (o.controllers)
      for (runtime::Controller c : runtime::all_controllers) {
        if (!ops::gpu_controller_available(c)) continue;
        const std::string impl = "hisparse-rebuild-" + std::string(runtime::to_string(c));
        record_copy(impl.c_str(), a.pool_bytes(), [&] { return ops::copy(ctx, a, ops::CopyOptions{true, c}); },
                    spmv_error);
      }
    record_copy("csr-copy", alg1.bytes(), [&] { return alg1.arrays().copy(); },
                [&](const CsrArrays<V>& c) { return alg1.arrays().same_bytes(c) ? 0.0 : INFINITY; });
  }
  return rec.take();
}

template <class V>
std::vector<BenchRecord> bench_add(const Matrix<V>& ha, const Matrix<V>& hb, const std::string& name,
                                   const BenchOptions& o) {
  const double tol = std::is_same_v<V, float> ? 1e-6 : 1e-14;  // one product and one sum per entry on both sides
  const V alpha = V(1.5), beta = V(-0.5);
  DeviceMatrix<V> a(ha), b(hb);
  const CsrArrays<V> ca = CsrArrays<V>::upload(to_csr(ha)), cb = CsrArrays<V>::upload(to_csr(hb));
  const CusparseHandle handle;
  ops::Context ctx;
  Recorder rec(name, precision_name<V>(), o);
  for (bool t : {false, true}) {
    if (a.transposed() != t) a.transpose();
    if (b.transposed() != t) b.transpose();
    // cuSPARSE's operands for A^T + B^T without the conversion (the paper's
    // Figure 6c); the conversion itself is timed in the csr2csc record.
    const CsrArrays<V> cat = t ? csr_transpose(handle.get(), ca) : CsrArrays<V>{};
    const CsrArrays<V> cbt = t ? csr_transpose(handle.get(), cb) : CsrArrays<V>{};
    const CsrArrays<V>& xa = t ? cat : ca;
    const CsrArrays<V>& xb = t ? cbt : cb;
    const Csr<V> want = csrgeam2(handle.get(), xa, xb, alpha, beta).download();
    // nnz: the entries read; the result's count is in the bytes.
    auto measure = [&](const char* impl, std::uint64_t bytes, double err, auto&& timed) {
      rec.record(t ? "add_t" : "add", impl, a.rows(), a.cols(), ha.nnz() + hb.nnz(), bytes, err, err <= tol, timed, true);
    };
    // Bytes: both operands and the result, each implementation its own.
    // On a context (its runtime, counters and pool kept between calls), and
    // in the call-local form, which sets everything up per call.
    const DeviceMatrix<V> c = ops::add(ctx, a, b, alpha, beta);
    const std::uint64_t own_bytes = a.pool_bytes() + b.pool_bytes() + c.pool_bytes();
    measure("hisparse", own_bytes, csr_difference(to_csr(c.download()), want),
            [&] { (void)ops::add(ctx, a, b, alpha, beta); });
    measure("hisparse-no-context", own_bytes, csr_difference(to_csr(ops::add(a, b, alpha, beta).download()), want),
            [&] { (void)ops::add(a, b, alpha, beta); });
    {
      // The two-phase add's second phase: the values alone, one kernel that
      // a graph can replay; what a solver pays per call once planned.
      ops::AddPlan<V> plan(ctx, a, b, alpha, beta);
      plan.compute(a, b, alpha, beta);
      measure("hisparse-plan-values", own_bytes + plan.bytes(),
              csr_difference(to_csr(plan.result().download(ctx.stream())), want),
              [&] { plan.compute(a, b, alpha, beta); });
    }
    if (o.controllers)
      for (runtime::Controller ctl : runtime::all_controllers) {
        if (!ops::gpu_controller_available(ctl)) continue;
        const std::string impl = "hisparse-" + std::string(runtime::to_string(ctl));
        const ops::AddOptions ao{ctl};
        measure(impl.c_str(), own_bytes, csr_difference(to_csr(ops::add(ctx, a, b, alpha, beta, ao).download()), want),
                [&] { (void)ops::add(ctx, a, b, alpha, beta, ao); });
      }
    const std::uint64_t csr_bytes = ca.bytes() + cb.bytes() + (want.rows + 1) * 4 + want.nnz() * (4 + sizeof(V));
    if (!t) {
      measure("cusparse-csrgeam2", csr_bytes, 0.0, [&] { (void)csrgeam2(handle.get(), ca, cb, alpha, beta); });
      continue;
    }
    measure("cusparse-csrgeam2+csr2csc", csr_bytes, 0.0, [&] {
      const CsrArrays<V> at = csr_transpose(handle.get(), ca), bt = csr_transpose(handle.get(), cb);
      (void)csrgeam2(handle.get(), at, bt, alpha, beta);
    });
    measure("cusparse-csrgeam2-pretransposed", csr_bytes, 0.0,
            [&] { (void)csrgeam2(handle.get(), cat, cbt, alpha, beta); });
  }
  return rec.take();
}

template <class V>
std::vector<BenchRecord> bench_conversion_gpu(const Matrix<V>& host, const std::string& name, const BenchOptions& o,
                                              int runs) {
  constexpr auto max32 = static_cast<std::uint64_t>(std::numeric_limits<std::int32_t>::max());
  if (host.rows() > max32 || host.cols() > max32 || host.nnz() > max32) return {};
  runs = std::max(runs, 1);
  // The input: the matrix's CSR arrays, on the device before anything is timed.
  const Csr<V> csr = to_csr(host);
  const CsrArrays<V> ca = CsrArrays<V>::upload(csr);
  const ops::DeviceCsrView<V, std::int32_t> view{csr.rows, csr.cols, ca.nnz, ca.row_ptr.template as<const std::int32_t>(),
                                                 ca.col.template as<const std::int32_t>(), ca.val.template as<const V>()};
  const BuildOptions options{host.node_size(), (host.content().header().flags & pool_flag_wide) != 0};
  const std::uint64_t nnz = csr.nnz();

  // Through a context, as a user converting more than once would: the
  // result and the work arrays from its stream-ordered pool, which keeps what
  // it has mapped (the calls after the warm-up map nothing). The forms
  // without one ("-stream") map the result and the large work arrays at each
  // call (cudaMalloc) and are timed beside them.
  ops::Context ctx;
  // CSR -> HiSparse, checked byte for byte against the host's build.
  ops::ConvertStats build_stats;
  DeviceMatrix<V> built = ops::build_device_matrix(ctx, view, options, &build_stats);
  const bool build_ok = same_matrix(built.download(), host);
  // The other directions start from the right matrix whatever the check said.
  const DeviceMatrix<V> a = build_ok ? std::move(built) : DeviceMatrix<V>(host);
  if (!build_ok) built = DeviceMatrix<V>();

  // The unit: one HiSparse SpMV of this matrix (its plan; warm L2, median,
  // the plan and timing bench_spmv uses).
  double spmv_ms = 0;
  {
    ops::GpuSpmv<V> plan(a);
    std::mt19937_64 rng(12345);
    std::uniform_real_distribution<double> u(-1, 1);
    std::vector<V> x(a.cols());
    for (auto& v : x) v = static_cast<V>(u(rng));
    DeviceBytes dx(std::max<std::size_t>(x.size(), 1) * sizeof(V)), dy(std::max<std::size_t>(a.rows(), 1) * sizeof(V));
    cuda_check(cudaMemcpy(dx.get(), x.data(), x.size() * sizeof(V), cudaMemcpyHostToDevice), "upload x");
    spmv_ms = tools::time_calls([&] { plan(dx.as<V>(), dy.as<V>(), V(1), V(0)); },
                                tools::TimingPlan{o.warmup, o.warmup_ms, o.runs}, nullptr)
                  .median;
  }

  std::vector<BenchRecord> out;
  auto record = [&](const char* impl, const char* conversion, std::uint64_t bytes, bool ok, const tools::Timing& t,
                    std::uint64_t work) {
    BenchRecord r;
    r.matrix = name;
    r.op = "convert";
    r.impl = impl;
    r.conversion = conversion;
    r.precision = precision_name<V>();
    r.l2 = "warm";
    r.rows = host.rows();
    r.cols = host.cols();
    r.nnz = nnz;
    r.bytes = bytes;
    r.ok = ok;
    r.rel_error = ok ? 0.0 : INFINITY;
    if (ok) {
      r.median_ms = t.median;
      r.mean_ms = t.mean;
      r.std_ms = t.std;
      r.gpu_stats = true;
      r.spmv_ms = spmv_ms;
      r.spmv_equivalents = spmv_ms > 0 ? t.median / spmv_ms : 0.0;
      r.mentries_per_s = t.median > 0 ? double(nnz) / (t.median * 1e3) : 0.0;
      r.peak_work_bytes = work;
    }
    out.push_back(std::move(r));
  };
  const tools::Timing none{0, 0, 0};

  // CSR -> HiSparse: allocation of the result included, as in the copies.
  record("hisparse-gpu", "csr->hisparse", a.pool_bytes(), build_ok,
         build_ok ? tools::time_allocating_calls([&] { return ops::build_device_matrix(ctx, view, options); }, runs)
                  : none,
         build_stats.peak_work_bytes);
  record("hisparse-gpu-stream", "csr->hisparse", a.pool_bytes(), build_ok,
         build_ok ? tools::time_allocating_calls([&] { return ops::build_device_matrix(view, options); }, runs) : none,
         build_stats.peak_work_bytes);

  // HiSparse -> CSR into arrays allocated beforehand, checked against to_csr.
  CsrArrays<V> back = CsrArrays<V>::allocate(a.rows(), a.cols(), a.nnz());
  auto* rp = back.row_ptr.template as<std::int32_t>();
  auto* ci = back.col.template as<std::int32_t>();
  auto* va = back.val.template as<V>();
  ops::ConvertStats extract_stats;
  cuda_check(cudaMemset(back.row_ptr.get(), 0xFF, back.row_ptr.size()), "poison CSR");
  ops::to_device_csr<V, std::int32_t>(ctx, a, rp, ci, va, &extract_stats);
  const bool extract_ok = same_csr(back.download(), csr);
  const tools::TimingPlan plan{1, 0, runs};
  record("hisparse-gpu-to-csr", "hisparse->csr", ca.bytes(), extract_ok,
         extract_ok ? tools::time_calls([&] { ops::to_device_csr<V, std::int32_t>(ctx, a, rp, ci, va); }, plan, nullptr, true)
                    : none,
         extract_stats.peak_work_bytes);
  record("hisparse-gpu-to-csr-stream", "hisparse->csr", ca.bytes(), extract_ok,
         extract_ok ? tools::time_calls([&] { ops::to_device_csr<V, std::int32_t>(a, rp, ci, va); }, plan, nullptr, true)
                    : none,
         extract_stats.peak_work_bytes);

  // The baseline: cuSPARSE's CSR -> CSC (the transpose's CSR) of the same
  // arrays, its result and work buffer allocated inside the call as
  // HiSparse's build does, from the same context's allocator.
  const CusparseHandle handle;
  std::size_t work = 0;
  const bool csc_ok = same_csr(csr_transpose(handle.get(), ca, nullptr, &work).download(), to_csr(host.transpose()));
  record("cusparse-csr2csc", "csr->csc", ca.bytes(), csc_ok,
         csc_ok ? tools::time_allocating_calls(
                      [&] { return csr_transpose(handle.get(), ca, ctx.stream(), nullptr, ctx.allocator()); }, runs)
                : none,
         work);
  return out;
}

template std::vector<BenchRecord> bench_conversion_gpu(const Matrix<float>&, const std::string&, const BenchOptions&,
                                                       int);
template std::vector<BenchRecord> bench_conversion_gpu(const Matrix<double>&, const std::string&, const BenchOptions&,
                                                       int);
template std::vector<BenchRecord> bench_add(const Matrix<float>&, const Matrix<float>&, const std::string&,
                                            const BenchOptions&);
template std::vector<BenchRecord> bench_add(const Matrix<double>&, const Matrix<double>&, const std::string&,
                                            const BenchOptions&);
template std::vector<BenchRecord> bench_spmv(const Matrix<float>&, const std::string&, const BenchOptions&);
template std::vector<BenchRecord> bench_spmv(const Matrix<double>&, const std::string&, const BenchOptions&);

}  // namespace hisparse::cli
