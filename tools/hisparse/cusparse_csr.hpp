#pragma once
// cuSPARSE CSR SpMV (cusparseSpMV, default algorithm unless told otherwise) as
// the baseline that HiSparse is measured against.
#include <cuda_runtime.h>
#include <cusparse.h>

#include "hisparse/formats/coo.hpp"
#include "hisparse/formats/device_matrix.hpp"

namespace hisparse::cli {

template <class V>
class CusparseCsr {
 public:
  // 32-bit indices (as the memory figures assume); rejects larger matrices.
  CusparseCsr(const Csr<V>& csr, cusparseSpMVAlg_t alg = CUSPARSE_SPMV_ALG_DEFAULT);
  ~CusparseCsr();
  CusparseCsr(const CusparseCsr&) = delete;
  CusparseCsr& operator=(const CusparseCsr&) = delete;

  // y = alpha * op(A) x + beta * y, x and y in device memory.
  void spmv(bool transpose, const V* x, V* y, V alpha, V beta, cudaStream_t stream = nullptr);
  [[nodiscard]] std::uint64_t bytes() const { return bytes_; }

  // A deep copy of the three arrays, device to device (allocation included):
  // what copying a CSR matrix costs, the baseline of HiSparse's copy.
  struct Arrays {
    DeviceBytes row_ptr, col, val;
  };
  [[nodiscard]] Arrays copy_arrays(cudaStream_t stream = nullptr) const;
  // Whether `c` holds the same bytes as this matrix's arrays (downloads both).
  [[nodiscard]] bool same_arrays(const Arrays& c) const;
  [[nodiscard]] std::uint64_t rows() const { return rows_; }
  [[nodiscard]] std::uint64_t cols() const { return cols_; }

 private:
  cusparseHandle_t handle_ = nullptr;
  cusparseSpMatDescr_t mat_ = nullptr;
  DeviceBytes row_ptr_, col_, val_, work_[2];
  cusparseSpMVAlg_t alg_;
  std::uint64_t rows_, cols_, bytes_;
};

void cusparse_check(cusparseStatus_t s, const char* what);

}  // namespace hisparse::cli
