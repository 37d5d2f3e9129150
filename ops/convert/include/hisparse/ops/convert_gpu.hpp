#pragma once
// Format conversion on the GPU, from and to arrays already in device memory.
//
//  build_device_matrix(csr | coo):  device CSR or COO arrays -> DeviceMatrix.
//      The same rules as the host builder (build_matrix): duplicates summed in
//      input order, explicit zeros kept, the same node types (wide nodes by the
//      same rule unless options.wide_nodes is false). The pool is byte for
//      byte the host builder's for the same input (tests check it).
//  to_device_csr / to_device_coo:   DeviceMatrix -> the logical matrix
//      op(A)·scale as CSR or COO device arrays, sorted row-major, exactly as
//      the host's to_csr / to_coo.
//
// Index arrays are signed, as cuSPARSE, CuPy and PyTorch keep them:
// std::int32_t or std::int64_t. Value types: float, double.
//
// Synchronisation: both directions run on `stream` (a context's) and
// synchronise it a few times (the sizes of the skeleton's levels and of the
// pool are needed on the host to allocate); they return when the result is
// complete. The caller's input arrays must be ready on `stream` (or earlier)
// when called.
//
// Memory: on a context (the forms that take a Context&), the result (the
// pool, or the library-allocated arrays) and every work array come from the
// context's allocator (with the synchronous allocator, the work arrays as
// below); its default pool keeps what it has mapped, so that a conversion
// after the first maps nothing (perf-log C44). The forms that take a
// cudaStream_t allocate the result with cudaMalloc, and the work arrays as
// convert_work_bound says.
//
// Errors: bad input (row pointers not starting at 0, decreasing or not ending
// at nnz; an index outside the matrix; a matrix whose pool would pass the 4 GiB
// limit, or whose conversion does not fit in device memory) throws
// hisparse::Error / LimitError naming what and where, before any result
// exists; nothing the call allocated is left behind and the device stays
// usable. The work-memory check is an estimate: on a context, an allocation
// can still fail later (the pool's unused memory in pieces too small, or an
// allocator of the caller's, which is not checked), which is a clean
// hisparse::Error that leaves nothing allocated; caller arrays of an
// extraction may then be partly written.
// Work memory: the peak is reported in ConvertStats and bounded by
// convert_work_bound; without a context up to 256 MiB of it stays mapped
// between calls, on one with the default allocator all of it stays in that
// pool (release_work_memory).
#include <cuda_runtime.h>

#include <cstdint>

#include "hisparse/formats/builder.hpp"
#include "hisparse/formats/device_matrix.hpp"
#include "hisparse/ops/context.hpp"

namespace hisparse::ops {

// Caller-owned device arrays (not copied, not freed).
template <class V, class I>
struct DeviceCsrView {
  index_t rows = 0;
  index_t cols = 0;
  std::uint64_t nnz = 0;
  const I* row_ptr = nullptr;  // rows + 1 entries
  const I* col = nullptr;      // nnz entries, any order within a row
  const V* val = nullptr;      // nnz entries
};

template <class V, class I>
struct DeviceCooView {
  index_t rows = 0;
  index_t cols = 0;
  std::uint64_t nnz = 0;
  const I* row = nullptr;  // nnz entries each, any order, duplicates allowed
  const I* col = nullptr;
  const V* val = nullptr;
};

// Library-allocated results of to_device_csr / to_device_coo (DeviceBytes
// frees them; `view()` hands out the pointers).
template <class V, class I>
struct DeviceCsr {
  index_t rows = 0;
  index_t cols = 0;
  std::uint64_t nnz = 0;
  DeviceBytes row_ptr, col, val;
  [[nodiscard]] DeviceCsrView<V, I> view() const {
    return {rows, cols, nnz, row_ptr.as<const I>(), col.as<const I>(), val.as<const V>()};
  }
};

template <class V, class I>
struct DeviceCoo {
  index_t rows = 0;
  index_t cols = 0;
  std::uint64_t nnz = 0;
  DeviceBytes row, col, val;
  [[nodiscard]] DeviceCooView<V, I> view() const {
    return {rows, cols, nnz, row.as<const I>(), col.as<const I>(), val.as<const V>()};
  }
};

// What a conversion did and held.
struct ConvertStats {
  std::uint64_t input_entries = 0;    // entries read (duplicates included)
  std::uint64_t entries = 0;          // entries of the result
  std::uint64_t leaves = 0;           // leaf blocks holding entries (build)
  std::uint64_t pool_bytes = 0;       // the result's pool (build) or the source's (extract)
  std::uint64_t peak_work_bytes = 0;  // device memory held at once besides the input and the result
  // CSR input: block rows that were sorted (by a thread block, or cut into
  // tasks where long) because their leaf columns are too many to be found in
  // CSR order by a warp (docs/ops.md); 0 for COO input.
  std::uint64_t sorted_block_rows = 0;
  // CSR input: block rows of a scattered matrix whose entries all lie under
  // COOW nodes, summed and written to them without a sort (docs/ops.md).
  std::uint64_t coow_block_rows = 0;
};

// The work memory bound: a conversion of n input entries into or out of a
// tree of the given depth never holds more than convert_work_bound(n, depth,
// sizeof(V)) bytes of work arrays at once (sort buffers and CUB's temporary
// storage included), besides its input and its result; arrays under 64 MiB
// come from a memory pool of the call's own, which keeps their freed blocks
// for reuse until the call returns (docs/ops.md); on a context, every array
// from its allocator. Before anything is allocated the bound is checked
// against the free device memory (LimitError; on a context with the default
// allocator the pool's unused memory counts as free; with an allocator of the
// caller's the check is skipped and its own failure is the error). Sorting
// takes 36 bytes per entry (44 for a CSR, whose rows are expanded first), the
// distinct entries and their leaves up to 80 + 2·sizeof(V) together, and
// every level of the skeleton up to 24 bytes per entry (docs/ops.md,
// "Conversion on the GPU", has the measured peaks).
constexpr std::uint64_t convert_work_bound(std::uint64_t entries, std::uint32_t depth, std::uint64_t value_bytes) {
  return entries * (80 + 2 * value_bytes + 24 * std::uint64_t{depth}) + (std::uint64_t{1} << 20);
}

template <class V, class I>
DeviceMatrix<V> build_device_matrix(const DeviceCsrView<V, I>& csr, const BuildOptions& options = {},
                                    cudaStream_t stream = nullptr, ConvertStats* stats = nullptr);

template <class V, class I>
DeviceMatrix<V> build_device_matrix(const DeviceCooView<V, I>& coo, const BuildOptions& options = {},
                                    cudaStream_t stream = nullptr, ConvertStats* stats = nullptr);

// Into caller memory: row_ptr holds a.rows() + 1 entries, col and val a.nnz().
template <class V, class I>
void to_device_csr(const DeviceMatrix<V>& a, I* row_ptr, I* col, V* val, cudaStream_t stream = nullptr,
                   ConvertStats* stats = nullptr);

// Into caller memory: row, col and val hold a.nnz() entries each.
template <class V, class I>
void to_device_coo(const DeviceMatrix<V>& a, I* row, I* col, V* val, cudaStream_t stream = nullptr,
                   ConvertStats* stats = nullptr);

// Where each logical entry keeps its value: row, col and pos hold a.nnz()
// entries, in to_device_coo's order (row-major in op(A)), and the entry's
// value is reinterpret_cast<const V*>(a.pool())[pos[i]], before the matrix's
// scale. For writing values in place, or for pairing the entries of
// matrices of one structure (ops::AddPlan). The same synchronisation, errors
// and work memory as to_device_coo.
template <class V, class I>
void to_device_coo_positions(const DeviceMatrix<V>& a, I* row, I* col, std::uint32_t* pos,
                             cudaStream_t stream = nullptr, ConvertStats* stats = nullptr);

// Library-allocated forms of to_device_csr and to_device_coo.
template <class V, class I>
DeviceCsr<V, I> to_device_csr(const DeviceMatrix<V>& a, cudaStream_t stream = nullptr, ConvertStats* stats = nullptr);

template <class V, class I>
DeviceCoo<V, I> to_device_coo(const DeviceMatrix<V>& a, cudaStream_t stream = nullptr, ConvertStats* stats = nullptr);

// The same on a context: its stream, its allocator (above). A matrix built
// through a context returns its pool to the context's allocator on the
// context's stream when destroyed (docs/ops.md, "Contexts, streams and memory").
template <class V, class I>
DeviceMatrix<V> build_device_matrix(Context& ctx, const DeviceCsrView<V, I>& csr, const BuildOptions& options = {},
                                    ConvertStats* stats = nullptr);

template <class V, class I>
DeviceMatrix<V> build_device_matrix(Context& ctx, const DeviceCooView<V, I>& coo, const BuildOptions& options = {},
                                    ConvertStats* stats = nullptr);

template <class V, class I>
void to_device_csr(Context& ctx, const DeviceMatrix<V>& a, I* row_ptr, I* col, V* val, ConvertStats* stats = nullptr);

template <class V, class I>
void to_device_coo(Context& ctx, const DeviceMatrix<V>& a, I* row, I* col, V* val, ConvertStats* stats = nullptr);

template <class V, class I>
void to_device_coo_positions(Context& ctx, const DeviceMatrix<V>& a, I* row, I* col, std::uint32_t* pos,
                             ConvertStats* stats = nullptr);

template <class V, class I>
DeviceCsr<V, I> to_device_csr(Context& ctx, const DeviceMatrix<V>& a, ConvertStats* stats = nullptr);

template <class V, class I>
DeviceCoo<V, I> to_device_coo(Context& ctx, const DeviceMatrix<V>& a, ConvertStats* stats = nullptr);

// GPU conversions and edits without a context take their work arrays from a
// memory pool of the process (one per device) that keeps up to 256 MiB mapped
// between calls, so that the next call needs no new mappings (a conversion
// that would not fit gives them back itself before it checks); on a context
// with the default allocator they come from the device's stream-ordered pool
// (runtime::stream_pool_allocator), which keeps everything freed into it: the
// largest call's work arrays and results, until trimmed. This destroys the
// current device's work pool, its memory going back to the device, and trims
// the stream-ordered pool to what is in use (after synchronising the device;
// where a context has made that pool); the next call makes a new work pool. Call it with no conversion or edit in
// flight on the device: for a caller that needs the memory elsewhere,
// measures free memory, or is about to call cudaDeviceReset (which would
// leave the pool destroyed under us).
void release_work_memory();

}  // namespace hisparse::ops
