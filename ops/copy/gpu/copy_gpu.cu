// Dispatch layer of GPU copy and materialize.
#include <string>

#include "copy_procedures.cuh"
#include "hisparse/ops/add_gpu.hpp"
#include "hisparse/ops/copy_gpu.hpp"
#include "hisparse/ops/cached_runtime.cuh"
#include "hisparse/runtime/runtime.cuh"

namespace hisparse::ops {
namespace {

using namespace copy_gpu;

template <class V>
using CopySetup = runtime::QueueSetup<256, runtime::ProcedureQueues<CopyNode<V>>>;

struct Scratch {
  unsigned long long alloc;
  NodeRef root;
  unsigned overflow;
};

// Kept in a Context between calls.
template <class V>
struct CopyCache : Context::CacheEntry {
  CachedRuntime<CopySetup<V>, CopyState<V>> rt;
  DeviceBytes scratch;
  runtime::PinnedBuffer done{sizeof(Scratch)};
  // Staging for the host-to-device copies: from pageable memory a copy waits
  // for the driver to stage it. The call synchronises before it writes the
  // header's, so the previous call's copies are over by then.
  runtime::PinnedBuffer init{sizeof(Scratch)};
  runtime::PinnedBuffer header{sizeof(PoolHeader)};
};

// A sixteenth of the never-overflowing queue bound first (as the add's).
inline constexpr std::uint64_t copy_queue_share = 16;

// Walks `a` through the runtime and writes every node into a fresh pool.
template <class V>
DeviceMatrix<V> rebuild(Context& ctx, const DeviceMatrix<V>& a, bool transpose, bool apply_scale, CopyOptions options,
                        bool keep_state) {
  const cudaStream_t stream = ctx.stream();
  const Shape& s = a.shape();
  Shape out_shape = s;
  if (transpose) std::swap(out_shape.rows, out_shape.cols);
  auto& cache = ctx.cached<CopyCache<V>>();
  if (cache.scratch.size() == 0) cache.scratch = ctx.allocate(sizeof(Scratch));
  auto* sc = cache.scratch.template as<Scratch>();
  auto* done = cache.done.template as<Scratch>();
  // Transposing a wide node sorts it in two stable passes through a buffer;
  // each node uses the bytes at its own destination offset.
  DeviceBytes sort_buffer = ctx.allocate(a.wide_nodes() && transpose ? a.pool_bytes() : 0);
  DeviceBytes pool = ctx.allocate(a.pool_bytes());
  std::uint64_t share = options.queue_capacity == 0 ? copy_queue_share : 1;
  for (;;) {
    cuda_check(cudaMemsetAsync(pool.get(), 0, pool.size(), stream), "cudaMemsetAsync(pool)");
    auto* init = cache.init.template as<Scratch>();
    *init = Scratch{sizeof(PoolHeader), null_ref, 0};
    cuda_check(cudaMemcpyAsync(sc, init, sizeof(Scratch), cudaMemcpyHostToDevice, stream), "cudaMemcpyAsync(scratch)");
    if (a.root() == null_ref) break;
    const CopyState<V> st{a.pool(), pool.as<std::byte>(), sort_buffer.as<std::byte>(), &sc->alloc, pool.size(),
                          &sc->overflow, s.log2_node_size, s.depth, transpose, a.scale(), apply_scale};
    runtime::RuntimeConfig cfg;
    cfg.controller = options.controller;
    cfg.default_capacity = static_cast<std::uint32_t>(std::min<std::uint64_t>(
        std::max<std::uint64_t>(1024, a.pool_bytes() / 16 / share), 1u << 30));
    if (options.queue_capacity != 0) cfg.default_capacity = options.queue_capacity;
    auto& rt = cache.rt.get(ctx, cfg, st, a.pool_bytes());
    rt.template seed<CopyNode<V>>(CopyItem{a.root(), 0, &sc->root});
    try {
      rt.run();
      break;
    } catch (const runtime::QueueOverflow&) {
      cache.rt.reset();
      if (share == 1) throw;
      share = 1;  // nodes written so far are written again
    } catch (...) {
      cache.rt.reset();
      throw;
    }
  }
  cuda_check(cudaMemcpyAsync(done, sc, sizeof(Scratch), cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync(scratch)");
  cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize(copy)");
  const Scratch result = *done;
  // A version's view holds other versions' nodes too: its own take no more.
  if (result.overflow || (a.arena() ? result.alloc > a.pool_bytes() : result.alloc != a.pool_bytes()))
    throw Error("copy: rebuilt pool holds " + std::to_string(result.alloc) + " bytes, the source " +
                std::to_string(a.pool_bytes()) + " (corrupt source pool?)");
  pool.shrink(result.alloc);
  auto* h = cache.header.template as<PoolHeader>();
  *h = PoolHeader{pool_magic, result.root, static_cast<std::uint8_t>(s.log2_node_size), static_cast<std::uint8_t>(s.depth),
                  sizeof(V), static_cast<std::uint8_t>(a.wide_nodes() ? pool_flag_wide : 0), 0};
  cuda_check(cudaMemcpyAsync(pool.get(), h, sizeof(PoolHeader), cudaMemcpyHostToDevice, stream), "cudaMemcpyAsync(header)");
  return DeviceMatrix<V>::adopt(std::move(pool), out_shape, a.nnz(), result.root, keep_state && a.transposed(),
                                keep_state ? a.scale() : V(1), a.wide_nodes());
}

}  // namespace

template <class V>
DeviceMatrix<V> copy(Context& ctx, const DeviceMatrix<V>& a, CopyOptions options) {
  ctx.check_device("copy");
  // A version's view is not a pool of its own (other versions' nodes, the
  // family's header): rebuilt, it is.
  if (options.rebuild || a.arena()) return rebuild(ctx, a, false, false, options, true);
  DeviceBytes pool = ctx.allocate(a.pool_bytes());
  cuda_check(cudaMemcpyAsync(pool.get(), a.pool(), a.pool_bytes(), cudaMemcpyDeviceToDevice, ctx.stream()),
             "cudaMemcpyAsync(pool copy)");
  return DeviceMatrix<V>::adopt(std::move(pool), a.shape(), a.nnz(), a.root(), a.transposed(), a.scale(),
                                a.wide_nodes());
}

template <class V>
DeviceMatrix<V> materialize(Context& ctx, const DeviceMatrix<V>& a, CopyOptions options) {
  ctx.check_device("materialize");
  // A depth-2 matrix with wide nodes is one sub-tree: a single runtime item,
  // one warp sorting the whole matrix. The one-operand add takes it to the
  // flat kernels instead (a block per block row), and its result comes back
  // without a copy (perf-log A12).
  if (a.wide_nodes() && a.shape().depth == 2) return add(ctx, a, V(1));
  return rebuild(ctx, a, a.transposed(), a.scale() != V(1), options, false);
}

template <class V>
DeviceMatrix<V> copy(const DeviceMatrix<V>& a, CopyOptions options, cudaStream_t stream) {
  Context ctx(stream, runtime::synchronous_allocator());
  DeviceMatrix<V> c = copy(ctx, a, options);
  cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize(copy)");
  return c;
}

template <class V>
DeviceMatrix<V> materialize(const DeviceMatrix<V>& a, CopyOptions options, cudaStream_t stream) {
  Context ctx(stream, runtime::synchronous_allocator());
  DeviceMatrix<V> c = materialize(ctx, a, options);
  cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize(materialize)");
  return c;
}

template DeviceMatrix<float> copy(const DeviceMatrix<float>&, CopyOptions, cudaStream_t);
template DeviceMatrix<double> copy(const DeviceMatrix<double>&, CopyOptions, cudaStream_t);
template DeviceMatrix<float> materialize(const DeviceMatrix<float>&, CopyOptions, cudaStream_t);
template DeviceMatrix<double> materialize(const DeviceMatrix<double>&, CopyOptions, cudaStream_t);
template DeviceMatrix<float> copy(Context&, const DeviceMatrix<float>&, CopyOptions);
template DeviceMatrix<double> copy(Context&, const DeviceMatrix<double>&, CopyOptions);
template DeviceMatrix<float> materialize(Context&, const DeviceMatrix<float>&, CopyOptions);
template DeviceMatrix<double> materialize(Context&, const DeviceMatrix<double>&, CopyOptions);

}  // namespace hisparse::ops
