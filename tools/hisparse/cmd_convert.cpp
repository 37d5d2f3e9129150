// hisparse convert IN OUT [--node-size D] [--precision f32|f64|c64|c128] [--no-wide-nodes]
//                         [--device host|gpu]
#include <memory>

#include "commands.hpp"
#include "device.hpp"
#include "hisparse/formats/atomic_file.hpp"
#include "matrix_io.hpp"
#include "progress.hpp"

namespace hisparse::cli {
namespace {
struct ConvertOptions {
  std::string in, out, device;
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
  sub->add_option("--device", opt->device,
                  "host or gpu: where HiSparse is built from a .mtx input, or from an .hsp input that must be rebuilt "
                  "(default: gpu when present; the result is the same byte for byte). c64 and c128 have no GPU "
                  "builder and are always built on the host");
  sub->callback([opt] {
    check_extension(opt->out, "output file");
    const auto precision = opt->precision ? std::optional(parse_precision(*opt->precision)) : std::nullopt;
    // --device gpu without a GPU fails here (exit 1), before any file is
    // read or created. Left out, the device is looked for only when a build
    // needs one (an .hsp written out as it is never starts CUDA).
    const Device device = opt->device.empty() ? Device::host : resolve_device(opt->device);
    // Loading a large input takes a while; an output that cannot be created
    // fails first. OUT may name IN: IN is read completely before OUT is
    // replaced (renamed over), so that is safe.
    check_output_writable(opt->out);
    // On a terminal: reading (with bytes), building, writing; nothing otherwise.
    Progress progress;
    // A default device falls back to the host where the GPU's memory is too
    // small; --device gpu means the GPU.
    const LoadContext ctx{device, opt->device.empty(), &progress};
    const AnyMatrix m = load_matrix(opt->in, opt->node_size, precision, opt->wide.choice(), ctx);
    progress.phase("writing " + opt->out);
    save_matrix(opt->out, m);
    progress.finish("converted " + opt->in + " to " + opt->out);
  });
}

}  // namespace hisparse::cli
