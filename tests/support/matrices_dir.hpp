#pragma once
// Where the SuiteSparse test matrices are: $HISPARSE_MATRICES_DIR when set
// (e.g. on a machine where the checkout travelled without ../shared), else
// the folder beside the checkout, fixed at configure time.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <vector>

namespace hisparse::testing {

inline std::filesystem::path matrices_dir() {
  if (const char* env = std::getenv("HISPARSE_MATRICES_DIR")) return env;
  return HISPARSE_MATRICES_DIR;
}

// The shared .mtx files, sorted, without block_2000.mtx (it counts from 0: a
// real-world bad file the reader rejects on purpose, tests/matrices).
inline std::vector<std::filesystem::path> matrix_files() {
  std::vector<std::filesystem::path> out;
  for (const auto& e : std::filesystem::directory_iterator(matrices_dir()))
    if (e.path().extension() == ".mtx" && e.path().filename() != "block_2000.mtx") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

// The same without the complex one (young1c.mtx), which reads only into
// complex value types: the files every real-valued op is tested on.
inline std::vector<std::filesystem::path> real_matrix_files() {
  std::vector<std::filesystem::path> out = matrix_files();
  std::erase_if(out, [](const std::filesystem::path& p) { return p.filename() == "young1c.mtx"; });
  return out;
}

}  // namespace hisparse::testing
