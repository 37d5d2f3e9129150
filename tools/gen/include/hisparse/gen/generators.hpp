#pragma once
// Synthetic matrices for benchmarks (docs/generators.md).
//
// A matrix is described by a GenSpec (a kind and its parameters) and produced
// chunk by chunk through a sink, so a caller can stream 100 M entries to a
// file or build them in memory without a second copy. Every kind is
// deterministic for its parameters and seed, independent of the chunk size
// and of the machine: the random numbers come from counter-based streams
// (splitmix64) and integer arithmetic, never from <random>'s distributions,
// whose algorithms the standard leaves to the library.
//
// The number of entries is exact and known before generation (nnz()), which
// is what lets a Matrix Market header be written first. Random kinds that
// can repeat a position (rmat, uniform) keep duplicates as separate entries;
// consumers sum them (the builder and the Matrix Market reader's users do).
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hisparse/formats/coo.hpp"
#include "hisparse/formats/error.hpp"

namespace hisparse::gen {

enum class Kind {
  laplace2d,
  stencil3d7,
  stencil3d27,
  fem3d,
  rmat,
  circuit,
  uniform,
  banded,
  dense,
  tall,
  special,
  kron,
};

// A parameter that is malformed, out of range or foreign to the kind. The
// command line reports it as a usage error (exit 2).
struct SpecError : Error {
  using Error::Error;
};

// Unset parameters take the kind's default (resolve()). Setting one the kind
// does not take is a SpecError, so a typo in a benchmark script cannot
// silently produce the default matrix.
struct GenSpec {
  Kind kind = Kind::laplace2d;
  std::uint64_t seed = 1;  // ignored by the kinds without randomness

  std::optional<std::uint64_t> n;            // grid side, or rows (see kind_help())
  std::optional<std::uint64_t> scale;        // rmat: 2^scale vertices
  std::optional<std::uint64_t> edge_factor;  // rmat: edges per vertex
  std::optional<std::uint64_t> permute;      // rmat: 1 relabels vertices (Graph500), 0 keeps R-MAT's order
  std::optional<std::uint64_t> cols;         // uniform, tall
  std::optional<std::uint64_t> per_row;      // uniform (mean), tall (exact)
  std::optional<std::uint64_t> bandwidth;    // banded, circuit: entries with |i-j| <= bandwidth
  std::optional<std::uint64_t> lines;        // circuit: dense rows, and as many dense columns
  std::optional<double> fill;                // circuit: fraction of a dense line; special: of a cluster
  std::optional<std::uint64_t> cluster;      // special: cluster side
  std::optional<std::uint64_t> spread;       // special: largest column offset of a cluster from the diagonal
  std::optional<std::string> input;          // kron: Matrix Market file multiplied with itself
};

// Every kind, in the order the help lists them.
std::span<const Kind> all_kinds();
std::string_view kind_name(Kind k);
Kind parse_kind(std::string_view name);  // SpecError for an unknown name

// The parameter names a kind takes (as on the command line, without "--"),
// seed excluded.
std::vector<std::string_view> kind_params(Kind k);
bool kind_uses_seed(Kind k);

// Sets one parameter from text: the command line and parse_spec share it.
// name is a parameter name ("edge-factor") or "seed".
void set_param(GenSpec& spec, std::string_view name, std::string_view value);

// "kind" or "kind:name=value,name=value,..." (for example
// "rmat:scale=20,seed=7"). A kron input path must not contain ','.
GenSpec parse_spec(std::string_view text);

// The inverse of parse_spec for a spec with every parameter set; applied to
// an unresolved spec it describes the resolved one.
std::string describe(const GenSpec& spec);

// Help for every kind: its size, parameters with defaults, and nnz formula.
std::string kind_help();

// Fills in defaults and checks every parameter (SpecError). Does not read
// kron's input; Generator does.
GenSpec resolve(GenSpec spec);

// The exact entry count and the shape without generating. Reads kron's input
// file (a hisparse::Error if it cannot be read).
std::uint64_t expected_nnz(const GenSpec& spec);

// Receives consecutive chunks of entries (0-based, any order within the
// matrix); the spans are valid only during the call.
template <class V>
using Sink = std::function<void(std::span<const index_t> rows, std::span<const index_t> cols,
                                std::span<const V> vals)>;

// A resolved spec and what generation needs (kron's input matrix); reusable.
class Generator {
 public:
  explicit Generator(const GenSpec& spec);
  ~Generator();
  Generator(Generator&&) noexcept;
  Generator& operator=(Generator&&) noexcept;

  [[nodiscard]] const GenSpec& spec() const;  // resolved
  [[nodiscard]] index_t rows() const;
  [[nodiscard]] index_t cols() const;
  [[nodiscard]] std::uint64_t nnz() const;  // exactly the entries generate() emits

  // V is float or double. Chunks hold at most chunk_entries entries.
  template <class V>
  void generate(const Sink<V>& sink) const;

  template <class V>
  [[nodiscard]] Coo<V> generate_coo() const;

  static constexpr std::size_t chunk_entries = std::size_t{1} << 18;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

template <class V>
void generate(const GenSpec& spec, const Sink<V>& sink) {
  Generator(spec).generate<V>(sink);
}

template <class V>
Coo<V> generate_coo(const GenSpec& spec) {
  return Generator(spec).generate_coo<V>();
}

// Streams the matrix into a Matrix Market coordinate real general file,
// written atomically, never holding more than a few chunks: the header's
// count is nnz(), checked against what was written. V picks the value
// precision of the text (float values print shorter). Formatting runs on
// worker threads, writing stays in order.
template <class V>
void write_matrix_market(const Generator& gen, const std::filesystem::path& file);

}  // namespace hisparse::gen
