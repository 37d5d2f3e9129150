#pragma once
// Public entry point of the GPU SpMV: y = alpha * op(A) * x + beta * y on
// device vectors, op and scale from the DeviceMatrix's state at call time.
//
// GpuSpmv is a reusable plan. With reuse_traversal (the default) building it
// walks the hierarchy once, a level at a time, and lists the leaves per bin
// (then output tiles or riders); every call runs straight from those lists,
// paying the traversal never again (iterative solvers). Without it, every
// call is a full runtime traversal under the chosen controller (seed 004).
// Plain C++: host code compiled without nvcc can use it.
#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <memory>

#include "hisparse/formats/device_matrix.hpp"
#include "hisparse/ops/context.hpp"
#include "hisparse/runtime/config.hpp"

namespace hisparse::ops {

// SpMV^T of wide (COOW) nodes takes them in chunks of this many stored
// entries, a thread block of a quarter as many threads each; the plan's
// column order (SpmvOptions::wide_column_order) sorts each chunk. 1024: a
// block waits at its barrier for its slowest gather, and 4096-entry chunks
// in blocks of 1024 threads ran R-MAT 2^22's SpMV^T 31-34% slower (perf-log 28).
inline constexpr std::uint32_t spmv_wide_chunk_entries = 1024;

struct SpmvOptions {
  // The fastest measured for SpMV's traversal (docs/bench/h100-controllers.md:
  // geometric mean over four families 0.85 ms against persistent 0.94, tail
  // 1.19, dynamic parallelism 1.40): the persistent megakernel carries the
  // registers of SpMV's hungriest procedure. The copy's default stays
  // persistent, which is fastest there.
  runtime::Controller controller = runtime::Controller::host_loop;
  bool reuse_traversal = true;
  // With the reused traversal: small leaves of a large leaf's output block
  // summed in that leaf's shared accumulator and flushed with it (docs/ops.md,
  // "Riders"). automatic: where they carry at least 1/32 of the entries and
  // the large leaves alone fill the GPU's warp slots (on a small matrix they
  // would put on a few warps what idle ones do side by side); always: wherever
  // a small leaf can ride (tests); never: to measure what they bring.
  enum class Riders { automatic, always, never };
  Riders riders = Riders::automatic;
  // With the reused traversal, where A has wide (COOW) nodes: the plan keeps
  // the column order of each chunk of spmv_wide_chunk_entries (2 bytes per wide entry, built at
  // plan time), so that SpMV^T sums a column's products in registers as SpMV
  // does a row's (docs/ops.md, "Wide nodes in SpMV^T"). false: no extra
  // memory; SpMV^T then sums in a shared accumulator of the node's d^2
  // columns where it fits in 64 KiB (f32 up to d = 128, f64 up to 64), or
  // adds one atomic per entry.
  bool wide_column_order = true;
  // With the reused traversal: the standard leaves summed by output tiles
  // (docs/ops.md, "Output tiles"): each output written once, no atomics into
  // y. automatic: where the leaves fill their units (128 entries each) at
  // least a quarter on average (a scattered standard-format matrix of one-
  // and two-entry leaves ran 4x slower in tiles than in the leaf bins);
  // always: wherever the shape allows (tests); never: the leaf bins with
  // atomics (measurement).
  enum class Tiles { automatic, always, never };
  Tiles tiles = Tiles::automatic;
  // Without the reused traversal: every call records where the runtime's
  // time went (RuntimeConfig::profile), read with last_run().profile.
  bool profile = false;
  // Without the reused traversal: slots of every runtime queue (rounded up to
  // a power of two; a plan runs no traversal). 0: sized from A's pool so that
  // no queue can overflow, in two steps: the runtime starts with a sixteenth
  // of that and a call that fills a queue runs again with all of it (saving
  // y first where beta != 0). A smaller value bounds the runtime's memory; a
  // traversal that needs more stops with runtime::QueueOverflow, and A, y and
  // the device stay usable.
  std::uint32_t queue_capacity = 0;
  // With the reused traversal: what the plan prepares when it is built.
  // current: the part for op(A) as A is then (A, or A^T when A is
  // transposed); the first call in the other orientation prepares that part
  // (on the plan's stream, where its calls run: it synchronises that stream
  // and allocates; inside a stream capture it throws instead). A plan used
  // in one orientation (CG, PageRank) pays half (perf-log R8). both: A's
  // and A^T's parts at once, for a plan that is captured into graphs in both
  // orientations (BiCG, LSQR).
  enum class Orientations { current, both };
  Orientations orientations = Orientations::current;
};

struct SpmvPlanStats {
  std::array<std::uint64_t, 5> leaves{};  // items: COO1, small (<= 32), large, dense (1024-cell chunks), wide (128-entry chunks)
  std::array<bool, 2> prepared{};          // the plan's parts for A and A^T built (SpmvOptions::orientations); the
                                           // per-orientation fields below stay 0 until their part is
  std::array<std::uint64_t, 2> riders{};   // small leaves summed with a large leaf of their output block: A, A^T
  std::uint64_t wide_order_bytes = 0;      // device memory of the wide nodes' column order (0: none)
  std::uint64_t wide_column_runs = 0;      // its runs of equal columns per chunk (spmv_wide_chunk_entries): SpMV^T's atomics before the warp merge
  std::uint64_t wide_rows_bytes = 0;       // device memory of the wide nodes' row windows (SpMV of A; 0: none)
  std::uint64_t wide_row_units = 0;        // their units (thread blocks of one window's pieces)
  std::array<std::uint64_t, 2> tiles{};       // output tiles of A and A^T (0: not used), empty padding ones included
  std::array<std::uint64_t, 2> split_tiles{};  // of those, tiles that share their output block with others
  std::array<std::uint64_t, 2> split_blocks{};  // output blocks split over several tiles
  std::array<std::uint64_t, 2> shared_split_blocks{};  // of those, split in at most 8 parts that meet in shared memory
  std::array<std::uint64_t, 2> packed_leaves{};  // COO4 leaves of at most 32 entries, taken four to a warp step
  std::array<std::uint64_t, 2> tile_bytes{};  // their device memory (units, tiles), read by every call in that orientation
  double traversal_ms = 0;                 // plan building (the leaf walk, tiles or riders, the wide order; a part
                                           // prepared by a later call adds its time), host clock
  std::uint32_t traversal_reruns = 0;      // calls without a plan run again with the full queue capacity (a queue ran full); 0 for plans
  std::uint64_t runs = 0;
};

template <class V>
class GpuSpmv {
 public:
  // Keeps a reference to `a`: it must outlive the plan; its state (transpose,
  // scale) is read at every call, so transposing needs no new plan (the
  // first call after it prepares the other orientation's part, unless the
  // plan was built with SpmvOptions::orientations = both).
  explicit GpuSpmv(const DeviceMatrix<V>& a, SpmvOptions options = {}, cudaStream_t stream = nullptr);
  // On a context (which must outlive the plan): the plan's memory comes from
  // its allocator (work memory: Context::allocate_work), traversals of calls
  // without a plan run on its cached runtime (kept for the next call), calls
  // run on its stream as it was at construction.
  // Building synchronises the stream (the leaf counts and tile sizes are
  // read on the host); with the reused traversal every call in a prepared
  // orientation is then asynchronous, allocates nothing and can be captured
  // into a CUDA graph.
  // Without it every call is a runtime run, which waits for its end.
  GpuSpmv(Context& ctx, const DeviceMatrix<V>& a, SpmvOptions options = {});
  ~GpuSpmv();
  GpuSpmv(GpuSpmv&&) noexcept;
  GpuSpmv& operator=(GpuSpmv&&) noexcept;

  // x has op(A).cols() entries, y op(A).rows(), both in device memory.
  // Asynchronous on the plan's stream when the traversal is reused.
  void operator()(const V* x, V* y, V alpha = V(1), V beta = V(0));

  [[nodiscard]] const SpmvPlanStats& stats() const;
  // The runtime's statistics of the last traversal (a call without the
  // reused traversal; a plan runs none), after the
  // stream has synchronized: items per procedure, launches, and with
  // SpmvOptions::profile the per-procedure times and queue fill over time.
  [[nodiscard]] const runtime::RunStats& last_run() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// One-shot convenience: one runtime traversal (no plan is built). On a
// context: its cached runtime, returning when the traversal has ended (a
// runtime run waits for its end); without one: a runtime made for the call,
// then a synchronisation.
template <class V>
void spmv(Context& ctx, const DeviceMatrix<V>& a, const V* x, V* y, V alpha = V(1), V beta = V(0),
          SpmvOptions options = {});
template <class V>
void spmv(const DeviceMatrix<V>& a, const V* x, V* y, V alpha = V(1), V beta = V(0), SpmvOptions options = {},
          cudaStream_t stream = nullptr);

}  // namespace hisparse::ops
