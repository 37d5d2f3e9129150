#pragma once
// Loading and saving matrices for the command line: by extension (.mtx or
// .hsp), in the precision the user asked for or the file carries.
#include <filesystem>
#include <optional>
#include <string>
#include <complex>
#include <variant>

#include <CLI/CLI.hpp>

#include "hisparse/formats/matrix.hpp"

namespace hisparse::cli {

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

// node_size: nullopt keeps an .hsp file's own node size (default 128 for .mtx).
// precision: nullopt keeps an .hsp file's value type; .mtx files default to
// f64, or c128 when the file holds complex values.
// wide_nodes: build with COOW nodes (an .hsp file is rebuilt when it differs).
AnyMatrix load_matrix(const std::filesystem::path& file, std::optional<std::uint32_t> node_size,
                      std::optional<Precision> precision, bool wide_nodes = false);

// .mtx: the logical matrix (state applied); .hsp: content and state as they are.
void save_matrix(const std::filesystem::path& file, const AnyMatrix& m);

template <class V>
AnyMatrix as_precision(const Matrix<V>& m, Precision p, std::uint32_t node_size, bool wide_nodes = false);

void check_extension(const std::filesystem::path& file, const char* what);

// CLI11 check for --node-size: a power of two in [2, 256] (else exit 2).
CLI::Validator node_size_validator();

}  // namespace hisparse::cli
