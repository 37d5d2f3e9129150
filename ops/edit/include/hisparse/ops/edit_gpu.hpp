#pragma once
// The batch edit on the GPU (docs/ops.md, "Editing on the GPU"): a COO batch
// of updates in device memory, applied to a DeviceMatrix as a new version
// that shares every untouched sub-tree with the original (persistent), or to
// the matrix itself (in place). The semantics are the host edit's
// (edit.hpp): set / add / remove, duplicates (set: the last counts; add:
// summed in input order), positions logical (those of op(A)), a transposed
// matrix stays transposed, set and add on a scaled matrix materialize it
// first (a new family then), node size and format (wide or standard) are
// A's. The result's own nodes are the builder's for the same entries: its
// download() is byte for byte the host edit()'s pool.
//
// How: the batch is sorted by tree position (CUB). Its unit of rebuilding is
// the level depth-2 sub-tree (the one a COOW node replaces): each touched one
// is extracted, merged with its updates and built again by the GPU builder
// (convert_gpu.hpp), and the inner nodes above are rewritten on the touched
// paths only, each pointing at its untouched children where they are. The
// new nodes are appended to the family's DeviceArena (device_arena.hpp).
//
// Synchronisation: runs on `stream` and synchronises it a few times (sizes
// are needed on the host to allocate); returns when the result is complete.
// The update arrays must be ready on `stream` when called.
//
// Errors (hisparse::Error / LimitError, nothing changed, the arena holds no
// new version): the updates' dimensions differ from op(A)'s, an entry outside
// the matrix (its index and position named), a null array, more than 2^32 - 1
// updates; a result that does not fit the family's arena (edit_version:
// LimitError; edit_in_place compacts instead).
#include <cuda_runtime.h>

#include <cstdint>

#include "hisparse/formats/device_arena.hpp"
#include "hisparse/ops/convert_gpu.hpp"
#include "hisparse/ops/edit.hpp"

namespace hisparse::ops {

// A as the first version of a new family on the device: its pool copied once
// into a DeviceArena of `capacity` bytes (0: twice the pool, at least 16 MiB,
// at most the 4 GiB the references address). A version is returned as it is
// (another handle on the same family).
template <class V>
DeviceMatrix<V> versioned(const DeviceMatrix<V>& a, std::uint64_t capacity = 0, cudaStream_t stream = nullptr);

// A persistent edit: op(A) edited by `updates` as a new version in A's family
// (a matrix in no family is put in a new one first, which then shares nothing
// with A: call versioned() on it once). A and every other version stay
// unchanged. Only the touched paths are written. stats: inserted, updated and
// removed as the host's; nodes_rewritten counts the depth-2 sub-trees built
// again and the inner nodes written, nodes_shared the untouched children those
// inner nodes refer to where they are, bytes_written what was appended.
template <class V, class I>
DeviceMatrix<V> edit_version(const DeviceMatrix<V>& a, const DeviceCooView<V, I>& updates, EditMode mode,
                             cudaStream_t stream = nullptr, EditStats* stats = nullptr);

// The same edit into `a`: a becomes the edited matrix, a version in its family
// (a matrix in no family first becomes one, versioned(a)); the nodes only the
// old `a` reached stay in the arena as dead bytes until the family goes. When
// the arena has no room left, `a` is compacted (ops::copy, its own nodes) into
// a new family with room for as much again, and the edit is appended there.
template <class V, class I>
void edit_in_place(DeviceMatrix<V>& a, const DeviceCooView<V, I>& updates, EditMode mode, cudaStream_t stream = nullptr,
                   EditStats* stats = nullptr);

// The same two on a context: its stream, its allocator for every work array
// and for the sub-trees built again (whose default pool keeps what it has
// mapped, so an edit after the first maps nothing: perf-log E10), and its
// materialize and copy where those run. The family's arena is allocated as
// in the forms above (versioned).
template <class V, class I>
DeviceMatrix<V> edit_version(Context& ctx, const DeviceMatrix<V>& a, const DeviceCooView<V, I>& updates, EditMode mode,
                             EditStats* stats = nullptr);

template <class V, class I>
void edit_in_place(Context& ctx, DeviceMatrix<V>& a, const DeviceCooView<V, I>& updates, EditMode mode,
                   EditStats* stats = nullptr);

}  // namespace hisparse::ops
