#pragma once
// The flat add's records and launch arguments (add_flat.cuh has the design).
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "add_wide.cuh"

namespace hisparse::ops::add_gpu {

inline constexpr std::uint32_t flat_max_bands = 256;  // d <= 256
inline constexpr std::uint32_t flat_warps = 16;       // units per band (at most d)
inline constexpr std::uint32_t flat_threads = 32 * flat_warps;

// log2 of the rows of a unit.
__host__ __device__ constexpr std::uint32_t flat_unit_log2_rows(std::uint32_t log2d) {
  return log2d > 4 ? log2d - 4 : 0u;
}
// Units per band: d / rows of a unit.
__host__ __device__ constexpr std::uint32_t flat_units(std::uint32_t log2d) {
  return 1u << (log2d - flat_unit_log2_rows(log2d));
}

// One band's union and its place in the node (filled by the last band).
struct FlatBand {
  std::uint32_t m;       // union entries
  std::uint32_t blocks;  // its non-empty d x d blocks: leaves in the standard form
  unsigned long long leaf_bytes;
  std::uint32_t m_before, blocks_before;
  unsigned long long leaf_at;  // byte offset in dst of the band's first leaf
};

// One unit's union: m entries at scratch index u, row-major.
struct FlatUnit {
  unsigned long long u;
  std::uint32_t m, unused;
};

// A transposed operand's entries of one unit (scratch indices).
struct FlatBucket {
  std::uint32_t count, start, cursor, unused;
};

// Per pair, zeroed before its first kernel.
struct FlatWork {
  unsigned tickets[4];                // bucket sides a and b, merge; one spare
  unsigned form;                      // 0 none (failed), 1 COOW, 2 standard
  unsigned inner_type;                // NodeType of the inner node (standard)
  unsigned long long offset;          // the node's byte offset in dst
  unsigned long long bucket_base[2];  // scratch index of each side's buckets
};

// What the host reads back after a depth-2 add: written by flat_merge's last
// block into mapped host memory, where the host finds it once the stream is
// synchronised (no copy back); that block then restores the device counters
// to their initial values for the context's next call (no copy in).
struct FlatResult {
  unsigned long long alloc;  // the result pool's bytes
  unsigned long long nnz;
  NodeRef root;
  unsigned flags;
};

template <class V>
struct FlatArgs {
  AddState<V> st;
  const FlatPair* pairs;  // blockIdx.y's pair; null: `root` alone
  FlatPair root;          // the matrices' roots and the result's root slot
  FlatWork* work;         // one per pair
  FlatBand* bands;        // d per pair
  FlatUnit* units;        // d x flat_units per pair
  FlatBucket* buckets;    // 2 x d x flat_units per pair (side a, then side b)
  PoolHeader header;      // the result's, written with its root when `pairs` is null
  std::uint32_t arena_entries;  // flat_merge's shared arena (flat_arena_entries)
  FlatResult* result;           // mapped host memory when `pairs` is null, else null
  unsigned scanned;             // bit s: side s (0 A, 1 B) is scanned, not bucketed (flat_scanned)
};

// One pair's operands, slot and work memory.
struct FlatPairView {
  NodeRef a, b;
  NodeRef* slot;
  FlatWork* work;
  FlatBand* bands;
  FlatUnit* units;
  FlatBucket* buckets;
};

template <class V>
__device__ inline FlatPairView flat_pair(const FlatArgs<V>& args, std::uint32_t p) {
  const std::uint32_t d = 1u << args.st.log2d, u = d * flat_units(args.st.log2d);
  const FlatPair fp = args.pairs != nullptr ? args.pairs[p] : args.root;
  return {fp.a, fp.b, fp.slot, args.work + p, args.bands + std::size_t{p} * d, args.units + std::size_t{p} * u,
          args.buckets + std::size_t{p} * 2 * u};
}

// A unit sorts and merges in shared memory: each warp's digit counts, then
// an arena the warps take their room from as they need it (a unit with a
// heavy row can take most of it), in scratch beyond. A launch of few blocks
// (a depth-2 matrix's bands) gives each block most of a multiprocessor's
// shared memory, for the heaviest units; one of many (the sub-tree pairs of
// a deeper matrix, d blocks each) half of it, so that two blocks run on
// each multiprocessor (its registers allow two of 512 threads): flat_merge
// is bound by the latency of its dependent loads, and one block per
// multiprocessor left 3/4 of the warp slots empty (perf-log A10). The
// kernel's static shared memory (~18.5 KiB: the block-wide passes of heavy
// units, add_flat_block.cuh) comes on top: 200 + 18.5 KiB stay under the 227
// a block may have, and two blocks of 92 + 18.5 under a multiprocessor's 228.
inline constexpr std::uint32_t flat_hist_bytes = flat_max_bands * sizeof(std::uint32_t);
inline constexpr std::uint32_t flat_merge_shared_bytes = 200 * 1024;      // few blocks
inline constexpr std::uint32_t flat_merge_shared_bytes_many = 92 * 1024;  // many blocks: two per multiprocessor
template <class V>
constexpr std::uint32_t flat_arena_entries(std::uint32_t shared_bytes) {
  return (shared_bytes - flat_warps * flat_hist_bytes) / sizeof(WideEntry<V>);
}

__device__ inline std::uint32_t row_key(std::uint32_t row_in_band, std::uint32_t col16, std::uint32_t b) {
  return (row_in_band << (2 * b)) | col16;
}

}  // namespace hisparse::ops::add_gpu
