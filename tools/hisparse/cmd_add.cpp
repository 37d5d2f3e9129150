// hisparse add A B OUT [--transpose-a] [--transpose-b] [--alpha A] [--beta B]
//              [--device host|gpu] [--no-wide-nodes]
#include <memory>
#include <type_traits>

#include "commands.hpp"
#include "device.hpp"
#include "gpu_ops.hpp"
#include "hisparse/ops/add_reference.hpp"
#include "matrix_io.hpp"
#include "progress.hpp"

namespace hisparse::cli {
namespace {
struct AddOptions {
  std::string a, b, out, device;
  std::optional<std::string> precision;
  bool ta = false, tb = false;
  WideNodesFlags wide;
  double alpha = 1.0, beta = 1.0;
};
}  // namespace

void add_add_command(CLI::App& app) {
  auto opt = std::make_shared<AddOptions>();
  auto* sub = app.add_subcommand("add", "C = alpha * op(A) + beta * op(B)");
  sub->add_option("A", opt->a, "matrix A (.mtx or .hsp)")->required();
  sub->add_option("B", opt->b, "matrix B (.mtx or .hsp)")->required();
  sub->add_option("OUT", opt->out, "output matrix C (.mtx or .hsp), written atomically")->required();
  sub->add_flag("--transpose-a", opt->ta, "use A^T");
  sub->add_flag("--transpose-b", opt->tb, "use B^T");
  sub->add_option("--alpha", opt->alpha, "alpha (default 1)")->check(number_validator());
  sub->add_option("--beta", opt->beta, "beta (default 1)")->check(number_validator());
  sub->add_option("--device", opt->device,
                  "host or gpu (default: gpu when present; complex runs on the host); .mtx operands are built there "
                  "too (f32, f64; the same bytes)");
  sub->add_option("--precision", opt->precision, "f32, f64, c64 or c128 (default: A's)");
  add_wide_nodes_flags(sub, opt->wide);
  sub->callback([opt] {
    check_extension(opt->out, "output file");
    const Device device = resolve_device(opt->device);
    const auto precision = opt->precision ? std::optional(parse_precision(*opt->precision)) : std::nullopt;
    if (precision) {  // usage errors before anything is read; checked again for A's own type below
      check_number_range(opt->alpha, *precision, "--alpha");
      check_number_range(opt->beta, *precision, "--beta");
    }
    // Matrices read from .mtx (f32, f64) are built where the add runs: on
    // the GPU, the same matrices byte for byte.
    Progress progress;
    const LoadContext ctx{device, opt->device.empty(), &progress};
    const AnyMatrix a = load_matrix(opt->a, std::nullopt, precision, opt->wide.choice(), ctx);
    // B follows A's precision and node size.
    const Precision pa = std::visit([](const auto& m) { return precision_of<typename std::decay_t<decltype(m)>::value_type>(); }, a);
    const std::uint32_t d = std::visit([](const auto& m) { return m.node_size(); }, a);
    const AnyMatrix b = std::visit([&](const auto& m) { return as_precision(m, pa, d, std::nullopt, ctx); },
                                   load_matrix(opt->b, d, pa, opt->wide.choice(), ctx));
    const AnyMatrix c = std::visit(
        [&](const auto& ma) -> AnyMatrix {
          using V = typename std::decay_t<decltype(ma)>::value_type;
          // In the precision actually used: 1e39 is out of range for f32.
          const V alpha = number_as<V>(opt->alpha, "--alpha"), beta = number_as<V>(opt->beta, "--beta");
          Matrix<V> x = opt->ta ? ma.transpose() : ma;
          Matrix<V> y = std::get<Matrix<V>>(b);
          if (opt->tb) y = y.transpose();
          if constexpr (std::is_same_v<V, float> || std::is_same_v<V, double>) {
            if (device == Device::gpu) {
              progress.phase("adding on the GPU");
              return gpu_add<V>(x, y, alpha, beta);
            }
          } else {
            if (opt->device == "gpu") throw Error("add: --device gpu handles f32 and f64; complex matrices run on the host");
          }
          progress.phase("adding on the host");
          return ops::add_reference<V>(x, y, alpha, beta);
        },
        a);
    progress.phase("writing " + opt->out);
    save_matrix(opt->out, c);
    progress.finish("add wrote " + opt->out);
  });
}

}  // namespace hisparse::cli
