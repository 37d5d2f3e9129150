// Dispatch layer of GPU sparse add.
#include <algorithm>
#include <string>

#include "add_procedures.cuh"
#include "hisparse/ops/add_gpu.hpp"
#include "hisparse/runtime/runtime.cuh"

namespace hisparse::ops {
namespace {

using namespace add_gpu;

template <class V>
using AddSetup = runtime::QueueSetup<256, runtime::ProcedureQueues<AddNode<V>>, runtime::ProcedureQueues<AddWide<V>>>;

struct Counters {
  unsigned long long alloc;
  unsigned long long nnz;
  unsigned long long scratch_alloc;
  NodeRef root;
  unsigned flags;
};

}  // namespace

template <class V>
DeviceMatrix<V> add(const DeviceMatrix<V>& a, const DeviceMatrix<V>& b, V alpha, V beta, AddOptions options,
                    cudaStream_t stream) {
  if (a.rows() != b.rows() || a.cols() != b.cols())
    throw Error("add: op(A) is " + std::to_string(a.rows()) + " x " + std::to_string(a.cols()) + " but op(B) is " +
                std::to_string(b.rows()) + " x " + std::to_string(b.cols()));
  if (a.shape().log2_node_size != b.shape().log2_node_size)
    throw Error("add: node sizes differ (" + std::to_string(1u << a.shape().log2_node_size) + " and " +
                std::to_string(1u << b.shape().log2_node_size) + "); convert one operand first");
  const std::uint32_t log2d = a.shape().log2_node_size;
  const Shape shape = Shape::make(a.rows(), a.cols(), 1u << log2d);
  const bool wide = a.wide_nodes() || b.wide_nodes();
  const NodeRef ra = a.root(), rb = b.root();
  const auto header_of = [&](NodeRef root) {
    return PoolHeader{pool_magic, root, static_cast<std::uint8_t>(log2d), static_cast<std::uint8_t>(shape.depth), sizeof(V),
                      static_cast<std::uint8_t>(wide ? pool_flag_wide : 0), 0};
  };
  if (ra == null_ref && rb == null_ref) {
    DeviceBytes pool(sizeof(PoolHeader));
    const PoolHeader h = header_of(null_ref);
    cuda_check(cudaMemcpyAsync(pool.get(), &h, sizeof(h), cudaMemcpyHostToDevice, stream), "cudaMemcpyAsync(header)");
    cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize(add)");
    return DeviceMatrix<V>::adopt(std::move(pool), shape, 0, null_ref, false, V(1), wide);
  }

  // Shadows for re-sorting transposed sparse nodes, scratch for wide sub-trees.
  DeviceBytes a_sorted(a.transposed() ? a.pool_bytes() : 0), b_sorted(b.transposed() ? b.pool_bytes() : 0);
  const std::uint64_t scratch_entries = wide ? 2 * (a.nnz() + b.nnz()) : 0;
  DeviceBytes scratch(scratch_entries * sizeof(WideEntry<V>));
  DeviceBytes counters(sizeof(Counters));
  auto* ct = counters.as<Counters>();

  // Canonical operands without wide nodes never need more than their pools
  // together; with wide nodes a merged sub-tree can change form, so the
  // bound may be short, and then the first run counts the exact size.
  std::uint64_t capacity = a.pool_bytes() + b.pool_bytes();
  for (int attempt = 0;; ++attempt) {
    if (capacity > max_pool_bytes + node_alignment)
      throw LimitError("add: the result needs a node pool of " + std::to_string(capacity) +
                       " bytes, more than the 4 GiB limit");
    DeviceBytes pool(capacity);
    const Counters init{sizeof(PoolHeader), 0, 0, null_ref, 0};
    cuda_check(cudaMemcpyAsync(ct, &init, sizeof(init), cudaMemcpyHostToDevice, stream), "cudaMemcpyAsync(counters)");
    AddState<V> st{{a.pool(), a_sorted.as<std::byte>(), a.transposed(), alpha * a.scale()},
                   {b.pool(), b_sorted.as<std::byte>(), b.transposed(), beta * b.scale()},
                   pool.as<std::byte>(), &ct->alloc, capacity, &ct->flags, &ct->nnz, scratch.as<WideEntry<V>>(),
                   &ct->scratch_alloc, scratch_entries, log2d, shape.depth, wide};
    runtime::RuntimeConfig cfg;
    cfg.controller = options.controller;
    cfg.default_capacity = static_cast<std::uint32_t>(std::min<std::uint64_t>(
        std::max<std::uint64_t>(1024, (a.pool_bytes() + b.pool_bytes()) / 16), 1u << 30));
    {
      runtime::Runtime<AddSetup<V>, AddState<V>> rt(cfg, st, stream);
      const AddItem root{ra, rb, 0, 0, &ct->root};
      if (wide && shape.depth == 2) rt.template seed<AddWide<V>>(root);
      else rt.template seed<AddNode<V>>(root);
      rt.run();
    }
    Counters done{};
    cuda_check(cudaMemcpyAsync(&done, ct, sizeof(done), cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync(counters)");
    cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize(add)");
    if (done.flags & flag_not_canonical)
      throw Error("add: an operand holds a node whose type is not the one the dense/sparse rule gives (not canonical)");
    if (done.flags & flag_scratch_too_small)
      throw Error("add: wide sub-trees hold more entries than the operands' nnz (corrupt operand?)");
    if (done.flags & flag_pool_too_small) {
      if (attempt > 0) throw Error("add: the output pool size changed between two traversals (internal error)");
      capacity = done.alloc;
      continue;
    }
    const PoolHeader h = header_of(done.root);
    cuda_check(cudaMemcpyAsync(pool.get(), &h, sizeof(h), cudaMemcpyHostToDevice, stream), "cudaMemcpyAsync(header)");
    if (done.alloc != capacity) {
      DeviceBytes exact(done.alloc);
      cuda_check(cudaMemcpyAsync(exact.get(), pool.get(), done.alloc, cudaMemcpyDeviceToDevice, stream),
                 "cudaMemcpyAsync(pool)");
      pool = std::move(exact);
    }
    cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize(add)");
    return DeviceMatrix<V>::adopt(std::move(pool), shape, done.nnz, done.root, false, V(1), wide);
  }
}

template DeviceMatrix<float> add(const DeviceMatrix<float>&, const DeviceMatrix<float>&, float, float, AddOptions,
                                 cudaStream_t);
template DeviceMatrix<double> add(const DeviceMatrix<double>&, const DeviceMatrix<double>&, double, double, AddOptions,
                                  cudaStream_t);

}  // namespace hisparse::ops
