// hisparse bench [MATRIX ...] [--preset large] [--scale M] [--family SPEC ...] [--no-suite]
//                [--precision f32,f64] [--l2 warm|cold|both] [--ops spmv,copy,add|none] [--runs N] [--warmup N] [--warmup-ms MS]
//                [--json F] [--csv F] [--markdown F] [--no-wide-nodes] [--conversion] [--host-only | --gpu-conversion-only]
// SpMV, SpMV^T, add, add^T and copy of HiSparse against cuSPARSE CSR (SpMV
// ALG1 and ALG2, csrgeam2, csr2csc, copying the arrays) on the SuiteSparse
// set, generated families and given files; every result checked. With
// --conversion, the conversion too: on the host from a coordinate list, and
// on the GPU from and to device arrays beside cuSPARSE csr2csc.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <numeric>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>
#include <sstream>

#include "bench.hpp"
#include "commands.hpp"
#include "device.hpp"
#include "hisparse/formats/atomic_file.hpp"
#include "hisparse/formats/builder.hpp"
#include "hisparse/formats/hsp_file.hpp"
#include "hisparse/formats/matrix_market.hpp"
#include "hisparse/gen/generators.hpp"
#include "hisparse/gen/moved_pattern.hpp"
#include "matrix_io.hpp"

namespace hisparse::cli {
namespace {

struct BenchCli {
  std::vector<std::string> files, families;
  std::string matrices_dir = "../shared/matrices";
  bool no_suite = false, conversion = false, host_only = false, gpu_conversion_only = false;
  WideNodesFlags wide;
  double scale = 16;  // million entries per generated family
  std::string precision = "f32,f64", l2 = "warm", ops = "spmv,copy,add", json, csv, markdown, preset;
  BenchOptions opt;
  // Where the matrices are built from their coordinate lists: the GPU
  // whenever there is one (the same bytes as the host's build), the host
  // with --host-only.
  Device device = Device::host;
};

// One generated matrix per family, sized to about `scale` million entries.
std::vector<std::string> default_families(double scale) {
  const double n = scale * 1e6;
  char buf[4][96];
  std::snprintf(buf[0], sizeof buf[0], "laplace2d:n=%.0f", std::round(std::sqrt(n / 5)));
  std::snprintf(buf[1], sizeof buf[1], "stencil3d27:n=%.0f", std::ceil((std::cbrt(n) + 2) / 3));
  std::snprintf(buf[2], sizeof buf[2], "rmat:scale=%.0f", std::round(std::log2(n / 16)));
  std::snprintf(buf[3], sizeof buf[3], "circuit:n=%.0f", std::round(n / 5));
  return {buf[0], buf[1], buf[2], buf[3]};
}

struct Input {
  std::string name;
  std::function<Coo<double>()> load;
  std::optional<bool> wide{};  // the node-type choice for this input; unset: the command's
  bool named = false;          // given on the command line: failing to read it is an error
};

// --preset large: the yardstick of SpMV performance (docs/benchmarks.md):
// four families of 40-90 M entries, cold L2, SpMV and SpMV^T in f32 and f64,
// R-MAT with and without wide nodes.
const char* const large_families[] = {"laplace2d:n=4096", "stencil3d27:n=150", "rmat:scale=22", "circuit:n=8000000"};

// A generated family, named `name` (its spec by default).
Input family_input(const std::string& spec, std::optional<bool> wide = std::nullopt, const std::string& name = {}) {
  return {name.empty() ? spec : name, [spec] { return gen::generate_coo<double>(gen::parse_spec(spec)); }, wide};
}

std::vector<Input> inputs(const BenchCli& c) {
  std::vector<Input> in;
  if (!c.no_suite) {
    std::vector<std::filesystem::path> suite;
    if (std::filesystem::is_directory(c.matrices_dir))
      for (const auto& e : std::filesystem::directory_iterator(c.matrices_dir))
        if (e.path().extension() == ".mtx") suite.push_back(e.path());
    std::sort(suite.begin(), suite.end());
    for (const auto& p : suite) {
      // Complex and malformed files of the suite are reported, not benchmarked.
      in.push_back({p.stem().string(), [p] { return read_matrix_market<double>(p); }});
    }
    for (const auto& f : default_families(c.scale)) in.push_back(family_input(f));
  }
  if (c.preset == "large") {
    for (const char* f : large_families) in.push_back(family_input(f));
    in.push_back(family_input(large_families[2], false, std::string(large_families[2]) + " standard"));
  }
  for (const auto& f : c.families) in.push_back(family_input(f));
  for (const auto& f : c.files) {
    const LoadContext ctx{c.device, !c.host_only, nullptr};  // --host-only: the host
    in.push_back({std::filesystem::path(f).stem().string(),
                  [f, ctx] {
                    const AnyMatrix m = load_matrix(f, std::nullopt, Precision::f64, std::nullopt, ctx);
                    return to_coo(std::get<Matrix<double>>(m));
                  },
                  std::nullopt, true});
  }
  return in;
}

nlohmann::ordered_json to_json(const BenchRecord& r) {
  const double t = r.median_ms * 1e-3;
  nlohmann::ordered_json j{{"matrix", r.matrix}, {"op", r.op}, {"impl", r.impl}, {"precision", r.precision},
                           {"l2", r.l2}, {"rows", r.rows}, {"cols", r.cols}, {"nnz", r.nnz}, {"ok", r.ok},
                           {"rel_error", r.rel_error}, {"bytes", r.bytes},
                           {"bytes_per_nnz", r.nnz ? double(r.bytes) / double(r.nnz) : 0.0}};
  if (r.ok || r.median_ms > 0) {  // a wrong result is timed under HISPARSE_BENCH_TIME_WRONG
    j["median_ms"] = r.median_ms;
    j["mean_ms"] = r.mean_ms;
    j["std_ms"] = r.std_ms;
    j["gbps"] = t > 0 ? double(r.bytes) / t / 1e9 : 0.0;
    j["gflops_2nnz"] = t > 0 ? 2.0 * double(r.nnz) / t / 1e9 : 0.0;
    j["gflops_3nnz"] = t > 0 ? 3.0 * double(r.nnz) / t / 1e9 : 0.0;
  }
  // Fields added for the conversion records; the others' keys are as before.
  if (!r.conversion.empty()) j["conversion"] = r.conversion;
  if (r.ok && r.gpu_stats) {
    j["spmv_ms"] = r.spmv_ms;
    j["spmv_equivalents"] = r.spmv_equivalents;
    j["mentries_per_s"] = r.mentries_per_s;
    j["peak_work_bytes"] = r.peak_work_bytes;
  }
  return j;
}

void write_outputs(const BenchCli& c, const std::vector<BenchRecord>& rs) {
  if (!c.json.empty()) {
    nlohmann::ordered_json all = nlohmann::ordered_json::array();
    for (const auto& r : rs) all.push_back(to_json(r));
    write_file_atomically(c.json, [&](std::ostream& o) { o << all.dump(1) << '\n'; });
  }
  if (!c.csv.empty()) {
    write_file_atomically(c.csv, [&](std::ostream& o) {
      // The GPU conversion columns come last (empty elsewhere), so readers
      // of the first fourteen see what they saw before.
      o << "matrix,op,impl,precision,l2,rows,cols,nnz,ok,rel_error,bytes,median_ms,mean_ms,std_ms,"
           "spmv_equivalents,mentries_per_s,peak_work_bytes\n";
      for (const auto& r : rs) {
        o << '"' << r.matrix << "\"," << r.op << ',' << r.impl << ',' << r.precision << ',' << r.l2 << ',' << r.rows
          << ',' << r.cols << ',' << r.nnz << ',' << r.ok << ',' << r.rel_error << ',' << r.bytes << ','
          << r.median_ms << ',' << r.mean_ms << ',' << r.std_ms << ',';
        if (r.ok && r.gpu_stats) o << r.spmv_equivalents << ',' << r.mentries_per_s << ',' << r.peak_work_bytes;
        else o << ",,";
        o << '\n';
      }
    });
  }
}

// Speedup table: per matrix x precision x L2, HiSparse time against the best
// cuSPARSE algorithm, for N and T (and against copying the CSR arrays, for
// copies); geometric means last.
std::string summary(const std::vector<BenchRecord>& rs) {
  std::map<std::tuple<std::string, std::string, std::string, std::string>, std::map<std::string, const BenchRecord*>> by;
  std::vector<std::tuple<std::string, std::string, std::string, std::string>> order;
  for (const auto& r : rs) {
    auto key = std::tuple{r.matrix, r.precision, r.l2, r.op};
    if (!by.count(key)) order.push_back(key);
    by[key][r.impl] = &r;
  }
  std::ostringstream s;
  s << "| matrix | prec | L2 | op | nnz | HiSparse ms | B/nnz | GB/s | CSR (cuSPARSE best) ms | B/nnz | GB/s | speedup |\n"
       "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n";
  std::map<std::string, std::pair<double, int>> geo;
  char line[512];
  for (const auto& key : order) {
    const auto& m = by[key];
    const BenchRecord* h = m.count("hisparse") ? m.at("hisparse") : nullptr;
    const BenchRecord* best = nullptr;
    // The baseline: the faster cuSPARSE SpMV algorithm; for copies, copying
    // the CSR arrays; for adds, csrgeam2 (after csr2csc of both operands for
    // A^T + B^T: both implementations start from the same stored matrices).
    for (const char* k : {"cusparse-alg1", "cusparse-alg2", "csr-copy", "cusparse-csrgeam2", "cusparse-csrgeam2+csr2csc"})
      if (m.count(k) && m.at(k)->ok && (!best || m.at(k)->median_ms < best->median_ms)) best = m.at(k);
    if (!h) continue;
    auto gbps = [](const BenchRecord* r) { return r->median_ms > 0 ? double(r->bytes) / (r->median_ms * 1e6) : 0.0; };
    if (!h->ok || !best) {
      std::snprintf(line, sizeof line, "| %s | %s | %s | %s | %llu | %s | | | %s | | | |\n", h->matrix.c_str(),
                    h->precision.c_str(), h->l2.c_str(), h->op.c_str(), (unsigned long long)h->nnz,
                    h->ok ? "ok" : "WRONG", best ? "ok" : "WRONG");
      s << line;
      continue;
    }
    const double sp = best->median_ms / h->median_ms;
    auto& g = geo[h->op + " " + h->precision + " " + h->l2];
    g.first += std::log(sp);
    g.second += 1;
    std::snprintf(line, sizeof line, "| %s | %s | %s | %s | %llu | %.4f | %.2f | %.0f | %.4f | %.2f | %.0f | %.2f |\n",
                  h->matrix.c_str(), h->precision.c_str(), h->l2.c_str(), h->op.c_str(), (unsigned long long)h->nnz,
                  h->median_ms, double(h->bytes) / double(h->nnz), gbps(h), best->median_ms,
                  double(best->bytes) / double(best->nnz), gbps(best), sp);
    s << line;
  }
  // Conversion timings (host, and GPU where measured).
  std::map<std::pair<std::string, std::string>, std::map<std::string, const BenchRecord*>> conv;
  std::vector<std::pair<std::string, std::string>> conv_order;
  for (const auto& r : rs)
    if (r.op == "convert") {
      const auto key = std::pair{r.matrix, r.precision};
      if (!conv.count(key)) conv_order.push_back(key);
      conv[key][r.impl] = &r;
    }
  if (!conv_order.empty()) {
    s << "\nConversion from a coordinate list on the host (median of 5):\n\n"
         "| matrix | prec | nnz | to HiSparse ms | to CSR ms | HiSparse / CSR |\n| --- | --- | ---: | ---: | ---: | ---: |\n";
    for (const auto& key : conv_order) {
      const auto& m = conv[key];
      if (!m.count("hisparse-build") || !m.count("csr-build")) continue;
      const BenchRecord* h = m.at("hisparse-build");
      const BenchRecord* c = m.at("csr-build");
      std::snprintf(line, sizeof line, "| %s | %s | %llu | %.1f | %.1f | %.2f |\n", h->matrix.c_str(), h->precision.c_str(),
                    (unsigned long long)h->nnz, h->median_ms, c->median_ms, h->median_ms / c->median_ms);
      s << line;
    }
    // On the GPU, where measured: from and to arrays in device memory.
    bool gpu_header = false;
    for (const auto& key : conv_order) {
      const auto& m = conv[key];
      const BenchRecord* b = m.count("hisparse-gpu") ? m.at("hisparse-gpu") : nullptr;
      const BenchRecord* e = m.count("hisparse-gpu-to-csr") ? m.at("hisparse-gpu-to-csr") : nullptr;
      const BenchRecord* bs = m.count("hisparse-gpu-stream") ? m.at("hisparse-gpu-stream") : nullptr;
      const BenchRecord* es = m.count("hisparse-gpu-to-csr-stream") ? m.at("hisparse-gpu-to-csr-stream") : nullptr;
      const BenchRecord* t = m.count("cusparse-csr2csc") ? m.at("cusparse-csr2csc") : nullptr;
      if (!b && !e && !t) continue;
      if (!gpu_header) {
        s << "\nConversion on the GPU, from and to CSR arrays in device memory (32-bit indices; CUDA events, median of 5 "
             "after a warm-up; through a context, whose memory pool keeps what it mapped, and without one: result and "
             "large work arrays cudaMalloc'd at each call; csr2csc's arrays from the context's pool too; SpMVs: the "
             "time in HiSparse SpMVs of the same matrix; work: device memory held besides input and result):\n\n"
             "| matrix | prec | nnz | CSR -> HiSparse ms | no context | M entries/s | SpMVs | work MB | HiSparse -> CSR ms "
             "| no context | SpMVs | csr2csc (cuSPARSE) ms | SpMVs | to HiSparse / csr2csc |\n"
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n";
        gpu_header = true;
      }
      auto ms = [](const BenchRecord* r) {
        char buf[32];
        if (!r) return std::string("");
        if (!r->ok) return std::string("WRONG");
        std::snprintf(buf, sizeof buf, "%.3f", r->median_ms);
        return std::string(buf);
      };
      auto num = [](const BenchRecord* r, double v, const char* fmt) {
        char buf[32];
        if (!r || !r->ok) return std::string("");
        std::snprintf(buf, sizeof buf, fmt, v);
        return std::string(buf);
      };
      const BenchRecord* any = b ? b : e ? e : t;
      std::snprintf(line, sizeof line, "| %s | %s | %llu | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
                    any->matrix.c_str(), any->precision.c_str(), (unsigned long long)any->nnz, ms(b).c_str(),
                    ms(bs).c_str(), num(b, b ? b->mentries_per_s : 0, "%.0f").c_str(),
                    num(b, b ? b->spmv_equivalents : 0, "%.1f").c_str(),
                    num(b, b ? double(b->peak_work_bytes) / 1e6 : 0, "%.0f").c_str(), ms(e).c_str(), ms(es).c_str(),
                    num(e, e ? e->spmv_equivalents : 0, "%.1f").c_str(), ms(t).c_str(),
                    num(t, t ? t->spmv_equivalents : 0, "%.1f").c_str(),
                    (b && t && b->ok && t->ok) ? num(b, b->median_ms / t->median_ms, "%.2f").c_str() : "");
      s << line;
    }
  }
  if (!geo.empty()) s << "\nGeometric-mean speedup of HiSparse over the CSR baseline (the best cuSPARSE SpMV algorithm; CSR array copies for copy; csrgeam2, after csr2csc for add_t) (> 1: HiSparse faster):\n\n";
  for (const auto& [k, g] : geo) {
    std::snprintf(line, sizeof line, "- %s: %.2f over %d matrices\n", k.c_str(), std::exp(g.first / g.second), g.second);
    s << line;
  }
  return s.str();
}

// Host conversion cost from a coordinate list: into HiSparse (the two-step
// builder) and, as the baseline, into CSR the usual way (sort by row and
// column, sum duplicates, prefix-sum the row counts). Median of `runs`.
// `keep`: receives the last HiSparse matrix built.
template <class V>
std::vector<BenchRecord> bench_conversion(const Coo<V>& coo, const std::string& name, int runs, bool wide,
                                          std::optional<Matrix<V>>& keep) {
  using clock = std::chrono::steady_clock;
  auto median = [&](auto&& f) {
    std::vector<double> t(runs);
    for (int i = 0; i < runs; ++i) {
      const auto a = clock::now();
      f();
      t[i] = std::chrono::duration<double, std::milli>(clock::now() - a).count();
    }
    std::sort(t.begin(), t.end());
    double mean = 0;
    for (double v : t) mean += v / runs;
    double var = 0;
    for (double v : t) var += (v - mean) * (v - mean) / runs;
    return std::tuple{t[t.size() / 2], mean, std::sqrt(var)};
  };
  std::uint64_t hbytes = 0, cbytes = 0, nnz = 0;
  const auto [hm, hmean, hstd] = median([&] {
    keep.reset();  // the previous run's matrix freed first (timed, as it was when freed at each run's end)
    Matrix<V> m = build_matrix(coo, BuildOptions{default_node_size, wide});
    hbytes = m.pool_bytes() + hsp_header_bytes;
    nnz = m.nnz();
    keep.emplace(std::move(m));
  });
  const auto [cm, cmean, cstd] = median([&] {
    std::vector<std::uint64_t> order(coo.nnz());
    std::iota(order.begin(), order.end(), std::uint64_t{0});
    std::stable_sort(order.begin(), order.end(), [&](std::uint64_t a, std::uint64_t b) {
      return coo.row[a] != coo.row[b] ? coo.row[a] < coo.row[b] : coo.col[a] < coo.col[b];
    });
    Csr<V> csr;
    csr.rows = coo.rows;
    csr.cols = coo.cols;
    csr.row_ptr.assign(coo.rows + 1, 0);
    for (std::size_t k = 0; k < order.size(); ++k) {
      const auto i = order[k];
      if (k > 0 && coo.row[i] == coo.row[order[k - 1]] && coo.col[i] == coo.col[order[k - 1]]) {
        csr.val.back() += coo.val[i];
        continue;
      }
      ++csr.row_ptr[coo.row[i] + 1];
      csr.col.push_back(coo.col[i]);
      csr.val.push_back(coo.val[i]);
    }
    std::partial_sum(csr.row_ptr.begin(), csr.row_ptr.end(), csr.row_ptr.begin());
    cbytes = (csr.rows + 1) * 4 + csr.nnz() * (4 + sizeof(V));
  });
  auto rec = [&](const char* impl, const char* conversion, double med, double mean, double sd, std::uint64_t bytes) {
    BenchRecord r;
    r.matrix = name;
    r.op = "convert";
    r.impl = impl;
    r.conversion = conversion;
    r.precision = std::is_same_v<V, float> ? "f32" : "f64";
    r.l2 = "host";
    r.rows = coo.rows;
    r.cols = coo.cols;
    r.nnz = nnz;
    r.median_ms = med;
    r.mean_ms = mean;
    r.std_ms = sd;
    r.bytes = bytes;
    r.ok = true;
    return r;
  };
  return {rec("hisparse-build", "coo->hisparse", hm, hmean, hstd, hbytes),
          rec("csr-build", "coo->csr", cm, cmean, cstd, cbytes)};
}

template <class V>
Coo<V> coo_as(const Coo<double>& coo) {
  Coo<V> c{coo.rows, coo.cols, coo.row, coo.col, {}};
  c.val.assign(coo.val.begin(), coo.val.end());
  return c;
}

// Built where ctx says (the GPU when there is one: the host's bytes).
template <class V>
Matrix<V> build_as(const Coo<double>& coo, bool wide, const LoadContext& ctx) {
  const BuildOptions options{default_node_size, wide};
  if constexpr (std::is_same_v<V, double>) return build_for(coo, options, ctx);
  else return build_for(coo_as<V>(coo), options, ctx);
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto c = std::make_shared<BenchCli>();
  auto* sub = app.add_subcommand("bench", "SpMV, SpMV^T, add, add^T and copy of HiSparse against cuSPARSE (GPU)");
  sub->add_option("MATRIX", c->files, "extra matrix files (.mtx or .hsp)");
  sub->add_option("--preset", c->preset,
                  "large: the four families at 40-90 M entries (Laplacian 4096^2, 27-point 150^3, R-MAT 22 with and "
                  "without wide nodes, circuit 8 M), no suite; SpMV and cold L2 unless --ops or --l2 say otherwise")
      ->check(CLI::IsMember({"large"}));
  sub->add_option("--family", c->families, "extra generated matrix, e.g. rmat:scale=21 (repeatable)");
  sub->add_option("--scale", c->scale, "million entries per default generated family (16)")->check(CLI::Range(0.01, 500.0));
  sub->add_option("--matrices-dir", c->matrices_dir, "folder of the SuiteSparse suite (../shared/matrices)");
  sub->add_flag("--no-suite", c->no_suite, "only the files and families given");
  sub->add_option("--precision", c->precision, "f32, f64 or f32,f64 (default)");
  sub->add_option("--l2", c->l2, "warm, cold or both (default warm)");
  sub->add_option("--ops", c->ops,
                  "operations to time, from spmv, copy, add (default: all three; spmv includes SpMV^T, add A^T + B^T), "
                  "or none (with --conversion: the conversions alone, their SpMV unit still timed)");
  sub->add_option("--runs", c->opt.runs, "timed runs (100)")->check(CLI::Range(1, 100000));
  sub->add_option("--warmup", c->opt.warmup, "warm-up runs, at least (20)")->check(CLI::Range(0, 100000));
  sub->add_option("--warmup-ms", c->opt.warmup_ms, "warm-up time, at least (50 ms): the clocks come back up after host work")
      ->check(CLI::Range(0.0, 60000.0));
  sub->add_flag("--conversion", c->conversion,
                "also time the conversion: COO -> HiSparse and COO -> CSR on the host, and on the GPU CSR -> HiSparse, "
                "HiSparse -> CSR and cuSPARSE csr2csc from and to device arrays (with their time in HiSparse SpMVs)");
  sub->add_flag("--host-only", c->host_only, "only the host conversion timings (no GPU needed; implies --conversion)");
  sub->add_flag("--gpu-conversion-only", c->gpu_conversion_only,
                "the GPU conversion timings without the host's (which take minutes on the large families; implies "
                "--conversion)")
      ->excludes("--host-only");
  add_wide_nodes_flags(sub, c->wide, false);
  sub->add_flag("--controllers", c->opt.controllers, "also time SpMV (one runtime traversal per call), the rebuilding copy and the add under each controller");
  sub->add_option("--json", c->json, "write every record as JSON");
  sub->add_option("--csv", c->csv, "write every record as CSV");
  sub->add_option("--markdown", c->markdown, "write the summary table as Markdown");
  sub->callback([c, sub] {
    if (c->preset == "large") {
      c->no_suite = true;
      if (sub->count("--l2") == 0) c->l2 = "cold";
      if (sub->count("--ops") == 0) c->ops = "spmv";
    }
    if (c->l2 != "warm" && c->l2 != "cold" && c->l2 != "both") throw UsageError("--l2 must be warm, cold or both");
    c->opt.spmv = c->opt.copy = c->opt.add = false;
    for (std::size_t at = 0; c->ops != "none" && at <= c->ops.size();) {
      const std::size_t end = std::min(c->ops.find(',', at), c->ops.size());
      const std::string op = c->ops.substr(at, end - at);
      if (op == "spmv") c->opt.spmv = true;
      else if (op == "copy") c->opt.copy = true;
      else if (op == "add") c->opt.add = true;
      else throw UsageError("--ops: unknown operation '" + printable_text(op) + "' (spmv, copy, add; or none alone)");
      at = end + 1;
    }
    const bool f32 = c->precision.find("f32") != std::string::npos, f64 = c->precision.find("f64") != std::string::npos;
    if (!f32 && !f64) throw UsageError("--precision must name f32 and/or f64");
    if (c->host_only || c->gpu_conversion_only) c->conversion = true;
    else if (!gpu_available()) throw Error("bench needs a CUDA device and a GPU build (or --host-only)");
    const bool wide_default = c->wide.choice().value_or(BuildOptions{}.wide_nodes);
    c->device = c->host_only ? Device::host : Device::gpu;
    // Matrices built from their coordinate lists on the GPU when there is
    // one (falling back to the host where the device memory is too small).
    const LoadContext build_ctx{c->device, !c->host_only, nullptr};
    const auto in = inputs(*c);
    std::vector<BenchRecord> rs;
    const bool tty = isatty(fileno(stderr));
    // HISPARSE_BENCH_LOG: each step on its own line with the seconds since
    // the start, on a pipe too (where a device call's time goes: the host's
    // generation and checks, or the timed GPU work).
    static const bool step_log = std::getenv("HISPARSE_BENCH_LOG") != nullptr;
    const auto t_start = std::chrono::steady_clock::now();
    auto status = [&](std::size_t i, const std::string& what) {
      if (step_log) {
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
        std::fprintf(stderr, "%s[%7.1f s] %s: %s\n", tty ? "\r\033[K" : "", s, in[i].name.c_str(), what.c_str());
      } else if (tty) {
        std::fprintf(stderr, "\r\033[K[%zu/%zu] %s (%s)", i + 1, in.size(), in[i].name.c_str(), what.c_str());
      }
    };
    auto append = [&](std::vector<BenchRecord>&& more) {
      for (auto& r : more) rs.push_back(std::move(r));
    };
    for (std::size_t i = 0; i < in.size(); ++i) {
      Coo<double> coo;
      try {
        status(i, "reading");
        coo = in[i].load();
      } catch (const Error& e) {
        // The suite's complex and malformed files are reported and passed
        // over; a file the user named must be read.
        if (in[i].named) throw;
        std::fprintf(stderr, "%sskipped %s: %s\n", tty ? "\r\033[K" : "", in[i].name.c_str(), e.what());
        continue;
      }
      const bool wide = in[i].wide.value_or(wide_default);
      // Each matrix is built once per precision and kept for every
      // operation and L2 state (the host's build, where the conversion was
      // timed on the host; otherwise the GPU's, the same bytes).
      std::optional<Matrix<float>> m32, moved32;
      std::optional<Matrix<double>> m64, moved64;
      if (c->conversion) {
        if (!c->gpu_conversion_only) {
          status(i, std::to_string(coo.nnz()) + " entries, conversion on the host");
          if (f32) append(bench_conversion(coo_as<float>(coo), in[i].name, 5, wide, m32));
          if (f64) append(bench_conversion(coo, in[i].name, 5, wide, m64));
        }
        if (!c->host_only) {
          status(i, std::to_string(coo.nnz()) + " entries, conversion on the GPU");
          std::size_t before = rs.size();
          if (f32 && !m32) m32 = build_as<float>(coo, wide, build_ctx);  // --gpu-conversion-only
          if (f64 && !m64) m64 = build_as<double>(coo, wide, build_ctx);
          if (f32) {
            status(i, "GPU conversion bench, f32");
            append(bench_conversion_gpu(*m32, in[i].name, c->opt));
          }
          if (f64) {
            status(i, "GPU conversion bench, f64");
            append(bench_conversion_gpu(*m64, in[i].name, c->opt));
          }
          if (rs.size() == before)
            std::fprintf(stderr, "%sno GPU conversion records for %s: beyond 32-bit CSR indices\n", tty ? "\r\033[K" : "",
                         in[i].name.c_str());
        }
      }
      if (c->host_only) continue;
      const bool need = c->opt.spmv || c->opt.copy || c->opt.add;
      if (need && f32 && !m32) {
        status(i, std::to_string(coo.nnz()) + " entries, building f32");
        m32 = build_as<float>(coo, wide, build_ctx);
      }
      if (need && f64 && !m64) {
        status(i, std::to_string(coo.nnz()) + " entries, building f64");
        m64 = build_as<double>(coo, wide, build_ctx);
      }
      if (c->opt.add) {
        // The add's second operand, as in seed 004 section 7: A's entries
        // moved by normal deviates (sigma 10) in row and column.
        status(i, std::to_string(coo.nnz()) + " entries, building the add's second operand");
        const Coo<double> moved = gen::moved_pattern(coo, 10.0, 2017);
        if (f32) moved32 = build_as<float>(moved, wide, build_ctx);
        if (f64) moved64 = build_as<double>(moved, wide, build_ctx);
      }
      for (bool cold : {false, true}) {
        if ((cold && c->l2 == "warm") || (!cold && c->l2 == "cold")) continue;
        BenchOptions o = c->opt;
        o.cold = cold;
        status(i, std::to_string(coo.nnz()) + " entries, " + (cold ? "cold" : "warm") + " L2");
        if (o.spmv || o.copy) {
          if (f32) append(bench_spmv(*m32, in[i].name, o));
          if (f64) append(bench_spmv(*m64, in[i].name, o));
        }
        if (!o.add) continue;
        if (f32) append(bench_add(*m32, *moved32, in[i].name, o));
        if (f64) append(bench_add(*m64, *moved64, in[i].name, o));
      }
      if (step_log) status(i, "done");
    }
    if (tty) std::fprintf(stderr, "\r\033[K");
    write_outputs(*c, rs);
    const std::string md = summary(rs);
    if (!c->markdown.empty()) write_file_atomically(c->markdown, [&](std::ostream& o) { o << md; });
    std::printf("%s", md.c_str());
    for (const auto& r : rs)
      if (!r.ok) throw Error("bench: " + r.impl + " " + r.op + " on " + r.matrix + " gave a wrong result");
  });
}

}  // namespace hisparse::cli
