#pragma once
// A fuzz input as a file the readers can open by name: an anonymous memory
// file (memfd), reached as /proc/self/fd/N. It is a regular file, so the
// loaders' non-regular-input refusals do not get in the way, and nothing
// touches a disk (a harness runs millions of times).
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <span>
#include <stdexcept>
#include <string>

namespace hisparse::fuzz {

class MemoryFile {
 public:
  explicit MemoryFile(std::span<const std::uint8_t> bytes) {
    fd_ = ::memfd_create("hisparse-fuzz", MFD_CLOEXEC);
    if (fd_ < 0) throw std::runtime_error(std::string("memfd_create: ") + std::strerror(errno));
    std::size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t n = ::write(fd_, bytes.data() + done, bytes.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        ::close(fd_);
        throw std::runtime_error(std::string("memfd write: ") + std::strerror(errno));
      }
      done += static_cast<std::size_t>(n);
    }
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  ~MemoryFile() { ::close(fd_); }
  MemoryFile(const MemoryFile&) = delete;
  MemoryFile& operator=(const MemoryFile&) = delete;

  [[nodiscard]] const std::filesystem::path& path() const { return path_; }

 private:
  int fd_ = -1;
  std::filesystem::path path_;
};

// A property a harness checks failed: thrown, not aborted, so that the
// seeded gtest driver reports it with its seed; under libFuzzer the uncaught
// exception aborts and the input is kept as a crash.
struct PropertyViolation : std::logic_error {
  using std::logic_error::logic_error;
};

inline void require(bool ok, const std::string& what) {
  if (!ok) throw PropertyViolation(what);
}

}  // namespace hisparse::fuzz
