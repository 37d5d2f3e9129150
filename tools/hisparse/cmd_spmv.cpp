// hisparse spmv MATRIX --x X.mtx --out Y.mtx [--transpose] [--alpha A]
//               [--beta B --y Y0.mtx] [--device host|gpu] [--no-wide-nodes]
#include <filesystem>
#include <memory>

#include "commands.hpp"
#include "device.hpp"
#include "gpu_ops.hpp"
#include "hisparse/formats/matrix_market.hpp"
#include "hisparse/ops/spmv_reference.hpp"
#include "matrix_io.hpp"
#include "progress.hpp"

namespace hisparse::cli {
namespace {

struct SpmvOptions {
  std::string matrix, x, out, y0, device;
  std::optional<std::string> precision;
  bool transpose = false;
  WideNodesFlags wide;
  double alpha = 1.0, beta = 0.0;
};

template <class V>
void run(const SpmvOptions& o, Matrix<V> a, Device device, Progress& progress) {
  // In the precision actually used (an .hsp file's own, when not asked):
  // 1e39 is out of range for f32, before any vector is read.
  const V alpha = number_as<V>(o.alpha, "--alpha"), beta = number_as<V>(o.beta, "--beta");
  if (o.transpose) a = a.transpose();
  // The reader checks each declared length against op(A) before allocating:
  // a 60-byte file may declare 10^9 elements.
  progress.phase("reading " + o.x);
  const std::vector<V> x = read_vector<V>(o.x, a.cols());
  std::vector<V> y(a.rows(), V(0));
  if (o.beta != 0.0) {
    progress.phase("reading " + o.y0);
    y = read_vector<V>(o.y0, a.rows());
  }
  if constexpr (is_complex_v<V>) {
    // The GPU procedures are built for f32 and f64; complex runs the reference.
    if (o.device == "gpu") throw Error("spmv: --device gpu handles f32 and f64; complex matrices run on the host");
    progress.phase("SpMV on the host");
    ops::spmv_reference<V>(a, x, y, alpha, beta);
  } else {
    if (device == Device::gpu) {
      progress.phase("SpMV on the GPU");
      gpu_spmv<V>(a, x, y, alpha, beta);
    } else {
      progress.phase("SpMV on the host");
      ops::spmv_reference<V>(a, x, y, alpha, beta);
    }
  }
  progress.phase("writing " + o.out);
  write_vector<V>(o.out, y);
}

}  // namespace

void add_spmv_command(CLI::App& app) {
  auto opt = std::make_shared<SpmvOptions>();
  auto* sub = app.add_subcommand("spmv", "y = alpha * op(A) * x + beta * y");
  sub->add_option("MATRIX", opt->matrix, "matrix file (.mtx or .hsp)")->required();
  sub->add_option("--x", opt->x, "input vector x (Matrix Market array)")->required();
  sub->add_option("--out", opt->out, "output vector y (Matrix Market array), written atomically")->required();
  sub->add_flag("--transpose", opt->transpose, "use A^T (flips the matrix state; nothing is copied)");
  add_wide_nodes_flags(sub, opt->wide);
  sub->add_option("--alpha", opt->alpha, "alpha (default 1)")->check(number_validator());
  auto* beta = sub->add_option("--beta", opt->beta, "beta (default 0); needs --y")->check(number_validator());
  sub->add_option("--y", opt->y0, "input vector y for beta != 0")->needs(beta);
  sub->add_option("--device", opt->device,
                  "host or gpu (default: gpu when present); a .mtx matrix is built there too (f32, f64; the same bytes)");
  sub->add_option("--precision", opt->precision, "f32, f64, c64 or c128 (default: f64, c128 for complex files, or the .hsp file's)");
  sub->callback([opt] {
    if (opt->beta != 0.0 && opt->y0.empty()) throw UsageError("--beta other than 0 needs --y Y0.mtx");
    // y is written as Matrix Market text: a name that promises another format is refused.
    if (std::filesystem::path(opt->out).extension() != ".mtx")
      throw UsageError("--out '" + printable_text(opt->out) + "' must end in .mtx: the vector y is written as Matrix Market");
    const Device device = resolve_device(opt->device);  // usage errors before any file is read
    const auto precision = opt->precision ? std::optional(parse_precision(*opt->precision)) : std::nullopt;
    if (precision) {  // usage errors before the matrix is read; run checks again for the file's own type
      check_number_range(opt->alpha, *precision, "--alpha");
      check_number_range(opt->beta, *precision, "--beta");
    }
    // A .mtx matrix (f32, f64) is built where the SpMV runs: on the GPU, the
    // same matrix byte for byte.
    Progress progress;
    const LoadContext ctx{device, opt->device.empty(), &progress};
    std::visit([&](auto a) { run(*opt, std::move(a), device, progress); },
               load_matrix(opt->matrix, std::nullopt, precision, opt->wide.choice(), ctx));
    progress.finish("spmv wrote " + opt->out);
  });
}

}  // namespace hisparse::cli
