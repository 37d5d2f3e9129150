// Writes the fuzz suite's seed corpus: SEEDS/<harness>/... from the shared
// SuiteSparse matrices cut small (the first entries of each file, the size
// line fixed), the same matrices as .hsp files in every value type, node
// size and format, and the bad inputs the host tests and issue 19 use
// (docs/reliability.md). Generated, not committed, so the .hsp seeds always
// have the current file version.
//   fuzz-seeds MATRICES_DIR SEEDS_DIR
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "hisparse/formats/builder.hpp"
#include "hisparse/formats/error.hpp"
#include "hisparse/formats/hsp_file.hpp"
#include "hisparse/formats/matrix_market.hpp"

namespace fs = std::filesystem;
using namespace hisparse;

namespace {

void write(const fs::path& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << bytes;
  if (!f) throw std::runtime_error("cannot write " + p.string());
}

// The banner, the first `keep` entry lines, and a size line that says so.
std::string cut(const fs::path& mtx, std::size_t keep) {
  std::ifstream in(mtx);
  std::string line, banner, size_line;
  std::vector<std::string> entries;
  while (std::getline(in, line)) {
    if (banner.empty()) {
      banner = line;
      continue;
    }
    if (!line.empty() && line[0] == '%') continue;
    if (size_line.empty()) {
      size_line = line;
      continue;
    }
    entries.push_back(line);
    if (entries.size() == keep) break;
  }
  std::istringstream s(size_line);
  std::string rows, cols;
  s >> rows >> cols;
  std::string out = banner + "\n% cut for the fuzz corpus\n" + rows + " " + cols + " " + std::to_string(entries.size()) + "\n";
  for (const auto& e : entries) out += e + "\n";
  return out;
}

// The bad (and the odd but valid) Matrix Market inputs of the tests.
const std::vector<std::pair<std::string, std::string>> matrix_cases = {
    {"above_diagonal_symmetric", "%%MatrixMarket matrix coordinate real symmetric\n3 3 3\n1 1 1\n2 1 2\n1 2 2\n"},
    {"skew_diagonal", "%%MatrixMarket matrix coordinate real skew-symmetric\n3 3 2\n2 2 1\n3 1 4\n"},
    {"hermitian", "%%MatrixMarket matrix coordinate complex hermitian\n3 3 3\n1 1 2 0\n2 1 1 -1\n3 2 0.5 0.25\n"},
    {"declares_1e9", "%%MatrixMarket matrix coordinate real general\n1000000000 1000000000 1000000000\n1 1 1\n"},
    {"huge_dimensions", "%%MatrixMarket matrix coordinate real general\n281474976710656 281474976710656 2\n1 1 1\n281474976710656 281474976710656 2\n"},
    {"long_line", "%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1 " + std::string(20000, '1') + "\n"},
    {"index_zero", "%%MatrixMarket matrix coordinate real general\n2 2 1\n0 1 1\n"},
    {"index_past_end", "%%MatrixMarket matrix coordinate real general\n2 2 1\n3 1 1\n"},
    {"negative_index", "%%MatrixMarket matrix coordinate real general\n2 2 1\n-1 1 1\n"},
    {"overflow_f32", "%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 1e39\n2 2 1e400\n"},
    {"inexact_integer", "%%MatrixMarket matrix coordinate integer general\n2 2 2\n1 1 16777217\n2 2 9223372036854775807\n"},
    {"special_values", "%%MatrixMarket matrix coordinate real general\n2 3 5\n1 1 inf\n1 2 -nan\n1 3 +1.5\n2 1 -0\n2 2 4.9e-324\n"},
    {"escape_sequence", "%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1 \x1b[31mred\x07\n"},
    {"crlf", "%%MatrixMarket matrix coordinate real general\r\n2 2 2\r\n1 1 1\r\n2 2 2\r\n"},
    {"duplicates", "%%MatrixMarket matrix coordinate real general\n2 2 3\n1 1 1\n1 1 2\n2 2 -0\n"},
    {"pattern_with_values", "%%MatrixMarket matrix coordinate pattern general\n2 2 1\n1 1 5\n"},
    {"missing_value", "%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1\n"},
    {"array_general", "%%MatrixMarket matrix array real general\n2 3\n1\n2\n3\n4\n5\n6\n"},
    {"array_symmetric", "%%MatrixMarket matrix array real symmetric\n3 3\n1\n2\n3\n4\n5\n6\n"},
    {"array_skew", "%%MatrixMarket matrix array integer skew-symmetric\n3 3\n1\n2\n3\n"},
    {"too_few_entries", "%%MatrixMarket matrix coordinate real general\n3 3 4\n1 1 1\n"},
    {"too_many_entries", "%%MatrixMarket matrix coordinate real general\n3 3 1\n1 1 1\n2 2 2\n"},
    {"bad_banner", "%%MatrixMarket tensor coordinate real general\n2 2 1\n1 1 1\n"},
    {"banner_only", "%%MatrixMarket matrix coordinate real general\n"},
    {"empty", ""},
    {"empty_matrix", "%%MatrixMarket matrix coordinate real general\n0 0 0\n"},
};

const std::vector<std::pair<std::string, std::string>> vector_cases = {
    {"array", "%%MatrixMarket matrix array real general\n4 1\n1\n-2.5\n0\n1e-300\n"},
    {"coordinate", "%%MatrixMarket matrix coordinate real general\n5 1 3\n1 1 1\n3 1 2\n3 1 4\n"},
    {"complex", "%%MatrixMarket matrix array complex general\n2 1\n1 2\n3 -4\n"},
    {"integer", "%%MatrixMarket matrix coordinate integer general\n3 1 1\n2 1 7\n"},
    {"declares_1e9", "%%MatrixMarket matrix coordinate real general\n1000000000 1 1\n1 1 1\n"},
    {"array_declares_1e9", "%%MatrixMarket matrix array real general\n1000000000 1\n1\n"},
    {"two_columns", "%%MatrixMarket matrix array real general\n2 2\n1\n2\n3\n4\n"},
    {"overflow", "%%MatrixMarket matrix array real general\n2 1\n1e39\n1e400\n"},
    {"short", "%%MatrixMarket matrix array real general\n3 1\n1\n"},
};

template <class V>
void hsp_seeds(const fs::path& mtx, const fs::path& dir, const std::string& stem, int& k) {
  const Coo<V> coo = read_matrix_market<V>(mtx);
  for (std::uint32_t log2 = 1; log2 <= 8; ++log2) {
    BuildOptions o;
    o.node_size = 1u << log2;
    o.wide_nodes = (log2 + k) % 2 == 0;
    const Matrix<V> m = build_matrix(coo, o);
    const fs::path p = dir / (stem + "_d" + std::to_string(o.node_size) + (o.wide_nodes ? "_wide" : "") + ".hsp");
    save_hsp(p, log2 == 3 ? m.with_state(true, V(2)) : m);
    if (log2 == 4) {
      // The same file as version 1 (the harness reseals it with v1's rules).
      std::ifstream in(p, std::ios::binary);
      std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      const std::uint32_t v1 = 1;
      std::memcpy(s.data() + 8, &v1, 4);
      write(dir / (stem + "_v1.hsp"), s);
    }
  }
  ++k;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: fuzz-seeds MATRICES_DIR SEEDS_DIR\n");
    return 2;
  }
  const fs::path matrices = argv[1], seeds = argv[2];
  for (const char* h : {"matrix_market", "mm_vector", "hsp", "roundtrip"}) fs::create_directories(seeds / h);
  try {
    int k = 0;
    if (fs::is_directory(matrices)) {
      std::vector<fs::path> files;
      for (const auto& e : fs::directory_iterator(matrices)) {
        if (e.path().extension() == ".mtx") files.push_back(e.path());
      }
      std::sort(files.begin(), files.end());
      for (const fs::path& f : files) {
        const std::string stem = f.stem().string();
        const std::string small = cut(f, 48);
        write(seeds / "matrix_market" / (stem + ".mtx"), small);
        write(seeds / "mm_vector" / (stem + ".mtx"), small);  // mostly refused: not one column
        const fs::path tmp = seeds / "hsp" / (stem + ".cut.mtx");
        write(tmp, small);
        try {
          if (read_matrix_market_header(tmp).field == MmField::complex) {
            hsp_seeds<std::complex<double>>(tmp, seeds / "hsp", stem, k);
          } else if (k % 2 == 0) {
            hsp_seeds<double>(tmp, seeds / "hsp", stem, k);
          } else {
            hsp_seeds<float>(tmp, seeds / "hsp", stem, k);
          }
        } catch (const Error&) {
          // block_2000 counts from 0: a bad file, kept as a Matrix Market seed only.
        }
        fs::remove(tmp);
      }
    } else {
      std::fprintf(stderr, "note: %s not found; seeds from the test cases only\n", matrices.c_str());
    }
    for (const auto& [name, text] : matrix_cases) write(seeds / "matrix_market" / (name + ".mtx"), text);
    for (const auto& [name, text] : vector_cases) write(seeds / "mm_vector" / (name + ".mtx"), text);
    std::mt19937_64 rng(2017);
    for (int i = 0; i < 32; ++i) {
      std::string bytes(64 + 64 * i, '\0');
      for (auto& b : bytes) b = static_cast<char>(rng());
      write(seeds / "roundtrip" / ("random_" + std::to_string(i)), bytes);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz-seeds: %s\n", e.what());
    return 1;
  }
  return 0;
}
