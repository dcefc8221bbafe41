#include <gtest/gtest.h>

#include <bit>
#include <cstring>

#include "kernels/abft.h"
#include "kernels/bandwidth.h"
#include "kernels/digest.h"
#include "kernels/patterns.h"

namespace faultline::kernels {
namespace {

TEST(Digest, FnvKnownVectors) {
  EXPECT_EQ(fnv1a64("", 0), 0xCBF29CE484222325ull);
  EXPECT_EQ(fnv1a64("a", 1), 0xAF63DC4C8601EC8Cull);
  EXPECT_EQ(fnv1a64("foobar", 6), 0x85944171F73967E8ull);
}

TEST(Digest, InputsAreSmallIntegersAndSeeded) {
  const auto a = digest_input(1, 128, 1);
  const auto b = digest_input(1, 128, 2);
  EXPECT_NE(a, b);
  EXPECT_EQ(a, digest_input(1, 128, 1));
  EXPECT_NE(a, digest_input(2, 128, 1));
  int histogram[5] = {};
  for (float v : a) {
    ASSERT_EQ(v, std::floor(v));
    ASSERT_GE(v, -2.0f);
    ASSERT_LE(v, 2.0f);
    ++histogram[static_cast<int>(v) + 2];
  }
  for (int count : histogram) EXPECT_GT(count, 128 * 128 / 10);
}

TEST(Digest, ReferenceEqualsAnyExactFp32Gemm) {
  // The claim the digest rests on: FP32 accumulation of these inputs is exact, so the summation
  // order (a GPU's blocking) cannot change a bit. Compare the integer reference with an FP32
  // GEMM in forward order and one in reverse order.
  const int n = 256;
  const std::uint64_t seed = 20240607;
  const auto a = digest_input(seed, n, 1);
  const auto b = digest_input(seed, n, 2);
  std::vector<float> forward(n * n);
  cpu_gemm(a, b, forward, n, n, n);
  std::vector<float> reverse(n * n, 0.0f);
  for (int j = 0; j < n; ++j) {
    for (int i = 0; i < n; ++i) {
      float acc = 0.0f;
      for (int l = n - 1; l >= 0; --l) acc += a[l * n + i] * b[j * n + l];
      reverse[j * n + i] = acc;
    }
  }
  const std::uint64_t reference = reference_digest(seed, n);
  EXPECT_EQ(digest_floats(forward), reference);
  EXPECT_EQ(digest_floats(reverse), reference);
  EXPECT_NE(reference_digest(seed + 1, n), reference);
}

TEST(Digest, OneFlippedBitChangesTheDigest) {
  const int n = 128;
  const auto a = digest_input(5, n, 1);
  const auto b = digest_input(5, n, 2);
  std::vector<float> c(n * n);
  cpu_gemm(a, b, c, n, n, n);
  const std::uint64_t clean = digest_floats(c);
  for (int bit : {0, 1, 22, 23, 30, 31}) {
    auto corrupted = c;
    std::uint32_t word = std::bit_cast<std::uint32_t>(corrupted[1234]);
    word ^= 1u << bit;
    corrupted[1234] = std::bit_cast<float>(word);
    EXPECT_NE(digest_floats(corrupted), clean) << "bit " << bit;
  }
}

TEST(Digest, NegativeZeroIsFolded) {
  const std::vector<float> plus = {1.0f, 0.0f};
  const std::vector<float> minus = {1.0f, -0.0f};
  EXPECT_EQ(digest_floats(plus), digest_floats(minus));
}

TEST(Digest, HexRoundTrip) {
  EXPECT_EQ(digest_hex(0x0123456789ABCDEFull), "0x0123456789abcdef");
  EXPECT_EQ(parse_digest_hex("0x0123456789abcdef"), 0x0123456789ABCDEFull);
  EXPECT_EQ(parse_digest_hex("ABCDEF"), 0xABCDEFull);
  EXPECT_FALSE(parse_digest_hex("0x"));
  EXPECT_FALSE(parse_digest_hex("12345678901234567"));
  EXPECT_FALSE(parse_digest_hex("xyz"));
}

TEST(Patterns, DeterministicAndSpread) {
  const auto key = stream_key(7, 1);
  EXPECT_EQ(pattern_word(key, 10), pattern_word(key, 10));
  EXPECT_NE(pattern_word(key, 10), pattern_word(key, 11));
  EXPECT_NE(stream_key(7, 1), stream_key(7, 2));
  double sum = 0;
  for (int i = 0; i < 10000; ++i) {
    const float v = uniform_value(key, i);
    ASSERT_GE(v, -1.0f);
    ASSERT_LT(v, 1.0f);
    sum += v;
  }
  EXPECT_NEAR(sum / 10000, 0.0, 0.05);
}

// Worked numbers, as nccl-tests would print them.
TEST(BusBandwidth, FactorsAndWorkedNumbers) {
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::kAllReduce, 8), 1.75);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::kAllGather, 8), 0.875);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::kAllToAll, 4), 0.75);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::kAllReduce, 2), 1.0);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::kAllReduce, 1), 0.0);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::kAllGather, 0), 0.0);
  // 1 GB all-reduce in 10 ms on 8 ranks: algbw 100 GB/s, busbw 175 GB/s.
  EXPECT_DOUBLE_EQ(algorithm_bandwidth_gbps(1e9, 0.01), 100.0);
  EXPECT_DOUBLE_EQ(bus_bandwidth_gbps(Collective::kAllReduce, 1e9, 0.01, 8), 175.0);
  // 256 MiB all-gather in 1.5 ms on 16 ranks: algbw 178.957 GB/s, busbw 167.772 GB/s.
  const double size = 256.0 * 1024 * 1024;
  EXPECT_NEAR(algorithm_bandwidth_gbps(size, 1.5e-3), 178.957, 1e-3);
  EXPECT_NEAR(bus_bandwidth_gbps(Collective::kAllGather, size, 1.5e-3, 16), 167.772, 1e-3);
  // 128 ranks all-to-all, 4 GB in 100 ms: 40 GB/s algbw, 39.6875 GB/s busbw.
  EXPECT_DOUBLE_EQ(bus_bandwidth_gbps(Collective::kAllToAll, 4e9, 0.1, 128), 39.6875);
  EXPECT_DOUBLE_EQ(gigabytes_per_second(1e9, 0), 0.0);
  EXPECT_EQ(parse_collective("all_to_all"), Collective::kAllToAll);
  EXPECT_FALSE(parse_collective("alltoall"));
}

TEST(BusBandwidth, GemmTflops) {
  // 100 GEMMs of 8192^3 in one second: 2 * 8192^3 * 100 / 1e12 = 109.95 TFLOP/s.
  EXPECT_NEAR(gemm_tflops(8192, 8192, 8192, 100, 1.0), 109.951162777600, 1e-9);
  EXPECT_DOUBLE_EQ(gemm_tflops(1, 1, 1, 1, 0), 0.0);
}

}  // namespace
}  // namespace faultline::kernels
