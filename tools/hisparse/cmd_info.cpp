// hisparse info MATRIX [--node-size D] [--json] [--precision f32|f64|c64|c128] [--no-wide-nodes]
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "hisparse/formats/matrix_market.hpp"
#include "hisparse/formats/stats.hpp"
#include "matrix_io.hpp"

namespace hisparse::cli {
namespace {

struct InfoOptions {
  std::string file;
  std::optional<std::uint32_t> node_size;
  std::optional<std::string> precision;
  WideNodesFlags wide;
  bool json = false;
};

nlohmann::ordered_json stats_json(const MatrixStats& s) {
  nlohmann::ordered_json j;
  j["rows"] = s.rows;
  j["cols"] = s.cols;
  j["nnz"] = s.nnz;
  j["value_type"] = value_type_name(s.value_type);
  j["node_size"] = s.node_size;
  j["depth"] = s.depth;
  j["nodes"] = {{"inner", s.nodes.inner}, {"leaf", s.nodes.leaf}, {"dense", s.nodes.dense},
                {"coo1", s.nodes.coo1},   {"coo2", s.nodes.coo2}, {"coo4", s.nodes.coo4},
                {"coow", s.nodes.coow}};
  j["bytes"] = {{"hisparse", s.bytes_hisparse}, {"csr", s.bytes_csr}, {"coo", s.bytes_coo}};
  j["bytes_per_nnz"] = {{"hisparse", s.per_nnz(s.bytes_hisparse)},
                        {"csr", s.per_nnz(s.bytes_csr)},
                        {"coo", s.per_nnz(s.bytes_coo)}};
  return j;
}

void print_text(const std::string& file, const MatrixStats& s) {
  // The name as given may hold control characters; they are shown escaped.
  std::printf("%s: %llu x %llu, %llu entries, %s, node size %u, depth %u\n", printable_text(file).c_str(),
              static_cast<unsigned long long>(s.rows), static_cast<unsigned long long>(s.cols),
              static_cast<unsigned long long>(s.nnz), value_type_name(s.value_type), s.node_size, s.depth);
  std::printf("nodes: %llu inner, %llu leaf (%llu dense, %llu COO1, %llu COO2, %llu COO4), %llu COOW\n",
              static_cast<unsigned long long>(s.nodes.inner), static_cast<unsigned long long>(s.nodes.leaf),
              static_cast<unsigned long long>(s.nodes.dense), static_cast<unsigned long long>(s.nodes.coo1),
              static_cast<unsigned long long>(s.nodes.coo2), static_cast<unsigned long long>(s.nodes.coo4),
              static_cast<unsigned long long>(s.nodes.coow));
  std::printf("%-9s %14s %12s %10s\n", "format", "bytes", "bytes/nnz", "vs CSR");
  const auto row = [&](const char* name, std::uint64_t b) {
    std::printf("%-9s %14llu %12.2f %9.2fx\n", name, static_cast<unsigned long long>(b), s.per_nnz(b),
                s.bytes_csr ? static_cast<double>(b) / static_cast<double>(s.bytes_csr) : 0.0);
  };
  row("HiSparse", s.bytes_hisparse);
  row("CSR", s.bytes_csr);
  row("COO", s.bytes_coo);
}

}  // namespace

void add_info_command(CLI::App& app) {
  auto opt = std::make_shared<InfoOptions>();
  auto* sub = app.add_subcommand("info", "statistics of the matrix stored as HiSparse");
  sub->add_option("MATRIX", opt->file, "matrix file (.mtx or .hsp)")->required();
  sub->add_option("--node-size", opt->node_size, "node size d, a power of two in [2, 256] (default 128)")->check(node_size_validator());
  add_wide_nodes_flags(sub, opt->wide);
  sub->add_option("--precision", opt->precision, "f32, f64, c64 or c128 (default: f64, c128 for complex files, or the .hsp file's)");
  sub->add_flag("--json", opt->json, "print one JSON object");
  sub->callback([opt] {
    const auto precision = opt->precision ? std::optional(parse_precision(*opt->precision)) : std::nullopt;
    const AnyMatrix m = load_matrix(opt->file, opt->node_size, precision, opt->wide.choice());
    const MatrixStats s = std::visit([](const auto& mm) { return matrix_stats(mm); }, m);
    if (opt->json) std::printf("%s\n", stats_json(s).dump(2).c_str());
    else print_text(opt->file, s);
  });
}

}  // namespace hisparse::cli
