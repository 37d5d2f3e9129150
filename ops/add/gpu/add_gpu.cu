// Dispatch layer of GPU sparse add.
#include <algorithm>
#include <string>

#include "add_procedures.cuh"
#include "hisparse/ops/add_gpu.hpp"
#include "hisparse/ops/add_reference.hpp"
#include "hisparse/runtime/runtime.cuh"

namespace hisparse::ops {
namespace {

using namespace add_gpu;

// Blocks of one warp: items differ widely in cost (a one-entry leaf beside a
// dense one), and warps of a larger block would wait at its barriers for
// the slowest item of each batch (56% of all stall cycles with 4-warp
// blocks, by Nsight Compute). Node sizes up to 128 (the default) take 5 KiB
// of bitmaps a warp; 256 takes 20 KiB.
template <class V, std::uint32_t Log2Cap>
using AddSetup = runtime::QueueSetup<32, runtime::ProcedureQueues<AddNode<V, Log2Cap>>,
                                     runtime::ProcedureQueues<AddWide<V>>>;

struct Counters {
  unsigned long long alloc;
  unsigned long long nnz;
  unsigned long long scratch_alloc;
  NodeRef root;
  unsigned flags;
};

template <class Setup, class V>
void run(const runtime::RuntimeConfig& cfg, const AddState<V>& st, const AddItem& root, cudaStream_t stream) {
  runtime::Runtime<Setup, AddState<V>> rt(cfg, st, stream);
  if (st.wide && st.depth == 2) rt.template seed<AddWide<V>>(root);
  else rt.template seed<typename Setup::template procedure_at<0>>(root);
  rt.run();
}

}  // namespace

template <class V>
DeviceMatrix<V> add(const DeviceMatrix<V>& a, const DeviceMatrix<V>& b, V alpha, V beta, AddOptions options,
                    cudaStream_t stream) {
  check_add_operands(a.rows(), a.cols(), 1u << a.shape().log2_node_size, b.rows(), b.cols(),
                     1u << b.shape().log2_node_size);
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

  const std::uint64_t scratch_entries = wide ? 2 * (a.nnz() + b.nnz()) : 0;
  DeviceBytes scratch(scratch_entries * sizeof(WideEntry<V>));
  DeviceBytes counters(sizeof(Counters));
  auto* ct = counters.as<Counters>();

  // Without wide nodes, an output node never takes more bytes than the two
  // it merges (a dense one bounds the output; sparse bytes are subadditive),
  // so the operands' pools together suffice. With wide nodes a merged
  // sub-tree can change form (at most 1.5 x bytes); should a pool still be
  // short, the run is repeated with twice the room. Every bound is capped at
  // the format's limit (the host writer's, max_pool_bytes) or the caller's,
  // so that a result that fits is never refused for its operands' size.
  const std::uint64_t limit = options.max_pool_bytes == 0
                                  ? max_pool_bytes
                                  : std::clamp<std::uint64_t>(options.max_pool_bytes, sizeof(PoolHeader), max_pool_bytes);
  const auto capped = [limit](std::uint64_t bytes) { return std::min<std::uint64_t>(bytes, limit); };
  std::uint64_t capacity = a.pool_bytes() + b.pool_bytes();
  if (wide) capacity = round_up(capacity + capacity / 2, node_alignment);
  if (options.initial_pool_bytes != 0) capacity = round_up(std::max<std::uint64_t>(options.initial_pool_bytes, sizeof(PoolHeader)), node_alignment);
  capacity = capped(capacity);
  for (;;) {
    DeviceBytes pool(capacity);
    const Counters init{sizeof(PoolHeader), 0, 0, null_ref, 0};
    cuda_check(cudaMemcpyAsync(ct, &init, sizeof(init), cudaMemcpyHostToDevice, stream), "cudaMemcpyAsync(counters)");
    const AddState<V> st{{a.pool(), a.transposed(), alpha * a.scale()},
                         {b.pool(), b.transposed(), beta * b.scale()},
                         pool.as<std::byte>(), &ct->alloc, capacity, &ct->flags, &ct->nnz, scratch.as<WideEntry<V>>(),
                         &ct->scratch_alloc, scratch_entries, log2d, shape.depth, wide};
    runtime::RuntimeConfig cfg;
    cfg.controller = options.controller;
    // Items in flight never outnumber the operands' nodes (16 bytes at least
    // each); the wide-sub-tree queue stays small in a pool without them.
    const auto slots = static_cast<std::uint32_t>(std::min<std::uint64_t>(
        std::max<std::uint64_t>(1024, (a.pool_bytes() + b.pool_bytes()) / 16), 1u << 30));
    cfg.capacities = {slots, wide ? slots : 1024u};
    if (options.queue_capacity != 0) cfg.capacities = {options.queue_capacity, options.queue_capacity};
    const AddItem root{ra, rb, 0, 0, &ct->root};
    if (log2d <= 7) run<AddSetup<V, 7>>(cfg, st, root, stream);
    else run<AddSetup<V, 8>>(cfg, st, root, stream);
    Counters done{};
    cuda_check(cudaMemcpyAsync(&done, ct, sizeof(done), cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync(counters)");
    cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize(add)");
    if (done.flags & flag_scratch_too_small)
      throw Error("add: wide sub-trees hold more entries than the operands' nnz (corrupt operand?)");
    if (done.flags & flag_pool_too_small) {
      if (capacity == limit)
        throw LimitError(limit == max_pool_bytes
                             ? std::string("add: the result needs a node pool larger than the 4 GiB limit")
                             : "add: the result needs a node pool larger than AddOptions::max_pool_bytes (" +
                                   std::to_string(limit) + " bytes)");
      capacity = capped(round_up(2 * capacity, node_alignment));
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
