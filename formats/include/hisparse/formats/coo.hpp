#pragma once
// Coordinate lists: the exchange type between files, the builder and the
// reference operations. 64-bit indices, so sizes are never the limit here.
#include <complex>
#include <cstdint>
#include <type_traits>
#include <vector>

namespace hisparse {

using index_t = std::uint64_t;

template <class V>
struct Coo {
  index_t rows = 0;
  index_t cols = 0;
  std::vector<index_t> row;
  std::vector<index_t> col;
  std::vector<V> val;

  [[nodiscard]] std::size_t nnz() const { return val.size(); }
  void reserve(std::size_t n) {
    row.reserve(n);
    col.reserve(n);
    val.reserve(n);
  }
  void push(index_t r, index_t c, V v) {
    row.push_back(r);
    col.push_back(c);
    val.push_back(v);
  }
};

template <class V>
struct Csr {
  index_t rows = 0;
  index_t cols = 0;
  std::vector<index_t> row_ptr;  // rows + 1 entries
  std::vector<index_t> col;
  std::vector<V> val;

  [[nodiscard]] std::size_t nnz() const { return val.size(); }
};

template <class T>
inline constexpr bool is_complex_v = false;
template <class T>
inline constexpr bool is_complex_v<std::complex<T>> = true;

// The real type of a value type: itself, or a complex type's component.
template <class V>
struct real_of {
  using type = V;
};
template <class T>
struct real_of<std::complex<T>> {
  using type = T;
};
template <class V>
using real_of_t = typename real_of<V>::type;

}  // namespace hisparse
