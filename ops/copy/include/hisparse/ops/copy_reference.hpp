#pragma once
// Host reference copies.
//  copy_reference:        a deep copy: new content with identical bytes, same
//                         state (a version of a family: its own nodes,
//                         compacted, in a pool of their own).
//  materialize_reference: the state written into the content: the physical
//                         transpose and scale, state reset to (false, 1).
#include "hisparse/formats/matrix.hpp"

namespace hisparse::ops {

template <class V>
Matrix<V> copy_reference(const Matrix<V>& a);

template <class V>
Matrix<V> materialize_reference(const Matrix<V>& a);

}  // namespace hisparse::ops
