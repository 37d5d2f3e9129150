#include "hisparse/formats/node_arena.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "hisparse/formats/error.hpp"
#include "hisparse/formats/node.hpp"

namespace hisparse {
namespace {

// The range child references address (offsets below 2^32), reserved at once.
constexpr std::uint64_t reserved_bytes = std::uint64_t{1} << 32;
// Memory is committed in steps of this size (huge-page sized, so that a
// growing family does not make one system call per edit).
constexpr std::uint64_t commit_step = std::uint64_t{2} << 20;

std::string errno_text() { return std::strerror(errno); }

}  // namespace

NodeArena::NodeArena(const std::byte* pool, std::uint64_t bytes) {
  if (bytes % node_alignment != 0 || bytes > max_pool_bytes)
    throw Error("NodeArena: a first pool of " + std::to_string(bytes) + " bytes (a multiple of 16 up to 2^32 - 16 needed)");
  // PROT_NONE reserves addresses without counting against the commit limit,
  // also where overcommit is off; append() makes the used part writable.
  void* p = ::mmap(nullptr, reserved_bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) throw Error("NodeArena: cannot reserve 4 GiB of address space for a version family: " + errno_text());
  base_ = static_cast<std::byte*>(p);
  // No MADV_HUGEPAGE: where the kernel compacts memory for advised ranges
  // (THP defrag "madvise", Debian's default) large appends stalled in it
  // (R-MAT 2^19, a 1% batch: 245 -> 425 ms).
  try {
    append(bytes);
  } catch (...) {
    ::munmap(base_, reserved_bytes);
    throw;
  }
  if (bytes) std::memcpy(base_, pool, bytes);
}

NodeArena::~NodeArena() { ::munmap(base_, reserved_bytes); }

std::uint64_t NodeArena::append(std::uint64_t bytes) {
  if (bytes % node_alignment != 0) throw Error("NodeArena::append: " + std::to_string(bytes) + " bytes, not a multiple of 16");
  std::lock_guard lock(mutex_);
  const std::uint64_t at = used_;
  if (bytes > max_pool_bytes - at)
    throw LimitError("a version family needs " + std::to_string(at + bytes) +
                     " bytes of nodes, over the 4 GiB limit of 32-bit child references (compact a version to start "
                     "a new family)");
  const std::uint64_t end = at + bytes;
  if (end > committed_) {
    const std::uint64_t to = std::min(reserved_bytes, round_up(end, commit_step));
    // Fresh anonymous pages read as zero: the room is zeroed, as AlignedBuffer's is.
    if (::mprotect(base_ + committed_, to - committed_, PROT_READ | PROT_WRITE) != 0)
      throw Error("NodeArena: cannot commit " + std::to_string(to - committed_) + " bytes for a version family: " +
                  errno_text());
    committed_ = to;
  }
  used_ = end;
  return at;
}

std::uint64_t NodeArena::size() const {
  std::lock_guard lock(mutex_);
  return used_;
}

}  // namespace hisparse
