// The kinds. Each walks its matrix in a fixed order (row by row, or block by
// block of independent draws) and draws from streams keyed by that position,
// so the same spec gives the same entries whatever consumes them.
#include <algorithm>
#include <cmath>
#include <memory>

#include "hisparse/formats/matrix_market.hpp"
#include "hisparse/gen/generators.hpp"
#include "random.hpp"

namespace hisparse::gen {

using detail::Rng;
using detail::Stream;
using detail::stream_seed;
using detail::value_from_bits;

struct Generator::State {
  GenSpec spec;
  index_t rows = 0;
  index_t cols = 0;
  std::uint64_t nnz = 0;
  Coo<double> input;  // kron's A
};

namespace {

// Collects entries into fixed chunks and hands each full chunk to the sink.
template <class V>
class Emitter {
 public:
  explicit Emitter(const Sink<V>& sink)
      : sink_(sink),
        row_(std::make_unique_for_overwrite<index_t[]>(capacity)),
        col_(std::make_unique_for_overwrite<index_t[]>(capacity)),
        val_(std::make_unique_for_overwrite<V[]>(capacity)) {}

  void operator()(index_t r, index_t c, V v) {
    row_[used_] = r;
    col_[used_] = c;
    val_[used_] = v;
    if (++used_ == capacity) flush();
  }

  void flush() {
    if (used_ == 0) return;
    sink_(std::span<const index_t>(row_.get(), used_), std::span<const index_t>(col_.get(), used_),
          std::span<const V>(val_.get(), used_));
    emitted_ += used_;
    used_ = 0;
  }

  [[nodiscard]] std::uint64_t emitted() const { return emitted_ + used_; }

 private:
  static constexpr std::size_t capacity = Generator::chunk_entries;
  const Sink<V>& sink_;
  std::unique_ptr<index_t[]> row_, col_;
  std::unique_ptr<V[]> val_;
  std::size_t used_ = 0;
  std::uint64_t emitted_ = 0;
};

template <class V>
V random_value(Rng& rng) {
  return value_from_bits<V>(rng.next());
}

// Streams of independent draws (rmat, uniform) are cut into blocks of this
// many entries, each with its own stream.
constexpr std::uint64_t draw_block = std::uint64_t{1} << 16;

// ---- stencils --------------------------------------------------------------

template <class V>
void laplace2d(index_t n, Emitter<V>& emit) {
  for (index_t i = 0; i < n; ++i)
    for (index_t j = 0; j < n; ++j) {
      const index_t r = i * n + j;
      if (i > 0) emit(r, r - n, V(-1));
      if (j > 0) emit(r, r - 1, V(-1));
      emit(r, r, V(4));
      if (j + 1 < n) emit(r, r + 1, V(-1));
      if (i + 1 < n) emit(r, r + n, V(-1));
    }
}

// The in-grid neighbours of node (x, y, z) in increasing index order, the
// node itself included: 7-point (faces) or 27-point (faces, edges, corners).
struct Neighbours {
  index_t index[27];
  int count = 0;
};

Neighbours neighbours_3d(index_t n, index_t x, index_t y, index_t z, bool full) {
  Neighbours nb;
  for (int dz = -1; dz <= 1; ++dz)
    for (int dy = -1; dy <= 1; ++dy)
      for (int dx = -1; dx <= 1; ++dx) {
        if (!full && std::abs(dx) + std::abs(dy) + std::abs(dz) > 1) continue;
        const auto inside = [n](index_t c, int d) { return !(d < 0 && c == 0) && !(d > 0 && c + 1 == n); };
        if (!inside(x, dx) || !inside(y, dy) || !inside(z, dz)) continue;
        nb.index[nb.count++] = ((z + dz) * n + (y + dy)) * n + (x + dx);
      }
  return nb;
}

template <class V>
void stencil3d(index_t n, bool full, Emitter<V>& emit) {
  const V diag = full ? V(26) : V(6);
  for (index_t z = 0; z < n; ++z)
    for (index_t y = 0; y < n; ++y)
      for (index_t x = 0; x < n; ++x) {
        const index_t r = (z * n + y) * n + x;
        const Neighbours nb = neighbours_3d(n, x, y, z, full);
        for (int k = 0; k < nb.count; ++k) emit(r, nb.index[k], nb.index[k] == r ? diag : V(-1));
      }
}

// Off-diagonal values hash the unordered pair, so the matrix is symmetric;
// a diagonal of 1 + the row's absolute sum makes it positive definite, as a
// stiffness matrix is.
template <class V>
void fem3d(index_t n, std::uint64_t seed, Emitter<V>& emit) {
  const std::uint64_t key = stream_seed(seed, Stream::fem_values, 0);
  index_t col[27 * 3];
  V val[27 * 3];
  for (index_t z = 0; z < n; ++z)
    for (index_t y = 0; y < n; ++y)
      for (index_t x = 0; x < n; ++x) {
        const index_t node = (z * n + y) * n + x;
        const Neighbours nb = neighbours_3d(n, x, y, z, false);
        for (index_t a = 0; a < 3; ++a) {
          const index_t r = 3 * node + a;
          int count = 0, diag = 0;
          V off_sum = 0;
          for (int k = 0; k < nb.count; ++k)
            for (index_t b = 0; b < 3; ++b) {
              const index_t c = 3 * nb.index[k] + b;
              col[count] = c;
              if (c == r) {
                diag = count;
              } else {
                val[count] = value_from_bits<V>(detail::hash(key, std::min(r, c), std::max(r, c)));
                off_sum += std::abs(val[count]);
              }
              ++count;
            }
          val[diag] = V(1) + off_sum;
          for (int k = 0; k < count; ++k) emit(r, col[k], val[k]);
        }
      }
}

// ---- random graphs and patterns ----------------------------------------------

// Graph500's initiator probabilities as 32-bit thresholds: one 64-bit draw
// decides two levels.
constexpr std::uint64_t threshold32(std::uint64_t percent) { return (percent << 32) / 100; }
constexpr std::uint64_t rmat_a = threshold32(57), rmat_ab = threshold32(57 + 19),
                        rmat_abc = threshold32(57 + 19 + 19);

// A bijection of [0, 2^scale): additions, odd multiplications and
// xor-shifts each permute the scale-bit integers.
class VertexPermutation {
 public:
  VertexPermutation(unsigned scale, std::uint64_t seed)
      : mask_(scale >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << scale) - 1), shift_((scale + 1) / 2) {
    Rng rng(stream_seed(seed, Stream::rmat_permute, scale));
    add_ = rng.next();
    mul1_ = rng.next() | 1;
    mul2_ = rng.next() | 1;
  }
  [[nodiscard]] std::uint64_t operator()(std::uint64_t x) const {
    x = (x + add_) & mask_;
    x = (x * mul1_) & mask_;
    x ^= x >> shift_;
    x = (x * mul2_) & mask_;
    x ^= x >> shift_;
    return x;
  }

 private:
  std::uint64_t mask_;
  unsigned shift_;
  std::uint64_t add_ = 0, mul1_ = 1, mul2_ = 1;
};

template <class V>
void rmat(const GenSpec& s, Emitter<V>& emit) {
  const auto scale = static_cast<unsigned>(*s.scale);
  const std::uint64_t edges = *s.edge_factor << scale;
  const VertexPermutation perm(scale, s.seed);
  for (std::uint64_t block = 0; block * draw_block < edges; ++block) {
    Rng rng(stream_seed(s.seed, Stream::rmat, block));
    const std::uint64_t end = std::min(edges, (block + 1) * draw_block);
    for (std::uint64_t e = block * draw_block; e < end; ++e) {
      index_t r = 0, c = 0;
      std::uint64_t bits = 0;
      for (unsigned level = 0; level < scale; ++level) {
        if (level % 2 == 0) bits = rng.next();
        const std::uint64_t u = (level % 2 == 0) ? (bits & 0xffffffffu) : (bits >> 32);
        const index_t down = u >= rmat_ab;                        // quadrants c, d
        const index_t right = (u >= rmat_a && u < rmat_ab) || u >= rmat_abc;  // b, d
        r = (r << 1) | down;
        c = (c << 1) | right;
      }
      if (*s.permute != 0) {
        r = perm(r);
        c = perm(c);
      }
      emit(r, c, random_value<V>(rng));
    }
  }
}

template <class V>
void uniform(const GenSpec& s, Emitter<V>& emit) {
  const std::uint64_t rows = *s.n, cols = *s.cols, total = rows * *s.per_row;
  for (std::uint64_t block = 0; block * draw_block < total; ++block) {
    Rng rng(stream_seed(s.seed, Stream::uniform, block));
    const std::uint64_t end = std::min(total, (block + 1) * draw_block);
    for (std::uint64_t e = block * draw_block; e < end; ++e) {
      const index_t r = rng.below(rows);
      const index_t c = rng.below(cols);
      emit(r, c, random_value<V>(rng));
    }
  }
}

template <class V>
void banded(const GenSpec& s, Emitter<V>& emit) {
  const index_t n = *s.n, w = *s.bandwidth;
  for (index_t r = 0; r < n; ++r) {
    Rng rng(stream_seed(s.seed, Stream::values, r));
    const index_t last = std::min(n - 1, r + w);
    for (index_t c = r > w ? r - w : 0; c <= last; ++c) emit(r, c, random_value<V>(rng));
  }
}

template <class V>
void dense(const GenSpec& s, Emitter<V>& emit) {
  const index_t n = *s.n;
  for (index_t r = 0; r < n; ++r) {
    Rng rng(stream_seed(s.seed, Stream::values, r));
    for (index_t c = 0; c < n; ++c) emit(r, c, random_value<V>(rng));
  }
}

// Floyd's sampling of per_row distinct columns, kept sorted so that the
// membership test is a binary search and the row comes out in order.
template <class V>
void tall(const GenSpec& s, Emitter<V>& emit) {
  const index_t rows = *s.n, cols = *s.cols, k = *s.per_row;
  std::vector<index_t> picked;
  picked.reserve(k);
  for (index_t r = 0; r < rows; ++r) {
    Rng rng(stream_seed(s.seed, Stream::tall, r));
    picked.clear();
    for (index_t j = cols - k; j < cols; ++j) {
      const index_t t = rng.below(j + 1);
      auto at = std::lower_bound(picked.begin(), picked.end(), t);
      if (at != picked.end() && *at == t) picked.insert(std::upper_bound(picked.begin(), picked.end(), j), j);
      else picked.insert(at, t);
    }
    for (const index_t c : picked) emit(r, c, random_value<V>(rng));
  }
}

std::uint64_t cluster_entries(double fill, index_t height, index_t side) {
  return static_cast<std::uint64_t>(std::llround(fill * static_cast<double>(height * side)));
}

// One cluster per `cluster` rows; within it, selection sampling (Knuth's
// algorithm S) picks exactly round(fill * area) cells in row-major order.
template <class V>
void special(const GenSpec& s, Emitter<V>& emit) {
  const index_t n = *s.n, side = *s.cluster, spread = *s.spread;
  const double fill = *s.fill;
  for (index_t k = 0; k * side < n; ++k) {
    const index_t r0 = k * side;
    const index_t height = std::min(side, n - r0);
    Rng offset_rng(stream_seed(s.seed, Stream::special_offset, k));
    // Shifted by up to `spread` either way, clamped to keep the cluster inside.
    const index_t shift = offset_rng.below(2 * spread + 1);
    const index_t c0 = std::min(n - side, r0 + shift > spread ? r0 + shift - spread : 0);
    const std::uint64_t area = height * side;
    std::uint64_t wanted = cluster_entries(fill, height, side);
    Rng rng(stream_seed(s.seed, Stream::special_fill, k));
    for (std::uint64_t t = 0; t < area && wanted > 0; ++t) {
      if (rng.below(area - t) < wanted) {
        emit(r0 + t / side, c0 + t % side, random_value<V>(rng));
        --wanted;
      }
    }
  }
}

// circuit: `lines` dense rows and columns at evenly spread indices. A dense
// line of n cells is cut into m = round(fill * n) strata, and one random cell
// of each is present: exactly m cells, so the count is known in advance, and
// whether a row belongs to a dense column is one hash, so rows stream in order.
class CircuitLines {
 public:
  explicit CircuitLines(const GenSpec& s)
      : n_(*s.n),
        band_(*s.bandwidth),
        m_(*s.lines == 0 ? 0 : static_cast<std::uint64_t>(std::llround(*s.fill * static_cast<double>(n_)))),
        seed_(stream_seed(s.seed, Stream::circuit_lines, 0)) {
    for (std::uint64_t i = 0; i < *s.lines; ++i)
      position_.push_back(static_cast<index_t>((static_cast<unsigned __int128>(2 * i + 1) * n_) / (2 * *s.lines)));
  }

  [[nodiscard]] const std::vector<index_t>& positions() const { return position_; }
  [[nodiscard]] std::uint64_t strata() const { return m_; }
  [[nodiscard]] index_t band() const { return band_; }

  [[nodiscard]] index_t stratum_start(std::uint64_t b) const {
    return static_cast<index_t>((static_cast<unsigned __int128>(b) * n_) / m_);
  }
  [[nodiscard]] std::uint64_t stratum_of(index_t x) const {
    return static_cast<std::uint64_t>(((static_cast<unsigned __int128>(x) + 1) * m_ - 1) / n_);
  }
  // The cell that line `line` holds in stratum b. Rows are lines
  // [0, lines), columns [lines, 2 lines).
  [[nodiscard]] index_t pick(std::uint64_t line, std::uint64_t b) const {
    const index_t start = stratum_start(b);
    return start + detail::below(detail::hash(seed_, line, b), stratum_start(b + 1) - start);
  }
  [[nodiscard]] bool in_band(index_t r, index_t c) const { return (r > c ? r - c : c - r) <= band_; }
  [[nodiscard]] bool is_line_row(index_t r) const {
    return std::binary_search(position_.begin(), position_.end(), r);
  }
  // Whether dense column j holds row r (a dense row owns its whole row).
  [[nodiscard]] bool column_holds(std::size_t j, index_t r) const {
    return !in_band(r, position_[j]) && !is_line_row(r) && pick(position_.size() + j, stratum_of(r)) == r;
  }

  [[nodiscard]] std::uint64_t count() const {
    const std::uint64_t w = std::min<std::uint64_t>(band_, n_ - 1);
    std::uint64_t total = n_ * (2 * w + 1) - w * (w + 1);
    if (m_ == 0) return total;
    for (std::size_t i = 0; i < position_.size(); ++i) {
      const index_t p = position_[i];
      std::uint64_t in_row = m_;
      const index_t lo = p > band_ ? p - band_ : 0, hi = std::min(n_ - 1, p + band_);
      for (std::uint64_t b = stratum_of(lo); b <= stratum_of(hi); ++b)
        if (in_band(p, pick(i, b))) --in_row;
      total += in_row;
    }
    // A dense column loses the rows it would share with the band or a dense
    // row: few candidates, each checked directly.
    for (std::size_t j = 0; j < position_.size(); ++j) {
      std::vector<index_t> excluded(position_.begin(), position_.end());
      const index_t p = position_[j];
      for (index_t r = p > band_ ? p - band_ : 0; r <= std::min(n_ - 1, p + band_); ++r) excluded.push_back(r);
      std::sort(excluded.begin(), excluded.end());
      excluded.erase(std::unique(excluded.begin(), excluded.end()), excluded.end());
      std::uint64_t in_col = m_;
      for (const index_t r : excluded)
        if (pick(position_.size() + j, stratum_of(r)) == r) --in_col;
      total += in_col;
    }
    return total;
  }

 private:
  index_t n_, band_;
  std::uint64_t m_;
  std::uint64_t seed_;
  std::vector<index_t> position_;
};

template <class V>
void circuit(const GenSpec& s, Emitter<V>& emit) {
  const CircuitLines lines(s);
  const index_t n = *s.n, w = lines.band();
  const auto& pos = lines.positions();
  std::size_t next_line = 0;
  for (index_t r = 0; r < n; ++r) {
    Rng rng(stream_seed(s.seed, Stream::values, r));
    const index_t lo = r > w ? r - w : 0, hi = std::min(n - 1, r + w);
    const auto band = [&] {
      for (index_t c = lo; c <= hi; ++c) emit(r, c, random_value<V>(rng));
    };
    while (next_line < pos.size() && pos[next_line] < r) ++next_line;
    if (next_line < pos.size() && pos[next_line] == r && lines.strata() > 0) {
      // A dense row, in column order: cells left of the band, band, right.
      const std::uint64_t m = lines.strata();
      std::uint64_t b = 0;
      for (; b < m; ++b) {
        const index_t c = lines.pick(next_line, b);
        if (c >= lo) break;
        emit(r, c, random_value<V>(rng));
      }
      band();
      for (; b < m; ++b) {
        const index_t c = lines.pick(next_line, b);
        if (c > hi) emit(r, c, random_value<V>(rng));
      }
    } else {
      std::size_t j = 0;
      for (; j < pos.size() && pos[j] < lo; ++j)
        if (lines.strata() > 0 && lines.column_holds(j, r)) emit(r, pos[j], random_value<V>(rng));
      band();
      for (; j < pos.size(); ++j)
        if (pos[j] > hi && lines.strata() > 0 && lines.column_holds(j, r)) emit(r, pos[j], random_value<V>(rng));
    }
  }
}

template <class V>
void kron(const Coo<double>& a, Emitter<V>& emit) {
  for (std::size_t e1 = 0; e1 < a.nnz(); ++e1) {
    const index_t r1 = a.row[e1] * a.rows, c1 = a.col[e1] * a.cols;
    const double v1 = a.val[e1];
    for (std::size_t e2 = 0; e2 < a.nnz(); ++e2)
      emit(r1 + a.row[e2], c1 + a.col[e2], static_cast<V>(v1 * a.val[e2]));
  }
}

std::uint64_t cube(std::uint64_t n) { return n * n * n; }

}  // namespace

Generator::Generator(const GenSpec& spec) : state_(std::make_unique<State>()) {
  State& st = *state_;
  st.spec = resolve(spec);
  const GenSpec& s = st.spec;
  switch (s.kind) {
    case Kind::laplace2d:
      st.rows = st.cols = *s.n * *s.n;
      st.nnz = 5 * *s.n * *s.n - 4 * *s.n;
      break;
    case Kind::stencil3d7:
      st.rows = st.cols = cube(*s.n);
      st.nnz = 7 * cube(*s.n) - 6 * *s.n * *s.n;
      break;
    case Kind::stencil3d27:
      st.rows = st.cols = cube(*s.n);
      st.nnz = cube(3 * *s.n - 2);
      break;
    case Kind::fem3d:
      st.rows = st.cols = 3 * cube(*s.n);
      st.nnz = 9 * (7 * cube(*s.n) - 6 * *s.n * *s.n);
      break;
    case Kind::rmat:
      st.rows = st.cols = index_t{1} << *s.scale;
      st.nnz = *s.edge_factor << *s.scale;
      break;
    case Kind::circuit:
      st.rows = st.cols = *s.n;
      st.nnz = CircuitLines(s).count();
      break;
    case Kind::uniform:
      st.rows = *s.n;
      st.cols = *s.cols;
      st.nnz = *s.n * *s.per_row;
      break;
    case Kind::banded:
      st.rows = st.cols = *s.n;
      st.nnz = *s.n * (2 * *s.bandwidth + 1) - *s.bandwidth * (*s.bandwidth + 1);
      break;
    case Kind::dense:
      st.rows = st.cols = *s.n;
      st.nnz = *s.n * *s.n;
      break;
    case Kind::tall:
      st.rows = *s.n;
      st.cols = *s.cols;
      st.nnz = *s.n * *s.per_row;
      break;
    case Kind::special: {
      st.rows = st.cols = *s.n;
      const index_t side = *s.cluster, full = *s.n / side, rest = *s.n % side;
      st.nnz = full * cluster_entries(*s.fill, side, side) + (rest ? cluster_entries(*s.fill, rest, side) : 0);
      break;
    }
    case Kind::kron: {
      st.input = read_matrix_market<double>(*s.input);
      const Coo<double>& a = st.input;
      const auto square = [&](std::uint64_t x, const char* what, std::uint64_t limit) {
        if (x != 0 && x > limit / x)
          throw Error(*s.input + ": kron: " + what + " " + std::to_string(x) + "^2 is over the limit of " +
                      std::to_string(limit));
        return x * x;
      };
      st.rows = square(a.rows, "rows", mm_max_dimension);
      st.cols = square(a.cols, "columns", mm_max_dimension);
      st.nnz = square(a.nnz(), "entries", mm_max_entries);
      break;
    }
  }
}

Generator::~Generator() = default;
Generator::Generator(Generator&&) noexcept = default;
Generator& Generator::operator=(Generator&&) noexcept = default;

const GenSpec& Generator::spec() const { return state_->spec; }
index_t Generator::rows() const { return state_->rows; }
index_t Generator::cols() const { return state_->cols; }
std::uint64_t Generator::nnz() const { return state_->nnz; }

template <class V>
void Generator::generate(const Sink<V>& sink) const {
  const GenSpec& s = state_->spec;
  Emitter<V> emit(sink);
  switch (s.kind) {
    case Kind::laplace2d: laplace2d(*s.n, emit); break;
    case Kind::stencil3d7: stencil3d(*s.n, false, emit); break;
    case Kind::stencil3d27: stencil3d(*s.n, true, emit); break;
    case Kind::fem3d: fem3d(*s.n, s.seed, emit); break;
    case Kind::rmat: rmat(s, emit); break;
    case Kind::circuit: circuit(s, emit); break;
    case Kind::uniform: uniform(s, emit); break;
    case Kind::banded: banded(s, emit); break;
    case Kind::dense: dense(s, emit); break;
    case Kind::tall: tall(s, emit); break;
    case Kind::special: special(s, emit); break;
    case Kind::kron: kron(state_->input, emit); break;
  }
  emit.flush();
  // nnz() is a promise made before generation (a file header depends on it).
  if (emit.emitted() != state_->nnz)
    throw Error("hisparse::gen: " + describe(s) + " produced " + std::to_string(emit.emitted()) +
                " entries but its count says " + std::to_string(state_->nnz) + " (a generator bug)");
}

template <class V>
Coo<V> Generator::generate_coo() const {
  Coo<V> m;
  m.rows = rows();
  m.cols = cols();
  m.reserve(nnz());
  generate<V>([&](std::span<const index_t> r, std::span<const index_t> c, std::span<const V> v) {
    m.row.insert(m.row.end(), r.begin(), r.end());
    m.col.insert(m.col.end(), c.begin(), c.end());
    m.val.insert(m.val.end(), v.begin(), v.end());
  });
  return m;
}

std::uint64_t expected_nnz(const GenSpec& spec) { return Generator(spec).nnz(); }

template void Generator::generate<float>(const Sink<float>&) const;
template void Generator::generate<double>(const Sink<double>&) const;
template Coo<float> Generator::generate_coo<float>() const;
template Coo<double> Generator::generate_coo<double>() const;

}  // namespace hisparse::gen
