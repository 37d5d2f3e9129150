// Dispatch layer of GPU copy and materialize.
#include <string>

#include "copy_procedures.cuh"
#include "hisparse/ops/copy_gpu.hpp"
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

// Walks `a` through the runtime and writes every node into a fresh pool.
template <class V>
DeviceMatrix<V> rebuild(const DeviceMatrix<V>& a, bool transpose, bool apply_scale, CopyOptions options,
                        cudaStream_t stream, bool keep_state) {
  const Shape& s = a.shape();
  Shape out_shape = s;
  if (transpose) std::swap(out_shape.rows, out_shape.cols);
  DeviceBytes pool(a.pool_bytes());
  cuda_check(cudaMemsetAsync(pool.get(), 0, pool.size(), stream), "cudaMemsetAsync(pool)");
  DeviceBytes scratch(sizeof(Scratch));
  Scratch init{sizeof(PoolHeader), null_ref, 0};
  cuda_check(cudaMemcpyAsync(scratch.get(), &init, sizeof(init), cudaMemcpyHostToDevice, stream), "cudaMemcpyAsync(scratch)");
  auto* sc = scratch.as<Scratch>();
  // Transposing a wide node sorts it in two stable passes through a buffer;
  // each node uses the bytes at its own destination offset.
  DeviceBytes sort_buffer(a.wide_nodes() && transpose ? a.pool_bytes() : 0);
  if (a.root() != null_ref) {
    CopyState<V> st{a.pool(), pool.as<std::byte>(), sort_buffer.as<std::byte>(), &sc->alloc, pool.size(), &sc->overflow,
                    s.log2_node_size, s.depth, transpose, a.scale(), apply_scale};
    runtime::RuntimeConfig cfg;
    cfg.controller = options.controller;
    cfg.default_capacity = static_cast<std::uint32_t>(std::min<std::uint64_t>(
        std::max<std::uint64_t>(1024, a.pool_bytes() / 16), 1u << 30));
    if (options.queue_capacity != 0) cfg.default_capacity = options.queue_capacity;
    runtime::Runtime<CopySetup<V>, CopyState<V>> rt(cfg, st, stream);
    rt.template seed<CopyNode<V>>(CopyItem{a.root(), 0, &sc->root});
    rt.run();
  }
  Scratch done{};
  cuda_check(cudaMemcpyAsync(&done, scratch.get(), sizeof(done), cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync(scratch)");
  cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize(copy)");
  if (done.overflow || done.alloc != a.pool_bytes())
    throw Error("copy: rebuilt pool holds " + std::to_string(done.alloc) + " bytes, the source " +
                std::to_string(a.pool_bytes()) + " (corrupt source pool?)");
  const PoolHeader h{pool_magic, done.root, static_cast<std::uint8_t>(s.log2_node_size), static_cast<std::uint8_t>(s.depth),
                     sizeof(V), static_cast<std::uint8_t>(a.wide_nodes() ? pool_flag_wide : 0), 0};
  cuda_check(cudaMemcpyAsync(pool.get(), &h, sizeof(h), cudaMemcpyHostToDevice, stream), "cudaMemcpyAsync(header)");
  cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize(header)");
  return DeviceMatrix<V>::adopt(std::move(pool), out_shape, a.nnz(), done.root, keep_state && a.transposed(),
                                keep_state ? a.scale() : V(1), a.wide_nodes());
}

}  // namespace

template <class V>
DeviceMatrix<V> copy(const DeviceMatrix<V>& a, CopyOptions options, cudaStream_t stream) {
  if (options.rebuild) return rebuild(a, false, false, options, stream, true);
  DeviceBytes pool(a.pool_bytes());
  cuda_check(cudaMemcpyAsync(pool.get(), a.pool(), a.pool_bytes(), cudaMemcpyDeviceToDevice, stream),
             "cudaMemcpyAsync(pool copy)");
  cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize(copy)");
  return DeviceMatrix<V>::adopt(std::move(pool), a.shape(), a.nnz(), a.root(), a.transposed(), a.scale(),
                                a.wide_nodes());
}

template <class V>
DeviceMatrix<V> materialize(const DeviceMatrix<V>& a, CopyOptions options, cudaStream_t stream) {
  return rebuild(a, a.transposed(), a.scale() != V(1), options, stream, false);
}

template DeviceMatrix<float> copy(const DeviceMatrix<float>&, CopyOptions, cudaStream_t);
template DeviceMatrix<double> copy(const DeviceMatrix<double>&, CopyOptions, cudaStream_t);
template DeviceMatrix<float> materialize(const DeviceMatrix<float>&, CopyOptions, cudaStream_t);
template DeviceMatrix<double> materialize(const DeviceMatrix<double>&, CopyOptions, cudaStream_t);

}  // namespace hisparse::ops
