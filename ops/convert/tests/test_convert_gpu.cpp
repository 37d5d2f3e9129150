// GPU conversion against the host builder (ops/convert, convert_gpu.hpp):
//  * build_device_matrix from device COO and CSR arrays gives the host
//    builder's pool byte for byte (validated, same shape, nnz and size), for
//    f32/f64 values and int32/int64 indices, every SuiteSparse matrix and
//    random matrices of every kind (rectangular, empty, one entry, cancelling
//    duplicates, explicit and negative zeros, dense blocks, wide nodes, node
//    sizes 2..256, dimensions beyond 2^32), CSR rows in any column order;
//  * to_device_csr / to_device_coo (library-allocated and into caller
//    memory) give the host's to_csr / to_coo exactly, in the plain and in a
//    transposed, scaled state, and a round trip rebuilds the same pool;
//  * bad device input throws hisparse::Error naming the row or entry, gives
//    back its memory and leaves the device usable; int32 output of a matrix
//    taller than 2^31 - 1 rows is a LimitError; a device without room and
//    every failed allocation in turn fail cleanly;
//  * ConvertStats: counts, pool size, and the documented work-memory bound.
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

using namespace hisparse;
using namespace hisparse::testing;
namespace fs = std::filesystem;

namespace {

// ---------------------------------------------------------------------------
// Device memory of the test's own (plain cudaMalloc, so that fault injection
// in DeviceBytes never hits it).

template <class T>
std::vector<T> download_array(const void* p, std::size_t n) {
  std::vector<T> h(n);
  if (n) cuda_check(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), "cudaMemcpy(test download)");
  return h;
}

template <class T>
class DeviceArray {
 public:
  explicit DeviceArray(std::size_t n) : n_(n) {
    void* p = nullptr;
    cuda_check(cudaMalloc(&p, std::max<std::size_t>(n, 1) * sizeof(T)), "cudaMalloc(test array)");
    p_ = static_cast<T*>(p);
  }
  explicit DeviceArray(const std::vector<T>& h) : DeviceArray(h.size()) {
    if (n_) cuda_check(cudaMemcpy(p_, h.data(), n_ * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy(test upload)");
    // A pageable upload may still be in flight when cudaMemcpy returns; the
    // conversion may run on a non-blocking stream.
    cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize(test upload)");
  }
  DeviceArray(DeviceArray&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  DeviceArray& operator=(DeviceArray&&) = delete;
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  ~DeviceArray() {
    if (p_) cudaFree(p_);
  }
  [[nodiscard]] T* get() const { return p_; }
  [[nodiscard]] std::size_t size() const { return n_; }
  // Garbage in caller-memory outputs: an element the conversion leaves unwritten shows.
  void poison() {
    cuda_check(cudaMemset(p_, 0xA5, std::max<std::size_t>(n_, 1) * sizeof(T)), "cudaMemset(test poison)");
    cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize(test poison)");
  }
  void set(std::size_t i, T v) {
    cuda_check(cudaMemcpy(p_ + i, &v, sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy(test poke)");
    cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize(test poke)");
  }
  [[nodiscard]] std::vector<T> download() const { return download_array<T>(p_, n_); }

 private:
  T* p_ = nullptr;
  std::size_t n_ = 0;
};

// A blocking stream (ordered with the legacy default stream that the test's
// cudaMemcpy calls use), so that the conversions also run off stream 0.
class Stream {
 public:
  Stream() { cuda_check(cudaStreamCreate(&s_), "cudaStreamCreate"); }
  ~Stream() { cudaStreamDestroy(s_); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  [[nodiscard]] cudaStream_t get() const { return s_; }

 private:
  cudaStream_t s_ = nullptr;
};

std::size_t free_device_bytes() {
  std::size_t free = 0, total = 0;
  EXPECT_EQ(cudaMemGetInfo(&free, &total), cudaSuccess);
  return free;
}

constexpr std::size_t leak_slack = std::size_t{4} << 20;

void expect_device_usable(const std::string& what) {
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << what;
}

// Takes all device memory but about `leave` bytes and gives it back when
// destroyed: a device without room for a conversion.
class MemoryHog {
 public:
  explicit MemoryHog(std::size_t leave) {
    for (std::size_t step : {std::size_t{1} << 30, std::size_t{64} << 20, std::size_t{2} << 20}) {
      while (free_device_bytes() > leave + step) {
        void* p = nullptr;
        if (cudaMalloc(&p, step) != cudaSuccess) {
          (void)cudaGetLastError();
          break;
        }
        chunks_.push_back(p);
      }
    }
  }
  ~MemoryHog() {
    for (void* p : chunks_) cudaFree(p);
  }
  MemoryHog(const MemoryHog&) = delete;
  MemoryHog& operator=(const MemoryHog&) = delete;

 private:
  std::vector<void*> chunks_;
};

// ---------------------------------------------------------------------------
// Host-side inputs and references.

template <class V, class I>
std::string type_name() {
  return std::string(std::is_same_v<V, float> ? "f32" : "f64") + (sizeof(I) == 4 ? " i32" : " i64");
}

std::string options_name(const BuildOptions& o) {
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
  for (const auto& [t, s] : {std::pair{false, V(1)}, std::pair{true, V(-2)}}) {
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

void expect_work_bound(const ops::ConvertStats& s, std::uint64_t entries, std::uint32_t depth, std::size_t value_bytes) {
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

template <class V, class I>
void check_build_coo(const Coo<V>& coo, const BuildOptions& options, const Matrix<V>& want, cudaStream_t stream,
                     const std::string& what) {
  const DeviceCooInput<V, I> in(coo);
  ops::ConvertStats stats;
  const DeviceMatrix<V> dev = ops::build_device_matrix(in.view(), options, stream, &stats);
  expect_same_pool(dev, want, options, what);
  SCOPED_TRACE(what + " stats");
  expect_build_stats(stats, coo.nnz(), want);
}

template <class V, class I>
void check_build_csr(const Csr<V>& csr, const BuildOptions& options, const Matrix<V>& want, cudaStream_t stream,
                     const std::string& what) {
  const DeviceCsrInput<V, I> in(csr);
  ops::ConvertStats stats;
  const DeviceMatrix<V> dev = ops::build_device_matrix(in.view(), options, stream, &stats);
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
void check_extract(const DeviceMatrix<V>& dev, const HostState<V>& st, cudaStream_t stream) {
  SCOPED_TRACE(st.transposed ? "state T, scale -2" : "state N");
  ASSERT_EQ(dev.transposed(), st.transposed);
  const std::uint64_t nnz = dev.nnz();
  const index_t rows = dev.rows();
  ASSERT_EQ(nnz, st.coo.nnz());
  if (st.with_csr) {
    {
      SCOPED_TRACE("to_device_csr, library-allocated");
      ops::ConvertStats stats;
      const ops::DeviceCsr<V, I> c = ops::to_device_csr<V, I>(dev, stream, &stats);
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
      ops::to_device_csr<V, I>(dev, rp.get(), col.get(), val.get(), stream, &stats);
      expect_csr<V, I>(rp.download(), col.download(), val.download(), st.csr);
      expect_extract_stats(stats, dev);
    }
  }
  {
    SCOPED_TRACE("to_device_coo, library-allocated");
    ops::ConvertStats stats;
    const ops::DeviceCoo<V, I> c = ops::to_device_coo<V, I>(dev, stream, &stats);
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
    ops::to_device_coo<V, I>(dev, row.get(), col.get(), val.get(), stream, &stats);
    expect_coo<V, I>(row.download(), col.download(), val.download(), st.coo);
    expect_extract_stats(stats, dev);
  }
}

template <class I>
bool indices_fit(index_t rows, index_t cols, std::uint64_t nnz) {
  constexpr auto max = static_cast<std::uint64_t>(std::numeric_limits<I>::max());
  return rows <= max && cols <= max && nnz <= max;
}

template <class V, class I>
void run_case(const HostCase<V>& hc, cudaStream_t stream) {
  if (!indices_fit<I>(hc.coo.rows, hc.coo.cols, hc.coo.nnz())) return;
  SCOPED_TRACE((hc.what + " " + type_name<V, I>() + (stream ? " (own stream)" : " (stream 0)")));
  check_build_coo<V, I>(hc.coo, hc.options, hc.host, stream, "build from COO");
  if (hc.with_csr) {
    check_build_csr<V, I>(hc.csr, hc.options, hc.host, stream, "build from CSR (stable by row)");
    check_build_csr<V, I>(hc.shuffled, hc.options, hc.host_shuffled, stream, "build from CSR (rows shuffled)");
  }
  DeviceMatrix<V> dev(hc.host, stream);
  for (const HostState<V>& st : hc.states) {
    dev.set_state(st.transposed, st.scale);
    check_extract<V, I>(dev, st, stream);
  }
  // Round trip: the extracted arrays, built again, give the same pool (the
  // builder's result depends only on the summed entries).
  dev.set_state(false, V(1));
  {
    const ops::DeviceCoo<V, I> c = ops::to_device_coo<V, I>(dev, stream);
    expect_same_pool(ops::build_device_matrix(c.view(), hc.options, stream), hc.host, hc.options,
                     "round trip through COO");
  }
  if (hc.with_csr) {
    const ops::DeviceCsr<V, I> c = ops::to_device_csr<V, I>(dev, stream);
    expect_same_pool(ops::build_device_matrix(c.view(), hc.options, stream), hc.host, hc.options,
                     "round trip through CSR");
  }
}

// Both index types (int32 where the matrix fits it), one on stream 0, one on a stream of its own.
template <class V>
void run_all_index_types(const HostCase<V>& hc, cudaStream_t stream) {
  run_case<V, std::int32_t>(hc, nullptr);
  run_case<V, std::int64_t>(hc, stream);
}

template <class V>
void check_input(const std::string& what, const Coo<V>& coo, const BuildOptions& options, std::mt19937_64& rng,
                 cudaStream_t stream) {
  run_all_index_types(prepare(what, coo, options, rng), stream);
}

// ---------------------------------------------------------------------------
// Inputs.

std::vector<fs::path> real_matrices() {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(matrices_dir())) {
    // block_2000.mtx is rejected by the reader on purpose (tests/matrices).
    if (e.path().extension() == ".mtx" && e.path().filename() != "block_2000.mtx") out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

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

}  // namespace

// ---------------------------------------------------------------------------

// Every SuiteSparse matrix (complex ones skipped: they read only into complex
// types), at the default node size and a small one, wide nodes on and off.
TEST(ConvertGpu, RealMatrices) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  Stream stream;
  const auto files = real_matrices();
  ASSERT_GE(files.size(), 20u);
  auto run = [&]<class V>(const std::vector<BuildOptions>& option_sets) {
    std::size_t read = 0;
    for (const auto& f : files) {
      Coo<V> coo;
      try {
        coo = read_matrix_market<V>(f);
      } catch (const Error& e) {
        std::printf("  %s skipped: %s\n", f.filename().c_str(), e.what());
        continue;
      }
      ++read;
      for (const BuildOptions& o : option_sets) check_input(f.filename().string(), coo, o, rng, stream.get());
    }
    EXPECT_GE(read, 20u);
  };
  run.template operator()<double>({{default_node_size, true}, {8, true}, {16, false}});
  run.template operator()<float>({{default_node_size, true}, {16, true}});
}

// Tall and wide random matrices at every node size class, wide nodes on and off.
TEST(ConvertGpu, RectangularAtEveryNodeSize) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  Stream stream;
  const auto tall_d = random_coo<double>(5000, 300, 20000, rng);
  const auto wide_d = random_coo<double>(300, 5000, 20000, rng);
  const auto tall_f = random_coo<float>(4000, 700, 15000, rng);
  const auto wide_f = random_coo<float>(700, 4000, 15000, rng);
  for (std::uint32_t d : {2u, 4u, 16u, 128u, 256u}) {
    for (bool wide : {true, false}) {
      check_input("tall f64", tall_d, {d, wide}, rng, stream.get());
      check_input("wide f64", wide_d, {d, wide}, rng, stream.get());
    }
    check_input("tall f32", tall_f, {d, true}, rng, stream.get());
    check_input("wide f32", wide_f, {d, true}, rng, stream.get());
  }
  // Sizes that are not multiples of the node size, one row, one column.
  check_input("1 x 3000", random_coo<double>(1, 3000, 500, rng), {16, true}, rng, stream.get());
  check_input("3000 x 1", random_coo<float>(3000, 1, 500, rng), {4, true}, rng, stream.get());
  check_input("odd 1000 x 999", random_coo<double>(1000, 999, 8000, rng), {8, false}, rng, stream.get());
}

TEST(ConvertGpu, EmptyAndSingleEntry) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  Stream stream;
  auto run = [&]<class V>() {
    for (const BuildOptions o :
         {BuildOptions{default_node_size, true}, BuildOptions{2, false}, BuildOptions{16, true}}) {
      check_input("empty 100 x 70", Coo<V>{100, 70, {}, {}, {}}, o, rng, stream.get());
      check_input("empty 0 x 0", Coo<V>{0, 0, {}, {}, {}}, o, rng, stream.get());
      check_input("empty 0 x 5", Coo<V>{0, 5, {}, {}, {}}, o, rng, stream.get());
      check_input("empty 5 x 0", Coo<V>{5, 0, {}, {}, {}}, o, rng, stream.get());
      check_input("1 x 1", coo_from<V>(1, 1, {{0, 0, V(3.5)}}), o, rng, stream.get());
      check_input("1 x 1 zero", coo_from<V>(1, 1, {{0, 0, V(0)}}), o, rng, stream.get());
      check_input("one entry in a corner", coo_from<V>(1000, 1000, {{999, 0, V(-1.25)}}), o, rng, stream.get());
      check_input("one entry, last cell", coo_from<V>(777, 1234, {{776, 1233, V(2)}}), o, rng, stream.get());
    }
  };
  run.template operator()<float>();
  run.template operator()<double>();
}

// Duplicates are summed in input order: in float, the order decides the sum.
TEST(ConvertGpu, DuplicatesSumInInputOrder) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  Stream stream;
  for (const BuildOptions o : {BuildOptions{default_node_size, true}, BuildOptions{4, true}, BuildOptions{16, false}}) {
    check_input("cancelling f32", cancelling_duplicates<float>(500, 400, 3000, rng), o, rng, stream.get());
    check_input("cancelling f64", cancelling_duplicates<double>(500, 400, 3000, rng), o, rng, stream.get());
    // Every cell many times over.
    check_input("7 x 5, 5000 entries f32", random_coo<float>(7, 5, 5000, rng), o, rng, stream.get());
  }
  // One cell 200000 times (runs across many thread blocks), among a few others.
  Coo<float> one_cell = random_coo<float>(1000, 1000, 2000, rng);
  for (int k = 0; k < 200000; ++k) one_cell.push(417, 33, k % 3 == 0 ? 1e8f : (k % 3 == 1 ? 1.0f : -1e8f) * 0.999f);
  check_input("one cell 200000 times f32", one_cell, {16, true}, rng, stream.get());
}

TEST(ConvertGpu, ExplicitZerosAreKept) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  Stream stream;
  for (const BuildOptions o : {BuildOptions{default_node_size, true}, BuildOptions{4, false}, BuildOptions{16, true}}) {
    check_input("zeros f32", zeros_and_cancellations<float>(rng), o, rng, stream.get());
    check_input("zeros f64", zeros_and_cancellations<double>(rng), o, rng, stream.get());
  }
  Coo<double> all_zero = random_coo<double>(400, 400, 3000, rng);
  for (auto& v : all_zero.val) v = 0.0;
  check_input("all values zero", all_zero, {16, true}, rng, stream.get());
}

// Clustered entries with fill 1.0: dense leaves (and fully dense matrices).
TEST(ConvertGpu, DenseBlocks) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  Stream stream;
  bool dense_seen = false;
  auto run = [&](const std::string& what, const auto& coo, const BuildOptions& o) {
    const auto hc = prepare(what, coo, o, rng);
    dense_seen = dense_seen || validate(hc.host.content()).dense > 0;
    run_all_index_types(hc, stream.get());
  };
  run("clustered f64", clustered_coo<double>(1000, 800, 6, 64, 1.0, rng), {16, true});
  run("clustered f32", clustered_coo<float>(1000, 800, 6, 64, 1.0, rng), {4, false});
  run("clustered f64 d128", clustered_coo<double>(2000, 2000, 3, 300, 1.0, rng), {default_node_size, true});
  run("fully dense 256 f32", clustered_coo<float>(256, 256, 1, 256, 1.0, rng), {256, true});
  // Dense blocks entered twice: duplicates inside dense leaves.
  auto twice = clustered_coo<double>(300, 300, 2, 40, 1.0, rng);
  const auto again = twice;
  for (std::size_t k = 0; k < again.nnz(); ++k) twice.push(again.row[k], again.col[k], -0.5 * again.val[k]);
  run("dense blocks twice", twice, {8, true});
  EXPECT_TRUE(dense_seen) << "no case had a dense leaf";
}

// Scattered entries in large sparse matrices: the builder's rule makes COOW (wide) nodes.
TEST(ConvertGpu, WideNodes) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  Stream stream;
  auto run = [&](const std::string& what, const auto& coo, std::uint32_t d) {
    const auto hc = prepare(what, coo, BuildOptions{d, true}, rng);
    EXPECT_GT(validate(hc.host.content()).coow, 0u) << what << ": the case must contain wide nodes";
    run_all_index_types(hc, stream.get());
    // The same input in the standard format (no wide nodes), where it is quick.
    if (coo.nnz() <= 100000) check_input(what, coo, BuildOptions{d, false}, rng, stream.get());
  };
  // Mostly one entry per 256 x 256 block: COOW in f32 (its 16-bit coordinates
  // beat an inner node and a leaf), not in f64, which then runs the standard way.
  run("200000^2, 5000 entries f32", random_coo<float>(200000, 200000, 5000, rng), 16);
  check_input("200000^2, 5000 entries f64", random_coo<double>(200000, 200000, 5000, rng), BuildOptions{16, true}, rng,
              stream.get());
  run("200000^2, 50000 entries f64", random_coo<double>(200000, 200000, 50000, rng), 16);
  run("2000^2, 60000 entries d4 (COOW beside leaves)", random_coo<double>(2000, 2000, 60000, rng), 4);
  run("5000^2, 60000 entries d8", random_coo<float>(5000, 5000, 60000, rng), 8);
  run("3000 x 1700, 30000 entries d16 (all COOW)", random_coo<double>(3000, 1700, 30000, rng), 16);
  run("4096^2, 8000 entries d64 (wide root)", random_coo<float>(4096, 4096, 8000, rng), 64);
  run("100000 x 60000, 200000 entries d128", random_coo<double>(100000, 60000, 200000, rng), 128);
  run("70000^2, 300000 entries d256 (65536-wide coordinates)", random_coo<double>(70000, 70000, 300000, rng), 256);
}

// CSR rows in any column order: reversed rows with duplicates apart (the host
// reference sums in the CSR's own order: build_matrix(csr_to_coo(csr))).
TEST(ConvertGpu, CsrColumnsUnsortedWithinRows) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  Stream stream;
  auto run = [&]<class V, class I>(const Csr<V>& csr, const BuildOptions& o, const std::string& what) {
    SCOPED_TRACE((what + " " + options_name(o) + " " + type_name<V, I>()));
    check_build_csr<V, I>(csr, o, build_matrix(csr_to_coo(csr), o), stream.get(), what);
  };
  auto csr = stable_row_csr(cancelling_duplicates<float>(300, 300, 2000, rng));
  for (index_t r = 0; r < csr.rows; ++r) {
    std::reverse(csr.col.begin() + csr.row_ptr[r], csr.col.begin() + csr.row_ptr[r + 1]);
    std::reverse(csr.val.begin() + csr.row_ptr[r], csr.val.begin() + csr.row_ptr[r + 1]);
  }
  // Sanity of the case itself: some row is out of column order.
  bool unsorted = false;
  for (index_t r = 0; r < csr.rows; ++r)
    unsorted = unsorted || !std::is_sorted(csr.col.begin() + csr.row_ptr[r], csr.col.begin() + csr.row_ptr[r + 1]);
  ASSERT_TRUE(unsorted);
  for (const BuildOptions o : {BuildOptions{default_node_size, true}, BuildOptions{4, true}, BuildOptions{8, false}}) {
    run.template operator()<float, std::int32_t>(csr, o, "reversed rows");
    run.template operator()<float, std::int64_t>(csr, o, "reversed rows");
  }
}

// 64-bit indices: a dimension beyond 2^32 (only int64 runs: int32 cannot hold them).
TEST(ConvertGpu, IndicesBeyond32Bits) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  Stream stream;
  auto run = [&]<class V>() {
    const index_t big = 5'000'000'000;
    std::vector<std::tuple<index_t, index_t, V>> es = {
        {0, 0, V(1)},
        {big - 1, 2, V(2)},
        {index_t{1} << 32, 1, V(3)},
        {(index_t{1} << 32) - 1, 0, V(4)},
        {index_t{1} << 31, 1, V(5)},
        {(index_t{1} << 31) - 1, 2, V(6)},
        {big - 1, 2, V(-0.5)},  // a duplicate
        {3'141'592'653, 1, V(7)},
    };
    std::uniform_int_distribution<index_t> r(0, big - 1), c(0, 2);
    for (int k = 0; k < 60; ++k) es.emplace_back(r(rng), c(rng), random_value<V>(rng));
    const Coo<V> tall = coo_from<V>(big, 3, es);
    Coo<V> wide = tall;  // 3 x 5e9: its CSR has 4 row pointers and 64-bit columns
    std::swap(wide.rows, wide.cols);
    std::swap(wide.row, wide.col);
    for (std::uint32_t d : {2u, 16u, default_node_size, 256u}) {
      check_input("5e9 x 3", tall, {d, true}, rng, stream.get());
      check_input("3 x 5e9", wide, {d, true}, rng, stream.get());
    }
    check_input("5e9 x 3", tall, {16, false}, rng, stream.get());
    check_input("3 x 5e9", wide, {16, false}, rng, stream.get());
    // Near the dimension limit (2^48).
    const index_t huge = (index_t{1} << 47) + 12345;
    const Coo<V> near = coo_from<V>(huge, 2, {{huge - 1, 1, V(1)}, {index_t{1} << 40, 0, V(2)}, {17, 1, V(3)}});
    for (std::uint32_t d : {2u, default_node_size, 256u}) check_input("2^47 x 2", near, {d, true}, rng, stream.get());
  };
  run.template operator()<float>();
  run.template operator()<double>();
}

namespace {

// Runs f, expects hisparse error E; returns its message.
template <class E = Error, class F>
std::string expect_error(F&& f, const std::string& what) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": threw something other than the expected hisparse error: " << e.what();
    return e.what();
  }
  ADD_FAILURE() << what << ": no error";
  return {};
}

// The message names one of `any` (loose: the row or the entry; wording free).
void expect_mentions(const std::string& msg, const std::vector<std::string>& any, const std::string& what) {
  EXPECT_FALSE(msg.empty()) << what << ": empty message";
  if (any.empty()) return;
  const bool found =
      std::any_of(any.begin(), any.end(), [&](const std::string& s) { return msg.find(s) != std::string::npos; });
  std::string list;
  for (const auto& s : any) list += " \"" + s + "\"";
  EXPECT_TRUE(found) << what << ": the message names none of" << list << ": " << msg;
}

template <class V, class I>
void bad_input(std::mt19937_64& rng, cudaStream_t stream) {
  SCOPED_TRACE((type_name<V, I>()));
  const index_t rows = 2000, cols = 1500;
  const std::uint64_t nnz = 20000;
  const Coo<V> coo = random_coo<V>(rows, cols, nnz, rng);
  const BuildOptions opt{16, true};
  const Matrix<V> host = build_matrix(coo, opt);
  const Csr<V> csr = stable_row_csr(coo);
  DeviceCsrInput<V, I> dcsr(csr);
  DeviceCooInput<V, I> dcoo(coo);
  const auto csr_view = dcsr.view();
  const auto coo_view = dcoo.view();
  const auto build_csr = [&] { (void)ops::build_device_matrix(csr_view, opt, stream); };
  const auto build_coo = [&] { (void)ops::build_device_matrix(coo_view, opt, stream); };

  auto good = [&](const std::string& after) {
    expect_device_usable(after);
    SCOPED_TRACE("a good conversion after: " + after);
    expect_same_pool(ops::build_device_matrix(csr_view, opt, stream), host, opt, "CSR");
    expect_same_pool(ops::build_device_matrix(coo_view, opt, stream), host, opt, "COO");
  };
  good("nothing (warm-up)");
  const std::size_t baseline = free_device_bytes();

  // One element of a device array made bad, the call, the element restored.
  auto bad = [&](const std::string& what, DeviceArray<I>& arr, std::size_t k, I bad_value, I good_value,
                 const auto& call, const std::vector<std::string>& mentions) {
    arr.set(k, bad_value);
    const std::string msg = expect_error(call, what);
    std::printf("  %s (%s): %s\n", what.c_str(), type_name<V, I>().c_str(), msg.c_str());
    expect_mentions(msg, mentions, what);
    arr.set(k, good_value);
    good(what);
    EXPECT_GE(free_device_bytes() + leak_slack, baseline) << what << ": memory not given back";
  };
  auto rp = [&](index_t r) { return static_cast<I>(csr.row_ptr[r]); };
  const auto num = [](auto x) { return std::to_string(x); };

  // CSR row pointers.
  bad("CSR row pointers start at 1", dcsr.row_ptr, 0, I(1), rp(0), build_csr, {});
  bad("CSR row pointers decrease at row 1234", dcsr.row_ptr, 1235, I(rp(1234) - 1), rp(1235), build_csr,
      {"1234", "1235"});
  bad("CSR row pointer far beyond nnz at row 1800 (then decreasing)", dcsr.row_ptr, 1800, I(nnz + 500), rp(1800),
      build_csr, {"1799", "1800", "1801", num(nnz + 500)});
  bad("CSR last row pointer nnz - 1", dcsr.row_ptr, rows, I(nnz - 1), rp(rows), build_csr, {num(nnz), num(nnz - 1)});
  bad("CSR last row pointer nnz + 7", dcsr.row_ptr, rows, I(nnz + 7), rp(rows), build_csr, {num(nnz), num(nnz + 7)});

  // CSR columns: the message names the entry or its row.
  auto row_of = [&](std::size_t k) {
    return static_cast<index_t>(std::upper_bound(csr.row_ptr.begin(), csr.row_ptr.end(), k) - csr.row_ptr.begin() - 1);
  };
  bad("CSR column = cols at entry 15432", dcsr.col, 15432, I(cols), I(csr.col[15432]), build_csr,
      {"15432", num(row_of(15432))});
  bad("CSR column -1 at entry 7777", dcsr.col, 7777, I(-1), I(csr.col[7777]), build_csr, {"7777", num(row_of(7777))});
  bad("CSR column at the type's minimum at entry 19998", dcsr.col, 19998, std::numeric_limits<I>::min(),
      I(csr.col[19998]), build_csr, {"19998", num(row_of(19998))});

  // COO indices: the message names the entry.
  bad("COO row = rows at entry 13579", dcoo.row, 13579, I(rows), I(coo.row[13579]), build_coo, {"13579"});
  bad("COO row -1 at entry 11111", dcoo.row, 11111, I(-1), I(coo.row[11111]), build_coo, {"11111"});
  bad("COO column -5 at entry 2468", dcoo.col, 2468, I(-5), I(coo.col[2468]), build_coo, {"2468"});
  bad("COO column = cols at entry 9876", dcoo.col, 9876, I(cols), I(coo.col[9876]), build_coo, {"9876"});
  bad("COO row at entry 0", dcoo.row, 0, I(rows + 3), I(coo.row[0]), build_coo, {});
  bad("COO column at the last entry", dcoo.col, nnz - 1, std::numeric_limits<I>::max(), I(coo.col[nnz - 1]), build_coo,
      {num(nnz - 1)});
  if constexpr (sizeof(I) == 8) {
    // Would alias a valid row if cut to 32 bits.
    bad("COO row 2^32 + 1 at entry 4321", dcoo.row, 4321, I((std::int64_t{1} << 32) + 1), I(coo.row[4321]), build_coo,
        {"4321"});
    bad("CSR column 2^32 + 7 at entry 5555", dcsr.col, 5555, I((std::int64_t{1} << 32) + 7), I(csr.col[5555]),
        build_csr, {"5555", num(row_of(5555))});
  }

  // A node size the format does not have.
  (void)expect_error([&] { (void)ops::build_device_matrix(coo_view, BuildOptions{3, true}, stream); }, "node size 3");
  (void)expect_error(
      [&] {
        (void)ops::build_device_matrix(csr_view, BuildOptions{512, true}, stream);
      },
      "node size 512");
  good("bad node sizes");
  EXPECT_GE(free_device_bytes() + leak_slack, baseline) << "memory not given back";
}

}  // namespace

// Bad device input: hisparse::Error naming the problem's row or entry, nothing
// left allocated, and the next good conversion works.
TEST(ConvertGpu, BadInputThrows) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  Stream stream;
  bad_input<float, std::int32_t>(rng, nullptr);
  bad_input<double, std::int32_t>(rng, stream.get());
  bad_input<float, std::int64_t>(rng, stream.get());
  bad_input<double, std::int64_t>(rng, nullptr);
}

// int32 output of a matrix with more than 2^31 - 1 rows (or columns, once
// transposed) cannot be: LimitError / Error, and int64 output still works.
TEST(ConvertGpu, Int32OutputOfTooTallMatrix) {
  Coo<float> coo;
  coo.rows = 3'000'000'000;
  coo.cols = 2;
  coo.push(2'999'999'999, 1, 1.5f);
  const Matrix<float> host = build_matrix(coo);
  DeviceMatrix<float> dev(host);
  const Coo<float> want_coo = to_coo(host);
  const Csr<float> want_csr_t = to_csr(host.transpose());  // 2 x 3e9

  auto good = [&](const std::string& after) {
    SCOPED_TRACE("a good conversion after: " + after);
    expect_device_usable(after);
    dev.set_state(false, 1.0f);
    const auto c = ops::to_device_coo<float, std::int64_t>(dev);
    ASSERT_EQ(c.nnz, 1u);
    expect_coo<float, std::int64_t>(download_array<std::int64_t>(c.row.get(), 1),
                                    download_array<std::int64_t>(c.col.get(), 1), download_array<float>(c.val.get(), 1),
                                    want_coo);
    dev.set_state(true, 1.0f);
    const auto t = ops::to_device_csr<float, std::int64_t>(dev);
    ASSERT_EQ(t.rows, 2u);
    expect_csr<float, std::int64_t>(download_array<std::int64_t>(t.row_ptr.get(), 3),
                                    download_array<std::int64_t>(t.col.get(), 1), download_array<float>(t.val.get(), 1),
                                    want_csr_t);
  };
  good("nothing (warm-up)");
  const std::size_t baseline = free_device_bytes();

  dev.set_state(false, 1.0f);
  std::string msg =
      expect_error<LimitError>([&] { (void)ops::to_device_csr<float, std::int32_t>(dev); }, "int32 CSR of 3e9 rows");
  std::printf("  int32 CSR of 3e9 rows: %s\n", msg.c_str());
  EXPECT_FALSE(msg.empty());
  good("int32 CSR of 3e9 rows");

  dev.set_state(false, 1.0f);
  msg = expect_error([&] { (void)ops::to_device_coo<float, std::int32_t>(dev); }, "int32 COO with row 2999999999");
  std::printf("  int32 COO with row 2999999999: %s\n", msg.c_str());
  good("int32 COO of 3e9 rows");

  dev.set_state(true, 1.0f);  // 2 x 3e9: the column does not fit int32
  msg = expect_error([&] { (void)ops::to_device_csr<float, std::int32_t>(dev); }, "int32 CSR with column 2999999999");
  std::printf("  int32 CSR with column 2999999999: %s\n", msg.c_str());
  good("int32 CSR of 3e9 columns");
  EXPECT_GE(free_device_bytes() + leak_slack, baseline) << "memory not given back";
}

// A device without room for the conversion's work memory: a clean error
// before anything is allocated; with the room back, the same call works.
TEST(ConvertGpu, NotEnoughDeviceMemory) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  const Coo<double> coo = random_coo<double>(100000, 100000, 1'500'000, rng);
  const BuildOptions opt{default_node_size, true};
  const Matrix<double> host = build_matrix(coo, opt);
  const DeviceCooInput<double, std::int32_t> in(coo);
  DeviceMatrix<double> dev(host);
  const Coo<double> want = to_coo(host);
  auto good = [&](const std::string& after) {
    SCOPED_TRACE("a good conversion after: " + after);
    expect_device_usable(after);
    expect_same_pool(ops::build_device_matrix(in.view(), opt), host, opt, "build");
    const auto c = ops::to_device_coo<double, std::int32_t>(dev);
    expect_coo<double, std::int32_t>(download_array<std::int32_t>(c.row.get(), c.nnz),
                                     download_array<std::int32_t>(c.col.get(), c.nnz),
                                     download_array<double>(c.val.get(), c.nnz), want);
  };
  good("nothing (warm-up)");
  const std::size_t baseline = free_device_bytes();
  {
    // 48 MiB left: less than the fixed part of the bound alone.
    MemoryHog hog(std::size_t{48} << 20);
    const std::size_t before = free_device_bytes();
    std::string msg = expect_error([&] { (void)ops::build_device_matrix(in.view(), opt); }, "build without room");
    std::printf("  build without room: %s\n", msg.c_str());
    msg = expect_error([&] { (void)ops::to_device_coo<double, std::int32_t>(dev); }, "to_device_coo without room");
    std::printf("  to_device_coo without room: %s\n", msg.c_str());
    expect_device_usable("without room");
    EXPECT_GE(free_device_bytes() + leak_slack, before) << "memory not given back without room";
  }
  good("running out of room");
  EXPECT_GE(free_device_bytes() + leak_slack, baseline) << "memory not given back";
}

// Fault injection: the k-th DeviceBytes allocation of each conversion fails,
// k = 0, 1, ... until the conversion makes fewer: each failure is a clean
// memory error that gives back what was allocated before it and leaves the
// device usable; the conversion then succeeds with the right result.
TEST(ConvertGpu, EveryAllocationFailsInTurn) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  Stream stream;
  const BuildOptions opt{16, true};
  const Coo<double> coo = random_coo<double>(3000, 1700, 30000, rng);
  const Matrix<double> host = build_matrix(coo, opt);
  const Csr<double> csr = stable_row_csr(coo);
  const DeviceCooInput<double, std::int32_t> dcoo(coo);
  const DeviceCsrInput<double, std::int64_t> dcsr(csr);
  DeviceMatrix<double> dev(host);
  const Csr<double> want_csr = to_csr(host);
  const Coo<double> want_coo_t = to_coo(host.transpose().scaled(-2.0));
  const cudaStream_t s = stream.get();

  struct Op {
    std::string name;
    bool allocates;  // makes at least one DeviceBytes allocation
    std::function<void()> body;
  };
  const std::vector<Op> ops_list = {
      {"build from COO", true,
       [&] { expect_same_pool(ops::build_device_matrix(dcoo.view(), opt, s), host, opt, "build from COO"); }},
      {"build from CSR", true,
       [&] { expect_same_pool(ops::build_device_matrix(dcsr.view(), opt, s), host, opt, "build from CSR"); }},
      {"to_device_csr", true,
       [&] {
         dev.set_state(false, 1.0);
         const auto c = ops::to_device_csr<double, std::int32_t>(dev, s);
         expect_csr<double, std::int32_t>(download_array<std::int32_t>(c.row_ptr.get(), c.rows + 1),
                                          download_array<std::int32_t>(c.col.get(), c.nnz),
                                          download_array<double>(c.val.get(), c.nnz), want_csr);
       }},
      {"to_device_coo T", true,
       [&] {
         dev.set_state(true, -2.0);
         const auto c = ops::to_device_coo<double, std::int64_t>(dev, s);
         expect_coo<double, std::int64_t>(download_array<std::int64_t>(c.row.get(), c.nnz),
                                          download_array<std::int64_t>(c.col.get(), c.nnz),
                                          download_array<double>(c.val.get(), c.nnz), want_coo_t);
       }},
      {"to_device_coo T into caller memory", false,
       [&] {
         dev.set_state(true, -2.0);
         DeviceArray<std::int32_t> row(dev.nnz()), col(dev.nnz());
         DeviceArray<double> val(dev.nnz());
         ops::to_device_coo<double, std::int32_t>(dev, row.get(), col.get(), val.get(), s);
         expect_coo<double, std::int32_t>(row.download(), col.download(), val.download(), want_coo_t);
       }},
  };
  for (const Op& op : ops_list) {
    SCOPED_TRACE(op.name);
    op.body();  // warm-up (kernels loaded), and the result right with room
    const std::size_t baseline = free_device_bytes();
    long k = 0;
    for (;; ++k) {
      const std::string what = op.name + ": allocation " + std::to_string(k);
      inject_device_bytes_failure(k);
      bool failed = false;
      try {
        op.body();
      } catch (const std::exception& e) {
        const std::string m = e.what();
        EXPECT_NE(dynamic_cast<const Error*>(&e), nullptr) << what << ": not a hisparse::Error: " << m;
        EXPECT_TRUE(m.find("injected") != std::string::npos || m.find("out of memory") != std::string::npos)
            << what << ": " << m;
        failed = true;
      }
      inject_device_bytes_failure(-1);
      expect_device_usable(what);
      EXPECT_GE(free_device_bytes() + leak_slack, baseline) << what << ": memory not given back";
      if (!failed) break;
      ASSERT_LT(k, 1000) << what << ": never succeeds";
    }
    std::printf("  %s: %ld DeviceBytes allocations, each failed in turn\n", op.name.c_str(), k);
    if (op.allocates) {
      EXPECT_GT(k, 0) << op.name << " allocates no DeviceBytes";
    }
  }
}
