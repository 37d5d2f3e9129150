#pragma once
// Stable LSD radix sort of (key, payload) pairs by key, 16 bits per pass.
// Passes whose digit is the same for every element are skipped, so a key
// type wider than the bits in use costs nothing extra. Stability is what the
// builder relies on: equal keys (duplicate entries) keep their input order.
// Small inputs take a comparison sort: a pass clears and scans 2^16 buckets
// whatever n is, which dominated building matrices of a few hundred entries.
#include <algorithm>
#include <array>
#include <cstdint>
#include <numeric>
#include <vector>

namespace hisparse::detail {

template <class Key, class Payload>
void radix_sort_pairs(std::vector<Key>& keys, std::vector<Payload>& payload, unsigned key_bits) {
  constexpr unsigned digit_bits = 16;
  constexpr std::size_t buckets = std::size_t{1} << digit_bits;
  const std::size_t n = keys.size();
  if (n < 4096) {
    std::vector<std::uint32_t> order(n);
    std::iota(order.begin(), order.end(), 0u);
    std::stable_sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) { return keys[a] < keys[b]; });
    std::vector<Key> sorted_keys(n);
    std::vector<Payload> sorted_payload(n);
    for (std::size_t i = 0; i < n; ++i) {
      sorted_keys[i] = keys[order[i]];
      sorted_payload[i] = payload[order[i]];
    }
    keys.swap(sorted_keys);
    payload.swap(sorted_payload);
    return;
  }
  std::vector<Key> tmp_keys(n);
  std::vector<Payload> tmp_payload(n);
  std::vector<std::size_t> count(buckets);
  for (unsigned shift = 0; shift < key_bits; shift += digit_bits) {
    std::fill(count.begin(), count.end(), 0);
    for (std::size_t i = 0; i < n; ++i) ++count[static_cast<std::size_t>(keys[i] >> shift) & (buckets - 1)];
    bool trivial = false;
    for (std::size_t c : count) {
      if (c == n) trivial = true;
      if (c != 0) break;
    }
    if (trivial || n == 0) continue;  // every element has the same digit: order unchanged
    std::size_t sum = 0;
    for (auto& c : count) {
      const std::size_t k = c;
      c = sum;
      sum += k;
    }
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t slot = count[static_cast<std::size_t>(keys[i] >> shift) & (buckets - 1)]++;
      tmp_keys[slot] = keys[i];
      tmp_payload[slot] = payload[i];
    }
    keys.swap(tmp_keys);
    payload.swap(tmp_payload);
  }
}

}  // namespace hisparse::detail
