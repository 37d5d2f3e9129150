#pragma once
// The two-phase GPU add: C = alpha·op(A) + beta·op(B) for operands whose
// values change while their structure stays (a solver's A - sigma·I, a time
// step's A + dt·B), without a host round trip per call.
//
// Phase 1, the constructor: runs ops::add (its synchronisations, its
// result) and records, for every entry of C, where its value lies in C's
// pool and where its terms lie in A's and B's (ops::to_device_coo_positions
// of all three, matched by row and column): 12 bytes per entry of C, besides
// C. It synchronises the context's stream a few times.
//
// Phase 2, compute(): C's values from operands with the same structure as
// phase 1's (the same pools but for values: matrices built from the same
// pattern, or whose values were rewritten in place), with any alpha, beta and
// operand scales. One kernel on the context's stream: no allocation, no
// synchronisation, nothing read back, so it can be captured into a CUDA
// graph and replayed. The values are those ops::add would give, bit for bit
// (add_reference is the specification). The operands and C are checked on
// the host against phase 1's by what is known there (shape, node size,
// state's orientation, pool size, root, entry count): a mismatch throws
// hisparse::Error before anything is queued. A different structure that
// passes these checks is not detected: it is the caller's promise. "The
// same structure" means the same pool layout: matrices built by
// build_matrix or ops::build_device_matrix from the same pattern (the
// builders are canonical), byte copies (ops::copy's default), or the very
// matrices of phase 1 with their values rewritten in place. The result of
// another ops::add, or of a rebuilding copy, may hold the same nodes in
// another order (they allocate nodes concurrently) and must not be passed:
// phase 2 would write values over coordinates. The checks throw before
// anything is queued, also inside a stream capture, which is then left open
// for the caller to end.
//
// Like a GpuSpmv plan, a plan belongs to its context: one thread at a time,
// calls ordered on the context's stream, and the context outlives the plan.
#include <cstdint>

#include "hisparse/formats/device_matrix.hpp"
#include "hisparse/ops/add_gpu.hpp"
#include "hisparse/ops/context.hpp"

namespace hisparse::ops {

template <class V>
class AddPlan {
 public:
  AddPlan(Context& ctx, const DeviceMatrix<V>& a, const DeviceMatrix<V>& b, V alpha = V(1), V beta = V(1),
          AddOptions options = {});

  // C as phase 1 computed it, and as compute() without `c` rewrites it.
  [[nodiscard]] const DeviceMatrix<V>& result() const noexcept { return result_; }

  // Rewrites result()'s values: alpha·op(a) + beta·op(b).
  void compute(const DeviceMatrix<V>& a, const DeviceMatrix<V>& b, V alpha = V(1), V beta = V(1));
  // Writes into `c`, a matrix of result()'s structure (e.g. ops::copy of
  // it): its values, not its state (C's values are those of a plain
  // result; c's own transpose flag and scale still apply when it is read).
  void compute(const DeviceMatrix<V>& a, const DeviceMatrix<V>& b, V alpha, V beta, DeviceMatrix<V>& c) const;

  // Entries of C, and the device bytes the plan keeps besides C.
  [[nodiscard]] std::uint64_t entries() const noexcept { return entries_; }
  [[nodiscard]] std::uint64_t bytes() const noexcept { return slots_.size(); }

  // What the host checks against phase 1's operands and result.
  struct Signature {
    index_t rows = 0, cols = 0;
    std::uint32_t log2d = 0;
    bool transposed = false;
    std::uint64_t pool_bytes = 0, nnz = 0;
    NodeRef root = null_ref;
    static Signature of(const DeviceMatrix<V>& m);
    bool operator==(const Signature&) const = default;
  };

 private:
  Context* ctx_;
  DeviceMatrix<V> result_;
  DeviceBytes slots_;  // per entry of C: its value's position in C, A and B (none: ~0u)
  std::uint64_t entries_ = 0;
  Signature a_, b_, c_;
};

}  // namespace hisparse::ops
