// The README's "Using the library" example, run: a SuiteSparse matrix's CSR
// arrays in device memory, then the README's calls line for line (between
// the markers), each result checked against the host reference
// (spmv_reference, to_csr). Exits 77 (skipped) without a CUDA device.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "hisparse/formats/builder.hpp"
#include "hisparse/formats/matrix_market.hpp"
#include "hisparse/ops/context.hpp"
#include "hisparse/ops/convert_gpu.hpp"
#include "hisparse/ops/spmv_gpu.hpp"
#include "hisparse/ops/spmv_reference.hpp"
#include "support/matrices_dir.hpp"

namespace {

template <class T>
T* upload(const std::vector<T>& h) {
  void* p = nullptr;
  hisparse::cuda_check(cudaMalloc(&p, std::max<std::size_t>(h.size(), 1) * sizeof(T)), "cudaMalloc");
  hisparse::cuda_check(cudaMemcpy(p, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice), "upload");
  return static_cast<T*>(p);
}

template <class T>
std::vector<T> download(const T* d, std::size_t n) {
  std::vector<T> h(n);
  hisparse::cuda_check(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost), "download");
  return h;
}

// y against the reference, each row within float rounding of its terms' size.
bool close(const hisparse::Matrix<float>& a, const std::vector<float>& x, const std::vector<float>& got,
           const char* what) {
  std::vector<float> want(a.rows(), 0.0f);
  hisparse::ops::spmv_reference<float>(a, x, want);
  const hisparse::Coo<float> coo = hisparse::to_coo(a);
  std::vector<double> mag(a.rows(), 0.0);
  for (std::size_t k = 0; k < coo.nnz(); ++k) mag[coo.row[k]] += std::abs(double(coo.val[k]) * double(x[coo.col[k]]));
  for (std::size_t i = 0; i < want.size(); ++i)
    if (std::abs(double(got[i]) - double(want[i])) > 1e-5 * mag[i] + 1e-30) {
      std::printf("%s: row %zu is %g, the reference %g\n", what, i, double(got[i]), double(want[i]));
      return false;
    }
  return true;
}

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    (void)cudaGetLastError();
    std::puts("readme example: no CUDA device, skipped");
    return 77;
  }
  try {
    const auto host = hisparse::build_matrix(
        hisparse::read_matrix_market<float>(hisparse::testing::matrices_dir() / "cage8.mtx"));
    const hisparse::Csr<float> h = hisparse::to_csr(host);
    const hisparse::index_t rows = h.rows, cols = h.cols;
    const std::uint64_t nnz = h.nnz();
    int* d_row_ptr = upload(std::vector<int>(h.row_ptr.begin(), h.row_ptr.end()));
    int* d_col = upload(std::vector<int>(h.col.begin(), h.col.end()));
    float* d_val = upload(h.val);
    std::vector<float> x0(cols);
    for (std::size_t j = 0; j < x0.size(); ++j) x0[j] = 1.0f + float(j % 7) / 8.0f;
    float* d_x = upload(x0);
    float* d_y = upload(std::vector<float>(rows, 0.0f));
    cudaStream_t stream = nullptr;
    hisparse::cuda_check(cudaStreamCreate(&stream), "cudaStreamCreate");
    bool ok = true;
    {
      // --- README "Using the library"
      hisparse::Context ctx(stream);  // the device's stream-ordered pool; plans and runtimes cached here
      const hisparse::ops::DeviceCsrView<float, int> csr{rows, cols, nnz, d_row_ptr, d_col, d_val};  // your arrays
      hisparse::DeviceMatrix<float> a = hisparse::ops::build_device_matrix(ctx, csr);  // no host round trip
      hisparse::ops::GpuSpmv<float> spmv(ctx, a);  // a plan: asynchronous, capturable into a CUDA graph
      spmv(d_x, d_y);                              // y = A x
      a.transpose();                               // O(1): the same plan serves A^T
      spmv(d_y, d_x);                              // x = A^T y
      auto back = hisparse::ops::to_device_csr<float, int>(ctx, a);  // CSR of A^T, library-allocated
      // ---
      hisparse::cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
      const std::vector<float> y = download(d_y, rows), x1 = download(d_x, cols);
      ok = close(host, x0, y, "y = A x") && close(host.transpose(), y, x1, "x = A^T y");
      const hisparse::Csr<float> t = hisparse::to_csr(host.transpose());
      const auto v = back.view();
      const std::vector<int> rp = download(v.row_ptr, t.rows + 1), ci = download(v.col, t.nnz());
      const std::vector<float> va = download(v.val, t.nnz());
      for (std::size_t i = 0; ok && i < rp.size(); ++i) ok = static_cast<std::uint64_t>(rp[i]) == t.row_ptr[i];
      for (std::size_t k = 0; ok && k < ci.size(); ++k)
        ok = static_cast<std::uint64_t>(ci[k]) == t.col[k] && va[k] == t.val[k];
      if (!ok) std::puts("the CSR of A^T differs from to_csr's");
    }
    for (void* p : {static_cast<void*>(d_row_ptr), static_cast<void*>(d_col), static_cast<void*>(d_val),
                    static_cast<void*>(d_x), static_cast<void*>(d_y)})
      cudaFree(p);
    cudaStreamDestroy(stream);
    std::printf("readme example on cage8 (%llu entries): %s\n", static_cast<unsigned long long>(nnz),
                ok ? "ok" : "WRONG");
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::printf("readme example: %s\n", e.what());
    return 1;
  }
}
