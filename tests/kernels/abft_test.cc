#include "kernels/abft.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>

#include "kernels/patterns.h"

namespace faultline::kernels {
namespace {

// A CPU miniature of one burn iteration: seeded uniform inputs stored in the path's type, an FP32
// GEMM, C rounded to the output type.
struct Gemm {
  int m, n, k;
  GemmPrecision precision;
  std::vector<float> a, b, c;
};

Gemm make_gemm(int m, int n, int k, GemmPrecision p, std::uint64_t seed) {
  Gemm g{m, n, k, p, {}, {}, {}};
  g.a.resize(static_cast<std::size_t>(m) * k);
  g.b.resize(static_cast<std::size_t>(k) * n);
  const auto ka = stream_key(seed, 0xA);
  const auto kb = stream_key(seed, 0xB);
  for (std::size_t i = 0; i < g.a.size(); ++i) g.a[i] = round_to_storage(uniform_value(ka, i), p);
  for (std::size_t i = 0; i < g.b.size(); ++i) g.b[i] = round_to_storage(uniform_value(kb, i), p);
  g.c.resize(static_cast<std::size_t>(m) * n);
  if (p == GemmPrecision::kTf32) {
    // TF32 tensor cores see inputs with 10 mantissa bits (here truncated, the worse case); the
    // reference checksums use the FP32 values as stored.
    auto truncate = [](float v) {
      return std::bit_cast<float>(std::bit_cast<std::uint32_t>(v) & 0xFFFFE000u);
    };
    std::vector<float> at(g.a.size()), bt(g.b.size());
    for (std::size_t i = 0; i < at.size(); ++i) at[i] = truncate(g.a[i]);
    for (std::size_t i = 0; i < bt.size(); ++i) bt[i] = truncate(g.b[i]);
    cpu_gemm(at, bt, g.c, m, n, k);
  } else {
    cpu_gemm(g.a, g.b, g.c, m, n, k);
  }
  for (float& v : g.c) v = round_to_storage(v, p);
  return g;
}

std::vector<AbftMismatch> check(const Gemm& g, double sigma = 16) {
  return abft_compare(abft_reference(g.a, g.b, g.m, g.n, g.k), abft_sums(g.c, g.m, g.n),
                      g.precision, g.k, sigma);
}

// Flips the bit the probe's injection flips (abft.h magnifying_bit) in C's storage type.
void inject(Gemm& g, std::size_t index) {
  float& v = g.c[index];
  switch (g.precision) {
    case GemmPrecision::kBf16: {
      std::uint32_t bits = float_to_bf16_bits(v);
      bits ^= 1u << magnifying_bit(bits, 7, 8);
      v = bf16_bits_to_float(static_cast<std::uint16_t>(bits));
      break;
    }
    case GemmPrecision::kFp16: {
      std::uint32_t bits = float_to_half_bits(v);
      bits ^= 1u << magnifying_bit(bits, 10, 5);
      v = half_bits_to_float(static_cast<std::uint16_t>(bits));
      break;
    }
    case GemmPrecision::kTf32:
    case GemmPrecision::kFp32: {
      std::uint32_t bits = std::bit_cast<std::uint32_t>(v);
      bits ^= 1u << magnifying_bit(bits, 23, 8);
      v = std::bit_cast<float>(bits);
      break;
    }
  }
}

TEST(Abft, StorageConversionsRoundToNearestEven) {
  EXPECT_EQ(float_to_bf16_bits(1.0f), 0x3F80);
  EXPECT_EQ(bf16_bits_to_float(0x3F80), 1.0f);
  // 1 + 2^-8 is halfway between bf16 neighbours 1 and 1 + 2^-7: ties go to even (1).
  EXPECT_EQ(float_to_bf16_bits(1.0f + 0x1p-8f), 0x3F80);
  EXPECT_EQ(float_to_bf16_bits(1.0f + 0x1p-8f + 0x1p-20f), 0x3F81);
  EXPECT_TRUE(std::isnan(bf16_bits_to_float(float_to_bf16_bits(std::nanf("")))));
  EXPECT_EQ(float_to_half_bits(1.0f), 0x3C00);
  EXPECT_EQ(float_to_half_bits(-2.0f), 0xC000);
  EXPECT_EQ(float_to_half_bits(65504.0f), 0x7BFF);
  EXPECT_EQ(float_to_half_bits(65520.0f), 0x7C00);  // rounds up to infinity
  EXPECT_EQ(float_to_half_bits(0x1p-24f), 0x0001);  // smallest subnormal
  EXPECT_EQ(float_to_half_bits(0x1p-25f), 0x0000);  // tie to even: zero
  EXPECT_EQ(float_to_half_bits(1.0f + 0x1p-11f), 0x3C00);
  EXPECT_EQ(float_to_half_bits(1.0f + 0x1p-11f + 0x1p-20f), 0x3C01);
  for (std::uint32_t h = 0; h < 0x7C00; h += 7) {
    EXPECT_EQ(float_to_half_bits(half_bits_to_float(static_cast<std::uint16_t>(h))), h);
  }
}

TEST(Abft, MagnifyingBitEnlargesTheValue) {
  // bf16 2.0 = 0x4000: exponent 0x80, top exponent bit set; the highest clear bit is bit 13.
  EXPECT_EQ(magnifying_bit(0x4000, 7, 8), 13);
  // 0.5 in fp32: exponent 126 = 0b01111110, top bit clear: bit 30.
  EXPECT_EQ(magnifying_bit(std::bit_cast<std::uint32_t>(0.5f), 23, 8), 30);
  for (float v : {0.001f, -0.75f, 3.0f, 50.0f, -1234.5f}) {
    std::uint32_t bits = std::bit_cast<std::uint32_t>(v);
    bits ^= 1u << magnifying_bit(bits, 23, 8);
    EXPECT_GT(std::fabs(std::bit_cast<float>(bits)), std::fabs(v) * 1000) << v;
  }
}

TEST(Abft, ToleranceScalesWithPrecisionSizeAndSigma) {
  const double q = 1e6;
  EXPECT_GT(abft_tolerance(abft_variance_coefficient(GemmPrecision::kBf16, 1024), q, 16),
            abft_tolerance(abft_variance_coefficient(GemmPrecision::kFp16, 1024), q, 16));
  EXPECT_GT(abft_tolerance(abft_variance_coefficient(GemmPrecision::kTf32, 1024), q, 16),
            abft_tolerance(abft_variance_coefficient(GemmPrecision::kFp32, 1024), q, 16));
  EXPECT_GT(abft_variance_coefficient(GemmPrecision::kFp32, 8192),
            abft_variance_coefficient(GemmPrecision::kFp32, 1024));
  EXPECT_DOUBLE_EQ(abft_tolerance(1.0, 4.0, 8.0) - kAbftAbsoluteFloor, 16.0);
  // Worked number: bf16, k = 1024: coef = 2^-16 + 2^-44 * 512 = 2^-16 + 2^-35, so with
  // Q = 2^16 and sigma = 1 the tolerance is sqrt(1 + 2^-19) plus the absolute floor.
  const double coef = abft_variance_coefficient(GemmPrecision::kBf16, 1024);
  EXPECT_DOUBLE_EQ(coef, 0x1p-16 + 0x1p-35);
  EXPECT_NEAR(abft_tolerance(coef, 65536.0, 1.0), std::sqrt(1.0 + 0x1p-19) + kAbftAbsoluteFloor,
              1e-12);
}

TEST(Abft, NotANumberIsAMismatch) {
  EXPECT_TRUE(abft_mismatch(std::numeric_limits<double>::quiet_NaN(), 1.0, 1e9));
  EXPECT_TRUE(abft_mismatch(std::numeric_limits<double>::infinity(), 1.0, 1e9));
  EXPECT_FALSE(abft_mismatch(1.0 + 1e-3, 1.0, 1e-2));
  EXPECT_TRUE(abft_mismatch(1.1, 1.0, 1e-2));
}

class AbftPrecision : public ::testing::TestWithParam<GemmPrecision> {};

TEST_P(AbftPrecision, HealthyGemmRaisesNoAlarm) {
  for (std::uint64_t seed : {1u, 2u, 3u}) {
    const Gemm g = make_gemm(128, 192, 256, GetParam(), seed);
    const auto mismatches = check(g);
    EXPECT_TRUE(mismatches.empty())
        << "seed " << seed << ": " << mismatches.size() << " mismatches, first |diff|/tol = "
        << std::fabs(mismatches[0].got - mismatches[0].expected) / mismatches[0].tolerance;
  }
}

TEST_P(AbftPrecision, InjectedBitFlipIsCaughtAndLocatedEveryTime) {
  Gemm g = make_gemm(128, 192, 256, GetParam(), 42);
  const auto clean = g.c;
  for (int trial = 0; trial < 200; ++trial) {
    g.c = clean;
    const std::size_t index = mix64(static_cast<std::uint64_t>(trial)) % g.c.size();
    inject(g, index);
    const auto mismatches = check(g);
    const int row = static_cast<int>(index % g.m);
    const int col = static_cast<int>(index / g.m);
    ASSERT_EQ(mismatches.size(), 2u) << "trial " << trial;
    EXPECT_TRUE(mismatches[0].is_row);
    EXPECT_EQ(mismatches[0].index, row);
    EXPECT_FALSE(mismatches[1].is_row);
    EXPECT_EQ(mismatches[1].index, col);
  }
}

INSTANTIATE_TEST_SUITE_P(Precisions, AbftPrecision,
                         ::testing::Values(GemmPrecision::kBf16, GemmPrecision::kFp16,
                                           GemmPrecision::kTf32),
                         [](const auto& info) {
                           switch (info.param) {
                             case GemmPrecision::kBf16:
                               return "bf16";
                             case GemmPrecision::kFp16:
                               return "fp16";
                             case GemmPrecision::kTf32:
                               return "tf32";
                             default:
                               return "fp32";
                           }
                         });

TEST(Abft, LowMantissaFlipHidesUnderTheTolerance) {
  // The documented limit of any checksum with rounding: the digest, not ABFT, catches this one.
  Gemm g = make_gemm(128, 128, 256, GemmPrecision::kBf16, 9);
  std::uint16_t bits = float_to_bf16_bits(g.c[77]);
  bits ^= 1u;
  g.c[77] = bf16_bits_to_float(bits);
  EXPECT_TRUE(check(g).empty());
}

TEST(Abft, ReferenceMatchesExactSumsOnSmallIntegers) {
  // With integer inputs everything is exact: the expected checksums are the true sums.
  const int m = 4, n = 3, k = 2;
  const std::vector<float> a = {1, 2, 3, 4, -1, 0, 2, 1};  // 4x2, column-major
  const std::vector<float> b = {1, 2, 0, 1, -2, 3};        // 2x3, column-major
  std::vector<float> c(m * n);
  cpu_gemm(a, b, c, m, n, k);
  const auto ref = abft_reference(a, b, m, n, k);
  const auto sums = abft_sums(c, m, n);
  for (int i = 0; i < m; ++i) EXPECT_DOUBLE_EQ(ref.row_expected[i], sums.row[i]);
  for (int j = 0; j < n; ++j) EXPECT_DOUBLE_EQ(ref.col_expected[j], sums.col[j]);
  // Row 0 of A is (1, -1); B*1 = (1 + 0 - 2, 2 + 1 + 3) = (-1, 6); row check = -1 - 6 = -7.
  EXPECT_DOUBLE_EQ(ref.row_expected[0], -7);
  // Q_0 = 1 * (1 + 0 + 4) + 1 * (4 + 1 + 9) = 19.
  EXPECT_DOUBLE_EQ(ref.row_q[0], 19);
}

}  // namespace
}  // namespace faultline::kernels
