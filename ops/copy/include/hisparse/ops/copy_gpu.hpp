#pragma once
// GPU copies of a device matrix.
//
//  copy(a):               a deep copy. By default one device-to-device copy of
//                         the pool (references are offsets, so a pool is
//                         position independent): the fastest possible copy.
//                         With `rebuild`, the tree is walked through the runtime
//                         and every node is allocated anew from a fresh pool
//                         (seed 004 section 6's allocator): the general path,
//                         which also drops unreachable bytes.
//  materialize(a):        the state written into the content on the GPU: each
//                         node transposed in place of the flag (sparse nodes
//                         re-sorted by a stable per-node counting sort), leaf
//                         values scaled; the result's state is (false, 1).
//                         A depth-2 matrix with wide nodes (one sub-tree:
//                         the runtime would give it to one warp) goes through
//                         the one-operand add (add_gpu.hpp) instead, whose
//                         flat kernels take a block row a thread block; the
//                         options' controller and queues do not apply there.
#include <cuda_runtime.h>

#include "hisparse/formats/device_matrix.hpp"
#include "hisparse/ops/context.hpp"
#include "hisparse/runtime/config.hpp"

namespace hisparse::ops {

struct CopyOptions {
  bool rebuild = false;
  runtime::Controller controller = runtime::Controller::persistent;
  // Slots of every runtime queue when rebuilding. 0: sized from the source
  // pool, a sixteenth of the bound that no queue can overflow first and, where
  // a queue runs full, the walk repeated with all of it; a value bounds the
  // runtime's memory, and a traversal that needs more stops with
  // runtime::QueueOverflow.
  std::uint32_t queue_capacity = 0;
};

// On a context: `a` must be ready in the context's stream order. The pool
// copy does not synchronise; rebuild and materialize synchronise the stream
// once, after the walk (its counters are checked on the host), and return
// with the header's write queued. Memory from the context's allocator; the
// rebuilding runtime stays in the context.
template <class V>
DeviceMatrix<V> copy(Context& ctx, const DeviceMatrix<V>& a, CopyOptions options = {});
template <class V>
DeviceMatrix<V> materialize(Context& ctx, const DeviceMatrix<V>& a, CopyOptions options = {});

// The same on a call-local context (cudaMalloc'd memory, nothing cached),
// synchronised before they return.
template <class V>
DeviceMatrix<V> copy(const DeviceMatrix<V>& a, CopyOptions options = {}, cudaStream_t stream = nullptr);

template <class V>
DeviceMatrix<V> materialize(const DeviceMatrix<V>& a, CopyOptions options = {}, cudaStream_t stream = nullptr);

}  // namespace hisparse::ops
