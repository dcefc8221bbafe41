#pragma once

// Counter-based randomness and hashing for the reference training job. Every random number the
// job uses is a pure function of (seed, stream, counters), never of a generator's history, so a
// rank that handles micro-batch 5 of step 1234 draws exactly what any other layout (one process,
// or eight) would draw for it, and a resumed run needs no saved generator state.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

namespace faultline::live::trainjob {

// The splitmix64 finaliser: a bijective 64-bit mixer.
constexpr std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Hash of a tuple of counters, chained through splitmix64 (order matters).
constexpr std::uint64_t counter_hash(std::uint64_t seed, std::uint64_t a, std::uint64_t b = 0,
                                     std::uint64_t c = 0, std::uint64_t d = 0) {
  std::uint64_t h = splitmix64(seed);
  h = splitmix64(h ^ a);
  h = splitmix64(h ^ b);
  h = splitmix64(h ^ c);
  return splitmix64(h ^ d);
}

// Uniform double in [-1, 1) from 53 random bits of `bits` (exact, no rounding surprises).
constexpr double to_symmetric_unit(std::uint64_t bits) {
  return static_cast<double>(bits >> 11) * (1.0 / 9007199254740992.0) * 2.0 - 1.0;
}

// 64-bit FNV-1a, used for checkpoint checksums and the weight hashes of probes and replays.
class Fnv1a {
 public:
  void update(std::span<const std::byte> bytes) {
    for (std::byte b : bytes) {
      h_ ^= static_cast<std::uint64_t>(b);
      h_ *= 0x100000001B3ull;
    }
  }
  void update(const void* data, std::size_t n) {
    update(std::span<const std::byte>(static_cast<const std::byte*>(data), n));
  }
  std::uint64_t value() const { return h_; }

 private:
  std::uint64_t h_ = 0xCBF29CE484222325ull;
};

}  // namespace faultline::live::trainjob
