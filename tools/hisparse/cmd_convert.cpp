// hisparse convert IN OUT [--node-size D] [--precision f32|f64|c64|c128] [--no-wide-nodes]
#include <memory>

#include "commands.hpp"
#include "hisparse/formats/atomic_file.hpp"
#include "matrix_io.hpp"

namespace hisparse::cli {
namespace {
struct ConvertOptions {
  std::string in, out;
  std::optional<std::uint32_t> node_size;
  std::optional<std::string> precision;
  WideNodesFlags wide;
};
}  // namespace

void add_convert_command(CLI::App& app) {
  auto opt = std::make_shared<ConvertOptions>();
  auto* sub = app.add_subcommand("convert", "convert between .mtx and .hsp");
  sub->add_option("IN", opt->in, "input matrix (.mtx or .hsp)")->required();
  sub->add_option("OUT", opt->out, "output matrix (.mtx or .hsp), written atomically")->required();
  sub->add_option("--node-size", opt->node_size, "node size d of the output, a power of two in [2, 256]")->check(node_size_validator());
  add_wide_nodes_flags(sub, opt->wide);
  sub->add_option("--precision", opt->precision, "f32, f64, c64 or c128 (default: f64, c128 for complex files, or the .hsp file's)");
  sub->callback([opt] {
    check_extension(opt->out, "output file");
    const auto precision = opt->precision ? std::optional(parse_precision(*opt->precision)) : std::nullopt;
    // Loading a large input takes a while; an output that cannot be created
    // fails first. OUT may name IN: IN is read completely before OUT is
    // replaced (renamed over), so that is safe.
    check_output_writable(opt->out);
    save_matrix(opt->out, load_matrix(opt->in, opt->node_size, precision, opt->wide.choice()));
  });
}

}  // namespace hisparse::cli
