// Entry points of GPU conversion (hisparse/ops/convert_gpu.hpp): argument
// checks, the work-memory check, and the instantiations.
#include <cstring>

#include "build_csr.cuh"
#include "build_gpu.cuh"
#include "extract_gpu.cuh"

namespace hisparse::ops {
namespace convert_detail {

// Refuses a conversion whose work memory cannot fit before anything exists.
// What the process's pools hold unused counts as free (cudaMemGetInfo does
// not count it): the work pool's kept memory (up to 256 MiB from earlier
// calls) is given back first where the device looks short, and on a context
// with the default allocator its pool's reserved but unused bytes count (the
// call's arrays come from that pool; should they not fit in what it holds,
// the allocation's failure is a clean hisparse::Error). A context with an allocator
// of the caller's (a framework's caching pool) is not checked: its reserve is
// invisible here, and its own failure is the answer (hisparse::Error).
inline void check_work_fits(std::uint64_t input_entries, std::uint32_t depth, std::uint64_t value_bytes,
                            const Context* ctx) {
  const runtime::StreamPoolAllocator* sp = nullptr;
  if (ctx && ctx->allocator() != runtime::synchronous_allocator()) {
    sp = dynamic_cast<const runtime::StreamPoolAllocator*>(ctx->allocator().get());
    if (!sp) return;
  }
  const std::uint64_t need = convert_work_bound(input_entries, depth, value_bytes);
  int device = 0;
  cuda_check(cudaGetDevice(&device), "cudaGetDevice");
  std::size_t free = 0, total = 0;
  const auto unused_in = [](cudaMemPool_t pool) {
    std::uint64_t reserved = 0, used = 0;
    cuda_check(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved), "cudaMemPoolGetAttribute");
    cuda_check(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used), "cudaMemPoolGetAttribute");
    return reserved > used ? reserved - used : 0;
  };
  cuda_check(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
  std::uint64_t available = free + (sp ? unused_in(sp->pool()) : 0);
  if (need + work_pool_keep > available) {
    if (cudaMemPool_t pool = work_pool(device)) cuda_check(cudaMemPoolTrimTo(pool, 0), "cudaMemPoolTrimTo(work memory)");
    cuda_check(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
    available = free + (sp ? unused_in(sp->pool()) : 0);
  }
  if (need > available)
    throw LimitError("GPU conversion of " + std::to_string(input_entries) + " entries needs up to " +
                     std::to_string(need >> 20) + " MiB of work memory; the device has " +
                     std::to_string(available >> 20) + " MiB free");
}

inline void check_entry_count(std::uint64_t n) {
  if (n > 0xFFFFFFFFull)
    throw LimitError("GPU conversion takes at most 2^32 - 1 input entries, got " + std::to_string(n));
}

inline void check_pointers(std::uint64_t n, const void* a, const void* b, const void* c, const char* what) {
  if (n > 0 && (!a || !b || !c)) throw Error(std::string(what) + ": a null array for " + std::to_string(n) + " entries");
}

template <class V>
DeviceMatrix<V> empty_matrix(const Shape& shape, const BuildOptions& options, WorkMemory& w) {
  auto c = Matrix<V>::empty_content(shape.rows, shape.cols, 1u << shape.log2_node_size);
  AlignedBuffer bytes(c->pool.size());
  std::memcpy(bytes.data(), c->pool.data(), c->pool.size());
  if (options.wide_nodes) reinterpret_cast<PoolHeader*>(bytes.data())->flags = pool_flag_wide;
  DeviceBytes pool = w.result(bytes.size());
  cuda_check(cudaMemcpyAsync(pool.get(), bytes.data(), bytes.size(), cudaMemcpyHostToDevice, w.stream()),
             "cudaMemcpyAsync(empty pool)");
  w.sync("cudaMemcpyAsync(empty pool)");
  return DeviceMatrix<V>::adopt(std::move(pool), c->shape, 0, c->root(), false, V(1), options.wide_nodes);
}

// `fast` may build the matrix (or decline with nullopt); `sort` feeds the
// general path.
template <class V, class Check, class Fast, class Sort>
DeviceMatrix<V> build(index_t rows, index_t cols, std::uint64_t n, const BuildOptions& options, cudaStream_t stream,
                      Context* ctx, ConvertStats* stats, Check&& check, Fast&& fast, Sort&& sort) {
  const Shape shape = Shape::make(rows, cols, options.node_size);
  check_entry_count(n);
  WorkMemory w(stream, ctx);
  if (stats) *stats = ConvertStats{n, 0, 0, 0, 0};
  check(w);
  DeviceMatrix<V> m;
  if (n == 0) {
    m = empty_matrix<V>(shape, options, w);
  } else {
    check_work_fits(n, shape.depth, sizeof(V), ctx);
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
                  Context* ctx, ConvertStats* stats) {
  check_index_range<I>(a.rows(), a.cols(), a.nnz());
  check_pointers(a.nnz(), row ? static_cast<const void*>(row) : row_ptr, col, val, "GPU extraction");
  if (row_ptr == nullptr && row == nullptr && a.nnz() > 0) throw Error("GPU extraction: a null row array");
  if (a.nnz() > 0) check_work_fits(a.nnz(), a.shape().depth, sizeof(V), ctx);
  WorkMemory w(stream, ctx);
  extract<V, I, Out>(w, a, row, row_ptr, col, val);
  if (stats) *stats = ConvertStats{a.nnz(), a.nnz(), 0, a.pool_bytes(), w.peak()};
}

// The library-allocated forms: arrays of the result's shape (index and value
// arrays never empty, so that every pointer is valid), from the context's
// allocator where there is one, cudaMalloc otherwise.
template <class V, class I>
DeviceCsr<V, I> extract_csr(const DeviceMatrix<V>& a, cudaStream_t stream, Context* ctx, ConvertStats* stats) {
  check_index_range<I>(a.rows(), a.cols(), a.nnz());
  DeviceCsr<V, I> out;
  out.rows = a.rows();
  out.cols = a.cols();
  out.nnz = a.nnz();
  const std::uint64_t k = std::max<std::uint64_t>(a.nnz(), 1);
  const auto allocator = ctx ? ctx->allocator() : nullptr;
  out.row_ptr = DeviceBytes((a.rows() + 1) * sizeof(I), stream, allocator);
  out.col = DeviceBytes(k * sizeof(I), stream, allocator);
  out.val = DeviceBytes(k * sizeof(V), stream, allocator);
  extract_into<V, I>(a, nullptr, out.row_ptr.template as<I>(), out.col.template as<I>(), out.val.template as<V>(),
                     stream, ctx, stats);
  return out;
}

template <class V, class I>
DeviceCoo<V, I> extract_coo(const DeviceMatrix<V>& a, cudaStream_t stream, Context* ctx, ConvertStats* stats) {
  check_index_range<I>(a.rows(), a.cols(), a.nnz());
  DeviceCoo<V, I> out;
  out.rows = a.rows();
  out.cols = a.cols();
  out.nnz = a.nnz();
  const std::uint64_t k = std::max<std::uint64_t>(a.nnz(), 1);
  const auto allocator = ctx ? ctx->allocator() : nullptr;
  out.row = DeviceBytes(k * sizeof(I), stream, allocator);
  out.col = DeviceBytes(k * sizeof(I), stream, allocator);
  out.val = DeviceBytes(k * sizeof(V), stream, allocator);
  extract_into<V, I>(a, out.row.template as<I>(), nullptr, out.col.template as<I>(), out.val.template as<V>(), stream,
                     ctx, stats);
  return out;
}

template <class V, class I>
DeviceMatrix<V> build_csr(const DeviceCsrView<V, I>& csr, const BuildOptions& options, cudaStream_t stream,
                          Context* ctx, ConvertStats* stats) {
  if (!csr.row_ptr) throw Error("CSR input: a null row pointer array");
  check_pointers(csr.nnz, csr.row_ptr, csr.col, csr.val, "CSR input");
  return build<V>(
      csr.rows, csr.cols, csr.nnz, options, stream, ctx, stats, [&](WorkMemory& w) { check_csr_row_ptr(w, csr); },
      [&](WorkMemory& w, const Shape& shape) { return build_csr_blocks<V, I>(w, csr, shape, options, stats); },
      [&](WorkMemory& w, const Shape& shape) { return sort_csr<V, I>(w, csr, shape); });
}

template <class V, class I>
DeviceMatrix<V> build_coo(const DeviceCooView<V, I>& coo, const BuildOptions& options, cudaStream_t stream,
                          Context* ctx, ConvertStats* stats) {
  check_pointers(coo.nnz, coo.row, coo.col, coo.val, "COO input");
  return build<V>(
      coo.rows, coo.cols, coo.nnz, options, stream, ctx, stats, [](WorkMemory&) {},
      [](WorkMemory&, const Shape&) { return std::optional<DeviceMatrix<V>>{}; },
      [&](WorkMemory& w, const Shape& shape) { return sort_coo<V, I>(w, coo, shape); });
}

}  // namespace convert_detail

void release_work_memory() {
  int device = 0;
  cuda_check(cudaGetDevice(&device), "cudaGetDevice");
  convert_detail::work_pool(device, true);
  // What conversions and edits on contexts with the default allocator left
  // unused in the device's stream-ordered pool (memory in use stays); none
  // is made where no context has made it.
  const std::shared_ptr<runtime::DeviceAllocator> a = runtime::existing_stream_pool_allocator(device);
  if (!a) return;
  cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize(release_work_memory)");
  cuda_check(cudaMemPoolTrimTo(static_cast<runtime::StreamPoolAllocator&>(*a).pool(), 0),
             "cudaMemPoolTrimTo(stream_pool_allocator)");
}

template <class V, class I>
DeviceMatrix<V> build_device_matrix(const DeviceCsrView<V, I>& csr, const BuildOptions& options, cudaStream_t stream,
                                    ConvertStats* stats) {
  return convert_detail::build_csr(csr, options, stream, nullptr, stats);
}

template <class V, class I>
DeviceMatrix<V> build_device_matrix(const DeviceCooView<V, I>& coo, const BuildOptions& options, cudaStream_t stream,
                                    ConvertStats* stats) {
  return convert_detail::build_coo(coo, options, stream, nullptr, stats);
}

template <class V, class I>
DeviceMatrix<V> build_device_matrix(Context& ctx, const DeviceCsrView<V, I>& csr, const BuildOptions& options,
                                    ConvertStats* stats) {
  ctx.check_device("GPU conversion");
  return convert_detail::build_csr(csr, options, ctx.stream(), &ctx, stats);
}

template <class V, class I>
DeviceMatrix<V> build_device_matrix(Context& ctx, const DeviceCooView<V, I>& coo, const BuildOptions& options,
                                    ConvertStats* stats) {
  ctx.check_device("GPU conversion");
  return convert_detail::build_coo(coo, options, ctx.stream(), &ctx, stats);
}

template <class V, class I>
void to_device_csr(const DeviceMatrix<V>& a, I* row_ptr, I* col, V* val, cudaStream_t stream, ConvertStats* stats) {
  if (!row_ptr) throw Error("GPU extraction: a null row pointer array");
  convert_detail::extract_into<V, I>(a, nullptr, row_ptr, col, val, stream, nullptr, stats);
}

template <class V, class I>
void to_device_csr(Context& ctx, const DeviceMatrix<V>& a, I* row_ptr, I* col, V* val, ConvertStats* stats) {
  ctx.check_device("GPU extraction");
  if (!row_ptr) throw Error("GPU extraction: a null row pointer array");
  convert_detail::extract_into<V, I>(a, nullptr, row_ptr, col, val, ctx.stream(), &ctx, stats);
}

template <class V, class I>
void to_device_coo(const DeviceMatrix<V>& a, I* row, I* col, V* val, cudaStream_t stream, ConvertStats* stats) {
  convert_detail::extract_into<V, I>(a, row, nullptr, col, val, stream, nullptr, stats);
}

template <class V, class I>
void to_device_coo(Context& ctx, const DeviceMatrix<V>& a, I* row, I* col, V* val, ConvertStats* stats) {
  ctx.check_device("GPU extraction");
  convert_detail::extract_into<V, I>(a, row, nullptr, col, val, ctx.stream(), &ctx, stats);
}

template <class V, class I>
void to_device_coo_positions(const DeviceMatrix<V>& a, I* row, I* col, std::uint32_t* pos, cudaStream_t stream,
                             ConvertStats* stats) {
  convert_detail::extract_into<V, I, std::uint32_t>(a, row, nullptr, col, pos, stream, nullptr, stats);
}

template <class V, class I>
void to_device_coo_positions(Context& ctx, const DeviceMatrix<V>& a, I* row, I* col, std::uint32_t* pos,
                             ConvertStats* stats) {
  ctx.check_device("GPU extraction");
  convert_detail::extract_into<V, I, std::uint32_t>(a, row, nullptr, col, pos, ctx.stream(), &ctx, stats);
}

template <class V, class I>
DeviceCsr<V, I> to_device_csr(const DeviceMatrix<V>& a, cudaStream_t stream, ConvertStats* stats) {
  return convert_detail::extract_csr<V, I>(a, stream, nullptr, stats);
}

template <class V, class I>
DeviceCsr<V, I> to_device_csr(Context& ctx, const DeviceMatrix<V>& a, ConvertStats* stats) {
  ctx.check_device("GPU extraction");
  return convert_detail::extract_csr<V, I>(a, ctx.stream(), &ctx, stats);
}

template <class V, class I>
DeviceCoo<V, I> to_device_coo(const DeviceMatrix<V>& a, cudaStream_t stream, ConvertStats* stats) {
  return convert_detail::extract_coo<V, I>(a, stream, nullptr, stats);
}

template <class V, class I>
DeviceCoo<V, I> to_device_coo(Context& ctx, const DeviceMatrix<V>& a, ConvertStats* stats) {
  ctx.check_device("GPU extraction");
  return convert_detail::extract_coo<V, I>(a, ctx.stream(), &ctx, stats);
}

#define HISPARSE_CONVERT_INSTANTIATE(V, I)                                                                          \
  template DeviceMatrix<V> build_device_matrix(const DeviceCsrView<V, I>&, const BuildOptions&, cudaStream_t,      \
                                               ConvertStats*);                                                     \
  template DeviceMatrix<V> build_device_matrix(const DeviceCooView<V, I>&, const BuildOptions&, cudaStream_t,      \
                                               ConvertStats*);                                                     \
  template DeviceMatrix<V> build_device_matrix(Context&, const DeviceCsrView<V, I>&, const BuildOptions&,          \
                                               ConvertStats*);                                                     \
  template DeviceMatrix<V> build_device_matrix(Context&, const DeviceCooView<V, I>&, const BuildOptions&,          \
                                               ConvertStats*);                                                     \
  template void to_device_csr(const DeviceMatrix<V>&, I*, I*, V*, cudaStream_t, ConvertStats*);                    \
  template void to_device_csr(Context&, const DeviceMatrix<V>&, I*, I*, V*, ConvertStats*);                        \
  template void to_device_coo(const DeviceMatrix<V>&, I*, I*, V*, cudaStream_t, ConvertStats*);                    \
  template void to_device_coo(Context&, const DeviceMatrix<V>&, I*, I*, V*, ConvertStats*);                        \
  template void to_device_coo_positions(const DeviceMatrix<V>&, I*, I*, std::uint32_t*, cudaStream_t, ConvertStats*); \
  template void to_device_coo_positions(Context&, const DeviceMatrix<V>&, I*, I*, std::uint32_t*, ConvertStats*);  \
  template DeviceCsr<V, I> to_device_csr(const DeviceMatrix<V>&, cudaStream_t, ConvertStats*);                     \
  template DeviceCsr<V, I> to_device_csr(Context&, const DeviceMatrix<V>&, ConvertStats*);                         \
  template DeviceCoo<V, I> to_device_coo(const DeviceMatrix<V>&, cudaStream_t, ConvertStats*);                     \
  template DeviceCoo<V, I> to_device_coo(Context&, const DeviceMatrix<V>&, ConvertStats*);
HISPARSE_CONVERT_INSTANTIATE(float, std::int32_t)
HISPARSE_CONVERT_INSTANTIATE(float, std::int64_t)
HISPARSE_CONVERT_INSTANTIATE(double, std::int32_t)
HISPARSE_CONVERT_INSTANTIATE(double, std::int64_t)
#undef HISPARSE_CONVERT_INSTANTIATE

}  // namespace hisparse::ops
