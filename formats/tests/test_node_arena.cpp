// NodeArena: the append-only pool of a version family. Appends keep earlier
// bytes where they are (the range never moves), hand out zeroed room past the
// commit steps, refuse what the 32-bit references cannot address without
// changing anything, and run from several threads at once.
#include <gtest/gtest.h>

#include <cstring>
#include <thread>
#include <vector>

#include "hisparse/formats/error.hpp"
#include "hisparse/formats/matrix.hpp"
#include "hisparse/formats/node_arena.hpp"

using namespace hisparse;

TEST(NodeArena, AppendsKeepEverythingWhereItIs) {
  std::vector<std::byte> first(4096);
  for (std::size_t i = 0; i < first.size(); ++i) first[i] = static_cast<std::byte>(i * 7);
  NodeArena arena(first.data(), first.size());
  std::byte* const base = arena.data();
  ASSERT_EQ(arena.size(), first.size());
  ASSERT_EQ(std::memcmp(base, first.data(), first.size()), 0);
  // Past several 2 MiB commit steps, in uneven pieces: every piece zeroed, then written.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> pieces;
  for (std::uint64_t k = 1; k <= 40; ++k) {
    const std::uint64_t bytes = 16 * (k * 9973 % 40000 + 1);
    const std::uint64_t at = arena.append(bytes);
    ASSERT_EQ(at % 16, 0u);
    ASSERT_EQ(arena.data(), base) << "the range moved";
    for (std::uint64_t i = 0; i < bytes; ++i) ASSERT_EQ(base[at + i], std::byte{0}) << "piece " << k << " not zeroed";
    std::memset(base + at, static_cast<int>(k), bytes);
    pieces.push_back({at, bytes});
  }
  EXPECT_GT(arena.size(), std::uint64_t{8} << 20);
  EXPECT_EQ(std::memcmp(base, first.data(), first.size()), 0);
  for (std::size_t k = 0; k < pieces.size(); ++k)
    for (std::uint64_t i = 0; i < pieces[k].second; i += 997)
      ASSERT_EQ(base[pieces[k].first + i], static_cast<std::byte>(k + 1));
}

TEST(NodeArena, RefusesWhatReferencesCannotAddress) {
  std::vector<std::byte> first(32);
  NodeArena arena(first.data(), first.size());
  const std::uint64_t size = arena.size();
  EXPECT_THROW(arena.append(max_pool_bytes), LimitError);  // 32 + (2^32 - 16) > 2^32 - 16
  EXPECT_THROW(arena.append(24), Error);                   // not a multiple of 16
  EXPECT_EQ(arena.size(), size);
  EXPECT_EQ(arena.append(16), size);  // still usable
  EXPECT_THROW(NodeArena(first.data(), 24), Error);
}

TEST(NodeArena, ConcurrentAppendsGetDisjointRoom) {
  std::vector<std::byte> first(16);
  NodeArena arena(first.data(), first.size());
  constexpr int threads = 4, per_thread = 500;
  std::vector<std::vector<std::uint64_t>> got(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      for (int i = 0; i < per_thread; ++i) {
        const std::uint64_t at = arena.append(4096);
        std::memset(arena.data() + at, t + 1, 4096);
        got[t].push_back(at);
      }
    });
  for (auto& th : pool) th.join();
  EXPECT_EQ(arena.size(), 16 + std::uint64_t{threads} * per_thread * 4096);
  for (int t = 0; t < threads; ++t)
    for (const std::uint64_t at : got[t])
      for (std::uint64_t i = 0; i < 4096; i += 512) ASSERT_EQ(arena.data()[at + i], static_cast<std::byte>(t + 1));
}
