#pragma once
// A HiSparse matrix on the GPU: the node pool in device memory (owned,
// move-only, freed on destruction) plus the same state as on the host
// (transpose flag, scale), which changes in O(1). Host code only needs
// cuda_runtime.h to use it; kernels receive a DeviceMatrixRef by value.
#include <cuda_runtime.h>

#include <filesystem>
#include <memory>
#include <string>

#include "hisparse/formats/matrix.hpp"
#include "hisparse/runtime/allocator.hpp"

namespace hisparse {

// Throws hisparse::Error naming the call when a CUDA call fails.
void cuda_check(cudaError_t err, const char* what);

// Everything a kernel needs to walk the matrix: trivially copyable.
template <class V>
struct DeviceMatrixRef {
  const std::byte* pool;
  index_t rows, cols;  // of the content
  NodeRef root;
  std::uint32_t log2_node_size;
  std::uint32_t depth;
  bool transposed;
  V scale;
};

// Fault injection for tests: the n-th DeviceBytes allocation from now (0: the
// next) fails as cudaMalloc does when the device is out of memory; a
// negative n turns injection off (the default). Process-wide.
void inject_device_bytes_failure(long n);

// Device memory owned by one object: cudaMalloc / cudaFree; or stream-ordered
// from a memory pool (cudaMallocFromPoolAsync, freed by cudaFreeAsync on the
// same stream: no device-wide synchronisation, as cudaFree has), for work
// memory that lives within one call; or from a DeviceAllocator (a Context's),
// returned to it on the stream it was allocated on (that stream must still
// exist then: as RMM's device_buffer), the allocator kept alive meanwhile.
class DeviceBytes {
 public:
  DeviceBytes() = default;
  explicit DeviceBytes(std::size_t bytes);
  DeviceBytes(std::size_t bytes, cudaStream_t stream, cudaMemPool_t pool);
  // Failures (the allocator's exceptions) become hisparse::Error. A null
  // allocator is cudaMalloc, as the first form (a context's memory where
  // there is a context, cudaMalloc otherwise, in one expression).
  DeviceBytes(std::size_t bytes, cudaStream_t stream, std::shared_ptr<runtime::DeviceAllocator> allocator);
  DeviceBytes(DeviceBytes&& o) noexcept
      : ptr_(o.ptr_),
        size_(o.size_),
        capacity_(o.capacity_),
        stream_(o.stream_),
        pooled_(o.pooled_),
        allocator_(std::move(o.allocator_)) {
    o.ptr_ = nullptr;
    o.size_ = o.capacity_ = 0;
  }
  DeviceBytes& operator=(DeviceBytes&& o) noexcept;
  DeviceBytes(const DeviceBytes&) = delete;
  DeviceBytes& operator=(const DeviceBytes&) = delete;
  ~DeviceBytes();
  [[nodiscard]] void* get() const { return ptr_; }
  [[nodiscard]] std::size_t size() const { return size_; }
  // The allocation, which shrink() leaves as it is.
  [[nodiscard]] std::size_t capacity() const { return capacity_; }
  // The first `bytes` (at most size()) are what size() reports from now on;
  // the allocation is kept and freed whole. For a result that fills most of
  // the room it was written into: cheaper than a copy into an exact one.
  void shrink(std::size_t bytes);
  template <class T>
  [[nodiscard]] T* as() const { return static_cast<T*>(ptr_); }

 private:
  void release() noexcept;
  void device_malloc();  // size_ bytes from cudaMalloc
  void* ptr_ = nullptr;
  std::size_t size_ = 0;
  std::size_t capacity_ = 0;
  cudaStream_t stream_ = nullptr;
  bool pooled_ = false;
  std::shared_ptr<runtime::DeviceAllocator> allocator_;
};

class DeviceArena;

template <class V>
class DeviceMatrix {
 public:
  using value_type = V;

  DeviceMatrix() = default;
  // Uploads content and state (synchronously on `stream`); a version of a
  // family (node_arena.hpp) as its own nodes, compacted.
  explicit DeviceMatrix(const Matrix<V>& host, cudaStream_t stream = nullptr);
  // Loads an .hsp file (validated) and uploads it.
  static DeviceMatrix load(const std::filesystem::path& file, cudaStream_t stream = nullptr);

  DeviceMatrix(DeviceMatrix&&) noexcept = default;
  DeviceMatrix& operator=(DeviceMatrix&&) noexcept = default;

  // Content and state back on the host; a version (below) as its own nodes,
  // compacted into the builder's layout.
  [[nodiscard]] Matrix<V> download(cudaStream_t stream = nullptr) const;

  [[nodiscard]] index_t rows() const { return transposed_ ? shape_.cols : shape_.rows; }
  [[nodiscard]] index_t cols() const { return transposed_ ? shape_.rows : shape_.cols; }
  [[nodiscard]] std::uint64_t nnz() const { return nnz_; }
  [[nodiscard]] const Shape& shape() const { return shape_; }
  // A version's pool is its view of its family's arena: up to its last node,
  // other versions' nodes included (ops reach only their root's nodes).
  [[nodiscard]] std::uint64_t pool_bytes() const { return arena_ ? view_bytes_ : pool_.size(); }
  [[nodiscard]] const std::byte* pool() const;
  // The pool for rewriting values in place, at the positions that
  // ops::to_device_coo_positions reports (ops::AddPlan's second phase does).
  // Any other byte written breaks the matrix: the structure is not checked again.
  // A version's nodes are shared with its family: hisparse::Error.
  [[nodiscard]] std::byte* pool_for_values();
  [[nodiscard]] NodeRef root() const { return root_; }
  [[nodiscard]] bool transposed() const { return transposed_; }
  [[nodiscard]] V scale() const { return scale_; }
  // Built with COOW nodes (the pool header's wide flag).
  [[nodiscard]] bool wide_nodes() const { return wide_; }

  // O(1) state changes: nothing on the device moves.
  void transpose() { transposed_ = !transposed_; }
  void scale_by(V s) { scale_ *= s; }
  void set_state(bool transposed, V scale) { transposed_ = transposed; scale_ = scale; }

  [[nodiscard]] DeviceMatrixRef<V> ref() const {
    return {pool(), shape_.rows, shape_.cols, root_, shape_.log2_node_size, shape_.depth, transposed_, scale_};
  }

  // Takes ownership of a pool already in device memory (GPU copy/materialize);
  // `wide_nodes` must match the pool header's flag.
  static DeviceMatrix adopt(DeviceBytes pool, Shape shape, std::uint64_t nnz, NodeRef root, bool transposed, V scale,
                            bool wide_nodes);

  // A version of a family (device_arena.hpp, made by ops::versioned and the
  // GPU batch edit): `root` in `arena`, whose first `view_bytes` hold every
  // node it reaches. The family's header (node size, depth, value size, wide
  // flag) is the arena's first 16 bytes; its root field is the first
  // version's.
  static DeviceMatrix version(std::shared_ptr<DeviceArena> arena, std::uint64_t view_bytes, Shape shape,
                              std::uint64_t nnz, NodeRef root, bool transposed, V scale, bool wide_nodes);
  // The family's arena; null for a matrix of its own pool.
  [[nodiscard]] const std::shared_ptr<DeviceArena>& arena() const { return arena_; }

 private:
  DeviceMatrix(const Matrix<V>& own, cudaStream_t stream, int);  // `own`: not a version
  DeviceBytes pool_;
  std::shared_ptr<DeviceArena> arena_;  // a version's family (pool_ empty then)
  std::uint64_t view_bytes_ = 0;
  Shape shape_{};
  std::uint64_t nnz_ = 0;
  NodeRef root_ = null_ref;
  bool transposed_ = false;
  V scale_ = V(1);
  bool wide_ = false;
};

}  // namespace hisparse
