#pragma once
// Matrix Market files (NIST format, https://math.nist.gov/MatrixMarket/) in
// and out of the library: the interchange format of the SuiteSparse
// collection and of most tools that produce test matrices.
//
// Reading
//   * Coordinate files of any field (real, integer, pattern, complex) and
//     symmetry (general, symmetric, skew-symmetric, hermitian); array (dense)
//     files too. Symmetric kinds are expanded to the full matrix: every
//     off-diagonal entry is followed by its mirror (negated for
//     skew-symmetric, conjugated for hermitian).
//   * Symmetric, skew-symmetric and hermitian files store the lower triangle
//     only, as the format defines: an entry above the diagonal is an error
//     (mirroring it would double a value the file also lists below), and so
//     is any diagonal entry of a skew-symmetric file, zero included.
//   * Entries come back in file order. Duplicates and explicit zeros are kept:
//     the consumer decides (the builder sums duplicates).
//   * pattern entries read as 1; real and integer files read into complex
//     types with imaginary part 0; complex files read only into complex types.
//   * integer values are parsed as integers, never through a floating-point
//     decimal parser, and must be exactly representable in the value type
//     (2^24 bounds float, 2^53 double); otherwise the file is rejected rather
//     than silently rounded.
//   * A value that overflows the value type (1e400 as double, 1e39 as float)
//     is an error; "inf" and "nan" spelled out are accepted, since the writer
//     produces them. Values that underflow round to a subnormal or zero, as
//     strtod does.
//   * Comment lines (starting with %) and blank lines may appear anywhere
//     after the banner; the banner is case-insensitive; CRLF line endings,
//     tabs and repeated blanks are tolerated; a UTF-8 byte order mark is
//     skipped.
//   * Every malformed input throws hisparse::Error whose message starts with
//     "FILE:LINE: " (or "FILE: " when no line applies, e.g. cannot open).
//     Text quoted from the input (tokens, banner words, the file name itself)
//     goes through printable_text, so control bytes in a hostile file cannot
//     reach the terminal that shows the message.
//   * A file is opened and read once, front to back (MmReader): a FIFO or a
//     character device is read like a regular file, and nothing depends on
//     reopening it. Only a regular file's size is used, as a hint.
//   * Progress (MmReader::set_progress, optional): while the entries are
//     read, a callback learns how many bytes of the file are consumed and the
//     file's size, for a progress display of long reads.
//
// Limits (MmLimits, checked before anything is allocated, so a hostile file
// cannot exhaust memory): rows and columns at most 2^48, stored entries at
// most 2^40 (for array files, the number of values the file must hold), one
// line at most 1 MiB without its terminator (a comment may be long, but
// /dev/zero or a binary file must not grow the line buffer without bound).
// Exceeding one throws hisparse::LimitError naming the file, the line and the
// limit. Callers may tighten them per call. The declared number of entries is
// never trusted for an allocation: memory is reserved for what the rest of a
// regular file can hold, and grows with what is actually read.
//
// Writing
//   * Coordinate general files, real or complex by the value type, 1-based,
//     one entry per line, values in the shortest form that reads back to the
//     identical bits (std::to_chars). Vectors are written as array files with
//     one column. Output goes through write_file_atomically: a failed write
//     leaves no partial file behind.
#include <complex>
#include <cstddef>
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
#include "hisparse/formats/error.hpp"  // printable_text

namespace hisparse {

enum class MmField { real, integer, pattern, complex };
enum class MmSymmetry { general, symmetric, skew_symmetric, hermitian };
enum class MmFormat { coordinate, array };

struct MmHeader {
  MmFormat format = MmFormat::coordinate;
  MmField field = MmField::real;
  MmSymmetry symmetry = MmSymmetry::general;
  index_t rows = 0;
  index_t cols = 0;
  // Entries stored in the file: as declared on the size line for coordinate
  // files; for array files the number of values the symmetry implies
  // (rows*cols, n(n+1)/2, or n(n-1)/2 for skew-symmetric).
  std::uint64_t entries = 0;
};

inline constexpr index_t mm_max_dimension = index_t{1} << 48;
inline constexpr std::uint64_t mm_max_entries = std::uint64_t{1} << 40;
inline constexpr std::size_t mm_max_line_bytes = std::size_t{1} << 20;

struct MmLimits {
  index_t max_dimension = mm_max_dimension;   // rows and cols
  std::uint64_t max_entries = mm_max_entries;  // stored entries (before expansion)
  std::size_t max_line_bytes = mm_max_line_bytes;  // one line, without \n or \r\n
};

// Progress of a read: bytes of the file consumed so far and the file's size
// in bytes (0 when unknown: a FIFO or a device has none).
using MmProgress = std::function<void(std::uint64_t bytes_done, std::uint64_t bytes_total)>;

// One Matrix Market file, opened once: the constructor reads the banner and
// the size line, and the caller picks the value type from header() before
// reading the entries (read_matrix or read_vector, once). Reading each input
// once is what makes a FIFO usable as an input; a header pass followed by a
// second open would wait forever for a writer that has gone.
class MmReader {
 public:
  explicit MmReader(const std::filesystem::path& file, const MmLimits& limits = {});
  ~MmReader();
  MmReader(MmReader&&) noexcept;
  MmReader& operator=(MmReader&&) noexcept;

  [[nodiscard]] const MmHeader& header() const;

  // Optional: called while read_matrix or read_vector reads the entries,
  // first with the bytes the banner, comments and size line took, then about
  // every 65536 stored entries, last once the entries are read (and the file
  // checked for more: for a regular file, its size). bytes_done never
  // decreases. An exception the callback throws ends the read and
  // propagates. An empty function (the default) turns it off.
  void set_progress(MmProgress progress);

  // V is one of float, double, std::complex<float>, std::complex<double>.
  // Either call consumes the entries; a second call throws hisparse::Error.
  template <class V>
  Coo<V> read_matrix();

  // An array file with one column, or a coordinate n x 1 file (missing
  // entries are zero, duplicates summed). The length n counts against
  // limits.max_entries, since every element is held. expected_length: the
  // length the caller needs (an operand's dimension); a file declaring
  // another is refused from its size line, before anything is allocated.
  template <class V>
  std::vector<V> read_vector(std::optional<std::uint64_t> expected_length = std::nullopt);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Banner and size line only; the entries are not read. Throws like the
// readers do for a bad banner, size line or limit.
MmHeader read_matrix_market_header(const std::filesystem::path& file,
                                   const MmLimits& limits = {});

// MmReader(file, limits).read_matrix<V>().
template <class V>
Coo<V> read_matrix_market(const std::filesystem::path& file, const MmLimits& limits = {});

// MmReader(file, limits).read_vector<V>(), without or with an expected length.
template <class V>
std::vector<V> read_vector(const std::filesystem::path& file, const MmLimits& limits = {});
template <class V>
std::vector<V> read_vector(const std::filesystem::path& file, std::uint64_t expected_length,
                           const MmLimits& limits = {});

// Throws hisparse::Error (before creating anything) when the Coo is
// inconsistent: row/col/val of different lengths or an index outside
// rows x cols. comment may span several lines; each becomes a % line.
template <class V>
void write_matrix_market(const std::filesystem::path& file, const Coo<V>& matrix,
                         std::string_view comment = {});

template <class V>
void write_vector(const std::filesystem::path& file, std::span<const V> values);

// The templates are defined and explicitly instantiated for the four value
// types in matrix_market.cpp; other types fail at link time.

}  // namespace hisparse
