// Experiment for perf-log 23 (issue 13, R-MAT): does owning a band of rows
// (per-warp shared slabs, y written once) beat today's wide kernel (a warp per
// 128-entry chunk of a node, run merge across lanes, one global atomic per
// run) on an R-MAT 2^22 graph stored COOW-like (one node per 16384 x 16384
// block, entries row-major, 4-byte local coordinates)? Not part of the
// build: nvcc -O3 -arch=sm_90 -std=c++17 tools/experiments/band_spmv.cu -o
// /tmp/band_spmv && /tmp/band_spmv [scale]. Synthetic R-MAT (relabelled),
// f32, y = A x, bands of H = 1024 rows, cold L2 (a 256 MB buffer written
// before every run), medians of 10; both checked against a double reference.
// A measures before B is built into the library: the library's own wide
// kernel (ops/spmv) is what A imitates, so compare A here with it too.
#include <cuda_runtime.h>
#include <thrust/device_vector.h>
#include <thrust/sort.h>
#include <thrust/unique.h>
#include <thrust/sequence.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <vector>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { std::printf("%s: %s\n", #x, cudaGetErrorString(e_)); std::exit(1); } } while (0)

using u32 = std::uint32_t;
using u64 = std::uint64_t;
constexpr u32 UB = 14;  // a node covers 2^14 x 2^14

__device__ inline u64 mix(u64 x) {
  x ^= x >> 33; x *= 0xff51afd7ed558ccdull; x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ull; x ^= x >> 33;
  return x;
}

// R-MAT (0.57, 0.19, 0.19, 0.05), vertex ids relabelled by perm; key =
// (unit row, unit col, row16, col16) so that a sort gives node-major,
// row-major-within-node order.
__global__ void rmat_kernel(u64 m, u32 scale, const u32* perm, u64* key, u64 seed) {
  for (u64 e = blockIdx.x * u64(blockDim.x) + threadIdx.x; e < m; e += u64(gridDim.x) * blockDim.x) {
    u32 r = 0, c = 0;
    for (u32 l = 0; l < scale; ++l) {
      const double p = (mix(seed ^ (e * 64 + l)) >> 11) * (1.0 / 9007199254740992.0);
      const u32 rb = p >= 0.76, cb = (p >= 0.57 && p < 0.76) || p >= 0.95;
      r = (r << 1) | rb;
      c = (c << 1) | cb;
    }
    r = perm[r];
    c = perm[c];
    key[e] = (u64(r >> UB) << 44) | (u64(c >> UB) << 28) | (u64(r & 16383) << 14) | (c & 16383);
  }
}

// A: today's wide kernel, simplified: a warp per chunk of 128 entries of one
// node, 4 consecutive entries a lane, runs of equal rows merged in the lane
// (earlier runs add at once) and the lanes' last runs merged across lanes
// (suffix sums over equal outputs), one atomic per run head.
__global__ void __launch_bounds__(256, 8) chunk_kernel(const u32* coord, const float* val, const u64* chunk_begin,
                                                        const u32* chunk_node, u64 chunks, const float* x, float* y) {
  const u32 lane = threadIdx.x & 31;
  const u64 w = (blockIdx.x * u64(blockDim.x) + threadIdx.x) / 32, warps = (u64(gridDim.x) * blockDim.x) / 32;
  for (u64 ch = w; ch < chunks; ch += warps) {
    const u64 b = chunk_begin[ch], e = chunk_begin[ch + 1];
    const u32 node = chunk_node[ch];
    const u64 rbase = u64(node >> 16) << UB, cbase = u64(node & 0xFFFF) << UB;
    u64 out = ~0ull;
    float sum = 0.f;
    for (u32 j = 0; j < 4; ++j) {
      const u64 i = b + lane * 4 + j;
      if (i >= e) break;
      const u32 c = coord[i];
      const u64 row = rbase | (c >> 16);
      const float p = val[i] * x[cbase | (c & 0xFFFF)];
      if (row != out) {
        if (out != ~0ull) atomicAdd(y + out, sum);
        out = row;
        sum = p;
      } else {
        sum += p;
      }
    }
    float s = sum;
    for (u32 o = 1; o < 32; o <<= 1) {
      const float t = __shfl_down_sync(0xFFFFFFFFu, s, o);
      const u64 to = __shfl_down_sync(0xFFFFFFFFu, out, o);
      if (lane + o < 32 && to == out) s += t;
    }
    const u64 prev = __shfl_up_sync(0xFFFFFFFFu, out, 1);
    if (out != ~0ull && (lane == 0 || prev != out)) atomicAdd(y + out, s);
  }
}

// B: a block of 8 warps per work unit (a band of H rows of one unit row, or
// a part of a heavy band); warp w takes the unit's slices w, w+8, ...; a
// slice is one node's entries of the band's rows (one range). Each warp sums
// into its own shared slab (no atomics: within a warp step the run heads are
// distinct rows, steps follow one another); then the block sums the slabs and
// writes each row once (a split band adds with atomics).
template <u32 H>
__global__ void __launch_bounds__(256) band_kernel(const u32* coord, const float* val, const u64* unit_slice,
                                                   const u64* slice_begin, const u64* slice_end, const u32* slice_ucol,
                                                   const u32* unit_band, const unsigned char* unit_split, u64 units,
                                                   const float* x, float* y, u64 rows) {
  __shared__ float slab[8][H];
  const u32 lane = threadIdx.x & 31, warp = threadIdx.x / 32;
  for (u64 u = blockIdx.x; u < units; u += gridDim.x) {
    for (u32 i = threadIdx.x; i < 8 * H; i += 256) (&slab[0][0])[i] = 0.f;
    __syncthreads();
    const u64 row0 = u64(unit_band[u]) * H;
    for (u64 s = unit_slice[u] + warp; s < unit_slice[u + 1]; s += 8) {
      const u64 b = slice_begin[s], e = slice_end[s], cbase = u64(slice_ucol[s]) << UB;
      const u64 rbase = (row0 >> UB) << UB;
      for (u64 base = b; base < e; base += 32) {  // (warp-uniform)
        const u64 i = base + lane;
        u64 row = ~0ull;
        float p = 0.f;
        if (i < e) {
          const u32 c = coord[i];
          row = rbase | (c >> 16);
          p = val[i] * x[cbase | (c & 0xFFFF)];
        }
        // Runs of equal rows across lanes (rows ascend within a slice).
        for (u32 o = 1; o < 32; o <<= 1) {
          const float t = __shfl_down_sync(0xFFFFFFFFu, p, o);
          const u64 to = __shfl_down_sync(0xFFFFFFFFu, row, o);
          if (lane + o < 32 && to == row) p += t;
        }
        const u64 prev = __shfl_up_sync(0xFFFFFFFFu, row, 1);
        if (row != ~0ull && (lane == 0 || prev != row)) slab[warp][row - row0] += p;
        __syncwarp();
      }
    }
    __syncthreads();
    const bool split = unit_split[u];
    for (u32 r = threadIdx.x; r < H && row0 + r < rows; r += 256) {
      float t = 0.f;
      for (u32 w2 = 0; w2 < 8; ++w2) t += slab[w2][r];
      if (split) {
        if (t != 0.f) atomicAdd(y + row0 + r, t);
      } else {
        y[row0 + r] = t;
      }
    }
    __syncthreads();
  }
}

// B2: a block per band of H rows (or part of a heavy band), one shared slab
// for the block; a lane per entry (32 consecutive entries of a slice a warp
// step), added into the slab by shared atomics: within a slice of a band
// most entries are alone on their row (R-MAT: ~16 entries a row over 256
// nodes), so a lane-run merge saves little, and conflicts are rare.
template <u32 H>
__global__ void __launch_bounds__(256) band_atomic_kernel(const u32* coord, const float* val, const u64* unit_slice,
                                                          const u64* slice_begin, const u64* slice_end,
                                                          const u32* slice_ucol, const u32* unit_band,
                                                          const unsigned char* unit_split, u64 units, const float* x,
                                                          float* y, u64 rows) {
  __shared__ float slab[H];
  const u32 lane = threadIdx.x & 31, warp = threadIdx.x / 32;
  for (u64 u = blockIdx.x; u < units; u += gridDim.x) {
    for (u32 i = threadIdx.x; i < H; i += 256) slab[i] = 0.f;
    __syncthreads();
    const u64 row0 = u64(unit_band[u]) * H;
    const u32 rlo = static_cast<u32>(row0 & ((1u << UB) - 1));
    for (u64 s = unit_slice[u] + warp; s < unit_slice[u + 1]; s += 8) {
      const u64 b = slice_begin[s], e = slice_end[s];
      const float* xs = x + (u64(slice_ucol[s]) << UB);
#pragma unroll 4
      for (u64 i = b + lane; i < e; i += 32) {
        const u32 c = coord[i];
        atomicAdd(&slab[(c >> 16) - rlo], val[i] * xs[c & 0xFFFF]);
      }
    }
    __syncthreads();
    const bool split = unit_split[u];
    for (u32 r = threadIdx.x; r < H && row0 + r < rows; r += 256) {
      const float t = slab[r];
      if (split) {
        if (t != 0.f) atomicAdd(y + row0 + r, t);
      } else {
        y[row0 + r] = t;
      }
    }
    __syncthreads();
  }
}

int main(int argc, char** argv) {
  const u32 scale = argc > 1 ? std::atoi(argv[1]) : 22;
  const u64 n = u64{1} << scale, m = 16 * n;
  constexpr u32 H = 1024;
  std::printf("R-MAT scale %u, %llu edges drawn, band H = %u\n", scale, (unsigned long long)m, H);
  std::vector<u32> perm(n);
  std::iota(perm.begin(), perm.end(), 0u);
  std::shuffle(perm.begin(), perm.end(), std::mt19937_64(7));
  thrust::device_vector<u32> dperm(perm.begin(), perm.end());
  thrust::device_vector<u64> key(m);
  rmat_kernel<<<4096, 256>>>(m, scale, thrust::raw_pointer_cast(dperm.data()), thrust::raw_pointer_cast(key.data()), 12345);
  CK(cudaDeviceSynchronize());
  thrust::sort(key.begin(), key.end());
  const u64 nnz = thrust::unique(key.begin(), key.end()) - key.begin();
  key.resize(nnz);
  std::vector<u64> hkey(nnz);
  thrust::copy(key.begin(), key.end(), hkey.begin());
  std::vector<float> hval(nnz), hx(n);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> U(-1.f, 1.f);
  for (auto& v : hval) v = U(rng);
  for (auto& v : hx) v = U(rng);
  std::printf("nnz %llu\n", (unsigned long long)nnz);
  auto row_of = [](u64 k) { return ((k >> 44) << UB) | ((k >> 14) & 16383); };
  auto col_of = [](u64 k) { return (((k >> 28) & 0xFFFF) << UB) | (k & 16383); };
  auto node_of = [](u64 k) { return k >> 28; };
  // Reference in double.
  std::vector<double> ref(n, 0.0);
  for (u64 i = 0; i < nnz; ++i) ref[row_of(hkey[i])] += double(hval[i]) * hx[col_of(hkey[i])];
  // A's chunks: 128 entries of one node.
  std::vector<u64> chunk_begin;
  for (u64 i = 0; i < nnz;) {
    u64 j = i;
    while (j < nnz && node_of(hkey[j]) == node_of(hkey[i])) ++j;
    for (u64 b = i; b < j; b += 128) chunk_begin.push_back(b);
    i = j;
  }
  const u64 chunks = chunk_begin.size();
  chunk_begin.push_back(nnz);
  std::vector<u32> chunk_node(chunks), hcoord(nnz);
  for (u64 c = 0; c < chunks; ++c) chunk_node[c] = u32(node_of(hkey[chunk_begin[c]]));  // urow << 16 | ucol
  for (u64 i = 0; i < nnz; ++i) hcoord[i] = u32(((hkey[i] >> 14) & 16383) << 16) | u32(hkey[i] & 16383);
  // A's chunks end at node ends: chunk_begin[c + 1] may be the next node's start (fine: the next chunk starts there).
  struct Bands {
    std::vector<u64> unit_slice{0}, slice_begin, slice_end;
    std::vector<u32> slice_ucol, unit_band;
    std::vector<unsigned char> unit_split;
  };
  auto make_bands = [&](u32 H, u64 cap) {
    Bands bd;
    auto& [unit_slice, slice_begin, slice_end, slice_ucol, unit_band, unit_split] = bd;
    const u32 bands_per_unit_row = (1u << UB) / H;
    {
      // Nodes in key order; for each unit row, for each band, each node's range.
      u64 i = 0;
      while (i < nnz) {
        const u64 urow = hkey[i] >> 44;
        u64 j = i;
        while (j < nnz && (hkey[j] >> 44) == urow) ++j;
        // node starts within [i, j)
        std::vector<u64> nb;
        for (u64 t = i; t < j; ++t)
          if (t == i || node_of(hkey[t]) != node_of(hkey[t - 1])) nb.push_back(t);
        nb.push_back(j);
        for (u32 band = 0; band < bands_per_unit_row; ++band) {
          const u64 lo_row = u64(band) * H, hi_row = lo_row + H;
          std::vector<std::pair<u64, u64>> sl;
          std::vector<u32> sl_col;
          u64 total = 0;
          for (size_t q = 0; q + 1 < nb.size(); ++q) {
            auto r16 = [&](u64 t) { return (hkey[t] >> 14) & 16383; };
            const u64 a = nb[q], z = nb[q + 1];
            u64 lo = a, hi = z;
            while (lo < hi) { const u64 mid = (lo + hi) / 2; if (r16(mid) < lo_row) lo = mid + 1; else hi = mid; }
            u64 lo2 = lo, hi2 = z;
            while (lo2 < hi2) { const u64 mid = (lo2 + hi2) / 2; if (r16(mid) < hi_row) lo2 = mid + 1; else hi2 = mid; }
            if (lo2 > lo) {
              sl.push_back({lo, lo2});
              sl_col.push_back(u32((hkey[a] >> 28) & 0xFFFF));
              total += lo2 - lo;
            }
          }
          if (sl.empty()) continue;
          const bool split = total > cap;
          u64 acc = 0;
          for (size_t q = 0; q < sl.size(); ++q) {
            const u64 a = sl[q].first, z = sl[q].second;
            if (acc > 0 && acc + (z - a) > cap) {
              unit_slice.push_back(slice_begin.size());
              unit_band.push_back(u32(urow) * bands_per_unit_row + band);
              unit_split.push_back(1);
              acc = 0;
            }
            slice_begin.push_back(a);
            slice_end.push_back(z);
            slice_ucol.push_back(sl_col[q]);
            acc += z - a;
          }
          unit_slice.push_back(slice_begin.size());
          unit_band.push_back(u32(urow) * bands_per_unit_row + band);
          unit_split.push_back(split ? 1 : 0);
        }
        i = j;
      }
    }
    return bd;
  };
  // B's work units: per (unit row, band), the slices of its nodes; a band
  // over `cap` entries is cut into parts of whole slices (split: atomics).
  Bands b1 = make_bands(H, 1 << 15), b2 = make_bands(4096, 1 << 16);
  auto& [unit_slice, slice_begin, slice_end, slice_ucol, unit_band, unit_split] = b1;
  const u64 units = unit_band.size();
  std::printf("A: %llu chunks; B: %llu units, %llu slices (%.2f bytes a nonzero of plan)\n",
              (unsigned long long)chunks, (unsigned long long)units, (unsigned long long)slice_begin.size(),
              (slice_begin.size() * 20.0 + units * 13.0) / nnz);
  // Device arrays.
  thrust::device_vector<float> dval(hval.begin(), hval.end()), dx(hx.begin(), hx.end()), dy(n);
  thrust::device_vector<u64> dchunk(chunk_begin.begin(), chunk_begin.end()), dus(unit_slice.begin(), unit_slice.end()),
      dsb(slice_begin.begin(), slice_begin.end()), dse(slice_end.begin(), slice_end.end());
  thrust::device_vector<u32> dub(unit_band.begin(), unit_band.end()), dsc(slice_ucol.begin(), slice_ucol.end()),
      dcn(chunk_node.begin(), chunk_node.end()), dcoord(hcoord.begin(), hcoord.end());
  thrust::device_vector<unsigned char> dsplit(unit_split.begin(), unit_split.end());
  void* flush = nullptr;
  CK(cudaMalloc(&flush, 256 << 20));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  auto check = [&](const char* what) {
    std::vector<float> hy(n);
    thrust::copy(dy.begin(), dy.end(), hy.begin());
    double worst = 0;
    for (u64 r = 0; r < n; ++r) {
      const double d = std::fabs(hy[r] - ref[r]) / std::max(1.0, std::fabs(ref[r]));
      worst = std::max(worst, d);
    }
    std::printf("  %s: max relative error %.2e %s\n", what, worst, worst < 1e-3 ? "ok" : "WRONG");
  };
  auto time = [&](const char* what, auto&& run) {
    std::vector<float> ms;
    for (int it = 0; it < 13; ++it) {
      CK(cudaMemset(flush, it, 256 << 20));
      CK(cudaEventRecord(e0));
      run();
      CK(cudaEventRecord(e1));
      CK(cudaEventSynchronize(e1));
      float t = 0;
      CK(cudaEventElapsedTime(&t, e0, e1));
      if (it >= 3) ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    std::printf("%s: median %.4f ms (min %.4f)\n", what, ms[ms.size() / 2], ms[0]);
    check(what);
  };
  key.clear();
  key.shrink_to_fit();
  const u32* k = thrust::raw_pointer_cast(dcoord.data());
  const float* v = thrust::raw_pointer_cast(dval.data());
  const float* x = thrust::raw_pointer_cast(dx.data());
  float* y = thrust::raw_pointer_cast(dy.data());
  time("A chunks + atomics (y zeroed first)", [&] {
    cudaMemsetAsync(y, 0, n * sizeof(float));
    chunk_kernel<<<132 * 8, 256>>>(k, v, thrust::raw_pointer_cast(dchunk.data()), thrust::raw_pointer_cast(dcn.data()),
                                   chunks, x, y);
  });
  time("B bands, slabs, y written once (split bands: y zeroed first)", [&] {
    cudaMemsetAsync(y, 0, n * sizeof(float));  // only the split bands need it; kept for simplicity
    band_kernel<H><<<132 * 6, 256>>>(k, v, thrust::raw_pointer_cast(dus.data()), thrust::raw_pointer_cast(dsb.data()),
                                     thrust::raw_pointer_cast(dse.data()), thrust::raw_pointer_cast(dsc.data()),
                                     thrust::raw_pointer_cast(dub.data()),
                                     thrust::raw_pointer_cast(dsplit.data()), units, x, y, n);
  });
  {
    thrust::device_vector<u64> us(b2.unit_slice.begin(), b2.unit_slice.end()), sb(b2.slice_begin.begin(), b2.slice_begin.end()),
        se(b2.slice_end.begin(), b2.slice_end.end());
    thrust::device_vector<u32> ub(b2.unit_band.begin(), b2.unit_band.end()), sc(b2.slice_ucol.begin(), b2.slice_ucol.end());
    thrust::device_vector<unsigned char> sp(b2.unit_split.begin(), b2.unit_split.end());
    const u64 units2 = b2.unit_band.size();
    std::printf("B2: %llu units, %llu slices\n", (unsigned long long)units2, (unsigned long long)b2.slice_begin.size());
    for (int blocks : {4, 8}) {
      char name[96];
      std::snprintf(name, sizeof name, "B2 H=4096, block slab, shared atomics, %d blocks/SM", blocks);
      time(name, [&] {
        cudaMemsetAsync(y, 0, n * sizeof(float));
        band_atomic_kernel<4096><<<132 * blocks, 256>>>(k, v, thrust::raw_pointer_cast(us.data()), thrust::raw_pointer_cast(sb.data()),
                                                     thrust::raw_pointer_cast(se.data()), thrust::raw_pointer_cast(sc.data()),
                                                     thrust::raw_pointer_cast(ub.data()), thrust::raw_pointer_cast(sp.data()),
                                                     units2, x, y, n);
      });
    }
  }
  CK(cudaGetLastError());
  return 0;
}
