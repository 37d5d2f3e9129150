#include "hisparse/formats/atomic_file.hpp"

#include <fstream>
#include <random>
#include <system_error>

#include "hisparse/formats/error.hpp"

namespace hisparse {

void write_file_atomically(const std::filesystem::path& target,
                           const std::function<void(std::ostream&)>& write) {
  namespace fs = std::filesystem;
  std::random_device rd;
  fs::path tmp = target;
  tmp += ".tmp" + std::to_string(rd());
  try {
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      if (!out) throw Error(target.string() + ": cannot open for writing");
      write(out);
      out.flush();
      if (!out) throw Error(target.string() + ": write failed (disk full?)");
    }
    std::error_code ec;
    fs::rename(tmp, target, ec);
    if (ec) throw Error(target.string() + ": cannot rename temporary file: " + ec.message());
  } catch (...) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    throw;
  }
}

}  // namespace hisparse
