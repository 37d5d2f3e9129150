#pragma once
// Node types, child references and the byte layout of every node kind
// (docs/format.md is the normative description; this file implements it).
//
// A pool is one 16-byte aligned byte array. Its first 16 bytes are the pool
// header; every node starts at a multiple of 16 after it, so the low 4 bits of
// a node's offset are free and carry the node type. Offset 0 is the header,
// never a node, which makes reference 0 a safe "null child".
#include <cstddef>
#include <cstdint>

#include "hisparse/formats/config.hpp"

namespace hisparse {

// Node types occupy the low 4 bits of a reference. 4..15 are free for new
// node kinds (a local CSR node, a wide-coordinate node for scattered entries):
// the layout code below is the only place that must learn about them, and
// ops that lack a specialised procedure fall back to for_each_entry.
enum class NodeType : std::uint8_t { dense = 0, coo1 = 1, coo2 = 2, coo4 = 3, coow = 4 };
inline constexpr std::uint32_t node_type_count = 5;

using NodeRef = std::uint32_t;
inline constexpr NodeRef null_ref = 0;
inline constexpr std::uint32_t node_alignment = 16;
inline constexpr std::uint64_t max_pool_bytes = (std::uint64_t{1} << 32) - node_alignment;

HISPARSE_HD constexpr NodeType ref_type(NodeRef r) { return static_cast<NodeType>(r & 0xFu); }
HISPARSE_HD constexpr std::uint32_t ref_offset(NodeRef r) { return r & ~0xFu; }
HISPARSE_HD constexpr NodeRef make_ref(std::uint64_t offset, NodeType t) {
  return static_cast<NodeRef>(offset) | static_cast<NodeRef>(t);
}

// Packed local coordinate of an entry (leaf) or child (inner node): one byte
// each, so d <= 256. Sparse nodes keep them sorted row-major and unique.
struct LocalCoord {
  std::uint8_t row;
  std::uint8_t col;
};
static_assert(sizeof(LocalCoord) == 2);

HISPARSE_HD constexpr bool coord_less(LocalCoord a, LocalCoord b) {
  return a.row != b.row ? a.row < b.row : a.col < b.col;
}

// The pool header: the first 16 bytes of every pool.
struct PoolHeader {
  std::uint32_t magic;        // pool_magic
  NodeRef root;               // null for a matrix without entries
  std::uint8_t log2_node_size;
  std::uint8_t depth;
  std::uint8_t value_bytes;   // sizeof(V) of the leaves
  std::uint8_t flags;         // pool_flag_wide: COOW nodes allowed (and canonical)
  std::uint32_t reserved1;
};
inline constexpr std::uint8_t pool_flag_wide = 1;
static_assert(sizeof(PoolHeader) == node_alignment);
inline constexpr std::uint32_t pool_magic = 0x4C505348u;  // "HSPL"

HISPARSE_HD constexpr std::uint64_t round_up(std::uint64_t v, std::uint64_t a) { return (v + a - 1) / a * a; }

// ---- COOX layout -----------------------------------------------------------
// [u32 count][pad][count_padded x LocalCoord][pad][count_padded x E][pad to 16]
// X entries are padded so that one thread loads X coordinates and X values
// with one vector access each; the arrays are aligned for exactly that.
HISPARSE_HD constexpr std::uint32_t coo_width(NodeType t) {
  return t == NodeType::coo1 ? 1u : t == NodeType::coo2 ? 2u : 4u;
}

struct CooLayout {
  std::uint32_t padded_count;
  std::uint32_t coord_offset;
  std::uint32_t value_offset;
  std::uint32_t bytes;
};

HISPARSE_HD constexpr CooLayout coo_layout(NodeType t, std::uint32_t count, std::uint32_t elem_bytes) {
  const std::uint32_t x = coo_width(t);
  CooLayout l{};
  l.padded_count = static_cast<std::uint32_t>(round_up(count, x));
  l.coord_offset = x == 4 ? 8u : 4u;
  std::uint32_t value_align = x * elem_bytes < 16u ? x * elem_bytes : 16u;
  if (value_align < elem_bytes) value_align = elem_bytes;
  l.value_offset = static_cast<std::uint32_t>(round_up(l.coord_offset + 2u * l.padded_count, value_align));
  l.bytes = static_cast<std::uint32_t>(round_up(l.value_offset + std::uint64_t{l.padded_count} * elem_bytes, node_alignment));
  return l;
}

// ---- COOW layout (wide COO, for scattered entries) -------------------------
// Only at level depth-2, in place of an inner node and all its leaves, in
// pools whose header has pool_flag_wide. Coordinates are 16 bits each, local
// to the node's d^2 x d^2 block: row16 = row digit (depth-2) * d + row digit
// (depth-1). [u32 count][pad to 8][count_padded x WideCoord][pad][count_padded
// x V][pad to 16], padded to 4 entries like COO4.
struct WideCoord {
  std::uint16_t row;
  std::uint16_t col;
};
static_assert(sizeof(WideCoord) == 4);

HISPARSE_HD constexpr bool wide_less(WideCoord a, WideCoord b) {
  return a.row != b.row ? a.row < b.row : a.col < b.col;
}

HISPARSE_HD constexpr CooLayout coow_layout(std::uint32_t count, std::uint32_t elem_bytes) {
  CooLayout l{};
  l.padded_count = static_cast<std::uint32_t>(round_up(count, 4));
  l.coord_offset = 8;
  std::uint32_t value_align = 4 * elem_bytes < 16u ? 4 * elem_bytes : 16u;
  if (value_align < elem_bytes) value_align = elem_bytes;
  l.value_offset = static_cast<std::uint32_t>(round_up(8 + 4ull * l.padded_count, value_align));
  l.bytes = static_cast<std::uint32_t>(round_up(l.value_offset + std::uint64_t{l.padded_count} * elem_bytes, node_alignment));
  return l;
}

// ---- Layouts in 64 bits, for counts read from an untrusted pool ------------
// The same formulas as coo_layout and coow_layout without any 32-bit step: a
// count near 2^32 makes the 32-bit layouts wrap to a small size, so a reader
// that has not yet bounded the count (the validator) sizes the node with these
// and checks the result against the bytes left in the pool. Wherever the node
// fits a pool (bytes <= max_pool_bytes), they equal the 32-bit layouts, which
// the GPU procedures keep using.
struct CooLayout64 {
  std::uint64_t padded_count;
  std::uint64_t coord_offset;
  std::uint64_t value_offset;
  std::uint64_t bytes;
};

HISPARSE_HD constexpr CooLayout64 sparse_layout64(std::uint64_t x, std::uint64_t coord_offset, std::uint64_t coord_bytes,
                                                  std::uint64_t count, std::uint64_t elem_bytes) {
  CooLayout64 l{};
  l.padded_count = round_up(count, x);
  l.coord_offset = coord_offset;
  std::uint64_t value_align = x * elem_bytes < 16u ? x * elem_bytes : 16u;
  if (value_align < elem_bytes) value_align = elem_bytes;
  l.value_offset = round_up(coord_offset + coord_bytes * l.padded_count, value_align);
  l.bytes = round_up(l.value_offset + l.padded_count * elem_bytes, node_alignment);
  return l;
}

HISPARSE_HD constexpr CooLayout64 coo_layout64(NodeType t, std::uint64_t count, std::uint64_t elem_bytes) {
  const std::uint32_t x = coo_width(t);
  return sparse_layout64(x, x == 4 ? 8u : 4u, sizeof(LocalCoord), count, elem_bytes);
}

HISPARSE_HD constexpr CooLayout64 coow_layout64(std::uint64_t count, std::uint64_t elem_bytes) {
  return sparse_layout64(4, 8, sizeof(WideCoord), count, elem_bytes);
}

HISPARSE_HD constexpr bool same_layout(const CooLayout& a, const CooLayout64& b) {
  return a.padded_count == b.padded_count && a.coord_offset == b.coord_offset && a.value_offset == b.value_offset &&
         a.bytes == b.bytes;
}

// ---- Dense layout ----------------------------------------------------------
// Inner: d*d child references, row-major, null_ref for an empty block.
// Leaf:  a d*d occupancy bitmask (bit i of byte i/8 = entry i present), padded
//        to 16 bytes, then d*d values row-major. The mask keeps explicit zeros
//        apart from absent entries, so conversion round-trips exactly.
HISPARSE_HD constexpr std::uint32_t dense_mask_bytes(std::uint32_t log2_d) {
  return static_cast<std::uint32_t>(round_up(((std::uint64_t{1} << (2 * log2_d)) + 7) / 8, node_alignment));
}

HISPARSE_HD constexpr std::uint64_t dense_bytes(std::uint32_t log2_d, bool leaf, std::uint32_t elem_bytes) {
  const std::uint64_t cells = std::uint64_t{1} << (2 * log2_d);
  return round_up((leaf ? dense_mask_bytes(log2_d) : 0u) + cells * elem_bytes, node_alignment);
}

// The type a node with `count` entries gets: COO1/COO2/COO4 by count (seed 004
// section 7), dense where that takes no more bytes (ties go dense: it is the
// cheaper node to process).
struct NodeChoice {
  NodeType type;
  std::uint64_t bytes;
};

HISPARSE_HD constexpr NodeChoice choose_node(std::uint32_t count, std::uint32_t log2_d, bool leaf,
                                             std::uint32_t elem_bytes) {
  const NodeType sparse = count == 1 ? NodeType::coo1 : count == 2 ? NodeType::coo2 : NodeType::coo4;
  const std::uint64_t sparse_bytes = coo_layout(sparse, count, elem_bytes).bytes;
  const std::uint64_t dbytes = dense_bytes(log2_d, leaf, elem_bytes);
  if (dbytes <= sparse_bytes) return {NodeType::dense, dbytes};
  return {sparse, sparse_bytes};
}

// Depth of the tree for a matrix: the smallest L >= 1 with d^L >= max(rows, cols).
constexpr std::uint32_t tree_depth(std::uint64_t rows, std::uint64_t cols, std::uint32_t log2_d) {
  const std::uint64_t n = rows > cols ? rows : cols;
  std::uint32_t depth = 1;
  while (depth * log2_d < 64 && (std::uint64_t{1} << (depth * log2_d)) < n) ++depth;
  return depth;
}

}  // namespace hisparse
