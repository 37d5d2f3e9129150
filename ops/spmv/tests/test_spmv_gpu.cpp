// GPU SpMV against the host reference: every SuiteSparse matrix, random and
// extreme matrices, N and T, alpha/beta (beta = 0 with y poisoned by NaN),
// f32 and f64, every controller, with and without a plan.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <set>

#include "hisparse/formats/builder.hpp"
#include "hisparse/formats/device_matrix.hpp"
#include "hisparse/formats/matrix_market.hpp"
#include "hisparse/formats/traverse.hpp"
#include "hisparse/formats/validate.hpp"
#include "hisparse/ops/gpu_controllers.hpp"
#include "hisparse/ops/spmv_gpu.hpp"
#include "hisparse/ops/spmv_reference.hpp"
#include "support/matrices_dir.hpp"
#include "support/random_matrix.hpp"
#include "support/wide_matrix.hpp"
#include "support/test_seed.hpp"

using namespace hisparse;
using namespace hisparse::testing;
namespace fs = std::filesystem;

namespace {

template <class V>
struct DeviceVector {
  DeviceBytes bytes;
  std::size_t n;
  explicit DeviceVector(const std::vector<V>& h) : bytes(std::max<std::size_t>(h.size(), 1) * sizeof(V)), n(h.size()) {
    cuda_check(cudaMemcpy(bytes.get(), h.data(), n * sizeof(V), cudaMemcpyHostToDevice), "upload");
  }
  std::vector<V> get() const {
    std::vector<V> h(n);
    cuda_check(cudaMemcpy(h.data(), bytes.get(), n * sizeof(V), cudaMemcpyDeviceToHost), "download");
    return h;
  }
  V* ptr() const { return bytes.as<V>(); }
};

// Per row, |alpha| * sum |scale * a * x| + |beta * y|: the size of the terms
// whose rounding the GPU's reordered sums may differ in.
template <class V>
std::vector<double> magnitude(const Matrix<V>& a, const std::vector<V>& x, const std::vector<V>& y, V alpha, V beta) {
  const Coo<V> coo = to_coo(a);  // logical entries, scale applied
  std::vector<double> m(y.size(), 0.0);
  for (std::size_t k = 0; k < coo.nnz(); ++k) m[coo.row[k]] += std::abs(double(coo.val[k]) * double(x[coo.col[k]]));
  for (std::size_t i = 0; i < y.size(); ++i)
    m[i] = std::abs(double(alpha)) * m[i] + (beta == V(0) ? 0.0 : std::abs(double(beta) * double(y[i])));
  return m;
}

template <class V>
void check(const Matrix<V>& host, ops::GpuSpmv<V>& plan, const DeviceMatrix<V>& dev, V alpha, V beta,
           std::mt19937_64& rng, const std::string& what) {
  SCOPED_TRACE(what + " alpha " + std::to_string(double(alpha)) + " beta " + std::to_string(double(beta)) +
               (dev.transposed() ? " T" : " N"));
  const Matrix<V> a = host.with_state(dev.transposed(), dev.scale());
  std::vector<V> x(a.cols()), y(a.rows());
  for (auto& v : x) v = random_value<V>(rng);
  for (auto& v : y) v = beta == V(0) ? std::numeric_limits<V>::quiet_NaN() : random_value<V>(rng);
  DeviceVector<V> dx(x), dy(y);
  std::vector<V> ref = y;
  ops::spmv_reference<V>(a, x, ref, alpha, beta);
  const auto mag = magnitude(a, x, y, alpha, beta);
  plan(dx.ptr(), dy.ptr(), alpha, beta);
  cuda_check(cudaDeviceSynchronize(), "spmv");
  const auto got = dy.get();
  const double eps = std::is_same_v<V, float> ? 1e-5 : 1e-13;
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_FALSE(std::isnan(double(got[i]))) << "row " << i << " is NaN";
    ASSERT_NEAR(double(got[i]), double(ref[i]), eps * (mag[i] + 1e-30) + 1e-30) << "row " << i;
  }
}

template <class V>
void check_all_states(const Matrix<V>& host, ops::SpmvOptions opt, std::mt19937_64& rng, const std::string& what) {
  DeviceMatrix<V> dev(host);
  ops::GpuSpmv<V> plan(dev, opt);
  for (bool t : {false, true}) {
    check<V>(host, plan, dev, V(1), V(0), rng, what);
    check<V>(host, plan, dev, V(2), V(0.5), rng, what);
    dev.scale_by(V(-1.5));
    check<V>(host, plan, dev, V(0.5), V(-1), rng, what + " scaled");
    dev.scale_by(V(1) / V(-1.5));
    dev.transpose();  // the same plan serves A^T: the state is read per call
    (void)t;
  }
}

// The column runs that the plan's wide order must give (SpmvPlanStats::
// wide_column_runs), from the host content alone: each wide node's entries in
// row-major order, cut into chunks of spmv_wide_chunk_entries, the distinct columns per chunk.
// A wrong order still sums to the right y (any permutation does); it shows
// here. The matrix must be wide at every non-empty d^2 x d^2 block.
template <class V>
std::uint64_t expected_column_runs(const Matrix<V>& m) {
  const std::uint32_t span = 2 * m.content().shape.log2_node_size;
  const index_t local = (index_t{1} << span) - 1;
  std::map<std::pair<index_t, index_t>, std::vector<std::pair<index_t, index_t>>> nodes;
  for_each_content_entry(m.content(), [&](index_t r, index_t c, V) {
    nodes[{r >> span, c >> span}].push_back({r & local, c & local});
  });
  EXPECT_EQ(validate(m.content()).coow, nodes.size()) << "every non-empty block must be one wide node";
  std::uint64_t runs = 0;
  for (auto& [block, entries] : nodes) {
    std::sort(entries.begin(), entries.end());
    constexpr std::size_t chunk = ops::spmv_wide_chunk_entries;
    for (std::size_t first = 0; first < entries.size(); first += chunk) {
      std::set<index_t> cols;
      for (std::size_t k = first; k < std::min(entries.size(), first + chunk); ++k) cols.insert(entries[k].second);
      runs += cols.size();
    }
  }
  return runs;
}

}  // namespace

TEST(SpmvGpu, EveryRealMatrix) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  const auto files = real_matrix_files();
  ASSERT_GE(files.size(), 20u);
  // f64 in the standard format, f32 at d = 32 by the builder's default (wide
  // nodes where the rule finds them smaller: most of these matrices have some).
  for (const auto& f : files) {
    check_all_states(build_standard(read_matrix_market<double>(f)), {}, rng, f.filename().string() + " f64 standard");
    check_all_states(build_matrix(read_matrix_market<float>(f), 32), {}, rng, f.filename().string() + " f32 d32");
  }
}

TEST(SpmvGpu, EveryControllerWithAndWithoutPlan) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  for (runtime::Controller c : runtime::all_controllers) {
    if (!ops::gpu_controller_available(c)) continue;  // device_launch=false build
    for (bool reuse : {false, true}) {
      const std::string cfg = std::string(runtime::to_string(c)) + (reuse ? " plan" : " runtime");
      ops::SpmvOptions opt{c, reuse};
      const auto rect = random_coo<double>(3000, 1700, 30000, rng);
      check_all_states(build_matrix(rect, 16), opt, rng, cfg + " rect f64");
      check_all_states(build_standard(rect, 16), opt, rng, cfg + " rect f64 standard");
      check_all_states(build_matrix(clustered_coo<float>(900, 900, 6, 200, 0.9, rng)), opt, rng, cfg + " clustered f32");
      check_all_states(build_matrix(read_matrix_market<double>(matrices_dir() / "rajat01.mtx")), opt,
                       rng, cfg + " rajat01");
    }
  }
}

// The runtime starts with a sixteenth of the queue capacity that never
// overflows. Scattered one-entry leaves, 400 k of them over 2^18 leaf-parent
// blocks (about 205 k non-empty, each at least one item), overflow it under
// the host loop (a whole level enqueued before the next runs): a call without a
// plan runs again with the full capacity and the result is right. A plan
// lists its leaves without the runtime: no rerun, and it keeps its lists,
// not queues (at the full capacity about 28 bytes per 16-byte pool slot in
// each of five queues: eight times the pool).
TEST(SpmvGpu, QueuesGrowWhenFullAndPlansKeepNone) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  const Matrix<float> host = build_standard(random_coo<float>(1u << 23, 1u << 23, 400000, rng), 128);
  DeviceMatrix<float> dev(host);
  {
    // The plan's kernels loaded first (lazy module loading takes device
    // memory on a kernel's first launch, which is not the plan's).
    const Matrix<float> warm = build_standard(random_coo<float>(1000, 1000, 5000, rng), 16);
    DeviceMatrix<float> dwarm(warm);
    ops::GpuSpmv<float> p(dwarm, ops::SpmvOptions{.orientations = ops::SpmvOptions::Orientations::both});
    check<float>(warm, p, dwarm, 1.0f, 0.0f, rng, "warm-up");
  }
  std::size_t free_before = 0, free_after = 0, total = 0;
  cuda_check(cudaDeviceSynchronize(), "sync");
  cuda_check(cudaMemGetInfo(&free_before, &total), "cudaMemGetInfo");
  ops::SpmvOptions opt;
  opt.controller = runtime::Controller::host_loop;
  ops::GpuSpmv<float> plan(dev, opt);
  cuda_check(cudaDeviceSynchronize(), "sync");
  cuda_check(cudaMemGetInfo(&free_after, &total), "cudaMemGetInfo");
  EXPECT_EQ(plan.stats().traversal_reruns, 0u);
  const auto kept = static_cast<std::int64_t>(free_before) - static_cast<std::int64_t>(free_after);
  EXPECT_LT(kept, static_cast<std::int64_t>(2 * dev.pool_bytes() + (64u << 20))) << "pool " << dev.pool_bytes();
  check<float>(host, plan, dev, 1.0f, 0.0f, rng, "scattered standard");
  dev.transpose();
  check<float>(host, plan, dev, 2.0f, 0.5f, rng, "scattered standard");
  // Without a plan: the first call reruns (y restored where beta != 0), later
  // calls run on the full queues.
  opt.reuse_traversal = false;
  dev.transpose();
  ops::GpuSpmv<float> direct(dev, opt);
  check<float>(host, direct, dev, 1.5f, -0.5f, rng, "scattered standard, no plan");
  EXPECT_EQ(direct.stats().traversal_reruns, 1u);
  check<float>(host, direct, dev, 1.0f, 0.0f, rng, "scattered standard, no plan");
  EXPECT_EQ(direct.stats().traversal_reruns, 1u);
  ops::GpuSpmv<float> direct_beta0(dev, opt);
  check<float>(host, direct_beta0, dev, 2.0f, 0.0f, rng, "scattered standard, no plan, beta 0");
  EXPECT_EQ(direct_beta0.stats().traversal_reruns, 1u);
  // A matrix whose leaves fit the reduced queues runs without a rerun.
  const Matrix<float> small = build_matrix(read_matrix_market<float>(matrices_dir() / "rajat01.mtx"));
  DeviceMatrix<float> dsmall(small);
  ops::GpuSpmv<float> direct_small(dsmall, opt);
  check<float>(small, direct_small, dsmall, 1.0f, 0.0f, rng, "rajat01, no plan");
  EXPECT_EQ(direct_small.stats().traversal_reruns, 0u);
}

// SpmvOptions::profile: a one-shot call's runtime statistics (last_run())
// carry a profile whose items agree with the run's counts, and profiling
// does not change the result.
TEST(SpmvGpu, ProfiledOneShotRuns) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  const Matrix<double> host = build_matrix(read_matrix_market<double>(matrices_dir() / "bcsstk13.mtx"));
  for (runtime::Controller c : runtime::all_controllers) {
    if (!ops::gpu_controller_available(c)) continue;
    SCOPED_TRACE(std::string(runtime::to_string(c)));
    ops::SpmvOptions opt{c, false};
    opt.profile = true;
    check_all_states(host, opt, rng, "bcsstk13 profiled");
    DeviceMatrix<double> dev(host);
    ops::GpuSpmv<double> plan(dev, opt);
    DeviceVector<double> dx(std::vector<double>(dev.cols(), 1.0)), dy(std::vector<double>(dev.rows(), 0.0));
    plan(dx.ptr(), dy.ptr());
    cuda_check(cudaDeviceSynchronize(), "spmv");
    const runtime::RunStats& s = plan.last_run();
    ASSERT_FALSE(s.profile.empty());
    std::uint64_t items = 0, batches = 0;
    for (const auto& p : s.profile.procedures) {
      items += p.items;
      batches += p.batches;
      if (p.items > 0) {
        EXPECT_GT(p.batches, 0u) << p.name;
        EXPECT_LE(p.last_ms, s.profile.device_ms) << p.name;
      }
    }
    EXPECT_EQ(items, s.total_items());
    EXPECT_GT(s.profile.procedures.front().items, 0u) << "the root is an inner node";
    EXPECT_EQ(s.profile.procedures.front().name, "spmv-inner");
    std::uint64_t in_windows = 0;
    for (const auto& w : s.profile.fill) in_windows += w.batches;
    EXPECT_EQ(in_windows, batches);
  }
  // Without profile (the default), a one-shot run records none.
  DeviceMatrix<double> dev(host);
  ops::GpuSpmv<double> plain(dev, ops::SpmvOptions{.reuse_traversal = false});
  DeviceVector<double> dx(std::vector<double>(dev.cols(), 1.0)), dy(std::vector<double>(dev.rows(), 0.0));
  plain(dx.ptr(), dy.ptr());
  EXPECT_TRUE(plain.last_run().profile.empty());
  EXPECT_GT(plain.last_run().total_items(), 0u);
}

// Wide (COOW) nodes: scattered patterns where they are chosen, one with
// more than one chunk (128 entries) per node, one whose root is a wide node,
// and heavy rows and columns (the warp merge of equal outputs), under the
// plan and the runtime.
TEST(SpmvGpu, WideNodes) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  // Heavy lines: a few rows and columns with an entry in most positions of a
  // sparse pattern, like the circuit family.
  auto heavy_lines = [&](index_t n, std::size_t scattered) {
    Coo<double> c = random_coo<double>(n, n, scattered, rng);
    for (index_t line : {index_t{3}, n / 2, n - 1})
      for (index_t k = 0; k < n; k += 3) {
        c.row.push_back(line), c.col.push_back(k), c.val.push_back(random_value<double>(rng));
        c.row.push_back(k), c.col.push_back(line), c.val.push_back(random_value<double>(rng));
      }
    return c;
  };
  // A power-law-like corner: 40 000^2 at d = 128 is 3 x 3 wide nodes; node
  // (0, 0) gets heavy rows and columns (an entry every 9th position) among
  // 20 000 scattered entries of its own, so it holds over forty chunks of spmv_wide_chunk_entries
  // and columns whose runs cross threads, warps and chunks in the plan's
  // column order.
  auto power_corner = [&](auto value_tag, std::size_t scattered) {
    using V = decltype(value_tag);
    Coo<V> c = random_coo<V>(40000, 40000, scattered, rng);
    std::uniform_int_distribution<index_t> corner(0, 16383);
    for (int k = 0; k < 20000; ++k) c.push(corner(rng), corner(rng), random_value<V>(rng));
    for (index_t line : {index_t{0}, index_t{1}, index_t{77}, index_t{16383}})
      for (index_t k = line % 9; k < 16384; k += 9) {
        c.push(line, k, random_value<V>(rng));
        c.push(k, line, random_value<V>(rng));
      }
    return c;
  };
  // Under the runtime, the plan, and the plan without the wide nodes' column
  // order (SpMV^T then sums in shared memory or adds per entry).
  for (int mode = 0; mode < 3; ++mode) {
    ops::SpmvOptions opt{runtime::Controller::persistent, mode != 0};
    opt.wide_column_order = mode == 1;
    const std::string how = mode == 0 ? " runtime" : mode == 1 ? " plan" : " plan, no column order";
    check_all_states(build_wide(random_coo<double>(3000, 1700, 30000, rng), 16), opt, rng, "random d16" + how);
    check_all_states(build_wide(random_coo<float>(200000, 150000, 400000, rng), 128), opt, rng, "random d128 f32" + how);
    // f64, d = 128 (the R-MAT family's shape): without the column order its
    // SpMV^T takes the warp chunks (d^2 doubles exceed the shared accumulator).
    check_all_states(build_wide(random_coo<double>(150000, 200000, 300000, rng), 128), opt, rng, "random d128 f64" + how);
    check_all_states(build_wide(random_coo<double>(4096, 4096, 8000, rng), 64), opt, rng, "wide root, chunks" + how);
    check_all_states(build_wide(heavy_lines(60000, 20000), 32), opt, rng, "heavy lines" + how);
    check_all_states(build_wide(power_corner(0.0, 60000), 128), opt, rng, "power corner f64" + how);
    check_all_states(build_wide(power_corner(0.0f, 60000), 128), opt, rng, "power corner f32" + how);
    // d = 256: a wide node's 65536 columns exceed the shared accumulator and
    // fill the column order's 16-bit keys.
    check_all_states(build_wide(random_coo<float>(200000, 200000, 60000, rng), 256), opt, rng, "random d256 f32" + how);
  }
  // The plan keeps the column order exactly where it has wide nodes and may,
  // and the order groups each chunk's columns.
  {
    const Matrix<double> host = build_wide(power_corner(0.0, 60000), 128);
    ASSERT_EQ(validate(host.content()).coow, 9u) << "every node of the corner case must be wide";
    DeviceMatrix<double> dev(host);
    const ops::GpuSpmv<double> plan(dev, ops::SpmvOptions{.orientations = ops::SpmvOptions::Orientations::both});  // the order is A^T's
    EXPECT_GT(plan.stats().wide_order_bytes, 0u);
    EXPECT_EQ(plan.stats().wide_column_runs, expected_column_runs(host));
    ops::SpmvOptions off;
    off.wide_column_order = false;
    EXPECT_EQ(ops::GpuSpmv<double>(dev, off).stats().wide_order_bytes, 0u);
    DeviceMatrix<double> standard(build_standard(power_corner(0.0, 60000)));
    EXPECT_EQ(ops::GpuSpmv<double>(standard).stats().wide_order_bytes, 0u);
  }
  // d = 256, f64: 16-bit keys at full width, several chunks per node, and
  // the largest column (65535 inside its node) in the last, padded chunk,
  // where it ties with the padding's key.
  {
    Coo<double> c = random_coo<double>(140000, 140000, 120000, rng);
    for (index_t k = 0; k < 140000; k += 70) {
      c.push(k, 65535, random_value<double>(rng));
      c.push(k, 131071, random_value<double>(rng));
    }
    const Matrix<double> host = build_wide(c, 256);
    check_all_states(host, {}, rng, "d256 f64, largest columns");
    DeviceMatrix<double> dev(host);
    EXPECT_EQ(ops::GpuSpmv<double>(dev, ops::SpmvOptions{.orientations = ops::SpmvOptions::Orientations::both}).stats().wide_column_runs, expected_column_runs(host));
  }
  // SpMV's row windows (spmv_plan_wide_rows.cuh): a band of rows 5000-6999
  // with 80 000 scattered entries (all four nodes stay wide: hisparse info)
  // gives its windows over 256 chunk pieces each, so each takes more than
  // one unit (wide_unit_pieces): in f32 one window of 4096 rows (4096-8191,
  // three units), in f64 two of 2048 (4096-6143 and 6144-8191), which the
  // band's chunks cross. 30 001 rows: the last window's flush takes the
  // scalar tail of flush_outputs (y is 16-byte aligned, the rows not a
  // multiple of 4).
  for (int precision = 0; precision < 2; ++precision) {
    auto band = [&](auto value_tag) {
      using V = decltype(value_tag);
      Coo<V> c = random_coo<V>(30001, 30000, 20000, rng);
      std::uniform_int_distribution<index_t> row(5000, 6999), col(0, 29999);
      for (int k = 0; k < 80000; ++k) c.push(row(rng), col(rng), random_value<V>(rng));
      return build_wide(c, 128);
    };
    auto check = [&](const auto& host, const char* what) {
      using V = typename std::decay_t<decltype(host)>::value_type;
      check_all_states(host, {}, rng, what);
      DeviceMatrix<V> dev(host);
      const ops::GpuSpmv<V> plan(dev);
      const std::uint64_t window_rows = sizeof(V) == 4 ? 4096 : 2048;
      const std::uint64_t windows = (host.rows() + window_rows - 1) / window_rows;
      EXPECT_EQ(validate(host.content()).coow, 4u) << what;
      EXPECT_GT(plan.stats().wide_rows_bytes, 0u) << what;
      EXPECT_GT(plan.stats().wide_row_units, windows) << what << ": a window must take several units";
    };
    if (precision == 0) check(band(0.0f), "row windows f32");
    else check(band(0.0), "row windows f64");
  }
  // Sparse wide nodes (d = 256, about 400 entries a node): a chunk's 128
  // entries spread over its node's 32 windows of 2048 rows (f64), about 8
  // pieces a chunk: SpMV keeps the warp chunks, the plan no row windows.
  {
    const Matrix<double> sparse = build_wide(random_coo<double>(400000, 400000, 20000, rng), 256);
    ASSERT_GT(validate(sparse.content()).coow, 40u);
    check_all_states(sparse, {}, rng, "sparse wide nodes, no row windows");
    DeviceMatrix<double> dev(sparse);
    EXPECT_EQ(ops::GpuSpmv<double>(dev).stats().wide_rows_bytes, 0u);
  }
}

TEST(SpmvGpu, ExtremeShapes) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  for (bool reuse : {false, true}) {
    ops::SpmvOptions opt{runtime::Controller::persistent, reuse};
    check_all_states(build_matrix(Coo<double>{500, 300, {}, {}, {}}), opt, rng, "empty");
    check_all_states(build_matrix(Coo<float>{1, 1, {0}, {0}, {3.0f}}), opt, rng, "1x1");
    check_all_states(build_matrix(Coo<double>{100000, 70000, {99999}, {69999}, {2.0}}, 4), opt, rng, "one entry, depth 9");
    Coo<float> dense{300, 260, {}, {}, {}};
    for (index_t r = 0; r < 300; ++r)
      for (index_t c = 0; c < 260; ++c) dense.push(r, c, random_value<float>(rng));
    check_all_states(build_matrix(dense), opt, rng, "fully dense");
    check_all_states(build_matrix(dense, 8), opt, rng, "fully dense d8");
    // Extremely uneven: one full row, one full column, a sprinkle elsewhere.
    Coo<double> uneven = random_coo<double>(20000, 20000, 2000, rng);
    for (index_t k = 0; k < 20000; ++k) {
      uneven.push(7, k, random_value<double>(rng));
      uneven.push(k, 19999, random_value<double>(rng));
    }
    check_all_states(build_matrix(uneven), opt, rng, "uneven rows and columns");
    check_all_states(build_matrix(random_coo<double>(40, 100000, 5000, rng), 256), opt, rng, "wide d256");
    // One block row of thousands of one- and two-entry leaves (and its
    // transpose, one block column): the plan's output-block runs hold up to
    // 128 items, in batches of 32, and a block gives several runs.
    Coo<float> strip = random_coo<float>(300, 400000, 1000, rng);
    for (int k = 0; k < 20000; ++k) strip.push(rng() % 128, rng() % 400000, random_value<float>(rng));
    check_all_states(build_matrix(strip), opt, rng, "block row of small leaves");
    check_all_states(build_matrix(random_coo<float>(100000, 3, 5000, rng), 2), opt, rng, "tall d2");
  }
}

// The one-shot traversal's leaf-parent items (LeafParentProcedure): a 2D
// Laplacian's block rows (leaves of one entry summed by their lane, of 16
// to 64 entries by the warp into one accumulator per block row, over several
// parts of 32 children), a band whose 436-entry leaves take the warp several
// steps (on a matrix large enough for chunks of 1 024 entries), dense leaves
// and leaves larger than a small matrix's chunk (128) handed to their bins
// from a leaf-parent, trees of one level (the root a lane's, a warp's, a
// large or a dense leaf) and of two (the root a leaf-parent), node sizes 2
// and 256, under every controller, N and T. A profiled host-loop call shows
// which procedures ran.
TEST(SpmvGpu, LeafParentPaths) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  auto laplacian = [&](index_t g) {
    Coo<double> m{g * g, g * g, {}, {}, {}};
    for (index_t i = 0; i < g; ++i)
      for (index_t j = 0; j < g; ++j) {
        const index_t r = i * g + j;
        m.push(r, r, 4.0 + random_value<double>(rng));
        if (j > 0) m.push(r, r - 1, random_value<double>(rng));
        if (j + 1 < g) m.push(r, r + 1, random_value<double>(rng));
        if (i > 0) m.push(r, r - g, random_value<double>(rng));
        if (i + 1 < g) m.push(r, r + g, random_value<double>(rng));
      }
    return m;
  };
  // The Laplacian with, beside its band, a full 16 x 16 block (a dense leaf
  // at d = 16). At d = 64 its diagonal leaves hold 190 entries (the large
  // bin, above this small matrix's chunk of 128) and the +-64 neighbours
  // leaves of 64 (the warp); there it also has a full 64 x 64 block (a dense
  // leaf) and 400 random entries over block columns 46 and 47 (leaves of
  // about 50 and 350: the warp and the large bin).
  Coo<double> lap = laplacian(64);
  for (index_t r = 0; r < 16; ++r)
    for (index_t c = 0; c < 16; ++c) lap.push(r, 4096 - 16 + c, random_value<double>(rng));
  Coo<double> lap64 = lap;
  for (int k = 0; k < 400; ++k) lap64.push(1024 + rng() % 64, 3000 + rng() % 64, random_value<double>(rng));
  for (index_t r = 0; r < 64; ++r)
    for (index_t c = 0; c < 64; ++c) lap64.push(2048 + r, c, random_value<double>(rng));
  // A band of half-width 3 over 700 k rows at d = 64: 436-entry diagonal
  // leaves (four warp steps each) and 6-entry corner leaves (their lanes);
  // 4.9 M entries make the chunk 1 024 on up to 150 SMs, so no leaf is large.
  Coo<double> band{700000, 700000, {}, {}, {}};
  for (index_t r = 0; r < 700000; ++r)
    for (index_t c = r >= 3 ? r - 3 : 0; c <= std::min<index_t>(r + 3, 699999); ++c) band.push(r, c, random_value<double>(rng));
  Coo<double> full{16, 16, {}, {}, {}};
  for (index_t r = 0; r < 16; ++r)
    for (index_t c = 0; c < 16; ++c) full.push(r, c, random_value<double>(rng));
  int sms = 0;
  cuda_check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "cudaDeviceGetAttribute");
  struct Case {
    std::string what;
    Coo<double> coo;
    std::uint32_t node_size;
    std::uint32_t depth;
    bool large, dense;  // some leaf goes to the large (dense) bin
  };
  const std::vector<Case> cases = {
      {"laplacian d16", lap, 16, 3, false, true},
      {"laplacian d64", lap64, 64, 2, true, true},
      {"band d64", band, 64, 4, false, false},
      {"laplacian d2", laplacian(20), 2, 9, false, true},  // 3- and 4-entry leaves tie with dense ones, which wins
      {"random d256", random_coo<double>(3000, 2500, 8000, rng), 256, 2, false, false},
      {"root lane leaf", random_coo<double>(12, 9, 7, rng), 16, 1, false, false},
      {"root warp leaf", random_coo<double>(40, 40, 60, rng), 64, 1, false, false},
      {"root large leaf", random_coo<double>(120, 110, 900, rng), 128, 1, true, false},
      {"root dense leaf", full, 16, 1, false, true},
  };
  auto items_of = [](const runtime::RunStats& s, const std::string& name) {
    for (const auto& p : s.profile.procedures)
      if (p.name == name) return p.items;
    ADD_FAILURE() << "no procedure " << name;
    return std::uint64_t{0};
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const Matrix<double> m = build_standard(c.coo, c.node_size);
    Coo<float> coo32{c.coo.rows, c.coo.cols, c.coo.row, c.coo.col, {}};
    for (double v : c.coo.val) coo32.val.push_back(static_cast<float>(v));
    const Matrix<float> m32 = build_standard(coo32, c.node_size);
    EXPECT_EQ(m.content().shape.depth, c.depth);
    const PoolStats ps = validate(m.content());
    EXPECT_EQ(ps.dense > 0, c.dense);
    // Which procedures ran (host loop, profiled). The band's leaves stay
    // with their parents only where its chunk reaches their size.
    DeviceMatrix<double> dev(m);
    ops::SpmvOptions prof{runtime::Controller::host_loop, false};
    prof.profile = true;
    ops::GpuSpmv<double> probe(dev, prof);
    DeviceVector<double> dx(std::vector<double>(dev.cols(), 1.0)), dy(std::vector<double>(dev.rows(), 0.0));
    probe(dx.ptr(), dy.ptr());
    cuda_check(cudaDeviceSynchronize(), "spmv");
    const runtime::RunStats& s = probe.last_run();
    // Every leaf up to the chunk is summed through a leaf-parent item; a
    // one-level tree's large or dense root goes to its bin directly.
    EXPECT_EQ(items_of(s, "spmv-leaf-parent") > 0, c.depth > 1 || !(c.large || c.dense));
    if (c.what != "band d64" || c.coo.nnz() / (32ull * static_cast<std::uint64_t>(sms)) >= 1024) {
      EXPECT_EQ(items_of(s, "spmv-leaf-large") > 0, c.large);
    }
    EXPECT_EQ(items_of(s, "spmv-leaf-dense") > 0, c.dense);
    for (runtime::Controller ctl : runtime::all_controllers) {
      if (!ops::gpu_controller_available(ctl)) continue;
      const std::string cfg = c.what + " " + std::string(runtime::to_string(ctl));
      check_all_states(m, ops::SpmvOptions{ctl, false}, rng, cfg);
      check_all_states(m32, ops::SpmvOptions{ctl, false}, rng, cfg + " f32");
    }
  }
}

// Riders: small leaves summed with the large leaf of their output block
// (the circuit's pattern: a band of large diagonal leaves crossed by sparse
// dense lines). Row 700's block row holds more small leaves than a large
// leaf takes (they stay in the small bin), and block rows without a large
// leaf have nobody to ride with. The plan must use riders in both
// orientations, and give the host's result.
namespace {

template <class V>
Coo<V> circuit_like(std::mt19937_64& rng) {
  const index_t n = 6000, band_end = 4000;
  Coo<V> c{n, n, {}, {}, {}};
  for (index_t i = 0; i < band_end; ++i)
    for (index_t j = i > 0 ? i - 1 : 0; j <= std::min(i + 1, n - 1); ++j) c.push(i, j, random_value<V>(rng));
  for (index_t line : {index_t{1000}, index_t{3100}, index_t{5500}})
    for (index_t k = 0; k < n; ++k)
      if (rng() % 4 == 0 && (k + 1 < line || k > line + 1)) {
        c.push(line, k, random_value<V>(rng));
        if (k != 700) c.push(k, line, random_value<V>(rng));
      }
  for (index_t k = 0; k < n; k += 2)
    if (k + 1 < 700 || k > 701) c.push(700, k, random_value<V>(rng));
  return c;
}

// The standard format: wide nodes would take some of the leaves.
template <class V>
void check_riders(std::uint32_t node_size, std::mt19937_64& rng) {
  const Matrix<V> host = build_standard(circuit_like<V>(rng), node_size);
  DeviceMatrix<V> dev(host);
  // Automatic: this matrix's ~100 large leaves do not fill the GPU, so the
  // small leaves keep their own warps.
  EXPECT_EQ(ops::GpuSpmv<V>(dev, ops::SpmvOptions{.tiles = ops::SpmvOptions::Tiles::never}).stats().riders[0], 0u) << "d " << node_size;
  // Riders exist only in the leaf bins: with output tiles a block's small
  // leaves are summed with its large ones anyway.
  ops::GpuSpmv<V> plan(dev, ops::SpmvOptions{.riders = ops::SpmvOptions::Riders::always,
                                             .tiles = ops::SpmvOptions::Tiles::never,
                                             .orientations = ops::SpmvOptions::Orientations::both});
  EXPECT_GT(plan.stats().riders[0], 0u) << "d " << node_size;
  EXPECT_GT(plan.stats().riders[1], 0u) << "d " << node_size;
  EXPECT_LT(plan.stats().riders[0], plan.stats().leaves[1]) << "every small leaf rode, d " << node_size;
  for (bool t : {false, true}) {
    check<V>(host, plan, dev, V(1), V(0), rng, "riders d" + std::to_string(node_size));
    check<V>(host, plan, dev, V(-0.5), V(2), rng, "riders d" + std::to_string(node_size));
    dev.transpose();
    (void)t;
  }
}

}  // namespace

TEST(SpmvGpu, RidersOfLargeLeaves) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  check_riders<float>(32, rng);
  check_riders<double>(64, rng);
  check_riders<float>(128, rng);
}

// Output tiles (spmv_tile_agent.cuh), every node size: tiles of many output
// blocks (small d), dense leaves, and blocks split over several tiles (a full
// row and a full column, in more parts than a thread block has warps: their
// partial sums meet in a global slot in the last tile to arrive, whose
// counter must be back at zero for the next call; check_all_states calls
// each plan six times; and, with one unit a tile at this size, every block
// of 2-8 units: parts that meet in one thread block, aligned by empty
// tiles), against the reference and the plan without tiles; in the standard
// format (wide nodes would take some of those leaves), and the builder's
// default beside it.
TEST(SpmvGpu, OutputTiles) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  for (std::uint32_t d : {2u, 4u, 8u, 16u, 32u, 64u, 128u, 256u}) {
    Coo<double> c = random_coo<double>(30000, 20000, 40000, rng);
    for (index_t k = 0; k < 20000; ++k) c.push(11, k, random_value<double>(rng));
    for (index_t k = 0; k < 30000; k += 2) c.push(k, 5, random_value<double>(rng));
    // Block rows 20-26 with 2-8 leaves of 3 entries: a unit each at d = 2,
    // packed four to a unit from d = 4 (so from there, 1-2 units).
    for (index_t j = 0; j < 7; ++j)
      for (index_t k = 0; k < j + 2; ++k)
        for (index_t e = 0; e < 3; ++e) c.push((20 + j) * d + k % d, k * d + e, random_value<double>(rng));
    for (index_t r = 8 * d; r < 9 * d; ++r)  // one full leaf: dense
      for (index_t k = 16 * d; k < 17 * d; ++k) c.push(r, k, random_value<double>(rng));
    const Matrix<double> host = build_standard(c, d);
    EXPECT_GT(validate(host.content()).dense, 0u) << "d " << d;
    const std::string what = "d" + std::to_string(d);
    const ops::SpmvOptions always{.tiles = ops::SpmvOptions::Tiles::always};
    {
      DeviceMatrix<double> dev(host);
      const ops::GpuSpmv<double> plan(
          dev, ops::SpmvOptions{.tiles = always.tiles, .orientations = ops::SpmvOptions::Orientations::both});
      for (int o = 0; o < 2; ++o) {
        EXPECT_GT(plan.stats().tiles[o], 0u) << what;
        EXPECT_GT(plan.stats().split_tiles[o], 1u) << what << ": the full line must be split";
        // Both ways of meeting: a full line (row 11 in A, column 5 in A^T)
        // in many thread blocks; block rows of 2-8 units (tile_units is 1
        // at this size: rows 20-26, and random entries gathered 32 to a
        // unit) in one. From d = 128 the random entries alone give most
        // block rows more than 8 units, so only small d is sure to have both.
        EXPECT_GT(plan.stats().split_blocks[o], plan.stats().shared_split_blocks[o]) << what << ": global";
        if (d <= 32) {
          EXPECT_GT(plan.stats().shared_split_blocks[o], 0u) << what << ": shared";
        }
        // Leaves of at most 32 entries are packed (rows 20-26's, and the
        // full lines' from d = 4 in A and d = 8 in A^T, whose leaves share
        // one row in A, one column in A^T inside a pack unit).
        if (d >= 4 && d <= 32) {
          // Row 11's 20000 / d leaves in A, column 5's 30000 / d in A^T (two
          // entries, gathered, at d = 4).
          const std::uint64_t lines = o == 0 ? 20000 / d : d >= 8 ? 30000 / d : 0;
          EXPECT_GE(plan.stats().packed_leaves[o], lines) << what << ": packed";
        }
        EXPECT_GT(plan.stats().tile_bytes[o], 0u) << what;
      }
    }
    check_all_states(host, always, rng, what + " tiles");
    check_all_states(host, {}, rng, what + " automatic");
    check_all_states(host, ops::SpmvOptions{.tiles = ops::SpmvOptions::Tiles::never}, rng, what + " no tiles");
    Coo<float> cf{c.rows, c.cols, c.row, c.col, {}};
    for (double v : c.val) cf.val.push_back(static_cast<float>(v));
    check_all_states(build_standard(cf, d), always, rng, what + " f32 tiles");
    check_all_states(build_matrix(c, d), always, rng, what + " default format");
  }
  // The automatic policy: tiles where leaves fill their units (a banded
  // matrix), none where they hold one or two entries (a scattered matrix in
  // the standard format).
  Coo<float> band{40000, 40000, {}, {}, {}};
  for (index_t r = 0; r < 40000; ++r)
    for (index_t k = r > 2 ? r - 2 : 0; k < std::min<index_t>(r + 3, 40000); ++k) band.push(r, k, random_value<float>(rng));
  DeviceMatrix<float> banded(build_standard(band, 128));
  EXPECT_GT(ops::GpuSpmv<float>(banded).stats().tiles[0], 0u) << "a band fills its units";
  DeviceMatrix<float> scattered(build_standard(random_coo<float>(200000, 200000, 100000, rng), 128));
  const ops::GpuSpmv<float> sparse_plan(scattered);
  EXPECT_EQ(sparse_plan.stats().tiles[0] + sparse_plan.stats().tiles[1], 0u) << "one-entry leaves stay in the bins";
}

// What a plan prepares (SpmvOptions::orientations): by default the part for
// op(A) as A is at construction, the other at the first call that needs it
// (the same statistics as a plan that prepared both at once); a call that
// would prepare inside a stream capture is refused with the capture intact,
// and once prepared the orientation captures into a graph. Tiles (a band),
// riders and bins (the circuit-like matrix, tiles off), wide nodes with the
// column order, and a real matrix.
TEST(SpmvGpu, PlanOrientations) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  using O = ops::SpmvOptions;
  Coo<double> band{30000, 20000, {}, {}, {}};
  for (index_t r = 0; r < 20000; ++r)
    for (index_t k = r > 3 ? r - 3 : 0; k < std::min<index_t>(r + 4, 20000); ++k) band.push(r, k, random_value<double>(rng));
  struct Case {
    std::string what;
    Matrix<double> host;
    O opt;
  };
  std::vector<Case> cases;
  cases.push_back({"band, tiles", build_standard(band, 32), O{.tiles = O::Tiles::always}});
  cases.push_back({"circuit-like, riders", build_standard(circuit_like<double>(rng), 32),
                   O{.riders = O::Riders::always, .tiles = O::Tiles::never}});
  cases.push_back({"wide nodes, column order", build_wide(random_coo<double>(40000, 40000, 80000, rng), 128), O{}});
  const fs::path real = matrices_dir() / "bcsstk13.mtx";
  if (fs::exists(real)) cases.push_back({"bcsstk13", build_matrix(read_matrix_market<double>(real)), O{}});
  for (auto& [what, host, opt] : cases) {
    SCOPED_TRACE(what);
    DeviceMatrix<double> dev(host);
    ops::GpuSpmv<double> plan(dev, opt);
    EXPECT_TRUE(plan.stats().prepared[0]);
    EXPECT_FALSE(plan.stats().prepared[1]);
    EXPECT_EQ(plan.stats().tiles[1] + plan.stats().tile_bytes[1] + plan.stats().riders[1] +
                  plan.stats().wide_order_bytes,
              0u)
        << "nothing of A^T's part before a call needs it";
    const double built_ms = plan.stats().traversal_ms;
    check<double>(host, plan, dev, 1.0, 0.0, rng, what);
    dev.transpose();
    check<double>(host, plan, dev, 2.0, 0.5, rng, what + ", A^T prepared by the call");
    EXPECT_TRUE(plan.stats().prepared[1]);
    EXPECT_GT(plan.stats().traversal_ms, built_ms);
    check<double>(host, plan, dev, 1.0, 0.0, rng, what + ", A^T again");
    dev.transpose();
    check<double>(host, plan, dev, 1.0, 0.0, rng, what + ", A after A^T");
    O at_once = opt;
    at_once.orientations = O::Orientations::both;
    const ops::GpuSpmv<double> both(dev, at_once);
    EXPECT_TRUE(both.stats().prepared[0] && both.stats().prepared[1]);
    EXPECT_EQ(both.stats().tiles, plan.stats().tiles);
    EXPECT_EQ(both.stats().split_tiles, plan.stats().split_tiles);
    EXPECT_EQ(both.stats().tile_bytes, plan.stats().tile_bytes);
    EXPECT_EQ(both.stats().riders, plan.stats().riders);
    EXPECT_EQ(both.stats().wide_order_bytes, plan.stats().wide_order_bytes);
    EXPECT_EQ(both.stats().wide_column_runs, plan.stats().wide_column_runs);
    if (what != "bcsstk13") {
      EXPECT_GT(plan.stats().tiles[1] + plan.stats().riders[1] + plan.stats().wide_order_bytes, 0u);
    }
    // Transposed at construction: A^T's part first.
    dev.transpose();
    ops::GpuSpmv<double> from_t(dev, opt);
    EXPECT_FALSE(from_t.stats().prepared[0]);
    EXPECT_TRUE(from_t.stats().prepared[1]);
    check<double>(host, from_t, dev, 1.0, 0.0, rng, what + ", built on A^T");
    dev.transpose();
    check<double>(host, from_t, dev, -1.0, 1.0, rng, what + ", then A");
  }

  // Stream capture: refused where the call would prepare, then captured.
  const Matrix<float> host = build_matrix(random_coo<float>(4000, 3000, 30000, rng), 32);
  DeviceMatrix<float> dev(host);
  cudaStream_t stream = nullptr;
  cuda_check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  {
    ops::GpuSpmv<float> plan(dev, {}, stream);
    dev.transpose();
    const Matrix<float> at = host.transpose();
    std::vector<float> x(at.cols()), ref(at.rows(), 0.0f);
    for (auto& v : x) v = random_value<float>(rng);
    ops::spmv_reference<float>(at, x, ref);
    DeviceVector<float> dx(x), dy(std::vector<float>(at.rows(), 0.0f));
    cudaGraph_t graph = nullptr;
    cuda_check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
    EXPECT_THROW(plan(dx.ptr(), dy.ptr()), Error) << "a call that would prepare A^T inside a capture";
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    cuda_check(cudaStreamIsCapturing(stream, &status), "cudaStreamIsCapturing");
    EXPECT_EQ(status, cudaStreamCaptureStatusActive) << "the refusal must leave the capture intact";
    cuda_check(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
    if (graph != nullptr) cuda_check(cudaGraphDestroy(graph), "cudaGraphDestroy");
    EXPECT_FALSE(plan.stats().prepared[1]);
    plan(dx.ptr(), dy.ptr());  // prepares A^T
    cuda_check(cudaMemsetAsync(dy.ptr(), 0xFF, at.rows() * sizeof(float), stream), "poison y");
    cuda_check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
    plan(dx.ptr(), dy.ptr());
    cuda_check(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
    cudaGraphExec_t exec = nullptr;
    cuda_check(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
    cuda_check(cudaGraphLaunch(exec, stream), "cudaGraphLaunch");
    cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    cuda_check(cudaGraphExecDestroy(exec), "cudaGraphExecDestroy");
    cuda_check(cudaGraphDestroy(graph), "cudaGraphDestroy");
    const auto got = dy.get();
    const auto mag = magnitude(at, x, std::vector<float>(at.rows(), 0.0f), 1.0f, 0.0f);
    for (std::size_t i = 0; i < got.size(); ++i)
      ASSERT_NEAR(double(got[i]), double(ref[i]), 1e-5 * (mag[i] + 1e-30) + 1e-30) << "graph, row " << i;
  }
  cuda_check(cudaStreamDestroy(stream), "cudaStreamDestroy");
}

// Vectors that do not start on a 16-byte boundary (a user's y + 1): the
// plan's f32 flush adds four outputs at a time only into aligned y.
TEST(SpmvGpu, UnalignedVectors) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  const auto coo = random_coo<float>(3001, 2999, 60000, rng);
  for (const bool wide : {true, false}) {
    const auto host = build_matrix(coo, BuildOptions{16, wide});
    DeviceMatrix<float> dev(host);
    ops::GpuSpmv<float> plan(dev);
    for (bool t : {false, true}) {
      const Matrix<float> a = host.with_state(t, 1.0f);
      std::vector<float> x(a.cols() + 1), y(a.rows() + 1);
      for (auto& v : x) v = random_value<float>(rng);
      for (auto& v : y) v = random_value<float>(rng);
      DeviceVector<float> dx(x), dy(y);
      std::vector<float> xs(x.begin() + 1, x.end()), ref(y.begin() + 1, y.end());
      const std::vector<float> y0 = ref;
      ops::spmv_reference<float>(a, xs, ref, 1.5f, 0.5f);
      const auto mag = magnitude(a, xs, y0, 1.5f, 0.5f);
      plan(dx.ptr() + 1, dy.ptr() + 1, 1.5f, 0.5f);
      cuda_check(cudaDeviceSynchronize(), "spmv");
      const auto got = dy.get();
      EXPECT_EQ(got[0], y[0]) << "the value before y was written";
      for (std::size_t i = 0; i < ref.size(); ++i)
        ASSERT_NEAR(double(got[i + 1]), double(ref[i]), 1e-5 * (mag[i] + 1e-30) + 1e-30)
            << (wide ? "default " : "standard ") << (t ? "T" : "N") << " row " << i;
      dev.transpose();
    }
  }
}

TEST(SpmvGpu, DeviceMatrixRoundTrip) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  const auto host = build_matrix(random_coo<float>(5000, 4000, 40000, rng)).transpose().scaled(2.0f);
  DeviceMatrix<float> dev(host);
  EXPECT_EQ(dev.rows(), 4000u);
  EXPECT_TRUE(dev.transposed());
  const auto back = dev.download();
  ASSERT_EQ(back.pool_bytes(), host.pool_bytes());
  EXPECT_EQ(0, std::memcmp(back.content().pool.data(), host.content().pool.data(), host.pool_bytes()));
  EXPECT_EQ(back.scale(), 2.0f);
  EXPECT_TRUE(back.transposed());
  DeviceMatrix<float> moved = std::move(dev);
  EXPECT_EQ(moved.nnz(), host.nnz());
}
