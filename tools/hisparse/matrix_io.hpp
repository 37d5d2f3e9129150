#pragma once
// Loading and saving matrices for the command line: by extension (.mtx or
// .hsp), in the precision the user asked for or the file carries.
#include <filesystem>
#include <optional>
#include <string>
#include <complex>
#include <variant>

#include <CLI/CLI.hpp>

#include "device.hpp"
#include "hisparse/formats/builder.hpp"
#include "hisparse/formats/matrix.hpp"

namespace hisparse::cli {

class Progress;

// Thrown for a wrong command line: exit code 2.
struct UsageError : Error {
  using Error::Error;
};

using AnyMatrix = std::variant<Matrix<float>, Matrix<double>, Matrix<std::complex<float>>, Matrix<std::complex<double>>>;

// Value types of the command line: f32, f64 and complex c64, c128.
enum class Precision { f32, f64, c64, c128 };
Precision parse_precision(const std::string& s);

template <class V>
constexpr Precision precision_of() {
  if constexpr (std::is_same_v<V, float>) return Precision::f32;
  else if constexpr (std::is_same_v<V, double>) return Precision::f64;
  else if constexpr (std::is_same_v<V, std::complex<float>>) return Precision::c64;
  else return Precision::c128;
}

// Where load_matrix and as_precision build a matrix from a coordinate list
// (a .mtx file, or an .hsp file that must be rebuilt), and what shows it.
struct LoadContext {
  // gpu: f32 and f64 are built by gpu_build, byte for byte what the host
  // builds (so nothing else changes); c64 and c128 always on the host.
  Device device = Device::host;
  // The device was not given (--device left out): `device` is ignored and
  // the GPU is used when present, asked (gpu_available) only when a build
  // needs it, so that work without one never starts CUDA; and a GPU build
  // that fails (a matrix too large for the device memory) is done again on
  // the host, with a note on stderr. A device the user asked for fails
  // instead.
  bool by_default = false;
  // Phases "reading FILE" (with bytes for .mtx), "building on the GPU" or
  // "building on the host"; nullptr: none.
  Progress* progress = nullptr;
};

// A coordinate list built into HiSparse where ctx says (see LoadContext).
template <class V>
Matrix<V> build_for(const Coo<V>& coo, const BuildOptions& options, const LoadContext& ctx);

// node_size: nullopt keeps an .hsp file's own node size (default 128 for .mtx).
// precision: nullopt keeps an .hsp file's value type; .mtx files default to
// f64, or c128 when the file holds complex values.
// wide_nodes: COOW nodes (docs/format.md). nullopt: a .mtx file is built with
// them (the builder's default) and an .hsp file keeps the format it carries;
// true or false: that format (an .hsp file is rebuilt when it differs; false
// is the standard format).
// ctx: where a build from a coordinate list runs, and the progress display.
AnyMatrix load_matrix(const std::filesystem::path& file, std::optional<std::uint32_t> node_size,
                      std::optional<Precision> precision, std::optional<bool> wide_nodes = std::nullopt,
                      const LoadContext& ctx = {});

// .mtx: the logical matrix (state applied); .hsp: content and state as they are.
void save_matrix(const std::filesystem::path& file, const AnyMatrix& m);

// wide_nodes: nullopt keeps m's format (with or without COOW nodes). A
// rebuild (another precision, node size or format) runs where ctx says.
template <class V>
AnyMatrix as_precision(const Matrix<V>& m, Precision p, std::uint32_t node_size,
                       std::optional<bool> wide_nodes = std::nullopt, const LoadContext& ctx = {});

void check_extension(const std::filesystem::path& file, const char* what);

// CLI11 check for --node-size: a power of two in [2, 256] (else exit 2).
CLI::Validator node_size_validator();

// CLI11 check for a number option (--alpha, --beta): an empty value is a
// usage error (exit 2), not 0, which CLI11 would make of it; so is a value
// beyond the range of f64 (1e400), which CLI11 would make infinity. "inf"
// and "nan" spelled out are values, as in Matrix Market files. The value is
// quoted escaped (printable_text) in the message.
CLI::Validator number_validator();

// A number option's value in the precision actually used: a value that the
// value type cannot hold (1e39 for f32 and c64) is a UsageError, not
// infinity. Values that underflow round to a subnormal or zero.
void check_number_range(double value, Precision p, const std::string& option);
template <class V>
V number_as(double value, const std::string& option) {
  check_number_range(value, precision_of<V>(), option);
  return static_cast<V>(value);
}

// --no-wide-nodes (the standard format, without COOW nodes) and --wide-nodes
// (COOW nodes, the default; with hsp_input, it also rebuilds an .hsp input of
// the standard format), which exclude each other. choice(): what load_matrix
// takes (nullopt when neither is given).
struct WideNodesFlags {
  bool wide = false, no_wide = false;
  [[nodiscard]] std::optional<bool> choice() const {
    if (no_wide) return false;
    if (wide) return true;
    return std::nullopt;
  }
};
void add_wide_nodes_flags(CLI::App* sub, WideNodesFlags& flags, bool hsp_input = true,
                          const std::string& applies_to = "");

}  // namespace hisparse::cli
