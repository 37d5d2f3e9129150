// Kinds, their parameters and defaults: one table that the parser, the
// resolver, describe() and the help text all read, so they cannot disagree.
#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <limits>
#include <variant>

#include "hisparse/gen/generators.hpp"
#include "hisparse/formats/matrix_market.hpp"

namespace hisparse::gen {
namespace {

using UintField = std::optional<std::uint64_t> GenSpec::*;
using RealField = std::optional<double> GenSpec::*;
using TextField = std::optional<std::string> GenSpec::*;

struct ParamDef {
  std::string_view name;
  std::variant<UintField, RealField, TextField> field;
};

constexpr std::array<ParamDef, 12> param_defs{{
    {"n", &GenSpec::n},
    {"scale", &GenSpec::scale},
    {"edge-factor", &GenSpec::edge_factor},
    {"permute", &GenSpec::permute},
    {"cols", &GenSpec::cols},
    {"per-row", &GenSpec::per_row},
    {"bandwidth", &GenSpec::bandwidth},
    {"lines", &GenSpec::lines},
    {"fill", &GenSpec::fill},
    {"cluster", &GenSpec::cluster},
    {"spread", &GenSpec::spread},
    {"input", &GenSpec::input},
}};

struct ParamUse {
  std::string_view name;
  std::string_view meaning;  // with the default, for the help
};

struct KindDef {
  Kind kind;
  std::string_view name;
  bool random;
  std::string_view summary;
  std::string_view nnz;  // shape and entry count
  std::vector<ParamUse> params;
};

const std::vector<KindDef>& kind_table() {
  static const std::vector<KindDef> table{
      {Kind::laplace2d, "laplace2d", false, "5-point Laplacian of an n x n grid (4 on the diagonal, -1 off it)",
       "n^2 x n^2, nnz = 5n^2 - 4n", {{"n", "grid side (448)"}}},
      {Kind::stencil3d7, "stencil3d7", false, "7-point Laplacian of an n x n x n grid (6 / -1)",
       "n^3 x n^3, nnz = 7n^3 - 6n^2", {{"n", "grid side (53)"}}},
      {Kind::stencil3d27, "stencil3d27", false, "27-point stencil of an n x n x n grid (26 / -1)",
       "n^3 x n^3, nnz = (3n - 2)^3", {{"n", "grid side (34)"}}},
      {Kind::fem3d, "fem3d", true,
       "3x3 dense blocks on a 7-point n^3 mesh (3 dofs per node); symmetric, diagonally dominant",
       "3n^3 x 3n^3, nnz = 9(7n^3 - 6n^2)", {{"n", "mesh side (25)"}}},
      {Kind::rmat, "rmat", true, "R-MAT power-law graph, Graph500 a=.57 b=c=.19 d=.05; duplicates kept",
       "2^scale x 2^scale, nnz = edge-factor * 2^scale",
       {{"scale", "log2 of the vertex count (16)"},
        {"edge-factor", "edges per vertex (16)"},
        {"permute", "1: random vertex labels as in Graph500, 0: R-MAT's own order (1)"}}},
      {Kind::circuit, "circuit", true,
       "a diagonal band plus a few very long rows and columns (circuit5M-like)",
       "n x n, nnz = n(2b+1) - b(b+1) + about 2 * lines * round(fill * n) (exact count: docs)",
       {{"n", "rows (200000)"},
        {"bandwidth", "band half-width b (1)"},
        {"lines", "dense rows, and as many dense columns (4)"},
        {"fill", "fraction of a dense line's entries present, (0, 1] (0.25)"}}},
      {Kind::uniform, "uniform", true, "entries at independent uniformly random positions; duplicates kept",
       "n x cols, nnz = n * per-row",
       {{"n", "rows (100000)"}, {"cols", "columns (n)"}, {"per-row", "mean entries per row (10)"}}},
      {Kind::banded, "banded", true, "every entry with |i - j| <= bandwidth",
       "n x n, nnz = n(2w+1) - w(w+1)", {{"n", "rows (100000)"}, {"bandwidth", "band half-width w (5)"}}},
      {Kind::dense, "dense", true, "every entry", "n x n, nnz = n^2", {{"n", "rows (1000)"}}},
      {Kind::tall, "tall", true, "tall and skinny (Rucci1-like): a few random columns in every row",
       "n x cols, nnz = n * per-row",
       {{"n", "rows (250000)"}, {"cols", "columns (n / 20)"}, {"per-row", "entries in every row (4)"}}},
      {Kind::special, "special", true,
       "the paper's locally clustered pattern: part-filled clusters scattered along the diagonal",
       "n x n, nnz = q * round(fill * c^2) + round(fill * r * c), q = n / c, r = n % c",
       {{"n", "rows (131072)"},
        {"cluster", "cluster side c (16)"},
        {"fill", "fraction of each cluster present, (0, 1] (0.5)"},
        {"spread", "largest column shift of a cluster (4 * cluster)"}}},
      {Kind::kron, "kron", false, "Kronecker product A (x) A of a Matrix Market file with itself",
       "rows(A)^2 x cols(A)^2, nnz = nnz(A)^2 (symmetric files expanded first)",
       {{"input", "the matrix A, .mtx (required)"}}},
  };
  return table;
}

const KindDef& def_of(Kind k) {
  for (const KindDef& d : kind_table())
    if (d.kind == k) return d;
  throw Error("hisparse::gen: unknown kind value " + std::to_string(static_cast<int>(k)));
}

const ParamDef* find_param(std::string_view name) {
  for (const ParamDef& p : param_defs)
    if (p.name == name) return &p;
  return nullptr;
}

bool is_set(const GenSpec& s, const ParamDef& p) {
  return std::visit([&](auto field) { return (s.*field).has_value(); }, p.field);
}

std::string format_real(double x) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, x);
  return std::string(buf, end);
}

std::string param_text(const GenSpec& s, const ParamDef& p) {
  return std::visit(
      [&](auto field) -> std::string {
        const auto& v = s.*field;
        using T = typename std::decay_t<decltype(v)>::value_type;
        if constexpr (std::is_same_v<T, std::uint64_t>) return std::to_string(*v);
        else if constexpr (std::is_same_v<T, double>) return format_real(*v);
        else return *v;
      },
      p.field);
}

std::string joined_params(const KindDef& d) {
  std::string out;
  for (const ParamUse& u : d.params) out += (out.empty() ? "" : ", ") + std::string(u.name);
  return out.empty() ? "none" : out;
}

std::uint64_t parse_uint(std::string_view name, std::string_view text) {
  std::uint64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc{} || end != text.data() + text.size())
    throw SpecError("parameter '" + printable_text(name) + "' must be a non-negative integer, not '" +
                    printable_text(text) + "'");
  return v;
}

double parse_real(std::string_view name, std::string_view text) {
  double v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc{} || end != text.data() + text.size() || !std::isfinite(v))
    throw SpecError("parameter '" + printable_text(name) + "' must be a number, not '" + printable_text(text) + "'");
  return v;
}

// Sizes are checked before anything is allocated or written: the Matrix
// Market limits bound what can be read back.
constexpr std::uint64_t max_dimension = mm_max_dimension;
constexpr std::uint64_t max_entries = mm_max_entries;

std::uint64_t checked_mul(std::uint64_t a, std::uint64_t b, std::string_view what) {
  if (a != 0 && b > std::numeric_limits<std::uint64_t>::max() / a)
    throw SpecError(std::string(what) + " overflows 64 bits");
  return a * b;
}

void require(bool ok, const GenSpec& s, const std::string& message) {
  if (!ok) throw SpecError(std::string(kind_name(s.kind)) + ": " + message);
}

void check_limits(const GenSpec& s, std::uint64_t rows, std::uint64_t cols, std::uint64_t nnz_bound) {
  require(rows <= max_dimension && cols <= max_dimension, s,
          "the matrix would be " + std::to_string(rows) + " x " + std::to_string(cols) + ", over the limit of 2^48");
  require(nnz_bound <= max_entries, s,
          "the matrix would hold up to " + std::to_string(nnz_bound) + " entries, over the limit of 2^40");
}

std::uint64_t grid_size(const GenSpec& s, unsigned dims, std::uint64_t per_node) {
  require(*s.n >= 1, s, "n must be at least 1");
  std::uint64_t nodes = 1;
  for (unsigned i = 0; i < dims; ++i) nodes = checked_mul(nodes, *s.n, "the grid size");
  return checked_mul(nodes, per_node, "the matrix size");
}

}  // namespace

std::span<const Kind> all_kinds() {
  static const std::vector<Kind> kinds = [] {
    std::vector<Kind> k;
    for (const KindDef& d : kind_table()) k.push_back(d.kind);
    return k;
  }();
  return kinds;
}

std::string_view kind_name(Kind k) { return def_of(k).name; }

Kind parse_kind(std::string_view name) {
  for (const KindDef& d : kind_table())
    if (d.name == name) return d.kind;
  std::string known;
  for (const KindDef& d : kind_table()) known += (known.empty() ? "" : ", ") + std::string(d.name);
  throw SpecError("unknown matrix kind '" + printable_text(name) + "' (kinds: " + known + ")");
}

std::vector<std::string_view> kind_params(Kind k) {
  std::vector<std::string_view> names;
  for (const ParamUse& u : def_of(k).params) names.push_back(u.name);
  return names;
}

bool kind_uses_seed(Kind k) { return def_of(k).random; }

void set_param(GenSpec& spec, std::string_view name, std::string_view value) {
  if (name == "seed") {
    spec.seed = parse_uint(name, value);
    return;
  }
  const ParamDef* p = find_param(name);
  if (!p) throw SpecError("unknown parameter '" + printable_text(name) + "'");
  std::visit(
      [&](auto field) {
        auto& v = spec.*field;
        using T = typename std::decay_t<decltype(v)>::value_type;
        if constexpr (std::is_same_v<T, std::uint64_t>) v = parse_uint(name, value);
        else if constexpr (std::is_same_v<T, double>) v = parse_real(name, value);
        else v = std::string(value);
      },
      p->field);
}

GenSpec parse_spec(std::string_view text) {
  const std::size_t colon = text.find(':');
  GenSpec spec;
  spec.kind = parse_kind(text.substr(0, colon));
  if (colon == std::string_view::npos) return spec;
  std::string_view rest = text.substr(colon + 1);
  while (!rest.empty()) {
    const std::size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    const std::size_t eq = item.find('=');
    if (eq == std::string_view::npos || eq == 0)
      throw SpecError("'" + printable_text(item) + "' in '" + printable_text(text) + "' is not name=value");
    set_param(spec, item.substr(0, eq), item.substr(eq + 1));
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return spec;
}

std::string describe(const GenSpec& unresolved) {
  const GenSpec s = resolve(unresolved);
  const KindDef& d = def_of(s.kind);
  std::string out(d.name);
  char sep = ':';
  for (const ParamUse& u : d.params) {
    out += sep + std::string(u.name) + "=" + param_text(s, *find_param(u.name));
    sep = ',';
  }
  if (d.random) out += sep + std::string("seed=") + std::to_string(s.seed);
  return out;
}

std::string kind_help() {
  std::string out =
      "Kinds (defaults give about 1 M entries; random values are multiples of 1e-6 in [-1, 1];\n"
      "random kinds take --seed, default 1):\n";
  for (const KindDef& d : kind_table()) {
    out += "  " + std::string(d.name) + std::string(d.name.size() < 12 ? 12 - d.name.size() : 1, ' ') +
           std::string(d.summary) + "\n";
    out += "              " + std::string(d.nnz) + "\n";
    for (const ParamUse& u : d.params)
      out += "              --" + std::string(u.name) + ": " + std::string(u.meaning) + "\n";
  }
  return out;
}

GenSpec resolve(GenSpec s) {
  const KindDef& d = def_of(s.kind);
  for (const ParamDef& p : param_defs) {
    const bool takes =
        std::any_of(d.params.begin(), d.params.end(), [&](const ParamUse& u) { return u.name == p.name; });
    if (is_set(s, p) && !takes)
      throw SpecError("parameter '" + std::string(p.name) + "' does not apply to " + std::string(d.name) +
                      " (it takes: " + joined_params(d) + ")");
  }
  switch (s.kind) {
    case Kind::laplace2d: {
      if (!s.n) s.n = 448;
      const std::uint64_t rows = grid_size(s, 2, 1);
      check_limits(s, rows, rows, checked_mul(rows, 5, "the entry count"));
      break;
    }
    case Kind::stencil3d7: {
      if (!s.n) s.n = 53;
      const std::uint64_t rows = grid_size(s, 3, 1);
      check_limits(s, rows, rows, checked_mul(rows, 7, "the entry count"));
      break;
    }
    case Kind::stencil3d27: {
      if (!s.n) s.n = 34;
      const std::uint64_t rows = grid_size(s, 3, 1);
      check_limits(s, rows, rows, checked_mul(rows, 27, "the entry count"));
      break;
    }
    case Kind::fem3d: {
      if (!s.n) s.n = 25;
      const std::uint64_t rows = grid_size(s, 3, 3);
      check_limits(s, rows, rows, checked_mul(rows, 21, "the entry count"));
      break;
    }
    case Kind::rmat: {
      if (!s.scale) s.scale = 16;
      if (!s.edge_factor) s.edge_factor = 16;
      if (!s.permute) s.permute = 1;
      require(*s.scale >= 1 && *s.scale <= 48, s, "scale must be in [1, 48]");
      require(*s.edge_factor >= 1, s, "edge-factor must be at least 1");
      require(*s.permute <= 1, s, "permute must be 0 or 1");
      const std::uint64_t v = std::uint64_t{1} << *s.scale;
      check_limits(s, v, v, checked_mul(v, *s.edge_factor, "the entry count"));
      break;
    }
    case Kind::circuit: {
      if (!s.n) s.n = 200000;
      if (!s.bandwidth) s.bandwidth = 1;
      if (!s.lines) s.lines = 4;
      if (!s.fill) s.fill = 0.25;
      require(*s.n >= 1, s, "n must be at least 1");
      require(*s.bandwidth < *s.n, s, "bandwidth must be below n");
      require(*s.lines <= *s.n, s, "lines must be at most n");
      require(*s.fill > 0 && *s.fill <= 1, s, "fill must be in (0, 1]");
      require(*s.lines == 0 || std::llround(*s.fill * static_cast<double>(*s.n)) >= 1, s,
              "fill * n rounds to 0 entries per dense line");
      const std::uint64_t band = checked_mul(*s.n, 2 * *s.bandwidth + 1, "the entry count");
      check_limits(s, *s.n, *s.n, band + checked_mul(2 * *s.lines, *s.n, "the entry count"));
      break;
    }
    case Kind::uniform: {
      if (!s.n) s.n = 100000;
      if (!s.cols) s.cols = *s.n;
      if (!s.per_row) s.per_row = 10;
      require(*s.n >= 1 && *s.cols >= 1, s, "n and cols must be at least 1");
      require(*s.per_row >= 1, s, "per-row must be at least 1");
      check_limits(s, *s.n, *s.cols, checked_mul(*s.n, *s.per_row, "the entry count"));
      break;
    }
    case Kind::banded: {
      if (!s.n) s.n = 100000;
      if (!s.bandwidth) s.bandwidth = 5;
      require(*s.n >= 1, s, "n must be at least 1");
      require(*s.bandwidth < *s.n, s, "bandwidth must be below n");
      check_limits(s, *s.n, *s.n, checked_mul(*s.n, 2 * *s.bandwidth + 1, "the entry count"));
      break;
    }
    case Kind::dense: {
      if (!s.n) s.n = 1000;
      const std::uint64_t entries = grid_size(s, 2, 1);
      check_limits(s, *s.n, *s.n, entries);
      break;
    }
    case Kind::tall: {
      if (!s.n) s.n = 250000;
      if (!s.cols) s.cols = std::max<std::uint64_t>(1, *s.n / 20);
      if (!s.per_row) s.per_row = 4;
      require(*s.n >= 1 && *s.cols >= 1, s, "n and cols must be at least 1");
      require(*s.per_row >= 1 && *s.per_row <= *s.cols, s, "per-row must be in [1, cols]");
      check_limits(s, *s.n, *s.cols, checked_mul(*s.n, *s.per_row, "the entry count"));
      break;
    }
    case Kind::special: {
      if (!s.n) s.n = 131072;
      if (!s.cluster) s.cluster = 16;
      if (!s.fill) s.fill = 0.5;
      require(*s.cluster >= 1 && *s.cluster <= std::min<std::uint64_t>(*s.n, 1u << 16), s,
              "cluster must be in [1, min(n, 65536)]");
      if (!s.spread) s.spread = 4 * *s.cluster;
      require(*s.fill > 0 && *s.fill <= 1, s, "fill must be in (0, 1]");
      check_limits(s, *s.n, *s.n, checked_mul(*s.n, *s.cluster, "the entry count"));
      break;
    }
    case Kind::kron:
      require(s.input.has_value() && !s.input->empty(), s, "needs input=FILE (--input M.mtx)");
      break;
  }
  return s;
}

}  // namespace hisparse::gen
