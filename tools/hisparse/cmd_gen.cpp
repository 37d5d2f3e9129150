// hisparse gen KIND OUT [--n N] [--scale S] ... [--seed S] [--node-size D] [--precision f32|f64]
//              [--no-wide-nodes]
// Synthetic benchmark matrices (docs/generators.md). .mtx output streams;
// .hsp output is built in memory, since the builder needs every entry.
#include <array>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>

#include "commands.hpp"
#include "hisparse/formats/atomic_file.hpp"
#include "hisparse/formats/builder.hpp"
#include "hisparse/formats/hsp_file.hpp"
#include "hisparse/gen/generators.hpp"
#include "matrix_io.hpp"

namespace hisparse::cli {
namespace {

struct GenOptions {
  std::string kind, out;
  std::map<std::string, std::string> params;  // name (without --) -> text, as given
  std::optional<std::uint32_t> node_size;
  WideNodesFlags wide;
  std::optional<std::string> precision;
};

// Every parameter any kind takes; which ones a kind accepts is the library's
// rule (gen::resolve), so the command line cannot drift from it.
struct ParamOption {
  const char* name;
  const char* type;
  const char* help;
};

constexpr std::array<ParamOption, 13> param_options{{
    {"n", "UINT", "size: grid side (laplace2d, stencil3d7, stencil3d27, fem3d) or rows (the others)"},
    {"scale", "UINT", "rmat: 2^scale vertices"},
    {"edge-factor", "UINT", "rmat: edges per vertex"},
    {"permute", "0|1", "rmat: 1 relabels vertices at random (Graph500), 0 does not"},
    {"cols", "UINT", "uniform, tall: columns"},
    {"per-row", "UINT", "uniform: mean entries per row; tall: entries in every row"},
    {"bandwidth", "UINT", "banded, circuit: band half-width"},
    {"lines", "UINT", "circuit: dense rows (and as many dense columns)"},
    {"fill", "REAL", "circuit: fraction of a dense line present; special: of a cluster"},
    {"cluster", "UINT", "special: cluster side"},
    {"spread", "UINT", "special: largest column shift of a cluster from the diagonal"},
    {"input", "FILE", "kron: the Matrix Market file A of A (x) A"},
    {"seed", "UINT", "random kinds: seed (default 1)"},
}};

template <class V>
void write_output(const gen::Generator& g, const GenOptions& o) {
  if (std::filesystem::path(o.out).extension() == ".mtx") {
    gen::write_matrix_market<V>(g, o.out);
    return;
  }
  BuildOptions options{o.node_size.value_or(default_node_size)};
  if (const auto wide = o.wide.choice()) options.wide_nodes = *wide;
  save_hsp(o.out, build_matrix(g.generate_coo<V>(), options));
}

void run(const GenOptions& o) {
  check_extension(o.out, "output file");
  const bool mtx = std::filesystem::path(o.out).extension() == ".mtx";
  if (o.node_size && mtx) throw UsageError("--node-size applies to .hsp output only");
  if (o.wide.no_wide && mtx) throw UsageError("--no-wide-nodes applies to .hsp output only");
  if (o.wide.wide && mtx) throw UsageError("--wide-nodes applies to .hsp output only");
  const Precision precision = o.precision ? parse_precision(*o.precision) : Precision::f64;
  std::optional<gen::Generator> g;
  try {
    gen::GenSpec spec;
    spec.kind = gen::parse_kind(o.kind);
    for (const auto& [name, value] : o.params) gen::set_param(spec, name, value);
    g.emplace(spec);
  } catch (const gen::SpecError& e) {
    throw UsageError(e.what());
  }
  // A large matrix takes minutes to generate (.hsp output: all of it before
  // the first byte is written); an output that cannot be created fails now.
  check_output_writable(o.out);
  if (precision == Precision::f32) write_output<float>(*g, o);
  else write_output<double>(*g, o);
  std::printf("%s: %llu x %llu, %llu entries (%s)\n", o.out.c_str(), static_cast<unsigned long long>(g->rows()),
              static_cast<unsigned long long>(g->cols()), static_cast<unsigned long long>(g->nnz()),
              gen::describe(g->spec()).c_str());
}

}  // namespace

void add_gen_command(CLI::App& app) {
  auto opt = std::make_shared<GenOptions>();
  auto* sub = app.add_subcommand("gen", "write a synthetic matrix (deterministic for its options and --seed)");
  sub->add_option("KIND", opt->kind, "matrix kind (listed below)")->required();
  sub->add_option("OUT", opt->out, "output matrix: .mtx (streamed) or .hsp, written atomically")->required();
  for (const ParamOption& p : param_options) {
    sub->add_option_function<std::string>(
           std::string("--") + p.name,
           [opt, name = std::string(p.name)](const std::string& v) { opt->params[name] = v; }, p.help)
        ->type_name(p.type);
  }
  sub->add_option("--node-size", opt->node_size, ".hsp output: node size d, a power of two in [2, 256] (128)")
      ->check(node_size_validator());
  add_wide_nodes_flags(sub, opt->wide, false, ".hsp output: ");
  sub->add_option("--precision", opt->precision, "f32 or f64 values (default f64)")->type_name("f32|f64");
  sub->footer(gen::kind_help());
  sub->callback([opt] { run(*opt); });
}

}  // namespace hisparse::cli
