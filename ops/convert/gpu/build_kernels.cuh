#pragma once
// Kernels of the GPU build (device arrays -> node pool). The orchestration,
// with the order of steps and why, is in build_gpu.cuh.
//
// Keys: an entry (r, c) sorts by (R, loc) with R = r >> b its leaf block row
// and loc = (C << 2b) | (r & m) << b | (c & m), C = c >> b: entries grouped by
// leaf, leaves of a block row by column, entries within a leaf row-major (the
// order of a sparse leaf). A leaf's tree key interleaves the digits of (R, C)
// over the depth-1 upper levels, root first: sorting leaves by it gives the
// pool's (the host builder's) node order. Tree keys reach 2b(depth-1) <= 94
// bits, so they are (hi, lo) pairs; hi is zero for every matrix up to 2^32.
#include <bit>
#include <cstdint>
#include <type_traits>

#include "hisparse/formats/node.hpp"

namespace hisparse::ops::convert_detail {

using u32 = std::uint32_t;
using u64 = std::uint64_t;

inline u32 bit_width_of(u64 v) { return static_cast<u32>(std::bit_width(v)); }

struct NotEqual {
  template <class T>
  __device__ bool operator()(const T& a, const T& b) const { return a != b; }
};

struct Key128 {
  u64 hi, lo;
  __device__ Key128 shr(u32 s) const {
    if (s == 0) return *this;
    if (s >= 64) return {0, s >= 128 ? 0 : hi >> (s - 64)};
    return {hi >> s, (lo >> s) | (hi << (64 - s))};
  }
  __device__ bool operator!=(const Key128& o) const { return hi != o.hi || lo != o.lo; }
};

__device__ inline Key128 tree_key_at(const u64* lo, const u64* hi, u64 t) { return {hi ? hi[t] : 0, lo[t]}; }

// ---- input: checks and keys ------------------------------------------------

// Row pointers: start at 0, never decrease, end at nnz. bad gets the smallest
// offending row (rows for the last pointer).
template <class I>
__global__ void check_row_ptr_kernel(const I* row_ptr, u64 rows, u64 nnz, unsigned long long* bad) {
  for (u64 r = blockIdx.x * u64(blockDim.x) + threadIdx.x; r <= rows; r += u64(gridDim.x) * blockDim.x) {
    const long long p = static_cast<long long>(row_ptr[r]);
    bool ok = true;
    if (r == 0 && p != 0) ok = false;
    if (r < rows && static_cast<long long>(row_ptr[r + 1]) < p) ok = false;
    if (r == rows && (p < 0 || static_cast<u64>(p) != nnz)) ok = false;
    if (!ok) atomicMin(bad, static_cast<unsigned long long>(r));
  }
}

template <class I>
__device__ bool index_ok(I v, u64 limit) {
  if constexpr (std::is_signed_v<I>) {
    if (v < 0) return false;
  }
  return static_cast<u64>(v) < limit;
}

__device__ inline u64 local_key(u64 r, u64 c, u32 b) {
  const u64 m = (u64{1} << b) - 1;
  return ((c >> b) << (2 * b)) | ((r & m) << b) | (c & m);
}

// The tree key of leaf block (R, C): their digits interleaved over the
// upper levels, root first (hi: the bits past 64).
__device__ inline void leaf_tree_key(u64 br, u64 bc, u32 b, u32 upper_levels, u64& hi, u64& lo) {
  const u64 m = (u64{1} << b) - 1;
  hi = 0;
  lo = 0;
  for (u32 l = 0; l < upper_levels; ++l) {
    const u32 s = b * (upper_levels - 1 - l);
    const u64 pair = (((br >> s) & m) << b) | ((bc >> s) & m);
    hi = (hi << (2 * b)) | (lo >> (64 - 2 * b));
    lo = (lo << (2 * b)) | pair;
  }
}

// Its inverse for a key of at most 64 bits (2b · upper_levels <= 64: the
// caller, sort_entries, takes tree order only where the whole key fits).
__device__ inline void leaf_of_tree_key(u64 lo, u32 b, u32 upper_levels, u64& br, u64& bc) {
  const u64 m = (u64{1} << b) - 1;
  br = 0;
  bc = 0;
  for (u32 l = 0; l < upper_levels; ++l) {
    const u64 pair = lo >> (2 * b * (upper_levels - 1 - l));
    br = (br << b) | ((pair >> b) & m);
    bc = (bc << b) | (pair & m);
  }
}

// COO: checks every index (bad = smallest bad entry) and writes the sort key
// and the identity permutation. With rows_in_key, the key is (R << loc_bits)
// | loc (one sort); else loc alone (a second sort by R follows). With
// tree_levels > 0 (where it fits 64 bits), the key is the leaf's tree key
// (over tree_levels upper levels) << 2b | the entry's place in its leaf: one
// sort leaves the leaves in the pool's order, so they need no sort of their own.
template <class RI, class CI>
__global__ void coo_keys_kernel(const RI* row, const CI* col, u64 n, u64 rows, u64 cols, u32 b, u32 loc_bits,
                                bool rows_in_key, u32 tree_levels, u64* key, u32* perm, unsigned long long* bad) {
  for (u64 e = blockIdx.x * u64(blockDim.x) + threadIdx.x; e < n; e += u64(gridDim.x) * blockDim.x) {
    const RI r = row[e];
    const CI c = col[e];
    perm[e] = static_cast<u32>(e);
    if (!index_ok(r, rows) || !index_ok(c, cols)) {
      atomicMin(bad, static_cast<unsigned long long>(e));
      key[e] = 0;
      continue;
    }
    const u64 loc = local_key(static_cast<u64>(r), static_cast<u64>(c), b);
    if (tree_levels > 0) {
      u64 hi, lo;
      leaf_tree_key(static_cast<u64>(r) >> b, static_cast<u64>(c) >> b, b, tree_levels, hi, lo);
      key[e] = (lo << (2 * b)) | (loc & ((u64{1} << (2 * b)) - 1));
      continue;
    }
    key[e] = rows_in_key ? ((static_cast<u64>(r) >> b) << loc_bits) | loc : loc;
  }
}

// R of the entries in their first sort's order (for the second, stable sort).
template <class I>
__global__ void gather_block_rows_kernel(const I* row, const u32* perm, u64 n, u32 b, u64* out) {
  for (u64 i = blockIdx.x * u64(blockDim.x) + threadIdx.x; i < n; i += u64(gridDim.x) * blockDim.x)
    out[i] = static_cast<u64>(row[perm[i]]) >> b;
}

// CSR rows per entry: each non-empty row marks its first entry; an inclusive
// max-scan then gives every entry its row (no search per entry).
template <class I>
__global__ void mark_row_starts_kernel(const I* row_ptr, u64 rows, u64* row_of) {
  for (u64 r = blockIdx.x * u64(blockDim.x) + threadIdx.x; r < rows; r += u64(gridDim.x) * blockDim.x) {
    const u64 p = static_cast<u64>(row_ptr[r]);
    if (p < static_cast<u64>(row_ptr[r + 1])) row_of[p] = r;
  }
}

// After the sort: every entry's (R, loc) and value in sorted order, from a
// combined key (rows_in_key) or from the second sort's keys (sorted_R).
template <class RI, class CI, class V>
__global__ void sorted_entries_kernel(const u64* sorted_key, bool rows_in_key, u32 loc_bits, u32 tree_levels,
                                      const u64* sorted_R, const RI* row, const CI* col, u32 b, const u32* perm,
                                      const V* val, u64 n, u64* R_out, u64* loc_out, V* val_out) {
  for (u64 i = blockIdx.x * u64(blockDim.x) + threadIdx.x; i < n; i += u64(gridDim.x) * blockDim.x) {
    const u32 e = perm[i];
    u64 R, loc;
    if (tree_levels > 0) {
      const u64 k = sorted_key[i];
      u64 C;
      leaf_of_tree_key(k >> (2 * b), b, tree_levels, R, C);
      loc = (C << (2 * b)) | (k & ((u64{1} << (2 * b)) - 1));
    } else if (rows_in_key) {
      const u64 k = sorted_key[i];
      R = loc_bits >= 64 ? 0 : k >> loc_bits;
      loc = loc_bits >= 64 ? k : k & ((u64{1} << loc_bits) - 1);
    } else {
      R = sorted_R[i];
      loc = local_key(static_cast<u64>(row[e]), static_cast<u64>(col[e]), b);
    }
    R_out[i] = R;
    loc_out[i] = loc;
    val_out[i] = val[e];
  }
}

// ---- duplicates and leaves -------------------------------------------------

__global__ void entry_heads_kernel(const u64* R, const u64* loc, u64 n, u32* head) {
  for (u64 i = blockIdx.x * u64(blockDim.x) + threadIdx.x; i < n; i += u64(gridDim.x) * blockDim.x)
    head[i] = (i == 0 || R[i] != R[i - 1] || loc[i] != loc[i - 1]) ? 1u : 0u;
}

// 1 in *any where two neighbours of the sorted entries are one position.
__global__ void any_duplicate_kernel(const u64* R, const u64* loc, u64 n, unsigned* any) {
  for (u64 i = blockIdx.x * u64(blockDim.x) + threadIdx.x + 1; i < n; i += u64(gridDim.x) * blockDim.x)
    if (R[i] == R[i - 1] && loc[i] == loc[i - 1]) {
      atomicOr(any, 1u);
      return;
    }
}

// One thread per distinct entry sums its run in input order (as the host
// builder does), so the sums are bit for bit the host's.
template <class V>
__global__ void sum_duplicates_kernel(const u64* R, const u64* loc, const V* val, const u32* head, const u32* pos, u64 n,
                                      u64* uR, u64* uloc, V* uval) {
  for (u64 i = blockIdx.x * u64(blockDim.x) + threadIdx.x; i < n; i += u64(gridDim.x) * blockDim.x) {
    if (!head[i]) continue;
    V sum = val[i];
    for (u64 q = i + 1; q < n && !head[q]; ++q) sum += val[q];
    const u32 j = pos[i];
    uR[j] = R[i];
    uloc[j] = loc[i];
    uval[j] = sum;
  }
}

__global__ void leaf_heads_kernel(const u64* R, const u64* loc, u64 n, u32 b, u32* head) {
  for (u64 i = blockIdx.x * u64(blockDim.x) + threadIdx.x; i < n; i += u64(gridDim.x) * blockDim.x)
    head[i] = (i == 0 || R[i] != R[i - 1] || (loc[i] >> (2 * b)) != (loc[i - 1] >> (2 * b))) ? 1u : 0u;
}

// Leaf q (in (R, C) order, or in tree order where the entries were sorted
// so): its first entry and its tree key. leaf_of holds the inclusive scan of
// the leaf heads (leaf index + 1).
__global__ void leaves_kernel(const u64* R, const u64* loc, const u32* leaf_of, u64 n, u32 b, u32 upper_levels,
                              u32* leaf_start, u64* key_lo, u64* key_hi) {
  for (u64 i = blockIdx.x * u64(blockDim.x) + threadIdx.x; i < n; i += u64(gridDim.x) * blockDim.x) {
    if (i != 0 && leaf_of[i] == leaf_of[i - 1]) continue;
    const u32 q = leaf_of[i] - 1;
    leaf_start[q] = static_cast<u32>(i);
    u64 hi, lo;
    leaf_tree_key(R[i], loc[i] >> (2 * b), b, upper_levels, hi, lo);
    key_lo[q] = lo;
    if (key_hi) key_hi[q] = hi;
  }
}

template <class T>
__global__ void gather_kernel(const T* in, const u32* perm, u64 n, T* out) {
  for (u64 i = blockIdx.x * u64(blockDim.x) + threadIdx.x; i < n; i += u64(gridDim.x) * blockDim.x) out[i] = in[perm[i]];
}

// Leaves in tree order t: entry count, node choice, and where each (R, C)
// leaf q went (the inverse permutation; lperm null: the leaves are in tree
// order already, q = t).
template <class V>
__global__ void leaf_choice_kernel(const u32* lperm, const u32* count_by_leaf, u64 leaves, u32 b, u32* count,
                                   std::uint8_t* type, u64* bytes, u32* linv) {
  for (u64 t = blockIdx.x * u64(blockDim.x) + threadIdx.x; t < leaves; t += u64(gridDim.x) * blockDim.x) {
    const u32 q = lperm ? lperm[t] : static_cast<u32>(t);
    const u32 c = count_by_leaf[q];
    const NodeChoice ch = choose_node(c, b, true, sizeof(V));
    count[t] = c;
    type[t] = static_cast<std::uint8_t>(ch.type);
    bytes[t] = ch.bytes;
    linv[q] = static_cast<u32>(t);
  }
}

__global__ void leaf_counts_kernel(const u32* leaf_start, u64 leaves, u32* count) {
  for (u64 q = blockIdx.x * u64(blockDim.x) + threadIdx.x; q < leaves; q += u64(gridDim.x) * blockDim.x)
    count[q] = leaf_start[q + 1] - leaf_start[q];
}

__global__ void set_u32_kernel(u32* p, u32 v) { *p = v; }
__global__ void count_coow_kernel(const std::uint8_t* type, u64 nodes, unsigned long long* count) {
  for (u64 i = blockIdx.x * u64(blockDim.x) + threadIdx.x; i < nodes; i += u64(gridDim.x) * blockDim.x)
    if (type[i] == static_cast<std::uint8_t>(NodeType::coow)) atomicAdd(count, 1ull);
}
__global__ void coow_segments_kernel(const std::uint8_t* type, u64 nodes, const u32* first_leaf, const u64* entry_scan,
                                     unsigned long long* next, u64* begin, u64* end) {
  for (u64 i = blockIdx.x * u64(blockDim.x) + threadIdx.x; i < nodes; i += u64(gridDim.x) * blockDim.x) {
    if (type[i] != static_cast<std::uint8_t>(NodeType::coow)) continue;
    const auto s = atomicAdd(next, 1ull);
    begin[s] = entry_scan[first_leaf[i]];
    end[s] = entry_scan[first_leaf[i + 1]];
  }
}
__global__ void widen_kernel(const u32* in, u64 n, u64* out) {
  for (u64 i = blockIdx.x * u64(blockDim.x) + threadIdx.x; i <= n; i += u64(gridDim.x) * blockDim.x)
    out[i] = i < n ? in[i] : 0;
}

// ---- the upper levels --------------------------------------------------------

// A level's nodes start where the leaves' tree keys, shifted to that level,
// change.
__global__ void level_heads_kernel(const u64* key_lo, const u64* key_hi, u64 leaves, u32 shift, u32* head) {
  for (u64 t = blockIdx.x * u64(blockDim.x) + threadIdx.x; t < leaves; t += u64(gridDim.x) * blockDim.x)
    head[t] = (t == 0 || tree_key_at(key_lo, key_hi, t).shr(shift) != tree_key_at(key_lo, key_hi, t - 1).shr(shift))
                  ? 1u : 0u;
}

// The same for the nodes of the level below (their first leaves' keys): a
// level above depth-2 groups nodes, not leaves.
__global__ void level_heads_of_nodes_kernel(const u64* key_lo, const u64* key_hi, const u32* below_first_leaf,
                                            u64 below, u32 shift, u32* head) {
  for (u64 j = blockIdx.x * u64(blockDim.x) + threadIdx.x; j < below; j += u64(gridDim.x) * blockDim.x)
    head[j] = (j == 0 || tree_key_at(key_lo, key_hi, below_first_leaf[j]).shr(shift) !=
                             tree_key_at(key_lo, key_hi, below_first_leaf[j - 1]).shr(shift))
                  ? 1u : 0u;
}

// first_leaf[i] = the first leaf of node i's first child; first_leaf[nodes] = leaves.
__global__ void first_leaf_of_nodes_kernel(const u32* first_child, const u32* below_first_leaf, u64 nodes, u64 leaves,
                                           u32* first_leaf) {
  for (u64 i = blockIdx.x * u64(blockDim.x) + threadIdx.x; i <= nodes; i += u64(gridDim.x) * blockDim.x)
    first_leaf[i] = i < nodes ? below_first_leaf[first_child[i]] : static_cast<u32>(leaves);
}

// node_of: inclusive scan of the heads (node index + 1 of every child: a leaf,
// or a node of the level below). first[i]: node i's first child; first[nodes]
// = the children's count; parent[t]: child t's node. A thread per child: a
// thread per node walking its children was serial over up to d² of them.
__global__ void level_nodes_kernel(const u32* node_of, u64 children, u32* first, u32* parent) {
  for (u64 t = blockIdx.x * u64(blockDim.x) + threadIdx.x; t < children; t += u64(gridDim.x) * blockDim.x) {
    const u32 p = node_of[t] - 1;
    parent[t] = p;
    if (t == 0 || node_of[t] != node_of[t - 1]) first[p] = static_cast<u32>(t);
    if (t + 1 == children) first[p + 1] = static_cast<u32>(children);
  }
}

struct LevelInput {
  u64 nodes;
  const u32* first_child;  // nodes + 1: each node's first child (a leaf at depth-2, else a node of the level below)
  u32 log2_d;
  // COOW (level depth-2 of a wide pool): per leaf, exclusive scans of entry
  // counts and node bytes in tree order (leaves + 1 each); null: no COOW.
  const u64* entry_scan;
  const u64* leaf_bytes_scan;
  u32 value_bytes;
};

// Node i of an inner level (children [first_child[i], first_child[i+1])):
// its node type and bytes (COOW where the canonical rule says so).
__global__ void inner_choice_kernel(LevelInput in, std::uint8_t* type, u64* bytes) {
  for (u64 i = blockIdx.x * u64(blockDim.x) + threadIdx.x; i < in.nodes; i += u64(gridDim.x) * blockDim.x) {
    const u32 c0 = in.first_child[i], c1 = in.first_child[i + 1];
    NodeChoice ch = choose_node(c1 - c0, in.log2_d, false, sizeof(NodeRef));
    if (in.entry_scan) {
      const u64 entries = in.entry_scan[c1] - in.entry_scan[c0];  // (the children are leaves here)
      const u64 standard = ch.bytes + in.leaf_bytes_scan[c1] - in.leaf_bytes_scan[c0];
      if (entries <= 0xFFFFFFFFull) {
        const u64 wide = coow_layout64(entries, in.value_bytes).bytes;  // 64 bits: see the builder
        if (wide <= standard) ch = NodeChoice{NodeType::coow, wide};
      }
    }
    type[i] = static_cast<std::uint8_t>(ch.type);
    bytes[i] = ch.bytes;
  }
}

// Leaves under a COOW node are not written: no bytes, type marked dropped.
inline constexpr std::uint8_t dropped_leaf = 0xFF;
__global__ void drop_leaves_kernel(const u32* leaf_parent, const std::uint8_t* parent_type, u64 leaves,
                                   std::uint8_t* leaf_type, u64* leaf_bytes) {
  for (u64 t = blockIdx.x * u64(blockDim.x) + threadIdx.x; t < leaves; t += u64(gridDim.x) * blockDim.x)
    if (parent_type[leaf_parent[t]] == static_cast<std::uint8_t>(NodeType::coow)) {
      leaf_type[t] = dropped_leaf;
      leaf_bytes[t] = 0;
    }
}

// ---- the fill ---------------------------------------------------------------

// One entry (or child reference) of rank `rank` into a zeroed node.
template <class E>
__device__ void write_node_entry(std::byte* node, NodeType type, u32 count, u32 rank, u32 log2_d, bool leaf, u32 row,
                                 u32 col, E value) {
  if (type == NodeType::dense) {
    const u32 cell = (row << log2_d) | col;
    E* cells = reinterpret_cast<E*>(node + (leaf ? dense_mask_bytes(log2_d) : 0u));
    cells[cell] = value;
    if (leaf) atomicOr(reinterpret_cast<unsigned*>(node) + (cell >> 5), 1u << (cell & 31u));
    return;
  }
  const CooLayout l = coo_layout(type, count, sizeof(E));
  if (rank == 0) *reinterpret_cast<u32*>(node) = count;
  reinterpret_cast<std::uint16_t*>(node + l.coord_offset)[rank] = static_cast<std::uint16_t>(row | (col << 8));
  reinterpret_cast<E*>(node + l.value_offset)[rank] = value;
}

struct LeafFill {
  const u32* leaf_of;     // inclusive scan of leaf heads, per entry
  const u32* leaf_start;  // per (R, C) leaf
  const u32* linv;        // (R, C) leaf -> tree position
  const std::uint8_t* type;
  const u32* count;
  const u64* offset;  // exclusive scan of leaf bytes; + base
  u64 base;
  u32 log2_d;
  // COOW: entries of dropped leaves go to wide positions, sorted after.
  const u64* entry_scan;
  const u32* leaf_parent;
  u32* wide_key;
  u32* wide_entry;
  u32* wide_owner;
};

template <class V>
__global__ void fill_leaves_kernel(LeafFill f, const u64* R, const u64* loc, const V* val, u64 n, std::byte* pool) {
  const u32 b = f.log2_d;
  const u64 m = (u64{1} << b) - 1;
  for (u64 j = blockIdx.x * u64(blockDim.x) + threadIdx.x; j < n; j += u64(gridDim.x) * blockDim.x) {
    const u32 q = f.leaf_of[j] - 1;
    const u32 t = f.linv[q];
    const u32 rank = static_cast<u32>(j - f.leaf_start[q]);
    const u64 k = loc[j];
    const u32 rl = static_cast<u32>((k >> b) & m), cl = static_cast<u32>(k & m);
    if (f.type[t] == dropped_leaf) {
      const u64 p = f.entry_scan[t] + rank;
      const u64 C = k >> (2 * b);
      const u32 row16 = static_cast<u32>(((R[j] & m) << b) | rl), col16 = static_cast<u32>(((C & m) << b) | cl);
      f.wide_key[p] = (row16 << 16) | col16;
      f.wide_entry[p] = static_cast<u32>(j);
      f.wide_owner[p] = f.leaf_parent[t];
      continue;
    }
    write_node_entry<V>(pool + f.base + f.offset[t], static_cast<NodeType>(f.type[t]), f.count[t], rank, b, true, rl,
                        cl, val[j]);
  }
}

// The entry at wide position p of COOW node `owner` of the depth-2 level
// (its entries hold positions [entry_scan[first_leaf[owner]],
// entry_scan[first_leaf[owner + 1]]) in row-major order): coordinate (key:
// row16 << 16 | col16) and value at its rank; rank 0 also writes the count.
template <class V>
__device__ inline void put_coow_entry(u32 owner, u64 p, u32 key, V value, const u32* first_leaf, const u64* entry_scan,
                                      const u64* node_offset, u64 base, std::byte* pool) {
  const u64 first = entry_scan[first_leaf[owner]];
  const u32 count = static_cast<u32>(entry_scan[first_leaf[owner + 1]] - first);
  const u32 rank = static_cast<u32>(p - first);
  std::byte* node = pool + base + node_offset[owner];
  const CooLayout l = coow_layout(count, sizeof(V));
  if (rank == 0) *reinterpret_cast<u32*>(node) = count;
  reinterpret_cast<u32*>(node + l.coord_offset)[rank] = (key >> 16) | (key << 16);
  reinterpret_cast<V*>(node + l.value_offset)[rank] = value;
}

// Wide positions after the per-node sort: coordinate and value at their rank.
template <class V>
__global__ void fill_coow_kernel(const u32* wide_key, const u32* wide_entry, const u32* wide_owner, u64 n,
                                 const u32* first_leaf, const u64* entry_scan, const u64* node_offset, u64 base,
                                 const V* val, std::byte* pool) {
  for (u64 p = blockIdx.x * u64(blockDim.x) + threadIdx.x; p < n; p += u64(gridDim.x) * blockDim.x) {
    const u32 owner = wide_owner[p];
    if (owner == 0xFFFFFFFFu) continue;
    put_coow_entry<V>(owner, p, wide_key[p], val[wide_entry[p]], first_leaf, entry_scan, node_offset, base, pool);
  }
}

// The CSR path's COOW entries after a stable sort of every entry, in CSR
// order, by its depth-2 node: a COOW node's entries come out in CSR order,
// which is its row-major order, at their wide positions (entry_scan counts
// every node's entries in tree order, and the nodes are in tree order).
// owner[p], entry[p]: the sorted nodes and CSR indices; key: row16 << 16 |
// col16 by CSR index.
template <class V>
__global__ void fill_coow_csr_kernel(const u32* owner, const u32* entry, const u32* key, u64 n,
                                     const std::uint8_t* type, const u32* first_leaf, const u64* entry_scan,
                                     const u64* node_offset, u64 base, const V* val, std::byte* pool) {
  for (u64 p = blockIdx.x * u64(blockDim.x) + threadIdx.x; p < n; p += u64(gridDim.x) * blockDim.x) {
    const u32 o = owner[p];
    if (type[o] != static_cast<std::uint8_t>(NodeType::coow)) continue;
    const u32 e = entry[p];
    put_coow_entry<V>(o, p, key[e], val[e], first_leaf, entry_scan, node_offset, base, pool);
  }
}

struct InnerFill {
  u64 children;
  const u32* child_first_leaf;  // null: the children are the leaves
  const u32* child_parent;
  const std::uint8_t* child_type;
  const u64* child_offset;
  u64 child_base;
  const u32* first_child;  // of the parents
  const std::uint8_t* type;
  const u64* offset;
  u64 base;
  u32 log2_d;
  u32 shift;  // tree key >> shift: the child's digits at this level in its low 2b bits
};

__global__ void fill_inner_kernel(InnerFill f, const u64* key_lo, const u64* key_hi, std::byte* pool) {
  const u32 b = f.log2_d;
  for (u64 c = blockIdx.x * u64(blockDim.x) + threadIdx.x; c < f.children; c += u64(gridDim.x) * blockDim.x) {
    const u32 p = f.child_parent[c];
    const auto ptype = static_cast<NodeType>(f.type[p]);
    if (ptype == NodeType::coow) continue;
    const u64 t = f.child_first_leaf ? f.child_first_leaf[c] : c;
    const u64 digits = tree_key_at(key_lo, key_hi, t).shr(f.shift).lo & ((u64{1} << (2 * b)) - 1);
    const u32 row = static_cast<u32>(digits >> b), col = static_cast<u32>(digits & ((u64{1} << b) - 1));
    const u32 first = f.first_child[p];
    const u32 count = f.first_child[p + 1] - first;
    const NodeRef ref = make_ref(f.child_base + f.child_offset[c], static_cast<NodeType>(f.child_type[c]));
    write_node_entry<NodeRef>(pool + f.base + f.offset[p], ptype, count, static_cast<u32>(c - first), b, false, row,
                              col, ref);
  }
}

}  // namespace hisparse::ops::convert_detail
