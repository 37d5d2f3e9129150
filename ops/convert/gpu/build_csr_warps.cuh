#pragma once
// The CSR path's fast case (build_csr.cuh runs it first): a warp per
// block row whose entries fall in at most 512 leaf columns (a banded matrix's
// block row touches three), with no sort and no block barrier.
//
// In a CSR with sorted rows, a leaf's entries appear in CSR order exactly in
// the leaf's row-major order, so an entry's rank in its leaf is the number of
// entries of the same leaf column before it in the block row. The warp
// streams the block row's entries 32 at a time: __match_any_sync groups the
// lanes of one leaf column, a running count per leaf column (shared memory)
// gives each lane its rank. Pass 1 counts (leaves, their tree keys and entry
// counts; the leaf columns present and the smallest one kept per block row),
// pass 2 writes every entry at its rank. The block kernels skip the block rows
// taken here (`taken`) and keep the rest: a block row over 512 leaf columns
// (a 2D Laplacian 4096² spans 66, a 27-point stencil 150³ ~350).
// A block row whose leaf columns span more than 512 but number at most 16
// (a band beside a few dense columns: a circuit's) is *listed*: the scout
// lists its leaf columns and every pass finds an entry's leaf among them by
// a binary search instead of by its distance from the first (LeafColumns).
// A first pass (the scout) checks every block row it can take (rows sorted,
// indices in range) and counts its leaves, so that the leaf arrays are
// allocated for the leaves there are, not for one per entry. It counts their
// entries as well and, for a block row of at most 32 leaves, keeps the counts
// (seg_counts): pass 1 then emits that block row's leaves without reading the
// CSR again (perf-log C18).
#include "build_csr_leaf_columns.cuh"
#include "build_kernels.cuh"

namespace hisparse::ops::convert_detail {

inline constexpr int csr_warp_threads = 256;
inline constexpr u32 csr_block_capacity_entries = 4096;  // build_csr_blocks.cuh's csr_block_capacity
inline constexpr u32 csr_warp_leaves = 32;    // leaves per block row whose counts the scout keeps (one per lane)
inline constexpr u32 csr_start_words = 128;  // the row-start bitmap's words: block rows of up to 4096 entries
static_assert(csr_list_leaves <= csr_warp_leaves);

// Who builds a block row (CsrBlockArgs::taken).
inline constexpr std::uint8_t csr_by_block = 0;         // the block kernels (build_csr_blocks.cuh)
inline constexpr std::uint8_t csr_by_warp = 1;          // the warp kernel (or no entries)
inline constexpr std::uint8_t csr_long = 2;             // the long-row path (build_csr_long_rows.cuh)
inline constexpr std::uint8_t csr_by_warp_counted = 3;  // the warp kernel; the scout kept its leaf counts

// Both CSR kernels' arguments.
template <class V, class I>
struct CsrBlockArgs {
  const I* row_ptr;
  const I* col;
  const V* val;
  u64 rows, cols, segments;
  u32 b, upper_levels;
  // pass 1
  unsigned* fallback;
  unsigned long long* leaf_counter;
  u32* seg_base;  // per block row: its first leaf index
  u64* leaf_key_lo;
  u64* leaf_key_hi;
  u32* leaf_count;
  // the warp kernel's block rows, per block row (its scout writes them)
  unsigned long long* totals;  // the scout's: leaves of its block rows, entries of the others
  std::uint8_t* taken;  // who builds it: csr_by_block, csr_by_warp, csr_long or csr_by_warp_counted
  u64* cmin;            // its smallest leaf column, or csr_listed | the number of leaf columns listed
  u64* present;         // csr_span_words per block row: bit j = leaf column cmin + j has entries, or the list
  // pass 2
  const u32* linv;
  const std::uint8_t* ltype;
  const u32* lcount;
  const u64* loff;
  u64 leaf_base;
  std::byte* pool;
  // the scout's list of long block rows (build_csr_long_rows.cuh): over the
  // block kernels' capacity and the warp's span
  u32* long_rows;
  unsigned long long* long_count;
  u64 long_cap;
  // pass 2 where the skeleton has COOW nodes filled by a sort (build_csr.cuh's
  // CsrWideEntries, by CSR index): null otherwise (also where they are filled
  // by ranks, build_csr_coow_ranks.cuh)
  const u32* leaf_parent = nullptr;
  u32* wide_owner = nullptr;
  u32* wide_key = nullptr;
  // the scout's leaf counts, csr_warp_leaves per block row (where the caller
  // affords them: build_csr.cuh); null otherwise
  u32* seg_counts = nullptr;
  // the scout's list of the block kernels' block rows (their count read back
  // into n_block_rows): the block kernels launch for those alone
  u32* block_rows = nullptr;
  unsigned long long* block_count = nullptr;
  u64 n_block_rows = 0;
  // The block kernels' block rows summed first (build_csr_block_sums.cuh):
  // per depth-2 block (grid_cols a row) 1 where COOW, and (pass 2) its
  // node; the block kernels then see only the block rows with an entry under
  // a standard node, except pass 2 where the COOW nodes are filled by a sort
  // (it writes the others' nodes and keys). Null otherwise.
  const u32* cell_coow = nullptr;
  const u32* cell_owner = nullptr;
  // per depth-2 row band, 1 where one of its blocks with entries is a
  // standard node's (csr_standard_bands): a block row of a band without one
  // is not mixed, and csr_mixed_rows_kernel does not read it. Null: unknown.
  const u32* standard_bands = nullptr;
  u64 grid_cols = 0;
  // the scout's sum of the long block rows' entries (where counted)
  unsigned long long* long_entries = nullptr;
};

// The depth-2 block (cell_coow, cell_owner) of leaf column lc in block row s.
template <class V, class I>
__device__ inline u64 block_of(const CsrBlockArgs<V, I>& a, u64 s, u64 lc) {
  return (s >> a.b) * a.grid_cols + (lc >> a.b);
}

// Summed first: whether that block is a standard node's. A block row with
// such an entry is sorted (the block kernels, csr_mixed_rows_kernel: the
// same test, so that both passes and the room agree).
template <class V, class I>
__device__ inline bool under_standard_node(const CsrBlockArgs<V, I>& a, u64 s, u64 lc) {
  return !a.cell_coow[block_of(a, s, lc)];
}

// Entry e of the CSR (at `row`, `col`, value v), rank `rank` in leaf t (tree
// position; its type, entry count and offset given), into the pool. Where the
// skeleton has COOW nodes filled by a sort, every entry also records its
// depth-2 node, and one under a COOW node (its leaf dropped) its key there
// instead; where they are filled by ranks (wide_owner null), such an entry is
// left to that fill.
template <class V, class I>
__device__ inline void put_leaf_entry(const CsrBlockArgs<V, I>& a, u32 t, u32 type, u32 count, u64 off, u32 rank,
                                      u64 row, u64 col, u64 e, V v) {
  const u32 m = (1u << a.b) - 1;
  if (a.wide_owner) {
    a.wide_owner[e] = a.leaf_parent[t];
    if (type == dropped_leaf) {
      const u64 mm = (u64{1} << (2 * a.b)) - 1;
      a.wide_key[e] = (static_cast<u32>(row & mm) << 16) | static_cast<u32>(col & mm);
      return;
    }
  } else if (type == dropped_leaf) {
    return;  // filled by ranks (build_csr_coow_ranks.cuh)
  }
  write_node_entry<V>(a.pool + a.leaf_base + off, static_cast<NodeType>(type), count, rank, a.b, true,
                      static_cast<u32>(row) & m, static_cast<u32>(col) & m, v);
}

// What a launch of the warp kernel does: scout (check the rows, choose the
// block rows it takes, count their leaves' entries and the other block rows'
// entries: the leaf arrays' size), count (the leaves' tree keys and entry
// counts) or fill (every entry at its rank).
enum class CsrWarpPass { scout, count, fill };

// Every pass may take the registers of one block a multiprocessor: the fills
// take 84 (f32) and 90 (f64) registers, two blocks of 256 threads. Held to
// four blocks (f32, 63 registers) or to three (unbounded: 74 and 80) they
// ran 0.2-0.4 ms slower on the stencil 150^3 (perf-log C40).
template <class V, class I, CsrWarpPass Pass>
__global__ void __launch_bounds__(csr_warp_threads, 1)
    csr_warp_rows_kernel(CsrBlockArgs<V, I> a) {
  constexpr bool scout = Pass == CsrWarpPass::scout, fill = Pass == CsrWarpPass::fill;
  constexpr u32 warps = csr_warp_threads / 32;
  __shared__ u64 rp_all[warps][257];
  __shared__ u32 count_all[warps][csr_warp_span];
  __shared__ u64 present_all[warps][csr_span_words];
  __shared__ u32 starts_all[warps][Pass == CsrWarpPass::count ? 1 : csr_start_words];
  __shared__ std::uint8_t leaf_of_all[warps][fill ? csr_warp_span : 1];
  const u32 warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const unsigned full = 0xFFFFFFFFu, lower = (1u << lane) - 1u;
  u64* rp = rp_all[warp];
  u32* count = count_all[warp];
  u64* present = present_all[warp];
  u32* starts = starts_all[warp];
  std::uint8_t* leaf_of = leaf_of_all[warp];
  const u32 b = a.b, d = 1u << b;
  for (u64 s = u64(blockIdx.x) * warps + warp; s < a.segments; s += u64(gridDim.x) * warps) {
    const std::uint8_t taken = scout ? csr_by_block : a.taken[s];
    if (!scout && taken != csr_by_warp && taken != csr_by_warp_counted) continue;  // uniform across the warp
    if (!scout && lane < csr_span_words) present[lane] = a.present[s * csr_span_words + lane];  // the scout writes a.present, never reads these
    if (Pass == CsrWarpPass::count && taken == csr_by_warp_counted) {
      // The scout kept this block row's leaf counts: its leaves without a read of the CSR.
      __syncwarp();
      const LeafColumns lcols{present, a.cmin[s]};
      const u32 leaves = lcols.leaves();
      u32 first = 0;
      if (lane == 0) {
        first = static_cast<u32>(atomicAdd(a.leaf_counter, static_cast<unsigned long long>(leaves)));
        a.seg_base[s] = first;
      }
      first = __shfl_sync(full, first, 0);
      if (lane < leaves) {
        u64 khi, klo;
        leaf_tree_key(s, lcols.column(lcols.nth(lane)), b, a.upper_levels, khi, klo);
        a.leaf_key_lo[first + lane] = klo;
        if (a.leaf_key_hi) a.leaf_key_hi[first + lane] = khi;
        a.leaf_count[first + lane] = a.seg_counts[s * csr_warp_leaves + lane];
      }
      __syncwarp();
      continue;
    }
    const u64 r0 = s << b;
    const u32 nr = static_cast<u32>(a.rows - r0 < d ? a.rows - r0 : d);
    for (u32 i = lane; i <= nr; i += 32) rp[i] = static_cast<u64>(a.row_ptr[r0 + i]);
    for (u32 j = lane; j < csr_warp_span; j += 32) count[j] = 0;
    __syncwarp();
    const u64 e0 = rp[0], m = rp[nr] - e0;
    u64 cmin;
    if (!scout) {
      cmin = a.cmin[s];
    } else {
      // The leaf columns' range from each row's first and last entry (rows sorted; checked below).
      u64 lo = ~u64{0}, hi = 0;
      for (u32 r = lane; r < nr; r += 32)
        if (rp[r + 1] > rp[r]) {
          const u64 first = static_cast<u64>(a.col[rp[r]]) >> b, last = static_cast<u64>(a.col[rp[r + 1] - 1]) >> b;
          lo = first < lo ? first : lo;
          hi = last > hi ? last : hi;
        }
      for (int o = 16; o > 0; o /= 2) {
        const u64 l2 = __shfl_xor_sync(full, lo, o), h2 = __shfl_xor_sync(full, hi, o);
        lo = l2 < lo ? l2 : lo;
        hi = h2 > hi ? h2 : hi;
      }
      // Too wide a span for the window: listed where there are few leaf columns.
      const bool wide = m != 0 && hi - lo >= csr_warp_span;
      const u32 listed = wide ? list_leaf_columns(a.col, e0, m, b, lane, reinterpret_cast<u32*>(present))
                              : csr_list_leaves + 1;
      if (m == 0 || (wide && listed > csr_list_leaves)) {  // no leaves, or the block kernels' case
        if (lane == 0) {
          const bool long_row = m > csr_block_capacity_entries;  // past the block kernels' capacity too
          a.taken[s] = m == 0 ? csr_by_warp : long_row ? csr_long : csr_by_block;
          for (u32 q = 0; q < csr_span_words; ++q) a.present[s * csr_span_words + q] = 0;
          a.cmin[s] = 0;
          if (m) atomicAdd(a.totals + 1, static_cast<unsigned long long>(m));
          if (m && !long_row) a.block_rows[atomicAdd(a.block_count, 1ull)] = static_cast<u32>(s);
          if (long_row) {
            if (a.long_entries) atomicAdd(a.long_entries, static_cast<unsigned long long>(m));
            const unsigned long long j = atomicAdd(a.long_count, 1ull);
            if (j < a.long_cap) a.long_rows[j] = static_cast<u32>(s);
            else atomicOr(a.fallback, 1u);
          }
        }
        __syncwarp();
        continue;
      }
      cmin = listed <= csr_list_leaves ? csr_listed | listed : lo;
    }
    const LeafColumns lcols{present, cmin};
    // The rows' first entries as bits (block rows of up to 4096 entries): a
    // chunk of 32 entries reads one word to know which of them start a row,
    // and, where no row is empty, each one's row by a popcount instead of a
    // search of the row pointers.
    const bool bitmap = !(Pass == CsrWarpPass::count) && m <= 32 * csr_start_words;
    bool gapless = false;
    if (bitmap) {
      for (u32 q = lane; q < (m + 31) / 32; q += 32) starts[q] = 0;
      __syncwarp();
      bool gap = false;
      for (u32 r = lane; r < nr; r += 32) {
        if (rp[r + 1] > rp[r]) {
          const u32 k = static_cast<u32>(rp[r] - e0);
          atomicOr(starts + k / 32, 1u << (k % 32));
        } else {
          gap = true;
        }
      }
      gapless = !__any_sync(full, gap);
      __syncwarp();
    }
    bool bad = false;
    // Fill: the leaves of a block row of at most 32 (every banded matrix's)
    // held one per lane, so that an entry finds its leaf by a shuffle instead
    // of two dependent loads (its index, then its offset, type and count);
    // without dense leaves or COOW nodes (`direct`) a lane holds where its
    // leaf's coordinates and values begin, and an entry is two stores.
    u32 lane_leaf = 0, lane_type = 0, lane_count = 0, lane_coord = 0, lane_value = 0;
    u64 lane_off = 0;
    bool leaves_in_lanes = false, direct = false;
    if constexpr (fill) {
      const u32 leaves = lcols.leaves();
      leaves_in_lanes = leaves <= 32;
      if (leaves_in_lanes && lane < leaves) {
        lane_leaf = a.linv[a.seg_base[s] + lane];
        lane_type = a.ltype[lane_leaf];
        lane_count = a.lcount[lane_leaf];
        lane_off = a.loff[lane_leaf];
      }
      // (no dropped leaf either: filled by ranks, wide_owner is null beside COOW nodes)
      direct = leaves_in_lanes && !a.wide_owner &&
               !__any_sync(full, lane < leaves && (lane_type == static_cast<u32>(NodeType::dense) ||
                                                   lane_type == dropped_leaf));
      if (direct) {
        if (lane < leaves) {
          // Offsets in the pool fit 32 bits (max_pool_bytes).
          const u64 node = a.leaf_base + lane_off;
          const CooLayout l = coo_layout(static_cast<NodeType>(lane_type), lane_count, sizeof(V));
          lane_coord = static_cast<u32>(node + l.coord_offset);
          lane_value = static_cast<u32>(node + l.value_offset);
          *reinterpret_cast<u32*>(a.pool + node) = lane_count;
          leaf_of[lcols.nth(lane)] = static_cast<std::uint8_t>(lane);
        }
        __syncwarp();
      }
    }
    // Chunks of 32 entries four at a time (4x the loads in flight), and the
    // next four loaded before these are handled: Nsight showed a quarter of
    // the fill's stall samples on the first use of a group's columns when
    // each group was loaded and then waited on (perf-log C35).
    constexpr u32 ahead = 4;
    I carry = I(0);     // scout: the column of the entry before the chunk
    u32 rows_before = 0;  // bitmap: the rows begun before the chunk
    I cs[ahead], next_cs[ahead];
    V vs[ahead], next_vs[ahead];
    const auto load_group = [&](u64 base, I(&c)[ahead], V(&v)[ahead]) {
#pragma unroll
      for (u32 q = 0; q < ahead; ++q) {
        const u64 k = base + 32 * q + lane;
        c[q] = k < m ? a.col[e0 + k] : I(0);
        if constexpr (fill) v[q] = k < m ? a.val[e0 + k] : V{};
      }
    };
    load_group(0, cs, vs);
    for (u64 base = 0; base < m; base += 32 * ahead) {
      load_group(base + 32 * ahead, next_cs, next_vs);  // (past the end: nothing loaded)
#pragma unroll
      for (u32 q = 0; q < ahead; ++q) {
        const u64 c0 = base + 32 * q;
        if (c0 >= m) break;  // uniform across the warp
        const u64 k = c0 + lane;
        const bool valid = k < m;
        const u64 e = e0 + (valid ? k : 0);
        const u32 word = bitmap ? starts[c0 / 32] : 0u;
        const I c = cs[q];
        u32 j = 0xFFFFFFFFu;  // the leaf column's slot; invalid lanes group apart
        if (valid) {
          j = lcols.slot(static_cast<u64>(c) >> b);
          if (scout) bad |= j == LeafColumns::outside || !index_ok(c, a.cols);
        }
        if (scout) {
          I prev = __shfl_up_sync(full, c, 1);  // the entry before e
          if (lane == 0) prev = carry;
          carry = __shfl_sync(full, c, 31);
          const bool later = bitmap ? !((word >> lane) & 1u) : valid && e > rp[row_of(rp, nr, e)];
          if (valid && later && !(prev < c)) bad = true;
        }
        const unsigned group = __match_any_sync(full, j);
        const bool counted = valid && j < csr_warp_span;
        u32 rank = 0;
        if (!scout) {
          rank = counted ? count[j] + __popc(group & lower) : 0;
          __syncwarp();
        }
        if (counted && (group & lower) == 0) count[j] += __popc(group);
        __syncwarp();
        if constexpr (fill) {
          const u32 row = bitmap && gapless ? rows_before + __popc(word & (full >> (31 - lane))) - 1 : row_of(rp, nr, e);
          rows_before += __popc(word);
          if (direct) {
            const u32 lr = counted ? leaf_of[j] : 0u;
            const u32 co = __shfl_sync(full, lane_coord, lr), vo = __shfl_sync(full, lane_value, lr);
            if (counted) {
              reinterpret_cast<std::uint16_t*>(a.pool + co)[rank] =
                  static_cast<std::uint16_t>(row | ((static_cast<u32>(c) & (d - 1)) << 8));
              reinterpret_cast<V*>(a.pool + vo)[rank] = vs[q];
            }
          } else {
            const u32 lr = counted ? lcols.rank(j) : 0;
            u32 t_leaf = 0, t_type = 0, t_count = 0;
            u64 t_off = 0;
            if (leaves_in_lanes) {  // every lane shuffles (the source lane differs)
              t_leaf = __shfl_sync(full, lane_leaf, lr & 31u);
              t_type = __shfl_sync(full, lane_type, lr & 31u);
              t_count = __shfl_sync(full, lane_count, lr & 31u);
              t_off = __shfl_sync(full, lane_off, lr & 31u);
            } else if (counted) {
              t_leaf = a.linv[a.seg_base[s] + lr];
              t_type = a.ltype[t_leaf];
              t_count = a.lcount[t_leaf];
              t_off = a.loff[t_leaf];
            }
            if (counted)
              put_leaf_entry(a, t_leaf, t_type, t_count, t_off, rank, r0 + row, static_cast<u64>(c), e, vs[q]);
          }
        }
      }
#pragma unroll
      for (u32 q = 0; q < ahead; ++q) {
        cs[q] = next_cs[q];
        if constexpr (fill) vs[q] = next_vs[q];
      }
    }
    if (scout) {
      // The leaf columns met, and (at most csr_warp_leaves of them, where the
      // caller keeps them) their entry counts, for the count pass to emit.
      const bool any_bad = __any_sync(full, bad);
      const bool record = a.seg_counts != nullptr;
      u32 leaves = 0;
      if (lcols.listed()) {  // every listed leaf column has entries
        leaves = lcols.leaves();
        if (lane < csr_list_leaves)
          reinterpret_cast<u32*>(a.present + s * csr_span_words)[lane] = lane < leaves ? lcols.list()[lane] : 0u;
        if (record && lane < leaves) a.seg_counts[s * csr_warp_leaves + lane] = count[lane];
      } else {
#pragma unroll 4
        for (u32 j0 = 0; j0 < csr_warp_span; j0 += 32) {
          const u32 cj = count[j0 + lane];
          const unsigned met = __ballot_sync(full, cj != 0);
          const u32 i = leaves + __popc(met & lower);
          if (record && cj && i < csr_warp_leaves) a.seg_counts[s * csr_warp_leaves + i] = cj;
          if (lane == 0) reinterpret_cast<u32*>(a.present + s * csr_span_words)[j0 / 32] = met;
          leaves += __popc(met);
        }
      }
      if (any_bad) {
        if (lane == 0) atomicOr(a.fallback, 2u);
      } else if (lane == 0) {
        a.taken[s] = record && leaves <= csr_warp_leaves ? csr_by_warp_counted : csr_by_warp;
        a.cmin[s] = cmin;
        atomicAdd(a.totals, static_cast<unsigned long long>(leaves));
      }
    } else if (!fill) {
      u32 first = 0;
      if (lane == 0) {
        first = static_cast<u32>(atomicAdd(a.leaf_counter, static_cast<unsigned long long>(lcols.leaves())));
        a.seg_base[s] = first;
      }
      first = __shfl_sync(full, first, 0);
      for (u32 j = lane; j < csr_warp_span; j += 32) {
        if (!lcols.has(j)) continue;
        const u32 slot = first + lcols.rank(j);
        u64 khi, klo;
        leaf_tree_key(s, lcols.column(j), b, a.upper_levels, khi, klo);
        a.leaf_key_lo[slot] = klo;
        if (a.leaf_key_hi) a.leaf_key_hi[slot] = khi;
        a.leaf_count[slot] = count[j];
      }
    }
    __syncwarp();  // rp, count and the bitmap are reused by the next block row
  }
}

}  // namespace hisparse::ops::convert_detail
