#pragma once
// GPU sparse add: C = alpha·op(A) + beta·op(B), each op and scale from its
// operand's state, C a new device matrix with plain state. The same result as
// add_reference, bit for bit (structure, node types, values): a dual
// top-down traversal through the runtime, every output node allocated from
// one pool by an atomic bump allocator (seed 004 section 6). The pool is
// sized by a bound (the operands' pools together, half as much again with
// wide nodes); should that be short, which only a merge of wide sub-trees
// could make it, the traversal is repeated with twice the room. The result's
// pool is then cut to its exact size.
#include <cuda_runtime.h>

#include "hisparse/formats/device_matrix.hpp"
#include "hisparse/ops/context.hpp"
#include "hisparse/runtime/config.hpp"

namespace hisparse::ops {

struct AddOptions {
  runtime::Controller controller = runtime::Controller::persistent;
  // Slots of every runtime queue. 0: sized from the operands' pools, a
  // sixteenth of the bound that no queue can overflow first and, where a
  // queue runs full, the run repeated with all of it; a value bounds the
  // runtime's memory, and a traversal that needs more stops with
  // runtime::QueueOverflow.
  std::uint32_t queue_capacity = 0;
  // The result pool of the first run. 0: the operands' pools together (1.5x
  // with wide nodes), which suffices but where wide sub-trees change form. A
  // pool found short is doubled and the run repeated, up to the format's
  // 4 GiB limit (then LimitError). A caller who knows the result's size can
  // pass it; tests pass a small one to exercise the reruns.
  std::uint64_t initial_pool_bytes = 0;
  // The largest result pool the add may allocate: a result that needs more is
  // a LimitError, with the operands and the device as they were. 0: the
  // format's limit (max_pool_bytes, 4 GiB).
  std::uint64_t max_pool_bytes = 0;
};

// Throws hisparse::Error when op(A) and op(B) differ in shape or the node
// sizes differ, LimitError when the result needs more than a 4 GiB pool
// (the host writer's limit, max_pool_bytes). NaN values compare as NaN,
// not bit for bit: the GPU's arithmetic returns a canonical NaN where the
// host's keeps a payload.
//
// On a context: the operands must be ready in the context's stream order.
// Synchronises the stream once, after the traversal, to read the result's
// size (and again only where a pool was short or a queue ran full: the run
// is repeated); returns with the result's last writes (header, the pool cut
// to size) queued on the stream. Its runtime, counters and queues stay in the
// context for the next call; all memory comes from the context's allocator.
template <class V>
DeviceMatrix<V> add(Context& ctx, const DeviceMatrix<V>& a, const DeviceMatrix<V>& b, V alpha = V(1),
                    V beta = V(1), AddOptions options = {});

// The one-operand form: C = alpha·op(A) written out with plain state (A's
// transposition and scale applied): the add of A and an empty matrix, each
// value alpha·scale·a + 0 (so -0 becomes +0, as in materialize_reference).
// materialize's path for a depth-2 matrix with wide nodes, whose flat
// kernels sort it a block row a block. The same synchronisation as the add.
template <class V>
DeviceMatrix<V> add(Context& ctx, const DeviceMatrix<V>& a, V alpha, AddOptions options = {});

// The same on a call-local context (cudaMalloc'd memory, nothing cached),
// synchronised before it returns.
template <class V>
DeviceMatrix<V> add(const DeviceMatrix<V>& a, const DeviceMatrix<V>& b, V alpha = V(1), V beta = V(1),
                    AddOptions options = {}, cudaStream_t stream = nullptr);

}  // namespace hisparse::ops
