// The GPU half of hisparse-edit-bench: the batch edit (ops::edit_version)
// against the best CSR route we know on the GPU, both from device memory,
// both allocating their results, timed with CUDA events (tools/common/
// cuda_timing.hpp; medians after a warm-up; the matrix is far larger than the
// L2, so it is cold).
//
// The CSR route (set semantics, as the edit): the batch sorted by (row,
// column) with CUB's radix sort and reduced to the last update per position;
// each distinct update finds its place in its row (a binary search); present
// ones overwrite a value, absent ones are inserted: an inclusive scan over
// per-entry insert counts gives every old entry its shift, so the copy into
// the new arrays is one streaming pass, and the row pointers move by a scan of
// per-row insert counts.
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

#include <algorithm>
#include <bit>
#include <string>
#include <vector>

#include "cuda_timing.hpp"
#include "edit_bench_gpu.hpp"
#include "hisparse/formats/device_arena.hpp"
#include "hisparse/ops/convert_gpu.hpp"
#include "hisparse/ops/edit_gpu.hpp"

namespace hisparse::edit_bench {
namespace {

using u32 = std::uint32_t;
using u64 = std::uint64_t;

template <class T>
T* alloc(std::size_t n, cudaStream_t s) {
  void* p = nullptr;
  cuda_check(cudaMallocAsync(&p, std::max<std::size_t>(n, 1) * sizeof(T), s), "cudaMallocAsync");
  return static_cast<T*>(p);
}
void release(void* p, cudaStream_t s) { cudaFreeAsync(p, s); }

inline unsigned grid(u64 n) { return static_cast<unsigned>(std::max<u64>((n + 255) / 256, 1)); }

template <class Call>
void cub_call(cudaStream_t s, Call&& call) {
  std::size_t bytes = 0;
  cuda_check(call(nullptr, bytes), "CUB");
  void* t = alloc<char>(bytes, s);
  cuda_check(call(t, bytes), "CUB");
  release(t, s);
}

__global__ void keys_kernel(const int* r, const int* c, u64 n, u64* key) {
  for (u64 i = blockIdx.x * u64(blockDim.x) + threadIdx.x; i < n; i += u64(gridDim.x) * blockDim.x)
    key[i] = (u64(u32(r[i])) << 32) | u32(c[i]);
}
// last[i] = 1 where i is the last update of its position; last[n] = 0.
__global__ void last_kernel(const u64* key, u64 n, u32* last) {
  for (u64 i = blockIdx.x * u64(blockDim.x) + threadIdx.x; i <= n; i += u64(gridDim.x) * blockDim.x)
    last[i] = i < n && (i + 1 == n || key[i + 1] != key[i]);
}
// Each distinct update: its place in the old arrays and whether it is there.
__global__ void place_kernel(const u64* key, const double* val, const u32* last, const u32* pos, u64 n,
                             const int* row_ptr, const int* col, u64* ukey, double* uval, u32* at, u32* fresh) {
  for (u64 i = blockIdx.x * u64(blockDim.x) + threadIdx.x; i < n; i += u64(gridDim.x) * blockDim.x) {
    if (!last[i]) continue;
    const u32 j = pos[i], r = u32(key[i] >> 32), c = u32(key[i]);
    u32 lo = u32(row_ptr[r]), hi = u32(row_ptr[r + 1]);
    while (lo < hi) {
      const u32 mid = (lo + hi) / 2;
      if (u32(col[mid]) < c) lo = mid + 1; else hi = mid;
    }
    ukey[j] = key[i];
    uval[j] = val[i];
    at[j] = lo;
    fresh[j] = !(lo < u32(row_ptr[r + 1]) && u32(col[lo]) == c);
  }
}
__global__ void count_kernel(const u32* at, const u64* ukey, const u32* fresh, u64 m, u32* per_entry, u32* per_row) {
  for (u64 j = blockIdx.x * u64(blockDim.x) + threadIdx.x; j < m; j += u64(gridDim.x) * blockDim.x) {
    if (!fresh[j]) continue;
    atomicAdd(per_entry + at[j], 1u);
    atomicAdd(per_row + (ukey[j] >> 32) + 1, 1u);
  }
}
// Old entry e moves by the inserts placed at or before it.
__global__ void copy_kernel(const int* col, const double* val, const u32* shift, u64 nnz, int* ncol, double* nval) {
  for (u64 e = blockIdx.x * u64(blockDim.x) + threadIdx.x; e < nnz; e += u64(gridDim.x) * blockDim.x) {
    const u64 to = e + shift[e];
    ncol[to] = col[e];
    nval[to] = val[e];
  }
}
// Inserts at at + (inserts before them); updates where their entry went.
__global__ void write_kernel(const u64* ukey, const double* uval, const u32* at, const u32* fresh, const u32* ins, u64 m,
                             const u32* shift, int* ncol, double* nval) {
  for (u64 j = blockIdx.x * u64(blockDim.x) + threadIdx.x; j < m; j += u64(gridDim.x) * blockDim.x) {
    if (fresh[j]) {
      const u64 to = u64(at[j]) + ins[j];
      ncol[to] = int(u32(ukey[j]));
      nval[to] = uval[j];
    } else {
      nval[u64(at[j]) + shift[at[j]]] = uval[j];
    }
  }
}
__global__ void row_ptr_kernel(const int* row_ptr, const u32* add, u64 rows, int* out) {
  for (u64 r = blockIdx.x * u64(blockDim.x) + threadIdx.x; r <= rows; r += u64(gridDim.x) * blockDim.x)
    out[r] = row_ptr[r] + int(add[r]);
}

struct NewCsr {
  int* row_ptr = nullptr;
  int* col = nullptr;
  double* val = nullptr;
  u64 nnz = 0;
};

// CSR (32-bit indices) with the batch set into it, into new arrays.
NewCsr csr_merge(const ops::DeviceCsr<double, int>& a, const int* br, const int* bc, const double* bv, u64 n,
                 cudaStream_t s) {
  const u64 rows = a.rows, nnz = a.nnz;
  u64* key = alloc<u64>(n, s);
  u64* key2 = alloc<u64>(n, s);
  double* val2 = alloc<double>(n, s);
  keys_kernel<<<grid(n), 256, 0, s>>>(br, bc, n, key);
  const int bits = 32 + std::max(1, static_cast<int>(std::bit_width(rows)));
  cub_call(s, [&](void* t, std::size_t& b) {
    return cub::DeviceRadixSort::SortPairs(t, b, key, key2, bv, val2, static_cast<std::int64_t>(n), 0, bits, s);
  });
  u32* last = alloc<u32>(n + 1, s);
  u32* pos = alloc<u32>(n + 1, s);
  last_kernel<<<grid(n + 1), 256, 0, s>>>(key2, n, last);
  cub_call(s, [&](void* t, std::size_t& b) { return cub::DeviceScan::ExclusiveSum(t, b, last, pos, n + 1, s); });
  u32 m = 0;
  cuda_check(cudaMemcpyAsync(&m, pos + n, sizeof(u32), cudaMemcpyDeviceToHost, s), "cudaMemcpyAsync");
  cuda_check(cudaStreamSynchronize(s), "sync");
  u64* ukey = alloc<u64>(m, s);
  double* uval = alloc<double>(m, s);
  u32* at = alloc<u32>(m, s);
  u32* fresh = alloc<u32>(m + 1, s);
  u32* ins = alloc<u32>(m + 1, s);
  place_kernel<<<grid(n), 256, 0, s>>>(key2, val2, last, pos, n, a.row_ptr.as<int>(), a.col.as<int>(), ukey, uval, at,
                                       fresh);
  cuda_check(cudaMemsetAsync(fresh + m, 0, sizeof(u32), s), "memset");
  cub_call(s, [&](void* t, std::size_t& b) { return cub::DeviceScan::ExclusiveSum(t, b, fresh, ins, m + 1, s); });
  u32 k = 0;
  cuda_check(cudaMemcpyAsync(&k, ins + m, sizeof(u32), cudaMemcpyDeviceToHost, s), "cudaMemcpyAsync");
  u32* per_entry = alloc<u32>(nnz + 1, s);
  u32* per_row = alloc<u32>(rows + 1, s);
  cuda_check(cudaMemsetAsync(per_entry, 0, (nnz + 1) * sizeof(u32), s), "memset");
  cuda_check(cudaMemsetAsync(per_row, 0, (rows + 1) * sizeof(u32), s), "memset");
  count_kernel<<<grid(m), 256, 0, s>>>(at, ukey, fresh, m, per_entry, per_row);
  cub_call(s, [&](void* t, std::size_t& b) {
    return cub::DeviceScan::InclusiveSum(t, b, per_entry, per_entry, nnz + 1, s);
  });
  cub_call(s, [&](void* t, std::size_t& b) {
    return cub::DeviceScan::InclusiveSum(t, b, per_row, per_row, rows + 1, s);
  });
  cuda_check(cudaStreamSynchronize(s), "sync");
  NewCsr out;
  out.nnz = nnz + k;
  out.row_ptr = alloc<int>(rows + 1, s);
  out.col = alloc<int>(out.nnz, s);
  out.val = alloc<double>(out.nnz, s);
  copy_kernel<<<grid(nnz), 256, 0, s>>>(a.col.as<int>(), a.val.as<double>(), per_entry, nnz, out.col, out.val);
  write_kernel<<<grid(m), 256, 0, s>>>(ukey, uval, at, fresh, ins, m, per_entry, out.col, out.val);
  row_ptr_kernel<<<grid(rows + 1), 256, 0, s>>>(a.row_ptr.as<int>(), per_row, rows, out.row_ptr);
  cuda_check(cudaGetLastError(), "CSR merge kernels");
  for (void* p : {static_cast<void*>(key), static_cast<void*>(key2), static_cast<void*>(val2),
                  static_cast<void*>(last), static_cast<void*>(pos), static_cast<void*>(ukey),
                  static_cast<void*>(uval), static_cast<void*>(at), static_cast<void*>(fresh),
                  static_cast<void*>(ins), static_cast<void*>(per_entry), static_cast<void*>(per_row)})
    release(p, s);
  return out;
}

template <class T>
DeviceBytes upload(const std::vector<T>& v) {
  DeviceBytes d(v.size() * sizeof(T));
  if (!v.empty()) cuda_check(cudaMemcpy(d.get(), v.data(), d.size(), cudaMemcpyHostToDevice), "cudaMemcpy");
  return d;
}

}  // namespace

struct GpuEditBench::Impl {
  index_t rows = 0, cols = 0;
  DeviceMatrix<double> a;
  ops::DeviceCsr<double, int> csr;
  ops::Context ctx;  // the edit's (its default pool keeps what it has mapped)
  cudaMemPool_t merge_pool = nullptr;  // the device's default pool, its threshold restored at the end
  std::uint64_t merge_pool_threshold = 0;
};

GpuEditBench::GpuEditBench(const Coo<double>& coo) : impl_(std::make_unique<Impl>()) {
  // The CSR route's memory (cudaMallocAsync: the device's default pool) is
  // kept between calls as the edit's context keeps its own: a fair baseline.
  int device = 0;
  cuda_check(cudaGetDevice(&device), "cudaGetDevice");
  cudaMemPool_t pool = nullptr;
  cuda_check(cudaDeviceGetDefaultMemPool(&pool, device), "cudaDeviceGetDefaultMemPool");
  cuda_check(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &impl_->merge_pool_threshold),
             "cudaMemPoolGetAttribute");
  impl_->merge_pool = pool;
  std::uint64_t keep = ~std::uint64_t{0};
  cuda_check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep), "cudaMemPoolSetAttribute");
  impl_->rows = coo.rows;
  impl_->cols = coo.cols;
  DeviceBytes r = upload(std::vector<int>(coo.row.begin(), coo.row.end()));
  DeviceBytes c = upload(std::vector<int>(coo.col.begin(), coo.col.end()));
  DeviceBytes v = upload(coo.val);
  impl_->a = ops::build_device_matrix(
      ops::DeviceCooView<double, int>{coo.rows, coo.cols, coo.nnz(), r.as<const int>(), c.as<const int>(),
                                      v.as<const double>()});
  impl_->csr = ops::to_device_csr<double, int>(impl_->a);
}

GpuEditBench::~GpuEditBench() {
  if (impl_ && impl_->merge_pool)
    (void)cudaMemPoolSetAttribute(impl_->merge_pool, cudaMemPoolAttrReleaseThreshold, &impl_->merge_pool_threshold);
}

GpuEditTiming GpuEditBench::run(const Coo<double>& batch, int runs) {
  Impl& m = *impl_;
  DeviceBytes r = upload(std::vector<int>(batch.row.begin(), batch.row.end()));
  DeviceBytes c = upload(std::vector<int>(batch.col.begin(), batch.col.end()));
  DeviceBytes v = upload(batch.val);
  const ops::DeviceCooView<double, int> view{batch.rows, batch.cols, batch.nnz(), r.as<const int>(), c.as<const int>(),
                                             v.as<const double>()};
  GpuEditTiming t;
  std::vector<double> te, ts, tc;
  tools::detail::EventPair events;
  std::uint64_t edit_nnz = 0, csr_nnz = 0, written = 0;
  bool forms_agree = true;  // the edit's two forms give the same nnz in every run
  const std::uint64_t cap = std::min<std::uint64_t>(3 * m.a.pool_bytes() + (std::uint64_t{16} << 20), max_pool_bytes);
  for (int i = 0; i <= runs; ++i) {
    const DeviceMatrix<double> first = ops::versioned(m.a, round_up(cap, node_alignment));
    ops::EditStats st;
    DeviceMatrix<double> e;
    const double ms = events.time([&] { e = ops::edit_version(m.ctx, first, view, ops::EditMode::set, &st); }, false);
    edit_nnz = e.nnz();
    double sms = 0;
    {
      const DeviceMatrix<double> second = ops::versioned(m.a, round_up(cap, node_alignment));
      DeviceMatrix<double> e2;
      sms = events.time([&] { e2 = ops::edit_version(second, view, ops::EditMode::set); }, false);
      forms_agree = forms_agree && e2.nnz() == e.nnz();
    }
    written = st.bytes_written;
    NewCsr n;
    const double cms = events.time([&] { n = csr_merge(m.csr, view.row, view.col, view.val, view.nnz, nullptr); }, false);
    csr_nnz = n.nnz;
    release(n.row_ptr, nullptr);
    release(n.col, nullptr);
    release(n.val, nullptr);
    if (i > 0) {
      te.push_back(ms);
      ts.push_back(sms);
      tc.push_back(cms);
    }
  }
  t.edit_ms = tools::detail::summarize(te).median;
  t.edit_stream_ms = tools::detail::summarize(ts).median;
  t.csr_ms = tools::detail::summarize(tc).median;
  t.new_bytes = static_cast<double>(written) / static_cast<double>(m.a.pool_bytes());
  t.agree = edit_nnz == csr_nnz && forms_agree;
  return t;
}

bool gpu_edit_bench_available() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

}  // namespace hisparse::edit_bench
