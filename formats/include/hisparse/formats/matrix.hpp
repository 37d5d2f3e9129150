#pragma once
// A HiSparse matrix on the host: immutable content (shape + node pool) shared
// between matrices, and a per-matrix state (transpose flag, scale factor).
// Transposing or scaling copies a pointer and flips a flag: O(1).
#include <complex>
#include <cstdint>
#include <memory>
#include <string>

#include "hisparse/formats/aligned_buffer.hpp"
#include "hisparse/formats/coo.hpp"
#include "hisparse/formats/error.hpp"
#include "hisparse/formats/node.hpp"
#include "hisparse/formats/node_arena.hpp"

namespace hisparse {

// Documented limits (docs/format.md, "Limits"). Dimensions are bounded so that
// digit keys of every supported node size fit 128 bits; entries by the 32-bit
// child references, which address a pool of at most 4 GiB.
inline constexpr index_t max_dimension = index_t{1} << 48;
inline constexpr std::uint32_t min_node_size = 2;
inline constexpr std::uint32_t max_node_size = 256;
inline constexpr std::uint32_t default_node_size = 128;

// Codes used in files and statistics.
enum class ValueType : std::uint8_t { f32 = 1, f64 = 2, c64 = 3, c128 = 4 };

template <class V>
constexpr ValueType value_type_of() {
  if constexpr (std::is_same_v<V, float>) return ValueType::f32;
  else if constexpr (std::is_same_v<V, double>) return ValueType::f64;
  else if constexpr (std::is_same_v<V, std::complex<float>>) return ValueType::c64;
  else {
    static_assert(std::is_same_v<V, std::complex<double>>, "supported value types: float, double, complex");
    return ValueType::c128;
  }
}
const char* value_type_name(ValueType t);

// Throws hisparse::Error unless d is a power of two in [2, 256]. Returns log2(d).
std::uint32_t checked_log2_node_size(std::uint32_t node_size);

struct Shape {
  index_t rows = 0;
  index_t cols = 0;
  std::uint32_t log2_node_size = 7;
  std::uint32_t depth = 1;

  [[nodiscard]] std::uint32_t node_size() const { return 1u << log2_node_size; }
  static Shape make(index_t rows, index_t cols, std::uint32_t node_size);
  bool operator==(const Shape&) const = default;
};

template <class V>
struct Content {
  Shape shape;
  std::uint64_t nnz = 0;
  AlignedBuffer pool;  // starts with a PoolHeader

  // Set for a version of a family (node_arena.hpp, ops::edit_version): the
  // pool is a view of the family's arena up to this version's last node, its
  // header the family's, and the root this version's own. Such a pool holds
  // other versions' nodes too, so it is not the builder's layout: compacted()
  // gives that. Null for every other content (the root is the header's).
  std::shared_ptr<NodeArena> arena;
  NodeRef version_root = null_ref;

  [[nodiscard]] const PoolHeader& header() const { return *reinterpret_cast<const PoolHeader*>(pool.data()); }
  [[nodiscard]] NodeRef root() const { return arena ? version_root : header().root; }
};

// The content's own nodes (those its root reaches) in a pool of their own, in
// the builder's layout: byte for byte the pool the builder makes from the
// same entries when `c` is canonical. What a version of a family is written
// as to a file or uploaded as to the GPU. O(pool).
template <class V>
std::shared_ptr<const Content<V>> compacted(const Content<V>& c);

template <class V>
class Matrix {
 public:
  using value_type = V;

  Matrix() : Matrix(empty_content(0, 0, default_node_size)) {}
  explicit Matrix(std::shared_ptr<const Content<V>> content, bool transposed = false, V scale = V(1))
      : content_(std::move(content)), transposed_(transposed), scale_(scale) {}

  // Logical dimensions: those of op(A).
  [[nodiscard]] index_t rows() const { return transposed_ ? content_->shape.cols : content_->shape.rows; }
  [[nodiscard]] index_t cols() const { return transposed_ ? content_->shape.rows : content_->shape.cols; }
  [[nodiscard]] std::uint64_t nnz() const { return content_->nnz; }
  [[nodiscard]] std::uint32_t node_size() const { return content_->shape.node_size(); }
  [[nodiscard]] bool transposed() const { return transposed_; }
  [[nodiscard]] V scale() const { return scale_; }
  [[nodiscard]] const Content<V>& content() const { return *content_; }
  [[nodiscard]] const std::shared_ptr<const Content<V>>& content_ptr() const { return content_; }
  // A version's pool is its view of its family (other versions' nodes
  // included; another thread may be writing the newest of them): compare or
  // copy versions through compacted(), never by their pool bytes.
  [[nodiscard]] std::uint64_t pool_bytes() const { return content_->pool.size(); }

  [[nodiscard]] Matrix transpose() const { return Matrix(content_, !transposed_, scale_); }
  [[nodiscard]] Matrix scaled(V s) const { return Matrix(content_, transposed_, scale_ * s); }
  [[nodiscard]] Matrix with_state(bool transposed, V scale) const { return Matrix(content_, transposed, scale); }

  static std::shared_ptr<const Content<V>> empty_content(index_t rows, index_t cols, std::uint32_t node_size);

 private:
  std::shared_ptr<const Content<V>> content_;
  bool transposed_ = false;
  V scale_ = V(1);
};

template <class V>
std::shared_ptr<const Content<V>> Matrix<V>::empty_content(index_t rows, index_t cols, std::uint32_t node_size) {
  auto c = std::make_shared<Content<V>>();
  c->shape = Shape::make(rows, cols, node_size);
  c->pool = AlignedBuffer(sizeof(PoolHeader));
  auto* h = reinterpret_cast<PoolHeader*>(c->pool.data());
  h->magic = pool_magic;
  h->root = null_ref;
  h->log2_node_size = static_cast<std::uint8_t>(c->shape.log2_node_size);
  h->depth = static_cast<std::uint8_t>(c->shape.depth);
  h->value_bytes = sizeof(V);
  return c;
}

}  // namespace hisparse
