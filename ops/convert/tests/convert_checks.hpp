#pragma once
// One conversion test case on the host (the builder's matrix, its CSR forms,
// its states) and the expectations every GPU result is held to.
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
#include "support/random_matrix.hpp"
#include "device_test_memory.hpp"

namespace hisparse::testing::convert_gpu {

// ---------------------------------------------------------------------------
// Host-side inputs and references.

template <class V, class I>
std::string type_name() {
  return std::string(std::is_same_v<V, float> ? "f32" : "f64") + (sizeof(I) == 4 ? " i32" : " i64");
}

inline std::string options_name(const BuildOptions& o) {
  return "d" + std::to_string(o.node_size) + (o.wide_nodes ? "" : " standard");
}

template <class I>
std::vector<I> narrow(const std::vector<index_t>& v) {
  std::vector<I> out(v.size());
  for (std::size_t k = 0; k < v.size(); ++k) out[k] = static_cast<I>(v[k]);
  return out;
}

// Entries sorted by row; a stable sort, so within a row (duplicates
// included) the input order stays: build_matrix of it sums duplicates in the
// same order as build_matrix of the Coo.
template <class V>
Csr<V> stable_row_csr(const Coo<V>& coo) {
  Csr<V> csr;
  csr.rows = coo.rows;
  csr.cols = coo.cols;
  csr.row_ptr.assign(coo.rows + 1, 0);
  for (index_t r : coo.row) ++csr.row_ptr[r + 1];
  std::partial_sum(csr.row_ptr.begin(), csr.row_ptr.end(), csr.row_ptr.begin());
  std::vector<index_t> next(csr.row_ptr.begin(), csr.row_ptr.end() - 1);
  csr.col.resize(coo.nnz());
  csr.val.resize(coo.nnz());
  for (std::size_t k = 0; k < coo.nnz(); ++k) {
    const index_t p = next[coo.row[k]]++;
    csr.col[p] = coo.col[k];
    csr.val[p] = coo.val[k];
  }
  return csr;
}

// The entries of every row in a random order (columns unsorted, duplicates
// reordered: the host reference is then build_matrix of this CSR).
template <class V>
void shuffle_within_rows(Csr<V>& csr, std::mt19937_64& rng) {
  std::vector<std::size_t> perm;
  std::vector<index_t> cols;
  std::vector<V> vals;
  for (index_t r = 0; r < csr.rows; ++r) {
    const std::size_t b = csr.row_ptr[r], e = csr.row_ptr[r + 1];
    perm.resize(e - b);
    std::iota(perm.begin(), perm.end(), std::size_t{0});
    std::shuffle(perm.begin(), perm.end(), rng);
    cols.assign(csr.col.begin() + b, csr.col.begin() + e);
    vals.assign(csr.val.begin() + b, csr.val.begin() + e);
    for (std::size_t k = 0; k < perm.size(); ++k) {
      csr.col[b + k] = cols[perm[k]];
      csr.val[b + k] = vals[perm[k]];
    }
  }
}

// Beyond this many rows the tests build no CSR (row pointers of 5e9 rows
// would take 40 GB): only the COO forms run there.
constexpr index_t max_csr_rows = index_t{1} << 26;

template <class V>
struct HostState {
  bool transposed = false;
  V scale = V(1);
  bool with_csr = false;
  Csr<V> csr;  // to_csr(host.with_state(transposed, scale))
  Coo<V> coo;  // to_coo(...)
};

// One input under one option set, with every host reference the GPU checks need.
template <class V>
struct HostCase {
  std::string what;
  BuildOptions options;
  Coo<V> coo;
  Matrix<V> host;  // build_matrix(coo, options)
  bool with_csr = false;
  Csr<V> csr;               // stable_row_csr(coo): its reference is `host` too
  Csr<V> shuffled;          // columns shuffled within rows
  Matrix<V> host_shuffled;  // build_matrix(shuffled, options) = build_matrix(csr_to_coo(shuffled))
  std::vector<HostState<V>> states;
};

template <class V>
HostCase<V> prepare(const std::string& what, Coo<V> coo, const BuildOptions& options, std::mt19937_64& rng) {
  HostCase<V> hc;
  hc.what = what + " " + options_name(options);
  hc.options = options;
  hc.host = build_matrix(coo, options);
  hc.with_csr = coo.rows <= max_csr_rows;
  if (hc.with_csr) {
    hc.csr = stable_row_csr(coo);
    hc.shuffled = hc.csr;
    shuffle_within_rows(hc.shuffled, rng);
    hc.host_shuffled = build_matrix(csr_to_coo(hc.shuffled), options);
  }
  // Plain, scaled, and transposed and scaled: the extraction scales where it
  // stores, in each of its paths (the bands and row paths take plain-state
  // pools alone, so a scaled plain state is theirs to get right too).
  for (const auto& [t, s] : {std::pair{false, V(1)}, std::pair{false, V(-2)}, std::pair{true, V(-2)}}) {
    HostState<V> st;
    st.transposed = t;
    st.scale = s;
    const Matrix<V> m = hc.host.with_state(t, s);
    st.with_csr = m.rows() <= max_csr_rows;
    if (st.with_csr) st.csr = to_csr(m);
    st.coo = to_coo(m);
    hc.states.push_back(std::move(st));
  }
  hc.coo = std::move(coo);
  return hc;
}

// ---------------------------------------------------------------------------
// Comparisons.

template <class V>
void expect_same_pool(const DeviceMatrix<V>& dev, const Matrix<V>& want, const BuildOptions& options,
                      const std::string& what) {
  SCOPED_TRACE(what);
  EXPECT_FALSE(dev.transposed());
  EXPECT_EQ(dev.scale(), V(1));
  EXPECT_EQ(dev.wide_nodes(), options.wide_nodes);
  EXPECT_EQ(dev.nnz(), want.nnz());
  EXPECT_EQ(dev.shape(), want.content().shape);
  ASSERT_EQ(dev.pool_bytes(), want.pool_bytes());
  const Matrix<V> got = dev.download();
  try {
    (void)validate(got.content());
  } catch (const Error& e) {
    ADD_FAILURE() << "the GPU-built pool does not validate: " << e.what();
  }
  EXPECT_EQ(got.nnz(), want.nnz());
  EXPECT_EQ(got.content().shape, want.content().shape);
  ASSERT_EQ(got.pool_bytes(), want.pool_bytes());
  const auto* a = reinterpret_cast<const unsigned char*>(got.content().pool.data());
  const auto* b = reinterpret_cast<const unsigned char*>(want.content().pool.data());
  if (std::memcmp(a, b, want.pool_bytes()) != 0) {
    std::size_t k = 0;
    while (a[k] == b[k]) ++k;
    ADD_FAILURE() << "pools differ: first at byte " << k << " of " << want.pool_bytes() << " (GPU " << int(a[k])
                  << ", host " << int(b[k]) << ")";
  }
}

template <class I>
void expect_indices(const std::vector<I>& got, const std::vector<index_t>& want, const char* name) {
  ASSERT_EQ(got.size(), want.size()) << name;
  for (std::size_t k = 0; k < want.size(); ++k) {
    if (got[k] < 0 || static_cast<index_t>(got[k]) != want[k]) {
      ADD_FAILURE() << name << "[" << k << "] = " << got[k] << ", expected " << want[k];
      return;
    }
  }
}

// Bit for bit (negative zeros included).
template <class V>
void expect_values(const std::vector<V>& got, const std::vector<V>& want, const char* name) {
  ASSERT_EQ(got.size(), want.size()) << name;
  for (std::size_t k = 0; k < want.size(); ++k) {
    if (std::memcmp(&got[k], &want[k], sizeof(V)) != 0) {
      ADD_FAILURE() << name << "[" << k << "] = " << got[k] << ", expected " << want[k] << " (bits differ)";
      return;
    }
  }
}

inline void expect_work_bound(const ops::ConvertStats& s, std::uint64_t entries, std::uint32_t depth, std::size_t value_bytes) {
  const std::uint64_t bound = ops::convert_work_bound(entries, depth, value_bytes);
  EXPECT_LE(s.peak_work_bytes, bound) << "work memory over the documented bound for " << entries << " entries";
}

template <class V>
void expect_build_stats(const ops::ConvertStats& s, std::uint64_t input_entries, const Matrix<V>& want) {
  EXPECT_EQ(s.input_entries, input_entries);
  EXPECT_EQ(s.entries, want.nnz());
  EXPECT_EQ(s.pool_bytes, want.pool_bytes());
  EXPECT_LE(s.leaves, s.entries);
  if (input_entries > 0) {
    EXPECT_GT(s.peak_work_bytes, 0u);
  }
  expect_work_bound(s, input_entries, want.content().shape.depth, sizeof(V));
}

template <class V>
void expect_extract_stats(const ops::ConvertStats& s, const DeviceMatrix<V>& dev) {
  EXPECT_EQ(s.input_entries, dev.nnz());
  EXPECT_EQ(s.entries, dev.nnz());
  EXPECT_EQ(s.pool_bytes, dev.pool_bytes());
  expect_work_bound(s, dev.nnz(), dev.shape().depth, sizeof(V));
}


}  // namespace hisparse::testing::convert_gpu
