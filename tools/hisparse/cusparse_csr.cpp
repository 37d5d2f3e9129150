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


// Owned general matrix descriptor (base zero), as the legacy API wants.
struct MatDescr {
  cusparseMatDescr_t d = nullptr;
  MatDescr() { cusparse_check(cusparseCreateMatDescr(&d), "cusparseCreateMatDescr"); }
  ~MatDescr() { cusparseDestroyMatDescr(d); }
  MatDescr(const MatDescr&) = delete;
  MatDescr& operator=(const MatDescr&) = delete;
};
}  // namespace

CusparseHandle::CusparseHandle() { cusparse_check(cusparseCreate(&h_), "cusparseCreate"); }
CusparseHandle::~CusparseHandle() {
  if (h_) cusparseDestroy(h_);
}

template <class V>
CsrArrays<V> CsrArrays<V>::allocate(std::uint64_t rows, std::uint64_t cols, std::uint64_t nnz,
                                    const std::shared_ptr<runtime::DeviceAllocator>& allocator, cudaStream_t stream) {
  CsrArrays<V> c;
  c.rows = rows;
  c.cols = cols;
  c.nnz = nnz;
  c.row_ptr = DeviceBytes((rows + 1) * 4, stream, allocator);
  c.col = DeviceBytes(std::max<std::uint64_t>(nnz, 1) * 4, stream, allocator);
  c.val = DeviceBytes(std::max<std::uint64_t>(nnz, 1) * sizeof(V), stream, allocator);
  return c;
}

template <class V>
CsrArrays<V> CsrArrays<V>::upload(const Csr<V>& csr) {
  constexpr auto max32 = static_cast<std::uint64_t>(std::numeric_limits<std::int32_t>::max());
  if (csr.rows > max32 || csr.cols > max32 || csr.nnz() > max32)
    throw LimitError("cuSPARSE baseline: matrix exceeds 32-bit CSR indices");
  CsrArrays c = CsrArrays<V>::allocate(csr.rows, csr.cols, csr.nnz());
  std::vector<std::int32_t> rp(csr.row_ptr.begin(), csr.row_ptr.end()), ci(csr.col.begin(), csr.col.end());
  cuda_check(cudaMemcpy(c.row_ptr.get(), rp.data(), rp.size() * 4, cudaMemcpyHostToDevice), "upload CSR");
  cuda_check(cudaMemcpy(c.col.get(), ci.data(), ci.size() * 4, cudaMemcpyHostToDevice), "upload CSR");
  cuda_check(cudaMemcpy(c.val.get(), csr.val.data(), csr.val.size() * sizeof(V), cudaMemcpyHostToDevice), "upload CSR");
  return c;
}

template <class V>
Csr<V> CsrArrays<V>::download() const {
  std::vector<std::int32_t> rp(rows + 1), ci(nnz);
  Csr<V> out;
  out.rows = rows;
  out.cols = cols;
  out.val.resize(nnz);
  cuda_check(cudaMemcpy(rp.data(), row_ptr.get(), rp.size() * 4, cudaMemcpyDeviceToHost), "download CSR");
  cuda_check(cudaMemcpy(ci.data(), col.get(), ci.size() * 4, cudaMemcpyDeviceToHost), "download CSR");
  cuda_check(cudaMemcpy(out.val.data(), val.get(), nnz * sizeof(V), cudaMemcpyDeviceToHost), "download CSR");
  out.row_ptr.assign(rp.begin(), rp.end());
  out.col.assign(ci.begin(), ci.end());
  return out;
}

template <class V>
CsrArrays<V> CsrArrays<V>::copy(cudaStream_t stream) const {
  CsrArrays c = CsrArrays<V>::allocate(rows, cols, nnz);
  cuda_check(cudaMemcpyAsync(c.row_ptr.get(), row_ptr.get(), row_ptr.size(), cudaMemcpyDeviceToDevice, stream), "copy CSR");
  cuda_check(cudaMemcpyAsync(c.col.get(), col.get(), col.size(), cudaMemcpyDeviceToDevice, stream), "copy CSR");
  cuda_check(cudaMemcpyAsync(c.val.get(), val.get(), val.size(), cudaMemcpyDeviceToDevice, stream), "copy CSR");
  return c;
}

template <class V>
bool CsrArrays<V>::same_bytes(const CsrArrays& o) const {
  auto same = [](const DeviceBytes& a, const DeviceBytes& b) {
    if (a.size() != b.size()) return false;
    std::vector<unsigned char> ha(a.size()), hb(b.size());
    cuda_check(cudaMemcpy(ha.data(), a.get(), a.size(), cudaMemcpyDeviceToHost), "download CSR");
    cuda_check(cudaMemcpy(hb.data(), b.get(), b.size(), cudaMemcpyDeviceToHost), "download CSR");
    return ha == hb;
  };
  return rows == o.rows && cols == o.cols && nnz == o.nnz && same(row_ptr, o.row_ptr) && same(col, o.col) &&
         same(val, o.val);
}

template <class V>
CsrArrays<V> csrgeam2(cusparseHandle_t h, const CsrArrays<V>& a, const CsrArrays<V>& b, V alpha, V beta,
                      cudaStream_t stream) {
  if (a.rows != b.rows || a.cols != b.cols) throw Error("csrgeam2: operands differ in shape");
  cusparse_check(cusparseSetStream(h, stream), "cusparseSetStream");
  cusparse_check(cusparseSetPointerMode(h, CUSPARSE_POINTER_MODE_HOST), "cusparseSetPointerMode");
  const MatDescr da, db, dc;
  const int m = static_cast<int>(a.rows), n = static_cast<int>(a.cols);
  const int na = static_cast<int>(a.nnz), nb = static_cast<int>(b.nnz);
  const auto* ra = a.row_ptr.template as<const int>();
  const auto* ca = a.col.template as<const int>();
  const auto* rb = b.row_ptr.template as<const int>();
  const auto* cb = b.col.template as<const int>();
  const V* va = a.val.template as<const V>();
  const V* vb = b.val.template as<const V>();
  DeviceBytes row_c((a.rows + 1) * 4);
  std::size_t need = 0;
  if constexpr (std::is_same_v<V, float>)
    cusparse_check(cusparseScsrgeam2_bufferSizeExt(h, m, n, &alpha, da.d, na, va, ra, ca, &beta, db.d, nb, vb, rb, cb,
                                                   dc.d, nullptr, row_c.as<int>(), nullptr, &need),
                   "cusparseScsrgeam2_bufferSizeExt");
  else
    cusparse_check(cusparseDcsrgeam2_bufferSizeExt(h, m, n, &alpha, da.d, na, va, ra, ca, &beta, db.d, nb, vb, rb, cb,
                                                   dc.d, nullptr, row_c.as<int>(), nullptr, &need),
                   "cusparseDcsrgeam2_bufferSizeExt");
  DeviceBytes work(std::max<std::size_t>(need, 1));
  int nnz_c = 0;
  cusparse_check(cusparseXcsrgeam2Nnz(h, m, n, da.d, na, ra, ca, db.d, nb, rb, cb, dc.d, row_c.as<int>(), &nnz_c,
                                      work.get()),
                 "cusparseXcsrgeam2Nnz");
  CsrArrays<V> c;
  c.rows = a.rows;
  c.cols = a.cols;
  c.nnz = static_cast<std::uint64_t>(nnz_c);
  c.row_ptr = std::move(row_c);
  c.col = DeviceBytes(std::max<std::uint64_t>(c.nnz, 1) * 4);
  c.val = DeviceBytes(std::max<std::uint64_t>(c.nnz, 1) * sizeof(V));
  if constexpr (std::is_same_v<V, float>)
    cusparse_check(cusparseScsrgeam2(h, m, n, &alpha, da.d, na, va, ra, ca, &beta, db.d, nb, vb, rb, cb, dc.d,
                                     c.val.template as<float>(), c.row_ptr.template as<int>(), c.col.template as<int>(), work.get()),
                   "cusparseScsrgeam2");
  else
    cusparse_check(cusparseDcsrgeam2(h, m, n, &alpha, da.d, na, va, ra, ca, &beta, db.d, nb, vb, rb, cb, dc.d,
                                     c.val.template as<double>(), c.row_ptr.template as<int>(), c.col.template as<int>(), work.get()),
                   "cusparseDcsrgeam2");
  return c;
}

template <class V>
CsrArrays<V> csr_transpose(cusparseHandle_t h, const CsrArrays<V>& a, cudaStream_t stream, std::size_t* work_bytes,
                           const std::shared_ptr<runtime::DeviceAllocator>& allocator) {
  cusparse_check(cusparseSetStream(h, stream), "cusparseSetStream");
  CsrArrays<V> t = CsrArrays<V>::allocate(a.cols, a.rows, a.nnz, allocator, stream);
  std::size_t need = 0;
  const auto m = static_cast<int>(a.rows), n = static_cast<int>(a.cols), nnz = static_cast<int>(a.nnz);
  cusparse_check(cusparseCsr2cscEx2_bufferSize(h, m, n, nnz, a.val.get(), a.row_ptr.template as<const int>(),
                                               a.col.template as<const int>(), t.val.get(), t.row_ptr.template as<int>(),
                                               t.col.template as<int>(), value_type<V>(), CUSPARSE_ACTION_NUMERIC,
                                               CUSPARSE_INDEX_BASE_ZERO, CUSPARSE_CSR2CSC_ALG_DEFAULT, &need),
                 "cusparseCsr2cscEx2_bufferSize");
  if (work_bytes) *work_bytes = need;
  DeviceBytes work(std::max<std::size_t>(need, 1), stream, allocator);
  cusparse_check(cusparseCsr2cscEx2(h, m, n, nnz, a.val.get(), a.row_ptr.template as<const int>(),
                                    a.col.template as<const int>(), t.val.get(), t.row_ptr.template as<int>(), t.col.template as<int>(),
                                    value_type<V>(), CUSPARSE_ACTION_NUMERIC, CUSPARSE_INDEX_BASE_ZERO,
                                    CUSPARSE_CSR2CSC_ALG_DEFAULT, work.get()),
                 "cusparseCsr2cscEx2");
  return t;
}

template <class V>
CusparseCsr<V>::CusparseCsr(const Csr<V>& csr, cusparseSpMVAlg_t alg) : a_(CsrArrays<V>::upload(csr)), alg_(alg) {
  cusparse_check(cusparseCreateCsr(&mat_, static_cast<std::int64_t>(a_.rows), static_cast<std::int64_t>(a_.cols),
                                   static_cast<std::int64_t>(a_.nnz), a_.row_ptr.get(), a_.col.get(), a_.val.get(),
                                   CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, value_type<V>()),
                 "cusparseCreateCsr");
}

template <class V>
CusparseCsr<V>::~CusparseCsr() {
  if (mat_) cusparseDestroySpMat(mat_);
}

template <class V>
void CusparseCsr<V>::spmv(bool transpose, const V* x, V* y, V alpha, V beta, cudaStream_t stream) {
  const auto op = transpose ? CUSPARSE_OPERATION_TRANSPOSE : CUSPARSE_OPERATION_NON_TRANSPOSE;
  const std::uint64_t nx = transpose ? a_.rows : a_.cols, ny = transpose ? a_.cols : a_.rows;
  cusparseDnVecDescr_t vx, vy;
  cusparse_check(cusparseCreateDnVec(&vx, static_cast<std::int64_t>(nx), const_cast<V*>(x), value_type<V>()), "cusparseCreateDnVec");
  cusparse_check(cusparseCreateDnVec(&vy, static_cast<std::int64_t>(ny), y, value_type<V>()), "cusparseCreateDnVec");
  cusparse_check(cusparseSetStream(handle_.get(), stream), "cusparseSetStream");
  DeviceBytes& work = work_[transpose ? 1 : 0];
  std::size_t need = 0;
  cusparse_check(cusparseSpMV_bufferSize(handle_.get(), op, &alpha, mat_, vx, &beta, vy, value_type<V>(), alg_, &need),
                 "cusparseSpMV_bufferSize");
  if (need > work.size()) work = DeviceBytes(need);
  cusparse_check(cusparseSpMV(handle_.get(), op, &alpha, mat_, vx, &beta, vy, value_type<V>(), alg_, work.get()),
                 "cusparseSpMV");
  cusparseDestroyDnVec(vx);
  cusparseDestroyDnVec(vy);
}

template struct CsrArrays<float>;
template struct CsrArrays<double>;
template CsrArrays<float> csrgeam2(cusparseHandle_t, const CsrArrays<float>&, const CsrArrays<float>&, float, float,
                                   cudaStream_t);
template CsrArrays<double> csrgeam2(cusparseHandle_t, const CsrArrays<double>&, const CsrArrays<double>&, double,
                                    double, cudaStream_t);
template CsrArrays<float> csr_transpose(cusparseHandle_t, const CsrArrays<float>&, cudaStream_t, std::size_t*,
                                        const std::shared_ptr<runtime::DeviceAllocator>&);
template CsrArrays<double> csr_transpose(cusparseHandle_t, const CsrArrays<double>&, cudaStream_t, std::size_t*,
                                         const std::shared_ptr<runtime::DeviceAllocator>&);
template class CusparseCsr<float>;
template class CusparseCsr<double>;

}  // namespace hisparse::cli
