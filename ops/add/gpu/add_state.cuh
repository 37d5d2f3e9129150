#pragma once
// What the add's procedures share: the queue item, the run's state (both
// operands, the output pool and its allocator, counters), and warp-level
// helpers (scans, node zeroing, separately rounded arithmetic, allocation).
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "hisparse/formats/node_view.hpp"
#include "hisparse/ops/warp_counting_sort.cuh"

namespace hisparse::ops::add_gpu {

struct AddItem {
  NodeRef a, b;  // the operands' nodes at this position; null where absent (never both)
  std::uint32_t level;
  std::uint32_t tally;  // 1 + the SubtreeTally of the level depth-2 sub-tree it is in; 0: none
  NodeRef* slot;  // where the new node's reference goes
};
static_assert(sizeof(AddItem) == 24);

// One operand: its pool and state.
template <class V>
struct Operand {
  const std::byte* pool;  // null in the one-operand add's B (its root is null too)
  bool transposed;
  V k;  // alpha·scale(A) or beta·scale(B)
};

template <class V>
struct WideEntry {
  std::uint32_t key;  // standard tree order: (row_hi, col_hi, row_lo, col_lo), b bits each
  V value;
};

// A level depth-2 sub-tree pair handed from the runtime's AddWide to the
// flat kernels (add_flat.cuh): too large for one warp.
struct FlatPair {
  NodeRef a, b;
  NodeRef* slot;
};
static_assert(sizeof(FlatPair) == 16);

// Pairs with more entries than this go to the flat kernels. A warp merges a
// pair at ~0.1 us an entry (the Laplacian 1789^2's one pair of 49 k entries
// held up its whole traversal for 5 ms), while the flat kernels' d thread
// blocks per pair only pay off for large pairs (R-MAT 2^20's 4 096 pairs,
// all of 4-14 k entries, took 8.7 ms by AddWide, 25 ms by the flat kernels
// with 1 696 of them handed over). Sub-tree pair sizes of the families:
// perf-log A9 and A10.
inline constexpr std::uint32_t flat_pair_entries = 16384;

inline constexpr unsigned flag_pool_too_small = 1u;
inline constexpr unsigned flag_scratch_too_small = 2u;
// A level depth-2 sub-tree merged node by node came out in the standard form
// where the COOW rule wants one COOW node: the add is run again with every
// such pair merged by AddWide (check_standard_subtrees).
inline constexpr unsigned flag_not_canonical = 4u;

// A level depth-2 sub-tree of a wide pool whose operands are both in the
// standard form (an inner node and leaves, no COOW node) is merged by AddNode,
// node by node, as in a standard pool: far faster than gathering, sorting and
// merging it whole (Laplacian 1789^2: 2.0 against 4.7 ms, perf-log A13). Its
// entries and bytes are summed here as its nodes are written; after the run,
// a sub-tree whose COOW form would be no larger breaks the canonical form.
struct SubtreeTally {
  unsigned long long bytes;  // the inner node's and the leaves'
  unsigned long long m;      // entries
};

template <class V>
struct AddState {
  Operand<V> a, b;
  std::byte* dst;
  unsigned long long* alloc;  // next free byte of dst
  std::uint64_t capacity;
  unsigned* flags;
  unsigned long long* nnz;
  WideEntry<V>* scratch;  // wide pools: 2 x (nnz(A) + nnz(B)) entries
  unsigned long long* scratch_alloc;
  std::uint64_t scratch_capacity;
  std::uint32_t log2d;
  std::uint32_t depth;
  bool wide;
  FlatPair* big_pairs;  // null: AddWide merges every pair itself
  unsigned* big_count;
  std::uint32_t big_capacity;
  SubtreeTally* tallies;  // null: every level depth-2 pair of a wide pool goes to AddWide
  unsigned* tally_count;
  std::uint32_t tally_capacity;
};

// ---- warp helpers ------------------------------------------------------------

inline constexpr unsigned full_warp = 0xffffffffu;

__device__ inline unsigned lanes_below(std::uint32_t lane) { return (1u << lane) - 1u; }
__device__ inline unsigned lanes_up_to(std::uint32_t lane) { return full_warp >> (31u - lane); }

using gpu::warp_inclusive_sum;

__device__ inline unsigned long long warp_sum64(unsigned long long v) {
  for (std::uint32_t o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(full_warp, v, o);
  return v;
}

// Zeroes a node's bytes (a multiple of 16, 16-aligned): padding and absent
// dense cells must be zero. The fence orders these stores before the
// children that are enqueued next write their references into this node.
__device__ inline void zero_node(std::byte* dst, std::uint64_t bytes, std::uint32_t lane) {
  auto* q = reinterpret_cast<uint4*>(dst);
  for (std::uint64_t i = lane; i < bytes / 16; i += 32) q[i] = make_uint4(0, 0, 0, 0);
  __threadfence();
  __syncwarp();
}

__device__ inline void set_mask_bit(std::byte* mask, std::uint32_t cell) {
  atomicOr(reinterpret_cast<unsigned*>(mask) + (cell >> 5), 1u << (cell & 31u));
}

// Separate roundings, as on the host (nvcc would otherwise fuse a*b + c).
__device__ inline float mul_rn(float x, float y) { return __fmul_rn(x, y); }
__device__ inline double mul_rn(double x, double y) { return __dmul_rn(x, y); }
__device__ inline float add_rn(float x, float y) { return __fadd_rn(x, y); }
__device__ inline double add_rn(double x, double y) { return __dadd_rn(x, y); }

template <class V>
__device__ inline V combine(const Operand<V>& a, bool has_a, V va, const Operand<V>& b, bool has_b, V vb) {
  return add_rn(has_a ? mul_rn(a.k, va) : V(0), has_b ? mul_rn(b.k, vb) : V(0));
}

__device__ inline unsigned long long allocate(unsigned long long* counter, std::uint64_t n,
                                              std::uint32_t lane) {
  unsigned long long at = 0;
  if (lane == 0) at = atomicAdd(counter, static_cast<unsigned long long>(n));
  return __shfl_sync(full_warp, at, 0);
}

// Adds every active lane's n to the counter with one atomic; returns the
// counter's value before this lane's share. The lanes that call it together
// (as __activemask sees them) take consecutive shares in lane order.
__device__ inline unsigned long long allocate_among_active(unsigned long long* counter, unsigned long long n) {
  const unsigned active = __activemask();
  const std::uint32_t lane = threadIdx.x & 31u;
  unsigned long long below = 0, total = 0;
  for (unsigned m = active; m != 0; m &= m - 1) {
    const int j = __ffs(m) - 1;
    const unsigned long long v = __shfl_sync(active, n, j);
    total += v;
    if (static_cast<std::uint32_t>(j) < lane) below += v;
  }
  const int leader = __ffs(active) - 1;
  unsigned long long base = 0;
  if (static_cast<int>(lane) == leader && total != 0) base = atomicAdd(counter, total);
  return __shfl_sync(active, base, leader) + below;
}

}  // namespace hisparse::ops::add_gpu
