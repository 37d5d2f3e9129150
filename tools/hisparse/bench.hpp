#pragma once
// `hisparse bench`: HiSparse against cuSPARSE on the same matrices and inputs,
// in one process (seed 004 section 7's method). One record per matrix x
// operation x implementation x precision x L2 state.
#include <cstring>
#include <string>
#include <vector>

#include "hisparse/formats/matrix.hpp"

namespace hisparse::cli {

struct BenchOptions {
  int warmup = 20;
  // And at least this long: after seconds of host work (generating and
  // converting a family) the GPU's clocks take longer than 20 short calls to
  // come back up (an R-MAT SpMV once measured 0.208 ms warm against 0.158
  // cold, its median inside the ramp).
  double warmup_ms = 50;
  int runs = 100;
  bool cold = false;  // flush the L2 (write a buffer twice its size) before every timed run
  bool controllers = false;  // also time a full runtime traversal per call under every controller
  bool spmv = true, copy = true, add = true;  // which operations to time (--ops)
};

struct BenchRecord {
  std::string matrix, op, impl, precision, l2;
  std::uint64_t rows = 0, cols = 0, nnz = 0;
  double median_ms = 0, mean_ms = 0, std_ms = 0;
  std::uint64_t bytes = 0;  // the implementation's own matrix bytes
  double rel_error = 0;
  bool ok = false;
  // Conversion records (op "convert"): what is converted into what, e.g.
  // "coo->hisparse" (host), "csr->hisparse", "hisparse->csr", "csr->csc" (GPU).
  std::string conversion;
  // GPU conversion records (gpu_stats): the time of one HiSparse SpMV of the
  // same matrix (its plan, warm L2, median), the conversion's time in such
  // SpMVs, its throughput in million input entries per second, and the
  // device work memory it held at once besides input and result
  // (ConvertStats::peak_work_bytes; cuSPARSE: its csr2csc buffer).
  bool gpu_stats = false;
  double spmv_ms = 0, spmv_equivalents = 0, mentries_per_s = 0;
  std::uint64_t peak_work_bytes = 0;
};

// SpMV and SpMV^T: HiSparse (recorded-leaf plan) and cuSPARSE CSR ALG1/ALG2.
template <class V>
std::vector<BenchRecord> bench_spmv(const Matrix<V>& a, const std::string& name, const BenchOptions& options);

// C = 1.5·op(A) - 0.5·op(B), N (A + B) and T (A^T + B^T): HiSparse against
// cuSPARSE csrgeam2 (with csr2csc of both operands for T; also without, the
// paper's Figure 6c). HiSparse's result is checked against cuSPARSE's:
// the same structure and values.
template <class V>
std::vector<BenchRecord> bench_add(const Matrix<V>& a, const Matrix<V>& b, const std::string& name,
                                   const BenchOptions& options);

// GPU conversion of one matrix (`hisparse bench --conversion`), from and to
// arrays already in device memory, through one ops::Context (its default
// stream-ordered pool): "hisparse-gpu" CSR -> HiSparse
// (ops::build_device_matrix from 32-bit CSR arrays, checked byte for byte
// against `a`, which the host built), "hisparse-gpu-to-csr" HiSparse -> CSR
// (ops::to_device_csr into preallocated arrays, checked against to_csr), the
// same two without a context ("-stream": result and large work arrays
// cudaMalloc'd at each call), and cuSPARSE csr2csc on the same CSR arrays as
// the baseline ("cusparse-csr2csc", its arrays from the context's allocator;
// checked against the transpose's CSR). Each timed with
// CUDA events, median of `runs` after one warm-up (results allocated inside
// the timed call, freed outside it), with its time in HiSparse SpMVs of the
// same matrix. A matrix beyond 32-bit CSR indices gives no records.
template <class V>
std::vector<BenchRecord> bench_conversion_gpu(const Matrix<V>& a, const std::string& name, const BenchOptions& options,
                                              int runs = 5);

// The same matrix byte for byte: shape, entries, pool (header included).
template <class V>
bool same_matrix(const Matrix<V>& a, const Matrix<V>& b) {
  const Content<V>& x = a.content();
  const Content<V>& y = b.content();
  return x.shape == y.shape && x.nnz == y.nnz && x.pool.size() == y.pool.size() &&
         std::memcmp(x.pool.data(), y.pool.data(), x.pool.size()) == 0;
}

}  // namespace hisparse::cli
