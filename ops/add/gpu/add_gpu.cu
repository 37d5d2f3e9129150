// Dispatch layer of GPU sparse add.
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <string>

#include "add_flat.cuh"
#include "add_procedures.cuh"
#include "hisparse/ops/add_gpu.hpp"
#include "hisparse/ops/add_reference.hpp"
#include "hisparse/ops/cached_runtime.cuh"
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
  unsigned big_count;  // sub-tree pairs AddWide handed over (may pass the list's capacity)
  unsigned tally_count;  // level depth-2 sub-trees merged by AddNode (may pass the tallies' capacity)
  FlatWork flat;  // run_flat's for the roots, zeroed with the rest
};

// Kept in a Context between calls: the runtimes of both node-size classes
// and the counters' device and pinned memory.
template <class V>
struct AddCache : Context::CacheEntry {
  CachedRuntime<AddSetup<V, 7>, AddState<V>> rt7;
  CachedRuntime<AddSetup<V, 8>, AddState<V>> rt8;
  DeviceBytes counters;
  runtime::PinnedBuffer done{sizeof(Counters)};
  // The counters' initial values, staged here: a copy from pageable memory
  // waits for the driver to stage it (the call has synchronised before it
  // returns, so the previous call's copy is over).
  runtime::PinnedBuffer init{sizeof(Counters)};
  runtime::PinnedBuffer result{sizeof(FlatResult)};  // mapped: flat_merge writes it (flat_finish)
  DeviceBytes flat;  // FlatWork, the bands and the buckets of run_flat
  int multiprocessors = 0;
  // The device counters hold their initial values: a depth-2 add's last
  // flat_merge block restores them (flat_finish), so the next call need not
  // copy them in. False while a call is under way and after any other path.
  bool counters_reset = false;
};

// One operand of an add: a matrix's pool and state, or none (pool and root
// null: the one-operand form, C = alpha·op(A), an add with an empty matrix).
template <class V>
struct AddInput {
  const std::byte* pool = nullptr;
  NodeRef root = null_ref;
  bool transposed = false;
  V k = V(0);  // alpha·scale
  std::uint64_t nnz = 0, pool_bytes = 0;
  std::uint32_t log2d = 0;
  bool wide = false;

  static AddInput of(const DeviceMatrix<V>& m, V alpha) {
    return {m.pool(), m.root(), m.transposed(), alpha * m.scale(), m.nnz(), m.pool_bytes(), m.shape().log2_node_size,
            m.wide_nodes()};
  }
};

// A sixteenth of the never-overflowing queue bound first (the SpMV's rule,
// perf-log R4 k): the bound is a slot per 16 bytes of both operands' pools,
// gigabytes on the large families, and a context would keep it. A run that
// fills a queue is repeated with all of it.
inline constexpr std::uint64_t add_queue_share = 16;

// A result's pool keeps the room it was written into (its size shrunk) when
// at most this much, or a quarter of the result, is left over.
inline constexpr std::uint64_t add_slack_kept = 64 * 1024;

template <class Setup, class V>
void run(CachedRuntime<Setup, AddState<V>>& cached, Context& ctx, const runtime::RuntimeConfig& cfg,
         const AddState<V>& st, const AddItem& root, std::uint64_t work_bytes) {
  auto& rt = cached.get(ctx, cfg, st, work_bytes);
  // A wide pool of depth 2 never comes here: run_flat takes it.
  rt.template seed<typename Setup::template procedure_at<0>>(root);
  try {
    rt.run();
  } catch (...) {
    cached.reset();  // a stopped run leaves nothing worth keeping
    throw;
  }
}

// The flat kernels (add_flat.cuh) on sub-tree pairs too large for one warp:
// `count` pairs from the device array `pairs` (the runtime's AddWide handed
// them over), or, with `pairs` null, the matrices' roots (depth 2: the whole
// add is one pair), whose FlatWork is `root_work` (zeroed by the caller or
// by the previous call's flat_finish), whose result flat_merge writes to
// `result` (mapped memory), and whose operands hold `root_nnz` entries (a
// small transposed root is scanned, not bucketed: flat_scanned).
template <class V>
void run_flat(Context& ctx, AddCache<V>& cache, const AddState<V>& st, const FlatPair* pairs, FlatPair root,
              std::uint32_t count, FlatWork* root_work, std::uint64_t bucket_entries, std::uint32_t bands,
              const PoolHeader& header, FlatResult* result = nullptr, std::array<std::uint64_t, 2> root_nnz = {}) {
  const cudaStream_t stream = ctx.stream();
  const std::uint32_t d = 1u << st.log2d, units = d * flat_units(st.log2d);
  const unsigned scanned = pairs != nullptr ? 0u
                                            : (flat_scanned(st.a.transposed, root.a, root_nnz[0]) ? 1u : 0u) |
                                                  (flat_scanned(st.b.transposed, root.b, root_nnz[1]) ? 2u : 0u);
  const bool bucket = pairs != nullptr ? st.a.transposed || st.b.transposed
                                       : (flat_bucketed(st.a.transposed, root.a) && (scanned & 1u) == 0u) ||
                                             (flat_bucketed(st.b.transposed, root.b) && (scanned & 2u) == 0u);
  // Per pair: its work block and buckets (which must start zeroed), its
  // bands, its units.
  const std::size_t works = pairs != nullptr ? count * sizeof(FlatWork) : 0;
  const std::size_t zeroed = works + (bucket ? std::size_t{count} * 2 * units * sizeof(FlatBucket) : 0);
  const std::size_t bytes = works + std::size_t{count} * (2 * units * sizeof(FlatBucket) + d * sizeof(FlatBand) +
                                                          units * sizeof(FlatUnit));
  if (cache.flat.size() < bytes) cache.flat = ctx.allocate(bytes);
  auto* base = cache.flat.template as<std::byte>();
  if (zeroed != 0) cuda_check(cudaMemsetAsync(base, 0, zeroed, stream), "cudaMemsetAsync(flat add)");
  auto* work = pairs != nullptr ? reinterpret_cast<FlatWork*>(base) : root_work;
  auto* buckets = reinterpret_cast<FlatBucket*>(base + works);
  auto* band_records = reinterpret_cast<FlatBand*>(buckets + std::size_t{count} * 2 * units);
  auto* unit_records = reinterpret_cast<FlatUnit*>(band_records + std::size_t{count} * d);
  const dim3 grid(bands, count);
  if (cache.multiprocessors == 0)
    cuda_check(cudaDeviceGetAttribute(&cache.multiprocessors, cudaDevAttrMultiProcessorCount, ctx.device()),
               "cudaDeviceGetAttribute(multiprocessors)");
  const std::uint32_t shared_bytes = std::uint64_t{bands} * count >= 2u * static_cast<std::uint32_t>(cache.multiprocessors)
                                         ? flat_merge_shared_bytes_many
                                         : flat_merge_shared_bytes;
  const FlatArgs<V> args{st, pairs, root, work, band_records, unit_records, buckets, header,
                         flat_arena_entries<V>(shared_bytes), result, scanned};
  if (bucket) {
    // A thread per entry of a COOW node, a warp per leaf of an inner node.
    const dim3 spread(static_cast<unsigned>(std::clamp<std::uint64_t>(bucket_entries / 1024 / count, 8, 264)),
                      2 * count);
    flat_bucket_count<V><<<spread, 256, 0, stream>>>(args);
    flat_bucket_fill<V><<<spread, 256, 0, stream>>>(args);
  }
  // More than 48 KiB of dynamic shared memory: allowed once per device.
  static std::atomic<std::uint64_t> shared_allowed{0};
  const std::uint64_t bit = std::uint64_t{1} << (ctx.device() & 63);
  if ((shared_allowed.load(std::memory_order_relaxed) & bit) == 0) {
    cuda_check(cudaFuncSetAttribute(flat_merge<V>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(flat_merge_shared_bytes)),
               "cudaFuncSetAttribute(flat_merge)");
    // Both kernels ask for the largest shared-memory split, so that the
    // multiprocessors are not reconfigured between them.
    cuda_check(cudaFuncSetAttribute(flat_merge<V>, cudaFuncAttributePreferredSharedMemoryCarveout, 100),
               "cudaFuncSetAttribute(flat_merge)");
    cuda_check(cudaFuncSetAttribute(flat_write<V>, cudaFuncAttributePreferredSharedMemoryCarveout, 100),
               "cudaFuncSetAttribute(flat_write)");
    shared_allowed.fetch_or(bit, std::memory_order_relaxed);
  }
  flat_merge<V><<<grid, flat_threads, shared_bytes, stream>>>(args);
  flat_write<V><<<grid, flat_threads, 0, stream>>>(args);
  cuda_check(cudaGetLastError(), "launch of the flat add");
}

// Pairs handed to the flat kernels at once (their work memory: ~100 KiB each).
inline constexpr std::uint32_t flat_pair_batch = 256;

// Sub-trees of a wide pool tallied at most (16 bytes each); the pairs beyond
// go to AddWide.
inline constexpr std::uint64_t max_tallies = std::uint64_t{1} << 20;

// After a run: a level depth-2 sub-tree merged node by node (SubtreeTally)
// whose COOW form would be no larger than its standard one is not in the
// canonical form; the add is then run again without tallies.
template <class V>
__global__ void check_standard_subtrees(const SubtreeTally* tallies, const unsigned* count, std::uint32_t capacity,
                                        unsigned* flags) {
  const std::uint32_t n = min(*count, capacity);
  for (std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    if (coow_layout64(tallies[i].m, sizeof(V)).bytes <= tallies[i].bytes) atomicOr(flags, flag_not_canonical);
}

}  // namespace

// C = op(A)·ka + op(B)·kb in a shape of rows x cols (b.pool null: C = op(A)·ka).
template <class V>
DeviceMatrix<V> add_inputs(Context& ctx, std::uint32_t rows, std::uint32_t cols, const AddInput<V>& a,
                           const AddInput<V>& b, AddOptions options) {
  const cudaStream_t stream = ctx.stream();
  const std::uint32_t log2d = a.log2d;
  const Shape shape = Shape::make(rows, cols, 1u << log2d);
  const bool wide = a.wide || b.wide;
  const NodeRef ra = a.root, rb = b.root;
  const auto header_of = [&](NodeRef root) {
    return PoolHeader{pool_magic, root, static_cast<std::uint8_t>(log2d), static_cast<std::uint8_t>(shape.depth), sizeof(V),
                      static_cast<std::uint8_t>(wide ? pool_flag_wide : 0), 0};
  };
  if (ra == null_ref && rb == null_ref) {
    DeviceBytes pool = ctx.allocate(sizeof(PoolHeader));
    const PoolHeader h = header_of(null_ref);
    // From pageable memory: the call returns once `h` is staged.
    cuda_check(cudaMemcpyAsync(pool.get(), &h, sizeof(h), cudaMemcpyHostToDevice, stream), "cudaMemcpyAsync(header)");
    return DeviceMatrix<V>::adopt(std::move(pool), shape, 0, null_ref, false, V(1), wide);
  }

  // Phases at debug level (HISPARSE_RUNTIME_LOG=debug): where a call's time goes.
  const bool timed = runtime::log::enabled(runtime::log::Level::debug);
  using clock = std::chrono::steady_clock;
  const auto t0 = timed ? clock::now() : clock::time_point{};
  auto& cache = ctx.cached<AddCache<V>>();
  if (cache.counters.size() == 0) cache.counters = ctx.allocate(sizeof(Counters));
  // AddWide sorts in 2 entries per operand entry; run_flat may also bucket
  // a transposed operand and keep each band's union.
  const bool flat = wide && shape.depth == 2;
  const std::uint64_t scratch_entries = wide ? 3 * (a.nnz + b.nnz) : 0;
  DeviceBytes scratch = ctx.allocate(scratch_entries * sizeof(WideEntry<V>));
  // Deeper wide matrices: the list of sub-tree pairs too large for a warp.
  const auto big_capacity =
      static_cast<std::uint32_t>(wide && !flat ? (a.nnz + b.nnz) / flat_pair_entries + 1 : 0);
  DeviceBytes big_pairs = ctx.allocate(std::uint64_t{big_capacity} * sizeof(FlatPair));
  // Deeper wide matrices: tallies of the sub-trees AddNode merges (until a
  // run finds one that should have been a COOW node).
  bool tallied = wide && !flat;
  const auto tally_capacity =
      static_cast<std::uint32_t>(tallied ? std::min<std::uint64_t>(a.nnz + b.nnz, max_tallies) : 0);
  DeviceBytes tallies = ctx.allocate(std::uint64_t{tally_capacity} * sizeof(SubtreeTally));
  auto* ct = cache.counters.template as<Counters>();
  auto* done = cache.done.template as<Counters>();

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
  std::uint64_t capacity = a.pool_bytes + b.pool_bytes;
  if (wide) capacity = round_up(capacity + capacity / 2, node_alignment);
  if (options.initial_pool_bytes != 0) capacity = round_up(std::max<std::uint64_t>(options.initial_pool_bytes, sizeof(PoolHeader)), node_alignment);
  capacity = capped(capacity);
  std::uint64_t share = options.queue_capacity == 0 ? add_queue_share : 1;
  for (;;) {
    DeviceBytes pool = ctx.allocate(capacity);
    if (!flat || !cache.counters_reset) {
      auto* init = cache.init.template as<Counters>();
      *init = Counters{sizeof(PoolHeader), 0, 0, null_ref, 0, 0, 0, FlatWork{}};  // tally_count 0
      cuda_check(cudaMemcpyAsync(ct, init, sizeof(Counters), cudaMemcpyHostToDevice, stream),
                 "cudaMemcpyAsync(counters)");
    }
    cache.counters_reset = false;  // until this call is over
    const AddState<V> st{{a.pool, a.transposed, a.k},
                         {b.pool, b.transposed, b.k},
                         pool.as<std::byte>(), &ct->alloc, capacity, &ct->flags, &ct->nnz, scratch.as<WideEntry<V>>(),
                         &ct->scratch_alloc, scratch_entries, log2d, shape.depth, wide,
                         big_capacity != 0 ? big_pairs.as<FlatPair>() : nullptr, &ct->big_count, big_capacity,
                         tallied ? tallies.as<SubtreeTally>() : nullptr, &ct->tally_count, tally_capacity};
    runtime::RuntimeConfig cfg;
    cfg.controller = options.controller;
    // Items in flight never outnumber the operands' nodes (16 bytes at least
    // each); the wide-sub-tree queue stays small in a pool without them.
    const auto slots = static_cast<std::uint32_t>(std::min<std::uint64_t>(
        std::max<std::uint64_t>(1024, (a.pool_bytes + b.pool_bytes) / 16 / share), 1u << 30));
    cfg.capacities = {slots, wide ? slots : 1024u};
    if (options.queue_capacity != 0) cfg.capacities = {options.queue_capacity, options.queue_capacity};
    const AddItem root{ra, rb, 0, 0, &ct->root};
    const auto t_setup = timed ? clock::now() : clock::time_point{};
    try {
      const std::uint64_t work = a.pool_bytes + b.pool_bytes;
      if (flat)
        run_flat(ctx, cache, st, nullptr, FlatPair{ra, rb, &ct->root}, 1, &ct->flat, a.nnz + b.nnz,
                 static_cast<std::uint32_t>((std::uint64_t{shape.rows} + (1u << log2d) - 1) >> log2d),
                 header_of(null_ref), cache.result.template as<FlatResult>(), {a.nnz, b.nnz});
      else if (log2d <= 7) run<AddSetup<V, 7>>(cache.rt7, ctx, cfg, st, root, work);
      else run<AddSetup<V, 8>>(cache.rt8, ctx, cfg, st, root, work);
      if (!flat && tallied) {
        check_standard_subtrees<V><<<std::min<std::uint32_t>(256, (tally_capacity + 255) / 256), 256, 0, stream>>>(
            st.tallies, st.tally_count, tally_capacity, st.flags);
        cuda_check(cudaGetLastError(), "launch of check_standard_subtrees");
      }
    } catch (const runtime::QueueOverflow&) {
      if (share == 1) throw;
      share = 1;  // the run wrote nothing the next one keeps: the counters start again
      continue;
    }
    const auto t_run = timed ? clock::now() : clock::time_point{};
    if (flat) {
      // flat_merge wrote the result to mapped memory and reset the counters.
      cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize(add)");
      const FlatResult& r = *cache.result.template as<FlatResult>();
      *done = Counters{r.alloc, r.nnz, 0, r.root, r.flags, 0, 0, FlatWork{}};
      cache.counters_reset = true;
    } else {
      cuda_check(cudaMemcpyAsync(done, ct, sizeof(Counters), cudaMemcpyDeviceToHost, stream),
                 "cudaMemcpyAsync(counters)");
      cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize(add)");
    }
    if (done->big_count != 0 && (done->flags & (flag_pool_too_small | flag_scratch_too_small | flag_not_canonical)) == 0) {
      // The large sub-tree pairs, by the flat kernels, a batch at a time.
      const std::uint32_t n = std::min(done->big_count, big_capacity);
      for (std::uint32_t first = 0; first < n; first += flat_pair_batch)
        run_flat(ctx, cache, st, big_pairs.as<FlatPair>() + first, FlatPair{}, std::min(flat_pair_batch, n - first),
                 nullptr, a.nnz + b.nnz, 1u << log2d, header_of(null_ref));
      cuda_check(cudaMemcpyAsync(done, ct, sizeof(Counters), cudaMemcpyDeviceToHost, stream),
                 "cudaMemcpyAsync(counters)");
      cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize(add)");
      if (timed) runtime::log::debug("add: " + std::to_string(n) + " sub-tree pairs by the flat kernels");
    }
    const auto t_read = timed ? clock::now() : clock::time_point{};
    if (done->flags & flag_scratch_too_small)
      throw Error("add: wide sub-trees hold more entries than the operands' nnz (corrupt operand?)");
    if (done->flags & flag_pool_too_small) {
      if (capacity == limit)
        throw LimitError(limit == max_pool_bytes
                             ? std::string("add: the result needs a node pool larger than the 4 GiB limit")
                             : "add: the result needs a node pool larger than AddOptions::max_pool_bytes (" +
                                   std::to_string(limit) + " bytes)");
      capacity = capped(round_up(2 * capacity, node_alignment));
      continue;
    }
    if (done->flags & flag_not_canonical) {
      // A sub-tree merged node by node wants the COOW form: every level
      // depth-2 pair goes to AddWide this time.
      if (timed) runtime::log::debug("add: a standard sub-tree should be COOW; run again through AddWide");
      tallied = false;
      continue;
    }
    const Counters result = *done;
    if (!flat) {  // run_flat wrote it
      const PoolHeader h = header_of(result.root);
      cuda_check(cudaMemcpyAsync(pool.get(), &h, sizeof(h), cudaMemcpyHostToDevice, stream), "cudaMemcpyAsync(header)");
    }
    // The pool is cut to its size: in place where little room is left over
    // (the allocation stays whole, perf-log A8), by a copy otherwise.
    if (capacity - result.alloc <= std::max<std::uint64_t>(add_slack_kept, result.alloc / 4)) {
      pool.shrink(result.alloc);
    } else {
      DeviceBytes exact = ctx.allocate(result.alloc);
      cuda_check(cudaMemcpyAsync(exact.get(), pool.get(), result.alloc, cudaMemcpyDeviceToDevice, stream),
                 "cudaMemcpyAsync(pool)");
      pool = std::move(exact);  // the larger pool goes back in stream order, after the copy
    }
    if (timed) {
      const auto us = [](auto from, auto to) { return std::to_string(std::chrono::duration<double, std::micro>(to - from).count()); };
      runtime::log::debug("add: set-up " + us(t0, t_setup) + " us, traversal " + us(t_setup, t_run) + ", counters read " +
                          us(t_run, t_read) + ", header and cut " + us(t_read, clock::now()) + " us");
    }
    return DeviceMatrix<V>::adopt(std::move(pool), shape, result.nnz, result.root, false, V(1), wide);
  }
}

template <class V>
DeviceMatrix<V> add(Context& ctx, const DeviceMatrix<V>& a, const DeviceMatrix<V>& b, V alpha, V beta,
                    AddOptions options) {
  ctx.check_device("add");
  check_add_operands(a.rows(), a.cols(), 1u << a.shape().log2_node_size, b.rows(), b.cols(),
                     1u << b.shape().log2_node_size);
  return add_inputs(ctx, a.rows(), a.cols(), AddInput<V>::of(a, alpha), AddInput<V>::of(b, beta), options);
}

template <class V>
DeviceMatrix<V> add(Context& ctx, const DeviceMatrix<V>& a, V alpha, AddOptions options) {
  ctx.check_device("add");
  AddInput<V> none;
  none.log2d = a.shape().log2_node_size;
  return add_inputs(ctx, a.rows(), a.cols(), AddInput<V>::of(a, alpha), none, options);
}

template <class V>
DeviceMatrix<V> add(const DeviceMatrix<V>& a, const DeviceMatrix<V>& b, V alpha, V beta, AddOptions options,
                    cudaStream_t stream) {
  Context ctx(stream, runtime::synchronous_allocator());
  DeviceMatrix<V> c = add(ctx, a, b, alpha, beta, options);
  cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize(add)");
  return c;
}

template DeviceMatrix<float> add(const DeviceMatrix<float>&, const DeviceMatrix<float>&, float, float, AddOptions,
                                 cudaStream_t);
template DeviceMatrix<float> add(Context&, const DeviceMatrix<float>&, const DeviceMatrix<float>&, float, float,
                                 AddOptions);
template DeviceMatrix<double> add(Context&, const DeviceMatrix<double>&, const DeviceMatrix<double>&, double, double,
                                  AddOptions);
template DeviceMatrix<double> add(const DeviceMatrix<double>&, const DeviceMatrix<double>&, double, double, AddOptions,
                                  cudaStream_t);
template DeviceMatrix<float> add(Context&, const DeviceMatrix<float>&, float, AddOptions);
template DeviceMatrix<double> add(Context&, const DeviceMatrix<double>&, double, AddOptions);

}  // namespace hisparse::ops
