#pragma once
// The round-trip property (issue 18): any matrix the builder accepts comes
// back unchanged through .hsp (pool, shape, transpose flag and scale, byte
// for byte) and through Matrix Market text (the same pool when rebuilt).
// Driven by libFuzzer (fuzz_roundtrip.cpp) and by a seeded generator in the
// host suite (test_roundtrip_property.cpp).
//
// Values are any bit pattern but NaN payloads: Matrix Market text carries a
// NaN's sign, not its payload (docs/reliability.md), so a generated NaN is
// the quiet one, with either sign.
#include <cmath>
#include <complex>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>

#include "byte_reader.hpp"
#include "canonical.hpp"
#include "hisparse/formats/hsp_file.hpp"
#include "hisparse/formats/matrix_market.hpp"

namespace hisparse::fuzz {

template <class R>
R take_real(ByteReader& in) {
  switch (in.in_range(0, 7)) {
    case 0: return R(0) * (in.flag() ? -1 : 1);  // +0 and -0
    case 1: return std::copysign(std::numeric_limits<R>::quiet_NaN(), in.flag() ? R(-1) : R(1));
    case 2: return std::numeric_limits<R>::infinity() * (in.flag() ? -1 : 1);
    case 3: return std::numeric_limits<R>::denorm_min() * static_cast<R>(in.in_range(1, 1000));
    case 4: return static_cast<R>(static_cast<std::int64_t>(in.take<std::uint64_t>()));  // large integers
    case 5: return static_cast<R>(static_cast<std::int16_t>(in.take<std::uint16_t>())) / R(8);  // exact sums
    default: {
      R r = in.take<R>();  // any bit pattern
      if (std::isnan(r)) r = std::copysign(std::numeric_limits<R>::quiet_NaN(), r);
      return r;
    }
  }
}

template <class V>
V take_value(ByteReader& in) {
  if constexpr (is_complex_v<V>) {
    using R = real_of_t<V>;
    const R re = take_real<R>(in);
    return V(re, take_real<R>(in));
  } else {
    return take_real<V>(in);
  }
}

// Bitwise: -0 differs from +0 and NaN equals itself.
template <class V>
bool same_bits(const V& a, const V& b) {
  return std::memcmp(&a, &b, sizeof(V)) == 0;
}

template <class V>
void require_same_pool(const Matrix<V>& a, const Matrix<V>& b, const std::string& what) {
  require(a.content().shape == b.content().shape && a.content().nnz == b.content().nnz,
          what + ": shape or entry count changed");
  require(a.pool_bytes() == b.pool_bytes() &&
              std::memcmp(a.content().pool.data(), b.content().pool.data(), a.pool_bytes()) == 0,
          what + ": the pool changed (" + std::to_string(a.pool_bytes()) + " -> " +
              std::to_string(b.pool_bytes()) + " bytes)");
}

template <class V>
void check_roundtrip_as(ByteReader& in, const std::filesystem::path& dir) {
  Coo<V> coo;
  // Tiny, medium and huge dimensions (a huge one makes deep trees).
  const auto dimension = [&in]() -> index_t {
    switch (in.in_range(0, 2)) {
      case 0: return in.in_range(0, 40);
      case 1: return in.in_range(1, 1u << 16);
      default: return in.in_range(1, index_t{1} << 40);
    }
  };
  coo.rows = dimension();
  coo.cols = dimension();
  const std::uint64_t count = coo.rows == 0 || coo.cols == 0 ? 0 : in.in_range(0, 600);
  index_t r = 0, c = 0;
  for (std::uint64_t k = 0; k < count; ++k) {
    // Near the last entry (dense blocks, duplicates) or anywhere (scattered).
    if (in.flag()) {
      r = std::min(coo.rows - 1, r + in.in_range(0, 3));
      c = (c + in.in_range(0, 5)) % coo.cols;
    } else {
      r = in.in_range(0, coo.rows - 1);
      c = in.in_range(0, coo.cols - 1);
    }
    coo.push(r, c, take_value<V>(in));
  }
  BuildOptions options;
  options.node_size = 2u << in.in_range(0, 7);
  options.wide_nodes = in.flag();
  Matrix<V> m;
  try {
    m = build_matrix(coo, options);
  } catch (const Error&) {
    return;  // refused: outside the property (what the builder accepts)
  }
  require_valid(m, "built");
  require_canonical(m, "built");

  // .hsp keeps everything, the state included.
  const V scale = [&] {
    V s = take_value<V>(in);
    if constexpr (is_complex_v<V>) {
      return std::isfinite(s.real()) && std::isfinite(s.imag()) ? s : V(2);
    } else {
      return std::isfinite(s) ? s : V(2);
    }
  }();
  const Matrix<V> state = m.with_state(in.flag(), scale);
  const std::filesystem::path hsp = dir / "roundtrip.hsp";
  save_hsp(hsp, state);
  const Matrix<V> loaded = load_hsp<V>(hsp);
  require_same_pool(m, loaded, ".hsp");
  require(loaded.transposed() == state.transposed() && same_bits(loaded.scale(), state.scale()),
          ".hsp: the transpose flag or the scale changed");

  // Matrix Market: the stored entries as text, read and rebuilt.
  const std::filesystem::path mtx = dir / "roundtrip.mtx";
  write_matrix_market(mtx, to_coo(m));
  Matrix<V> reread;
  try {
    reread = build_matrix(read_matrix_market<V>(mtx), options);
  } catch (const Error& e) {
    throw PropertyViolation(std::string("Matrix Market: the written file does not read back: ") + e.what());
  }
  require_same_pool(m, reread, "Matrix Market");
}

// One input: its first byte picks the value type.
inline void check_roundtrip(std::span<const std::uint8_t> bytes, const std::filesystem::path& dir) {
  ByteReader in(bytes);
  switch (in.in_range(0, 3)) {
    case 0: check_roundtrip_as<float>(in, dir); break;
    case 1: check_roundtrip_as<double>(in, dir); break;
    case 2: check_roundtrip_as<std::complex<float>>(in, dir); break;
    default: check_roundtrip_as<std::complex<double>>(in, dir); break;
  }
}

}  // namespace hisparse::fuzz
