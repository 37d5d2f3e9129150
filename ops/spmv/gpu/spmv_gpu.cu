// Dispatch layer of the GPU SpMV: the runtime setup for SpMV's procedures,
// plan building (recording the leaves once) and the plan's launch.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>

#include "hisparse/ops/spmv_gpu.hpp"
#include "hisparse/runtime/runtime.cuh"
#include "spmv_plan_agents.cuh"
#include "spmv_plan_order.cuh"
#include "spmv_procedures.cuh"

namespace hisparse::ops {
namespace {

using namespace spmv_gpu;

template <class V>
using SpmvSetup = runtime::QueueSetup<256, runtime::ProcedureQueues<InnerProcedure<V>>,
                                  runtime::ProcedureQueues<LeafOne<V>>, runtime::ProcedureQueues<LeafSmall<V>>,
                                  runtime::ProcedureQueues<LeafLarge<V>>, runtime::ProcedureQueues<LeafDense<V>>,
                                  runtime::ProcedureQueues<LeafWide<V>>>;

constexpr std::uint32_t plan_block = 256;

// y = beta * y, with beta == 0 writing zeros (NaN in y must not leak).
template <class V>
__global__ void scale_y(V* y, std::uint64_t n, V beta) {
  for (std::uint64_t i = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; i < n; i += std::uint64_t{gridDim.x} * blockDim.x)
    y[i] = beta == V(0) ? V(0) : beta * y[i];
}

// One orientation's launch of the cached plan: blocks [0, run_blocks) take
// plan_block / 32 output-block runs each (a warp per run), the rest one dense
// chunk each (a whole block).
struct PlanLaunch {
  const NodeItem* items;  // the sparse bins' items (one, small, large)
  const std::uint32_t* order;
  const std::uint32_t* run_starts;
  std::uint64_t runs;
  const NodeItem* dense;
  std::uint64_t run_blocks;
};

// Its register count sets the occupancy of the whole memory-bound sweep
// (docs/perf-log.md); the wide bins have launches of their own so that their
// code does not raise it.
template <class V, int MinBlocks>
__global__ void __launch_bounds__(plan_block, MinBlocks) run_plan(PlanLaunch p, SpmvState<V> st) {
  extern __shared__ __align__(16) unsigned char plan_shared[];
  const std::uint64_t b = blockIdx.x;
  if (b >= p.run_blocks) {
    leaf_dense(p.dense[b - p.run_blocks], threadIdx.x, plan_block, st);
    return;
  }
  // d accumulators per warp, zero between runs (output_run leaves them so).
  const std::uint32_t lane = threadIdx.x % 32, d = 1u << st.log2d;
  V* acc = reinterpret_cast<V*>(plan_shared) + (threadIdx.x / 32) * d;
  for (std::uint32_t i = lane; i < d; i += 32) acc[i] = V(0);
  __syncwarp();
  const std::uint64_t r = b * (plan_block / 32) + threadIdx.x / 32;
  if (r < p.runs) output_run(p.items, p.order, p.run_starts[r], p.run_starts[r + 1], lane, st, acc);
}

// The 128-entry chunks of wide (COOW) nodes, a warp each.
template <class V>
__global__ void __launch_bounds__(plan_block, 8) run_plan_wide(const NodeItem* items, std::uint64_t count, SpmvState<V> st) {
  const std::uint64_t i = blockIdx.x * std::uint64_t{plan_block / 32} + threadIdx.x / 32;
  if (i < count) leaf_coow(items[i], threadIdx.x % 32, st);
}

// SpMV^T of wide nodes: whole-block chunks summed per column in shared memory
// (the node's d^2 columns); a block loops over chunks so that it clears its
// accumulator once.
template <class V>
__global__ void __launch_bounds__(wide_block_threads) run_plan_wide_columns(const NodeItem* items, std::uint64_t count,
                                                                            SpmvState<V> st) {
  extern __shared__ __align__(16) unsigned char wide_shared[];
  V* acc = reinterpret_cast<V*>(wide_shared);
  for (std::uint32_t i = threadIdx.x; i < (1u << (2 * st.log2d)); i += blockDim.x) acc[i] = V(0);
  __syncthreads();
  for (std::uint64_t i = blockIdx.x; i < count; i += gridDim.x) wide_columns(items[i], threadIdx.x, blockDim.x, st, acc);
}

// The most shared memory the wide-columns accumulator may take: above it
// (d = 256), SpMV^T of wide nodes stays with the warp chunks.
constexpr std::size_t wide_columns_max_bytes = 128 * 1024;

template <class V>
runtime::RuntimeConfig config_for(const DeviceMatrix<V>& a, runtime::Controller c) {
  runtime::RuntimeConfig cfg;
  cfg.controller = c;
  // Every node occupies at least 16 bytes, so no queue ever holds more items
  // than the pool has 16-byte slots.
  const std::uint64_t bound = std::max<std::uint64_t>(1024, a.pool_bytes() / 16);
  cfg.default_capacity = static_cast<std::uint32_t>(std::min<std::uint64_t>(bound, 1u << 30));
  return cfg;
}

}  // namespace

template <class V>
struct GpuSpmv<V>::Impl {
  const DeviceMatrix<V>* a;
  SpmvOptions options;
  cudaStream_t stream;
  runtime::Runtime<SpmvSetup<V>, SpmvState<V>> rt;
  DeviceBytes counts;  // items per recorded list (plan building)
  DeviceBytes lists;   // recorded items, lists back to back
  NodeItem* list[plan_list_count] = {};
  std::uint64_t count[plan_list_count] = {};
  OutputOrder orders[2];  // the sparse items by block row (A) and by block column (A^T)
  int sms = 1;
  int wide_columns_blocks = 0;  // resident blocks per SM of the SpMV^T wide agent; 0: not used
  SpmvPlanStats stats;
  // Entries per large-leaf item: about nnz / (32 warps per SM), at least 128
  // (one step of a warp): a matrix with few, big leaves (bcsstk13: 123 leaves
  // of ~700 entries) otherwise leaves most SMs idle; big matrices keep whole
  // leaves (each item flushes its own accumulators). It is also the entry
  // budget of an output-block run.
  std::uint32_t large_chunk = 128;

  Impl(const DeviceMatrix<V>& m, SpmvOptions o, cudaStream_t s)
      : a(&m), options(o), stream(s), rt(config_for(m, o.controller), {}, s),
        counts(sizeof(unsigned long long) * plan_list_count) {
    int device = 0;
    cuda_check(cudaGetDevice(&device), "cudaGetDevice");
    cuda_check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute(SMs)");
    sms = std::max(sms, 1);
    const std::uint64_t per_item = m.nnz() / (32ull * static_cast<std::uint64_t>(sms));
    large_chunk = static_cast<std::uint32_t>(std::clamp<std::uint64_t>((per_item + 127) / 128 * 128, 128, 1u << 16));
    if (m.root() != null_ref) rt.template seed<InnerProcedure<V>>(NodeItem{0, 0, m.root(), 0});
    if (options.reuse_traversal) build_plan();
  }

  SpmvState<V> state(const V* x, V* y, V alpha) const {
    SpmvState<V> st{};
    st.pool = a->pool();
    st.log2d = a->shape().log2_node_size;
    st.depth = a->shape().depth;
    st.transposed = a->transposed();
    st.k = alpha * a->scale();
    st.x = x;
    st.y = y;
    st.y_size = a->rows();
    st.y_vec4 = reinterpret_cast<std::uintptr_t>(y) % 16 == 0;
    st.leaf_counts = counts.as<unsigned long long>();
    st.large_chunk = large_chunk;
    return st;
  }

  // Two traversals through the runtime: one counts the items per list, one
  // records them into lists of exactly that size. Then the sparse items are
  // ordered by output block, once per orientation.
  void build_plan() {
    const auto t0 = std::chrono::steady_clock::now();
    SpmvState<V> st = state(nullptr, nullptr, V(1));
    st.record = true;
    cuda_check(cudaMemsetAsync(counts.get(), 0, counts.size(), stream), "cudaMemsetAsync(leaf counts)");
    rt.set_state(st);
    if (a->root() != null_ref) rt.run();
    unsigned long long n[plan_list_count];
    cuda_check(cudaMemcpyAsync(n, counts.get(), sizeof(n), cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync(leaf counts)");
    cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize(leaf counts)");
    std::uint64_t total = 0;
    for (std::uint32_t l = 0; l < plan_list_count; ++l) total += n[l];
    // The order indexes the sparse items with 32 bits.
    if (n[bin_one] + n[bin_small] + n[bin_large] > 0xffffffffull)
      throw Error("spmv: the plan has more than 2^32 sparse leaf items; use SpmvOptions::reuse_traversal = false");
    lists = DeviceBytes(std::max<std::uint64_t>(total, 1) * sizeof(NodeItem));
    std::uint64_t offset = 0;
    for (std::uint32_t l = 0; l < plan_list_count; ++l) {
      list[l] = st.leaf_lists[l] = lists.as<NodeItem>() + offset;
      count[l] = n[l];
      offset += n[l];
      if (l < leaf_bin_count) stats.leaves[l] = n[l];
    }
    cuda_check(cudaMemsetAsync(counts.get(), 0, counts.size(), stream), "cudaMemsetAsync(leaf counts)");
    rt.set_state(st);
    if (a->root() != null_ref) rt.run();
    // Bins one, small and large lie back to back from list[bin_one].
    const auto sparse = static_cast<std::uint32_t>(n[bin_one] + n[bin_small] + n[bin_large]);
    const std::uint32_t b = a->shape().log2_node_size;
    const RunBudget budget{large_chunk, 4 * 32};
    for (int by_col = 0; by_col < 2; ++by_col) {
      const std::uint64_t extent = by_col ? a->shape().cols : a->shape().rows;
      orders[by_col] = order_by_output(list[bin_one], sparse, by_col != 0, (extent >> b) + 1, a->pool(), large_chunk,
                                       budget, stream);
      stats.output_runs[by_col] = orders[by_col].runs;
    }
    if (count[list_wide_blocks] > 0 && (std::size_t{1} << (2 * b)) * sizeof(V) <= wide_columns_max_bytes) {
      const std::size_t bytes = (std::size_t{1} << (2 * b)) * sizeof(V);
      cuda_check(cudaFuncSetAttribute(run_plan_wide_columns<V>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(bytes)),
                 "cudaFuncSetAttribute(run_plan_wide_columns)");
      cuda_check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&wide_columns_blocks, run_plan_wide_columns<V>,
                                                               wide_block_threads, bytes),
                 "cudaOccupancyMaxActiveBlocksPerMultiprocessor(run_plan_wide_columns)");
    }
    cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize(plan)");
    stats.traversal_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }

  void run_cached_plan(const SpmvState<V>& st) {
    const OutputOrder& o = orders[st.transposed ? 1 : 0];
    PlanLaunch p{list[bin_one], o.order.as<const std::uint32_t>(), o.run_starts.as<const std::uint32_t>(),
                 o.runs, list[bin_dense], (o.runs + plan_block / 32 - 1) / (plan_block / 32)};
    const std::uint64_t blocks = p.run_blocks + count[bin_dense];
    if (blocks > 0x7fffffffu) throw Error("spmv: plan needs more than 2^31 blocks");
    if (blocks != 0) {
      const std::size_t shared = (plan_block / 32) * (std::size_t{1} << st.log2d) * sizeof(V);
      static const int variant = std::getenv("HISPARSE_SPMV_PLAN_BLOCKS") ? std::atoi(std::getenv("HISPARSE_SPMV_PLAN_BLOCKS")) : 4;
      if (variant == 8) run_plan<V, 8><<<static_cast<unsigned>(blocks), plan_block, shared, stream>>>(p, st);
      else if (variant == 6) run_plan<V, 6><<<static_cast<unsigned>(blocks), plan_block, shared, stream>>>(p, st);
      else run_plan<V, 4><<<static_cast<unsigned>(blocks), plan_block, shared, stream>>>(p, st);
      cuda_check(cudaGetLastError(), "launch of run_plan");
    }
    static const bool wide_t = !std::getenv("HISPARSE_SPMV_WIDE_T") || std::atoi(std::getenv("HISPARSE_SPMV_WIDE_T")) != 0;
    if (st.transposed && wide_columns_blocks > 0 && wide_t) {
      const std::uint64_t items = count[list_wide_blocks];
      const auto grid = static_cast<unsigned>(std::min<std::uint64_t>(items, std::uint64_t(wide_columns_blocks) * sms));
      const std::size_t shared = (std::size_t{1} << (2 * st.log2d)) * sizeof(V);
      run_plan_wide_columns<V><<<grid, wide_block_threads, shared, stream>>>(list[list_wide_blocks], items, st);
      cuda_check(cudaGetLastError(), "launch of run_plan_wide_columns");
    } else if (count[bin_wide] != 0) {
      const std::uint64_t wide_blocks = (count[bin_wide] + plan_block / 32 - 1) / (plan_block / 32);
      if (wide_blocks > 0x7fffffffu) throw Error("spmv: plan needs more than 2^31 blocks");
      run_plan_wide<V><<<static_cast<unsigned>(wide_blocks), plan_block, 0, stream>>>(list[bin_wide], count[bin_wide], st);
      cuda_check(cudaGetLastError(), "launch of run_plan_wide");
    }
  }

  void operator()(const V* x, V* y, V alpha, V beta) {
    const std::uint64_t rows = a->rows();
    if ((rows > 0 && y == nullptr) || (a->cols() > 0 && x == nullptr))
      throw Error("spmv: x and y must be device pointers to op(A).cols() and op(A).rows() values, not null");
    if (rows > 0) {
      const auto grid = static_cast<unsigned>(std::min<std::uint64_t>((rows + 255) / 256, 65536));
      scale_y<V><<<grid, 256, 0, stream>>>(y, rows, beta);
      cuda_check(cudaGetLastError(), "launch of scale_y");
    }
    ++stats.runs;
    if (a->root() == null_ref || alpha == V(0)) return;
    const SpmvState<V> st = state(x, y, alpha);
    if (options.reuse_traversal) {
      run_cached_plan(st);
      return;
    }
    rt.set_state(st);
    rt.run();
  }
};

template <class V>
GpuSpmv<V>::GpuSpmv(const DeviceMatrix<V>& a, SpmvOptions options, cudaStream_t stream)
    : impl_(std::make_unique<Impl>(a, options, stream)) {}
template <class V>
GpuSpmv<V>::~GpuSpmv() = default;
template <class V>
GpuSpmv<V>::GpuSpmv(GpuSpmv&&) noexcept = default;
template <class V>
GpuSpmv<V>& GpuSpmv<V>::operator=(GpuSpmv&&) noexcept = default;

template <class V>
void GpuSpmv<V>::operator()(const V* x, V* y, V alpha, V beta) {
  (*impl_)(x, y, alpha, beta);
}

template <class V>
const SpmvPlanStats& GpuSpmv<V>::stats() const {
  return impl_->stats;
}

template <class V>
void spmv(const DeviceMatrix<V>& a, const V* x, V* y, V alpha, V beta, SpmvOptions options, cudaStream_t stream) {
  // One multiplication: recording the leaves would cost two extra traversals.
  options.reuse_traversal = false;
  GpuSpmv<V> plan(a, options, stream);
  plan(x, y, alpha, beta);
  cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize(spmv)");
}

template class GpuSpmv<float>;
template class GpuSpmv<double>;
template void spmv(const DeviceMatrix<float>&, const float*, float*, float, float, SpmvOptions, cudaStream_t);
template void spmv(const DeviceMatrix<double>&, const double*, double*, double, double, SpmvOptions, cudaStream_t);

}  // namespace hisparse::ops
