#include "hisparse/formats/matrix.hpp"

#include <bit>

namespace hisparse {

const char* value_type_name(ValueType t) {
  switch (t) {
    case ValueType::f32: return "f32";
    case ValueType::f64: return "f64";
    case ValueType::c64: return "c64";
    case ValueType::c128: return "c128";
  }
  return "unknown";
}

std::uint32_t checked_log2_node_size(std::uint32_t node_size) {
  if (node_size < min_node_size || node_size > max_node_size || !std::has_single_bit(node_size))
    throw Error("node size " + std::to_string(node_size) + " is not a power of two in [2, 256]");
  return static_cast<std::uint32_t>(std::countr_zero(node_size));
}

Shape Shape::make(index_t rows, index_t cols, std::uint32_t node_size) {
  if (rows > max_dimension || cols > max_dimension)
    throw LimitError("matrix " + std::to_string(rows) + " x " + std::to_string(cols) +
                     " exceeds the dimension limit 2^48");
  Shape s;
  s.rows = rows;
  s.cols = cols;
  s.log2_node_size = checked_log2_node_size(node_size);
  s.depth = tree_depth(rows, cols, s.log2_node_size);
  return s;
}

}  // namespace hisparse
