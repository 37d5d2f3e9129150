#include "hisparse/formats/hsp_file.hpp"

#include <xxhash.h>

#include <array>
#include <bit>
#include <complex>
#include <cstring>
#include <fstream>

#include "hisparse/formats/atomic_file.hpp"
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
  std::uint64_t header_checksum;  // XXH3-64 of the 80 bytes before it
  std::uint64_t reserved1;
};
static_assert(sizeof(RawHeader) == hsp_header_bytes);
constexpr std::size_t checked_prefix = offsetof(RawHeader, header_checksum);

template <class V>
std::pair<double, double> split(V s) {
  if constexpr (is_complex_v<V>) return {s.real(), s.imag()};
  else return {static_cast<double>(s), 0.0};
}
template <class V>
V join(double re, double im) {
  if constexpr (is_complex_v<V>) return V(static_cast<typename V::value_type>(re), static_cast<typename V::value_type>(im));
  else return static_cast<V>(re);
}

[[noreturn]] void fail(const std::filesystem::path& p, const std::string& what) {
  throw Error(p.string() + ": " + what);
}

RawHeader read_raw(std::ifstream& in, const std::filesystem::path& path) {
  RawHeader h{};
  in.read(reinterpret_cast<char*>(&h), sizeof(h));
  if (in.gcount() != static_cast<std::streamsize>(sizeof(h)))
    fail(path, "truncated: " + std::to_string(in.gcount()) + " bytes, shorter than the 96-byte header");
  if (std::memcmp(h.magic, magic.data(), magic.size()) != 0) fail(path, "not a HiSparse .hsp file (bad magic)");
  if (h.version != hsp_version)
    fail(path, "unsupported .hsp version " + std::to_string(h.version) + " (this build reads version " +
                   std::to_string(hsp_version) + ")");
  if (XXH3_64bits(&h, checked_prefix) != h.header_checksum) fail(path, "header checksum mismatch (corrupt header)");
  if (h.header_bytes != hsp_header_bytes) fail(path, "header size " + std::to_string(h.header_bytes) + " is not 96");
  return h;
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
  if (h.pool_bytes < 16 || h.pool_bytes % 16 || h.pool_bytes > max_pool_bytes + 16)
    fail(path, "pool size " + std::to_string(h.pool_bytes) + " is not a multiple of 16 in [16, 4 GiB]");
  info.nnz = h.nnz;
  info.value_type = static_cast<ValueType>(h.value_type);
  info.transposed = h.flags & 1u;
  info.scale_re = h.scale_re;
  info.scale_im = h.scale_im;
  info.pool_bytes = h.pool_bytes;
  return info;
}

}  // namespace

HspInfo read_hsp_info(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, "cannot open for reading");
  return info_of(read_raw(in, path), path);
}

template <class V>
Matrix<V> load_hsp(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, "cannot open for reading");
  const RawHeader h = read_raw(in, path);
  const HspInfo info = info_of(h, path);
  if (info.value_type != value_type_of<V>())
    fail(path, std::string("holds ") + value_type_name(info.value_type) + " values, expected " +
                   value_type_name(value_type_of<V>()));
  std::error_code ec;
  const auto file_size = std::filesystem::file_size(path, ec);
  if (ec) fail(path, "cannot stat: " + ec.message());
  if (file_size < hsp_header_bytes + info.pool_bytes)
    fail(path, "truncated: the header announces a pool of " + std::to_string(info.pool_bytes) + " bytes, the file holds " +
                   std::to_string(file_size - hsp_header_bytes));
  if (file_size > hsp_header_bytes + info.pool_bytes)
    fail(path, "trailing bytes after the pool (" + std::to_string(file_size - hsp_header_bytes - info.pool_bytes) + ")");

  auto c = std::make_shared<Content<V>>();
  c->shape = info.shape;
  c->nnz = info.nnz;
  c->pool = AlignedBuffer(info.pool_bytes);
  in.read(reinterpret_cast<char*>(c->pool.data()), static_cast<std::streamsize>(info.pool_bytes));
  if (in.gcount() != static_cast<std::streamsize>(info.pool_bytes)) fail(path, "truncated pool");
  if (XXH3_64bits(c->pool.data(), info.pool_bytes) != h.pool_checksum) fail(path, "pool checksum mismatch (corrupt data)");
  try {
    validate(*c);
  } catch (const Error& e) {
    fail(path, e.what());
  }
  return Matrix<V>(std::move(c), info.transposed, join<V>(info.scale_re, info.scale_im));
}

template <class V>
void save_hsp(const std::filesystem::path& path, const Matrix<V>& m) {
  const Content<V>& c = m.content();
  RawHeader h{};
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
  h.pool_bytes = c.pool.size();
  h.pool_checksum = XXH3_64bits(c.pool.data(), c.pool.size());
  h.header_checksum = XXH3_64bits(&h, checked_prefix);
  write_file_atomically(path, [&](std::ostream& out) {
    out.write(reinterpret_cast<const char*>(&h), sizeof(h));
    out.write(reinterpret_cast<const char*>(c.pool.data()), static_cast<std::streamsize>(c.pool.size()));
  });
}

template Matrix<float> load_hsp(const std::filesystem::path&);
template Matrix<double> load_hsp(const std::filesystem::path&);
template Matrix<std::complex<float>> load_hsp(const std::filesystem::path&);
template Matrix<std::complex<double>> load_hsp(const std::filesystem::path&);
template void save_hsp(const std::filesystem::path&, const Matrix<float>&);
template void save_hsp(const std::filesystem::path&, const Matrix<double>&);
template void save_hsp(const std::filesystem::path&, const Matrix<std::complex<float>>&);
template void save_hsp(const std::filesystem::path&, const Matrix<std::complex<double>>&);

}  // namespace hisparse
