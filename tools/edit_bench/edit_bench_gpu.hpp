#pragma once
// The GPU half of hisparse-edit-bench (edit_bench_gpu.cu, built with CUDA):
// the GPU batch edit (ops/edit_gpu.hpp) against the CSR route on the GPU.
#include <memory>

#include "hisparse/formats/coo.hpp"

namespace hisparse::edit_bench {

struct GpuEditTiming {
  double edit_ms = 0;       // ops::edit_version of the family's first version through a context, median
  double edit_stream_ms = 0;  // the same by the form without a context (its arrays of 64 MiB or more mapped at each call)
  double csr_ms = 0;        // the batch sorted and merged into new CSR arrays, median
  double new_bytes = 0;     // what the version adds to its family, over the pool's bytes
  bool agree = false;       // the results (both edit forms, the merge) have the same nnz
};

// A matrix on the GPU as HiSparse (built there) and as CSR (extracted).
class GpuEditBench {
 public:
  explicit GpuEditBench(const Coo<double>& coo);
  ~GpuEditBench();
  // `batch` (set) applied `runs` times after a warm-up, each to the same matrix.
  GpuEditTiming run(const Coo<double>& batch, int runs);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A CUDA device is present and this build has the GPU half.
bool gpu_edit_bench_available();

}  // namespace hisparse::edit_bench
