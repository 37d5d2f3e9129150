#pragma once
// A directory of this process's own for files a harness writes (the atomic
// writer needs a real directory), removed at exit.
#include <unistd.h>

#include <filesystem>
#include <string>

namespace hisparse::fuzz {

inline const std::filesystem::path& scratch_dir() {
  struct Dir {
    std::filesystem::path path;
    Dir() {
      path = std::filesystem::temp_directory_path() / ("hisparse-fuzz-" + std::to_string(::getpid()));
      std::filesystem::create_directories(path);
    }
    ~Dir() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  };
  static const Dir dir;
  return dir.path;
}

}  // namespace hisparse::fuzz
