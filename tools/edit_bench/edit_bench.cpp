// hisparse-edit-bench: the host cost of editing against CSR (seed 001's
// experiment, issue 16). Per matrix, f64, node size 128 (default format):
// - single inserts: R random positions (mostly absent) set one after the
//   other, each into the result of the last (the matrix grows); HiSparse by
//   ops::edit_in_place (in place where the touched nodes keep their sizes,
//   else a new pool), CSR by inserting into the column and value arrays (a
//   memmove of everything behind the row) and adding 1 to the row pointers
//   behind it;
// - single updates: R present entries set, HiSparse by edit_in_place, CSR by
//   a binary search in the row;
// - a batch of 1% of the entries (half present, half new; set): ops::edit
//   against the CSR route (the batch sorted, then merged into new arrays).
// - persistent edits (a second table): batches of 0.1%, 1% and 10% of the
//   entries (half present, half new; set) by ops::edit_version of the first
//   version of a family, against ops::edit's new pool: time, and the bytes
//   the new version adds to the family as a share of the matrix's pool.
// Medians, host wall clock; one thread. Prints Markdown tables.
// --gpu (CUDA builds, a device present): instead, for each --family, the GPU
// batch edit (ops::edit_version on device arrays) against the CSR route on
// the GPU (CUB sort of the batch, merge into new arrays), batches of 0.1%, 1%
// and 10% (--shares: others; set, half present); CUDA events, median of --runs
// after a warm-up.
//
//   hisparse-edit-bench [--matrices-dir DIR] [--family SPEC]... [--inserts R] [--gpu [--runs N] [--shares S,...]]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "hisparse/formats/builder.hpp"
#include "hisparse/formats/matrix_market.hpp"
#include "hisparse/gen/generators.hpp"
#include "hisparse/ops/edit.hpp"
#include "edit_bench_gpu.hpp"

using namespace hisparse;
namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;
double us_since(Clock::time_point t) { return std::chrono::duration<double, std::micro>(Clock::now() - t).count(); }
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

struct CsrArrays {
  std::vector<std::uint64_t> row_ptr;
  std::vector<std::uint32_t> col;
  std::vector<double> val;
};

// Inserts (r, c) = v, or sets it where present.
void csr_set(CsrArrays& a, index_t r, index_t c, double v) {
  const auto begin = a.col.begin() + static_cast<std::ptrdiff_t>(a.row_ptr[r]);
  const auto end = a.col.begin() + static_cast<std::ptrdiff_t>(a.row_ptr[r + 1]);
  const auto at = std::lower_bound(begin, end, static_cast<std::uint32_t>(c));
  const auto k = at - a.col.begin();
  if (at != end && *at == c) {
    a.val[static_cast<std::size_t>(k)] = v;
    return;
  }
  a.col.insert(at, static_cast<std::uint32_t>(c));
  a.val.insert(a.val.begin() + k, v);
  for (std::size_t i = r + 1; i < a.row_ptr.size(); ++i) ++a.row_ptr[i];
}

// The batch (sorted by row, column; last of a position wins) merged into new arrays.
CsrArrays csr_merge(const CsrArrays& a, const Coo<double>& u) {
  std::vector<std::size_t> order(u.nnz());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) {
    return u.row[x] != u.row[y] ? u.row[x] < u.row[y] : u.col[x] < u.col[y];
  });
  CsrArrays out;
  const std::size_t rows = a.row_ptr.size() - 1;
  out.row_ptr.assign(rows + 1, 0);
  out.col.reserve(a.col.size() + u.nnz());
  out.val.reserve(a.col.size() + u.nnz());
  std::size_t j = 0;
  for (std::size_t r = 0; r < rows; ++r) {
    std::uint64_t k = a.row_ptr[r];
    while (k < a.row_ptr[r + 1] || (j < order.size() && u.row[order[j]] == r)) {
      const bool take_u = j < order.size() && u.row[order[j]] == r && (k == a.row_ptr[r + 1] || u.col[order[j]] <= a.col[k]);
      if (take_u) {
        std::size_t e = j;
        while (e + 1 < order.size() && u.row[order[e + 1]] == r && u.col[order[e + 1]] == u.col[order[j]]) ++e;
        if (k < a.row_ptr[r + 1] && a.col[k] == u.col[order[j]]) ++k;
        out.col.push_back(static_cast<std::uint32_t>(u.col[order[j]]));
        out.val.push_back(u.val[order[e]]);
        j = e + 1;
      } else {
        out.col.push_back(a.col[k]);
        out.val.push_back(a.val[k]);
        ++k;
      }
    }
    out.row_ptr[r + 1] = out.col.size();
  }
  return out;
}

CsrArrays csr_of(const Csr<double>& c) {
  CsrArrays a;
  a.row_ptr.assign(c.row_ptr.begin(), c.row_ptr.end());
  a.col.assign(c.col.begin(), c.col.end());
  a.val = c.val;
  return a;
}

// k updates, set: half on present positions, half anywhere.
Coo<double> mixed_batch(const Coo<double>& coo, std::size_t k, std::mt19937_64& rng) {
  std::uniform_int_distribution<index_t> rr(0, coo.rows - 1), cc(0, coo.cols - 1);
  std::uniform_int_distribution<std::size_t> pick(0, coo.nnz() - 1);
  Coo<double> u;
  u.rows = coo.rows;
  u.cols = coo.cols;
  for (std::size_t i = 0; i < k; ++i) {
    if (i % 2) {
      const std::size_t e = pick(rng);
      u.push(coo.row[e], coo.col[e], 1.0 + static_cast<double>(i));
    } else {
      u.push(rr(rng), cc(rng), 1.0 + static_cast<double>(i));
    }
  }
  return u;
}

std::vector<std::string> version_rows;  // the second table, printed after the first

void bench_versions(const std::string& name, const Matrix<double>& m, const Coo<double>& coo, std::mt19937_64& rng) {
  for (const double share : {0.0, 0.001, 0.01, 0.1}) {
    // A family per batch size: three 10% versions of a large matrix fill most of the 4 GiB a family addresses.
    const Matrix<double> first = ops::versioned(m);
    // share 0: one entry, each version made from the last (a growing chain).
    const std::size_t k = share == 0.0 ? 1 : std::max<std::size_t>(1, static_cast<std::size_t>(share * coo.nnz()));
    const int reps = share == 0.0 ? 9 : 3;
    Coo<double> u = mixed_batch(coo, k, rng);
    std::vector<double> tv, te;
    ops::EditStats st;
    Matrix<double> last = first;
    for (int rep = 0; rep < reps; ++rep) {
      if (share == 0.0) u = mixed_batch(coo, 1, rng);  // a random position, mostly absent
      auto t0 = Clock::now();
      const Matrix<double> v = ops::edit_version(share == 0.0 ? last : first, u, ops::EditMode::set, &st);
      if (share == 0.0) last = v;
      tv.push_back(us_since(t0));
      t0 = Clock::now();
      const Matrix<double> e = ops::edit(m, u, ops::EditMode::set);
      te.push_back(us_since(t0));
      if (share != 0.0 && e.nnz() != v.nnz()) std::fprintf(stderr, "%s: version and edit disagree on nnz\n", name.c_str());
    }
    char row[256];
    std::snprintf(row, sizeof row, "| %s | %llu | %s | %zu | %.0f | %.0f | %.2f | %.2f%% |", name.c_str(),
                  static_cast<unsigned long long>(coo.nnz()), share == 0.0 ? "1 entry" : (std::to_string(share * 100).substr(0, 4) + "%").c_str(), u.nnz(), median(tv), median(te),
                  median(te) / median(tv), 100.0 * static_cast<double>(st.bytes_written) / static_cast<double>(m.pool_bytes()));
    version_rows.push_back(row);
  }
}

void bench(const std::string& name, const Coo<double>& coo, int inserts, std::mt19937_64& rng) {
  Matrix<double> m = build_matrix(coo);
  bench_versions(name, m, coo, rng);
  CsrArrays csr = csr_of(to_csr(m));
  std::uniform_int_distribution<index_t> rr(0, coo.rows - 1), cc(0, coo.cols - 1);
  // Inserts at random positions (mostly absent), each into the last result.
  std::vector<double> t_h, t_c, u_h, u_c;
  int in_place = 0;
  for (int i = 0; i < inserts; ++i) {
    const index_t r = rr(rng), c = cc(rng);
    const double v = 0.5 + i;
    ops::EditStats st;
    auto t0 = Clock::now();
    ops::edit_in_place(m, Coo<double>{coo.rows, coo.cols, {r}, {c}, {v}}, ops::EditMode::set, &st);
    t_h.push_back(us_since(t0));
    in_place += st.in_place;
    t0 = Clock::now();
    csr_set(csr, r, c, v);
    t_c.push_back(us_since(t0));
  }
  // Updates of present entries.
  std::uniform_int_distribution<std::size_t> any(0, coo.nnz() - 1);
  for (int i = 0; i < inserts; ++i) {
    const std::size_t e = any(rng);
    const double v = 2.5 + i;
    auto t0 = Clock::now();
    ops::edit_in_place(m, Coo<double>{coo.rows, coo.cols, {coo.row[e]}, {coo.col[e]}, {v}}, ops::EditMode::set);
    u_h.push_back(us_since(t0));
    t0 = Clock::now();
    csr_set(csr, coo.row[e], coo.col[e], v);
    u_c.push_back(us_since(t0));
  }
  if (m.nnz() != csr.col.size()) std::fprintf(stderr, "%s: HiSparse and CSR disagree on nnz\n", name.c_str());
  // A batch of 1%: half on present positions.
  const std::size_t k = std::max<std::size_t>(1, m.nnz() / 100);
  const Coo<double> u = mixed_batch(coo, k, rng);
  std::vector<double> b_h, b_c;
  for (int rep = 0; rep < 3; ++rep) {
    auto t0 = Clock::now();
    const Matrix<double> e = ops::edit(m, u, ops::EditMode::set);
    b_h.push_back(us_since(t0));
    t0 = Clock::now();
    const CsrArrays merged = csr_merge(csr, u);
    b_c.push_back(us_since(t0));
    if (e.nnz() != merged.col.size()) std::fprintf(stderr, "%s: batch results disagree on nnz\n", name.c_str());
  }
  const double h = median(t_h), c = median(t_c), bh = median(b_h), bc = median(b_c);
  std::printf("| %s | %llu | %.1f (%d/%d in place) | %.1f | %.2f | %.2f | %llu | %.0f | %.0f | %.2f |\n", name.c_str(),
              static_cast<unsigned long long>(coo.nnz()), h, in_place, inserts, c, median(u_h), median(u_c),
              static_cast<unsigned long long>(k), bh, bc, bc / bh);
  std::fflush(stdout);
}

// A local batch (a region refined, as an adaptive mesh does): the rows of a
// random window holding `share` of the rows; half of the updates on present
// entries there, half new positions within as many columns of the diagonal.
Coo<double> local_batch(const Coo<double>& coo, std::size_t k, double share, std::mt19937_64& rng) {
  const index_t w = std::max<index_t>(1, static_cast<index_t>(share * static_cast<double>(coo.rows)));
  const index_t r0 = std::uniform_int_distribution<index_t>(0, coo.rows - w)(rng);
  std::vector<std::size_t> inside;
  for (std::size_t i = 0; i < coo.nnz(); ++i)
    if (coo.row[i] >= r0 && coo.row[i] < r0 + w) inside.push_back(i);
  Coo<double> u;
  u.rows = coo.rows;
  u.cols = coo.cols;
  std::uniform_int_distribution<index_t> rr(r0, r0 + w - 1), off(0, 2 * w);
  for (std::size_t i = 0; i < k; ++i) {
    if (!inside.empty() && i % 2 == 0) {
      const std::size_t e = inside[rng() % inside.size()];
      u.push(coo.row[e], coo.col[e], 1.0 + static_cast<double>(i));
    } else {
      const index_t r = rr(rng), o = off(rng);
      const index_t c = std::min<index_t>(coo.cols - 1, r + o >= w ? r + o - w : 0);
      u.push(r, c, 1.0 + static_cast<double>(i));
    }
  }
  return u;
}

// The GPU table: one row per family and batch size.
void bench_gpu(const std::vector<std::string>& families, int runs, const std::vector<double>& shares,
               std::mt19937_64& rng) {
  std::printf("GPU batch edit (ops::edit_version through a context, device arrays in, a new version out; no "
              "context: the form that takes a stream) against the CSR route on the "
              "GPU (CUB radix sort of the batch, merge into new CSR arrays, 32-bit indices, memory from the device's "
              "default pool, kept between calls); f64, node size 128, set, "
              "half present; CUDA events, median of %d after a warm-up, cold L2; new bytes: what the version adds "
              "over the pool's bytes; local: the rows of a window of that share of the rows, new "
              "positions near the diagonal\n\n"
              "| matrix | nnz | batch | updates | GPU edit (ms) | no context (ms) | CSR merge (ms) | CSR / edit | new bytes |\n"
              "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
              runs);
  for (const auto& spec : families) {
    const Coo<double> coo = gen::generate_coo<double>(gen::parse_spec(spec));
    edit_bench::GpuEditBench b(coo);
    for (const bool local : {false, true}) {
      for (const double share : shares) {
        const std::size_t k =
            std::max<std::size_t>(1, static_cast<std::size_t>(share * static_cast<double>(coo.nnz())));
        const Coo<double> u = local ? local_batch(coo, k, share, rng) : mixed_batch(coo, k, rng);
        const edit_bench::GpuEditTiming t = b.run(u, runs);
        std::printf("| %s | %llu | %.1f%%%s | %llu | %.2f | %.2f | %.2f | %.2f | %.1f%% |%s\n", spec.c_str(),
                    static_cast<unsigned long long>(coo.nnz()), 100 * share, local ? " local" : "",
                    static_cast<unsigned long long>(u.nnz()), t.edit_ms, t.edit_stream_ms, t.csr_ms,
                    t.csr_ms / t.edit_ms,
                    100 * t.new_bytes, t.agree ? "" : " (nnz differ!)");
        std::fflush(stdout);
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir;
  std::vector<std::string> families;
  int inserts = 20, runs = 5;
  bool gpu = false;
  std::vector<double> shares{0.001, 0.01, 0.1};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--matrices-dir" && i + 1 < argc) dir = argv[++i];
    else if (a == "--gpu") gpu = true;
    else if (a == "--runs" && i + 1 < argc) runs = std::stoi(argv[++i]);
    else if (a == "--family" && i + 1 < argc) families.push_back(argv[++i]);
    else if (a == "--inserts" && i + 1 < argc) inserts = std::stoi(argv[++i]);
    else if (a == "--shares" && i + 1 < argc) {  // --gpu batch sizes, e.g. 0.001,0.01
      shares.clear();
      const std::string list = argv[++i];
      for (std::size_t p = 0; p <= list.size();) {
        const std::size_t q = std::min(list.find(',', p), list.size());
        char* end = nullptr;
        const std::string item = list.substr(p, q - p);
        const double v = std::strtod(item.c_str(), &end);
        if (item.empty() || *end != '\0' || !(v > 0 && v <= 1)) {
          std::fprintf(stderr, "hisparse-edit-bench: --shares: '%s' is not a share in (0, 1]\n", item.c_str());
          return 2;
        }
        shares.push_back(v);
        p = q + 1;
      }
    } else {
      std::fprintf(stderr,
                   "usage: hisparse-edit-bench [--matrices-dir DIR] [--family SPEC]... [--inserts R] [--gpu [--runs N] [--shares S,...]]\n");
      return 2;
    }
  }
  try {
    std::mt19937_64 rng(42);
    if (gpu) {
      if (!edit_bench::gpu_edit_bench_available()) {
        std::fprintf(stderr, "hisparse-edit-bench: --gpu: no CUDA device (or a build without CUDA)\n");
        return 1;
      }
      bench_gpu(families, runs, shares, rng);
      return 0;
    }
    std::printf("f64, node size 128; single inserts: median of %d (each into the last result); batch: 1%% of nnz, set, "
                "median of 3; microseconds, host wall clock\n\n",
                inserts);
    std::printf("| matrix | nnz | insert HiSparse (us) | insert CSR (us) | update HiSparse (us) | update CSR (us) | "
                "batch | batch HiSparse (us) | batch CSR merge (us) | CSR / HiSparse |\n"
                "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    if (!dir.empty()) {
      std::vector<fs::path> files;
      for (const auto& e : fs::directory_iterator(dir))
        if (e.path().extension() == ".mtx" && e.path().stem() != "block_2000") files.push_back(e.path());
      std::sort(files.begin(), files.end());
      for (const auto& f : files) {
        if (read_matrix_market_header(f).field == MmField::complex) continue;
        bench(f.stem().string(), read_matrix_market<double>(f), inserts, rng);
      }
    }
    for (const auto& spec : families) bench(spec, gen::generate_coo<double>(gen::parse_spec(spec)), inserts, rng);
    std::printf("\nPersistent edits: a batch (set, half present) as a new version of the family's first version "
                "(ops::edit_version) against a new pool (ops::edit); median of 3, microseconds; new bytes: what the "
                "version adds to the family, over the matrix's pool bytes\n\n"
                "| matrix | nnz | batch | updates | edit_version (us) | edit (us) | edit / edit_version | new bytes |\n"
                "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    for (const auto& row : version_rows) std::printf("%s\n", row.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hisparse-edit-bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
