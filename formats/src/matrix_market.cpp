#include "hisparse/formats/matrix_market.hpp"

#include <fast_float/fast_float.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <optional>
#include <ostream>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>

#include <sys/stat.h>

#include "hisparse/formats/atomic_file.hpp"
#include "hisparse/formats/error.hpp"

namespace hisparse {
namespace {

namespace fs = std::filesystem;

template <class V>
constexpr std::string_view type_name() {
  if constexpr (std::is_same_v<V, float>) {
    return "f32";
  } else if constexpr (std::is_same_v<V, double>) {
    return "f64";
  } else if constexpr (std::is_same_v<V, std::complex<float>>) {
    return "complex<f32>";
  } else {
    return "complex<f64>";
  }
}

// Messages quote the offending token, but a line of binary garbage must not
// turn into a megabyte-long exception message, nor its bytes into terminal
// escape sequences: the first 40 bytes are shown, through printable_text.
std::string quote(std::string_view s) {
  constexpr std::size_t max_shown = 40;
  if (s.size() > max_shown) return "'" + printable_text(s.substr(0, max_shown)) + "...'";
  return "'" + printable_text(s) + "'";
}

// Limits are usually powers of two; say so, since "2^48" is what the
// documentation names.
std::string describe_limit(std::uint64_t limit) {
  std::string s = std::to_string(limit);
  if (limit != 0 && std::has_single_bit(limit)) {
    s += " (2^" + std::to_string(std::countr_zero(limit)) + ")";
  }
  return s;
}

constexpr bool is_blank(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v';
}

std::string_view next_token(const char*& p, const char* end) {
  while (p != end && is_blank(*p)) ++p;
  const char* start = p;
  while (p != end && !is_blank(*p)) ++p;
  return {start, static_cast<std::size_t>(p - start)};
}

// Comment and blank lines may appear anywhere after the banner.
bool is_skippable(std::string_view line) {
  for (char c : line) {
    if (c == '%') return true;
    if (!is_blank(c)) return false;
  }
  return true;
}

bool iequals(std::string_view s, std::string_view lower) {
  if (s.size() != lower.size()) return false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != lower[i]) return false;
  }
  return true;
}

std::optional<std::uint64_t> checked_mul(std::uint64_t a, std::uint64_t b) {
  if (a != 0 && b > std::numeric_limits<std::uint64_t>::max() / a) return std::nullopt;
  return a * b;
}

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

// Lines out of a large buffer refilled by one fread per chunk: per-line
// stream extraction is what makes naive readers slow. A line longer than the
// buffer grows it, so no line is ever split; a line longer than
// limits.max_line_bytes is an error, so the buffer stays bounded whatever the
// input (/dev/zero has no line end at all).
class LineReader {
 public:
  LineReader(const fs::path& file, std::size_t max_line)
      : name_(printable_text(file.string())), max_line_(max_line) {
    file_.reset(std::fopen(file.c_str(), "rb"));
    if (!file_) {
      const int err = errno;
      throw Error(name_ + ": cannot open: " + std::strerror(err));
    }
    // The opened file itself, not the path again: the size is only a hint,
    // and only a regular file has one (a FIFO or a device reports 0).
    struct stat st {};
    if (::fstat(::fileno(file_.get()), &st) != 0) {
      const int err = errno;
      throw Error(name_ + ": cannot stat: " + std::strerror(err));
    }
    if (S_ISDIR(st.st_mode)) throw Error(name_ + ": is a directory, not a Matrix Market file");
    file_size_ = S_ISREG(st.st_mode) ? static_cast<std::uint64_t>(st.st_size) : 0;
    // Small files get a small buffer; big ones are read in chunks. A stream
    // of unknown length starts at a moderate size.
    const std::uint64_t hint = S_ISREG(st.st_mode) ? file_size_ + 1 : stream_buffer;
    capacity_ = static_cast<std::size_t>(std::clamp<std::uint64_t>(hint, 4096, chunk_size));
    buf_ = std::make_unique_for_overwrite<char[]>(capacity_);
  }

  // The next line without its terminator (\n or \r\n); false at end of file.
  bool next_line(std::string_view& line) {
    for (;;) {
      const char* b = buf_.get() + begin_;
      const std::size_t avail = end_ - begin_;
      if (const void* hit = std::memchr(b, '\n', avail)) {
        const char* nl = static_cast<const char*>(hit);
        line = {b, static_cast<std::size_t>(nl - b)};
        begin_ = static_cast<std::size_t>(nl + 1 - buf_.get());
        return finish_line(line);
      }
      if (eof_) {
        if (avail == 0) return false;
        line = {b, avail};
        begin_ = end_;
        return finish_line(line);
      }
      refill();
    }
  }

  [[nodiscard]] const std::string& name() const { return name_; }
  [[nodiscard]] std::uint64_t line_number() const { return line_; }
  // Where an entry was expected when the file ended.
  [[nodiscard]] std::uint64_t eof_line_number() const { return line_ + 1; }

  // Bytes of the file consumed: up to the end of the last line returned.
  [[nodiscard]] std::uint64_t position() const { return consumed_ + begin_; }
  // A regular file's size; 0 for a FIFO or a device, whose length is unknown.
  [[nodiscard]] std::uint64_t file_size() const { return file_size_; }

  // Only a hint for reserving memory, never trusted for correctness; 0 for
  // a FIFO or a device, whose length is unknown.
  [[nodiscard]] std::uint64_t bytes_left() const {
    const std::uint64_t done = consumed_ + begin_;
    return file_size_ > done ? file_size_ - done : 0;
  }

  [[noreturn]] void fail_at(std::uint64_t line, std::string_view message) const {
    throw Error(name_ + ":" + std::to_string(line) + ": " + std::string(message));
  }
  [[noreturn]] void fail(std::string_view message) const { fail_at(line_, message); }
  [[noreturn]] void fail_limit_at(std::uint64_t line, std::string_view message) const {
    throw LimitError(name_ + ":" + std::to_string(line) + ": " + std::string(message));
  }
  [[noreturn]] void fail_limit(std::string_view message) const { fail_limit_at(line_, message); }

 private:
  static constexpr std::size_t chunk_size = std::size_t{16} << 20;
  static constexpr std::size_t stream_buffer = std::size_t{1} << 20;

  bool finish_line(std::string_view& line) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    ++line_;
    if (line.size() > max_line_) line_too_long(line_);
    return true;
  }

  [[noreturn]] void line_too_long(std::uint64_t line) const {
    fail_limit_at(line, "line longer than the limit of " + std::to_string(max_line_) +
                            " bytes (is this a Matrix Market file?)");
  }

  void refill() {
    // Keep the unfinished line: move it to the front, then append. Once it
    // is longer than any valid line (its \r may still be stripped), reading
    // on could only grow the buffer.
    const std::size_t keep = end_ - begin_;
    if (keep > max_line_ && keep - max_line_ > 1) line_too_long(line_ + 1);
    if (begin_ != 0) {
      std::memmove(buf_.get(), buf_.get() + begin_, keep);
      consumed_ += begin_;
      begin_ = 0;
      end_ = keep;
    }
    if (end_ == capacity_) {
      // Reached only while capacity_ <= max_line_ + 1, so bounded by about
      // twice the line limit.
      const std::size_t bigger = capacity_ * 2;
      auto grown = std::make_unique_for_overwrite<char[]>(bigger);
      std::memcpy(grown.get(), buf_.get(), end_);
      buf_ = std::move(grown);
      capacity_ = bigger;
    }
    const std::size_t want = capacity_ - end_;
    const std::size_t got = std::fread(buf_.get() + end_, 1, want, file_.get());
    end_ += got;
    if (got < want) {
      if (std::ferror(file_.get())) {
        const int err = errno;
        throw Error(name_ + ": read error: " + std::strerror(err));
      }
      eof_ = true;
    }
  }

  std::string name_;
  std::size_t max_line_;
  std::unique_ptr<std::FILE, FileCloser> file_;
  std::unique_ptr<char[]> buf_;
  std::size_t capacity_ = 0;
  std::size_t begin_ = 0;
  std::size_t end_ = 0;
  std::uint64_t consumed_ = 0;
  std::uint64_t file_size_ = 0;
  std::uint64_t line_ = 0;
  bool eof_ = false;
};

// The next line that is neither blank nor a comment; false at end of file.
bool next_data_line(LineReader& in, std::string_view& line) {
  do {
    if (!in.next_line(line)) return false;
  } while (is_skippable(line));
  return true;
}

// A size-line count: rows, columns or entries.
std::uint64_t parse_count(const LineReader& in, std::string_view tok, std::string_view what) {
  std::uint64_t x = 0;
  const char* b = tok.data();
  const char* e = b + tok.size();
  if (*b == '+' && tok.size() > 1) ++b;
  auto [ptr, ec] = std::from_chars(b, e, x);
  if (ec == std::errc() && ptr == e) return x;
  if (tok.front() == '-') in.fail("negative " + std::string(what) + " " + quote(tok));
  if (ec == std::errc::result_out_of_range && ptr == e) {
    in.fail(std::string(what) + " " + quote(tok) + " does not fit in 64 bits");
  }
  in.fail(std::string(what) + " " + quote(tok) + " on the size line is not a non-negative integer");
}

// A 1-based index within [1, bound].
index_t parse_index(const LineReader& in, std::string_view tok, std::string_view what,
                    index_t bound) {
  if (tok.empty()) in.fail("missing " + std::string(what));
  index_t x = 0;
  const char* b = tok.data();
  const char* e = b + tok.size();
  if (*b == '+' && tok.size() > 1) ++b;
  auto [ptr, ec] = std::from_chars(b, e, x);
  if (ec == std::errc() && ptr == e) {
    if (x == 0 || x > bound) {
      in.fail(std::string(what) + " " + std::to_string(x) + " out of range [1, " +
              std::to_string(bound) + "]");
    }
    return x;
  }
  if (ec == std::errc::result_out_of_range && ptr == e) {
    in.fail(std::string(what) + " " + quote(tok) + " does not fit in 64 bits");
  }
  if (tok.front() == '-' && tok.size() > 1 &&
      std::all_of(tok.begin() + 1, tok.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    in.fail(std::string(what) + " " + std::string(tok) + " out of range [1, " +
            std::to_string(bound) + "]");
  }
  in.fail(std::string(what) + " " + quote(tok) + " is not an integer");
}

template <class R>
R parse_real(const LineReader& in, std::string_view tok, std::string_view what,
             std::string_view target) {
  if (tok.empty()) in.fail("missing " + std::string(what));
  const char* b = tok.data();
  const char* e = b + tok.size();
  // std::from_chars semantics (which fast_float follows) reject a leading
  // '+', but files written by Fortran and C printf("%+g") have them.
  if (*b == '+' && tok.size() > 1 && b[1] != '+' && b[1] != '-') ++b;
  R v{};
  auto [ptr, ec] = fast_float::from_chars(b, e, v);
  if (ec != std::errc() || ptr != e) in.fail("invalid " + std::string(what) + " " + quote(tok));
  if (std::isinf(v)) {
    // A spelled-out "inf" is a value; a number too large for R is an overflow
    // (fast_float returns infinity for both).
    const char* d = (*b == '-') ? b + 1 : b;
    if (*d != 'i' && *d != 'I') {
      in.fail(std::string(what) + " " + quote(tok) + " overflows " + std::string(target));
    }
  }
  return v;
}

template <class R>
R parse_integer(const LineReader& in, std::string_view tok, std::string_view what,
                std::string_view target) {
  if (tok.empty()) in.fail("missing " + std::string(what));
  const char* b = tok.data();
  const char* e = b + tok.size();
  if (*b == '+' && tok.size() > 1 && b[1] != '+' && b[1] != '-') ++b;
  std::int64_t x = 0;
  auto [ptr, ec] = std::from_chars(b, e, x);
  if (ec == std::errc::result_out_of_range && ptr == e) {
    in.fail("integer " + std::string(what) + " " + quote(tok) + " does not fit in 64 bits");
  }
  if (ec != std::errc() || ptr != e) {
    in.fail("invalid integer " + std::string(what) + " " + quote(tok));
  }
  const R r = static_cast<R>(x);
  // 2^63 is where static_cast<int64_t> back would be undefined.
  constexpr R two63 = static_cast<R>(9223372036854775808.0);
  if (r >= two63 || static_cast<std::int64_t>(r) != x) {
    in.fail("integer " + std::string(what) + " " + std::to_string(x) +
            " is not exactly representable in " + std::string(target));
  }
  return r;
}

// The value part of an entry line, after the indices.
template <class V>
V parse_value(const LineReader& in, const char*& p, const char* end, MmField field) {
  using R = real_of_t<V>;
  constexpr std::string_view target = type_name<V>();
  switch (field) {
    case MmField::real:
      return V(parse_real<R>(in, next_token(p, end), "value", target));
    case MmField::integer:
      return V(parse_integer<R>(in, next_token(p, end), "value", target));
    case MmField::pattern:
      return V(1);
    case MmField::complex:
      if constexpr (is_complex_v<V>) {
        const std::string_view re_tok = next_token(p, end);
        if (re_tok.empty()) in.fail("missing value");
        const R re = parse_real<R>(in, re_tok, "real part", target);
        const R im = parse_real<R>(in, next_token(p, end), "imaginary part", target);
        return V(re, im);
      }
      break;
  }
  // Unreachable: the header check rejects complex fields for real V.
  in.fail("complex values are not supported for " + std::string(target));
}

void expect_line_end(const LineReader& in, const char* p, const char* end, MmField field) {
  const std::string_view rest = next_token(p, end);
  if (rest.empty()) return;
  in.fail("trailing characters " + quote(rest) + " after the " +
          (field == MmField::pattern ? std::string("indices of a pattern entry")
                                     : std::string("value")));
}

MmHeader parse_header(LineReader& in, const MmLimits& limits) {
  constexpr std::string_view expected_banner =
      "'%%MatrixMarket matrix <coordinate|array> <real|integer|pattern|complex> "
      "<general|symmetric|skew-symmetric|hermitian>'";
  MmHeader h;
  std::string_view line;
  if (!in.next_line(line)) in.fail_at(1, "empty file: expected a %%MatrixMarket banner");
  if (line.starts_with("\xEF\xBB\xBF")) line.remove_prefix(3);
  const char* p = line.data();
  const char* end = p + line.size();

  const std::string_view banner = next_token(p, end);
  if (!iequals(banner, "%%matrixmarket")) {
    if (banner.starts_with("%%")) {
      in.fail("unknown banner " + quote(banner) + ", expected %%MatrixMarket");
    }
    in.fail("missing %%MatrixMarket banner: the first line must be " +
            std::string(expected_banner));
  }
  auto banner_word = [&](std::string_view what) {
    const std::string_view tok = next_token(p, end);
    if (tok.empty()) {
      in.fail("incomplete banner, " + std::string(what) + " missing: expected " +
              std::string(expected_banner));
    }
    return tok;
  };

  const std::string_view object = banner_word("object");
  if (!iequals(object, "matrix")) {
    in.fail("unsupported object " + quote(object) + " (expected matrix)");
  }
  const std::string_view format = banner_word("format");
  if (iequals(format, "coordinate")) {
    h.format = MmFormat::coordinate;
  } else if (iequals(format, "array")) {
    h.format = MmFormat::array;
  } else {
    in.fail("unknown format " + quote(format) + " (expected coordinate or array)");
  }
  const std::string_view field = banner_word("field");
  if (iequals(field, "real")) {
    h.field = MmField::real;
  } else if (iequals(field, "integer")) {
    h.field = MmField::integer;
  } else if (iequals(field, "pattern")) {
    h.field = MmField::pattern;
  } else if (iequals(field, "complex")) {
    h.field = MmField::complex;
  } else {
    in.fail("unknown field " + quote(field) + " (expected real, integer, pattern or complex)");
  }
  const std::string_view symmetry = banner_word("symmetry");
  if (iequals(symmetry, "general")) {
    h.symmetry = MmSymmetry::general;
  } else if (iequals(symmetry, "symmetric")) {
    h.symmetry = MmSymmetry::symmetric;
  } else if (iequals(symmetry, "skew-symmetric")) {
    h.symmetry = MmSymmetry::skew_symmetric;
  } else if (iequals(symmetry, "hermitian")) {
    h.symmetry = MmSymmetry::hermitian;
  } else {
    in.fail("unknown symmetry " + quote(symmetry) +
            " (expected general, symmetric, skew-symmetric or hermitian)");
  }
  if (const std::string_view extra = next_token(p, end); !extra.empty()) {
    in.fail("unexpected " + quote(extra) + " after the symmetry in the banner");
  }
  if (h.format == MmFormat::array && h.field == MmField::pattern) {
    in.fail("pattern is not allowed with the array format (an array stores every value)");
  }
  if (h.symmetry == MmSymmetry::hermitian && h.field != MmField::complex) {
    in.fail("hermitian symmetry requires the complex field");
  }
  if (h.symmetry == MmSymmetry::skew_symmetric && h.field == MmField::pattern) {
    in.fail("skew-symmetric is not allowed with the pattern field (a mirrored 1 would be -1)");
  }

  if (!next_data_line(in, line)) {
    in.fail_at(in.eof_line_number(), "unexpected end of file: missing size line");
  }
  p = line.data();
  end = p + line.size();
  const bool coordinate = h.format == MmFormat::coordinate;
  const std::size_t needed = coordinate ? 3 : 2;
  const std::string_view shape = coordinate ? "rows columns entries" : "rows columns";
  constexpr std::string_view names[] = {"number of rows", "number of columns",
                                        "number of entries"};
  std::uint64_t numbers[3] = {0, 0, 0};
  for (std::size_t i = 0; i < needed; ++i) {
    const std::string_view tok = next_token(p, end);
    if (tok.empty()) {
      in.fail("size line has " + std::to_string(i) + " number" + (i == 1 ? "" : "s") +
              ", expected " + std::to_string(needed) + " (" + std::string(shape) + ")");
    }
    numbers[i] = parse_count(in, tok, names[i]);
  }
  if (const std::string_view extra = next_token(p, end); !extra.empty()) {
    in.fail("size line has more than " + std::to_string(needed) + " numbers (" +
            std::string(shape) + "): unexpected " + quote(extra));
  }
  h.rows = numbers[0];
  h.cols = numbers[1];
  for (std::size_t i = 0; i < 2; ++i) {
    if (numbers[i] > limits.max_dimension) {
      in.fail_limit(std::string(names[i]) + " " + std::to_string(numbers[i]) +
                    " exceeds the limit of " + describe_limit(limits.max_dimension));
    }
  }
  if (h.symmetry != MmSymmetry::general && h.rows != h.cols) {
    const char* kind = h.symmetry == MmSymmetry::symmetric        ? "symmetric"
                       : h.symmetry == MmSymmetry::skew_symmetric ? "skew-symmetric"
                                                                  : "hermitian";
    in.fail(std::string("a ") + kind + " matrix must be square, found " +
            std::to_string(h.rows) + " x " + std::to_string(h.cols));
  }
  if (coordinate) {
    h.entries = numbers[2];
  } else {
    // The number of values the array must hold; it can overflow 64 bits
    // well within the dimension limit.
    std::optional<std::uint64_t> count;
    const std::uint64_t n = h.rows;
    switch (h.symmetry) {
      case MmSymmetry::general:
        count = checked_mul(h.rows, h.cols);
        break;
      case MmSymmetry::symmetric:
      case MmSymmetry::hermitian:
        count = n % 2 == 0 ? checked_mul(n / 2, n + 1) : checked_mul(n, (n + 1) / 2);
        break;
      case MmSymmetry::skew_symmetric:
        count = n == 0        ? std::optional<std::uint64_t>(0)
                : n % 2 == 0 ? checked_mul(n / 2, n - 1)
                              : checked_mul(n, (n - 1) / 2);
        break;
    }
    if (!count || *count > limits.max_entries) {
      in.fail_limit("an array of " + std::to_string(h.rows) + " x " + std::to_string(h.cols) +
                    " exceeds the limit of " + describe_limit(limits.max_entries) + " entries");
    }
    h.entries = *count;
  }
  if (h.entries > limits.max_entries) {
    in.fail_limit("number of entries " + std::to_string(h.entries) + " exceeds the limit of " +
                  describe_limit(limits.max_entries));
  }
  return h;
}

template <class V>
void require_value_type(const LineReader& in, const MmHeader& h) {
  if (h.field == MmField::complex && !is_complex_v<V>) {
    in.fail_at(1, "complex values are not supported for " + std::string(type_name<V>()));
  }
}

// Matrix Market stores the lower triangle of the symmetric kinds (strictly
// lower for skew-symmetric). An entry above the diagonal is refused rather
// than mirrored: a file listing both (i, j) and (j, i) would otherwise double
// the value, silently.
void check_lower_triangle(const LineReader& in, MmSymmetry symmetry, index_t r, index_t c) {
  if (symmetry == MmSymmetry::general || c < r) return;
  const std::string where = "(" + std::to_string(r + 1) + ", " + std::to_string(c + 1) + ")";
  if (symmetry == MmSymmetry::skew_symmetric) {
    if (r == c) {
      // A_ii = -A_ii forces zero, which the format leaves implicit.
      in.fail("diagonal entry " + where +
              " in a skew-symmetric file, which stores the strictly lower triangle only "
              "(row > column)");
    }
    in.fail("entry " + where +
            " above the diagonal in a skew-symmetric file, which stores the strictly lower "
            "triangle only (row > column)");
  }
  if (c > r) {
    const char* kind = symmetry == MmSymmetry::symmetric ? "symmetric" : "hermitian";
    in.fail("entry " + where + " above the diagonal in a " + std::string(kind) +
            " file, which stores the lower triangle only (row >= column)");
  }
}

// One stored entry (0-based) and, for the symmetric kinds, its mirror.
template <class V, class Sink>
void emit(const LineReader& in, MmSymmetry symmetry, index_t r, index_t c, const V& v,
          Sink& sink) {
  check_lower_triangle(in, symmetry, r, c);
  switch (symmetry) {
    case MmSymmetry::general:
      sink(r, c, v);
      return;
    case MmSymmetry::symmetric:
      sink(r, c, v);
      if (r != c) sink(c, r, v);
      return;
    case MmSymmetry::skew_symmetric:
      // Strictly lower (check_lower_triangle): never on the diagonal.
      sink(r, c, v);
      sink(c, r, V(-v));
      return;
    case MmSymmetry::hermitian:
      if constexpr (is_complex_v<V>) {
        if (r == c) {
          if (v.imag() != 0) {
            in.fail("diagonal entry (" + std::to_string(r + 1) + ", " + std::to_string(c + 1) +
                    ") of a hermitian matrix has a non-zero imaginary part");
          }
          sink(r, c, v);
        } else {
          sink(r, c, v);
          sink(c, r, std::conj(v));
        }
      } else {
        // parse_header admits hermitian only with the complex field, which
        // require_value_type admits only for complex V.
        in.fail("hermitian symmetry requires a complex value type");
      }
      return;
  }
}

void expect_no_more(LineReader& in, std::string_view message) {
  std::string_view line;
  if (next_data_line(in, line)) in.fail(message);
}

template <class V, class Sink>
void read_coordinate(LineReader& in, const MmHeader& h, Sink& sink) {
  std::string_view line;
  for (std::uint64_t k = 0; k < h.entries; ++k) {
    if (!next_data_line(in, line)) {
      in.fail_at(in.eof_line_number(), "unexpected end of file: expected " +
                                           std::to_string(h.entries) + " entries, found " +
                                           std::to_string(k));
    }
    const char* p = line.data();
    const char* end = p + line.size();
    const index_t r = parse_index(in, next_token(p, end), "row index", h.rows);
    const index_t c = parse_index(in, next_token(p, end), "column index", h.cols);
    const V v = parse_value<V>(in, p, end, h.field);
    expect_line_end(in, p, end, h.field);
    emit(in, h.symmetry, r - 1, c - 1, v, sink);
  }
  expect_no_more(in, "too many entries: the size line declares " + std::to_string(h.entries));
}

// Column-major values; symmetric kinds store the lower triangle (strictly
// lower for skew-symmetric).
template <class V, class Sink>
void read_array(LineReader& in, const MmHeader& h, Sink& sink) {
  std::uint64_t k = 0;
  std::string_view line;
  auto next_value = [&]() {
    if (!next_data_line(in, line)) {
      in.fail_at(in.eof_line_number(), "unexpected end of file: expected " +
                                           std::to_string(h.entries) + " values, found " +
                                           std::to_string(k));
    }
    const char* p = line.data();
    const char* end = p + line.size();
    const V v = parse_value<V>(in, p, end, h.field);
    expect_line_end(in, p, end, h.field);
    ++k;
    return v;
  };
  // With zero values the column loop alone could run 2^48 times.
  if (h.entries != 0) {
    const index_t skip = h.symmetry == MmSymmetry::skew_symmetric ? 1 : 0;
    for (index_t j = 0; j < h.cols; ++j) {
      const index_t first = h.symmetry == MmSymmetry::general ? 0 : j + skip;
      for (index_t i = first; i < h.rows; ++i) emit(in, h.symmetry, i, j, next_value(), sink);
    }
  }
  expect_no_more(in, "too many values: the array holds " + std::to_string(h.entries));
}

// The entries, each handed to sink; with a progress callback, reports the
// bytes consumed before, every progress_every entries the sink receives, and
// once all are read (expect_no_more has read to the end of the file).
constexpr std::uint64_t progress_every = std::uint64_t{1} << 16;

template <class V, class Sink>
void read_entries(LineReader& in, const MmHeader& h, Sink& sink, const MmProgress& progress) {
  if (progress) {
    progress(in.position(), in.file_size());
    std::uint64_t n = 0;
    auto counted = [&](index_t r, index_t c, const V& v) {
      sink(r, c, v);
      if ((++n & (progress_every - 1)) == 0) progress(in.position(), in.file_size());
    };
    if (h.format == MmFormat::coordinate) {
      read_coordinate<V>(in, h, counted);
    } else {
      read_array<V>(in, h, counted);
    }
    progress(in.position(), in.file_size());
    return;
  }
  if (h.format == MmFormat::coordinate) {
    read_coordinate<V>(in, h, sink);
  } else {
    read_array<V>(in, h, sink);
  }
}

// How many entries to reserve: the header's count is not trusted, since a
// hostile or truncated file could claim 2^40 entries in a few bytes; the
// shortest possible entry line bounds what the rest of the file can hold.
std::uint64_t reserve_hint(const LineReader& in, const MmHeader& h) {
  const std::uint64_t min_line = h.format == MmFormat::array  ? 2   // "1\n"
                                 : h.field == MmField::pattern ? 4  // "1 1\n"
                                                               : 6; // "1 1 1\n"
  const std::uint64_t fit = in.bytes_left() / min_line + 1;
  const std::uint64_t n = std::min(h.entries, fit);
  return h.symmetry == MmSymmetry::general ? n : 2 * n;
}

class OutBuffer {
 public:
  explicit OutBuffer(std::ostream& out)
      : out_(out), buf_(std::make_unique_for_overwrite<char[]>(capacity)) {}

  void text(std::string_view s) {
    if (s.size() > capacity - used_) {
      flush();
      if (s.size() > capacity) {
        out_.write(s.data(), static_cast<std::streamsize>(s.size()));
        return;
      }
    }
    std::memcpy(buf_.get() + used_, s.data(), s.size());
    used_ += s.size();
  }

  void put(char c) {
    make_room(1);
    buf_[used_++] = c;
  }

  // Integers and shortest round-trip floating point (std::to_chars without a
  // precision gives the shortest string that parses back to the same bits).
  template <class T>
  void number(T x) {
    make_room(max_number);
    auto [ptr, ec] = std::to_chars(buf_.get() + used_, buf_.get() + capacity, x);
    used_ = static_cast<std::size_t>(ptr - buf_.get());
  }

  template <class V>
  void value(const V& v) {
    if constexpr (is_complex_v<V>) {
      number(v.real());
      put(' ');
      number(v.imag());
    } else {
      number(v);
    }
  }

  void flush() {
    out_.write(buf_.get(), static_cast<std::streamsize>(used_));
    used_ = 0;
  }

 private:
  static constexpr std::size_t capacity = std::size_t{1} << 20;
  static constexpr std::size_t max_number = 64;  // longest double is 24 chars

  void make_room(std::size_t n) {
    if (capacity - used_ < n) flush();
  }

  std::ostream& out_;
  std::unique_ptr<char[]> buf_;
  std::size_t used_ = 0;
};

void write_comment(OutBuffer& out, std::string_view comment) {
  while (!comment.empty()) {
    const std::size_t nl = comment.find('\n');
    std::string_view line = comment.substr(0, nl);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    out.put('%');
    if (!line.empty()) {
      out.put(' ');
      out.text(line);
    }
    out.put('\n');
    if (nl == std::string_view::npos) break;
    comment.remove_prefix(nl + 1);
  }
}

}  // namespace

struct MmReader::Impl {
  Impl(const fs::path& file, const MmLimits& l)
      : in(file, l.max_line_bytes), limits(l), header(parse_header(in, limits)),
        size_line(in.line_number()) {}

  // The entries can be read once: they are consumed from the file.
  void start_entries() {
    if (consumed) throw Error(in.name() + ": the entries have already been read");
    consumed = true;
  }

  LineReader in;
  MmLimits limits;
  MmHeader header;
  std::uint64_t size_line;
  bool consumed = false;
  MmProgress progress;
};

MmReader::MmReader(const fs::path& file, const MmLimits& limits)
    : impl_(std::make_unique<Impl>(file, limits)) {}
MmReader::~MmReader() = default;
MmReader::MmReader(MmReader&&) noexcept = default;
MmReader& MmReader::operator=(MmReader&&) noexcept = default;

const MmHeader& MmReader::header() const {
  if (!impl_) throw Error("MmReader: used after being moved from");
  return impl_->header;
}

void MmReader::set_progress(MmProgress progress) {
  if (!impl_) throw Error("MmReader: used after being moved from");
  impl_->progress = std::move(progress);
}

template <class V>
Coo<V> MmReader::read_matrix() {
  if (!impl_) throw Error("MmReader: used after being moved from");
  impl_->start_entries();
  LineReader& in = impl_->in;
  const MmHeader& h = impl_->header;
  require_value_type<V>(in, h);
  Coo<V> out;
  out.rows = h.rows;
  out.cols = h.cols;
  out.reserve(reserve_hint(in, h));
  auto sink = [&out](index_t r, index_t c, const V& v) { out.push(r, c, v); };
  read_entries<V>(in, h, sink, impl_->progress);
  return out;
}

template <class V>
std::vector<V> MmReader::read_vector(std::optional<std::uint64_t> expected_length) {
  if (!impl_) throw Error("MmReader: used after being moved from");
  impl_->start_entries();
  LineReader& in = impl_->in;
  const MmHeader& h = impl_->header;
  const MmLimits& limits = impl_->limits;
  const std::uint64_t size_line = impl_->size_line;
  require_value_type<V>(in, h);
  if (h.cols != 1) {
    in.fail_at(size_line, "expected a vector (an n x 1 matrix), found " + std::to_string(h.rows) +
                              " x " + std::to_string(h.cols));
  }
  // Before anything is allocated: a 60-byte file may declare 10^9 elements.
  if (expected_length && h.rows != *expected_length) {
    in.fail_at(size_line, "vector of " + std::to_string(h.rows) + " elements, expected " +
                              std::to_string(*expected_length));
  }
  // A dense vector holds every element, so its length counts as entries.
  if (h.rows > limits.max_entries) {
    in.fail_limit_at(size_line, "a vector of " + std::to_string(h.rows) +
                                    " elements exceeds the limit of " +
                                    describe_limit(limits.max_entries) + " entries");
  }
  std::vector<V> out;
  if (h.format == MmFormat::coordinate) {
    // The entries first, then the dense vector: a truncated or malformed
    // file fails before its declared length is allocated, and the entries
    // take memory only as the file actually holds them.
    std::vector<index_t> index;
    std::vector<V> value;
    const std::uint64_t hint = reserve_hint(in, h);
    index.reserve(hint);
    value.reserve(hint);
    auto sink = [&](index_t r, index_t, const V& v) {
      index.push_back(r);
      value.push_back(v);
    };
    read_entries<V>(in, h, sink, impl_->progress);
    try {
      out.assign(h.rows, V(0));
    } catch (const std::bad_alloc&) {
      in.fail_at(size_line, "cannot allocate a vector of " + std::to_string(h.rows) + " elements");
    }
    // Summed in file order, as the entries came.
    for (std::size_t k = 0; k < index.size(); ++k) out[index[k]] += value[k];
  } else {
    // Array values arrive in order, so the vector grows with the file
    // instead of trusting the header's size up front. Each element is stored
    // once and assigned, not summed: 0 + -0 would lose the sign of zero.
    out.reserve(reserve_hint(in, h));
    auto sink = [&out](index_t r, index_t, const V& v) {
      if (r >= out.size()) out.resize(r + 1, V(0));
      out[r] = v;
    };
    read_entries<V>(in, h, sink, impl_->progress);
    out.resize(h.rows, V(0));
  }
  return out;
}

MmHeader read_matrix_market_header(const fs::path& file, const MmLimits& limits) {
  return MmReader(file, limits).header();
}

template <class V>
Coo<V> read_matrix_market(const fs::path& file, const MmLimits& limits) {
  return MmReader(file, limits).read_matrix<V>();
}

template <class V>
std::vector<V> read_vector(const fs::path& file, const MmLimits& limits) {
  return MmReader(file, limits).read_vector<V>();
}

template <class V>
std::vector<V> read_vector(const fs::path& file, std::uint64_t expected_length,
                           const MmLimits& limits) {
  return MmReader(file, limits).read_vector<V>(expected_length);
}

template <class V>
void write_matrix_market(const fs::path& file, const Coo<V>& m, std::string_view comment) {
  const std::string name = printable_text(file.string());
  if (m.row.size() != m.val.size() || m.col.size() != m.val.size()) {
    throw Error(name + ": cannot write: row, col and val have different lengths (" +
                std::to_string(m.row.size()) + ", " + std::to_string(m.col.size()) + ", " +
                std::to_string(m.val.size()) + ")");
  }
  for (std::size_t k = 0; k < m.val.size(); ++k) {
    if (m.row[k] >= m.rows || m.col[k] >= m.cols) {
      throw Error(name + ": cannot write: entry " + std::to_string(k) + " at (" +
                  std::to_string(m.row[k]) + ", " + std::to_string(m.col[k]) +
                  ") is outside the " + std::to_string(m.rows) + " x " +
                  std::to_string(m.cols) + " matrix (0-based)");
    }
  }
  write_file_atomically(file, [&](std::ostream& os) {
    OutBuffer out(os);
    out.text(is_complex_v<V> ? "%%MatrixMarket matrix coordinate complex general\n"
                             : "%%MatrixMarket matrix coordinate real general\n");
    write_comment(out, comment);
    out.number(m.rows);
    out.put(' ');
    out.number(m.cols);
    out.put(' ');
    out.number(static_cast<std::uint64_t>(m.val.size()));
    out.put('\n');
    for (std::size_t k = 0; k < m.val.size(); ++k) {
      out.number(m.row[k] + 1);
      out.put(' ');
      out.number(m.col[k] + 1);
      out.put(' ');
      out.value(m.val[k]);
      out.put('\n');
    }
    out.flush();
  });
}

template <class V>
void write_vector(const fs::path& file, std::span<const V> values) {
  write_file_atomically(file, [&](std::ostream& os) {
    OutBuffer out(os);
    out.text(is_complex_v<V> ? "%%MatrixMarket matrix array complex general\n"
                             : "%%MatrixMarket matrix array real general\n");
    out.number(static_cast<std::uint64_t>(values.size()));
    out.text(" 1\n");
    for (const V& v : values) {
      out.value(v);
      out.put('\n');
    }
    out.flush();
  });
}

template Coo<float> MmReader::read_matrix<float>();
template Coo<double> MmReader::read_matrix<double>();
template Coo<std::complex<float>> MmReader::read_matrix<std::complex<float>>();
template Coo<std::complex<double>> MmReader::read_matrix<std::complex<double>>();

template std::vector<float> MmReader::read_vector<float>(std::optional<std::uint64_t>);
template std::vector<double> MmReader::read_vector<double>(std::optional<std::uint64_t>);
template std::vector<std::complex<float>> MmReader::read_vector<std::complex<float>>(
    std::optional<std::uint64_t>);
template std::vector<std::complex<double>> MmReader::read_vector<std::complex<double>>(
    std::optional<std::uint64_t>);

template Coo<float> read_matrix_market<float>(const fs::path&, const MmLimits&);
template Coo<double> read_matrix_market<double>(const fs::path&, const MmLimits&);
template Coo<std::complex<float>> read_matrix_market<std::complex<float>>(const fs::path&,
                                                                          const MmLimits&);
template Coo<std::complex<double>> read_matrix_market<std::complex<double>>(const fs::path&,
                                                                            const MmLimits&);

template std::vector<float> read_vector<float>(const fs::path&, const MmLimits&);
template std::vector<double> read_vector<double>(const fs::path&, const MmLimits&);
template std::vector<std::complex<float>> read_vector<std::complex<float>>(const fs::path&,
                                                                           const MmLimits&);
template std::vector<std::complex<double>> read_vector<std::complex<double>>(const fs::path&,
                                                                             const MmLimits&);

template std::vector<float> read_vector<float>(const fs::path&, std::uint64_t, const MmLimits&);
template std::vector<double> read_vector<double>(const fs::path&, std::uint64_t, const MmLimits&);
template std::vector<std::complex<float>> read_vector<std::complex<float>>(const fs::path&,
                                                                           std::uint64_t,
                                                                           const MmLimits&);
template std::vector<std::complex<double>> read_vector<std::complex<double>>(const fs::path&,
                                                                             std::uint64_t,
                                                                             const MmLimits&);

template void write_matrix_market<float>(const fs::path&, const Coo<float>&, std::string_view);
template void write_matrix_market<double>(const fs::path&, const Coo<double>&, std::string_view);
template void write_matrix_market<std::complex<float>>(const fs::path&,
                                                       const Coo<std::complex<float>>&,
                                                       std::string_view);
template void write_matrix_market<std::complex<double>>(const fs::path&,
                                                        const Coo<std::complex<double>>&,
                                                        std::string_view);

template void write_vector<float>(const fs::path&, std::span<const float>);
template void write_vector<double>(const fs::path&, std::span<const double>);
template void write_vector<std::complex<float>>(const fs::path&,
                                                std::span<const std::complex<float>>);
template void write_vector<std::complex<double>>(const fs::path&,
                                                 std::span<const std::complex<double>>);

}  // namespace hisparse
