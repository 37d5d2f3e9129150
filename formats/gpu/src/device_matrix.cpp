#include "hisparse/formats/device_matrix.hpp"

#include "hisparse/formats/device_arena.hpp"  // a version's arena

#include <atomic>
#include <complex>
#include <cstring>

#include "hisparse/formats/hsp_file.hpp"

namespace hisparse {

void cuda_check(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return;
  // A failed call also sets the thread's last error; left there, a non-sticky
  // one (cudaErrorMemoryAllocation) would fail the next launch check of any
  // later, healthy call. A sticky error stays whatever is done here.
  (void)cudaGetLastError();
  throw Error(std::string("CUDA error in ") + what + ": " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
}

namespace {
std::atomic<long> injected_failure_countdown{-1};
}  // namespace

void inject_device_bytes_failure(long n) { injected_failure_countdown.store(n < 0 ? -1 : n); }

namespace {
// The injected failure, if this allocation is the one (see the header).
bool injected_failure_due() {
  return injected_failure_countdown.load() >= 0 && injected_failure_countdown.fetch_sub(1) == 0;
}
}  // namespace

DeviceBytes::DeviceBytes(std::size_t bytes) : size_(bytes), capacity_(bytes) { device_malloc(); }
void DeviceBytes::device_malloc() {
  if (!size_) return;
  if (injected_failure_due())
    throw Error("CUDA error in cudaMalloc: cudaErrorMemoryAllocation (out of memory, injected by a test)");
  cuda_check(cudaMalloc(&ptr_, size_), "cudaMalloc");
}
DeviceBytes::DeviceBytes(std::size_t bytes, cudaStream_t stream, cudaMemPool_t pool)
    : size_(bytes), capacity_(bytes), stream_(stream), pooled_(true) {
  if (!bytes) return;
  if (injected_failure_due())
    throw Error("CUDA error in cudaMallocFromPoolAsync: cudaErrorMemoryAllocation (out of memory, injected by a test)");
  cuda_check(cudaMallocFromPoolAsync(&ptr_, bytes, pool, stream), "cudaMallocFromPoolAsync");
}
DeviceBytes::DeviceBytes(std::size_t bytes, cudaStream_t stream, std::shared_ptr<runtime::DeviceAllocator> allocator)
    : size_(bytes), capacity_(bytes), stream_(stream), allocator_(std::move(allocator)) {
  if (!allocator_) {
    device_malloc();
    return;
  }
  if (!bytes) return;
  if (injected_failure_due())
    throw Error("device allocation of " + std::to_string(bytes) + " bytes failed: out of memory (injected by a test)");
  try {
    ptr_ = allocator_->allocate(bytes, stream);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    (void)cudaGetLastError();
    throw Error("device allocation of " + std::to_string(bytes) + " bytes failed: " + e.what());
  }
  if (!ptr_) throw Error("device allocation of " + std::to_string(bytes) + " bytes failed: the allocator returned null");
}
void DeviceBytes::release() noexcept {
  if (!ptr_) return;
  if (allocator_) allocator_->deallocate(ptr_, capacity_, stream_);
  else if (pooled_) cudaFreeAsync(ptr_, stream_);
  else cudaFree(ptr_);
  ptr_ = nullptr;
}
DeviceBytes& DeviceBytes::operator=(DeviceBytes&& o) noexcept {
  if (this != &o) {
    release();
    ptr_ = o.ptr_;
    size_ = o.size_;
    capacity_ = o.capacity_;
    stream_ = o.stream_;
    pooled_ = o.pooled_;
    allocator_ = std::move(o.allocator_);
    o.ptr_ = nullptr;
    o.size_ = o.capacity_ = 0;
  }
  return *this;
}
DeviceBytes::~DeviceBytes() { release(); }
void DeviceBytes::shrink(std::size_t bytes) {
  if (bytes > size_) throw Error("DeviceBytes::shrink: " + std::to_string(bytes) + " bytes asked of " + std::to_string(size_));
  size_ = bytes;
}

namespace {
// A version of a family goes up as its own nodes in the builder's layout: the
// GPU ops expect a pool of one matrix (the rebuilding copy checks its size).
template <class V>
Matrix<V> own_pool(const Matrix<V>& host) {
  return host.content().arena ? Matrix<V>(compacted(host.content()), host.transposed(), host.scale()) : host;
}
}  // namespace

template <class V>
DeviceMatrix<V>::DeviceMatrix(const Matrix<V>& host, cudaStream_t stream) : DeviceMatrix(own_pool(host), stream, 0) {}

template <class V>
DeviceMatrix<V>::DeviceMatrix(const Matrix<V>& host, cudaStream_t stream, int)
    : pool_(host.pool_bytes()),
      shape_(host.content().shape),
      nnz_(host.nnz()),
      root_(host.content().root()),
      transposed_(host.transposed()),
      scale_(host.scale()),
      wide_((host.content().header().flags & pool_flag_wide) != 0) {
  cuda_check(cudaMemcpyAsync(pool_.get(), host.content().pool.data(), host.pool_bytes(), cudaMemcpyHostToDevice, stream),
             "cudaMemcpyAsync(pool upload)");
  cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize(pool upload)");
}

template <class V>
DeviceMatrix<V> DeviceMatrix<V>::load(const std::filesystem::path& file, cudaStream_t stream) {
  return DeviceMatrix(load_hsp<V>(file), stream);
}

template <class V>
Matrix<V> DeviceMatrix<V>::download(cudaStream_t stream) const {
  auto c = std::make_shared<Content<V>>();
  c->shape = shape_;
  c->nnz = nnz_;
  c->pool = AlignedBuffer(pool_bytes());
  cuda_check(cudaMemcpyAsync(c->pool.data(), pool(), pool_bytes(), cudaMemcpyDeviceToHost, stream),
             "cudaMemcpyAsync(pool download)");
  cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize(pool download)");
  if (!arena_) return Matrix<V>(std::move(c), transposed_, scale_);
  // A version: the family's header with this version's root, then only the
  // nodes that root reaches, in the builder's layout.
  reinterpret_cast<PoolHeader*>(c->pool.data())->root = root_;
  return Matrix<V>(compacted(*c), transposed_, scale_);
}

template <class V>
const std::byte* DeviceMatrix<V>::pool() const {
  return arena_ ? arena_->data() : pool_.as<const std::byte>();
}

template <class V>
std::byte* DeviceMatrix<V>::pool_for_values() {
  if (arena_)
    throw Error("a version's values cannot be rewritten in place: its nodes are shared with its family "
                "(copy it first: ops::copy)");
  return pool_.as<std::byte>();
}

template <class V>
DeviceMatrix<V> DeviceMatrix<V>::version(std::shared_ptr<DeviceArena> arena, std::uint64_t view_bytes, Shape shape,
                                         std::uint64_t nnz, NodeRef root, bool transposed, V scale, bool wide_nodes) {
  if (!arena || view_bytes > arena->size())
    throw Error("DeviceMatrix::version: a view of " + std::to_string(view_bytes) + " bytes of an arena holding " +
                std::to_string(arena ? arena->size() : 0));
  DeviceMatrix m = adopt(DeviceBytes(), shape, nnz, root, transposed, scale, wide_nodes);
  m.arena_ = std::move(arena);
  m.view_bytes_ = view_bytes;
  return m;
}

template <class V>
DeviceMatrix<V> DeviceMatrix<V>::adopt(DeviceBytes pool, Shape shape, std::uint64_t nnz, NodeRef root, bool transposed,
                                       V scale, bool wide_nodes) {
  DeviceMatrix m;
  m.pool_ = std::move(pool);
  m.shape_ = shape;
  m.nnz_ = nnz;
  m.root_ = root;
  m.transposed_ = transposed;
  m.scale_ = scale;
  m.wide_ = wide_nodes;
  return m;
}

template class DeviceMatrix<float>;
template class DeviceMatrix<double>;

}  // namespace hisparse
