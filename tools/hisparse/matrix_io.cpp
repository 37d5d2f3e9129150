#include "matrix_io.hpp"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "gpu_ops.hpp"
#include "hisparse/formats/builder.hpp"
#include "hisparse/formats/hsp_file.hpp"
#include "hisparse/formats/matrix_market.hpp"
#include "progress.hpp"

namespace hisparse::cli {
namespace {

bool is_hsp(const std::filesystem::path& f) { return f.extension() == ".hsp"; }

Precision precision_of_value_type(ValueType t) {
  switch (t) {
    case ValueType::f32: return Precision::f32;
    case ValueType::f64: return Precision::f64;
    case ValueType::c64: return Precision::c64;
    case ValueType::c128: break;
  }
  return Precision::c128;
}

template <class To, class From>
Coo<To> convert_values(Coo<From>&& in) {
  if constexpr (std::is_same_v<To, From>) {
    return std::move(in);
  } else {
    Coo<To> out{in.rows, in.cols, std::move(in.row), std::move(in.col), {}};
    out.val.assign(in.val.begin(), in.val.end());
    return out;
  }
}

}  // namespace

void check_extension(const std::filesystem::path& file, const char* what) {
  const auto ext = file.extension();
  if (ext != ".mtx" && ext != ".hsp")
    throw UsageError(std::string(what) + " '" + printable_text(file.string()) + "' must end in .mtx or .hsp");
}

CLI::Validator node_size_validator() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        try {
          checked_log2_node_size(static_cast<std::uint32_t>(std::stoul(s)));
          return {};
        } catch (const std::exception&) {
          // Raw here: main() shows every CLI11 message escaped (printable_text).
          return "node size must be a power of two in [2, 256], not '" + s + "'";
        }
      },
      "POW2 in [2,256]");
}

void add_wide_nodes_flags(CLI::App* sub, WideNodesFlags& flags, bool hsp_input, const std::string& applies_to) {
  auto* no = sub->add_flag("--no-wide-nodes", flags.no_wide,
                           applies_to + "build the standard format, without COOW nodes (default: COOW nodes where "
                                        "they are smaller, docs/format.md)");
  sub->add_flag("--wide-nodes", flags.wide,
                applies_to + "build with COOW nodes (the default" +
                    (hsp_input ? "; an .hsp input in the standard format is rebuilt with them)" : ")"))
      ->excludes(no);
}

CLI::Validator number_validator() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        if (s.empty()) return "an empty value is not a number";
        // CLI11 converts through strtold and then to double: the same parse
        // here, so that what overflows is what CLI11 would turn into inf.
        errno = 0;
        char* end = nullptr;
        const long double v = std::strtold(s.c_str(), &end);
        // Said here rather than by CLI11 (which would call it a conversion
        // error). The text is raw: main() shows CLI11's messages escaped.
        if (end != s.c_str() + s.size()) return "'" + s + "' is not a number";
        // Beyond DBL_MAX plus half an ulp, rounding gives infinity.
        const long double limit = std::ldexp(1.0L, 1024) - std::ldexp(1.0L, 970);
        const bool overflow = std::isinf(v) ? errno == ERANGE : std::fabs(v) >= limit;
        if (overflow) return "'" + s + "' is out of the range of f64";
        return {};
      },
      "NUMBER");
}

void check_number_range(double value, Precision p, const std::string& option) {
  if (p != Precision::f32 && p != Precision::c64) return;  // f64 is checked by number_validator
  // FLT_MAX plus half an ulp: from there on, the conversion gives infinity
  // (a spelled-out inf or nan is a value, not an overflow).
  const double limit = std::ldexp(1.0, 128) - std::ldexp(1.0, 103);
  if (std::isfinite(value) && std::fabs(value) >= limit) {
    char text[32];
    const auto [ptr, ec] = std::to_chars(text, text + sizeof text, value);
    throw UsageError(option + " " + std::string(text, ptr) + " is out of the range of " +
                     (p == Precision::f32 ? "f32" : "c64") + " (largest finite value 3.4028235e+38)");
  }
}

Precision parse_precision(const std::string& s) {
  if (s == "f32") return Precision::f32;
  if (s == "f64") return Precision::f64;
  if (s == "c64") return Precision::c64;
  if (s == "c128") return Precision::c128;
  throw UsageError("--precision must be f32, f64, c64 or c128, not '" + printable_text(s) + "'");
}

template <class V>
Matrix<V> build_for(const Coo<V>& coo, const BuildOptions& options, const LoadContext& ctx) {
  if constexpr (!is_complex_v<V>) {
    if (ctx.by_default ? gpu_available() : ctx.device == Device::gpu) {
      if (ctx.progress) ctx.progress->phase("building on the GPU");
      try {
        return gpu_build(coo, options);
      } catch (const Error& e) {
        if (!ctx.by_default) throw;
        const std::string note = std::string("hisparse: note: building on the GPU failed (") + e.what() +
                                 "); building on the host instead";
        if (ctx.progress) ctx.progress->note(note);
        else std::fprintf(stderr, "%s\n", note.c_str());
      }
    }
  }
  // c64 and c128 have no GPU builder: the host's, whatever the device.
  if (ctx.progress) ctx.progress->phase("building on the host");
  return build_matrix(coo, options);
}
template Matrix<float> build_for(const Coo<float>&, const BuildOptions&, const LoadContext&);
template Matrix<double> build_for(const Coo<double>&, const BuildOptions&, const LoadContext&);
template Matrix<std::complex<float>> build_for(const Coo<std::complex<float>>&, const BuildOptions&,
                                               const LoadContext&);
template Matrix<std::complex<double>> build_for(const Coo<std::complex<double>>&, const BuildOptions&,
                                                const LoadContext&);

namespace {
template <class To, class From>
AnyMatrix rebuild_as(Coo<From>&& coo, BuildOptions options, const LoadContext& ctx) {
  if constexpr (is_complex_v<From> && !is_complex_v<To>) {
    throw Error("complex values cannot be converted to a real precision (the imaginary parts would be lost)");
  } else {
    return build_for(convert_values<To>(std::move(coo)), options, ctx);
  }
}

template <class V>
bool is_wide(const Matrix<V>& m) {
  return (m.content().header().flags & pool_flag_wide) != 0;
}
}  // namespace

template <class V>
AnyMatrix as_precision(const Matrix<V>& m, Precision p, std::uint32_t node_size, std::optional<bool> wide_nodes,
                       const LoadContext& ctx) {
  const bool wide = wide_nodes.value_or(is_wide(m));
  if (p == precision_of<V>() && node_size == m.node_size() && wide == is_wide(m)) return m;
  // Re-blocking, a precision or a format change goes through the logical coordinate list.
  Coo<V> coo = to_coo(m);
  const BuildOptions o{node_size, wide};
  switch (p) {
    case Precision::f32: return rebuild_as<float>(std::move(coo), o, ctx);
    case Precision::f64: return rebuild_as<double>(std::move(coo), o, ctx);
    case Precision::c64: return rebuild_as<std::complex<float>>(std::move(coo), o, ctx);
    case Precision::c128: break;
  }
  return rebuild_as<std::complex<double>>(std::move(coo), o, ctx);
}
template AnyMatrix as_precision(const Matrix<float>&, Precision, std::uint32_t, std::optional<bool>,
                                const LoadContext&);
template AnyMatrix as_precision(const Matrix<double>&, Precision, std::uint32_t, std::optional<bool>,
                                const LoadContext&);
template AnyMatrix as_precision(const Matrix<std::complex<float>>&, Precision, std::uint32_t, std::optional<bool>,
                                const LoadContext&);
template AnyMatrix as_precision(const Matrix<std::complex<double>>&, Precision, std::uint32_t, std::optional<bool>,
                                const LoadContext&);

AnyMatrix load_matrix(const std::filesystem::path& file, std::optional<std::uint32_t> node_size,
                      std::optional<Precision> precision, std::optional<bool> wide_nodes, const LoadContext& ctx) {
  check_extension(file, "matrix file");
  if (node_size) checked_log2_node_size(*node_size);
  if (ctx.progress) ctx.progress->phase("reading " + file.string());
  if (is_hsp(file)) {
    // Another value type than the file's goes through load_hsp_as, which
    // converts by the Matrix Market reader's rules (1e39 or 16777217 as f32
    // are errors naming the file, the value and its position), in one open.
    // Without --precision, the header says which type to load.
    AnyMatrix m;
    switch (precision ? *precision : precision_of_value_type(read_hsp_info(file).value_type)) {
      case Precision::f32: m = precision ? load_hsp_as<float>(file) : load_hsp<float>(file); break;
      case Precision::f64: m = precision ? load_hsp_as<double>(file) : load_hsp<double>(file); break;
      case Precision::c64:
        m = precision ? load_hsp_as<std::complex<float>>(file) : load_hsp<std::complex<float>>(file);
        break;
      case Precision::c128:
        m = precision ? load_hsp_as<std::complex<double>>(file) : load_hsp<std::complex<double>>(file);
        break;
    }
    return std::visit([&](const auto& mm) -> AnyMatrix {
      using V = typename std::decay_t<decltype(mm)>::value_type;
      try {
        // Already in its value type; the file carries its own node size and
        // format, and is rebuilt only when asked to differ.
        return as_precision(mm, precision_of<V>(), node_size.value_or(mm.node_size()), wide_nodes, ctx);
      } catch (const Error& e) {
        throw Error(printable_text(file.string()) + ": " + e.what());
      }
    }, m);
  }
  BuildOptions d{node_size.value_or(default_node_size)};
  if (wide_nodes) d.wide_nodes = *wide_nodes;
  // One open, one pass: the header picks the default precision, then the
  // same reader goes on with the entries (a FIFO cannot be read twice).
  MmReader in(file);
  if (Progress* p = ctx.progress; p && p->enabled())
    in.set_progress([p](std::uint64_t done, std::uint64_t total) { p->bytes(done, total); });
  const bool complex_file = in.header().field == MmField::complex;
  switch (precision.value_or(complex_file ? Precision::c128 : Precision::f64)) {
    case Precision::f32: return build_for(in.read_matrix<float>(), d, ctx);
    case Precision::f64: return build_for(in.read_matrix<double>(), d, ctx);
    case Precision::c64: return build_for(in.read_matrix<std::complex<float>>(), d, ctx);
    case Precision::c128: break;
  }
  return build_for(in.read_matrix<std::complex<double>>(), d, ctx);
}

void save_matrix(const std::filesystem::path& file, const AnyMatrix& m) {
  check_extension(file, "output file");
  std::visit([&](const auto& mm) {
    if (is_hsp(file)) save_hsp(file, mm);
    else write_matrix_market(file, to_coo(mm), "written by hisparse");
  }, m);
}

}  // namespace hisparse::cli
