#pragma once

// The bit-exact digest: a miniature of ByteRobust's bit-wise alignment test. A GEMM on fixed,
// seeded inputs made of small integers (-2..2) accumulates only integers below 2^24, so every
// correct FP32-accumulating GEMM, whatever its blocking, summation order or GPU, produces the same
// bits. The probe hashes the FP32 output with FNV-1a 64 and compares the hash with the CPU's
// (computed exactly in integers here) and, when given, with a hash from another machine. A wrong
// bit anywhere in the output, even one a checksum tolerance would forgive, changes the digest.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace faultline::kernels {

inline constexpr std::uint64_t kFnvOffsetBasis = 0xCBF29CE484222325ull;
std::uint64_t fnv1a64(const void* data, std::size_t bytes, std::uint64_t state = kFnvOffsetBasis);

// Digest of FP32 values in memory order, with -0 folded into +0 (an exact sum of zero products may
// carry either sign, which is not a fault).
std::uint64_t digest_floats(std::span<const float> values);

// The digest GEMM's inputs, column-major: A is size x size (stream 1), B is size x size (stream 2).
std::vector<float> digest_input(std::uint64_t seed, int size, int which);

// The digest every healthy GPU must produce for C = A*B on digest_input(seed, size, 1/2), computed
// exactly with integer arithmetic. Requires size <= 4096 (exactness bound is far above).
std::uint64_t reference_digest(std::uint64_t seed, int size);

// "0x" followed by 16 lower-case hex digits; parse accepts with or without "0x".
std::string digest_hex(std::uint64_t digest);
std::optional<std::uint64_t> parse_digest_hex(std::string_view text);

}  // namespace faultline::kernels
