// GPU conversion against the host builder (ops/convert, convert_gpu.hpp):
//  * build_device_matrix from device COO and CSR arrays gives the host
//    builder's pool byte for byte (validated, same shape, nnz and size), for
//    f32/f64 values and int32/int64 indices, every SuiteSparse matrix and
//    random matrices of every kind (rectangular, empty, one entry, cancelling
//    duplicates, explicit and negative zeros, dense blocks, wide nodes, node
//    sizes 2..256, dimensions beyond 2^32), CSR rows in any column order;
//  * to_device_csr / to_device_coo (library-allocated and into caller
//    memory) give the host's to_csr / to_coo exactly, in the plain and in a
//    transposed, scaled state, and a round trip rebuilds the same pool;
//
// Failure modes are in test_convert_failures_gpu.cpp; the helpers in
// device_test_memory.hpp, convert_checks.hpp and convert_case_runner.hpp.
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
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "hisparse/formats/builder.hpp"
#include "hisparse/formats/device_matrix.hpp"
#include "hisparse/formats/matrix_market.hpp"
#include "hisparse/formats/validate.hpp"
#include "hisparse/ops/convert_gpu.hpp"
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

// ---------------------------------------------------------------------------

// Every SuiteSparse matrix (complex ones skipped: they read only into complex
// types), at the default node size and a small one, wide nodes on and off.
TEST(ConvertGpu, RealMatrices) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  Stream stream;
  const auto files = matrix_files();
  ASSERT_GE(files.size(), 20u);
  auto run = [&]<class V>(const std::vector<BuildOptions>& option_sets) {
    std::size_t read = 0;
    for (const auto& f : files) {
      Coo<V> coo;
      try {
        coo = read_matrix_market<V>(f);
      } catch (const Error& e) {
        std::printf("  %s skipped: %s\n", f.filename().c_str(), e.what());
        continue;
      }
      ++read;
      for (const BuildOptions& o : option_sets) check_input(f.filename().string(), coo, o, rng, stream.get());
    }
    EXPECT_GE(read, 20u);
  };
  run.template operator()<double>({{default_node_size, true}, {8, true}, {16, false}});
  run.template operator()<float>({{default_node_size, true}, {16, true}});
}

// Tall and wide random matrices at every node size class, wide nodes on and off.
TEST(ConvertGpu, RectangularAtEveryNodeSize) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  Stream stream;
  const auto tall_d = random_coo<double>(5000, 300, 20000, rng);
  const auto wide_d = random_coo<double>(300, 5000, 20000, rng);
  const auto tall_f = random_coo<float>(4000, 700, 15000, rng);
  const auto wide_f = random_coo<float>(700, 4000, 15000, rng);
  for (std::uint32_t d : {2u, 4u, 16u, 128u, 256u}) {
    for (bool wide : {true, false}) {
      check_input("tall f64", tall_d, {d, wide}, rng, stream.get());
      check_input("wide f64", wide_d, {d, wide}, rng, stream.get());
    }
    check_input("tall f32", tall_f, {d, true}, rng, stream.get());
    check_input("wide f32", wide_f, {d, true}, rng, stream.get());
  }
  // Sizes that are not multiples of the node size, one row, one column.
  check_input("1 x 3000", random_coo<double>(1, 3000, 500, rng), {16, true}, rng, stream.get());
  check_input("3000 x 1", random_coo<float>(3000, 1, 500, rng), {4, true}, rng, stream.get());
  check_input("odd 1000 x 999", random_coo<double>(1000, 999, 8000, rng), {8, false}, rng, stream.get());
}

TEST(ConvertGpu, EmptyAndSingleEntry) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  Stream stream;
  auto run = [&]<class V>() {
    for (const BuildOptions o :
         {BuildOptions{default_node_size, true}, BuildOptions{2, false}, BuildOptions{16, true}}) {
      check_input("empty 100 x 70", Coo<V>{100, 70, {}, {}, {}}, o, rng, stream.get());
      check_input("empty 0 x 0", Coo<V>{0, 0, {}, {}, {}}, o, rng, stream.get());
      check_input("empty 0 x 5", Coo<V>{0, 5, {}, {}, {}}, o, rng, stream.get());
      check_input("empty 5 x 0", Coo<V>{5, 0, {}, {}, {}}, o, rng, stream.get());
      check_input("1 x 1", coo_from<V>(1, 1, {{0, 0, V(3.5)}}), o, rng, stream.get());
      check_input("1 x 1 zero", coo_from<V>(1, 1, {{0, 0, V(0)}}), o, rng, stream.get());
      check_input("one entry in a corner", coo_from<V>(1000, 1000, {{999, 0, V(-1.25)}}), o, rng, stream.get());
      check_input("one entry, last cell", coo_from<V>(777, 1234, {{776, 1233, V(2)}}), o, rng, stream.get());
    }
  };
  run.template operator()<float>();
  run.template operator()<double>();
}

// Duplicates are summed in input order: in float, the order decides the sum.
TEST(ConvertGpu, DuplicatesSumInInputOrder) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  Stream stream;
  for (const BuildOptions o : {BuildOptions{default_node_size, true}, BuildOptions{4, true}, BuildOptions{16, false}}) {
    check_input("cancelling f32", cancelling_duplicates<float>(500, 400, 3000, rng), o, rng, stream.get());
    check_input("cancelling f64", cancelling_duplicates<double>(500, 400, 3000, rng), o, rng, stream.get());
    // Every cell many times over.
    check_input("7 x 5, 5000 entries f32", random_coo<float>(7, 5, 5000, rng), o, rng, stream.get());
  }
  // One cell 200000 times (runs across many thread blocks), among a few others.
  Coo<float> one_cell = random_coo<float>(1000, 1000, 2000, rng);
  for (int k = 0; k < 200000; ++k) one_cell.push(417, 33, k % 3 == 0 ? 1e8f : (k % 3 == 1 ? 1.0f : -1e8f) * 0.999f);
  check_input("one cell 200000 times f32", one_cell, {16, true}, rng, stream.get());
}

TEST(ConvertGpu, ExplicitZerosAreKept) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  Stream stream;
  for (const BuildOptions o : {BuildOptions{default_node_size, true}, BuildOptions{4, false}, BuildOptions{16, true}}) {
    check_input("zeros f32", zeros_and_cancellations<float>(rng), o, rng, stream.get());
    check_input("zeros f64", zeros_and_cancellations<double>(rng), o, rng, stream.get());
  }
  Coo<double> all_zero = random_coo<double>(400, 400, 3000, rng);
  for (auto& v : all_zero.val) v = 0.0;
  check_input("all values zero", all_zero, {16, true}, rng, stream.get());
}

// Clustered entries with fill 1.0: dense leaves (and fully dense matrices).
TEST(ConvertGpu, DenseBlocks) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  Stream stream;
  bool dense_seen = false;
  auto run = [&](const std::string& what, const auto& coo, const BuildOptions& o) {
    const auto hc = prepare(what, coo, o, rng);
    dense_seen = dense_seen || validate(hc.host.content()).dense > 0;
    run_all_index_types(hc, stream.get());
  };
  run("clustered f64", clustered_coo<double>(1000, 800, 6, 64, 1.0, rng), {16, true});
  run("clustered f32", clustered_coo<float>(1000, 800, 6, 64, 1.0, rng), {4, false});
  run("clustered f64 d128", clustered_coo<double>(2000, 2000, 3, 300, 1.0, rng), {default_node_size, true});
  run("fully dense 256 f32", clustered_coo<float>(256, 256, 1, 256, 1.0, rng), {256, true});
  // Dense blocks entered twice: duplicates inside dense leaves.
  auto twice = clustered_coo<double>(300, 300, 2, 40, 1.0, rng);
  const auto again = twice;
  for (std::size_t k = 0; k < again.nnz(); ++k) twice.push(again.row[k], again.col[k], -0.5 * again.val[k]);
  run("dense blocks twice", twice, {8, true});
  EXPECT_TRUE(dense_seen) << "no case had a dense leaf";
}

// Block rows longer than the extraction's stage (8 KB a warp): sparse leaves
// of a wide band, extracted by windows of rows; a row longer than the stage
// by itself (written straight); block rows spanning a few hundred leaf
// columns (the CSR build's warp path, up to 512).
TEST(ConvertGpu, LongBlockRows) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  Stream stream;
  auto band = [&](index_t n, index_t per_row, index_t half_width) {
    Coo<double> c;
    c.rows = c.cols = n;
    std::uniform_int_distribution<index_t> off(-half_width, half_width);
    for (index_t r = 0; r < n; ++r)
      for (index_t k = 0; k < per_row; ++k) {
        const index_t j = std::clamp<index_t>(r + off(rng), 0, n - 1);
        c.push(r, j, static_cast<double>(rng() % 1000) / 8.0 - 60.0);
      }
    return c;
  };
  Coo<double> wide = band(6000, 40, 2500);
  for (index_t j = 0; j < 6000; j += 2) wide.push(3001, j, 1.5);  // one row of 3000 entries
  check_input("band of 40 per row, one long row, d 128", wide, {default_node_size, false}, rng, stream.get());
  check_input("band, d 16", band(3000, 30, 1500), {16, false}, rng, stream.get());
  const Coo<double> spread = band(20000, 6, 20000);  // ~300 leaf columns a block row at d 64
  check_input("block rows over ~300 leaf columns, d 64", spread, {64, false}, rng, stream.get());
  Coo<float> f;
  const Coo<double> b32 = band(5000, 50, 2000);
  f.rows = b32.rows;
  f.cols = b32.cols;
  for (std::size_t k = 0; k < b32.nnz(); ++k) f.push(b32.row[k], b32.col[k], static_cast<float>(b32.val[k]));
  check_input("band f32, d 128", f, {default_node_size, false}, rng, stream.get());
  // Scattered entries in wide pools: COOW nodes, extracted as slices of their
  // units' block rows, beside leaves in the same block rows (d 128: ~2 500
  // entries a block row, by windows too; d 16: every unit a COOW node).
  auto wide_case = [&](const std::string& what, const Coo<double>& coo, std::uint32_t d) {
    check_wide_input(what, coo, d, rng, stream.get());
  };
  wide_case("scattered, wide, d 128", random_coo<double>(20000, 20000, 400000, rng), default_node_size);
  wide_case("scattered, wide, d 16", random_coo<double>(3000, 3000, 60000, rng), 16);
  // Block rows of more items than one task takes (extract_rows.cuh's chunks)
  // and, built from a CSR, long block rows (build_csr_long_rows.cuh: over a
  // block's 4 096 entries and a warp's 512 leaf columns): two dense rows of
  // one block row and one of another across 1 250 leaf columns at d 16, plain
  // and beside COOW nodes.
  auto with_dense_rows = [&](Coo<double> c) {
    for (index_t j = 0; j < c.cols; j += 3) c.push(7, j, 0.25);
    for (index_t j = 1; j < c.cols; j += 2) c.push(9, j, -1.5);
    for (index_t j = 2; j < c.cols; j += 4) c.push(5003, j, 3.0);
    return c;
  };
  check_input("dense rows across 1 250 leaf columns, d 16", with_dense_rows(band(20000, 3, 40)), {16, false}, rng,
              stream.get());
  wide_case("dense rows beside COOW nodes, d 16", with_dense_rows(random_coo<double>(20000, 20000, 60000, rng)), 16);
  // A block row of more stages than windows take (12 800 entries in at most
  // 128 leaves): written straight.
  check_input("block rows of 12 800 entries, d 128", band(20000, 100, 8000), {default_node_size, false}, rng,
              stream.get());
}

// The paths of long block rows on a matrix small enough for the sanitizers
// (tools/gpu_check.sh runs it under racecheck, where LongBlockRows takes
// minutes): the extraction's chunked block rows (625 leaves in one block row,
// against 128 a task) and the CSR build's long block rows (5 000 entries over
// 625 leaf columns at d 16: past a block's 4 096 and a warp's 512), in two
// block rows. Rows in column order and without duplicates, so that the CSR
// built from them takes the CSR path itself, not only in the round trip.
TEST(ConvertGpu, DenseRowsSmall) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  Stream stream;
  Coo<double> c;
  c.rows = 600;
  c.cols = 10000;
  std::uniform_real_distribution<double> value(-4.0, 4.0);
  for (index_t r = 0; r < c.rows; ++r) {
    if (r == 3 || r == 300) {
      for (index_t j = r == 3 ? 0 : 1; j < c.cols; j += 2) c.push(r, j, value(rng));
      continue;
    }
    index_t a = (r * 7) % c.cols, z = (r * 13 + 5) % c.cols;
    if (a > z) std::swap(a, z);
    c.push(r, a, value(rng));
    if (z != a) c.push(r, z, value(rng));
  }
  check_input("two dense rows in two block rows, d 16", c, {16, false}, rng, stream.get());
  check_input("two dense rows in two block rows, d 16, wide", c, {16, true}, rng, stream.get());
  // The same as dense columns: the transposed state's block rows (A's block
  // columns) are the chunked ones, so the extraction's two passes run in the
  // transposed state too (the plain state takes the one pass).
  Coo<double> t;
  t.rows = c.cols;
  t.cols = c.rows;
  for (std::size_t k = 0; k < c.nnz(); ++k) t.push(c.col[k], c.row[k], c.val[k]);
  check_input("two dense columns in two block columns, d 16", t, {16, false}, rng, stream.get());
}

// Many block rows on the extraction's one-pass path (extract_rows.cuh,
// RowPass::once): each block row learns its place from the block rows before
// it by a look-back over 10^5 tasks, so most look-backs meet predecessors
// still at work; bands of empty rows make block rows of no entries (a total
// of 0 published), and at d 128 rows of 1 000 entries make block rows longer
// than the stage (windows) beside short ones. (No COOW node and at most ~60
// leaves a block row, in both states: the one-pass path by construction.)
TEST(ConvertGpu, ManyBlockRows) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  Stream stream;
  const index_t g = 640;  // a 5-point Laplacian on a g x g grid: 409 600 rows
  std::uniform_real_distribution<double> value(-4.0, 4.0);
  // Now and then a row of `run` consecutive entries (fewer leaf columns than
  // a task takes: a chunked block row would send the pool to the two passes).
  auto laplacian = [&](index_t run) {
    Coo<double> c;
    c.rows = c.cols = g * g;
    for (index_t r = 0; r < c.rows; ++r) {
      if ((r / 40) % 3 == 1) continue;  // 40 empty rows of every 120
      const index_t x = r % g, y = r / g;
      if (y > 0) c.push(r, r - g, value(rng));
      if (x > 0) c.push(r, r - 1, value(rng));
      c.push(r, r, value(rng));
      if (x + 1 < g) c.push(r, r + 1, value(rng));
      if (y + 1 < g) c.push(r, r + g, value(rng));
      if (r % 997 == 0 && r + g + run < c.cols)
        for (index_t j = 1; j <= run; ++j) c.push(r, r + g + j, value(rng));
    }
    return c;
  };
  check_input("a sparse Laplacian with empty bands, d 4", laplacian(200), {4, false}, rng, stream.get());
  // d 128: a block row with a 1 000-entry row holds more than a stage (windows).
  check_input("the same, d 128", laplacian(1000), {default_node_size, false}, rng, stream.get());
}

// The CSR warp kernel's ways through a block row of d 128 (build_csr_warps.cuh):
// the scout's kept leaf counts (at most 32 leaves) or the count pass's; the
// row-start bitmap (at most 4096 entries) with or without empty rows, or the
// search of the row pointers; leaves held by lanes (two stores an entry, or
// the general writer where one is dense) or looked up. 1000 rows: the last
// block row is partial.
TEST(ConvertGpu, CsrWarpPaths) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  Stream stream;
  std::uniform_real_distribution<double> value(-4.0, 4.0);
  std::uniform_int_distribution<index_t> jitter(0, 63);
  const index_t rows = 1000, cols = 128 * 400;
  // Each kept row has `per_leaf` entries in each of `leaves` leaf columns
  // `stride` apart (inside the warp's 512), at random places in the leaf;
  // with `dense`, the first block row also fills leaf column 0 (a dense leaf).
  auto make = [&]<class V>(V, index_t leaves, index_t stride, index_t per_leaf, index_t keep_every, bool dense) {
    Coo<V> c;
    c.rows = rows;
    c.cols = cols;
    for (index_t r = 0; r < rows; ++r) {
      if (r % keep_every) continue;
      if (dense && r < 128)
        for (index_t k = 0; k < 128; ++k) c.push(r, k, static_cast<V>(value(rng)));
      for (index_t q = 0; q < leaves; ++q) {
        const index_t first = jitter(rng);
        for (index_t k = 0; k < per_leaf; ++k)
          c.push(r, (q * stride + 1) * 128 + first + k * 64 / per_leaf, static_cast<V>(value(rng)));
      }
    }
    return c;
  };
  const BuildOptions d128{default_node_size, false};
  check_input("5120 entries in 20 leaves a block row (kept counts, row pointers searched)", make(0.0, 20, 5, 2, 1, false),
              d128, rng, stream.get());
  check_input("1280 entries in 20 leaves, every fourth row (kept counts, bitmap with empty rows)",
              make(0.0, 20, 5, 2, 4, false), d128, rng, stream.get());
  check_input("5120 entries in 40 leaves (counted again, leaves looked up)", make(0.0, 40, 3, 1, 1, false), d128, rng,
              stream.get());
  check_input("1280 entries in 40 leaves, every fourth row (bitmap with empty rows, leaves looked up)",
              make(0.0, 40, 3, 1, 4, false), d128, rng, stream.get());
  check_input("3072 entries in 12 leaves, no empty row (kept counts, bitmap, rows by popcount)",
              make(0.0, 12, 9, 2, 1, false), d128, rng, stream.get());
  check_input("f32, 3072 entries in 12 leaves, no empty row", make(0.0f, 12, 9, 2, 1, false), d128, rng, stream.get());
  check_input("f32, 5120 entries in 20 leaves", make(0.0f, 20, 5, 2, 1, false), d128, rng, stream.get());
  check_input("f32, a dense leaf beside 12 sparse ones (leaves in lanes, the general writer)",
              make(0.0f, 12, 9, 2, 1, true), d128, rng, stream.get());
}

// Listed block rows (build_csr_warps.cuh): a band beside a few dense
// columns (a circuit's), whose block rows' leaf columns span far more than the
// warp's window of 512 but number at most 16, are built in CSR order by the
// warp kernel, not sorted; 17 or more take the block kernels. Counted where
// `sorted_block_rows` says so, and byte for byte against the host builder.
TEST(ConvertGpu, ListedBlockRows) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  Stream stream;
  std::uniform_real_distribution<double> value(-4.0, 4.0);
  // Row r's entries at `cols`, sorted and made distinct, so that the
  // row-stable CSR that check_input builds from takes the warp kernel too.
  auto push_row = [&]<class V>(Coo<V>& c, index_t r, std::vector<index_t>& cols) {
    std::sort(cols.begin(), cols.end());
    cols.erase(std::unique(cols.begin(), cols.end()), cols.end());
    for (index_t k : cols) c.push(r, k, static_cast<V>(value(rng)));
  };
  // Tridiagonal, plus `lines` columns spread evenly with an entry in every
  // `every`-th row.
  auto make = [&]<class V>(V, index_t n, index_t lines, index_t every) {
    Coo<V> c;
    c.rows = n;
    c.cols = n;
    std::vector<index_t> cols;
    for (index_t r = 0; r < n; ++r) {
      cols.clear();
      for (index_t k = r == 0 ? 0 : r - 1; k <= std::min(r + 1, n - 1); ++k) cols.push_back(k);
      if (r % every == 0)
        for (index_t q = 0; q < lines; ++q) cols.push_back((2 * q + 1) * n / (2 * lines));
      push_row(c, r, cols);
    }
    return c;
  };
  // How many block rows the GPU build from CSR sorted.
  auto sorted = [&]<class V>(const Coo<V>& coo, const BuildOptions& o) {
    const Csr<V> csr = stable_row_csr(coo);
    const DeviceCsrInput<V, std::int32_t> in(csr);
    ops::ConvertStats stats;
    (void)ops::build_device_matrix(in.view(), o, stream.get(), &stats);
    return stats.sorted_block_rows;
  };
  const BuildOptions d128{default_node_size, true}, d4{4, false};
  {
    // Interior block rows: 3 band leaf columns + 13 lines = 16, listed; the
    // first and last block rows have 2 band leaf columns.
    const auto c = make(0.0, 100000, 13, 1);
    EXPECT_EQ(sorted(c, d128), 0u);
    check_input("f64 100000^2, band and 13 dense columns (16 leaf columns a block row, listed)", c, d128, rng,
                stream.get());
  }
  {
    // 17 leaf columns in interior block rows: sorted, but for those beside a
    // line, whose band shares a leaf column with it (at most 3 a line).
    const auto c = make(0.0f, 100000, 14, 1);
    const std::uint64_t block_rows = (100000 + 127) / 128;
    EXPECT_GE(sorted(c, d128), block_rows - 2 - 3 * 14);
    check_input("f32 100000^2, band and 14 dense columns (17 leaf columns, the block kernels)", c, d128, rng,
                stream.get());
  }
  {
    const auto c = make(0.0f, 200000, 4, 3);
    EXPECT_EQ(sorted(c, d128), 0u);
    check_input("f32 200000^2, band and 4 columns every third row (listed, empty rows in the columns)", c, d128, rng,
                stream.get());
  }
  {
    // Node size 4: dense band leaves beside sparse column leaves (the general writer).
    const auto c = make(0.0, 20000, 3, 1);
    EXPECT_EQ(sorted(c, d4), 0u);
    check_input("f64 20000^2 at node size 4, band and 3 dense columns (dense leaves, listed)", c, d4, rng,
                stream.get());
  }
  // Two block rows whose every row has `per_leaf` entries in each of 16 leaf
  // columns 40 apart (a span of 601); with `extra`, the last row of the first
  // block row also meets a 17th leaf column, found in the block row's last chunk.
  auto spread = [&]<class V>(V, index_t per_leaf, bool extra) {
    Coo<V> c;
    c.rows = 256;
    c.cols = 128 * 720;
    std::vector<index_t> cols;
    for (index_t r = 0; r < c.rows; ++r) {
      cols.clear();
      for (index_t q = 0; q < 16; ++q)
        for (index_t k = 0; k < per_leaf; ++k) cols.push_back(q * 40 * 128 + (r * 7 + k * 37) % 128);
      if (extra && r == 127) cols.push_back(700 * 128 + 5);
      push_row(c, r, cols);
    }
    return c;
  };
  {
    // 6144 entries a block row: listed beyond the row-start bitmap's 4096
    // (rows by a search of the row pointers), where they used to be long rows.
    const auto c = spread(0.0f, 3, false);
    EXPECT_EQ(sorted(c, d128), 0u);
    check_input("f32 256 x 92160, 16 leaf columns 40 apart, 6144 entries a block row (listed, no bitmap)", c, d128,
                rng, stream.get());
  }
  {
    const auto c = spread(0.0, 1, true);  // the first block row: 2049 entries, its 17th leaf column last
    EXPECT_EQ(sorted(c, d128), 1u);
    check_input("f64 256 x 92160, a 17th leaf column in the block row's last entry (the block kernels)", c, d128, rng,
                stream.get());
  }
}

// Scattered entries in large sparse matrices: the builder's rule makes COOW (wide) nodes.
TEST(ConvertGpu, WideNodes) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  Stream stream;
  auto run = [&](const std::string& what, const auto& coo, std::uint32_t d) {
    check_wide_input(what, coo, d, rng, stream.get());
    // The same input in the standard format (no wide nodes), where it is quick.
    if (coo.nnz() <= 100000) check_input(what, coo, BuildOptions{d, false}, rng, stream.get());
  };
  // Mostly one entry per 256 x 256 block: COOW in f32 (its 16-bit coordinates
  // beat an inner node and a leaf), not in f64, which then runs the standard way.
  run("200000^2, 5000 entries f32", random_coo<float>(200000, 200000, 5000, rng), 16);
  check_input("200000^2, 5000 entries f64", random_coo<double>(200000, 200000, 5000, rng), BuildOptions{16, true}, rng,
              stream.get());
  run("200000^2, 50000 entries f64", random_coo<double>(200000, 200000, 50000, rng), 16);
  run("2000^2, 60000 entries d4 (COOW beside leaves)", random_coo<double>(2000, 2000, 60000, rng), 4);
  run("5000^2, 60000 entries d8", random_coo<float>(5000, 5000, 60000, rng), 8);
  run("3000 x 1700, 30000 entries d16 (all COOW)", random_coo<double>(3000, 1700, 30000, rng), 16);
  run("4096^2, 8000 entries d64 (wide root)", random_coo<float>(4096, 4096, 8000, rng), 64);
  run("100000 x 60000, 200000 entries d128", random_coo<double>(100000, 60000, 200000, rng), 128);
  run("70000^2, 300000 entries d256 (65536-wide coordinates)", random_coo<double>(70000, 70000, 300000, rng), 256);
  {
    // COOW nodes alone at d 128 (the extraction by row windows,
    // extract_bands.cuh): scattered entries, three hub rows of 5 000 entries
    // (windows alone), rows of 2 047 and 2 049 entries (a window's bound),
    // empty rows, partial bands at the edges.
    auto c = random_coo<float>(40000, 50000, 600000, rng);
    for (const index_t r : {index_t{7}, index_t{20000}, index_t{39999}})
      for (index_t k = 0; k < 5000; ++k) c.push(r, (k * 9973 + r) % 50000, random_value<float>(rng));
    for (const index_t r : {index_t{100}, index_t{101}, index_t{102}})
      for (index_t k = 0; k < (r == 101 ? 2047 : 2049); ++k) c.push(r, (k * 24 + r) % 50000, random_value<float>(rng));
    const PoolStats ps = validate(build_matrix(c, BuildOptions{128, true}).content());
    ASSERT_EQ(ps.leaf, 0u) << "the case must hold COOW nodes alone";
    run("40000 x 50000, 600000 entries and hub rows, d128 (COOW nodes alone)", c, 128);
  }
}

// The CSR path's COOW decision before the leaves are sorted
// (build_coow_prune.cuh: at most 8 entries a leaf, no more depth-2 blocks than
// leaves): node size 2, COOW nodes beside standard ones (a band through
// scattered entries), long block rows mapped through stand-ins, empty bands
// of block rows, and a depth-2 root.
TEST(ConvertGpu, CoowDecidedBeforeLeaves) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  Stream stream;
  auto run = [&](const std::string& what, const auto& coo, std::uint32_t d) {
    check_wide_input(what, coo, d, rng, stream.get());
  };
  run("1000^2, 200000 entries, d 2", random_coo<float>(1000, 1000, 200000, rng), 2);
  run("1003 x 517, 120000 entries, d 2", random_coo<double>(1003, 517, 120000, rng), 2);
  auto band_and_scatter = random_coo<double>(4096, 4096, 30000, rng);
  for (index_t r = 0; r < 4096; ++r)
    for (index_t c = std::max<index_t>(r - 3, 0); c <= std::min<index_t>(4095, r + 3); ++c)
      band_and_scatter.push(r, c, random_value<double>(rng));
  run("a band through scattered entries, d 8", band_and_scatter, 8);
  auto long_rows = random_coo<float>(4000, 4000, 150000, rng);
  for (const index_t r : {index_t{5}, index_t{6}, index_t{1777}, index_t{3999}})
    for (index_t c = 0; c < 4000; ++c) long_rows.push(r, c, random_value<float>(rng));
  run("four full rows among scattered entries, d 4", long_rows, 4);
  Coo<double> bands;
  bands.rows = bands.cols = 5000;
  std::uniform_int_distribution<index_t> col(0, 4999), low(0, 999), high(4000, 4999);
  for (int i = 0; i < 80000; ++i) bands.push(low(rng), col(rng), random_value<double>(rng));
  for (int i = 0; i < 80000; ++i) bands.push(high(rng), col(rng), random_value<double>(rng));
  run("empty block rows between two bands, d 4", bands, 4);
  run("250 x 200, 1000 entries, d 16 (a depth-2 root)", random_coo<float>(250, 200, 1000, rng), 16);
  // The COOW fill by ranks at its widest: 1 000 column bands (d 2, 4 000
  // columns), and a row band of three chunks (two full rows in one band).
  auto wide_bands = random_coo<float>(400, 4000, 150000, rng);
  for (const index_t r : {index_t{5}, index_t{6}})
    for (index_t c = 0; c < 4000; ++c) wide_bands.push(r, c, random_value<float>(rng));
  run("400 x 4000, 150000 entries and two full rows, d 2 (1 000 column bands)", wide_bands, 2);
}

// The block kernels' block rows of a scattered matrix summed per depth-2
// block before any leaf is emitted (build_csr_block_sums.cuh): every block
// row under COOW nodes only (written straight, never sorted), and a band
// through the first block rows that makes their depth-2 blocks standard (those
// block rows sorted, their other leaves mapped to stand-ins).
TEST(ConvertGpu, ScatteredBlockRowsSummedFirst) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  Stream stream;
  struct Paths {
    std::uint64_t sorted, coow;
  };
  auto paths = [&]<class V>(const Coo<V>& coo, std::uint32_t d) {
    const DeviceCsrInput<V, std::int32_t> in(stable_row_csr(coo));
    ops::ConvertStats stats;
    (void)ops::build_device_matrix(in.view(), BuildOptions{d, true}, stream.get(), &stats);
    return Paths{stats.sorted_block_rows, stats.coow_block_rows};
  };
  // Rows sorted and without duplicates, so that the CSR takes the CSR path.
  auto in_order = []<class V>(const Coo<V>& c) {
    std::vector<std::size_t> ix(c.nnz());
    std::iota(ix.begin(), ix.end(), std::size_t{0});
    std::stable_sort(ix.begin(), ix.end(), [&](std::size_t x, std::size_t y) {
      return std::pair(c.row[x], c.col[x]) < std::pair(c.row[y], c.col[y]);
    });
    Coo<V> out;
    out.rows = c.rows;
    out.cols = c.cols;
    for (std::size_t q = 0; q < ix.size(); ++q)
      if (q == 0 || c.row[ix[q]] != c.row[ix[q - 1]] || c.col[ix[q]] != c.col[ix[q - 1]])
        out.push(c.row[ix[q]], c.col[ix[q]], c.val[ix[q]]);
    return out;
  };
  auto with_band = [&]<class V>(Coo<V> c, index_t rows, index_t half) {
    for (index_t r = 0; r < rows; ++r)
      for (index_t k = std::max<index_t>(r - half, 0); k <= std::min<index_t>(r + half, c.cols - 1); ++k)
        c.push(r, k, random_value<V>(rng));
    return in_order(c);
  };
  {
    // d 16: 320 entries a block row over ~300 of 1 024 leaf columns (the
    // block kernels), ~1.2 entries a leaf, ~80 a depth-2 block, none of them
    // cut by the matrix's edge: all COOW, and no leaf emitted at all.
    const auto c = in_order(random_coo<float>(16384, 16384, 330000, rng));
    const Paths p = paths(c, 16);
    EXPECT_EQ(p.sorted, 0u);
    EXPECT_EQ(p.coow, 16384u / 16);
    check_wide_input("f32 16384^2, 330000 scattered entries, d 16 (summed, never sorted)", c, 16, rng, stream.get());
  }
  {
    // 20 000 columns, a few blocks at the edges hold very few entries and
    // may be standard: their block rows sorted, the rest summed.
    const auto c = in_order(random_coo<float>(20000, 20000, 400000, rng));
    const Paths p = paths(c, 16);
    EXPECT_LE(p.sorted, 80u);
    EXPECT_EQ(p.sorted + p.coow, (20000u + 15) / 16);
    check_wide_input("f32 20000^2, 400000 scattered entries, d 16", c, 16, rng, stream.get());
  }
  {
    // Block rows of 18 leaves of 128 entries each, spread over 1 250 leaf
    // columns: summed first, but the prune does not apply (over 8 entries
    // a leaf), so their leaves are emitted after all.
    Coo<double> c;
    c.rows = 2000;
    c.cols = 20000;
    for (index_t r = 0; r < c.rows; ++r)
      for (index_t q = 0; q < 18; ++q)
        for (index_t k = 0; k < 8; ++k)
          c.push(r, (((r / 16) * 7 + q * 69) % 1250) * 16 + 2 * k, random_value<double>(rng));
    c = in_order(c);
    const Paths p = paths(c, 16);
    EXPECT_EQ(p.sorted, 125u);
    EXPECT_EQ(p.coow, 0u);
    check_input("f64 2000 x 20000, 18 leaves of 128 entries a block row (summed, then sorted)", c, {16, true}, rng,
                stream.get());
    // The same with a long block row (a row of 6 000 entries): summed with
    // the others, then its leaves emitted by the runs path where the prune
    // is refused.
    for (index_t k = 0; k < 6000; ++k) c.push(1000, 3 * k + 1, random_value<double>(rng));
    c = in_order(c);
    const Paths l = paths(c, 16);
    EXPECT_EQ(l.sorted, 125u);  // 124 block rows and the long one
    EXPECT_EQ(l.coow, 0u);
    check_input("f64 2000 x 20000, 18 leaves of 128 entries a block row and a long row (summed, then sorted)", c,
                {16, true}, rng, stream.get());
  }
  {
    // Tall and nearly empty at d 4 (as many rows as the CSR path takes:
    // a block row per entry and 4096 more): ~190 M depth-2 blocks for
    // 200 000 entries, whose sums would break the work bound, so no sums.
    Coo<float> c = in_order(random_coo<float>(5000 * 4, 60000, 200000, rng));
    c.rows = 4 * (static_cast<index_t>(c.nnz()) + 4096);
    EXPECT_EQ(paths(c, 4).coow, 0u);
    check_input("f32 ~816000 x 60000, 200000 entries in the first 20000 rows, d 4", c, {4, true}, rng,
                stream.get());
  }
  {
    const auto c = with_band(random_coo<double>(20000, 20000, 400000, rng), 2000, 8);
    const Paths p = paths(c, 16);
    EXPECT_GT(p.sorted, 0u);
    EXPECT_GT(p.coow, 0u);
    EXPECT_EQ(p.sorted + p.coow, (20000u + 15) / 16);
    check_wide_input("f64 20000^2, scattered and a band through rows 0-1999, d 16 (sorted and summed)", c, 16, rng,
                     stream.get());
  }
  {
    // Long block rows (over 4 096 entries) among scattered ones, summed as
    // well (perf-log C32): three rows of 6 000 scattered entries at d 16. All
    // COOW (the host builder agrees), so none is sorted; then a dense 64 x 64
    // block over one of them (rows 7760-7823, with the long row 7777) makes
    // its depth-2 block a standard node: the block rows with an entry there
    // (of the 16 in its band: the dense rows' four, one of them long, and
    // nearly all the others by their scattered entries; 14-16 in an
    // emulation over 300 seeds) are sorted, the rest are not.
    auto c = random_coo<float>(16384, 16384, 330000, rng);
    for (const index_t r : {index_t{1000}, index_t{7777}, index_t{12345}})
      for (index_t k = 0; k < 6000; ++k) c.push(r, (k * 2731 + r) % 16384, random_value<float>(rng));
    c = in_order(c);
    const Paths p = paths(c, 16);
    EXPECT_EQ(p.sorted, 0u);
    EXPECT_EQ(p.coow, 16384u / 16);
    check_wide_input("f32 16384^2, scattered, three long rows, d 16 (all summed)", c, 16, rng, stream.get());
    for (index_t r = 7760; r < 7824; ++r)
      for (index_t k = 0; k < 64; ++k) c.push(r, 4096 + k, random_value<float>(rng));
    c = in_order(c);
    const Paths q = paths(c, 16);
    EXPECT_GE(q.sorted, 12u);
    EXPECT_LE(q.sorted, 16u);
    EXPECT_EQ(q.sorted + q.coow, 16384u / 16);
    check_wide_input("f32 16384^2, scattered, three long rows, one beside a dense block, d 16", c, 16, rng,
                     stream.get());
  }
  {
    // d 8, rectangular, and rows of more than a block's capacity beside them (long block rows).
    auto c = random_coo<float>(30001, 9000, 300000, rng);
    for (index_t k = 0; k < 9000; k += 2) c.push(777, k, random_value<float>(rng));
    c = in_order(c);
    const Paths p = paths(c, 8);
    EXPECT_GT(p.coow, 0u);
    check_wide_input("f32 30001 x 9000, scattered, d 8, a long row", c, 8, rng, stream.get());
  }
}

// CSR rows in any column order: reversed rows with duplicates apart (the host
// reference sums in the CSR's own order: build_matrix(csr_to_coo(csr))).
TEST(ConvertGpu, CsrColumnsUnsortedWithinRows) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  Stream stream;
  auto run = [&]<class V, class I>(const Csr<V>& csr, const BuildOptions& o, const std::string& what) {
    SCOPED_TRACE((what + " " + options_name(o) + " " + type_name<V, I>()));
    check_build_csr<V, I>(csr, o, build_matrix(csr_to_coo(csr), o), stream.get(), what);
  };
  auto csr = stable_row_csr(cancelling_duplicates<float>(300, 300, 2000, rng));
  for (index_t r = 0; r < csr.rows; ++r) {
    std::reverse(csr.col.begin() + csr.row_ptr[r], csr.col.begin() + csr.row_ptr[r + 1]);
    std::reverse(csr.val.begin() + csr.row_ptr[r], csr.val.begin() + csr.row_ptr[r + 1]);
  }
  // Sanity of the case itself: some row is out of column order.
  bool unsorted = false;
  for (index_t r = 0; r < csr.rows; ++r)
    unsorted = unsorted || !std::is_sorted(csr.col.begin() + csr.row_ptr[r], csr.col.begin() + csr.row_ptr[r + 1]);
  ASSERT_TRUE(unsorted);
  for (const BuildOptions o : {BuildOptions{default_node_size, true}, BuildOptions{4, true}, BuildOptions{8, false}}) {
    run.template operator()<float, std::int32_t>(csr, o, "reversed rows");
    run.template operator()<float, std::int64_t>(csr, o, "reversed rows");
  }
  // Long block rows (build_csr_long_rows.cuh: 10 000 entries across 1 250
  // leaf columns at d 16) with one defect each, deep inside a dense row and
  // inside one leaf column's run: two neighbours swapped, or a column
  // repeated (summed in order, as build_matrix does). The run check must
  // send the matrix to the general path.
  for (const bool repeat : {false, true}) {
    Coo<float> c;
    c.rows = 200;
    c.cols = 20000;
    for (index_t r = 0; r < c.rows; ++r)
      for (index_t j = r * 97 % 19000, k = 0; r != 41 && k < 5; ++k) c.push(r, j + 3 * k, random_value<float>(rng));
    for (index_t j = 0; j < c.cols; j += 2) {
      // row 41: columns 6002 and 6004 (one leaf column at d 16) change places, or 6002 comes twice
      index_t jj = j;
      if (j == 6002 && !repeat) jj = 6004;
      if (j == 6004) jj = 6002;
      c.push(41, jj, random_value<float>(rng));
    }
    const Csr<float> long_csr = stable_row_csr(c);
    const std::string what = repeat ? "long row with a repeated column" : "long row with two columns swapped";
    run.template operator()<float, std::int32_t>(long_csr, BuildOptions{16, false}, what);
    run.template operator()<float, std::int64_t>(long_csr, BuildOptions{16, true}, what);
  }
  // Scattered block rows, which are summed before any leaf exists
  // (build_csr_block_sums.cuh: a row's first entry is known from a bit, and
  // an empty row precedes the defect), each case with one defect: two
  // neighbours swapped at a row's start, or in its middle. The sums kernel
  // must send the matrix to the general path.
  // A third case puts the defect in a long block row (over 4 096 entries:
  // csr_long_sums_kernel), in its second chunk.
  for (const int where : {0, 1, 2}) {
    Coo<float> c;
    c.rows = 16384;
    c.cols = 16384;
    for (index_t r = 0; r < c.rows; ++r) {
      if (r % 7 == 3) continue;  // empty rows between
      std::set<index_t> cols;
      while (cols.size() < (r == 5004 && where == 2 ? 6000u : 20u)) cols.insert(static_cast<index_t>(rng() % 16384));
      for (const index_t j : cols) c.push(r, j, random_value<float>(rng));
    }
    Csr<float> sc = stable_row_csr(c);
    const index_t row = 5004;  // after the empty row 5003
    const auto k = static_cast<std::size_t>(sc.row_ptr[row]) + (where == 0 ? 0 : where == 1 ? 9 : 5000);
    std::swap(sc.col[k], sc.col[k + 1]);
    std::swap(sc.val[k], sc.val[k + 1]);
    const std::string what = where == 0   ? "scattered, a row's first two columns swapped"
                             : where == 1 ? "scattered, two columns swapped in a row"
                                          : "scattered, two columns swapped deep in a long row";
    run.template operator()<float, std::int32_t>(sc, BuildOptions{16, true}, what);
    run.template operator()<float, std::int64_t>(sc, BuildOptions{16, true}, what);
  }
}

// 64-bit indices: a dimension beyond 2^32 (only int64 runs: int32 cannot hold them).
TEST(ConvertGpu, IndicesBeyond32Bits) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  Stream stream;
  auto run = [&]<class V>() {
    const index_t big = 5'000'000'000;
    std::vector<std::tuple<index_t, index_t, V>> es = {
        {0, 0, V(1)},
        {big - 1, 2, V(2)},
        {index_t{1} << 32, 1, V(3)},
        {(index_t{1} << 32) - 1, 0, V(4)},
        {index_t{1} << 31, 1, V(5)},
        {(index_t{1} << 31) - 1, 2, V(6)},
        {big - 1, 2, V(-0.5)},  // a duplicate
        {3'141'592'653, 1, V(7)},
    };
    std::uniform_int_distribution<index_t> r(0, big - 1), c(0, 2);
    for (int k = 0; k < 60; ++k) es.emplace_back(r(rng), c(rng), random_value<V>(rng));
    const Coo<V> tall = coo_from<V>(big, 3, es);
    Coo<V> wide = tall;  // 3 x 5e9: its CSR has 4 row pointers and 64-bit columns
    std::swap(wide.rows, wide.cols);
    std::swap(wide.row, wide.col);
    for (std::uint32_t d : {2u, 16u, default_node_size, 256u}) {
      check_input("5e9 x 3", tall, {d, true}, rng, stream.get());
      check_input("3 x 5e9", wide, {d, true}, rng, stream.get());
    }
    check_input("5e9 x 3", tall, {16, false}, rng, stream.get());
    check_input("3 x 5e9", wide, {16, false}, rng, stream.get());
    // Near the dimension limit (2^48).
    const index_t huge = (index_t{1} << 47) + 12345;
    const Coo<V> near = coo_from<V>(huge, 2, {{huge - 1, 1, V(1)}, {index_t{1} << 40, 0, V(2)}, {17, 1, V(3)}});
    for (std::uint32_t d : {2u, default_node_size, 256u}) check_input("2^47 x 2", near, {d, true}, rng, stream.get());
  };
  run.template operator()<float>();
  run.template operator()<double>();
}

