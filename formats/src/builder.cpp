#include "hisparse/formats/builder.hpp"

#include <algorithm>
#include <complex>
#include <cstdint>
#include <numeric>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "hisparse/formats/node_writer.hpp"
#include "hisparse/formats/traverse.hpp"
#include "radix_sort.hpp"

namespace hisparse {
namespace {

using Key = unsigned __int128;

// A key interleaves the (row digit, column digit) pairs of every level, root
// first, so sorting by key sorts entries into tree order: each node's entries
// are contiguous and its children appear row-major.
struct KeyCodec {
  std::uint32_t b;      // log2 node size
  std::uint32_t depth;  // levels

  [[nodiscard]] Key encode(index_t row, index_t col) const {
    Key k = 0;
    const index_t mask = (index_t{1} << b) - 1;
    for (std::uint32_t l = 0; l < depth; ++l) {
      const std::uint32_t s = b * (depth - 1 - l);
      k = (k << (2 * b)) | (Key((row >> s) & mask) << b) | Key((col >> s) & mask);
    }
    return k;
  }
  // Everything above level l's digits identifies the node at level l + 1.
  [[nodiscard]] Key prefix(Key k, std::uint32_t level) const { return k >> (2 * b * (depth - 1 - level)); }
  [[nodiscard]] LocalCoord digits(Key k, std::uint32_t level) const {
    const auto p = prefix(k, level);
    const Key mask = (Key{1} << b) - 1;
    return {static_cast<std::uint8_t>((p >> b) & mask), static_cast<std::uint8_t>(p & mask)};
  }
};

// One level of the skeleton: node i covers sorted entries [start[i], start[i+1]).
struct SkeletonLevel {
  std::vector<std::uint64_t> start;
  std::vector<std::uint32_t> count;   // entries (leaf) or children (inner)
  std::vector<NodeChoice> choice;
  std::vector<std::uint64_t> offset;
  std::vector<bool> dropped;  // leaves inside a COOW node are not written
  [[nodiscard]] std::size_t size() const { return count.size(); }
};

template <class V>
void check_coo(const Coo<V>& coo) {
  if (coo.row.size() != coo.val.size() || coo.col.size() != coo.val.size())
    throw Error("coordinate list: row, column and value arrays differ in length (" + std::to_string(coo.row.size()) +
                ", " + std::to_string(coo.col.size()) + ", " + std::to_string(coo.val.size()) + ")");
  for (std::size_t i = 0; i < coo.val.size(); ++i) {
    if (coo.row[i] >= coo.rows || coo.col[i] >= coo.cols)
      throw Error("coordinate list: entry " + std::to_string(i) + " at (" + std::to_string(coo.row[i]) + ", " +
                  std::to_string(coo.col[i]) + ") lies outside the " + std::to_string(coo.rows) + " x " +
                  std::to_string(coo.cols) + " matrix");
  }
}

}  // namespace

template <class V>
Matrix<V> build_matrix(const Coo<V>& coo, const BuildOptions& options) {
  const std::uint32_t node_size = options.node_size;
  const Shape shape = Shape::make(coo.rows, coo.cols, node_size);
  check_coo(coo);
  const KeyCodec codec{shape.log2_node_size, shape.depth};
  const std::uint32_t L = shape.depth;
  const std::uint32_t b = shape.log2_node_size;

  // Sort into tree order; ties keep input order so duplicates sum
  // deterministically. A stable radix sort over the key bits in use (64-bit
  // keys whenever they fit, which is every matrix up to 2^32 with d = 128).
  const std::size_t n_in = coo.val.size();
  const unsigned key_bits = 2 * L * b;
  std::vector<std::uint64_t> order(n_in);
  std::iota(order.begin(), order.end(), std::uint64_t{0});
  std::vector<Key> sorted_keys;
  if (key_bits <= 64) {
    std::vector<std::uint64_t> k64(n_in);
    for (std::size_t i = 0; i < n_in; ++i) k64[i] = static_cast<std::uint64_t>(codec.encode(coo.row[i], coo.col[i]));
    detail::radix_sort_pairs(k64, order, key_bits);
    sorted_keys.assign(k64.begin(), k64.end());
  } else {
    sorted_keys.resize(n_in);
    for (std::size_t i = 0; i < n_in; ++i) sorted_keys[i] = codec.encode(coo.row[i], coo.col[i]);
    detail::radix_sort_pairs(sorted_keys, order, key_bits);
  }

  std::vector<Key> keys;
  std::vector<V> vals;
  keys.reserve(n_in);
  vals.reserve(n_in);
  for (std::size_t i = 0; i < n_in; ++i) {
    if (!keys.empty() && keys.back() == sorted_keys[i]) {
      vals.back() += coo.val[order[i]];
    } else {
      keys.push_back(sorted_keys[i]);
      vals.push_back(coo.val[order[i]]);
    }
  }
  order = {};
  sorted_keys = {};
  const std::uint64_t n = keys.size();
  if (n == 0) {
    auto empty = std::make_shared<Content<V>>(*Matrix<V>::empty_content(coo.rows, coo.cols, node_size));
    if (options.wide_nodes) reinterpret_cast<PoolHeader*>(empty->pool.data())->flags = pool_flag_wide;
    return Matrix<V>(std::move(empty));
  }

  // Step 1, top down: node boundaries per level and each node's count.
  std::vector<SkeletonLevel> lv(L);
  lv[0].start = {0, n};
  for (std::uint32_t l = 0; l + 1 < L; ++l) {
    auto& next = lv[l + 1].start;
    next.push_back(0);
    for (std::uint64_t i = 1; i < n; ++i)
      if (codec.prefix(keys[i], l) != codec.prefix(keys[i - 1], l)) next.push_back(i);
    next.push_back(n);
  }
  for (std::uint32_t l = 0; l < L; ++l) {
    auto& s = lv[l];
    const std::size_t nodes = s.start.size() - 1;
    s.count.assign(nodes, 0);
    if (l + 1 == L) {
      for (std::size_t i = 0; i < nodes; ++i) s.count[i] = static_cast<std::uint32_t>(s.start[i + 1] - s.start[i]);
    } else {
      // Children of node i are the next level's nodes starting inside its range.
      const auto& cs = lv[l + 1].start;
      std::size_t c = 0;
      for (std::size_t i = 0; i < nodes; ++i) {
        std::uint32_t k = 0;
        while (c + 1 < cs.size() && cs[c] < s.start[i + 1]) { ++c; ++k; }
        s.count[i] = k;
      }
    }
    s.choice.resize(nodes);
    const bool leaf = l + 1 == L;
    for (std::size_t i = 0; i < nodes; ++i)
      s.choice[i] = choose_node(s.count[i], b, leaf, leaf ? sizeof(V) : sizeof(NodeRef));
  }

  // COOW: a level L-2 node whose entries take no more bytes in one wide node
  // than as an inner node plus its leaves becomes that node (canonical rule).
  for (auto& s : lv) s.dropped.assign(s.size(), false);
  if (options.wide_nodes && L >= 2) {
    auto& s = lv[L - 2];
    auto& leaves = lv[L - 1];
    std::size_t c = 0;
    for (std::size_t i = 0; i < s.size(); ++i) {
      std::uint64_t standard = s.choice[i].bytes;
      const std::size_t first = c;
      for (std::uint32_t k = 0; k < s.count[i]; ++k, ++c) standard += leaves.choice[c].bytes;
      const std::uint64_t entries = s.start[i + 1] - s.start[i];
      if (entries > 0xFFFFFFFFull) continue;
      // In 64 bits: the 32-bit layout of a node past 4 GiB wraps to a small
      // size and would win (node size 256, ~3.6e8 entries in one block).
      const std::uint64_t wide = coow_layout64(entries, sizeof(V)).bytes;
      if (wide <= standard) {
        s.choice[i] = NodeChoice{NodeType::coow, wide};
        for (std::size_t k = first; k < c; ++k) leaves.dropped[k] = true;
      }
    }
  }

  // Offsets bottom-up (children before parents), then the one allocation.
  std::uint64_t bytes = sizeof(PoolHeader);
  for (std::uint32_t l = L; l-- > 0;) {
    auto& s = lv[l];
    s.offset.resize(s.size());
    for (std::size_t i = 0; i < s.size(); ++i) {
      if (s.dropped[i]) continue;
      s.offset[i] = bytes;
      bytes += s.choice[i].bytes;
    }
  }
  if (bytes > max_pool_bytes)
    throw LimitError("matrix needs a node pool of " + std::to_string(bytes) +
                     " bytes, over the 4 GiB limit of 32-bit child references");

  auto content = std::make_shared<Content<V>>();
  content->shape = shape;
  content->nnz = n;
  content->pool = AlignedBuffer(bytes);
  std::byte* pool = content->pool.data();

  // Step 2, bottom up: leaves take the entries, inner nodes their children's references.
  std::vector<LocalCoord> coords;
  std::vector<NodeRef> refs;
  std::vector<std::pair<WideCoord, V>> wide;
  std::vector<WideCoord> wide_coords;
  std::vector<V> wide_vals;
  for (std::uint32_t l = L; l-- > 0;) {
    const auto& s = lv[l];
    const bool leaf = l + 1 == L;
    std::size_t c = 0;
    for (std::size_t i = 0; i < s.size(); ++i) {
      coords.clear();
      if (s.dropped[i]) continue;
      std::byte* dst = pool + s.offset[i];
      if (s.choice[i].type == NodeType::coow) {
        // Entries of the two levels, in row-major order of the 16-bit coordinates.
        wide.clear();
        for (std::uint64_t e = s.start[i]; e < s.start[i + 1]; ++e) {
          const LocalCoord hi = codec.digits(keys[e], l), lo = codec.digits(keys[e], l + 1);
          wide.push_back({WideCoord{static_cast<std::uint16_t>((hi.row << b) | lo.row),
                                    static_cast<std::uint16_t>((hi.col << b) | lo.col)},
                          vals[e]});
        }
        std::sort(wide.begin(), wide.end(), [](const auto& x, const auto& y) { return wide_less(x.first, y.first); });
        wide_coords.clear();
        wide_vals.clear();
        for (const auto& [wc, v] : wide) {
          wide_coords.push_back(wc);
          wide_vals.push_back(v);
        }
        write_coow_node<V>(dst, wide_coords, wide_vals);
        c += s.count[i];  // its (dropped) leaves
        continue;
      }
      if (leaf) {
        for (std::uint64_t e = s.start[i]; e < s.start[i + 1]; ++e) coords.push_back(codec.digits(keys[e], l));
        write_node<V>(dst, s.choice[i], b, true, coords,
                      std::span<const V>(vals.data() + s.start[i], s.count[i]));
      } else {
        refs.clear();
        const auto& ch = lv[l + 1];
        for (std::uint32_t k = 0; k < s.count[i]; ++k, ++c) {
          coords.push_back(codec.digits(keys[ch.start[c]], l));
          refs.push_back(make_ref(ch.offset[c], ch.choice[c].type));
        }
        write_node<NodeRef>(dst, s.choice[i], b, false, coords, refs);
      }
    }
  }
  *reinterpret_cast<PoolHeader*>(pool) =
      PoolHeader{pool_magic, make_ref(lv[0].offset[0], lv[0].choice[0].type), static_cast<std::uint8_t>(b),
                 static_cast<std::uint8_t>(L), sizeof(V), options.wide_nodes ? pool_flag_wide : std::uint8_t{0}, 0};
  return Matrix<V>(std::move(content));
}

template <class V>
Coo<V> csr_to_coo(const Csr<V>& csr) {
  if (csr.row_ptr.size() != csr.rows + 1)
    throw Error("CSR: row pointer array has " + std::to_string(csr.row_ptr.size()) + " entries, expected rows + 1 = " +
                std::to_string(csr.rows + 1));
  if (csr.col.size() != csr.val.size())
    throw Error("CSR: column and value arrays differ in length");
  if (csr.row_ptr.front() != 0 || csr.row_ptr.back() != csr.val.size())
    throw Error("CSR: row pointers must start at 0 and end at nnz = " + std::to_string(csr.val.size()));
  Coo<V> coo;
  coo.rows = csr.rows;
  coo.cols = csr.cols;
  coo.reserve(csr.val.size());
  for (index_t r = 0; r < csr.rows; ++r) {
    if (csr.row_ptr[r + 1] < csr.row_ptr[r])
      throw Error("CSR: row pointers decrease at row " + std::to_string(r));
    for (index_t k = csr.row_ptr[r]; k < csr.row_ptr[r + 1]; ++k) coo.push(r, csr.col[k], csr.val[k]);
  }
  return coo;
}

template <class V>
Matrix<V> build_matrix(const Csr<V>& csr, const BuildOptions& options) {
  return build_matrix(csr_to_coo(csr), options);
}

template <class V>
Coo<V> to_coo(const Matrix<V>& m) {
  struct E {
    index_t r, c;
    V v;
  };
  std::vector<E> es;
  es.reserve(m.nnz());
  for_each_logical_entry(m, [&](index_t r, index_t c, V v) { es.push_back({r, c, v}); });
  Coo<V> coo;
  coo.rows = m.rows();
  coo.cols = m.cols();
  const auto by_row_col = [](const E& a, const E& b) { return a.r != b.r ? a.r < b.r : a.c < b.c; };
  const std::uint64_t n = es.size();
  if (m.rows() > 4 * n + 4096) {  // too many rows for a count per row: a comparison sort
    std::sort(es.begin(), es.end(), by_row_col);
    coo.reserve(n);
    for (const E& e : es) coo.push(e.r, e.c, e.v);
    return coo;
  }
  // A stable counting sort by row (the comparison sort took ~14 s for R-MAT
  // 2^22's 65 M entries), then each row by column where the traversal did
  // not already give it in column order (tree order is column order within
  // a row: usually a check). A matrix holds no two entries at one place, so
  // the order is the one the comparison sort gave. (The builder's radix sort,
  // detail::radix_sort_pairs, of (row, column) packed in one key took 9.5 s
  // on that matrix here against this 4.0 s: three scattering passes of 44
  // key bits where this is one pass and a check.)
  std::vector<std::uint64_t> start(m.rows() + 1, 0);
  for (const E& e : es) ++start[e.r + 1];
  std::partial_sum(start.begin(), start.end(), start.begin());
  coo.row.resize(n);
  coo.col.resize(n);
  coo.val.resize(n);
  {
    std::vector<std::uint64_t> next(start.begin(), start.end() - 1);
    for (const E& e : es) {
      const std::uint64_t at = next[e.r]++;
      coo.row[at] = e.r;
      coo.col[at] = e.c;
      coo.val[at] = e.v;
    }
  }
  es = std::vector<E>();
  std::vector<std::pair<index_t, V>> row;
  for (index_t r = 0; r < m.rows(); ++r) {
    const std::uint64_t a = start[r], b = start[r + 1];
    if (std::is_sorted(coo.col.begin() + a, coo.col.begin() + b)) continue;
    row.clear();
    for (std::uint64_t i = a; i < b; ++i) row.emplace_back(coo.col[i], coo.val[i]);
    std::sort(row.begin(), row.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
    for (std::uint64_t i = a; i < b; ++i) std::tie(coo.col[i], coo.val[i]) = row[i - a];
  }
  return coo;
}

template <class V>
Csr<V> to_csr(const Matrix<V>& m) {
  Coo<V> coo = to_coo(m);
  Csr<V> csr;
  csr.rows = coo.rows;
  csr.cols = coo.cols;
  csr.row_ptr.assign(coo.rows + 1, 0);
  for (index_t r : coo.row) ++csr.row_ptr[r + 1];
  std::partial_sum(csr.row_ptr.begin(), csr.row_ptr.end(), csr.row_ptr.begin());
  csr.col = std::move(coo.col);
  csr.val = std::move(coo.val);
  return csr;
}

#define HISPARSE_INSTANTIATE(V)                                       \
  template Matrix<V> build_matrix(const Coo<V>&, const BuildOptions&); \
  template Matrix<V> build_matrix(const Csr<V>&, const BuildOptions&); \
  template Coo<V> to_coo(const Matrix<V>&);                           \
  template Csr<V> to_csr(const Matrix<V>&);                           \
  template Coo<V> csr_to_coo(const Csr<V>&);
HISPARSE_INSTANTIATE(float)
HISPARSE_INSTANTIATE(double)
HISPARSE_INSTANTIATE(std::complex<float>)
HISPARSE_INSTANTIATE(std::complex<double>)
#undef HISPARSE_INSTANTIATE

}  // namespace hisparse
