#pragma once
// The cuSPARSE baselines HiSparse is measured against: CSR SpMV
// (cusparseSpMV, default algorithm unless told otherwise), CSR sparse add
// (cusparse<t>csrgeam2) and CSR transposition (cusparseCsr2cscEx2).
#include <cuda_runtime.h>
#include <cusparse.h>

#include "hisparse/formats/coo.hpp"
#include "hisparse/formats/device_matrix.hpp"

namespace hisparse::cli {

void cusparse_check(cusparseStatus_t s, const char* what);

// A CSR matrix in device memory with 32-bit indices (as the memory figures
// assume), owning its three arrays.
template <class V>
struct CsrArrays {
  std::uint64_t rows = 0, cols = 0, nnz = 0;
  DeviceBytes row_ptr, col, val;
  [[nodiscard]] std::uint64_t bytes() const { return (rows + 1) * 4 + nnz * (4 + sizeof(V)); }
  // Arrays of that shape, uninitialised; index and value arrays never empty,
  // so that every pointer is valid.
  // From `allocator` on `stream` where given (a context's: freed to it on
  // that stream), cudaMalloc otherwise.
  static CsrArrays allocate(std::uint64_t rows, std::uint64_t cols, std::uint64_t nnz,
                            const std::shared_ptr<runtime::DeviceAllocator>& allocator = nullptr,
                            cudaStream_t stream = nullptr);
  // Uploads; rejects matrices beyond 32-bit indices.
  static CsrArrays upload(const Csr<V>& csr);
  [[nodiscard]] Csr<V> download() const;
  // A deep copy of the three arrays, device to device (allocation included):
  // what copying a CSR matrix costs, the baseline of HiSparse's copy.
  [[nodiscard]] CsrArrays copy(cudaStream_t stream = nullptr) const;
  [[nodiscard]] bool same_bytes(const CsrArrays& o) const;  // downloads both
};

// C = alpha A + beta B by csrgeam2: buffer size, the nnz pass, allocation of
// C, the values pass. A and B have sorted columns in every row.
template <class V>
CsrArrays<V> csrgeam2(cusparseHandle_t handle, const CsrArrays<V>& a, const CsrArrays<V>& b, V alpha, V beta,
                      cudaStream_t stream = nullptr);

// The CSR arrays of A^T (A's CSC form), allocation included. work_bytes,
// where given, receives the size of cuSPARSE's work buffer.
// `allocator`, where given, allocates the result and the work buffer (on
// `stream`), as a context's would HiSparse's (the bench's fair baseline).
template <class V>
CsrArrays<V> csr_transpose(cusparseHandle_t handle, const CsrArrays<V>& a, cudaStream_t stream = nullptr,
                           std::size_t* work_bytes = nullptr,
                           const std::shared_ptr<runtime::DeviceAllocator>& allocator = nullptr);

// A cuSPARSE handle owned by one object.
class CusparseHandle {
 public:
  CusparseHandle();
  ~CusparseHandle();
  CusparseHandle(const CusparseHandle&) = delete;
  CusparseHandle& operator=(const CusparseHandle&) = delete;
  [[nodiscard]] cusparseHandle_t get() const { return h_; }

 private:
  cusparseHandle_t h_ = nullptr;
};

template <class V>
class CusparseCsr {
 public:
  CusparseCsr(const Csr<V>& csr, cusparseSpMVAlg_t alg = CUSPARSE_SPMV_ALG_DEFAULT);
  ~CusparseCsr();
  CusparseCsr(const CusparseCsr&) = delete;
  CusparseCsr& operator=(const CusparseCsr&) = delete;

  // y = alpha * op(A) x + beta * y, x and y in device memory.
  void spmv(bool transpose, const V* x, V* y, V alpha, V beta, cudaStream_t stream = nullptr);
  [[nodiscard]] std::uint64_t bytes() const { return a_.bytes(); }
  [[nodiscard]] const CsrArrays<V>& arrays() const { return a_; }
  [[nodiscard]] cusparseHandle_t handle() const { return handle_.get(); }

 private:
  CsrArrays<V> a_;
  CusparseHandle handle_;
  cusparseSpMatDescr_t mat_ = nullptr;
  DeviceBytes work_[2];
  cusparseSpMVAlg_t alg_;
};

}  // namespace hisparse::cli
