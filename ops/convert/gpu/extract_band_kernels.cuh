#pragma once
// The kernels of the extraction by row windows (extract_bands.cuh says
// what each step does and why), and their limits.
#include <algorithm>
#include <bit>
#include <type_traits>

#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_scan.cuh>
#include <cuda/functional>

#include "extract_rows.cuh"

namespace hisparse::ops::convert_detail {

inline constexpr u32 band_threads = 256;
inline constexpr u32 band_items = 16;
inline constexpr u32 band_stage = band_threads * band_items;  // entries a window stages
inline constexpr u32 band_span = 2048;   // a window's rows start within this many entries of each other
inline constexpr u32 band_heavy = 2048;  // a row of more entries is a window alone
static_assert(band_span + band_heavy <= band_stage, "a window of several rows fits the stage");
inline constexpr u32 band_max_nodes = 1024;  // nodes of one row band (the fill holds their ranges)
static_assert(band_max_nodes % band_threads == 0);
inline constexpr u32 band_max_log2_d = 7;  // a band's row counts in shared memory: 4·d² bytes (64 KB at d 128)
inline constexpr u32 band_count_threads = 1024;

// *most = the most nodes of one row band.
__global__ void band_most_nodes_kernel(const u32* band_first, u64 bands, unsigned* most) {
  for (u64 q = blockIdx.x * u64(blockDim.x) + threadIdx.x; q < bands; q += u64(gridDim.x) * blockDim.x)
    atomicMax(most, band_first[q + 1] - band_first[q]);
}

// A block per row band: its rows' entries, counted in shared memory (a warp
// per node), into count.
__global__ void __launch_bounds__(band_count_threads) band_row_counts_kernel(Frontier f, const std::byte* pool,
                                                                              const u32* node_of,
                                                                              const u32* band_first, u32 b, u64 rows,
                                                                              u32* count) {
  extern __shared__ u32 cnt[];  // d² rows
  const u32 rows_per_band = 1u << (2 * b), warps = blockDim.x / 32, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const u64 q = blockIdx.x;
  for (u32 r = threadIdx.x; r < rows_per_band; r += blockDim.x) cnt[r] = 0;
  __syncthreads();
  for (u32 k = band_first[q] + warp; k < band_first[q + 1]; k += warps) {
    const NodeRef ref = f.ref[node_of[k]];
    const u32 n = node_count_word(pool, ref);
    const WideCoord* co = coow_coords(pool, ref, n);
    for (u32 i = lane; i < n; i += 32) atomicAdd(&cnt[co[i].row], 1u);
  }
  __syncthreads();
  const u64 r0 = q << (2 * b);
  const u64 nr = rows - r0 < rows_per_band ? rows - r0 : rows_per_band;
  for (u32 r = threadIdx.x; r < nr; r += blockDim.x) count[r0 + r] = cnt[r];
}

// 1 where row r begins a window (start: the rows' exclusive scan, rows + 1).
__global__ void band_window_heads_kernel(const u32* start, u64 rows, u32 b, u32* head) {
  for (u64 r = blockIdx.x * u64(blockDim.x) + threadIdx.x; r < rows; r += u64(gridDim.x) * blockDim.x) {
    const u64 band0 = (r >> (2 * b)) << (2 * b);
    u32 h = 1;
    if (r != band0) {
      const u32 here = start[r] - start[band0], before = start[r - 1] - start[band0];
      const u32 count = start[r + 1] - start[r], count_before = here - before;
      // (a row after a heavy one also crosses a span's edge while band_heavy >=
      // band_span; said anyway, so that the rule does not rest on the sizes)
      h = count > band_heavy || count_before > band_heavy || here / band_span != before / band_span;
    }
    head[r] = h;
  }
}

// window_first[w] = the first row of window w (win: the heads' inclusive
// scan, so row r is in window win[r] - 1).
__global__ void band_window_first_kernel(const u32* head, const u32* win, u64 rows, u32* window_first) {
  for (u64 r = blockIdx.x * u64(blockDim.x) + threadIdx.x; r < rows; r += u64(gridDim.x) * blockDim.x)
    if (head[r]) window_first[win[r] - 1] = static_cast<u32>(r);
}

// Per row band: its first window (a band's first row begins one; wfirst[bands]
// = windows).
__global__ void band_window_starts_kernel(const u32* win, u64 bands, u32 b, u32 windows, u32* wfirst) {
  for (u64 q = blockIdx.x * u64(blockDim.x) + threadIdx.x; q <= bands; q += u64(gridDim.x) * blockDim.x)
    wfirst[q] = q < bands ? win[q << (2 * b)] - 1 : windows;
}

// Per row band: the size of its part of the window table, (windows + 1) ×
// nodes; size[bands] = 0 for the scan's total.
__global__ void band_table_sizes_kernel(const u32* wfirst, const u32* band_first, u64 bands, u64* size) {
  for (u64 q = blockIdx.x * u64(blockDim.x) + threadIdx.x; q <= bands; q += u64(gridDim.x) * blockDim.x)
    size[q] = q < bands ? u64(wfirst[q + 1] - wfirst[q] + 1) * (band_first[q + 1] - band_first[q]) : 0;
}

// A warp per node: for each window ww of its band (and one past the last),
// the first of its entries whose row lies in window ww or later, at
// seg[table[q] + ww · nodes + g] (g: the node's place in its band).
__global__ void band_segments_kernel(Frontier f, const std::byte* pool, const u32* node_of, const u32* band_first,
                                     const u32* wfirst, const u64* table, const u32* win, u32 b, u32* seg) {
  const u32 lane = threadIdx.x % 32;
  const u64 warps = (u64(gridDim.x) * blockDim.x) / 32;
  for (u64 k = (blockIdx.x * u64(blockDim.x) + threadIdx.x) / 32; k < f.size; k += warps) {
    const u32 node = node_of[k];
    const NodeRef ref = f.ref[node];
    const u64 q = f.R[node];
    const u32 nodes = band_first[q + 1] - band_first[q], g = static_cast<u32>(k) - band_first[q];
    const u32 w0 = wfirst[q], last = wfirst[q + 1] - w0;  // the band's windows: 0 .. last - 1
    u32* out = seg + table[q] + g;                        // window ww at out[ww · nodes]
    const u64 row0 = q << (2 * b);
    const u32 n = node_count_word(pool, ref);
    const WideCoord* co = coow_coords(pool, ref, n);
    int before = -1;  // the window of the entry before the chunk (none yet)
    for (u32 base = 0; base < n; base += 32) {
      const u32 i = base + lane;
      const int ww = i < n ? static_cast<int>(win[row0 + co[i].row] - 1 - w0) : 0;
      int prev = __shfl_up_sync(0xFFFFFFFFu, ww, 1);
      if (lane == 0) prev = before;
      if (i < n)
        for (int x = prev + 1; x <= ww; ++x) out[u64(x) * nodes] = i;  // (entries' windows do not decrease)
      before = __shfl_sync(0xFFFFFFFFu, ww, n - base < 32 ? n - base - 1 : 31);
    }
    for (int x = before + 1 + static_cast<int>(lane); x <= static_cast<int>(last); x += 32) out[u64(x) * nodes] = n;
  }
}

template <class V, class I, class Out>
struct BandArgs {
  Frontier f;
  const std::byte* pool;
  u32 b;
  V scale;
  bool unscaled;
  const u32* node_of;       // frontier indices grouped by row band (stable)
  const u32* band_first;    // bands + 1
  const u32* wfirst;        // bands + 1: each band's first window
  const u64* table;         // bands + 1: each band's part of seg
  const u32* seg;           // band_segments_kernel's ranges
  const u32* window_first;  // windows + 1
  const u32* start;         // rows + 1: each row's first place
  u64 windows;
  unsigned* next;  // the windows' ticket counter, zero before the launch
  I* row_out;  // COO (null for CSR)
  I* col_out;
  Out* val_out;  // values, or their positions in the pool (Out = u32)
};

template <class I, class Out>
constexpr std::size_t band_stage_bytes() {
  return std::size_t{band_stage} * (sizeof(I) + sizeof(Out) + sizeof(std::uint16_t));
}

// The last node of a window whose part starts at or before place p (places
// do not decrease; node 0's is 0): a binary search in shared memory, for a
// window of one row (its entries may be more than the stage holds).
__device__ inline u32 band_node_at(const u32* place, u32 nodes, u32 p) {
  u32 lo = 0, hi = nodes - 1;
  while (lo < hi) {
    const u32 mid = (lo + hi + 1) / 2;
    if (place[mid] <= p) lo = mid; else hi = mid - 1;
  }
  return lo;
}

// Windows a block takes at a time (consecutive: mostly of one band, whose
// nodes' places in the pool it then keeps), from a shared ticket.
inline constexpr u32 band_windows_per_ticket = 4;
// Entries a thread loads before it stores any (loads in flight).
inline constexpr u32 band_ahead = 4;

// A block per window: its part of each node of its band (a range), staged
// node after node, sorted stably by row (a window of one row is in place
// already), written out as one range. A thread takes places, not nodes: a
// node's part of a window is ~16 entries on R-MAT, and a warp per node would
// wait on each node's lookups in turn. A staged window finds each place's
// node in a table (owner: each nonempty part's node at its first place, then
// a max-scan), one shared load where a binary search was ~8 dependent ones
// (Nsight put half the kernel's stall samples on the searches and the loads
// they held back).
template <class V, class I, class Out>
__global__ void __launch_bounds__(band_threads) band_fill_kernel(BandArgs<V, I, Out> a) {
  constexpr u32 T = band_threads, per = band_max_nodes / T;
  using Sort = CUB_NS_QUALIFIER::BlockRadixSort<std::uint16_t, T, band_items, std::uint16_t>;
  using Scan = CUB_NS_QUALIFIER::BlockScan<u32, T>;
  __shared__ union {
    typename Sort::TempStorage sort;
    struct {
      typename Scan::TempStorage scan;
      std::uint16_t owner[band_stage];  // a staged window's place -> node (nodes <= 1024)
    } load;
  } tmp;
  static_assert(band_max_nodes <= 0x10000, "a node's index fits the owner table");
  // Per node of the band: where its coordinates and values begin (byte
  // offsets: a pool is below 4 GiB) and its unit's first column, kept while
  // the windows are of one band; per window, its first place among the
  // window's entries and its first entry in the window.
  __shared__ u32 coord_base[band_max_nodes], value_base[band_max_nodes], place_of[band_max_nodes],
      first_of[band_max_nodes];
  __shared__ u64 col_of[band_max_nodes];
  __shared__ u64 band_held;
  __shared__ u32 ticket;
  extern __shared__ __align__(16) unsigned char stage[];
  Out* stage_val = reinterpret_cast<Out*>(stage);
  I* stage_col = reinterpret_cast<I*>(stage + band_stage * sizeof(Out));
  auto* stage_row = reinterpret_cast<std::uint16_t*>(stage + band_stage * (sizeof(Out) + sizeof(I)));
  const u32 b = a.b;
  if (threadIdx.x == 0) band_held = ~u64{0};
  for (;;) {
    __syncthreads();  // (the previous windows are done with the shared arrays and the ticket)
    if (threadIdx.x == 0) ticket = atomicAdd(a.next, 1u);
    __syncthreads();
    const u64 w_begin = u64(ticket) * band_windows_per_ticket;
    if (w_begin >= a.windows) break;
    const u64 w_end = w_begin + band_windows_per_ticket < a.windows ? w_begin + band_windows_per_ticket : a.windows;
    for (u64 w = w_begin; w < w_end; ++w) {
      const u32 r0 = a.window_first[w], r1 = a.window_first[w + 1];
      const u64 q = u64(r0) >> (2 * b);
      const u32 k0 = a.band_first[q], nodes = a.band_first[q + 1] - k0;
      if (q != band_held) {  // (uniform: every thread read band_held after the last barrier)
        for (u32 g = threadIdx.x; g < nodes; g += T) {
          const u32 node = a.node_of[k0 + g];
          const NodeRef ref = a.f.ref[node];
          const CooLayout l = coow_layout(node_count_word(a.pool, ref), sizeof(V));
          coord_base[g] = ref_offset(ref) + l.coord_offset;
          value_base[g] = ref_offset(ref) + l.value_offset;
          col_of[g] = a.f.C[node] << (2 * b);
        }
      }
      const u64 lw = w - a.wfirst[q];
      const u32* at = a.seg + a.table[q];
      const u32 out0 = a.start[r0], total = a.start[r1] - out0;
      // One row: node order is its column order, and its entries go straight
      // out, coalesced, however many. Several (at most band_stage): staged.
      const bool one_row = r1 - r0 == 1;
      if (!one_row)  // (the table is cleared before its nodes are set, across the barrier below)
        for (u32 p = threadIdx.x; p < total; p += T) tmp.load.owner[p] = 0;
      u32 len[per], place[per];
#pragma unroll
      for (u32 j = 0; j < per; ++j) {
        const u32 g = threadIdx.x * per + j;
        const u32 lo = g < nodes ? at[lw * nodes + g] : 0;
        len[j] = g < nodes ? at[(lw + 1) * nodes + g] - lo : 0;
        if (g < nodes) first_of[g] = lo;
      }
      Scan(tmp.load.scan).ExclusiveSum(len, place);
#pragma unroll
      for (u32 j = 0; j < per; ++j)
        if (threadIdx.x * per + j < nodes) place_of[threadIdx.x * per + j] = place[j];
      __syncthreads();
      if (threadIdx.x == 0) band_held = q;  // (read again only after the next barrier)
      if (!one_row) {
        // A nonempty part's node at its first place (distinct places), then
        // each place takes the largest node at or before it.
#pragma unroll
        for (u32 j = 0; j < per; ++j)
          if (len[j] > 0) tmp.load.owner[place[j]] = static_cast<std::uint16_t>(threadIdx.x * per + j);
        __syncthreads();
        u32 o[band_items];
#pragma unroll
        for (u32 j = 0; j < band_items; ++j) {
          const u32 p = threadIdx.x * band_items + j;
          o[j] = p < total ? tmp.load.owner[p] : 0;
        }
        Scan(tmp.load.scan).InclusiveScan(o, o, cuda::maximum<u32>{});
#pragma unroll
        for (u32 j = 0; j < band_items; ++j) {
          const u32 p = threadIdx.x * band_items + j;
          if (p < total) tmp.load.owner[p] = static_cast<std::uint16_t>(o[j]);  // (its own places: no race)
        }
        __syncthreads();
      }
      const u32 band_row0 = static_cast<u32>(q << (2 * b));
      for (u32 base = 0; base < total; base += band_ahead * T) {
        WideCoord wc[band_ahead];
        Out value[band_ahead];
        u32 node[band_ahead];
#pragma unroll
        for (u32 j = 0; j < band_ahead; ++j) {
          const u32 p = base + j * T + threadIdx.x;
          if (p >= total) continue;
          const u32 g = one_row ? band_node_at(place_of, nodes, p) : tmp.load.owner[p];
          const u32 e = first_of[g] + (p - place_of[g]);
          node[j] = g;
          wc[j] = reinterpret_cast<const WideCoord*>(a.pool + coord_base[g])[e];
          if constexpr (std::is_same_v<Out, V>) {
            // (scaled where it is stored: used here, each load would be waited
            // on before the next place's lookup)
            value[j] = reinterpret_cast<const V*>(a.pool + value_base[g])[e];
          } else {
            value[j] = static_cast<Out>(value_base[g] / sizeof(V) + e);
          }
        }
#pragma unroll
        for (u32 j = 0; j < band_ahead; ++j) {
          const u32 p = base + j * T + threadIdx.x;
          if (p >= total) continue;
          const I col = static_cast<I>(col_of[node[j]] | wc[j].col);
          if constexpr (std::is_same_v<Out, V>)
            if (!a.unscaled) value[j] = a.scale * value[j];
          if (one_row) {
            if (a.row_out) a.row_out[out0 + p] = static_cast<I>(r0);
            a.col_out[out0 + p] = col;
            a.val_out[out0 + p] = value[j];
          } else {
            stage_val[p] = value[j];
            stage_col[p] = col;
            stage_row[p] = static_cast<std::uint16_t>(band_row0 + wc[j].row - r0);
          }
        }
      }
      __syncthreads();
      if (!one_row) {
        // Rows within the window: below r1 - r0 <= d^2 <= 2^14; the padding
        // (r1 - r0) sorts last. The sort looks at the bits those take alone:
        // R-MAT's windows of ~130 rows sort in two passes instead of four.
        const u32 span = r1 - r0;
        const auto pad = static_cast<std::uint16_t>(span);
        std::uint16_t key[band_items], from[band_items];
#pragma unroll
        for (u32 j = 0; j < band_items; ++j) {
          const u32 p = threadIdx.x * band_items + j;
          key[j] = p < total ? stage_row[p] : pad;
          from[j] = static_cast<std::uint16_t>(p);
        }
        // (stable: a row's entries keep their node order, which is column order)
        Sort(tmp.sort).SortBlockedToStriped(key, from, 0, 32 - __clz(static_cast<int>(span)));  // (bit width; span >= 2)
#pragma unroll
        for (u32 j = 0; j < band_items; ++j) {
          const u32 s = j * T + threadIdx.x;
          if (s < total) {
            if (a.row_out) a.row_out[out0 + s] = static_cast<I>(r0 + key[j]);
            a.col_out[out0 + s] = stage_col[from[j]];
            a.val_out[out0 + s] = stage_val[from[j]];
          }
        }
      }
      __syncthreads();  // the shared arrays are the next window's
    }
  }
}

}  // namespace hisparse::ops::convert_detail
