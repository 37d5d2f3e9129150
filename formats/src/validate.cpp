#include "hisparse/formats/validate.hpp"

#include <algorithm>
#include <bit>
#include <complex>
#include <cstring>
#include <string>
#include <map>
#include <unordered_map>
#include <vector>

#include "hisparse/formats/node_view.hpp"

namespace hisparse {
namespace {

template <class V>
class Validator {
 public:
  explicit Validator(const Content<V>& c)
      : c_(c), pool_(c.pool.data()), size_(c.pool.size()), b_(c.shape.log2_node_size), d_(1u << b_) {}

  PoolStats run() {
    check_header();
    if (c_.root() != null_ref) visit(c_.root(), 0, 0, 0);
    if (stats_.entries != c_.nnz)
      fail("pool", "holds " + std::to_string(stats_.entries) + " entries but the matrix records nnz = " +
                       std::to_string(c_.nnz));
    check_overlap();
    // A version's pool view holds its family's other nodes too.
    if (!c_.arena) check_no_unreferenced_bytes();
    return stats_;
  }

 private:
  [[noreturn]] void fail(const std::string& where, const std::string& what) const {
    throw Error("invalid HiSparse pool: " + where + ": " + what);
  }
  static std::string at(std::uint64_t offset) { return "node at offset " + std::to_string(offset); }

  void check_header() {
    if (size_ < sizeof(PoolHeader)) fail("pool", "smaller than its 16-byte header");
    if (size_ % node_alignment) fail("pool", "size " + std::to_string(size_) + " is not a multiple of 16");
    if (size_ > max_pool_bytes) fail("pool", "size " + std::to_string(size_) + " is larger than the 2^32 - 16 byte limit");
    if (reinterpret_cast<std::uintptr_t>(pool_) % node_alignment) fail("pool", "not 16-byte aligned in memory");
    const PoolHeader& h = c_.header();
    if (h.magic != pool_magic) fail("pool header", "bad magic");
    if (h.flags & ~pool_flag_wide) fail("pool header", "unknown flag bits");
    if (h.reserved1 != 0) fail("pool header", "reserved bytes 12..15 are not zero");
    wide_ = (h.flags & pool_flag_wide) != 0;
    if (h.log2_node_size != b_ || h.depth != c_.shape.depth || h.value_bytes != sizeof(V))
      fail("pool header", "node size, depth or value size disagree with the matrix");
    if (b_ < 1 || b_ > 8) fail("shape", "node size 2^" + std::to_string(b_) + " outside [2, 256]");
    if (c_.shape.depth != tree_depth(c_.shape.rows, c_.shape.cols, b_))
      fail("shape", "depth " + std::to_string(c_.shape.depth) + " does not match the dimensions");
    if ((c_.root() == null_ref) != (c_.nnz == 0)) fail("pool header", "root is null exactly when nnz is 0");
  }

  // Returns the entries and bytes of the sub-tree (for the COOW rule).
  std::pair<std::uint64_t, std::uint64_t> visit(NodeRef ref, std::uint32_t level, index_t block_row, index_t block_col) {
    const std::uint64_t off = ref_offset(ref);
    const bool leaf = level + 1 == c_.shape.depth;
    if (static_cast<std::uint32_t>(ref_type(ref)) >= node_type_count)
      fail(at(off), "unknown node type " + std::to_string(static_cast<int>(ref_type(ref))));
    if (off < sizeof(PoolHeader) || off >= size_) fail(at(off), "offset outside the pool");
    // Offsets and the pool size are multiples of 16, so at least 16 bytes remain.
    const std::uint64_t room = size_ - off;

    // Every node has exactly one parent. (Versions share sub-trees across
    // trees, never inside one; a reference to an already visited node is a
    // cycle, an overlap or an attempt to make validation exponential.)
    auto [it, fresh] = seen_.try_emplace(off, Seen{level, ref, 0});
    if (!fresh) fail(at(off), "referenced more than once (cycle or shared node inside one pool)");
    if (ref_type(ref) == NodeType::coow) {
      const std::uint64_t bytes = visit_coow(off, room, level, block_row, block_col);
      it->second.bytes = bytes;
      return {coow_entries_, bytes};
    }

    std::uint32_t count = 0;
    std::uint64_t bytes = 0;
    const std::uint32_t elem = leaf ? sizeof(V) : sizeof(NodeRef);
    std::vector<std::pair<LocalCoord, NodeRef>> children;
    if (ref_type(ref) == NodeType::dense) {
      bytes = dense_bytes(b_, leaf, elem);
      if (bytes > room) fail(at(off), "dense node of " + std::to_string(bytes) + " bytes runs past the end of the pool");
      if (leaf) {
        const std::uint8_t* mask = dense_mask(pool_, ref);
        const std::uint64_t cells = std::uint64_t{d_} * d_;
        for (std::uint64_t i = 0; i < dense_mask_bytes(b_); ++i) {
          if (i * 8 >= cells ? mask[i] != 0 : (i * 8 + 8 > cells && (mask[i] >> (cells - i * 8)) != 0))
            fail(at(off), "dense leaf mask has bits beyond d*d cells");
        }
        const V* vals = dense_values<V>(pool_, ref, b_, true);
        for (std::uint32_t i = 0; i < cells; ++i) {
          if (mask_bit(mask, i)) {
            ++count;
            check_in_matrix(off, level, block_row, block_col, LocalCoord{std::uint8_t(i >> b_), std::uint8_t(i & (d_ - 1))});
          } else if (vals[i] != V(0)) {
            fail(at(off), "dense leaf holds a non-zero value in an absent cell " + std::to_string(i));
          }
        }
      } else {
        const NodeRef* refs = dense_values<NodeRef>(pool_, ref, b_, false);
        for (std::uint32_t i = 0; i < d_ * d_; ++i)
          if (refs[i] != null_ref) {
            ++count;
            children.push_back({LocalCoord{std::uint8_t(i >> b_), std::uint8_t(i & (d_ - 1))}, refs[i]});
          }
      }
      if (count == 0) fail(at(off), "dense node without entries");
    } else {
      std::memcpy(&count, pool_ + off, sizeof(count));
      if (count == 0 || count > d_ * d_) fail(at(off), "entry count " + std::to_string(count) + " outside [1, d*d]");
      const CooLayout64 l = checked_layout(off, room, coo_layout64(ref_type(ref), count, elem),
                                           coo_layout(ref_type(ref), count, elem), "sparse");
      bytes = l.bytes;
      const auto* coords = reinterpret_cast<const LocalCoord*>(pool_ + off + l.coord_offset);
      for (std::uint32_t i = 0; i < count; ++i) {
        if (coords[i].row >= d_ || coords[i].col >= d_) fail(at(off), "local coordinate not below d");
        if (i > 0 && !coord_less(coords[i - 1], coords[i]))
          fail(at(off), "coordinates not unique and row-major sorted at entry " + std::to_string(i));
      }
      // Padding and gaps are zero, so equal matrices have equal bytes.
      check_padding(off, l, count, sizeof(LocalCoord), elem);
      if (leaf) {
        for (std::uint32_t i = 0; i < count; ++i) check_in_matrix(off, level, block_row, block_col, coords[i]);
      } else {
        const auto* refs = reinterpret_cast<const NodeRef*>(pool_ + off + l.value_offset);
        for (std::uint32_t i = 0; i < count; ++i) {
          if (refs[i] == null_ref) fail(at(off), "sparse inner node holds a null child");
          children.push_back({coords[i], refs[i]});
        }
      }
    }
    const NodeChoice canonical = choose_node(count, b_, leaf, elem);
    if (canonical.type != ref_type(ref))
      fail(at(off), "type " + std::to_string(static_cast<int>(ref_type(ref))) + " for " + std::to_string(count) +
                        " entries; the dense/sparse rule gives " + std::to_string(static_cast<int>(canonical.type)));
    it->second.bytes = bytes;
    stats_.node_bytes += bytes;
    (leaf ? stats_.leaf : stats_.inner) += 1;
    switch (ref_type(ref)) {
      case NodeType::dense: ++stats_.dense; break;
      case NodeType::coo1: ++stats_.coo1; break;
      case NodeType::coo2: ++stats_.coo2; break;
      case NodeType::coo4: ++stats_.coo4; break;
      case NodeType::coow: break;  // counted in visit_coow, never reaches here
    }
    if (leaf) stats_.entries += count;
    std::uint64_t sub_entries = leaf ? count : 0, sub_bytes = bytes;
    for (auto [lc, child] : children) {
      const auto [e, by] = visit(child, level + 1, (block_row << b_) | lc.row, (block_col << b_) | lc.col);
      sub_entries += e;
      sub_bytes += by;
    }
    // In a wide pool, a level depth-2 sub-tree that one COOW node would hold in
    // no more bytes must be that node.
    if (wide_ && level + 2 == c_.shape.depth && sub_entries <= 0xFFFFFFFFull &&
        coow_layout64(sub_entries, sizeof(V)).bytes <= sub_bytes)
      fail(at(off), "sub-tree of " + std::to_string(sub_bytes) + " bytes where a COOW node would take no more");
    return {sub_entries, sub_bytes};
  }

  // A COOW node: 16-bit coordinates over the node's d^2 x d^2 block.
  std::uint64_t visit_coow(std::uint64_t off, std::uint64_t room, std::uint32_t level, index_t block_row,
                           index_t block_col) {
    if (!wide_) fail(at(off), "COOW node in a pool without the wide-node flag");
    if (level + 2 != c_.shape.depth) fail(at(off), "COOW node at level " + std::to_string(level) + ", not depth-2");
    std::uint32_t count = 0;
    std::memcpy(&count, pool_ + off, sizeof(count));
    const std::uint64_t cells = std::uint64_t{d_} * d_;
    if (count == 0 || count > cells * cells) fail(at(off), "COOW entry count " + std::to_string(count) + " out of range");
    // At d = 256 every u32 count passes the test above; only the bytes left bound it.
    const CooLayout64 l = checked_layout(off, room, coow_layout64(count, sizeof(V)), coow_layout(count, sizeof(V)), "COOW");
    const auto* coords = reinterpret_cast<const WideCoord*>(pool_ + off + l.coord_offset);
    std::map<std::pair<std::uint32_t, std::uint32_t>, std::uint32_t> leaves;
    for (std::uint32_t i = 0; i < count; ++i) {
      if (coords[i].row >= cells || coords[i].col >= cells) fail(at(off), "COOW coordinate not below d*d");
      if (i > 0 && !wide_less(coords[i - 1], coords[i]))
        fail(at(off), "COOW coordinates not unique and row-major sorted at entry " + std::to_string(i));
      const index_t r = (block_row << (2 * b_)) | coords[i].row, c = (block_col << (2 * b_)) | coords[i].col;
      if (r >= c_.shape.rows || c >= c_.shape.cols)
        fail(at(off), "entry (" + std::to_string(r) + ", " + std::to_string(c) + ") outside the " +
                          std::to_string(c_.shape.rows) + " x " + std::to_string(c_.shape.cols) + " matrix");
      ++leaves[{coords[i].row >> b_, coords[i].col >> b_}];
    }
    check_padding(off, l, count, sizeof(WideCoord), sizeof(V));
    std::uint64_t standard = choose_node(static_cast<std::uint32_t>(leaves.size()), b_, false, sizeof(NodeRef)).bytes;
    for (const auto& [block, n] : leaves) standard += choose_node(n, b_, true, sizeof(V)).bytes;
    if (l.bytes > standard)
      fail(at(off), "COOW node of " + std::to_string(l.bytes) + " bytes where the standard sub-tree takes " +
                        std::to_string(standard));
    ++stats_.coow;
    stats_.node_bytes += l.bytes;
    stats_.entries += count;
    coow_entries_ = count;
    return l.bytes;
  }

  // A sparse node's layout from a count read from the pool: sized in 64 bits
  // (the 32-bit layout wraps for counts near 2^32, and a wrapped size would
  // pass the bounds check) and checked against the bytes left in the pool.
  // Once it fits, the 32-bit layout that readers and GPU procedures use must
  // be the same (it is wherever the node fits a pool; checked, not assumed).
  CooLayout64 checked_layout(std::uint64_t off, std::uint64_t room, const CooLayout64& l, const CooLayout& l32,
                             const char* kind) const {
    if (l.bytes > room)
      fail(at(off), std::string(kind) + " node of " + std::to_string(l.bytes) + " bytes (" +
                        std::to_string(l.padded_count) + " padded entries) runs past the end of the pool (" +
                        std::to_string(room) + " bytes left)");
    if (!same_layout(l32, l)) fail(at(off), std::string(kind) + " node layout does not fit 32 bits");
    return l;
  }

  // Every byte of a sparse node after its count that is neither a coordinate
  // nor a value in use is zero, so equal matrices have equal bytes.
  void check_padding(std::uint64_t off, const CooLayout64& l, std::uint32_t count, std::uint32_t coord_bytes,
                     std::uint32_t elem_bytes) const {
    const std::uint64_t coords_end = l.coord_offset + std::uint64_t{count} * coord_bytes;
    const std::uint64_t values_end = l.value_offset + std::uint64_t{count} * elem_bytes;
    for (std::uint64_t i = 4; i < l.bytes; ++i) {
      const bool in_coords = i >= l.coord_offset && i < coords_end;
      const bool in_values = i >= l.value_offset && i < values_end;
      if (!in_coords && !in_values && pool_[off + i] != std::byte{0}) fail(at(off), "non-zero padding byte");
    }
  }

  void check_in_matrix(std::uint64_t off, std::uint32_t, index_t block_row, index_t block_col, LocalCoord lc) const {
    const index_t r = (block_row << b_) | lc.row, c = (block_col << b_) | lc.col;
    if (r >= c_.shape.rows || c >= c_.shape.cols)
      fail(at(off), "entry (" + std::to_string(r) + ", " + std::to_string(c) + ") outside the " +
                        std::to_string(c_.shape.rows) + " x " + std::to_string(c_.shape.cols) + " matrix");
  }

  void check_overlap() const {
    std::vector<std::pair<std::uint64_t, std::uint64_t>> spans;
    spans.reserve(seen_.size());
    for (const auto& [off, s] : seen_) spans.emplace_back(off, off + s.bytes);
    std::sort(spans.begin(), spans.end());
    for (std::size_t i = 1; i < spans.size(); ++i)
      if (spans[i].first < spans[i - 1].second) fail(at(spans[i].first), "overlaps the node before it");
  }

  // The nodes cover the pool from the header to its end: bytes no node
  // references (after the last node or between two) would let equal matrices
  // differ in their bytes and sizes (and in their files) and would hide data
  // behind valid ones. With no overlap (checked before), that is: the pool
  // ends where its last node ends and the nodes' bytes add up to it.
  void check_no_unreferenced_bytes() const {
    std::uint64_t end = sizeof(PoolHeader), covered = sizeof(PoolHeader);
    for (const auto& [off, s] : seen_) {
      end = std::max(end, off + s.bytes);
      covered += (s.bytes + node_alignment - 1) / node_alignment * node_alignment;  // the next node starts aligned
    }
    if (size_ > end)
      fail("pool", std::to_string(size_ - end) + " unreferenced bytes after the last node (from offset " +
                       std::to_string(end) + " to the end, " + std::to_string(size_) + ")");
    if (covered < (end + node_alignment - 1) / node_alignment * node_alignment)
      fail("pool", std::to_string(end - covered) + " unreferenced bytes between nodes (the nodes cover " +
                       std::to_string(covered) + " of the pool's " + std::to_string(size_) + " bytes)");
  }

  struct Seen {
    std::uint32_t level;
    NodeRef ref;
    std::uint64_t bytes;
  };
  const Content<V>& c_;
  const std::byte* pool_;
  std::uint64_t size_;
  std::uint32_t b_, d_;
  std::unordered_map<std::uint64_t, Seen> seen_;
  bool wide_ = false;
  std::uint64_t coow_entries_ = 0;
  PoolStats stats_;
};

}  // namespace

template <class V>
PoolStats validate(const Content<V>& content) {
  return Validator<V>(content).run();
}

template PoolStats validate(const Content<float>&);
template PoolStats validate(const Content<double>&);
template PoolStats validate(const Content<std::complex<float>>&);
template PoolStats validate(const Content<std::complex<double>>&);

}  // namespace hisparse
