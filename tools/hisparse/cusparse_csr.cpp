#include "cusparse_csr.hpp"

#include <limits>
#include <string>
#include <vector>

namespace hisparse::cli {

void cusparse_check(cusparseStatus_t s, const char* what) {
  if (s != CUSPARSE_STATUS_SUCCESS)
    throw Error(std::string("cuSPARSE error in ") + what + ": " + cusparseGetErrorString(s));
}

namespace {
template <class V>
constexpr cudaDataType value_type() {
  return std::is_same_v<V, float> ? CUDA_R_32F : CUDA_R_64F;
}
}  // namespace

template <class V>
CusparseCsr<V>::CusparseCsr(const Csr<V>& csr, cusparseSpMVAlg_t alg)
    : alg_(alg), rows_(csr.rows), cols_(csr.cols) {
  constexpr auto max32 = static_cast<std::uint64_t>(std::numeric_limits<std::int32_t>::max());
  if (csr.rows > max32 || csr.cols > max32 || csr.nnz() > max32)
    throw LimitError("cuSPARSE baseline: matrix exceeds 32-bit CSR indices");
  std::vector<std::int32_t> rp(csr.row_ptr.begin(), csr.row_ptr.end()), ci(csr.col.begin(), csr.col.end());
  row_ptr_ = DeviceBytes(rp.size() * 4);
  col_ = DeviceBytes(std::max<std::size_t>(ci.size(), 1) * 4);
  val_ = DeviceBytes(std::max<std::size_t>(csr.val.size(), 1) * sizeof(V));
  bytes_ = rp.size() * 4 + ci.size() * 4 + csr.val.size() * sizeof(V);
  cuda_check(cudaMemcpy(row_ptr_.get(), rp.data(), rp.size() * 4, cudaMemcpyHostToDevice), "upload CSR");
  cuda_check(cudaMemcpy(col_.get(), ci.data(), ci.size() * 4, cudaMemcpyHostToDevice), "upload CSR");
  cuda_check(cudaMemcpy(val_.get(), csr.val.data(), csr.val.size() * sizeof(V), cudaMemcpyHostToDevice), "upload CSR");
  cusparse_check(cusparseCreate(&handle_), "cusparseCreate");
  cusparse_check(cusparseCreateCsr(&mat_, static_cast<std::int64_t>(csr.rows), static_cast<std::int64_t>(csr.cols),
                                   static_cast<std::int64_t>(csr.nnz()), row_ptr_.get(), col_.get(), val_.get(),
                                   CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, value_type<V>()),
                 "cusparseCreateCsr");
}

template <class V>
CusparseCsr<V>::~CusparseCsr() {
  if (mat_) cusparseDestroySpMat(mat_);
  if (handle_) cusparseDestroy(handle_);
}

template <class V>
void CusparseCsr<V>::spmv(bool transpose, const V* x, V* y, V alpha, V beta, cudaStream_t stream) {
  const auto op = transpose ? CUSPARSE_OPERATION_TRANSPOSE : CUSPARSE_OPERATION_NON_TRANSPOSE;
  const std::uint64_t nx = transpose ? rows_ : cols_, ny = transpose ? cols_ : rows_;
  cusparseDnVecDescr_t vx, vy;
  cusparse_check(cusparseCreateDnVec(&vx, static_cast<std::int64_t>(nx), const_cast<V*>(x), value_type<V>()), "cusparseCreateDnVec");
  cusparse_check(cusparseCreateDnVec(&vy, static_cast<std::int64_t>(ny), y, value_type<V>()), "cusparseCreateDnVec");
  cusparse_check(cusparseSetStream(handle_, stream), "cusparseSetStream");
  DeviceBytes& work = work_[transpose ? 1 : 0];
  std::size_t need = 0;
  cusparse_check(cusparseSpMV_bufferSize(handle_, op, &alpha, mat_, vx, &beta, vy, value_type<V>(), alg_, &need),
                 "cusparseSpMV_bufferSize");
  if (need > work.size()) work = DeviceBytes(need);
  cusparse_check(cusparseSpMV(handle_, op, &alpha, mat_, vx, &beta, vy, value_type<V>(), alg_, work.get()), "cusparseSpMV");
  cusparseDestroyDnVec(vx);
  cusparseDestroyDnVec(vy);
}

template <class V>
typename CusparseCsr<V>::Arrays CusparseCsr<V>::copy_arrays(cudaStream_t stream) const {
  Arrays c{DeviceBytes(row_ptr_.size()), DeviceBytes(col_.size()), DeviceBytes(val_.size())};
  cuda_check(cudaMemcpyAsync(c.row_ptr.get(), row_ptr_.get(), row_ptr_.size(), cudaMemcpyDeviceToDevice, stream), "copy CSR");
  cuda_check(cudaMemcpyAsync(c.col.get(), col_.get(), col_.size(), cudaMemcpyDeviceToDevice, stream), "copy CSR");
  cuda_check(cudaMemcpyAsync(c.val.get(), val_.get(), val_.size(), cudaMemcpyDeviceToDevice, stream), "copy CSR");
  return c;
}

template <class V>
bool CusparseCsr<V>::same_arrays(const Arrays& c) const {
  auto same = [](const DeviceBytes& a, const DeviceBytes& b) {
    if (a.size() != b.size()) return false;
    std::vector<unsigned char> ha(a.size()), hb(b.size());
    cuda_check(cudaMemcpy(ha.data(), a.get(), a.size(), cudaMemcpyDeviceToHost), "download CSR");
    cuda_check(cudaMemcpy(hb.data(), b.get(), b.size(), cudaMemcpyDeviceToHost), "download CSR");
    return ha == hb;
  };
  return same(row_ptr_, c.row_ptr) && same(col_, c.col) && same(val_, c.val);
}

template class CusparseCsr<float>;
template class CusparseCsr<double>;

}  // namespace hisparse::cli
