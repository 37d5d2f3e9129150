// GPU conversion failure modes (ops/convert, convert_gpu.hpp):
//  * bad device input throws hisparse::Error naming the row or entry, gives
//    back its memory and leaves the device usable; int32 output of a matrix
//    taller than 2^31 - 1 rows is a LimitError; a device without room and
//    every failed allocation in turn fail cleanly.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "hisparse/formats/builder.hpp"
#include "hisparse/formats/device_matrix.hpp"
#include "hisparse/formats/matrix_market.hpp"
#include "hisparse/formats/validate.hpp"
#include "hisparse/ops/convert_gpu.hpp"
#include "support/counting_allocator.hpp"
#include "support/matrices_dir.hpp"
#include "support/random_matrix.hpp"
#include "support/test_seed.hpp"

#include "convert_case_runner.hpp"
#include "convert_checks.hpp"
#include "device_test_memory.hpp"

using namespace hisparse;
using namespace hisparse::testing;
using namespace hisparse::testing::convert_gpu;
namespace fs = std::filesystem;

namespace {


// Runs f, expects hisparse error E; returns its message.
template <class E = Error, class F>
std::string expect_error(F&& f, const std::string& what) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": threw something other than the expected hisparse error: " << e.what();
    return e.what();
  }
  ADD_FAILURE() << what << ": no error";
  return {};
}

// The message names one of `any` (loose: the row or the entry; wording free).
void expect_mentions(const std::string& msg, const std::vector<std::string>& any, const std::string& what) {
  EXPECT_FALSE(msg.empty()) << what << ": empty message";
  if (any.empty()) return;
  const bool found =
      std::any_of(any.begin(), any.end(), [&](const std::string& s) { return msg.find(s) != std::string::npos; });
  std::string list;
  for (const auto& s : any) list += " \"" + s + "\"";
  EXPECT_TRUE(found) << what << ": the message names none of" << list << ": " << msg;
}

template <class V, class I>
void bad_input(std::mt19937_64& rng, cudaStream_t stream) {
  SCOPED_TRACE((type_name<V, I>()));
  const index_t rows = 2000, cols = 1500;
  const std::uint64_t nnz = 20000;
  const Coo<V> coo = random_coo<V>(rows, cols, nnz, rng);
  const BuildOptions opt{16, true};
  const Matrix<V> host = build_matrix(coo, opt);
  const Csr<V> csr = stable_row_csr(coo);
  DeviceCsrInput<V, I> dcsr(csr);
  DeviceCooInput<V, I> dcoo(coo);
  const auto csr_view = dcsr.view();
  const auto coo_view = dcoo.view();
  const auto build_csr = [&] { (void)ops::build_device_matrix(csr_view, opt, stream); };
  const auto build_coo = [&] { (void)ops::build_device_matrix(coo_view, opt, stream); };

  auto good = [&](const std::string& after) {
    expect_device_usable(after);
    SCOPED_TRACE("a good conversion after: " + after);
    expect_same_pool(ops::build_device_matrix(csr_view, opt, stream), host, opt, "CSR");
    expect_same_pool(ops::build_device_matrix(coo_view, opt, stream), host, opt, "COO");
  };
  good("nothing (warm-up)");
  const std::size_t baseline = free_device_bytes();

  // One element of a device array made bad, the call, the element restored.
  auto bad = [&](const std::string& what, DeviceArray<I>& arr, std::size_t k, I bad_value, I good_value,
                 const auto& call, const std::vector<std::string>& mentions) {
    arr.set(k, bad_value);
    const std::string msg = expect_error(call, what);
    std::printf("  %s (%s): %s\n", what.c_str(), type_name<V, I>().c_str(), msg.c_str());
    expect_mentions(msg, mentions, what);
    arr.set(k, good_value);
    good(what);
    EXPECT_GE(free_device_bytes() + leak_slack, baseline) << what << ": memory not given back";
  };
  auto rp = [&](index_t r) { return static_cast<I>(csr.row_ptr[r]); };
  const auto num = [](auto x) { return std::to_string(x); };

  // CSR row pointers.
  bad("CSR row pointers start at 1", dcsr.row_ptr, 0, I(1), rp(0), build_csr, {});
  bad("CSR row pointers decrease at row 1234", dcsr.row_ptr, 1235, I(rp(1234) - 1), rp(1235), build_csr,
      {"1234", "1235"});
  bad("CSR row pointer far beyond nnz at row 1800 (then decreasing)", dcsr.row_ptr, 1800, I(nnz + 500), rp(1800),
      build_csr, {"1799", "1800", "1801", num(nnz + 500)});
  bad("CSR last row pointer nnz - 1", dcsr.row_ptr, rows, I(nnz - 1), rp(rows), build_csr, {num(nnz), num(nnz - 1)});
  bad("CSR last row pointer nnz + 7", dcsr.row_ptr, rows, I(nnz + 7), rp(rows), build_csr, {num(nnz), num(nnz + 7)});

  // CSR columns: the message names the entry or its row.
  auto row_of = [&](std::size_t k) {
    return static_cast<index_t>(std::upper_bound(csr.row_ptr.begin(), csr.row_ptr.end(), k) - csr.row_ptr.begin() - 1);
  };
  bad("CSR column = cols at entry 15432", dcsr.col, 15432, I(cols), I(csr.col[15432]), build_csr,
      {"15432", num(row_of(15432))});
  bad("CSR column -1 at entry 7777", dcsr.col, 7777, I(-1), I(csr.col[7777]), build_csr, {"7777", num(row_of(7777))});
  bad("CSR column at the type's minimum at entry 19998", dcsr.col, 19998, std::numeric_limits<I>::min(),
      I(csr.col[19998]), build_csr, {"19998", num(row_of(19998))});

  // COO indices: the message names the entry.
  bad("COO row = rows at entry 13579", dcoo.row, 13579, I(rows), I(coo.row[13579]), build_coo, {"13579"});
  bad("COO row -1 at entry 11111", dcoo.row, 11111, I(-1), I(coo.row[11111]), build_coo, {"11111"});
  bad("COO column -5 at entry 2468", dcoo.col, 2468, I(-5), I(coo.col[2468]), build_coo, {"2468"});
  bad("COO column = cols at entry 9876", dcoo.col, 9876, I(cols), I(coo.col[9876]), build_coo, {"9876"});
  bad("COO row at entry 0", dcoo.row, 0, I(rows + 3), I(coo.row[0]), build_coo, {});
  bad("COO column at the last entry", dcoo.col, nnz - 1, std::numeric_limits<I>::max(), I(coo.col[nnz - 1]), build_coo,
      {num(nnz - 1)});
  if constexpr (sizeof(I) == 8) {
    // Would alias a valid row if cut to 32 bits.
    bad("COO row 2^32 + 1 at entry 4321", dcoo.row, 4321, I((std::int64_t{1} << 32) + 1), I(coo.row[4321]), build_coo,
        {"4321"});
    bad("CSR column 2^32 + 7 at entry 5555", dcsr.col, 5555, I((std::int64_t{1} << 32) + 7), I(csr.col[5555]),
        build_csr, {"5555", num(row_of(5555))});
  }

  // A node size the format does not have.
  (void)expect_error([&] { (void)ops::build_device_matrix(coo_view, BuildOptions{3, true}, stream); }, "node size 3");
  (void)expect_error(
      [&] {
        (void)ops::build_device_matrix(csr_view, BuildOptions{512, true}, stream);
      },
      "node size 512");
  good("bad node sizes");
  EXPECT_GE(free_device_bytes() + leak_slack, baseline) << "memory not given back";
}

}  // namespace


// Bad device input: hisparse::Error naming the problem's row or entry, nothing
// left allocated, and the next good conversion works.
TEST(ConvertGpu, BadInputThrows) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  Stream stream;
  bad_input<float, std::int32_t>(rng, nullptr);
  bad_input<double, std::int32_t>(rng, stream.get());
  bad_input<float, std::int64_t>(rng, stream.get());
  bad_input<double, std::int64_t>(rng, nullptr);
}

// int32 output of a matrix with more than 2^31 - 1 rows (or columns, once
// transposed) cannot be: LimitError / Error, and int64 output still works.
TEST(ConvertGpu, Int32OutputOfTooTallMatrix) {
  Coo<float> coo;
  coo.rows = 3'000'000'000;
  coo.cols = 2;
  coo.push(2'999'999'999, 1, 1.5f);
  const Matrix<float> host = build_matrix(coo);
  DeviceMatrix<float> dev(host);
  const Coo<float> want_coo = to_coo(host);
  const Csr<float> want_csr_t = to_csr(host.transpose());  // 2 x 3e9

  auto good = [&](const std::string& after) {
    SCOPED_TRACE("a good conversion after: " + after);
    expect_device_usable(after);
    dev.set_state(false, 1.0f);
    const auto c = ops::to_device_coo<float, std::int64_t>(dev);
    ASSERT_EQ(c.nnz, 1u);
    expect_coo<float, std::int64_t>(download_array<std::int64_t>(c.row.get(), 1),
                                    download_array<std::int64_t>(c.col.get(), 1), download_array<float>(c.val.get(), 1),
                                    want_coo);
    dev.set_state(true, 1.0f);
    const auto t = ops::to_device_csr<float, std::int64_t>(dev);
    ASSERT_EQ(t.rows, 2u);
    expect_csr<float, std::int64_t>(download_array<std::int64_t>(t.row_ptr.get(), 3),
                                    download_array<std::int64_t>(t.col.get(), 1), download_array<float>(t.val.get(), 1),
                                    want_csr_t);
  };
  good("nothing (warm-up)");
  const std::size_t baseline = free_device_bytes();

  dev.set_state(false, 1.0f);
  std::string msg =
      expect_error<LimitError>([&] { (void)ops::to_device_csr<float, std::int32_t>(dev); }, "int32 CSR of 3e9 rows");
  std::printf("  int32 CSR of 3e9 rows: %s\n", msg.c_str());
  EXPECT_FALSE(msg.empty());
  good("int32 CSR of 3e9 rows");

  dev.set_state(false, 1.0f);
  msg = expect_error([&] { (void)ops::to_device_coo<float, std::int32_t>(dev); }, "int32 COO with row 2999999999");
  std::printf("  int32 COO with row 2999999999: %s\n", msg.c_str());
  good("int32 COO of 3e9 rows");

  dev.set_state(true, 1.0f);  // 2 x 3e9: the column does not fit int32
  msg = expect_error([&] { (void)ops::to_device_csr<float, std::int32_t>(dev); }, "int32 CSR with column 2999999999");
  std::printf("  int32 CSR with column 2999999999: %s\n", msg.c_str());
  good("int32 CSR of 3e9 columns");
  EXPECT_GE(free_device_bytes() + leak_slack, baseline) << "memory not given back";
}

// A device without room for the conversion's work memory: a clean error
// before anything is allocated; with the room back, the same call works.
TEST(ConvertGpu, NotEnoughDeviceMemory) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  const Coo<double> coo = random_coo<double>(100000, 100000, 1'500'000, rng);
  const BuildOptions opt{default_node_size, true};
  const Matrix<double> host = build_matrix(coo, opt);
  const DeviceCooInput<double, std::int32_t> in(coo);
  DeviceMatrix<double> dev(host);
  const Coo<double> want = to_coo(host);
  auto good = [&](const std::string& after) {
    SCOPED_TRACE("a good conversion after: " + after);
    expect_device_usable(after);
    expect_same_pool(ops::build_device_matrix(in.view(), opt), host, opt, "build");
    const auto c = ops::to_device_coo<double, std::int32_t>(dev);
    expect_coo<double, std::int32_t>(download_array<std::int32_t>(c.row.get(), c.nnz),
                                     download_array<std::int32_t>(c.col.get(), c.nnz),
                                     download_array<double>(c.val.get(), c.nnz), want);
  };
  good("nothing (warm-up)");
  const std::size_t baseline = free_device_bytes();
  {
    // 48 MiB left: less than the fixed part of the bound alone.
    MemoryHog hog(std::size_t{48} << 20);
    const std::size_t before = free_device_bytes();
    std::string msg = expect_error([&] { (void)ops::build_device_matrix(in.view(), opt); }, "build without room");
    std::printf("  build without room: %s\n", msg.c_str());
    msg = expect_error([&] { (void)ops::to_device_coo<double, std::int32_t>(dev); }, "to_device_coo without room");
    std::printf("  to_device_coo without room: %s\n", msg.c_str());
    {
      // Through a context: the default pool's (checked first, as above), and
      // an allocator of the caller's (not checked: its own failure answers).
      ops::Context ctx;
      msg = expect_error<LimitError>([&] { (void)ops::build_device_matrix(ctx, in.view(), opt); },
                                     "build on a context without room");
      std::printf("  build on a context without room: %s\n", msg.c_str());
      auto counting = std::make_shared<CountingAllocator>();
      ops::Context own(nullptr, counting);
      msg = expect_error([&] { (void)ops::build_device_matrix(own, in.view(), opt); },
                         "build on a caller's allocator without room");
      std::printf("  build on a caller's allocator without room: %s\n", msg.c_str());
      EXPECT_EQ(msg.find("needs up to"), std::string::npos) << "the check ran on a caller's allocator";
      cuda_check(cudaDeviceSynchronize(), "sync");
      EXPECT_GT(counting->allocations.load(), 0);  // the work arrays came from it, until one failed
      EXPECT_EQ(counting->outstanding.load(), 0);
    }
    expect_device_usable("without room");
    EXPECT_GE(free_device_bytes() + leak_slack, before) << "memory not given back without room";
  }
  good("running out of room");
  EXPECT_GE(free_device_bytes() + leak_slack, baseline) << "memory not given back";
}

// Fault injection: the k-th DeviceBytes allocation of each conversion fails,
// k = 0, 1, ... until the conversion makes fewer: each failure is a clean
// memory error that gives back what was allocated before it and leaves the
// device usable; the conversion then succeeds with the right result.
TEST(ConvertGpu, EveryAllocationFailsInTurn) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  Stream stream;
  const BuildOptions opt{16, true};
  const Coo<double> coo = random_coo<double>(3000, 1700, 30000, rng);
  const Matrix<double> host = build_matrix(coo, opt);
  const Csr<double> csr = stable_row_csr(coo);
  const DeviceCooInput<double, std::int32_t> dcoo(coo);
  const DeviceCsrInput<double, std::int64_t> dcsr(csr);
  DeviceMatrix<double> dev(host);
  const Csr<double> want_csr = to_csr(host);
  const Coo<double> want_coo_t = to_coo(host.transpose().scaled(-2.0));
  const cudaStream_t s = stream.get();

  struct Op {
    std::string name;
    bool allocates;  // makes at least one DeviceBytes allocation
    std::function<void()> body;
  };
  const std::vector<Op> ops_list = {
      {"build from COO", true,
       [&] { expect_same_pool(ops::build_device_matrix(dcoo.view(), opt, s), host, opt, "build from COO"); }},
      {"build from CSR", true,
       [&] { expect_same_pool(ops::build_device_matrix(dcsr.view(), opt, s), host, opt, "build from CSR"); }},
      {"to_device_csr", true,
       [&] {
         dev.set_state(false, 1.0);
         const auto c = ops::to_device_csr<double, std::int32_t>(dev, s);
         expect_csr<double, std::int32_t>(download_array<std::int32_t>(c.row_ptr.get(), c.rows + 1),
                                          download_array<std::int32_t>(c.col.get(), c.nnz),
                                          download_array<double>(c.val.get(), c.nnz), want_csr);
       }},
      {"to_device_coo T", true,
       [&] {
         dev.set_state(true, -2.0);
         const auto c = ops::to_device_coo<double, std::int64_t>(dev, s);
         expect_coo<double, std::int64_t>(download_array<std::int64_t>(c.row.get(), c.nnz),
                                          download_array<std::int64_t>(c.col.get(), c.nnz),
                                          download_array<double>(c.val.get(), c.nnz), want_coo_t);
       }},
      {"to_device_coo T into caller memory", false,
       [&] {
         dev.set_state(true, -2.0);
         DeviceArray<std::int32_t> row(dev.nnz()), col(dev.nnz());
         DeviceArray<double> val(dev.nnz());
         ops::to_device_coo<double, std::int32_t>(dev, row.get(), col.get(), val.get(), s);
         expect_coo<double, std::int32_t>(row.download(), col.download(), val.download(), want_coo_t);
       }},
  };
  for (const Op& op : ops_list) {
    SCOPED_TRACE(op.name);
    op.body();  // warm-up (kernels loaded), and the result right with room
    const std::size_t baseline = free_device_bytes();
    long k = 0;
    for (;; ++k) {
      const std::string what = op.name + ": allocation " + std::to_string(k);
      inject_device_bytes_failure(k);
      bool failed = false;
      try {
        op.body();
      } catch (const std::exception& e) {
        const std::string m = e.what();
        EXPECT_NE(dynamic_cast<const Error*>(&e), nullptr) << what << ": not a hisparse::Error: " << m;
        EXPECT_TRUE(m.find("injected") != std::string::npos || m.find("out of memory") != std::string::npos)
            << what << ": " << m;
        failed = true;
      }
      inject_device_bytes_failure(-1);
      expect_device_usable(what);
      EXPECT_GE(free_device_bytes() + leak_slack, baseline) << what << ": memory not given back";
      if (!failed) break;
      ASSERT_LT(k, 1000) << what << ": never succeeds";
    }
    std::printf("  %s: %ld DeviceBytes allocations, each failed in turn\n", op.name.c_str(), k);
    if (op.allocates) {
      EXPECT_GT(k, 0) << op.name << " allocates no DeviceBytes";
    }
  }
}

