// Dispatch layer of the GPU SpMV: the runtime setup for SpMV's procedures
// (calls without a plan), plan building (listing the leaves once) and the
// plan's launch.
#include <algorithm>
#include <chrono>
#include <limits>
#include <optional>
#include <string>

#include "hisparse/ops/cached_runtime.cuh"
#include "hisparse/ops/spmv_gpu.hpp"
#include "hisparse/runtime/runtime.cuh"
#include "spmv_plan_kernels.cuh"
#include "spmv_plan_leaves.cuh"
#include "spmv_plan_riders.cuh"
#include "spmv_plan_tiles.cuh"
#include "spmv_plan_wide_order.cuh"
#include "spmv_plan_wide_rows.cuh"
#include "spmv_procedures.cuh"

namespace hisparse::ops {
namespace {

using namespace spmv_gpu;

template <class V>
using SpmvSetup = runtime::QueueSetup<256, runtime::ProcedureQueues<InnerProcedure<V>>,
                                  runtime::ProcedureQueues<LeafParentProcedure<V>>,
                                  runtime::ProcedureQueues<LeafLarge<V>>, runtime::ProcedureQueues<LeafDense<V>>,
                                  runtime::ProcedureQueues<LeafWide<V>>>;

// Riders are used where their entries are at least 1/rider_min_share of all.
constexpr std::uint64_t rider_min_share = 32;

// y = beta * y, with beta == 0 writing zeros (NaN in y must not leak).
template <class V>
__global__ void scale_y(V* y, std::uint64_t n, V beta) {
  for (std::uint64_t i = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; i < n; i += std::uint64_t{gridDim.x} * blockDim.x)
    y[i] = beta == V(0) ? V(0) : beta * y[i];
}

// Every node occupies at least 16 bytes, so no queue ever holds more items
// than the pool has 16-byte slots: the capacity that never overflows. The
// runtime starts with a sixteenth of it (queue_share), because that bound is
// far above what real matrices need (the Laplacian 4096^2's 518 MB pool: 2^25
// slots a queue, 4.7 GB over five queues, for 20 k items in all since
// leaf-parent items sum the leaves, 652 k before; their allocation and first
// initialisation were a third of a plan's build and most of a one-shot call's
// set-up), and a traversal can run again, with the full
// bound, when a queue runs full: the call restores y first (saved where
// beta != 0).
inline constexpr std::uint64_t queue_share = 16;

template <class V>
runtime::RuntimeConfig config_for(const DeviceMatrix<V>& a, const SpmvOptions& o, std::uint64_t share = 1) {
  runtime::RuntimeConfig cfg;
  cfg.controller = o.controller;
  cfg.profile = o.profile && !o.reuse_traversal;
  const std::uint64_t bound = std::max<std::uint64_t>(1024, a.pool_bytes() / 16 / share);
  cfg.default_capacity = static_cast<std::uint32_t>(std::min<std::uint64_t>(bound, 1u << 30));
  if (o.queue_capacity != 0) cfg.default_capacity = o.queue_capacity;
  return cfg;
}

// The traversal's runtime, kept in the context for every plan and call on it.
template <class V>
struct SpmvCache : Context::CacheEntry {
  CachedRuntime<SpmvSetup<V>, SpmvState<V>> rt;
};

}  // namespace

template <class V>
struct GpuSpmv<V>::Impl {
  // A plan made without a context has one of its own (synchronous
  // allocator); only calls without a plan run the runtime.
  std::unique_ptr<Context> own_context;
  Context* ctx;
  const DeviceMatrix<V>* a;
  SpmvOptions options;
  cudaStream_t stream;
  runtime::RunStats run_stats;       // this plan's last traversal (the runtime is the context's)
  std::uint64_t share = 1;           // the queues asked for: 1/share of the capacity that never overflows
  DeviceBytes y_saved;               // a call without a plan, on reduced queues, beta != 0: y before it
  DeviceBytes lists;   // the leaves' items, lists back to back (LeafLists)
  PlanBins plan{};           // as listed (the small bin in tree order)
  PlanBins oriented[2]{};    // what runs, for A and for A^T: the small bin by output block, riders split off
  PlanRiders rider_lists[2]{};
  RiderPlan riders[2];
  const NodeItem* wide_blocks = nullptr;  // the wide nodes in whole-block chunks (list_wide_blocks)
  std::uint64_t wide_block_count = 0;
  int sms = 1;
  std::uint64_t warp_slots = 1;  // resident warps of the whole GPU
  int wide_columns_blocks = 0;  // resident blocks per SM of run_plan_wide_columns; 0: not used
  WideOrder wide_order;         // the wide chunks' column order (SpMV^T); empty: not used
  WideRows wide_rows;           // the wide chunks' row windows (SpMV); empty: not used
  TilePlan<V> tiles[2];         // the standard leaves by output tiles, for A and A^T; unused when !use_tiles
  bool use_tiles = false;
  std::uint32_t tile_units = 1, min_fill = 0;
  SpmvPlanStats stats;
  // Entries per large-leaf item: about nnz / (32 warps per SM), at least 128
  // (one step of a warp): a matrix with few, big leaves (bcsstk13: 123 leaves
  // of ~700 entries) otherwise leaves most SMs idle; big matrices keep whole
  // leaves (each item flushes its own accumulators).
  std::uint32_t large_chunk = 128;

  Impl(Context& c, const DeviceMatrix<V>& m, SpmvOptions o) : ctx(&c), a(&m), options(o), stream(c.stream()) { init(); }
  Impl(const DeviceMatrix<V>& m, SpmvOptions o, cudaStream_t s)
      : own_context(std::make_unique<Context>(s, runtime::synchronous_allocator())),
        ctx(own_context.get()), a(&m), options(o), stream(s) {
    init();
  }

  void init() {
    ctx->check_device("spmv");
    int device = 0;
    cuda_check(cudaGetDevice(&device), "cudaGetDevice");
    cuda_check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute(SMs)");
    sms = std::max(sms, 1);
    int threads_per_sm = 2048;
    cuda_check(cudaDeviceGetAttribute(&threads_per_sm, cudaDevAttrMaxThreadsPerMultiProcessor, device),
               "cudaDeviceGetAttribute(threads per SM)");
    warp_slots = static_cast<std::uint64_t>(sms) * static_cast<std::uint64_t>(std::max(threads_per_sm, 32) / 32);
    const std::uint64_t per_item = a->nnz() / (32ull * static_cast<std::uint64_t>(sms));
    large_chunk = static_cast<std::uint32_t>(std::clamp<std::uint64_t>((per_item + 127) / 128 * 128, 128, 1u << 16));
    share = options.queue_capacity == 0 ? queue_share : 1;
    if (options.reuse_traversal) build_plan();
  }

  // One traversal on the context's runtime, seeded with A's root. A stopped
  // run leaves the runtime dropped (nothing in it is worth keeping).
  void traverse(const SpmvState<V>& st) {
    auto& cached = ctx->cached<SpmvCache<V>>().rt;
    auto& rt = cached.get(*ctx, config_for(*a, options, share), st, a->pool_bytes());
    rt.template seed<InnerProcedure<V>>(inner_item(0, 0, a->root(), 0));
    try {
      run_stats = rt.run();
    } catch (...) {
      cached.reset();
      throw;
    }
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
    st.large_chunk = large_chunk;
    return st;
  }

  // A's leaves listed by a walk down the tree (spmv_plan_leaves.cuh), then
  // the lists arranged for the orientation A has now (both with
  // Orientations::both): output tiles or riders, and for A^T the wide
  // chunks' column order.
  void build_plan() {
    const auto t0 = std::chrono::steady_clock::now();
    LeafLists leaves = list_leaves(a->pool(), a->root(), a->shape().log2_node_size, a->shape().depth, large_chunk, *ctx);
    const std::uint64_t(&n)[plan_list_count] = leaves.count;
    for (std::uint32_t b = 0; b < leaf_bin_count; ++b) {
      plan.items[b] = leaves.list(b);
      plan.count[b] = n[b];
      stats.leaves[b] = n[b];
    }
    assign_blocks(plan);
    wide_blocks = leaves.list(list_wide_blocks);
    wide_block_count = n[list_wide_blocks];
    lists = std::move(leaves.items);
    const std::uint32_t log2d = a->shape().log2_node_size;
    const std::size_t wide_acc = (std::size_t{1} << (2 * log2d)) * sizeof(V);
    if (wide_block_count > 0 && !options.wide_column_order && wide_acc <= wide_columns_max_bytes) {
      // The attribute is the kernel's, not the plan's: the most any plan asks,
      // so that a later plan with a smaller d does not lower an earlier one's cap.
      cuda_check(cudaFuncSetAttribute(run_plan_wide_columns<V>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(wide_columns_max_bytes)),
                 "cudaFuncSetAttribute(run_plan_wide_columns)");
      cuda_check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&wide_columns_blocks, run_plan_wide_columns<V>,
                                                               wide_block_threads, wide_acc),
                 "cudaOccupancyMaxActiveBlocksPerMultiprocessor(run_plan_wide_columns)");
    }
    const Shape& shape = a->shape();
    const std::uint64_t standard = n[bin_one] + n[bin_small] + n[bin_large] + n[bin_dense];
    // No standard leaves (a matrix of wide nodes): nothing to tile.
    use_tiles = options.tiles != SpmvOptions::Tiles::never && standard > 0 &&
                tiles_fit(shape.rows, shape.cols, shape.log2_node_size);
    // Units per tile (a warp's, done one after the other): enough tiles to
    // give every warp slot of the GPU about two, at least one, at most 16: a
    // 27-point stencil's block row (about 30 units) whole in one warp ran
    // 0.44 ms against 0.32 split in two (perf-log 19).
    const std::uint64_t per_tile = a->nnz() / (2 * warp_slots * tile_unit_entries);
    tile_units = static_cast<std::uint32_t>(std::clamp<std::uint64_t>(per_tile, 1, 16));
    min_fill = options.tiles == SpmvOptions::Tiles::always ? 0 : tile_unit_entries / 4;
    const auto t_listed = std::chrono::steady_clock::now();
    const auto ms = [](auto from, auto to) { return std::chrono::duration<double, std::milli>(to - from).count(); };
    stats.traversal_ms += ms(t0, t_listed);
    if (runtime::log::enabled(runtime::log::Level::debug))
      runtime::log::debug("spmv plan: leaves listed in " + std::to_string(ms(t0, t_listed)) + " ms");
    const int now = a->transposed() ? 1 : 0;
    prepare(now, *ctx);
    if (options.orientations == SpmvOptions::Orientations::both) prepare(1 - now, *ctx);
  }

  // A's (o = 0) or A^T's (o = 1) part of the plan, on `c`'s stream (the
  // plan's) with memory from its allocator. A failure leaves it unprepared
  // (the next call in that orientation tries again).
  void prepare(int o, const Context& c) {
    const auto t0 = std::chrono::steady_clock::now();
    const Shape& shape = a->shape();
    if (use_tiles) {
      const std::uint64_t standard = plan.count[bin_one] + plan.count[bin_small] + plan.count[bin_large] +
                                     plan.count[bin_dense];
      // The fill test does not depend on the orientation: once passed for
      // one, the other's planning skips it (and its synchronisation).
      const std::uint32_t fill = stats.prepared[1 - o] ? 0u : min_fill;
      use_tiles = plan_tiles<V>(a->pool(), plan.items[bin_one], standard, plan.count[bin_one] + plan.count[bin_small],
                                shape.rows, shape.cols, shape.log2_node_size, tile_units, fill, o, c, tiles[o]);
    }
    if (use_tiles) {
      oriented[o] = plan;  // the wide bin's blocks
      stats.tiles[o] = tiles[o].tile_count;
      stats.split_tiles[o] = tiles[o].split_tiles;
      stats.split_blocks[o] = tiles[o].split_blocks;
      stats.shared_split_blocks[o] = tiles[o].shared_split_blocks;
      stats.packed_leaves[o] = tiles[o].packed_leaves;
      stats.tile_bytes[o] = tiles[o].bytes();
    } else {
      orient(o, c);
    }
    const auto t_oriented = std::chrono::steady_clock::now();
    if (o == 0 && plan.count[bin_wide] > 0) {
      wide_rows = plan_wide_rows<V>(a->pool(), plan.items[bin_wide], plan.count[bin_wide], shape.rows, shape.cols,
                                    shape.log2_node_size, c);
      stats.wide_rows_bytes = wide_rows.bytes();
      stats.wide_row_units = wide_rows.unit_count;
    }
    if (o == 1 && options.wide_column_order && wide_block_count > 0) {
      wide_order = plan_wide_order(a->pool(), wide_blocks, wide_block_count, shape.log2_node_size, c);
      stats.wide_order_bytes = wide_order.bytes();
      stats.wide_column_runs = wide_order.column_runs;
    }
    stats.prepared[o] = true;
    const auto t_end = std::chrono::steady_clock::now();
    const auto ms = [](auto from, auto to) { return std::chrono::duration<double, std::milli>(to - from).count(); };
    stats.traversal_ms += ms(t0, t_end);
    if (runtime::log::enabled(runtime::log::Level::debug))
      runtime::log::debug(std::string("spmv plan: ") + (o == 1 ? "A^T" : "A") + " prepared in " +
                          std::to_string(ms(t0, t_end)) + " ms: " + (use_tiles ? "tiles " : "riders ") +
                          std::to_string(ms(t0, t_oriented)) + ", wide order or row windows " + std::to_string(ms(t_oriented, t_end)) +
                          " ms");
  }

  // A call in an orientation the plan has not prepared (Orientations::
  // current): prepared now, outside a stream capture only (preparing
  // synchronises the stream, which a capture cannot record), on the plan's
  // stream, where its calls run and its memory must return: the context's
  // may have moved since (Context::set_stream), and then a context of the
  // plan's stream with the same allocator serves.
  void prepare_for_call(int o) {
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    cuda_check(cudaStreamIsCapturing(stream, &capture), "cudaStreamIsCapturing(spmv)");
    if (capture != cudaStreamCaptureStatusNone)
      throw Error(std::string("spmv: the plan has no part for op(A) = ") + (o == 1 ? "A^T" : "A") +
                  " yet, and preparing it synchronises the stream, which is being captured: build the plan with "
                  "SpmvOptions::orientations = both, or make one call in this orientation before the capture");
    if (ctx->stream() == stream) {
      prepare(o, *ctx);
      return;
    }
    const Context on_plan_stream(stream, ctx->allocator());
    prepare(o, on_plan_stream);
  }

  // The plan for A (o = 0) or A^T (o = 1): riders of each output block's
  // large leaf split off the small bin (spmv_plan_riders.cuh), the block
  // ranges of the bins after the small one moved to its new length.
  void orient(int o, const Context& c) {
    PlanBins& p = oriented[o];
    p = plan;
    const std::uint64_t n_small = plan.count[bin_small], n_large = plan.count[bin_large];
    constexpr std::uint64_t u32_max = std::numeric_limits<std::uint32_t>::max();
    using Riders = SpmvOptions::Riders;
    if (options.riders == Riders::never || n_small == 0 || n_large == 0 || n_small >= u32_max || n_large >= u32_max)
      return;
    if (options.riders == Riders::automatic && n_large < warp_slots) return;
    const Shape& shape = a->shape();
    const std::uint64_t extent = o == 0 ? shape.rows : shape.cols;
    const std::uint64_t blocks = (extent + shape.node_size() - 1) >> shape.log2_node_size;
    riders[o] = plan_riders(a->pool(), plan.items[bin_small], n_small, plan.items[bin_large], n_large, o == 1, blocks,
                            c);
    // The riders' instance of run_plan spills more under the same register
    // bound, which every item pays: worth it only where riders carry a fair
    // share of the products (the circuit: 20%; the 27-point stencil: 0.006%,
    // 4% slower with them). The warp-slot rule above: on the SuiteSparse set
    // riders made fe_4elt2 0.012 -> 0.018 ms, rajat01 0.018 -> 0.022.
    if (riders[o].riders == 0 ||
        (options.riders == Riders::automatic && riders[o].rider_entries * rider_min_share < a->nnz())) {
      riders[o] = RiderPlan{};
      return;
    }
    const std::uint64_t r = riders[o].riders;
    stats.riders[o] = r;
    p.items[bin_small] = riders[o].items.template as<NodeItem>() + r;
    p.count[bin_small] = n_small - r;
    rider_lists[o] = PlanRiders{riders[o].ranges.template as<RiderRange>(), riders[o].items.template as<NodeItem>()};
    assign_blocks(p);
  }

  void operator()(const V* x, V* y, V alpha, V beta) {
    const std::uint64_t rows = a->rows();
    if ((rows > 0 && y == nullptr) || (a->cols() > 0 && x == nullptr))
      throw Error("spmv: x and y must be device pointers to op(A).cols() and op(A).rows() values, not null");
    const int o = a->transposed() ? 1 : 0;
    if (options.reuse_traversal && !stats.prepared[o]) prepare_for_call(o);
    const bool tiled = use_tiles && options.reuse_traversal && a->root() != null_ref && alpha != V(0);
    // A traversal on reduced queues may have to run again: y as it was.
    const bool save_y = !options.reuse_traversal && share != 1 && beta != V(0) && rows > 0 &&
                        a->root() != null_ref && alpha != V(0);
    if (save_y) {
      if (y_saved.size() < rows * sizeof(V)) y_saved = ctx->allocate(rows * sizeof(V));
      cuda_check(cudaMemcpyAsync(y_saved.get(), y, rows * sizeof(V), cudaMemcpyDeviceToDevice, stream),
                 "cudaMemcpyAsync(y saved)");
    }
    if (rows > 0 && !tiled) scale(y, rows, beta);
    ++stats.runs;
    if (a->root() == null_ref || alpha == V(0)) return;
    SpmvState<V> st = state(x, y, alpha);
    if (options.reuse_traversal) {
      const PlanBins& plan = oriented[st.transposed ? 1 : 0];
      const PlanRiders& riding = rider_lists[st.transposed ? 1 : 0];
      const std::uint64_t blocks = plan.first_block[bin_wide];
      const std::uint64_t wide_chunk_blocks = plan.first_block[leaf_bin_count] - blocks;
      if (blocks > 0x7fffffffu || wide_chunk_blocks > 0x7fffffffu) throw Error("spmv: plan needs more than 2^31 blocks");
      if (tiled) {
        const TilePlan<V>& tp = tiles[st.transposed ? 1 : 0];
        const auto grid = static_cast<unsigned>((tp.tile_count + tile_warps - 1) / tile_warps);
        if (st.transposed) run_tiles<V, true><<<grid, tile_threads, 0, stream>>>(tp.view(), tp.tile_count, st, beta);
        else run_tiles<V, false><<<grid, tile_threads, 0, stream>>>(tp.view(), tp.tile_count, st, beta);
        cuda_check(cudaGetLastError(), "launch of run_tiles");
      } else if (blocks != 0) {
        const std::size_t shared = (plan_block / 32) * (std::size_t{1} << st.log2d) * sizeof(V);
        if (riding.ranges)
          run_plan<V, true><<<static_cast<unsigned>(blocks), plan_block, shared, stream>>>(plan, st, riding);
        else
          run_plan<V, false><<<static_cast<unsigned>(blocks), plan_block, shared, stream>>>(plan, st, riding);
        cuda_check(cudaGetLastError(), "launch of run_plan");
      }
      if (!st.transposed && wide_rows.unit_count > 0) {
        run_plan_wide_rows<V><<<static_cast<unsigned>(wide_rows.unit_count), wide_rows_threads, 0, stream>>>(
            wide_rows.view(), st);
        cuda_check(cudaGetLastError(), "launch of run_plan_wide_rows");
      } else if (st.transposed && wide_order.entries > 0) {
        run_plan_wide_ordered<V><<<static_cast<unsigned>(wide_block_count), wide_block_threads, 0, stream>>>(
            wide_blocks, st, WideOrderView{wide_order.first.as<std::uint64_t>(), wide_order.order.as<std::uint16_t>()});
        cuda_check(cudaGetLastError(), "launch of run_plan_wide_ordered");
      } else if (st.transposed && wide_columns_blocks > 0) {
        const auto grid = static_cast<unsigned>(std::min<std::uint64_t>(wide_block_count, std::uint64_t(wide_columns_blocks) * sms));
        const std::size_t shared = (std::size_t{1} << (2 * st.log2d)) * sizeof(V);
        run_plan_wide_columns<V><<<grid, wide_block_threads, shared, stream>>>(wide_blocks, wide_block_count, st);
        cuda_check(cudaGetLastError(), "launch of run_plan_wide_columns");
      } else if (wide_chunk_blocks != 0) {
        run_plan_wide<V><<<static_cast<unsigned>(wide_chunk_blocks), plan_block, 0, stream>>>(plan, st);
        cuda_check(cudaGetLastError(), "launch of run_plan_wide");
      }
      return;
    }
    try {
      traverse(st);
    } catch (const runtime::QueueOverflow&) {
      if (share == 1) throw;
      runtime::log::debug("spmv: a queue ran full at the reduced capacity; the call runs again with the full one");
      share = 1;
      ++stats.traversal_reruns;
      if (save_y)
        cuda_check(cudaMemcpyAsync(y, y_saved.get(), rows * sizeof(V), cudaMemcpyDeviceToDevice, stream),
                   "cudaMemcpyAsync(y restored)");
      scale(y, rows, beta);
      traverse(st);
      y_saved = DeviceBytes();  // the full queues never overflow
    }
  }

  // y = beta * y (beta == 0 writes zeros).
  void scale(V* y, std::uint64_t rows, V beta) {
    const auto grid = static_cast<unsigned>(std::min<std::uint64_t>((rows + 255) / 256, 65536));
    scale_y<V><<<grid, 256, 0, stream>>>(y, rows, beta);
    cuda_check(cudaGetLastError(), "launch of scale_y");
  }
};

template <class V>
GpuSpmv<V>::GpuSpmv(const DeviceMatrix<V>& a, SpmvOptions options, cudaStream_t stream)
    : impl_(std::make_unique<Impl>(a, options, stream)) {}
template <class V>
GpuSpmv<V>::GpuSpmv(Context& ctx, const DeviceMatrix<V>& a, SpmvOptions options)
    : impl_(std::make_unique<Impl>(ctx, a, options)) {}
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
const runtime::RunStats& GpuSpmv<V>::last_run() const {
  return impl_->run_stats;
}

template <class V>
void spmv(const DeviceMatrix<V>& a, const V* x, V* y, V alpha, V beta, SpmvOptions options, cudaStream_t stream) {
  // One multiplication: one traversal finds and multiplies the leaves; a plan
  // would list them first.
  options.reuse_traversal = false;
  GpuSpmv<V> plan(a, options, stream);
  plan(x, y, alpha, beta);
  cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize(spmv)");
}

template <class V>
void spmv(Context& ctx, const DeviceMatrix<V>& a, const V* x, V* y, V alpha, V beta, SpmvOptions options) {
  options.reuse_traversal = false;
  GpuSpmv<V> plan(ctx, a, options);
  plan(x, y, alpha, beta);
}

template class GpuSpmv<float>;
template class GpuSpmv<double>;
template void spmv(const DeviceMatrix<float>&, const float*, float*, float, float, SpmvOptions, cudaStream_t);
template void spmv(const DeviceMatrix<double>&, const double*, double*, double, double, SpmvOptions, cudaStream_t);
template void spmv(Context&, const DeviceMatrix<float>&, const float*, float*, float, float, SpmvOptions);
template void spmv(Context&, const DeviceMatrix<double>&, const double*, double*, double, double, SpmvOptions);

}  // namespace hisparse::ops
