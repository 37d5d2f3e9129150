// GPU conversion through a library context (convert_gpu.hpp's Context&
// forms; every other test case of the package also runs its int64 half
// through one, convert_case_runner.hpp):
//  * the result's memory is the context's allocator's, and goes back to it
//    when the matrix or the arrays go, after the context too; the work
//    arrays come from it and are all returned by the end of the call;
//  * conversions one after another on one context, alternating matrices of
//    different sizes (the default pool hands back what the last one freed),
//    and on a context with the synchronous allocator, give the host's
//    results every time;
//  * the n-th allocation failing, for every n a conversion makes: the call
//    throws hisparse::Error, nothing is left allocated, and the same context
//    then converts right.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hisparse/formats/builder.hpp"
#include "hisparse/formats/device_matrix.hpp"
#include "hisparse/formats/matrix_market.hpp"
#include "hisparse/ops/context.hpp"
#include "hisparse/ops/convert_gpu.hpp"
#include "support/counting_allocator.hpp"
#include "support/matrices_dir.hpp"

#include "convert_case_runner.hpp"

using namespace hisparse;
using namespace hisparse::testing;
using namespace hisparse::testing::convert_gpu;

namespace {

// A shared matrix as the host builds it, and its CSR arrays on the device.
struct Input {
  BuildOptions options;
  Matrix<double> want;
  Csr<double> csr;
  DeviceCsrInput<double, std::int32_t> dev;
  Input(const char* file, BuildOptions o)
      : options(o),
        want(build_matrix(read_matrix_market<double>(matrices_dir() / file), o)),
        csr(to_csr(want)),
        dev(csr) {}
};

// A build from CSR, the library-allocated CSR back, and COO back into caller
// memory, all on `ctx`, each checked against the host.
void convert_and_check(ops::Context& ctx, const Input& in, const std::string& what) {
  SCOPED_TRACE(what);
  const DeviceMatrix<double> m = ops::build_device_matrix(ctx, in.dev.view(), in.options);
  expect_same_pool(m, in.want, in.options, "build");
  const ops::DeviceCsr<double, std::int32_t> c = ops::to_device_csr<double, std::int32_t>(ctx, m);
  const auto v = c.view();
  expect_csr<double, std::int32_t>(download_array<std::int32_t>(v.row_ptr, m.rows() + 1),
                                   download_array<std::int32_t>(v.col, m.nnz()), download_array<double>(v.val, m.nnz()),
                                   in.csr);
  DeviceArray<std::int32_t> row(m.nnz()), col(m.nnz());
  DeviceArray<double> val(m.nnz());
  row.poison();
  ops::to_device_coo<double, std::int32_t>(ctx, m, row.get(), col.get(), val.get());
  expect_coo<double, std::int32_t>(row.download(), col.download(), val.download(), to_coo(in.want));
}

}  // namespace

TEST(ConvertGpuContext, TheResultIsTheAllocatorsAndOutlivesTheContext) {
  const Input in("bcsstk13.mtx", BuildOptions{});
  auto counting = std::make_shared<CountingAllocator>();
  DeviceMatrix<double> m;
  ops::DeviceCsr<double, std::int32_t> back;
  {
    ops::Context ctx(nullptr, counting);
    ops::ConvertStats stats;
    m = ops::build_device_matrix(ctx, in.dev.view(), in.options, &stats);
    cuda_check(cudaDeviceSynchronize(), "sync");
    // The pool and the work arrays came from the allocator; the work arrays are back.
    EXPECT_GT(counting->allocations.load(), 5);
    EXPECT_EQ(counting->allocations.load() - counting->deallocations.load(), 1);
    EXPECT_GE(counting->outstanding.load(), static_cast<long long>(m.pool_bytes()));
    EXPECT_GT(stats.peak_work_bytes, 0u);
    back = ops::to_device_csr<double, std::int32_t>(ctx, m);
    cuda_check(cudaDeviceSynchronize(), "sync");
    EXPECT_EQ(counting->allocations.load() - counting->deallocations.load(), 4);  // + row_ptr, col, val
  }
  // The context is gone; what it made still works.
  expect_same_pool(m, in.want, in.options, "the matrix after its context");
  const auto v = back.view();
  expect_csr<double, std::int32_t>(download_array<std::int32_t>(v.row_ptr, m.rows() + 1),
                                   download_array<std::int32_t>(v.col, m.nnz()), download_array<double>(v.val, m.nnz()),
                                   in.csr);
  m = DeviceMatrix<double>();
  back = ops::DeviceCsr<double, std::int32_t>();
  cuda_check(cudaDeviceSynchronize(), "sync");
  EXPECT_EQ(counting->allocations.load(), counting->deallocations.load());
  EXPECT_EQ(counting->outstanding.load(), 0);
}

TEST(ConvertGpuContext, OneAfterAnotherAndWithTheSynchronousAllocator) {
  const Input a("bcsstk13.mtx", BuildOptions{}), b("rajat01.mtx", BuildOptions{16, true});
  for (const bool synchronous : {false, true}) {
    ops::Context ctx(nullptr, synchronous ? runtime::synchronous_allocator() : nullptr);
    for (int round = 0; round < 3; ++round) {
      const std::string what = std::string(synchronous ? "synchronous allocator" : "default pool") + ", round " +
                               std::to_string(round);
      convert_and_check(ctx, a, what + ", bcsstk13");
      convert_and_check(ctx, b, what + ", rajat01");
    }
  }
}

TEST(ConvertGpuContext, AFailingAllocatorLeavesNothingAndTheContextUsable) {
  const Input in("rajat01.mtx", BuildOptions{});
  fail_each_allocation_in_turn(
      8, [&](ops::Context& ctx) { convert_and_check(ctx, in, "failing"); },
      [](const std::exception& e) {
        EXPECT_NE(dynamic_cast<const Error*>(&e), nullptr) << "not a hisparse::Error: " << e.what();
        EXPECT_NE(std::string(e.what()).find("device allocation"), std::string::npos) << e.what();
      },
      [&](ops::Context& ctx) { convert_and_check(ctx, in, "after the failure"); });
}
