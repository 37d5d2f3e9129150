#pragma once
// Runs one case on the GPU (builds from COO and CSR, extraction in every
// form and state, round trips) and makes the special inputs.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "hisparse/formats/builder.hpp"
#include "hisparse/formats/device_matrix.hpp"
#include "hisparse/formats/matrix_market.hpp"
#include "hisparse/formats/validate.hpp"
#include "hisparse/ops/convert_gpu.hpp"
#include "support/matrices_dir.hpp"
#include "support/random_matrix.hpp"
#include "support/test_seed.hpp"
#include "convert_checks.hpp"
#include "device_test_memory.hpp"

namespace hisparse::testing::convert_gpu {

namespace fs = std::filesystem;

// ---------------------------------------------------------------------------
// The GPU side of one case.

template <class V, class I>
struct DeviceCooInput {
  DeviceArray<I> row, col;
  DeviceArray<V> val;
  index_t rows, cols;
  explicit DeviceCooInput(const Coo<V>& c)
      : row(narrow<I>(c.row)), col(narrow<I>(c.col)), val(c.val), rows(c.rows), cols(c.cols) {}
  [[nodiscard]] ops::DeviceCooView<V, I> view() const {
    return {rows, cols, val.size(), row.get(), col.get(), val.get()};
  }
};

template <class V, class I>
struct DeviceCsrInput {
  DeviceArray<I> row_ptr, col;
  DeviceArray<V> val;
  index_t rows, cols;
  explicit DeviceCsrInput(const Csr<V>& c)
      : row_ptr(narrow<I>(c.row_ptr)), col(narrow<I>(c.col)), val(c.val), rows(c.rows), cols(c.cols) {}
  [[nodiscard]] ops::DeviceCsrView<V, I> view() const {
    return {rows, cols, val.size(), row_ptr.get(), col.get(), val.get()};
  }
};

// The calls of one case: the forms that take a stream, or (ctx given) a
// context's, on the context's stream.
template <class V, class View>
DeviceMatrix<V> build_on(ops::Context* ctx, const View& in, const BuildOptions& options, cudaStream_t stream,
                         ops::ConvertStats* stats = nullptr) {
  return ctx ? ops::build_device_matrix(*ctx, in, options, stats) : ops::build_device_matrix(in, options, stream, stats);
}

template <class V, class I>
ops::DeviceCsr<V, I> to_csr_on(ops::Context* ctx, const DeviceMatrix<V>& a, cudaStream_t stream,
                               ops::ConvertStats* stats = nullptr) {
  return ctx ? ops::to_device_csr<V, I>(*ctx, a, stats) : ops::to_device_csr<V, I>(a, stream, stats);
}

template <class V, class I>
ops::DeviceCoo<V, I> to_coo_on(ops::Context* ctx, const DeviceMatrix<V>& a, cudaStream_t stream,
                               ops::ConvertStats* stats = nullptr) {
  return ctx ? ops::to_device_coo<V, I>(*ctx, a, stats) : ops::to_device_coo<V, I>(a, stream, stats);
}

template <class V, class I>
void check_build_coo(const Coo<V>& coo, const BuildOptions& options, const Matrix<V>& want, cudaStream_t stream,
                     const std::string& what, ops::Context* ctx = nullptr) {
  const DeviceCooInput<V, I> in(coo);
  ops::ConvertStats stats;
  const DeviceMatrix<V> dev = build_on<V>(ctx, in.view(), options, stream, &stats);
  expect_same_pool(dev, want, options, what);
  SCOPED_TRACE(what + " stats");
  expect_build_stats(stats, coo.nnz(), want);
}

template <class V, class I>
void check_build_csr(const Csr<V>& csr, const BuildOptions& options, const Matrix<V>& want, cudaStream_t stream,
                     const std::string& what, ops::Context* ctx = nullptr) {
  const DeviceCsrInput<V, I> in(csr);
  ops::ConvertStats stats;
  const DeviceMatrix<V> dev = build_on<V>(ctx, in.view(), options, stream, &stats);
  expect_same_pool(dev, want, options, what);
  SCOPED_TRACE(what + " stats");
  expect_build_stats(stats, csr.nnz(), want);
}

template <class V, class I>
void expect_csr(const std::vector<I>& row_ptr, const std::vector<I>& col, const std::vector<V>& val,
                const Csr<V>& want) {
  expect_indices(row_ptr, want.row_ptr, "row_ptr");
  expect_indices(col, want.col, "col");
  expect_values(val, want.val, "val");
}

template <class V, class I>
void expect_coo(const std::vector<I>& row, const std::vector<I>& col, const std::vector<V>& val, const Coo<V>& want) {
  expect_indices(row, want.row, "row");
  expect_indices(col, want.col, "col");
  expect_values(val, want.val, "val");
}

// The four extraction forms of `dev` in its current state against the host's.
template <class V, class I>
void check_extract(const DeviceMatrix<V>& dev, const HostState<V>& st, cudaStream_t stream, ops::Context* ctx) {
  SCOPED_TRACE(std::string(st.transposed ? "state T" : "state N") + ", scale " + std::to_string(double(st.scale)));
  ASSERT_EQ(dev.transposed(), st.transposed);
  const std::uint64_t nnz = dev.nnz();
  const index_t rows = dev.rows();
  ASSERT_EQ(nnz, st.coo.nnz());
  if (st.with_csr) {
    {
      SCOPED_TRACE("to_device_csr, library-allocated");
      ops::ConvertStats stats;
      const ops::DeviceCsr<V, I> c = to_csr_on<V, I>(ctx, dev, stream, &stats);
      EXPECT_EQ(c.rows, st.csr.rows);
      EXPECT_EQ(c.cols, st.csr.cols);
      EXPECT_EQ(c.nnz, nnz);
      ASSERT_GE(c.row_ptr.size(), (rows + 1) * sizeof(I));
      ASSERT_GE(c.col.size(), nnz * sizeof(I));
      ASSERT_GE(c.val.size(), nnz * sizeof(V));
      const auto v = c.view();
      expect_csr<V, I>(download_array<I>(v.row_ptr, rows + 1), download_array<I>(v.col, nnz),
                       download_array<V>(v.val, nnz), st.csr);
      expect_extract_stats(stats, dev);
    }
    {
      SCOPED_TRACE("to_device_csr, caller memory");
      DeviceArray<I> rp(rows + 1), col(nnz);
      DeviceArray<V> val(nnz);
      rp.poison();
      col.poison();
      val.poison();
      ops::ConvertStats stats;
      if (ctx) ops::to_device_csr<V, I>(*ctx, dev, rp.get(), col.get(), val.get(), &stats);
      else ops::to_device_csr<V, I>(dev, rp.get(), col.get(), val.get(), stream, &stats);
      expect_csr<V, I>(rp.download(), col.download(), val.download(), st.csr);
      expect_extract_stats(stats, dev);
    }
  }
  {
    SCOPED_TRACE("to_device_coo, library-allocated");
    ops::ConvertStats stats;
    const ops::DeviceCoo<V, I> c = to_coo_on<V, I>(ctx, dev, stream, &stats);
    EXPECT_EQ(c.rows, st.coo.rows);
    EXPECT_EQ(c.cols, st.coo.cols);
    EXPECT_EQ(c.nnz, nnz);
    ASSERT_GE(c.row.size(), nnz * sizeof(I));
    ASSERT_GE(c.col.size(), nnz * sizeof(I));
    ASSERT_GE(c.val.size(), nnz * sizeof(V));
    const auto v = c.view();
    expect_coo<V, I>(download_array<I>(v.row, nnz), download_array<I>(v.col, nnz), download_array<V>(v.val, nnz),
                     st.coo);
    expect_extract_stats(stats, dev);
  }
  {
    SCOPED_TRACE("to_device_coo, caller memory");
    DeviceArray<I> row(nnz), col(nnz);
    DeviceArray<V> val(nnz);
    row.poison();
    col.poison();
    val.poison();
    ops::ConvertStats stats;
    if (ctx) ops::to_device_coo<V, I>(*ctx, dev, row.get(), col.get(), val.get(), &stats);
    else ops::to_device_coo<V, I>(dev, row.get(), col.get(), val.get(), stream, &stats);
    expect_coo<V, I>(row.download(), col.download(), val.download(), st.coo);
    expect_extract_stats(stats, dev);
  }
}

template <class I>
bool indices_fit(index_t rows, index_t cols, std::uint64_t nnz) {
  constexpr auto max = static_cast<std::uint64_t>(std::numeric_limits<I>::max());
  return rows <= max && cols <= max && nnz <= max;
}

// One case in one index type; through `ctx` (on its stream) where given.
template <class V, class I>
void run_case(const HostCase<V>& hc, cudaStream_t stream, ops::Context* ctx) {
  if (!indices_fit<I>(hc.coo.rows, hc.coo.cols, hc.coo.nnz())) return;
  SCOPED_TRACE((hc.what + " " + type_name<V, I>() +
                (ctx ? " (context, own stream)" : stream ? " (own stream)" : " (stream 0)")));
  check_build_coo<V, I>(hc.coo, hc.options, hc.host, stream, "build from COO", ctx);
  if (hc.with_csr) {
    check_build_csr<V, I>(hc.csr, hc.options, hc.host, stream, "build from CSR (stable by row)", ctx);
    check_build_csr<V, I>(hc.shuffled, hc.options, hc.host_shuffled, stream, "build from CSR (rows shuffled)", ctx);
  }
  DeviceMatrix<V> dev(hc.host, stream);
  for (const HostState<V>& st : hc.states) {
    dev.set_state(st.transposed, st.scale);
    check_extract<V, I>(dev, st, stream, ctx);
  }
  // Round trip: the extracted arrays, built again, give the same pool (the
  // builder's result depends only on the summed entries).
  dev.set_state(false, V(1));
  {
    const ops::DeviceCoo<V, I> c = to_coo_on<V, I>(ctx, dev, stream);
    expect_same_pool(build_on<V>(ctx, c.view(), hc.options, stream), hc.host, hc.options, "round trip through COO");
  }
  if (hc.with_csr) {
    const ops::DeviceCsr<V, I> c = to_csr_on<V, I>(ctx, dev, stream);
    expect_same_pool(build_on<V>(ctx, c.view(), hc.options, stream), hc.host, hc.options, "round trip through CSR");
  }
}

// Both index types (int32 where the matrix fits it): int32 by the forms that
// take a stream, on stream 0; int64 through a context on a stream of its own
// (its default allocator: results and work memory from the device's
// stream-ordered pool, reused from one call to the next).
template <class V>
void run_all_index_types(const HostCase<V>& hc, cudaStream_t stream) {
  run_case<V, std::int32_t>(hc, nullptr, nullptr);
  ops::Context ctx(stream);
  run_case<V, std::int64_t>(hc, stream, &ctx);
}

template <class V>
void check_input(const std::string& what, const Coo<V>& coo, const BuildOptions& options, std::mt19937_64& rng,
                 cudaStream_t stream) {
  run_all_index_types(prepare(what, coo, options, rng), stream);
}

// check_input in a wide pool, for a case made to hold COOW nodes: a case
// that holds none would test nothing of them, and fails.
template <class V>
void check_wide_input(const std::string& what, const Coo<V>& coo, std::uint32_t node_size, std::mt19937_64& rng,
                      cudaStream_t stream) {
  const auto hc = prepare(what, coo, BuildOptions{node_size, true}, rng);
  ASSERT_GT(validate(hc.host.content()).coow, 0u) << what << ": the case must contain COOW nodes";
  run_all_index_types(hc, stream);
}

// ---------------------------------------------------------------------------
// Inputs.

template <class V>
Coo<V> coo_from(index_t rows, index_t cols, const std::vector<std::tuple<index_t, index_t, V>>& es) {
  Coo<V> m;
  m.rows = rows;
  m.cols = cols;
  for (const auto& [r, c, v] : es) m.push(r, c, v);
  return m;
}

// Duplicates whose sum depends on its order in float: 1e8 + 1 - 1e8 is 0,
// 1 - 1e8 + 1e8 is 0 too but 1e8 - 1e8 + 1 is 1. Each position has 2..8
// entries, all interleaved in a random order.
template <class V>
Coo<V> cancelling_duplicates(index_t rows, index_t cols, std::size_t positions, std::mt19937_64& rng) {
  const V big = V(1e8);
  const V pattern[] = {big, V(1), -big, V(1), V(0.25), -big, big, V(-3)};
  std::uniform_int_distribution<index_t> r(0, rows - 1), c(0, cols - 1);
  std::vector<std::tuple<index_t, index_t, V>> es;
  for (std::size_t p = 0; p < positions; ++p) {
    const index_t i = r(rng), j = c(rng);
    const std::size_t count = 2 + rng() % 7;
    for (std::size_t k = 0; k < count; ++k) es.emplace_back(i, j, pattern[rng() % 8]);
  }
  std::shuffle(es.begin(), es.end(), rng);
  return coo_from<V>(rows, cols, es);
}

// Explicit zeros, negative zeros and sums that cancel: all stay entries, bit for bit.
template <class V>
Coo<V> zeros_and_cancellations(std::mt19937_64& rng) {
  std::vector<std::tuple<index_t, index_t, V>> es;
  std::uniform_int_distribution<index_t> r(0, 299), c(0, 199);
  for (int k = 0; k < 400; ++k) {
    const index_t i = r(rng), j = c(rng);
    switch (k % 5) {
      case 0:
        es.emplace_back(i, j, V(0));
        break;
      case 1:
        es.emplace_back(i, j, V(-0.0));
        break;
      case 2:  // -0 + -0 = -0
        es.emplace_back(i, j, V(-0.0));
        es.emplace_back(i, j, V(-0.0));
        break;
      case 3: {  // x - x = +0
        const V x = random_value<V>(rng);
        es.emplace_back(i, j, x);
        es.emplace_back(i, j, -x);
        break;
      }
      default:
        es.emplace_back(i, j, random_value<V>(rng));
        break;
    }
  }
  std::shuffle(es.begin(), es.end(), rng);
  return coo_from<V>(300, 200, es);
}


}  // namespace hisparse::testing::convert_gpu
