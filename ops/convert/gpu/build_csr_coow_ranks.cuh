#pragma once
// The CSR path's COOW nodes filled by ranks, without a sort (perf-log C27).
// A COOW node's entries go in row-major order, which is CSR order, and a
// depth-2 node is one block (row band R, column band C) of d² × d² cells. So
// inside the CSR range of band R (a contiguous run of entries), the entries
// of node (R, C) are those whose column lies in band C, and an entry's rank
// in its node is the number of earlier entries of band R in band C: a stable
// counting sort by C, segmented by R, with at most grid_cols bins.
//
// Each band's entries are cut into chunks of coow_rank_chunk entries. Pass 1
// counts every chunk's entries per column band (shared memory); one scan of
// those counts, laid out band by band, column band by column band, chunk by
// chunk, gives each (chunk, column band) its first rank; pass 2 ranks each
// entry within its chunk (a warp's entries in order, the warps' counts
// scanned), stages the chunk in shared memory in column-band order and
// writes it out to its COOW nodes, a node's entries by consecutive threads
// (perf-log C29). No per-entry work arrays (the
// sort took four arrays of a u32 an entry, the build's peak on R-MAT). Taken
// where the blocks' COOW nodes are known per block (the prune ran:
// prune_cell_owner_kernel) and grid_cols is at most coow_rank_bins.
#include <string>

#include "build_kernels.cuh"
#include "build_skeleton.cuh"
#include "hisparse/formats/error.hpp"
#include "work_memory.cuh"

namespace hisparse::ops::convert_detail {

inline constexpr u32 coow_rank_threads = 256;
inline constexpr u32 coow_rank_warps = coow_rank_threads / 32;
inline constexpr u32 coow_rank_per_warp = 256;  // entries, in groups of 32
inline constexpr u32 coow_rank_chunk = coow_rank_warps * coow_rank_per_warp;
inline constexpr u32 coow_rank_groups = coow_rank_per_warp / 32;  // a lane's entries
inline constexpr u32 coow_rank_bins = 1024;
static_assert(coow_rank_chunk <= 0xFFFF && coow_rank_bins <= 0x10000, "staged positions and bands are 16-bit");
static_assert(coow_rank_bins % coow_rank_threads == 0, "the scan gives each thread the same number of bands");

struct CoowRanks {
  const u64* band_first;   // per row band: its first CSR entry (grid_rows + 1)
  const u64* chunk_base;   // per row band: its first chunk (grid_rows + 1)
  const u32* chunk_band;   // per chunk: its row band
  u64 chunks, grid_rows, grid_cols;
  u32* counts;             // per (band, column band, chunk), in that order
  const u32* owner;        // per block: its COOW node, or ~0
};

// A band's chunks: band_first from the row pointers, the chunk counts
// (scanned by the caller into chunk_base).
template <class I>
__global__ void coow_band_chunks_kernel(const I* row_ptr, u64 rows, u32 b, u64 grid_rows, u64* band_first,
                                        u64* chunks) {
  for (u64 r = blockIdx.x * u64(blockDim.x) + threadIdx.x; r <= grid_rows; r += u64(gridDim.x) * blockDim.x) {
    const u64 row = r << (2 * b) < rows ? r << (2 * b) : rows;
    band_first[r] = static_cast<u64>(row_ptr[row]);
    if (r < grid_rows) {
      const u64 end = (r + 1) << (2 * b) < rows ? (r + 1) << (2 * b) : rows;
      const u64 m = static_cast<u64>(row_ptr[end]) - static_cast<u64>(row_ptr[row]);
      chunks[r] = (m + coow_rank_chunk - 1) / coow_rank_chunk;
    } else {
      chunks[r] = 0;
    }
  }
}

__global__ void coow_chunk_bands_kernel(const u64* chunk_base, u64 grid_rows, u32* chunk_band) {
  for (u64 r = blockIdx.x; r < grid_rows; r += gridDim.x)
    for (u64 c = chunk_base[r] + threadIdx.x; c < chunk_base[r + 1]; c += blockDim.x) chunk_band[c] = static_cast<u32>(r);
}

// Chunk q of band R: its entries [lo, hi) and its index j in the band.
struct CoowChunk {
  u64 band, j, lo, hi, n_band_chunks;
};

__device__ inline CoowChunk coow_chunk(const CoowRanks& c, u64 q) {
  const u64 R = c.chunk_band[q], j = q - c.chunk_base[R];
  const u64 lo = c.band_first[R] + j * coow_rank_chunk;
  const u64 hi = lo + coow_rank_chunk < c.band_first[R + 1] ? lo + coow_rank_chunk : c.band_first[R + 1];
  return {R, j, lo, hi, c.chunk_base[R + 1] - c.chunk_base[R]};
}

// The row r in [lo, hi) with row_ptr[r] <= x < row_ptr[r + 1], given
// row_ptr[lo] <= x < row_ptr[hi], searched by the whole warp: 31 lanes probe
// evenly spaced rows and a ballot keeps the gap between the last that is at
// most x and the first beyond it, so that a band of 2^14 rows takes three
// rounds of loads instead of fourteen dependent ones (2^16 rows: four).
// Every lane returns r.
template <class I>
__device__ inline u64 warp_row_search(const I* row_ptr, u64 lo, u64 hi, u64 x, u32 lane) {
  while (hi - lo > 1) {
    const u64 span = hi - lo;
    // probe(i) = lo + floor(span (i + 1) / 32) for i < 31: non-decreasing,
    // below hi, and covering every row of (lo, hi) once span < 32.
    const u64 p = lo + span * (lane + 1) / 32;
    const bool at_most = lane < 31 && (p == lo || static_cast<u64>(row_ptr[p]) <= x);
    const u32 t = static_cast<u32>(__popc(__ballot_sync(0xFFFFFFFFu, at_most)));  // lanes [0, t) hold
    const u64 new_lo = t ? lo + span * t / 32 : lo;
    hi = t < 31 ? lo + span * (t + 1) / 32 : hi;
    lo = new_lo;
  }
  return lo;
}

// (band R, column band C, chunk j) -> its place in counts.
__device__ inline u64 coow_count_index(const CoowRanks& c, const CoowChunk& k, u64 C, u64 j) {
  return c.chunk_base[k.band] * c.grid_cols + C * k.n_band_chunks + j;
}

template <class I>
__global__ void __launch_bounds__(coow_rank_threads) coow_count_kernel(const I* col, u32 b, CoowRanks c) {
  __shared__ u32 hist[coow_rank_bins];
  for (u64 q = blockIdx.x; q < c.chunks; q += gridDim.x) {
    for (u32 i = threadIdx.x; i < c.grid_cols; i += coow_rank_threads) hist[i] = 0;
    __syncthreads();
    const CoowChunk k = coow_chunk(c, q);
    for (u64 e = k.lo + threadIdx.x; e < k.hi; e += coow_rank_threads)
      atomicAdd(&hist[static_cast<u64>(col[e]) >> (2 * b)], 1u);
    __syncthreads();
    for (u32 i = threadIdx.x; i < c.grid_cols; i += coow_rank_threads) c.counts[coow_count_index(c, k, i, k.j)] = hist[i];
    __syncthreads();
  }
}

// The fill's shared memory: per column band, the warps' next positions
// (u16), its node's byte offset in the pool, its value offset and the rank
// base; per entry of the chunk, its staged value, coordinate and column band.
template <class V>
constexpr u64 coow_fill_shared_bytes(u64 grid_cols) {
  return grid_cols * (sizeof(u64) + 2 * sizeof(u32) + coow_rank_warps * sizeof(std::uint16_t)) +
         coow_rank_chunk * (sizeof(V) + sizeof(u32) + sizeof(std::uint16_t));
}

// counts scanned (exclusive, in that order): (chunk, column band)'s first
// rank in node (band, column band) is scanned[chunk] - scanned[chunk 0].
// A chunk's entries are first staged in shared memory sorted by column band
// (a stable counting sort: the warps' counts scanned over the bands), then
// written out in that order, so that consecutive threads write consecutive
// coordinates and values of one node (perf-log C29). Writing each entry
// straight from its place in CSR order sent every lane of a store to another
// node: a sector written per 2-8 bytes.
template <class V, class I>
__global__ void __launch_bounds__(coow_rank_threads)
    coow_fill_kernel(const I* row_ptr, const I* col, const V* val, u64 rows, u32 b, CoowRanks c, const u32* scanned,
                     const u32* first_leaf, const u64* entry_scan, const u64* node_offset, u64 base, std::byte* pool) {
  extern __shared__ __align__(16) std::byte shared[];
  __shared__ u32 warp_sums[coow_rank_warps];
  const u64 G = c.grid_cols;
  u64* node = reinterpret_cast<u64*>(shared);  // per column band: its COOW node's offset in the pool, or ~0
  V* staged_val = reinterpret_cast<V*>(node + G);
  u32* staged_coord = reinterpret_cast<u32*>(staged_val + coow_rank_chunk);
  u32* value_at = staged_coord + coow_rank_chunk;  // per column band: the node's value offset
  u32* rank_base = value_at + G;                   // staged position p of band C: rank p + rank_base[C] in its node
  auto* next = reinterpret_cast<std::uint16_t*>(rank_base + G);  // [warp * G + C]: the warp's next position
  std::uint16_t* staged_band = next + coow_rank_warps * G;
  const u32 warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const u64 mm = (u64{1} << (2 * b)) - 1;
  // A thread's column bands for the scan: a contiguous range of at most
  // coow_rank_bins / coow_rank_threads.
  constexpr u32 per_thread = coow_rank_bins / coow_rank_threads;
  const u32 per = static_cast<u32>((G + coow_rank_threads - 1) / coow_rank_threads);
  const u32 c_lo = threadIdx.x * per < G ? threadIdx.x * per : static_cast<u32>(G);
  const u32 c_hi = c_lo + per < G ? c_lo + per : static_cast<u32>(G);
  for (u64 q = blockIdx.x; q < c.chunks; q += gridDim.x) {
    const CoowChunk k = coow_chunk(c, q);
    const u64 w_lo = k.lo + u64{warp} * coow_rank_per_warp;
    const u64 w_hi = w_lo + coow_rank_per_warp < k.hi ? w_lo + coow_rank_per_warp : k.hi;
    // A lane's columns (one a group of 32) loaded at once before the warp
    // counts them: a load per group, waited on in turn, was the kernel's
    // largest stall (perf-log C30). Columns fit 32 bits here (at most
    // coow_rank_bins bands of 2^(2b) <= 2^16 columns).
    u32 cv[coow_rank_groups];
#pragma unroll
    for (u32 g = 0; g < coow_rank_groups; ++g) {
      const u64 e = w_lo + 32 * g + lane;
      cv[g] = e < w_hi ? static_cast<u32>(col[e]) : 0u;
    }
    // The walk below is rolled (unrolled, it took twice the registers): it
    // loads each group's column and value a group ahead, the first here.
    u32 c_next = cv[0];
    V v_next = w_lo + lane < w_hi ? val[w_lo + lane] : V{};
    for (u32 i = lane; i < G; i += 32) next[warp * G + i] = 0;
    __syncwarp();
    // Each warp counts its entries per column band ...
#pragma unroll
    for (u32 g = 0; g < coow_rank_groups; ++g) {
      const bool valid = w_lo + 32 * g + lane < w_hi;
      const u32 C = valid ? cv[g] >> (2 * b) : 0xFFFFFFFFu;
      const unsigned same = __match_any_sync(0xFFFFFFFFu, C);
      if (valid && lane == static_cast<u32>(__ffs(same) - 1)) next[warp * G + C] += __popc(same);
      __syncwarp();
    }
    __syncthreads();
    // ... the counts become the warps' first positions in the chunk sorted
    // by column band: the bands before (a block scan), then the warps before.
    u32 total[per_thread];
    u32 mine = 0;
    for (u32 i = 0; i < per_thread; ++i) {
      total[i] = 0;
      const u32 C = c_lo + i;
      if (C >= c_hi) continue;
      for (u32 v = 0; v < coow_rank_warps; ++v) {
        const u32 t = next[v * G + C];
        next[v * G + C] = static_cast<std::uint16_t>(total[i]);
        total[i] += t;
      }
      mine += total[i];
    }
    u32 incl = mine;
    for (u32 d = 1; d < 32; d *= 2) {
      const u32 t = __shfl_up_sync(0xFFFFFFFFu, incl, d);
      if (lane >= d) incl += t;
    }
    if (lane == 31) warp_sums[warp] = incl;
    __syncthreads();
    u32 start = incl - mine;
    for (u32 v = 0; v < warp; ++v) start += warp_sums[v];
    for (u32 i = 0; i < per_thread; ++i) {
      const u32 C = c_lo + i;
      if (C >= c_hi) continue;
      if (total[i] == 0) {  // no entry of this band here: nothing to look up
        node[C] = ~u64{0};
        continue;
      }
      for (u32 v = 0; v < coow_rank_warps; ++v) next[v * G + C] = static_cast<std::uint16_t>(next[v * G + C] + start);
      const u64 at = coow_count_index(c, k, C, k.j);
      const u32 first_rank = scanned[at] - scanned[at - k.j];
      rank_base[C] = first_rank - start;  // (mod 2^32)
      const u32 owner = c.owner[k.band * G + C];
      if (owner == 0xFFFFFFFFu) {  // a standard node's entries: its leaves hold them
        node[C] = ~u64{0};
      } else {
        const u64 f = entry_scan[first_leaf[owner]];
        const u32 count = static_cast<u32>(entry_scan[first_leaf[owner + 1]] - f);
        node[C] = base + node_offset[owner];
        value_at[C] = coow_layout(count, sizeof(V)).value_offset;
        if (first_rank == 0) *reinterpret_cast<u32*>(pool + node[C]) = count;
      }
      start += total[i];
    }
    __syncthreads();
    // Entries in CSR order, staged at their band's next position plus
    // their lanes of that band below them.
    // The first entry's row, then each lane advances its own.
    const u64 row_lo = k.band << (2 * b);
    const u64 row_hi = ((k.band + 1) << (2 * b)) < rows ? (k.band + 1) << (2 * b) : rows;
    u64 row = w_lo < w_hi ? warp_row_search(row_ptr, row_lo, row_hi, w_lo, lane) : 0;
#pragma unroll 1
    for (u64 g = w_lo; g < w_hi; g += 32) {
      const u64 e = g + lane;
      const bool valid = e < w_hi;
      const u64 cc = c_next;
      const V v = v_next;
      if (e + 32 < w_hi) {
        c_next = static_cast<u32>(col[e + 32]);
        v_next = val[e + 32];
      }
      const u32 C = valid ? static_cast<u32>(cc >> (2 * b)) : 0xFFFFFFFFu;
      const unsigned same = __match_any_sync(0xFFFFFFFFu, C);
      const u32 below = __popc(same & ((1u << lane) - 1u));
      const u32 pos = valid ? next[warp * G + C] + below : 0;
      __syncwarp();
      if (valid && lane == static_cast<u32>(__ffs(same) - 1)) next[warp * G + C] += __popc(same);
      __syncwarp();
      if (!valid) continue;
      while (static_cast<u64>(row_ptr[row + 1]) <= e) ++row;
      staged_coord[pos] = (static_cast<u32>(cc & mm) << 16) | static_cast<u32>(row & mm);  // col16 << 16 | row16
      staged_val[pos] = v;
      staged_band[pos] = static_cast<std::uint16_t>(C);
    }
    __syncthreads();
    // Out in band order: a node's entries of this chunk are consecutive.
    const u32 n = static_cast<u32>(k.hi - k.lo);
    for (u32 p = threadIdx.x; p < n; p += coow_rank_threads) {
      const u32 C = staged_band[p];
      const u64 at = node[C];
      if (at == ~u64{0}) continue;
      const u32 rank = p + rank_base[C];
      reinterpret_cast<u32*>(pool + at + 8)[rank] = staged_coord[p];
      reinterpret_cast<V*>(pool + at + value_at[C])[rank] = staged_val[p];
    }
    __syncthreads();  // the shared arrays are reused by the next chunk
  }
}

// The fill's shared memory fits this device (checked where by ranks is chosen).
template <class V, class I>
bool coow_fill_fits(u64 grid_cols) {
  return dynamic_shared_fits(coow_fill_kernel<V, I>, coow_fill_shared_bytes<V>(grid_cols),
                             "cudaFuncGetAttributes(COOW fill)");
}

// The whole fill; the skeleton's depth-2 level (v) and entry scan as
// fill_coow_nodes_csr takes them, owner from prune_cell_owner_kernel.
template <class V, class I>
void fill_coow_nodes_by_ranks(WorkMemory& w, const I* row_ptr, const I* col, const V* val, u64 rows, u32 b,
                              u64 grid_rows, u64 grid_cols, const u32* owner, const Level& v, const u64* entry_scan,
                              std::byte* pool) {
  if (grid_cols > coow_rank_bins || 2 * b > 16)  // (the caller's test: more bands would go unscanned)
    throw Error("internal: the COOW fill by ranks takes at most " + std::to_string(coow_rank_bins) +
                " column bands of 16-bit coordinates");
  const cudaStream_t st = w.stream();
  Array<u64> band_first(w, grid_rows + 1), chunk_base(w, grid_rows + 1);
  {
    Array<u64> chunks(w, grid_rows + 1);
    coow_band_chunks_kernel<I><<<blocks_for(grid_rows + 1), 256, 0, st>>>(row_ptr, rows, b, grid_rows,
                                                                          band_first.get(), chunks.get());
    w.check_launch("COOW band chunks kernel");
    exclusive_sum(w, chunks.get(), chunk_base.get(), grid_rows + 1);
  }
  const u64 n_chunks = read_back(w, chunk_base.get() + grid_rows, "read COOW chunks");
  if (n_chunks == 0) {  // (no entries: the CSR path is not taken then)
    w.phase("COOW fill");
    return;
  }
  Array<u32> chunk_band(w, n_chunks), counts(w, n_chunks * grid_cols), scanned(w, n_chunks * grid_cols);
  coow_chunk_bands_kernel<<<static_cast<unsigned>(grid_rows < 65535 ? grid_rows : 65535), 256, 0, st>>>(
      chunk_base.get(), grid_rows, chunk_band.get());
  w.check_launch("COOW chunk bands kernel");
  const CoowRanks c{band_first.get(), chunk_base.get(), chunk_band.get(), n_chunks, grid_rows, grid_cols,
                    counts.get(), owner};
  const unsigned grid = static_cast<unsigned>(n_chunks < (1u << 20) ? n_chunks : (1u << 20));
  coow_count_kernel<I><<<grid, coow_rank_threads, 0, st>>>(col, b, c);
  w.check_launch("COOW count kernel");
  exclusive_sum(w, counts.get(), scanned.get(), n_chunks * grid_cols);
  counts.release();
  const u64 shared = coow_fill_shared_bytes<V>(grid_cols);
  allow_dynamic_shared(coow_fill_kernel<V, I>, coow_fill_shared_bytes<V>(coow_rank_bins),
                       "cudaFuncSetAttribute(COOW fill)");
  coow_fill_kernel<V, I><<<grid, coow_rank_threads, shared, st>>>(row_ptr, col, val, rows, b, c, scanned.get(),
                                                             v.first_leaf.get(), entry_scan, v.bytes.get(), v.base,
                                                             pool);
  w.check_launch("COOW fill by ranks kernel");
  w.phase("COOW fill");
}

}  // namespace hisparse::ops::convert_detail
