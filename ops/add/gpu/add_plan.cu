// The two-phase add (hisparse/ops/add_plan.hpp): phase 1 pairs every entry of
// C with its terms in A and B by position; phase 2 is one gather kernel.
#include <limits>
#include <string>

#include "add_state.cuh"
#include "hisparse/ops/add_plan.hpp"
#include "hisparse/ops/convert_gpu.hpp"
#include "hisparse/ops/stride_grid.hpp"
#include "hisparse/ops/warp_counting_sort.cuh"

namespace hisparse::ops {
namespace add_plan_detail {

inline constexpr std::uint32_t no_slot = ~0u;

// Where an entry of C takes its value from: positions in units of V in the
// pools of C, A and B (no_slot: no term there).
struct Slots {
  std::uint32_t c, a, b;
};

// An operand's entries in row-major order (to_device_coo_positions).
template <class I>
struct Listed {
  const I* row;
  const I* col;
  const std::uint32_t* pos;
  std::uint64_t n;

  // The position of (r, c), or no_slot.
  __device__ std::uint32_t find(I r, I c) const {
    std::uint64_t lo = 0, hi = n;
    while (lo < hi) {
      const std::uint64_t mid = lo + (hi - lo) / 2;
      if (row[mid] < r || (row[mid] == r && col[mid] < c)) lo = mid + 1;
      else hi = mid;
    }
    return lo < n && row[lo] == r && col[lo] == c ? pos[lo] : no_slot;
  }
};

// A binary search per entry of C in each operand: phase 1 runs once, and
// C's entries are exactly the union of the operands' (add_reference).
// found[0], found[1]: the entries matched in A and in B; found[2]: entries of
// C with neither (none, unless the add and the listing disagree).
template <class I>
__global__ void match_slots(Listed<I> c, Listed<I> a, Listed<I> b, Slots* out, unsigned long long* found) {
  unsigned long long in_a = 0, in_b = 0, orphans = 0;
  for (std::uint64_t k = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; k < c.n;
       k += std::uint64_t{gridDim.x} * blockDim.x) {
    const Slots s{c.pos[k], a.find(c.row[k], c.col[k]), b.find(c.row[k], c.col[k])};
    out[k] = s;
    in_a += s.a != no_slot;
    in_b += s.b != no_slot;
    orphans += s.a == no_slot && s.b == no_slot;
  }
  // Summed over the warp first: one atomic per warp and counter, not per thread.
  in_a = gpu::warp_sum(in_a);
  in_b = gpu::warp_sum(in_b);
  orphans = gpu::warp_sum(orphans);
  if (threadIdx.x % 32 == 0) {
    atomicAdd(found, in_a);
    atomicAdd(found + 1, in_b);
    atomicAdd(found + 2, orphans);
  }
}

// add_gpu::combine's arithmetic (separate roundings, as add_reference; an
// absent term adds a zero, so -0 becomes +0 as there).
template <class V>
__global__ void gather_values(const Slots* slots, std::uint64_t n, const V* a, V ka, const V* b, V kb, V* c) {
  for (std::uint64_t k = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; k < n;
       k += std::uint64_t{gridDim.x} * blockDim.x) {
    const Slots s = slots[k];
    c[s.c] = add_gpu::add_rn(s.a != no_slot ? add_gpu::mul_rn(ka, a[s.a]) : V(0),
                             s.b != no_slot ? add_gpu::mul_rn(kb, b[s.b]) : V(0));
  }
}

// Positions of a matrix's entries, on the context's memory.
template <class V, class I>
struct Positions {
  DeviceBytes row, col, pos;
  std::uint64_t n = 0;
  Positions(Context& ctx, const DeviceMatrix<V>& m) : n(m.nnz()) {
    const std::uint64_t k = std::max<std::uint64_t>(n, 1);
    row = ctx.allocate(k * sizeof(I));
    col = ctx.allocate(k * sizeof(I));
    pos = ctx.allocate(k * sizeof(std::uint32_t));
    to_device_coo_positions<V, I>(ctx, m, row.as<I>(), col.as<I>(), pos.as<std::uint32_t>());
  }
  [[nodiscard]] Listed<I> listed() const { return {row.as<const I>(), col.as<const I>(), pos.as<const std::uint32_t>(), n}; }
};

template <class V, class I>
void record_slots(Context& ctx, const DeviceMatrix<V>& a, const DeviceMatrix<V>& b, const DeviceMatrix<V>& c,
                  DeviceBytes& slots) {
  const cudaStream_t stream = ctx.stream();
  const Positions<V, I> pa(ctx, a), pb(ctx, b), pc(ctx, c);
  slots = ctx.allocate(std::max<std::uint64_t>(c.nnz(), 1) * sizeof(Slots));
  DeviceBytes found = ctx.allocate(3 * sizeof(unsigned long long));
  cuda_check(cudaMemsetAsync(found.get(), 0, found.size(), stream), "cudaMemsetAsync(add plan counts)");
  if (c.nnz() > 0) {
    match_slots<I><<<stride_grid(c.nnz(), 8192), stride_threads, 0, stream>>>(pc.listed(), pa.listed(), pb.listed(), slots.as<Slots>(),
                                                          found.as<unsigned long long>());
    cuda_check(cudaGetLastError(), "launch of match_slots (add plan)");
  }
  unsigned long long counts[3] = {0, 0, 0};
  cuda_check(cudaMemcpyAsync(counts, found.get(), sizeof(counts), cudaMemcpyDeviceToHost, stream),
             "cudaMemcpyAsync(add plan counts)");
  cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize(add plan)");
  if (counts[0] != a.nnz() || counts[1] != b.nnz() || counts[2] != 0)
    throw Error("add plan: the result's entries do not pair with the operands' (" + std::to_string(counts[0]) + " of " +
                std::to_string(a.nnz()) + " in A, " + std::to_string(counts[1]) + " of " + std::to_string(b.nnz()) +
                " in B, " + std::to_string(counts[2]) + " in neither)");
}

template <class V>
void check_same(const typename AddPlan<V>::Signature& want, const DeviceMatrix<V>& m, const char* what) {
  using Signature = typename AddPlan<V>::Signature;
  const Signature got = Signature::of(m);
  if (got == want) return;
  const auto shape = [](const Signature& s) {
    return std::to_string(s.rows) + " x " + std::to_string(s.cols) + (s.transposed ? " (transposed)" : "") +
           ", node size " + std::to_string(1u << s.log2d) + ", " + std::to_string(s.nnz) + " entries, pool " +
           std::to_string(s.pool_bytes) + " bytes, root " + std::to_string(s.root);
  };
  throw Error(std::string("add plan: ") + what + " is not of the planned structure: " + shape(got) + ", planned " +
              shape(want));
}

}  // namespace add_plan_detail

template <class V>
typename AddPlan<V>::Signature AddPlan<V>::Signature::of(const DeviceMatrix<V>& m) {
  return {m.rows(), m.cols(), m.shape().log2_node_size, m.transposed(), m.pool_bytes(), m.nnz(), m.root()};
}

template <class V>
AddPlan<V>::AddPlan(Context& ctx, const DeviceMatrix<V>& a, const DeviceMatrix<V>& b, V alpha, V beta,
                    AddOptions options)
    : ctx_(&ctx), result_(add(ctx, a, b, alpha, beta, options)), entries_(result_.nnz()) {
  using namespace add_plan_detail;
  // Positions are 32-bit in units of V: pools stay below 4 GiB.
  constexpr std::uint64_t i32 = static_cast<std::uint64_t>(std::numeric_limits<std::int32_t>::max());
  const bool narrow = result_.rows() <= i32 && result_.cols() <= i32 && result_.nnz() <= i32;
  if (narrow) record_slots<V, std::int32_t>(ctx, a, b, result_, slots_);
  else record_slots<V, std::int64_t>(ctx, a, b, result_, slots_);
  a_ = Signature::of(a);
  b_ = Signature::of(b);
  c_ = Signature::of(result_);
}

template <class V>
void AddPlan<V>::compute(const DeviceMatrix<V>& a, const DeviceMatrix<V>& b, V alpha, V beta, DeviceMatrix<V>& c) const {
  using namespace add_plan_detail;
  ctx_->check_device("add plan");
  check_same<V>(a_, a, "A");
  check_same<V>(b_, b, "B");
  check_same<V>(c_, c, "the result");
  if (entries_ == 0) return;
  // The one-call add's factors (add_gpu.cu), computed on the host alike.
  const V ka = alpha * a.scale(), kb = beta * b.scale();
  gather_values<V><<<stride_grid(entries_, 8192), stride_threads, 0, ctx_->stream()>>>(
      slots_.as<const Slots>(), entries_, reinterpret_cast<const V*>(a.pool()), ka, reinterpret_cast<const V*>(b.pool()),
      kb, reinterpret_cast<V*>(c.pool_for_values()));
  cuda_check(cudaGetLastError(), "launch of gather_values (add plan)");
}

template <class V>
void AddPlan<V>::compute(const DeviceMatrix<V>& a, const DeviceMatrix<V>& b, V alpha, V beta) {
  compute(a, b, alpha, beta, result_);
}

template class AddPlan<float>;
template class AddPlan<double>;

}  // namespace hisparse::ops
