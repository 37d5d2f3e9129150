#pragma once
// Where the SuiteSparse test matrices are: $HISPARSE_MATRICES_DIR when set
// (e.g. on a machine where the checkout travelled without ../shared), else
// the folder beside the checkout, fixed at configure time.
#include <cstdlib>
#include <filesystem>

namespace hisparse::testing {

inline std::filesystem::path matrices_dir() {
  if (const char* env = std::getenv("HISPARSE_MATRICES_DIR")) return env;
  return HISPARSE_MATRICES_DIR;
}

}  // namespace hisparse::testing
