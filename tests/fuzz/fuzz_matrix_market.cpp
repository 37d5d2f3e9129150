// libFuzzer harness: the Matrix Market matrix reader. Any input either reads
// or is refused with hisparse::Error (anything else escaping is a crash);
// what it reads is consistent with its header and builds a valid matrix.
#include <cstddef>
#include <cstdint>

#include "canonical.hpp"
#include "hisparse/formats/matrix_market.hpp"
#include "memory_file.hpp"
#include "mm_limits.hpp"

namespace {
using namespace hisparse;
using hisparse::fuzz::require;

using fuzz::mm_limits;

template <class V>
void read_and_build(MmReader& reader, const MmHeader& h, std::size_t salt) {
  const Coo<V> coo = reader.read_matrix<V>();
  require(coo.rows == h.rows && coo.cols == h.cols, "dimensions differ from the size line");
  require(coo.row.size() == coo.nnz() && coo.col.size() == coo.nnz(), "row, col and val differ in length");
  // A symmetric file is mirrored: at most twice what it stores.
  require(coo.nnz() <= 2 * h.entries, "more entries than the file declares");
  for (std::size_t i = 0; i < coo.nnz(); ++i) {
    require(coo.row[i] < coo.rows && coo.col[i] < coo.cols, "an entry outside the matrix");
  }
  BuildOptions options;
  options.node_size = 2u << (salt % 8);  // 2 .. 256
  options.wide_nodes = salt % 3 != 0;
  Matrix<V> m;
  try {
    m = build_matrix(coo, options);
  } catch (const Error&) {
    return;  // a clear refusal (e.g. a size the format cannot hold)
  }
  fuzz::require_valid(m, "matrix market");
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const fuzz::MemoryFile file({data, size});
  try {
    MmReader reader(file.path(), mm_limits);
    const MmHeader h = reader.header();
    const bool wide = size % 2 == 1;  // both precisions over the corpus
    if (h.field == MmField::complex) {
      if (wide) read_and_build<std::complex<double>>(reader, h, size);
      else read_and_build<std::complex<float>>(reader, h, size);
    } else {
      if (wide) read_and_build<double>(reader, h, size);
      else read_and_build<float>(reader, h, size);
    }
  } catch (const hisparse::Error&) {
    // Refused with a message: what a bad input must get.
  }
  return 0;
}
