#pragma once
// The extraction's row path (extract_gpu.cuh takes it where it applies): the
// leaves, not the entries, are sorted, and a warp per logical block row of d
// rows writes its rows straight into place.
//
// For a fixed logical row, tree order already is column order: the leaves of
// one block row come in column order (the tree key orders them by their
// column digits; with the transposed state, rows and columns exchanged) and a
// leaf stores its entries row-major. So once the leaves are grouped by block
// row (a stable sort of the leaves by it), a warp walking its block row's
// leaves in that order meets every row's entries in column order: an entry's
// place is its row's start plus the entries of its row met before it, which
// the warp counts 32 entries at a time (__match_any_sync over the row, a
// running position per row in shared memory). Where no block row is cut into
// chunks (below), one pass counts a block row's rows, takes its place among
// the block rows by a look-back and fills (RowPass::once); else a first pass
// counts the rows (their starts by one scan) and a second fills. No sort of
// entries, no per-entry work arrays.
// A COOW node (plain state) joins as its slices, one per block row of its
// unit that holds entries: its entries are row-major, so a slice is one range,
// and listed in frontier order a block row still meets each row's entries in
// column order. Transposed pools with COOW nodes take the general path.
//
// A warp walks its items' entries one item after the other (their lookups,
// a chain of dependent loads each, are made 32 at a time, a lane per item;
// a run of COOW slices, ~8 entries each on R-MAT, is walked as one, 32 of
// its entries at a time whatever slice each is of: perf-log C36): a
// block row of many items (a circuit's dense row meets every leaf column)
// would serialise the call, and did (perf-log C9: 376 ms for the circuit 8 M). So the work is tasks: a block
// row of at most extract_chunk_items items is one task; a longer one is cut
// into chunks of that many, each a task of its own warp. A chunk counts its
// rows into its own slice of chunk_counts; a scan over the chunks of each row
// (chunk_prefix_kernel) turns those into each chunk's first place per row.
#include "extract_kernels.cuh"
#include "hisparse/ops/warp_counting_sort.cuh"
#include "warp_lookback.cuh"

namespace hisparse::ops::convert_detail {

inline constexpr unsigned extract_row_threads = 256;

// CSR fill: a block row whose entries fit this many bytes per warp is
// assembled in shared memory and written out coalesced. Written straight,
// its rows' short runs (a 2D Laplacian's row meets a leaf with 1 to 3
// entries) leave partial sectors open in L2 across the whole grid, more than
// L2 holds (perf-log C6). A warp's stage holds 768 entries (a 2D Laplacian's
// block row of 128 rows holds 640) in at most 8 KB: with 4-byte indices and
// values that is 6 KB, and a block of eight warps then leaves room for four
// blocks per multiprocessor instead of three (the one-pass kernel is
// latency-bound, perf-log C15); longer block rows go by windows.
template <class I, class Out>
constexpr unsigned extract_stage_bytes() {
  constexpr unsigned want = 768 * (sizeof(I) + sizeof(Out));
  return want < 8192 ? want : 8192;
}

// Items per task (see the top): enough that a task's loads amortise its
// set-up, few enough that no warp's chain of items outlasts the grid.
inline constexpr u32 extract_chunk_items = 128;

// A block row is assembled in windows only up to this many stages' worth of
// entries (at most about twice as many windows: a greedy window holds more
// than half a stage): every window walks all of the block row's items again.
inline constexpr u32 extract_max_windows = 16;

// The first of a node's row-major entries [lo, hi) whose row is at least
// `row` (leaves' LocalCoord and COOW nodes' WideCoord alike): a window's or a
// slice's entries are one range of them.
template <class Coord>
__device__ inline u32 first_row_at_least(const Coord* coords, u32 lo, u32 hi, u32 row) {
  while (lo < hi) {
    const u32 mid = (lo + hi) / 2;
    if (coords[mid].row < row) lo = mid + 1; else hi = mid;
  }
  return lo;
}

// A COOW node's coordinates (their place does not depend on the value size).
__device__ inline const WideCoord* coow_coords(const std::byte* pool, NodeRef r, u32 n) {
  return reinterpret_cast<const WideCoord*>(pool + ref_offset(r) + coow_layout(n, 4).coord_offset);
}

// Whether entry i of a COOW node's n row-major entries starts a slice (the
// first entry of a block row of its unit).
__device__ inline bool slice_head(const WideCoord* co, u32 n, u32 i, u32 b) {
  return i < n && (i == 0 || (u32(co[i].row) >> b) != (u32(co[i - 1].row) >> b));
}

// Blocks of the fill kernels that fit a multiprocessor's 228 KB of shared
// memory (per warp its stage and its 1 KB of row slots, 1 KB per block for
// the driver): the register budget is set to match (__launch_bounds__), so
// that ptxas does not spill to keep an occupancy the shared memory forbids
// (at 64 registers the f64 fills spilled 28-60 bytes). The count pass has no
// stage: no bound (0).
template <class I, class Out>
constexpr unsigned extract_fill_blocks() {
  constexpr unsigned per_block = (extract_row_threads / 32) * (extract_stage_bytes<I, Out>() + 1024) + 1024;
  return (228u * 1024) / per_block;
}

template <class I, class Out>
constexpr u32 extract_stage_entries() {
  return extract_stage_bytes<I, Out>() / (sizeof(I) + sizeof(Out)) / 32 * 32;
}

// How the row kernel runs. count: each task counts its rows' entries (into
// row_count, or a chunk's slice); fill: each entry goes to its place after
// row_start (the scan of those counts). once, where no block row is chunked:
// a task counts its block row, learns the entries of the block rows before it
// by a look-back over the tasks' totals (warp_lookback.cuh), writes its row
// pointers and fills, all in one kernel: no count kernel, no scan of the
// rows, no read-back between them (perf-log C15).
enum class RowPass { count, fill, once };

// An item as the walk needs it: its node, the node's count word (entries;
// unused for a dense leaf), its entry range (a leaf's all, a slice's one
// block row) and the block coordinate on the other side of the output row.
struct RowItem {
  NodeRef ref;
  u32 n, lo, hi;
  u64 other;
};

// An item's entries as its lane finds them for the walk: [lo, lo + len), a
// window's part of them (for a sparse leaf, set only where windowed).
struct LaneItem {
  u32 lo = 0, len = 0;
};

template <class V, class I, class Out>
struct RowArgs {
  Frontier f;  // the leaves, in tree order
  const std::byte* pool;
  u32 b;
  bool transposed;
  V scale;
  bool unscaled;
  bool stage_ok;         // fill passes, CSR: the dynamic shared memory of the stage was granted
  u64 rows, blocks;      // logical rows, and block rows of d of them
  u64 n;                 // the matrix's entries: the output arrays' size
  const u32* leaf;       // item indices, grouped by logical block row (stable)
  // Items: null where every item is a leaf (item i = frontier index i); else,
  // per item, its frontier index and, for a COOW node's slice (the entries of
  // one block row of its unit: one range, row-major), that range.
  const u32* item_node;
  const u32* item_lo;
  const u32* item_hi;
  const u32* first;      // blocks + 1: each block row's first place in `leaf`
  const u32* task_q;     // per task: its block row
  const u64* task_first; // blocks + 1: each block row's first task (tasks: task_first[blocks])
  const u64* chunk_first;  // blocks + 1: a chunked block row's first slice in chunk_counts
  u32* chunk_counts;     // d per chunk: count pass, its rows' entries; fill pass, its first place past the row's start
  u64 task_bound;        // at least the number of tasks (the grid's extent)
  u32* row_count;        // count pass: entries per logical row
  const u32* row_start;  // fill pass: exclusive scan of row_count
  unsigned long long* status;  // once: per task, zero before the launch
  unsigned long long* ticket;  // once: zero before the launch
  u32* total;            // once: the entries of all block rows, written by the last task
  I* row_ptr;            // once, CSR: rows + 1 row pointers
  I* row_out;            // COO (null for CSR)
  I* col_out;
  Out* val_out;          // values, or their positions in the pool (Out = u32)
};

template <class V, class I, class Out, RowPass P>
__global__ void __launch_bounds__(extract_row_threads, P == RowPass::count ? 0 : extract_fill_blocks<I, Out>())
    extract_rows_kernel(RowArgs<V, I, Out> a) {
  constexpr bool Fill = P != RowPass::count, Once = P == RowPass::once;
  constexpr u32 warps = extract_row_threads / 32;
  __shared__ u32 slot_all[warps][256];
  const u32 warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const unsigned full = 0xFFFFFFFFu, lower = (1u << lane) - 1u;
  u32* slot = slot_all[warp];  // counting: the row's entries so far; filling: its next place
  constexpr u32 cap = extract_stage_entries<I, Out>();
  extern __shared__ __align__(16) unsigned char stage_all[];  // fill passes, CSR: cap entries per warp
  I* stage_col = reinterpret_cast<I*>(stage_all + warp * extract_stage_bytes<I, Out>());
  Out* stage_val = reinterpret_cast<Out*>(stage_all + warp * extract_stage_bytes<I, Out>() + cap * sizeof(I));
  const u32 b = a.b, d = 1u << b, cells = 1u << (2 * b);
  const u64 tasks = a.task_first[a.blocks];
  // once: tasks in ticket order (the look-back waits only for claimed tasks).
  auto next_task = [&](u64 t) -> u64 {
    if constexpr (Once) {
      unsigned long long v = 0;
      if (lane == 0) v = atomicAdd(a.ticket, 1ull);
      return __shfl_sync(full, v, 0);
    } else {
      return t + u64(gridDim.x) * warps;
    }
  };
  for (u64 t = Once ? next_task(0) : u64(blockIdx.x) * warps + warp; t < a.task_bound && t < tasks; t = next_task(t)) {
    const u64 q = a.task_q[t];
    const u64 r0 = q << b;
    const u32 nr = static_cast<u32>(a.rows - r0 < d ? a.rows - r0 : d);
    const u64 task0 = a.task_first[q];
    const bool chunked = a.task_first[q + 1] - task0 > 1;  // never in once
    u32* chunk_slice = chunked ? a.chunk_counts + (a.chunk_first[q] + (t - task0)) * d : nullptr;
    const u64 i_begin = chunked ? a.first[q] + (t - task0) * extract_chunk_items : a.first[q];
    const u64 i_end = chunked ? (a.first[q + 1] < i_begin + extract_chunk_items ? a.first[q + 1]
                                                                                : i_begin + extract_chunk_items)
                              : a.first[q + 1];
    for (u32 r = lane; r < d; r += 32)
      slot[r] = P == RowPass::fill && r < nr ? a.row_start[r0 + r] + (chunked ? chunk_slice[r] : 0) : 0;
    __syncwarp();
    u32 w0 = 0, w1 = nr, place0 = 0;
    bool staged = false;
    // One present entry per lane at most: local (row, column) of the content,
    // its value (already loaded) and its place among the pool's values.
    // Place: a std::bool_constant, counting (false) or placing (true).
    auto take = [&](auto place_tag, bool present, u32 lrow, u32 lcol, V v, u64 at, u64 other_block) {
      const u32 r = a.transposed ? lcol : lrow, c = a.transposed ? lrow : lcol;
      if constexpr (!decltype(place_tag)::value) {
        if (present) atomicAdd(slot + r, 1u);
        return;
      } else {
        const unsigned group = __match_any_sync(full, present ? r : 0xFFFFFFFFu);
        const u32 place = present ? slot[r] + __popc(group & lower) : 0;
        __syncwarp();
        if (present && (group & lower) == 0) slot[r] += __popc(group);
        __syncwarp();
        if (!present) return;
        Out value;
        if constexpr (std::is_same_v<Out, V>)
          value = a.unscaled ? v : a.scale * v;
        else
          value = static_cast<Out>(at);
        const I col = static_cast<I>((other_block << b) | c);
        if (staged) {
          stage_col[place - place0] = col;
          stage_val[place - place0] = value;
          return;
        }
        if (a.row_out) a.row_out[place] = static_cast<I>(r0 + r);
        a.col_out[place] = col;
        a.val_out[place] = value;
      }
    };
    // Items are looked up 32 at a time, one per lane (index, node, header,
    // slice range: a chain of dependent loads each), and handed out by
    // shuffles: a warp waits on one such chain per 32 items, not per item.
    auto load_item = [&](u64 i) {
      RowItem it{};
      if (i >= i_end) return it;
      const u32 id = a.leaf[i];
      const u32 k = a.item_node ? a.item_node[id] : id;
      it.ref = a.f.ref[k];
      it.other = a.transposed ? a.f.R[k] : a.f.C[k];
      const NodeType type = ref_type(it.ref);
      if (type != NodeType::dense) it.n = node_count_word(a.pool, it.ref);
      it.lo = type == NodeType::coow ? a.item_lo[id] : 0;
      it.hi = type == NodeType::coow ? a.item_hi[id] : it.n;
      return it;
    };
    // The block row's items (all, or rows [w0, w1) of each when windowed),
    // each entry through take.
    auto walk = [&](auto place_tag, bool windowed) {
      constexpr bool Place = decltype(place_tag)::value;
      for (u64 group = i_begin; group < i_end; group += 32) {
        const RowItem mine = load_item(group + lane);
        const u32 m = static_cast<u32>(i_end - group < 32 ? i_end - group : 32);
        // An item per lane: where its entries lie (rows [w0, w1) of them when
        // windowed), all 32 found at once. Windowed, a leaf's two binary
        // searches were made by the whole warp one item after the other,
        // again for every window: on the 27-point stencil (block rows of
        // ~3 500 entries in ~15 leaves, ~5 windows) most of the kernel's
        // time (perf-log C37).
        const NodeType my_type = lane < m ? ref_type(mine.ref) : NodeType::dense;
        // (the one-pass kernel runs only without COOW nodes: extract_gpu.cuh)
        const bool my_slice = !Once && lane < m && my_type == NodeType::coow;
        const unsigned slices = __ballot_sync(full, my_slice);
        LaneItem sl{};
        if (windowed && lane < m && my_type != NodeType::coow && my_type != NodeType::dense) {
          const CooLayout l = coo_layout(my_type, mine.n, sizeof(V));
          const auto* coords = reinterpret_cast<const LocalCoord*>(a.pool + ref_offset(mine.ref) + l.coord_offset);
          sl.lo = first_row_at_least(coords, 0u, mine.n, w0);
          sl.len = (w1 < d ? first_row_at_least(coords, 0u, mine.n, w1) : mine.n) - sl.lo;
        }
        if (my_slice) {
          u32 e_begin = mine.lo, e_end = mine.hi;
          if (windowed && e_begin < e_end) {
            const auto* coords = coow_coords(a.pool, mine.ref, mine.n);
            const u32 row_base = u32(coords[e_begin].row) & ~(d - 1);
            const u32 b0 = first_row_at_least(coords, e_begin, e_end, row_base + w0);
            e_end = first_row_at_least(coords, e_begin, e_end, row_base + w1);
            e_begin = b0;
          }
          sl.lo = e_begin;
          sl.len = e_end - e_begin;
        }
        for (u32 src = 0; src < m; ++src) {
          const NodeRef ref = __shfl_sync(full, mine.ref, src);
          const u64 other = __shfl_sync(full, mine.other, src);
          const NodeType type = ref_type(ref);
          const std::byte* node = a.pool + ref_offset(ref);
          if (!Once && type == NodeType::coow) {
            // The run of slices from src, flattened: their entries 32 at a
            // time whatever slice each is of, in item order (so the places
            // come out as one slice after the other would give them). A
            // slice of R-MAT holds ~8 entries: one at a time left three
            // lanes in four idle (perf-log C36).
            const unsigned after = ~slices & (full << src);
            const u32 end = after ? u32(__ffs(after)) - 1 : 32u;  // (lanes from m on are no slices)
            const u32 mine_len = lane >= src && lane < end ? sl.len : 0;
            u32 upto = mine_len;  // the run's inclusive scan of lengths
#pragma unroll
            for (u32 o = 1; o < 32; o *= 2) {
              const u32 below = __shfl_up_sync(full, upto, o);
              if (lane >= o) upto += below;
            }
            const u32 first = upto - mine_len, total = __shfl_sync(full, upto, end - 1);
            const u32 skew = sl.lo - first;  // entry p of the run is entry p + skew of its slice (mod 2^32)
            for (u32 base = 0; base < total; base += 32) {
              const u32 p = base + lane;
              // The last slice of the run that starts at or before p (its
              // starts do not decrease; the run's first starts at 0).
              u32 k = src;
#pragma unroll
              for (u32 step = 16; step > 0; step /= 2) {
                const u32 cand = k + step;
                const u32 at = __shfl_sync(full, first, cand & 31u);
                if (cand < end && at <= p) k = cand;
              }
              // (its node's place and unit from the item's own fields: fewer
              // registers a lane than holding them, as many shuffles)
              const u32 k_skew = __shfl_sync(full, skew, k);
              const NodeRef k_ref = __shfl_sync(full, mine.ref, k);
              const CooLayout l = coow_layout(__shfl_sync(full, mine.n, k), sizeof(V));
              const u64 k_col = __shfl_sync(full, mine.other, k) << b;  // the unit's first leaf column (plain state)
              const u32 k_values = ref_offset(k_ref) + l.value_offset;  // (a pool is below 4 GiB)
              const bool present = p < total;
              const u32 e = p + k_skew;
              const WideCoord wc = present ? reinterpret_cast<const WideCoord*>(a.pool + ref_offset(k_ref) +
                                                                                l.coord_offset)[e]
                                           : WideCoord{0, 0};
              const V v = present && Place ? reinterpret_cast<const V*>(a.pool + k_values)[e] : V{};
              take(place_tag, present, u32(wc.row) & (d - 1), u32(wc.col) & (d - 1), v, k_values / sizeof(V) + e,
                   k_col | (u32(wc.col) >> b));
            }
            src = end - 1;  // (the loop's step: the item after the run)
          } else if (type == NodeType::dense) {
            const auto* mask = reinterpret_cast<const std::uint8_t*>(node);
            const auto* vals = reinterpret_cast<const V*>(node + dense_mask_bytes(b));
            const u64 at0 = static_cast<u64>(vals - reinterpret_cast<const V*>(a.pool));
            const u32 c_end = windowed ? w1 << b : cells;
            for (u32 base = windowed ? w0 << b : 0; base < c_end; base += 32) {
              const u32 cell = base + lane;
              const bool present = cell < c_end && ((mask[cell >> 3] >> (cell & 7u)) & 1u);
              take(place_tag, present, cell >> b, cell & (d - 1), present && Place ? vals[cell] : V{}, at0 + cell,
                   other);
            }
          } else {
            const u32 n = __shfl_sync(full, mine.n, src);
            const CooLayout l = coo_layout(type, n, sizeof(V));
            const auto* coords = reinterpret_cast<const LocalCoord*>(node + l.coord_offset);
            const auto* vals = reinterpret_cast<const V*>(node + l.value_offset);
            const u64 at0 = static_cast<u64>(vals - reinterpret_cast<const V*>(a.pool));
            u32 e_begin = 0, e_end = n;
            if (windowed) {  // the leaf's entries of rows [w0, w1) (row-major: one range), found by its lane
              e_begin = __shfl_sync(full, sl.lo, src);
              e_end = e_begin + __shfl_sync(full, sl.len, src);
            }
            // Four chunks of 32 entries loaded before any is placed: a warp keeps
            // four loads in flight instead of one (the placing of a chunk waits
            // on the warp's shared row counters, not on memory).
            constexpr u32 ahead = 4;
            for (u32 base = e_begin; base < e_end; base += 32 * ahead) {
              LocalCoord lc[ahead];
              V v[ahead];
#pragma unroll
              for (u32 j = 0; j < ahead; ++j) {
                const u32 e = base + 32 * j + lane;
                lc[j] = e < e_end ? coords[e] : LocalCoord{0, 0};
                v[j] = e < e_end && Place ? vals[e] : V{};
              }
#pragma unroll
              for (u32 j = 0; j < ahead; ++j) {
                if (base + 32 * j >= e_end) break;  // warp-uniform
                const u32 e = base + 32 * j + lane;
                take(place_tag, e < e_end, lc[j].row, lc[j].col, v[j], at0 + e, other);
              }
            }
          }
        }
      }
    };
    if constexpr (!Fill) {
      walk(std::false_type{}, false);
      __syncwarp();
      for (u32 r = lane; r < nr; r += 32) (chunked ? chunk_slice[r] : a.row_count[r0 + r]) = slot[r];
      __syncwarp();  // slot is reused by the next block row
      continue;
    }
    // The place after the block row's last entry (with slot[r] for r < nr,
    // before row r is filled, every row's start).
    u32 block_end = 0;
    if constexpr (Once) {
      walk(std::false_type{}, false);
      __syncwarp();
      // The rows' counts become places, after the look-back's entries of the
      // block rows before this one.
      u32 base = 0;
      const u32 total = gpu::warp_scan_counts(slot, nr, lane, [&](u32 sum) {
        return base = warp_lookback(a.status, t, sum, lane);
      });
      block_end = base + total;
      __syncwarp();
      if (a.row_ptr)
        for (u32 r = lane; r < nr; r += 32) a.row_ptr[r0 + r] = static_cast<I>(slot[r]);
      if (t + 1 == tasks && lane == 0) {
        if (a.row_ptr) a.row_ptr[a.rows] = static_cast<I>(block_end);
        *a.total = block_end;
      }
      __syncwarp();
      // A pool that holds more entries than the matrix says writes nothing
      // past the arrays (the caller then reports the mismatch).
      if (block_end > a.n || block_end < base) continue;
    } else {
      block_end = chunked ? 0 : a.row_start[r0 + nr];
    }
    auto start_at = [&](u32 r) { return r < nr ? slot[r] : block_end; };
    // CSR, plain state, one task for the block row: a block row too long to
    // assemble whole goes by windows of rows that fit (a leaf stores its
    // entries row-major, so a window's entries are one range of each leaf); a
    // single row longer than the stage is written straight, and so is a block
    // row of more than extract_max_windows stages. Otherwise one window.
    const u32 row_total = chunked ? 0 : block_end - start_at(0);
    const bool windowed = a.stage_ok && !a.row_out && !a.transposed && !chunked && row_total > cap &&
                          row_total <= extract_max_windows * cap;
    do {
      if (windowed) {  // the most rows from w0 whose entries fit the stage (at least one)
        const u32 base_place = start_at(w0);
        u32 lo = w0 + 1, hi = nr;
        while (lo < hi) {
          const u32 mid = (lo + hi + 1) / 2;
          if (start_at(mid) - base_place <= cap) lo = mid; else hi = mid - 1;
        }
        w1 = lo;
      }
      place0 = chunked ? 0 : start_at(w0);
      const u32 total = chunked ? 0 : start_at(w1) - place0;
      staged = a.stage_ok && !a.row_out && !chunked && total <= cap;
      walk(std::true_type{}, windowed);
      __syncwarp();
      if (staged)
        for (u32 i = lane; i < total; i += 32) {
          a.col_out[place0 + i] = stage_col[i];
          a.val_out[place0 + i] = stage_val[i];
        }
      __syncwarp();  // the stage is reused by the next window
      w0 = w1;
    } while (windowed && w0 < nr);
    __syncwarp();  // slot is reused by the next block row
  }
}

}  // namespace hisparse::ops::convert_detail
