// hisparse edit A UPDATES OUT [--mode set|add|remove] [--precision P] [--node-size D]
//                             [--no-wide-nodes | --wide-nodes] [--stats] [--device host|gpu]
// A edited by the entries of UPDATES (a Matrix Market coordinate file with A's
// dimensions; pattern files mean value 1): ops::edit, which rewrites only the
// nodes the updates touch. OUT is written atomically, in the format its
// extension names. --device gpu runs the batch edit on the GPU
// (ops/edit_gpu.hpp: A uploaded, the new version downloaded; OUT is the same
// byte for byte). --stats makes the edit a persistent one (ops::edit_version:
// OUT is the same) and reports what changed and how many bytes the new version
// shares with A.
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <string>
#include <memory>
#include <type_traits>

#include "commands.hpp"
#include "device.hpp"
#include "gpu_ops.hpp"
#include "hisparse/formats/atomic_file.hpp"
#include "hisparse/formats/matrix_market.hpp"
#include "hisparse/ops/edit.hpp"
#include "matrix_io.hpp"
#include "progress.hpp"

namespace hisparse::cli {
namespace {
struct EditOptions {
  std::string a, updates, out, mode = "set", device;
  std::optional<std::uint32_t> node_size;
  std::optional<std::string> precision;
  WideNodesFlags wide;
  bool stats = false;
};

std::string percent(std::uint64_t part, std::uint64_t whole) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f%%", whole ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0);
  return buf;
}

// What --stats prints: the edit's counts, and the edit as a version of A.
template <class V>
std::string report(const Matrix<V>& a, const Matrix<V>& out, const ops::EditStats& s) {
  const ops::SharedBytes shared = ops::shared_bytes(a, out);
  std::ostringstream os;
  os << "entries: " << s.inserted << " inserted, " << s.updated << " updated, " << s.removed << " removed ("
            << a.nnz() << " -> " << out.nnz() << ")\n"
            << "nodes: " << s.nodes_rewritten << " written, " << s.nodes_shared << " untouched sub-trees shared\n"
            << "as a version of A: " << s.bytes_written << " new bytes (" << percent(s.bytes_written, shared.a)
            << " of A's " << shared.a << "), " << shared.shared << " bytes shared with A ("
            << percent(shared.shared, shared.b) << " of the version's " << shared.b << ")\n";
  return os.str();
}

// The GPU's: its version shares A's untouched nodes in device memory.
template <class V>
std::string report_gpu(const Matrix<V>& a, const Matrix<V>& out, const ops::EditStats& s) {
  std::ostringstream os;
  os << "entries: " << s.inserted << " inserted, " << s.updated << " updated, " << s.removed << " removed ("
     << a.nnz() << " -> " << out.nnz() << ")\n"
     << "nodes (GPU): " << s.nodes_rewritten << " depth-2 sub-trees and inner nodes written, " << s.nodes_shared
     << " untouched children shared\n"
     << "as a version of A on the GPU: " << s.bytes_written << " new bytes (" << percent(s.bytes_written, a.pool_bytes())
     << " of A's " << a.pool_bytes() << ")\n";
  return os.str();
}

template <class V>
Matrix<V> edited(const EditOptions& o, const Matrix<V>& a, Progress& progress, std::string& stats) {
  progress.phase("reading " + o.updates);
  MmReader in(o.updates);
  if (in.header().format != MmFormat::coordinate)
    throw Error(printable_text(o.updates) + ": the updates must be a coordinate file, not an array");
  if (in.header().rows != a.rows() || in.header().cols != a.cols())
    throw Error(printable_text(o.updates) + ": the updates are " + std::to_string(in.header().rows) + " x " +
                std::to_string(in.header().cols) + ", " + printable_text(o.a) + " is " + std::to_string(a.rows()) +
                " x " + std::to_string(a.cols()));
  const Coo<V> updates = in.read_matrix<V>();
  progress.phase(std::string("editing (") + o.mode + ", " + std::to_string(updates.nnz()) + " updates)");
  const ops::EditMode mode = ops::parse_edit_mode(o.mode.c_str());
  if (!o.device.empty() && resolve_device(o.device) == Device::gpu) {
    if constexpr (std::is_same_v<V, float> || std::is_same_v<V, double>) {
      ops::EditStats edit_stats;
      Matrix<V> out = gpu_edit(a, updates, mode, &edit_stats);
      if (o.stats) stats = report_gpu(a, out, edit_stats);
      return out;
    } else {
      throw Error("the GPU edit takes f32 and f64 matrices; run a complex one with --device host");
    }
  }
  if (!o.stats) return ops::edit(a, updates, mode);
  const Matrix<V> first = ops::versioned(a);
  ops::EditStats edit_stats;
  Matrix<V> out = ops::edit_version(first, updates, mode, &edit_stats);
  stats = report(first, out, edit_stats);
  return out;
}
}  // namespace

void add_edit_command(CLI::App& app) {
  auto opt = std::make_shared<EditOptions>();
  auto* sub = app.add_subcommand("edit", "insert, update or remove entries of a matrix");
  sub->add_option("A", opt->a, "the matrix (.mtx or .hsp)")->required();
  sub->add_option("UPDATES", opt->updates,
                  "Matrix Market coordinate file with A's dimensions (pattern files mean value 1)")
      ->required();
  sub->add_option("OUT", opt->out, "the edited matrix (.mtx or .hsp), written atomically")->required();
  sub->add_option("--mode", opt->mode,
                  "set: each listed entry takes the listed value, inserted where absent (of duplicates the last "
                  "counts); add: the listed value is added, inserted where absent (duplicates summed); remove: the "
                  "listed positions are removed (values ignored, absent positions ignored). Default: set")
      ->check(CLI::IsMember({"set", "add", "remove"}));
  sub->add_option("--node-size", opt->node_size, "node size d when A is a .mtx file (default 128) or to rebuild an .hsp A")
      ->check(node_size_validator());
  sub->add_option("--precision", opt->precision, "f32, f64, c64 or c128 (default: f64, c128 for complex files, or the .hsp file's)");
  add_wide_nodes_flags(sub, opt->wide);
  sub->add_option("--device", opt->device,
                  "host or gpu: where the edit runs (default: host, which also edits small batches fastest; the "
                  "result is the same byte for byte). The GPU edit takes f32 and f64 matrices");
  sub->add_flag("--stats", opt->stats,
                "make the edit a persistent one (a new version sharing A's untouched nodes; OUT is the same) and "
                "report the entries and nodes it changed and the bytes the version shares with A (A's pool and "
                "the version's new nodes must fit the 4 GiB a version family addresses)");
  sub->callback([opt] {
    check_extension(opt->out, "output file");
    if (std::filesystem::path(opt->updates).extension() != ".mtx")
      throw UsageError("updates file '" + printable_text(opt->updates) + "' must be a Matrix Market file (.mtx)");
    const auto precision = opt->precision ? std::optional(parse_precision(*opt->precision)) : std::nullopt;
    // --device gpu without a GPU fails here (exit 1), before any file is read.
    if (!opt->device.empty()) (void)resolve_device(opt->device);
    check_output_writable(opt->out);
    Progress progress;
    // OUT may name A: A is read completely before OUT is replaced.
    const AnyMatrix a = load_matrix(opt->a, opt->node_size, precision, opt->wide.choice(), LoadContext{Device::host, false, &progress});
    std::string stats;
    const AnyMatrix out = std::visit([&](const auto& m) -> AnyMatrix { return edited(*opt, m, progress, stats); }, a);
    progress.phase("writing " + opt->out);
    save_matrix(opt->out, out);
    progress.finish("edited " + opt->a + " into " + opt->out);
    std::cout << stats;
  });
}

}  // namespace hisparse::cli
