#pragma once

// Deterministic, stateless generators for test data: the value at index i depends only on (seed,
// i), so a kernel can regenerate what it expects to read without storing a second copy, a CPU can
// check what a GPU wrote, and two machines given the same seed produce identical inputs. Used by
// the memory tests (32-bit patterns), the copy probes (verification of transferred data), the
// GEMM burn (uniform inputs) and the digest GEMM (small integers, exact in every precision).

#include <cstdint>

#include "kernels/host_device.h"

namespace faultline::kernels {

// The splitmix64 finalizer: a bijective 64-bit mix with good avalanche.
FAULTLINE_HD inline std::uint64_t mix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// A stream key for (seed, stream): different streams of one seed are unrelated.
FAULTLINE_HD inline std::uint64_t stream_key(std::uint64_t seed, std::uint64_t stream) {
  return mix64(seed ^ mix64(stream + 0x632BE59BD9B4E019ull));
}

// 32-bit pattern word at `index` of stream `key`.
FAULTLINE_HD inline std::uint32_t pattern_word(std::uint64_t key, std::uint64_t index) {
  return static_cast<std::uint32_t>(mix64(key ^ (index * 0xD1B54A32D192ED03ull)) >> 32);
}

// Uniform in [-1, 1), a multiple of 2^-23 (so exact in FP32).
FAULTLINE_HD inline float uniform_value(std::uint64_t key, std::uint64_t index) {
  const std::uint64_t bits = mix64(key ^ (index * 0xD1B54A32D192ED03ull)) >> 40;  // 24 bits
  return static_cast<float>(static_cast<double>(bits) * (1.0 / 8388608.0) - 1.0);
}

// An integer in [-2, 2]: products and sums of these stay exact in FP32 for k <= 2^20, and the
// inputs themselves are exact in BF16, FP16 and TF32.
FAULTLINE_HD inline int small_integer_value(std::uint64_t key, std::uint64_t index) {
  return static_cast<int>(mix64(key ^ (index * 0xD1B54A32D192ED03ull)) % 5u) - 2;
}

}  // namespace faultline::kernels
