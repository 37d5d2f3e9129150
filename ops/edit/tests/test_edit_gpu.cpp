// The GPU batch edit (edit_gpu.hpp) against the host edit (edit.hpp, itself
// checked against its std::map reference): random sequences of every batch
// shape at node sizes 2-256, wide and standard, f32 and f64, int32 and int64
// indices, in branching families of versions; after every step the version's
// download is the host edit's pool byte for byte (and validates), the stats
// agree, the parent is unchanged, and the untouched sub-trees are shared at
// their old offsets; int64 batches run through a library context. Also:
// in-place edits through arena compaction (every other step on a context), the
// shared matrices with SpMV on the versions, and refused batches.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <algorithm>
#include <cstdio>
#include <map>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "edit_test_support.hpp"
#include "hisparse/formats/builder.hpp"
#include "hisparse/formats/device_arena.hpp"
#include "hisparse/formats/matrix_market.hpp"
#include "hisparse/formats/node_view.hpp"
#include "hisparse/formats/validate.hpp"
#include "hisparse/ops/copy_gpu.hpp"
#include "hisparse/ops/context.hpp"
#include "hisparse/ops/edit_gpu.hpp"
#include "hisparse/ops/spmv_reference.hpp"
#include "hisparse/ops/spmv_gpu.hpp"
#include "support/counting_allocator.hpp"
#include "support/matrices_dir.hpp"
#include "support/test_seed.hpp"

using namespace hisparse;
using namespace hisparse::testing;

namespace {

template <class T>
DeviceBytes upload(const std::vector<T>& v) {
  DeviceBytes d(v.size() * sizeof(T));
  if (!v.empty()) cuda_check(cudaMemcpy(d.get(), v.data(), d.size(), cudaMemcpyHostToDevice), "cudaMemcpy");
  return d;
}

// A host batch in device memory with I indices.
template <class V, class I>
struct DeviceBatch {
  index_t rows, cols;
  std::uint64_t n;
  DeviceBytes row, col, val;
  explicit DeviceBatch(const Coo<V>& u)
      : rows(u.rows), cols(u.cols), n(u.nnz()),
        row(upload(std::vector<I>(u.row.begin(), u.row.end()))),
        col(upload(std::vector<I>(u.col.begin(), u.col.end()))),
        val(upload(u.val)) {}
  [[nodiscard]] ops::DeviceCooView<V, I> view() const {
    return {rows, cols, n, row.as<const I>(), col.as<const I>(), val.as<const V>()};
  }
};

// int32 batches by the form that takes a stream, int64 ones through a
// context (its allocator's pool for the work arrays and rebuilt sub-trees).
template <class V>
DeviceMatrix<V> gpu_edit(const DeviceMatrix<V>& a, const Coo<V>& u, EditMode mode, bool wide_index,
                         ops::EditStats* st) {
  if (wide_index) {
    ops::Context ctx;
    return ops::edit_version(ctx, a, DeviceBatch<V, std::int64_t>(u).view(), mode, st);
  }
  return ops::edit_version(a, DeviceBatch<V, std::int32_t>(u).view(), mode, nullptr, st);
}

// A version's node offsets and bytes, read from its raw arena view.
template <class V>
std::map<std::uint32_t, std::uint64_t> nodes_of(const DeviceMatrix<V>& a) {
  std::vector<std::byte> raw(a.pool_bytes());
  cuda_check(cudaMemcpy(raw.data(), a.pool(), raw.size(), cudaMemcpyDeviceToHost), "cudaMemcpy");
  std::map<std::uint32_t, std::uint64_t> out;
  const std::uint32_t b = a.shape().log2_node_size, depth = a.shape().depth;
  auto walk = [&](auto&& self, NodeRef r, std::uint32_t level) -> void {
    const bool leaf = level + 1 == depth;
    const bool holds_values = leaf || ref_type(r) == NodeType::coow;
    out[ref_offset(r)] = stored_node_bytes(raw.data(), r, b, leaf, holds_values ? sizeof(V) : sizeof(NodeRef));
    if (holds_values) return;
    for_each_entry<NodeRef>(raw.data(), r, b, false, [&](LocalCoord, NodeRef c) { self(self, c, level + 1); });
  };
  if (a.root() != null_ref) walk(walk, a.root(), 0);
  return out;
}

// One GPU edit of `parent` checked against the host edit of `host`.
template <class V>
void check_step(const Matrix<V>& host, const DeviceMatrix<V>& parent, const Coo<V>& u, EditMode mode, bool wide_index,
                Matrix<V>& host_out, DeviceMatrix<V>& dev_out) {
  ops::EditStats hs, gs;
  host_out = ops::edit(host, u, mode, &hs);
  const auto before = nodes_of(parent);
  dev_out = gpu_edit(parent, u, mode, wide_index, &gs);
  const Matrix<V> got = dev_out.download();
  ASSERT_NO_THROW(validate(got.content()));
  ASSERT_TRUE(same_matrix(got, host_out)) << "mode " << ops::to_string(mode) << ", " << u.nnz() << " updates";
  EXPECT_EQ(gs.inserted, hs.inserted);
  EXPECT_EQ(gs.updated, hs.updated);
  EXPECT_EQ(gs.removed, hs.removed);
  // Every node of the new version is the parent's (same offset) or new; the
  // new ones are exactly what was appended.
  const auto after = nodes_of(dev_out);
  std::uint64_t fresh = 0, kept = 0;
  for (const auto& [off, bytes] : after) {
    if (off >= parent.pool_bytes()) fresh += bytes;
    else {
      ASSERT_TRUE(before.count(off)) << "node at " << off << " belongs to neither the parent nor the edit";
      kept += bytes;
    }
  }
  EXPECT_EQ(fresh, gs.bytes_written);
  EXPECT_EQ(fresh + kept + sizeof(PoolHeader), got.pool_bytes());
}

}  // namespace

// Branching families: each step edits a random earlier version; at the end
// every version still downloads as what it was.
TEST(EditGpu, SequencesMatchTheHostEdit) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  across_node_sizes([&]<class V>(V, std::uint32_t d, bool wide, index_t rows, index_t cols) {
    Model<V> model = start_model<V>(rows, cols, d, rng);
    Matrix<V> h0 = build_matrix(coo_of(model, rows, cols), BuildOptions{d, wide});
    if (rng() % 2) {  // a transposed state: positions are logical
      h0 = h0.transpose();
      Model<V> t;
      for (const auto& [at, v] : model) t[{at.second, at.first}] = v;
      model = t;
    }
    std::vector<Matrix<V>> hosts{h0};
    std::vector<DeviceMatrix<V>> devs;
    devs.push_back(ops::versioned(DeviceMatrix<V>(h0), std::uint64_t{256} << 20));  // room for every step
    for (int step = 0; step < 8; ++step) {
      const std::size_t p = rng() % hosts.size();
      EditMode mode = static_cast<EditMode>(rng() % 3);
      Model<V> pm;  // the parent's entries, for the batch shapes
      const Coo<V> pc = to_coo(hosts[p]);
      for (std::size_t i = 0; i < pc.nnz(); ++i) pm[{pc.row[i], pc.col[i]}] = pc.val[i];
      const int kind = static_cast<int>(rng() % 7);
      const Coo<V> u = shaped_batch(kind, pm, hosts[p].rows(), hosts[p].cols(), d, rng, mode);
      SCOPED_TRACE("step " + std::to_string(step) + " kind " + std::to_string(kind));
      Matrix<V> h;
      DeviceMatrix<V> g;
      check_step(hosts[p], devs[p], u, mode, rng() % 2 == 0, h, g);
      if (::testing::Test::HasFatalFailure()) return;
      hosts.push_back(h);
      devs.push_back(std::move(g));
    }
    for (std::size_t i = 0; i < hosts.size(); ++i)
      ASSERT_TRUE(same_matrix(devs[i].download(), hosts[i])) << "version " << i << " changed";
  });
}

// Depth-2 trees at node size 128: the root is the only unit, a COOW node
// where the entries are scattered (merged in place while it stays one), a
// standard one where they cluster; and a depth-1 tree, whose root is a leaf.
TEST(EditGpu, ShallowTrees) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  for (const auto& [rows, cols, nnz] : {std::tuple<index_t, index_t, std::size_t>{3000, 2500, 4000},
                                        {9000, 12000, 30000}, {100, 120, 500}}) {
    for (const bool wide : {true, false}) {
      SCOPED_TRACE(std::to_string(rows) + " x " + std::to_string(cols) + (wide ? " wide" : " standard"));
      Model<double> model;
      apply(model, random_coo<double>(rows, cols, nnz, rng), EditMode::add);
      Matrix<double> h = build_matrix(coo_of(model, rows, cols), BuildOptions{128, wide});
      DeviceMatrix<double> g = ops::versioned(DeviceMatrix<double>(h), std::uint64_t{64} << 20);
      for (int step = 0; step < 6; ++step) {
        EditMode mode = static_cast<EditMode>(rng() % 3);
        const Coo<double> u = shaped_batch(static_cast<int>(rng() % 6), model, rows, cols, 128, rng, mode);
        apply(model, u, mode);
        Matrix<double> hn;
        DeviceMatrix<double> gn;
        check_step(h, g, u, mode, step % 2 == 0, hn, gn);
        if (::testing::Test::HasFatalFailure()) return;
        h = hn;
        g = std::move(gn);
      }
    }
  }
}

// In place: the matrix becomes each edit; a small arena fills and the matrix
// moves to a new family, compacted, with nothing lost.
TEST(EditGpu, InPlaceThroughCompaction) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  const index_t rows = 5000, cols = 4000;
  const std::uint32_t d = 16;
  Model<double> model = start_model<double>(rows, cols, d, rng);
  Matrix<double> h = build_matrix(coo_of(model, rows, cols), BuildOptions{d, true});
  DeviceMatrix<double> a(h);
  ops::edit_in_place(a, DeviceBatch<double, std::int32_t>(random_batch(model, rows, cols, 5, rng)).view(),
                     EditMode::set);  // not in a family: starts one
  ASSERT_TRUE(a.arena());
  h = ops::edit_reference(h, Coo<double>{rows, cols, {}, {}, {}}, EditMode::set);  // unchanged entries
  a = ops::versioned(ops::copy(a), a.pool_bytes() + 4096);  // a nearly full family
  Model<double> m2;
  const Coo<double> hc = to_coo(a.download());
  for (std::size_t i = 0; i < hc.nnz(); ++i) m2[{hc.row[i], hc.col[i]}] = hc.val[i];
  Matrix<double> want = a.download();
  int moved = 0;
  for (int step = 0; step < 12; ++step) {
    const EditMode mode = static_cast<EditMode>(rng() % 3);
    const Coo<double> u = random_batch(m2, rows, cols, 1 + rng() % 300, rng);
    apply(m2, u, mode);
    want = ops::edit(want, u, mode);
    const DeviceArena* before = a.arena().get();
    ops::EditStats st;
    if (step % 2) {  // through a context every other step (its copy where the arena is full)
      ops::Context ctx;
      ops::edit_in_place(ctx, a, DeviceBatch<double, std::int64_t>(u).view(), mode, &st);
    } else {
      ops::edit_in_place(a, DeviceBatch<double, std::int64_t>(u).view(), mode, nullptr, &st);
    }
    moved += a.arena().get() != before;
    const Matrix<double> got = a.download();
    ASSERT_TRUE(same_matrix(got, want)) << "step " << step;
    ASSERT_NO_THROW(validate(got.content()));
  }
  EXPECT_GE(moved, 1) << "the small arena never filled";
  // On a context, into a nearly full family again: the compaction (its copy)
  // runs on the context, and the work arrays come from its allocator.
  a = ops::versioned(ops::copy(a), a.pool_bytes() + 4096);
  auto counting = std::make_shared<CountingAllocator>();
  {
    ops::Context ctx(nullptr, counting);
    const Coo<double> u = random_batch(m2, rows, cols, 2000, rng);
    apply(m2, u, EditMode::set);
    want = ops::edit(want, u, EditMode::set);
    const DeviceArena* before = a.arena().get();
    ops::edit_in_place(ctx, a, DeviceBatch<double, std::int64_t>(u).view(), EditMode::set);
    EXPECT_NE(a.arena().get(), before) << "the nearly full arena did not move";
    const Matrix<double> got = a.download();
    ASSERT_TRUE(same_matrix(got, want)) << "in place on a context, through compaction";
    ASSERT_NO_THROW(validate(got.content()));
  }
  cuda_check(cudaDeviceSynchronize(), "sync");
  EXPECT_GT(counting->allocations.load(), 0) << "the edit on a context did not use its allocator";
  a = DeviceMatrix<double>();
  cuda_check(cudaDeviceSynchronize(), "sync");
  EXPECT_EQ(counting->outstanding.load(), 0);
}

// The shared matrices: a random 1% batch in each mode, SpMV on the versions.
TEST(EditGpu, RealMatricesAndSpmvOnVersions) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  std::size_t done = 0;
  for (const auto& f : matrix_files()) {
    Coo<double> coo;
    try {
      coo = read_matrix_market<double>(f);
    } catch (const Error&) {
      continue;
    }
    if (coo.nnz() > 3'000'000) continue;
    SCOPED_TRACE(f.filename().string());
    const Matrix<double> h = build_matrix(coo, BuildOptions{});
    const DeviceMatrix<double> a = ops::versioned(DeviceMatrix<double>(h));
    Model<double> model;
    for (std::size_t i = 0; i < coo.nnz(); ++i) model[{coo.row[i], coo.col[i]}] += coo.val[i];
    for (const EditMode mode : {EditMode::set, EditMode::add, EditMode::remove}) {
      const Coo<double> u = random_batch(model, h.rows(), h.cols(), 1 + coo.nnz() / 100, rng);
      Matrix<double> hv;
      DeviceMatrix<double> gv;
      check_step(h, a, u, mode, false, hv, gv);
      if (::testing::Test::HasFatalFailure()) return;
      // SpMV on the version (its nodes spread over the family's arena).
      std::vector<double> x(hv.cols());
      for (auto& v : x) v = random_value<double>(rng);
      std::vector<double> want(hv.rows());
      ops::spmv_reference<double>(hv, x, want);
      DeviceBytes dx = upload(x), dy(want.size() * sizeof(double));
      ops::spmv(gv, dx.as<const double>(), dy.as<double>());
      std::vector<double> y(want.size());
      cuda_check(cudaMemcpy(y.data(), dy.get(), dy.size(), cudaMemcpyDeviceToHost), "cudaMemcpy");
      for (std::size_t i = 0; i < y.size(); ++i)
        ASSERT_NEAR(y[i], want[i], 1e-9 * (1 + std::abs(want[i]))) << "row " << i;
    }
    ++done;
  }
  EXPECT_GE(done, 10u);
}

// In place, a batch that writes far more than the matrix holds: the new
// family is sized for the edit (not only for the matrix).
TEST(EditGpu, InPlaceBulkInserts) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  const index_t n = 200000;
  const Matrix<double> h = build_matrix(random_coo<double>(n, n, 100, rng), BuildOptions{});
  DeviceMatrix<double> a(h);
  const Coo<double> u = random_coo<double>(n, n, 2'000'000, rng);  // ~24 MB of nodes, past the default 16 MiB
  ops::edit_in_place(a, DeviceBatch<double, std::int32_t>(u).view(), EditMode::add);
  ASSERT_TRUE(same_matrix(a.download(), ops::edit(h, u, EditMode::add)));
}

// Removals that find no entry change nothing: a batch of only such positions
// gives the parent's version back (no byte appended), and mixed with present
// ones it writes exactly what the present ones alone write (the leaves whose
// removals all miss are shared, as on the host).
TEST(EditGpu, RemovalsThatMissShareEverything) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  const index_t rows = 5000, cols = 4000;
  for (const std::uint32_t d : {4u, 16u, 128u}) {
    for (const bool wide : {true, false}) {
      SCOPED_TRACE("d " + std::to_string(d) + (wide ? " wide" : " standard"));
      const Model<double> model = start_model<double>(rows, cols, d, rng);
      const Matrix<double> h = build_matrix(coo_of(model, rows, cols), BuildOptions{d, wide});
      const DeviceMatrix<double> g = ops::versioned(DeviceMatrix<double>(h), std::uint64_t{16} << 20);
      Coo<double> hit{rows, cols, {}, {}, {}}, miss{rows, cols, {}, {}, {}}, both{rows, cols, {}, {}, {}};
      std::vector<std::pair<index_t, index_t>> present;
      for (const auto& e : model) present.push_back(e.first);
      std::uniform_int_distribution<index_t> r(0, rows - 1), c(0, cols - 1);
      for (int i = 0; i < 300; ++i) {
        const auto& at = present[rng() % present.size()];
        hit.push(at.first, at.second, 0.0);
        const index_t mr = r(rng), mc = c(rng);
        if (!model.count({mr, mc})) miss.push(mr, mc, 0.0);
      }
      for (std::size_t i = 0; i < hit.nnz(); ++i) both.push(hit.row[i], hit.col[i], 0.0);
      for (std::size_t i = 0; i < miss.nnz(); ++i) both.push(miss.row[i], miss.col[i], 0.0);
      ops::EditStats sm, sh;
      const std::uint64_t used = g.arena()->size();
      const DeviceMatrix<double> vm = gpu_edit(g, miss, EditMode::remove, false, &sm);
      EXPECT_EQ(sm.bytes_written, 0u);
      EXPECT_EQ(sm.removed, 0u);
      EXPECT_EQ(vm.root(), g.root());
      EXPECT_EQ(g.arena()->size(), used);
      ASSERT_TRUE(same_matrix(vm.download(), h));
      const DeviceMatrix<double> vh = gpu_edit(g, hit, EditMode::remove, true, &sh);
      Matrix<double> hb;
      DeviceMatrix<double> vb;
      check_step(h, g, both, EditMode::remove, false, hb, vb);
      if (::testing::Test::HasFatalFailure()) return;
      ops::EditStats sb;  // check_step's edit again, for its counts
      (void)gpu_edit(g, both, EditMode::remove, false, &sb);
      EXPECT_EQ(sb.bytes_written, sh.bytes_written);
      EXPECT_EQ(sb.nodes_rewritten, sh.nodes_rewritten);
      EXPECT_TRUE(same_matrix(vb.download(), vh.download()));
    }
  }
}

// A family without room refuses a persistent edit and stays as it was.
TEST(EditGpu, FullArenaRefusesAndKeepsIt) {
  std::mt19937_64 rng(11);
  const Matrix<float> h = build_matrix(random_coo<float>(3000, 3000, 5000, rng), BuildOptions{16, true});
  const DeviceMatrix<float> a = ops::versioned(DeviceMatrix<float>(h), round_up(h.pool_bytes() + 16, 16));
  const std::uint64_t used = a.arena()->size();
  const Coo<float> u = random_coo<float>(3000, 3000, 500, rng);
  EXPECT_THROW(ops::edit_version(a, DeviceBatch<float, std::int32_t>(u).view(), EditMode::set), LimitError);
  EXPECT_EQ(a.arena()->size(), used);
  EXPECT_TRUE(same_matrix(a.download(), h));
}

// Scaled and transposed states: remove keeps the state, set and add write the
// scale into the content first (a new family), as on the host.
TEST(EditGpu, ScaledAndTransposedStates) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  for (const std::uint32_t d : {4u, 128u}) {
    for (const bool transposed : {false, true}) {
      Matrix<double> h = build_matrix(random_coo<double>(2000, 1500, 6000, rng), BuildOptions{d, true}).scaled(2.5);
      if (transposed) h = h.transpose();
      DeviceMatrix<double> g(h);
      Model<double> model;
      const Coo<double> hc = to_coo(h);
      for (std::size_t i = 0; i < hc.nnz(); ++i) model[{hc.row[i], hc.col[i]}] = hc.val[i];
      for (const EditMode mode : {EditMode::set, EditMode::add, EditMode::remove}) {
        SCOPED_TRACE("d " + std::to_string(d) + (transposed ? " transposed " : " ") + ops::to_string(mode));
        const Coo<double> u = random_batch(model, h.rows(), h.cols(), 300, rng);
        const Matrix<double> want = ops::edit(h, u, mode);
        const Matrix<double> got = ops::edit_version(g, DeviceBatch<double, std::int64_t>(u).view(), mode).download();
        ASSERT_TRUE(same_matrix(got, want));
        ops::Context ctx;  // the same through a context (its materialize where the matrix is scaled)
        ASSERT_TRUE(same_matrix(ops::edit_version(ctx, g, DeviceBatch<double, std::int32_t>(u).view(), mode).download(),
                                want));
      }
    }
  }
}

// Refused batches leave the matrix and its family as they were.
TEST(EditGpu, BadBatchesChangeNothing) {
  std::mt19937_64 rng(7);
  const Matrix<float> h = build_matrix(random_coo<float>(300, 200, 2000, rng), BuildOptions{16, true});
  DeviceMatrix<float> a = ops::versioned(DeviceMatrix<float>(h));
  const std::uint64_t used = a.arena()->size();
  Coo<float> u{300, 200, {1, 2, 299}, {0, 5, 200}, {1, 2, 3}};  // (299, 200) is outside
  try {
    ops::edit_in_place(a, DeviceBatch<float, std::int32_t>(u).view(), EditMode::set);
    FAIL() << "accepted an update outside the matrix";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("update 2 at (299, 200)"), std::string::npos) << e.what();
  }
  Coo<float> neg{300, 200, {1, 2, 3}, {0, 5, 7}, {1, 2, 3}};
  std::vector<std::int64_t> r{1, -2, 3}, c{0, 5, 7};
  DeviceBytes dr = upload(r), dc = upload(c), dv = upload(neg.val);
  EXPECT_THROW(ops::edit_version(a, ops::DeviceCooView<float, std::int64_t>{300, 200, 3, dr.as<const std::int64_t>(),
                                                                            dc.as<const std::int64_t>(),
                                                                            dv.as<const float>()},
                                 EditMode::add),
               Error);
  EXPECT_THROW(ops::edit_version(a, DeviceBatch<float, std::int32_t>(Coo<float>{200, 300, {1}, {1}, {1}}).view(),
                                 EditMode::set),
               Error);
  EXPECT_THROW(ops::edit_version(a, ops::DeviceCooView<float, std::int32_t>{300, 200, 3, nullptr, nullptr, nullptr},
                                 EditMode::set),
               Error);
  EXPECT_EQ(a.arena()->size(), used);
  EXPECT_TRUE(same_matrix(a.download(), h));
  // The device is still usable: a good batch goes through.
  const Coo<float> ok{300, 200, {1, 2}, {0, 5}, {1, 2}};
  const DeviceMatrix<float> e = ops::edit_version(a, DeviceBatch<float, std::int32_t>(ok).view(), EditMode::set);
  EXPECT_TRUE(same_matrix(e.download(), ops::edit(h, ok, EditMode::set)));
}
