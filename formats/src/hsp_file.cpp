#include "hisparse/formats/hsp_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <complex>
#include <cstddef>
#include <cstring>
#include <limits>

#include "hisparse/formats/atomic_file.hpp"
#include "hisparse/formats/builder.hpp"
#include "hisparse/formats/error.hpp"
#include "hisparse/formats/traverse.hpp"
#include "hisparse/formats/validate.hpp"

namespace hisparse {
namespace {

static_assert(std::endian::native == std::endian::little, "the .hsp file is little-endian; big-endian hosts need byte swapping");

constexpr std::array<char, 8> magic = {'H', 'I', 'S', 'P', 'A', 'R', 'S', 'E'};

struct RawHeader {
  char magic[8];
  std::uint32_t version;
  std::uint32_t header_bytes;
  std::uint64_t rows, cols, nnz;
  std::uint8_t log2_node_size, depth, value_type, flags;
  std::uint32_t reserved0;
  double scale_re, scale_im;
  std::uint64_t pool_bytes;
  std::uint64_t pool_checksum;
  std::uint64_t header_checksum;
  std::uint64_t reserved1;
};
static_assert(sizeof(RawHeader) == hsp_header_bytes);
static_assert(offsetof(RawHeader, reserved0) == 44 && offsetof(RawHeader, scale_re) == 48 &&
              offsetof(RawHeader, header_checksum) == 80 && offsetof(RawHeader, reserved1) == 88);

// The file name is shown escaped (printable_text): a name is input text too.
[[noreturn]] void fail(const std::filesystem::path& p, const std::string& what) {
  throw Error(printable_text(p.string()) + ": " + what);
}

// Shortest text that reads back as the same double (1e+39, 16777217, nan).
std::string number(double x) {
  std::array<char, 64> buf{};
  const auto r = std::to_chars(buf.data(), buf.data() + buf.size(), x);
  return std::string(buf.data(), r.ptr);
}

// ---- Checksums ---------------------------------------------------------------
// Version 1: XXH3-64 of header bytes 0..79, and of the pool. Version 2: of the
// whole header with the checksum field taken as zero (so reserved1, after the
// checksum, is covered too), and of the pool seeded with the value type code
// (f64 and c64 pools both have 8-byte values: a changed type code would
// otherwise reinterpret the same, valid pool).
std::uint64_t header_checksum(RawHeader h, std::uint32_t version) {
  if (version == 1) return XXH3_64bits(&h, offsetof(RawHeader, header_checksum));
  h.header_checksum = 0;
  return XXH3_64bits(&h, sizeof(h));
}

std::uint64_t pool_checksum(const std::byte* pool, std::uint64_t bytes, std::uint8_t value_type, std::uint32_t version) {
  if (version == 1) return XXH3_64bits(pool, bytes);
  return XXH3_64bits_withSeed(pool, bytes, value_type);
}

// ---- Opening: regular files only ----------------------------------------------
const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

[[noreturn]] void refuse(const std::filesystem::path& p, mode_t mode) {
  fail(p, std::string("not a regular file (") + kind_of(mode) + "); an .hsp file is read from a regular file only");
}

// An .hsp input: a regular file, whose size (from the opened file itself) is
// checked against the header. A FIFO, a directory or a device is refused
// before it is opened: opening a FIFO for reading blocks until a writer
// comes, reading it would consume what it holds, and opening a device may act
// on it.
class InputFile {
 public:
  explicit InputFile(const std::filesystem::path& p) : path_(p) {
    struct stat st {};
    if (::stat(p.c_str(), &st) != 0) {
      const int e = errno;
      fail(p, std::string("cannot open for reading: ") + std::strerror(e));
    }
    if (!S_ISREG(st.st_mode)) refuse(p, st.st_mode);
    // O_NONBLOCK: should the path become a FIFO between stat and open, open
    // still returns at once and fstat refuses it. No effect on regular files.
    fd_.fd = ::open(p.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd_.fd < 0) {
      const int e = errno;
      fail(p, std::string("cannot open for reading: ") + std::strerror(e));
    }
    if (::fstat(fd_.fd, &st) != 0) {
      const int e = errno;
      fail(p, std::string("cannot stat: ") + std::strerror(e));
    }
    if (!S_ISREG(st.st_mode)) refuse(p, st.st_mode);
    size_ = static_cast<std::uint64_t>(st.st_size);
  }

  [[nodiscard]] std::uint64_t size() const { return size_; }

  // Reads up to n bytes; fewer only at the end of the file.
  std::uint64_t read(void* dst, std::uint64_t n) {
    auto* out = static_cast<char*>(dst);
    std::uint64_t done = 0;
    while (done < n) {
      const std::size_t chunk = static_cast<std::size_t>(std::min<std::uint64_t>(n - done, std::uint64_t{1} << 30));
      const ::ssize_t r = ::read(fd_.fd, out + done, chunk);
      if (r < 0) {
        const int e = errno;
        if (e == EINTR) continue;
        fail(path_, std::string("read error: ") + std::strerror(e));
      }
      if (r == 0) break;
      done += static_cast<std::uint64_t>(r);
    }
    return done;
  }

 private:
  // A member, so that it is closed when the constructor throws after open.
  struct Fd {
    int fd = -1;
    Fd() = default;
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
    ~Fd() {
      if (fd >= 0) ::close(fd);
    }
  };
  std::filesystem::path path_;
  Fd fd_;
  std::uint64_t size_ = 0;
};

// ---- Header ---------------------------------------------------------------------
RawHeader read_raw(InputFile& in, const std::filesystem::path& path) {
  RawHeader h{};
  const std::uint64_t got = in.read(&h, sizeof(h));
  if (got != sizeof(h))
    fail(path, "truncated: " + std::to_string(got) + " bytes, shorter than the 96-byte header");
  if (std::memcmp(h.magic, magic.data(), magic.size()) != 0) fail(path, "not a HiSparse .hsp file (bad magic)");
  if (h.version < hsp_oldest_version || h.version > hsp_version)
    fail(path, "unsupported .hsp version " + std::to_string(h.version) + " (this build reads versions " +
                   std::to_string(hsp_oldest_version) + " to " + std::to_string(hsp_version) + ")");
  if (header_checksum(h, h.version) != h.header_checksum) fail(path, "header checksum mismatch (corrupt header)");
  if (h.header_bytes != hsp_header_bytes) fail(path, "header size " + std::to_string(h.header_bytes) + " is not 96");
  // Zero in every version (the writer has always zeroed them); in version 1
  // reserved1 lies outside the checksum, so this check is all that guards it.
  if (h.reserved0 != 0) fail(path, "reserved header field at offset 44 is " + std::to_string(h.reserved0) + ", not zero");
  if (h.reserved1 != 0) fail(path, "reserved header field at offset 88 is " + std::to_string(h.reserved1) + ", not zero");
  return h;
}

bool is_complex(ValueType t) { return t == ValueType::c64 || t == ValueType::c128; }
bool is_single(ValueType t) { return t == ValueType::f32 || t == ValueType::c64; }

// The scale is stored as two f64 whatever the value type; it must be a value
// of the file's type: finite, real for a real matrix, an f32 for f32 and c64.
void check_scale(double re, double im, ValueType t, const std::filesystem::path& path) {
  if (!std::isfinite(re) || !std::isfinite(im))
    fail(path, "scale (" + number(re) + ", " + number(im) + ") is not finite");
  if (!is_complex(t) && im != 0)
    fail(path, "scale has a non-zero imaginary part " + number(im) + " in a matrix of real (" +
                   value_type_name(t) + ") values");
  if (is_single(t)) {
    for (const auto& [part, x] : {std::pair{"real part", re}, std::pair{"imaginary part", im}}) {
      if (std::fabs(x) > std::numeric_limits<float>::max() || static_cast<double>(static_cast<float>(x)) != x)
        fail(path, std::string("scale ") + part + " " + number(x) + " is not an f32 value (the file holds " +
                       value_type_name(t) + " values)");
    }
  }
}

HspInfo info_of(const RawHeader& h, const std::filesystem::path& path) {
  HspInfo info;
  if (h.value_type < 1 || h.value_type > 4) fail(path, "unknown value type code " + std::to_string(h.value_type));
  if (h.log2_node_size < 1 || h.log2_node_size > 8) fail(path, "node size 2^" + std::to_string(h.log2_node_size) + " outside [2, 256]");
  try {
    info.shape = Shape::make(h.rows, h.cols, 1u << h.log2_node_size);
  } catch (const Error& e) {
    fail(path, e.what());
  }
  if (info.shape.depth != h.depth) fail(path, "depth " + std::to_string(h.depth) + " does not match the dimensions");
  if (h.flags > 1) fail(path, "unknown flag bits " + std::to_string(h.flags));
  if (h.pool_bytes < 16 || h.pool_bytes % 16 || h.pool_bytes > max_pool_bytes)
    fail(path, "pool size " + std::to_string(h.pool_bytes) + " is not a multiple of 16 in [16, 2^32 - 16]");
  info.value_type = static_cast<ValueType>(h.value_type);
  check_scale(h.scale_re, h.scale_im, info.value_type, path);
  info.nnz = h.nnz;
  info.transposed = h.flags & 1u;
  info.scale_re = h.scale_re;
  info.scale_im = h.scale_im;
  info.pool_bytes = h.pool_bytes;
  info.version = h.version;
  return info;
}

template <class V>
std::pair<double, double> split(V s) {
  if constexpr (is_complex_v<V>) return {s.real(), s.imag()};
  else return {static_cast<double>(s), 0.0};
}
// Exact: check_scale has made sure the stored scale is a value of V.
template <class V>
V join(double re, double im) {
  if constexpr (is_complex_v<V>) return V(static_cast<typename V::value_type>(re), static_cast<typename V::value_type>(im));
  else return static_cast<V>(re);
}

// The pool of an opened file whose header says it holds V values.
template <class V>
Matrix<V> read_pool(InputFile& in, const RawHeader& h, const HspInfo& info, const std::filesystem::path& path) {
  const std::uint64_t file_size = in.size();
  if (file_size < hsp_header_bytes + info.pool_bytes)
    fail(path, "truncated: the header announces a pool of " + std::to_string(info.pool_bytes) + " bytes, the file holds " +
                   std::to_string(file_size - hsp_header_bytes));
  if (file_size > hsp_header_bytes + info.pool_bytes)
    fail(path, "trailing bytes after the pool (" + std::to_string(file_size - hsp_header_bytes - info.pool_bytes) + ")");

  auto c = std::make_shared<Content<V>>();
  c->shape = info.shape;
  c->nnz = info.nnz;
  c->pool = AlignedBuffer(info.pool_bytes);
  if (in.read(c->pool.data(), info.pool_bytes) != info.pool_bytes) fail(path, "truncated pool");
  if (pool_checksum(c->pool.data(), info.pool_bytes, h.value_type, h.version) != h.pool_checksum)
    fail(path, "pool checksum mismatch (corrupt data, or a value type code that is not the pool's)");
  try {
    validate(*c);
  } catch (const Error& e) {
    fail(path, e.what());
  }
  return Matrix<V>(std::move(c), info.transposed, join<V>(info.scale_re, info.scale_im));
}

// ---- Conversion to another value type (load_hsp_as) ----------------------------
template <class R>
const char* real_name() {
  return std::is_same_v<R, float> ? "f32" : "f64";
}

// One real number into R by the Matrix Market reader's rules (parse_real and
// parse_integer in matrix_market.cpp): a finite number too large for R is an
// overflow, an integer (|x| < 2^63, what an integer field holds) must be
// exact, anything else rounds to nearest; infinities and NaN are kept.
template <class R, class Where>
R to_real(double x, const char* what, const char* target, const Where& where, const std::filesystem::path& path) {
  if constexpr (std::is_same_v<R, double>) {
    return x;
  } else {
    if (!std::isfinite(x)) return static_cast<float>(x);
    // Halfway between the largest float and 2^128: from here on, rounding to
    // nearest gives infinity.
    constexpr double overflow_at = 0x1.ffffffp127;
    if (std::fabs(x) >= overflow_at) fail(path, std::string(what) + " " + number(x) + " overflows " + target + where());
    // Below that, the largest float (the conversion itself is only defined within range).
    constexpr float largest = std::numeric_limits<float>::max();
    if (std::fabs(x) > largest) return x < 0 ? -largest : largest;
    const float f = static_cast<float>(x);
    constexpr double two63 = 9223372036854775808.0;
    if (std::fabs(x) < two63 && std::trunc(x) == x && static_cast<double>(f) != x)
      fail(path, std::string("integer ") + what + " " + std::to_string(static_cast<std::int64_t>(x)) +
                     " is not exactly representable in " + target + where());
    return f;
  }
}

template <class To, class From, class Where>
To to_value(From v, bool scale, const char* target, const Where& where, const std::filesystem::path& path) {
  using R = real_of_t<To>;
  if constexpr (is_complex_v<From>) {
    static_assert(is_complex_v<To>, "complex to real is refused before any value is converted");
    return To(to_real<R>(v.real(), scale ? "scale real part" : "real part", target, where, path),
              to_real<R>(v.imag(), scale ? "scale imaginary part" : "imaginary part", target, where, path));
  } else {
    const R re = to_real<R>(static_cast<double>(v), scale ? "scale" : "value", target, where, path);
    if constexpr (is_complex_v<To>) return To(re, R(0));
    else return re;
  }
}

[[noreturn]] void refuse_complex_to_real(ValueType from, ValueType to, const std::filesystem::path& path) {
  fail(path, std::string("holds ") + value_type_name(from) + " values, which cannot be loaded as " + value_type_name(to) +
                 " (the imaginary parts would be lost)");
}

template <class To, class From>
Matrix<To> convert(const Matrix<From>& m, const std::filesystem::path& path) {
  if constexpr (std::is_same_v<To, From>) {
    return m;
  } else if constexpr (is_complex_v<From> && !is_complex_v<To>) {
    refuse_complex_to_real(value_type_of<From>(), value_type_of<To>(), path);
  } else {
    const char* target = value_type_name(value_type_of<To>());
    const To scale = to_value<To>(m.scale(), true, target, [] { return std::string(); }, path);
    const Content<From>& c = m.content();
    const bool t = m.transposed();
    Coo<To> coo{c.shape.rows, c.shape.cols, {}, {}, {}};
    coo.reserve(c.nnz);
    for_each_content_entry(c, [&](index_t r, index_t col, From v) {
      // Where, in the logical matrix op(A), counted from 0.
      const auto where = [&] {
        return " at (row " + std::to_string(t ? col : r) + ", column " + std::to_string(t ? r : col) + "), 0-based";
      };
      coo.push(r, col, to_value<To>(v, false, target, where, path));
    });
    // The file's node size and format; the state is kept apart from the content.
    const bool wide = (c.header().flags & pool_flag_wide) != 0;
    const Matrix<To> built = build_matrix(coo, BuildOptions{c.shape.node_size(), wide});
    return Matrix<To>(built.content_ptr(), t, scale);
  }
}

}  // namespace

HspInfo read_hsp_info(const std::filesystem::path& path) {
  InputFile in(path);
  return info_of(read_raw(in, path), path);
}

template <class V>
Matrix<V> load_hsp(const std::filesystem::path& path) {
  InputFile in(path);
  const RawHeader h = read_raw(in, path);
  const HspInfo info = info_of(h, path);
  if (info.value_type != value_type_of<V>())
    fail(path, std::string("holds ") + value_type_name(info.value_type) + " values, expected " +
                   value_type_name(value_type_of<V>()));
  return read_pool<V>(in, h, info, path);
}

template <class V>
Matrix<V> load_hsp_as(const std::filesystem::path& path) {
  InputFile in(path);
  const RawHeader h = read_raw(in, path);
  const HspInfo info = info_of(h, path);
  // Refused before the pool is read.
  if (is_complex(info.value_type) && !is_complex_v<V>) refuse_complex_to_real(info.value_type, value_type_of<V>(), path);
  switch (info.value_type) {
    case ValueType::f32: return convert<V>(read_pool<float>(in, h, info, path), path);
    case ValueType::f64: return convert<V>(read_pool<double>(in, h, info, path), path);
    case ValueType::c64: return convert<V>(read_pool<std::complex<float>>(in, h, info, path), path);
    case ValueType::c128: break;
  }
  return convert<V>(read_pool<std::complex<double>>(in, h, info, path), path);
}

template <class V>
void save_hsp(const std::filesystem::path& path, const Matrix<V>& m) {
  // A version of a family is written as its own nodes in the builder's layout.
  const std::shared_ptr<const Content<V>> own = m.content().arena ? compacted(m.content()) : nullptr;
  const Content<V>& c = own ? *own : m.content();
  RawHeader h{};  // zero: reserved fields and padding
  std::memcpy(h.magic, magic.data(), magic.size());
  h.version = hsp_version;
  h.header_bytes = hsp_header_bytes;
  h.rows = c.shape.rows;
  h.cols = c.shape.cols;
  h.nnz = c.nnz;
  h.log2_node_size = static_cast<std::uint8_t>(c.shape.log2_node_size);
  h.depth = static_cast<std::uint8_t>(c.shape.depth);
  h.value_type = static_cast<std::uint8_t>(value_type_of<V>());
  h.flags = m.transposed() ? 1 : 0;
  std::tie(h.scale_re, h.scale_im) = split(m.scale());
  if (!std::isfinite(h.scale_re) || !std::isfinite(h.scale_im))
    fail(path, "cannot save a matrix whose scale (" + number(h.scale_re) + ", " + number(h.scale_im) +
                   ") is not finite");
  h.pool_bytes = c.pool.size();
  h.pool_checksum = pool_checksum(c.pool.data(), c.pool.size(), h.value_type, h.version);
  h.header_checksum = header_checksum(h, h.version);
  write_file_atomically(path, [&](std::ostream& out) {
    out.write(reinterpret_cast<const char*>(&h), sizeof(h));
    out.write(reinterpret_cast<const char*>(c.pool.data()), static_cast<std::streamsize>(c.pool.size()));
  });
}

template Matrix<float> load_hsp(const std::filesystem::path&);
template Matrix<double> load_hsp(const std::filesystem::path&);
template Matrix<std::complex<float>> load_hsp(const std::filesystem::path&);
template Matrix<std::complex<double>> load_hsp(const std::filesystem::path&);
template Matrix<float> load_hsp_as(const std::filesystem::path&);
template Matrix<double> load_hsp_as(const std::filesystem::path&);
template Matrix<std::complex<float>> load_hsp_as(const std::filesystem::path&);
template Matrix<std::complex<double>> load_hsp_as(const std::filesystem::path&);
template void save_hsp(const std::filesystem::path&, const Matrix<float>&);
template void save_hsp(const std::filesystem::path&, const Matrix<double>&);
template void save_hsp(const std::filesystem::path&, const Matrix<std::complex<float>>&);
template void save_hsp(const std::filesystem::path&, const Matrix<std::complex<double>>&);

}  // namespace hisparse
