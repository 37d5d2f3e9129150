#pragma once
// The node pool of a family of versions (docs/format.md, "Versions"): one
// append-only byte range that every version of a matrix views, so that a
// version made by a persistent edit (ops::edit_version) refers to the nodes
// it did not change where they already are, and stores only its new paths.
//
// Child references are 32-bit pool offsets, so the family's nodes must live in
// one address range that never moves: the arena reserves the whole 4 GiB the
// references can address (address space only: nothing is committed) and
// commits memory as appends reach it. Appending never touches a byte that an
// existing version can reach, so versions read their nodes without locks
// while another thread appends; appends themselves are serialised.
//
// Memory is committed as on any Linux allocation: with the default
// overcommit an append does not fail when memory runs short (the pages are
// only backed when written), with strict overcommit it is refused with an
// Error. Each family holds 4 GiB of address space, so a process limited by
// `ulimit -v` holds few families.
//
// Nodes are immutable once appended and are freed with the arena, when the
// last version of the family goes; a version that should outlive the nodes
// its family no longer needs is compacted (compacted(), ops::copy_reference)
// into a pool of its own.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>

namespace hisparse {

class NodeArena {
 public:
  // A new arena holding `bytes` bytes copied from `pool` (the first version:
  // its header and nodes). bytes is a multiple of 16 and at most max_pool_bytes.
  NodeArena(const std::byte* pool, std::uint64_t bytes);
  ~NodeArena();
  NodeArena(const NodeArena&) = delete;
  NodeArena& operator=(const NodeArena&) = delete;

  // `bytes` (a multiple of 16) of zeroed room after everything appended so
  // far, for the caller alone to write: its offset. Thread-safe. Throws
  // hisparse::LimitError past the 4 GiB the references address, and
  // hisparse::Error when the memory cannot be committed (nothing changes).
  std::uint64_t append(std::uint64_t bytes);

  [[nodiscard]] std::byte* data() const { return base_; }
  // Bytes handed out so far (the first version's included).
  [[nodiscard]] std::uint64_t size() const;

 private:
  std::byte* base_ = nullptr;
  std::uint64_t committed_ = 0;
  std::uint64_t used_ = 0;
  mutable std::mutex mutex_;
};

}  // namespace hisparse
