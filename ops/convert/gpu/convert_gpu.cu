// Entry points of GPU conversion (hisparse/ops/convert_gpu.hpp): argument
// checks, the work-memory check, and the instantiations.
#include "build_csr.cuh"
#include "build_gpu.cuh"
#include "extract_gpu.cuh"

namespace hisparse::ops {
namespace convert_detail {

// Refuses a conversion whose work memory cannot fit before anything exists.
// The work pool's kept memory (up to 256 MiB from earlier calls) is given
// back first: it is the process's own, and cudaMemGetInfo does not count it.
inline void check_work_fits(std::uint64_t input_entries, std::uint32_t depth, std::uint64_t value_bytes) {
  const std::uint64_t need = convert_work_bound(input_entries, depth, value_bytes);
  int device = 0;
  cuda_check(cudaGetDevice(&device), "cudaGetDevice");
  std::size_t free = 0, total = 0;
  cuda_check(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
  if (need + work_pool_keep > free) {
    if (cudaMemPool_t pool = work_pool(device)) cuda_check(cudaMemPoolTrimTo(pool, 0), "cudaMemPoolTrimTo(work memory)");
    cuda_check(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
  }
  if (need > free)
    throw LimitError("GPU conversion of " + std::to_string(input_entries) + " entries needs up to " +
                     std::to_string(need >> 20) + " MiB of work memory; the device has " + std::to_string(free >> 20) +
                     " MiB free");
}

inline void check_entry_count(std::uint64_t n) {
  if (n > 0xFFFFFFFFull)
    throw LimitError("GPU conversion takes at most 2^32 - 1 input entries, got " + std::to_string(n));
}

inline void check_pointers(std::uint64_t n, const void* a, const void* b, const void* c, const char* what) {
  if (n > 0 && (!a || !b || !c)) throw Error(std::string(what) + ": a null array for " + std::to_string(n) + " entries");
}

template <class V>
DeviceMatrix<V> empty_matrix(const Shape& shape, const BuildOptions& options, cudaStream_t stream) {
  auto c = std::make_shared<Content<V>>(*Matrix<V>::empty_content(shape.rows, shape.cols, 1u << shape.log2_node_size));
  if (options.wide_nodes) reinterpret_cast<PoolHeader*>(c->pool.data())->flags = pool_flag_wide;
  return DeviceMatrix<V>(Matrix<V>(std::move(c)), stream);
}

// `fast` may build the matrix (or decline with nullopt); `sort` feeds the
// general path.
template <class V, class Check, class Fast, class Sort>
DeviceMatrix<V> build(index_t rows, index_t cols, std::uint64_t n, const BuildOptions& options, cudaStream_t stream,
                      ConvertStats* stats, Check&& check, Fast&& fast, Sort&& sort) {
  const Shape shape = Shape::make(rows, cols, options.node_size);
  check_entry_count(n);
  WorkMemory w(stream);
  if (stats) *stats = ConvertStats{n, 0, 0, 0, 0};
  check(w);
  DeviceMatrix<V> m;
  if (n == 0) {
    m = empty_matrix<V>(shape, options, stream);
  } else {
    check_work_fits(n, shape.depth, sizeof(V));
    if (auto f = fast(w, shape)) m = std::move(*f);
    else m = build_from_sorted<V>(w, sort(w, shape), shape, options, stats);
  }
  if (stats) {
    stats->pool_bytes = m.pool_bytes();
    stats->peak_work_bytes = w.peak();
  }
  return m;
}

template <class V, class I, class Out = V>
void extract_into(const DeviceMatrix<V>& a, I* row, I* row_ptr, I* col, Out* val, cudaStream_t stream,
                  ConvertStats* stats) {
  check_index_range<I>(a.rows(), a.cols(), a.nnz());
  check_pointers(a.nnz(), row ? static_cast<const void*>(row) : row_ptr, col, val, "GPU extraction");
  if (row_ptr == nullptr && row == nullptr && a.nnz() > 0) throw Error("GPU extraction: a null row array");
  if (a.nnz() > 0) check_work_fits(a.nnz(), a.shape().depth, sizeof(V));
  WorkMemory w(stream);
  extract<V, I, Out>(w, a, row, row_ptr, col, val);
  if (stats) *stats = ConvertStats{a.nnz(), a.nnz(), 0, a.pool_bytes(), w.peak()};
}

}  // namespace convert_detail

void release_work_memory() {
  int device = 0;
  cuda_check(cudaGetDevice(&device), "cudaGetDevice");
  convert_detail::work_pool(device, true);
}

template <class V, class I>
DeviceMatrix<V> build_device_matrix(const DeviceCsrView<V, I>& csr, const BuildOptions& options, cudaStream_t stream,
                                    ConvertStats* stats) {
  using namespace convert_detail;
  if (!csr.row_ptr) throw Error("CSR input: a null row pointer array");
  check_pointers(csr.nnz, csr.row_ptr, csr.col, csr.val, "CSR input");
  return build<V>(
      csr.rows, csr.cols, csr.nnz, options, stream, stats, [&](WorkMemory& w) { check_csr_row_ptr(w, csr); },
      [&](WorkMemory& w, const Shape& shape) { return build_csr_blocks<V, I>(w, csr, shape, options, stats); },
      [&](WorkMemory& w, const Shape& shape) { return sort_csr<V, I>(w, csr, shape); });
}

template <class V, class I>
DeviceMatrix<V> build_device_matrix(const DeviceCooView<V, I>& coo, const BuildOptions& options, cudaStream_t stream,
                                    ConvertStats* stats) {
  using namespace convert_detail;
  check_pointers(coo.nnz, coo.row, coo.col, coo.val, "COO input");
  return build<V>(
      coo.rows, coo.cols, coo.nnz, options, stream, stats, [](WorkMemory&) {},
      [](WorkMemory&, const Shape&) { return std::optional<DeviceMatrix<V>>{}; },
      [&](WorkMemory& w, const Shape& shape) { return sort_coo<V, I>(w, coo, shape); });
}

template <class V, class I>
void to_device_csr(const DeviceMatrix<V>& a, I* row_ptr, I* col, V* val, cudaStream_t stream, ConvertStats* stats) {
  if (!row_ptr) throw Error("GPU extraction: a null row pointer array");
  convert_detail::extract_into<V, I>(a, nullptr, row_ptr, col, val, stream, stats);
}

template <class V, class I>
void to_device_coo(const DeviceMatrix<V>& a, I* row, I* col, V* val, cudaStream_t stream, ConvertStats* stats) {
  convert_detail::extract_into<V, I>(a, row, nullptr, col, val, stream, stats);
}

template <class V, class I>
void to_device_coo_positions(const DeviceMatrix<V>& a, I* row, I* col, std::uint32_t* pos, cudaStream_t stream,
                             ConvertStats* stats) {
  convert_detail::extract_into<V, I, std::uint32_t>(a, row, nullptr, col, pos, stream, stats);
}

template <class V, class I>
DeviceCsr<V, I> to_device_csr(const DeviceMatrix<V>& a, cudaStream_t stream, ConvertStats* stats) {
  convert_detail::check_index_range<I>(a.rows(), a.cols(), a.nnz());
  DeviceCsr<V, I> out;
  out.rows = a.rows();
  out.cols = a.cols();
  out.nnz = a.nnz();
  out.row_ptr = DeviceBytes((a.rows() + 1) * sizeof(I));
  out.col = DeviceBytes(std::max<std::uint64_t>(a.nnz(), 1) * sizeof(I));
  out.val = DeviceBytes(std::max<std::uint64_t>(a.nnz(), 1) * sizeof(V));
  to_device_csr<V, I>(a, out.row_ptr.template as<I>(), out.col.template as<I>(), out.val.template as<V>(), stream, stats);
  return out;
}

template <class V, class I>
DeviceCoo<V, I> to_device_coo(const DeviceMatrix<V>& a, cudaStream_t stream, ConvertStats* stats) {
  convert_detail::check_index_range<I>(a.rows(), a.cols(), a.nnz());
  DeviceCoo<V, I> out;
  out.rows = a.rows();
  out.cols = a.cols();
  out.nnz = a.nnz();
  const std::uint64_t k = std::max<std::uint64_t>(a.nnz(), 1);
  out.row = DeviceBytes(k * sizeof(I));
  out.col = DeviceBytes(k * sizeof(I));
  out.val = DeviceBytes(k * sizeof(V));
  to_device_coo<V, I>(a, out.row.template as<I>(), out.col.template as<I>(), out.val.template as<V>(), stream, stats);
  return out;
}

#define HISPARSE_CONVERT_INSTANTIATE(V, I)                                                                          \
  template DeviceMatrix<V> build_device_matrix(const DeviceCsrView<V, I>&, const BuildOptions&, cudaStream_t,      \
                                               ConvertStats*);                                                     \
  template DeviceMatrix<V> build_device_matrix(const DeviceCooView<V, I>&, const BuildOptions&, cudaStream_t,      \
                                               ConvertStats*);                                                     \
  template void to_device_csr(const DeviceMatrix<V>&, I*, I*, V*, cudaStream_t, ConvertStats*);                    \
  template void to_device_coo(const DeviceMatrix<V>&, I*, I*, V*, cudaStream_t, ConvertStats*);                    \
  template void to_device_coo_positions(const DeviceMatrix<V>&, I*, I*, std::uint32_t*, cudaStream_t, ConvertStats*); \
  template DeviceCsr<V, I> to_device_csr(const DeviceMatrix<V>&, cudaStream_t, ConvertStats*);                     \
  template DeviceCoo<V, I> to_device_coo(const DeviceMatrix<V>&, cudaStream_t, ConvertStats*);
HISPARSE_CONVERT_INSTANTIATE(float, std::int32_t)
HISPARSE_CONVERT_INSTANTIATE(float, std::int64_t)
HISPARSE_CONVERT_INSTANTIATE(double, std::int32_t)
HISPARSE_CONVERT_INSTANTIATE(double, std::int64_t)
#undef HISPARSE_CONVERT_INSTANTIATE

}  // namespace hisparse::ops
