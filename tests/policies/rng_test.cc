#include "policies/api/rng.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

namespace faultline {
namespace {

// Streams are part of every result: pinned values guard the byte-identical promise
// against a refactor of the seeding (these are today's draws, not a property of xoshiro).
TEST(Rng, StreamsArePinned) {
  Rng r({20250913ull, 7ull, 0xF9ull, 42ull, 3ull, 0ull});
  EXPECT_EQ(r.next_u64(), 9591790455823658588ull);
  r.next_u64();
  EXPECT_EQ(r.next_u64(), 2342712432290433109ull);
  EXPECT_EQ(Rng(1).next_u64(), 2300549287591251229ull);
}

// A prefix absorbed once gives the same stream as all keys at once, whatever the split.
TEST(Rng, PrefixGivesTheSameStreamAsAllKeys) {
  for (std::uint64_t m = 0; m < 200; ++m) {
    Rng whole({20250913ull, 7ull, 0xF9ull, m, 3ull, m * m});
    Rng split(Rng::prefix({20250913ull, 7ull, 0xF9ull}), {m, 3ull, m * m});
    Rng early(Rng::prefix({20250913ull}), {7ull, 0xF9ull, m, 3ull, m * m});
    for (int i = 0; i < 4; ++i) {
      const std::uint64_t w = whole.next_u64();
      ASSERT_EQ(split.next_u64(), w) << "machine " << m << " draw " << i;
      ASSERT_EQ(early.next_u64(), w) << "machine " << m << " draw " << i;
    }
  }
  // And the prefix matters: a different leading key is a different stream.
  EXPECT_NE(Rng(Rng::prefix({1}), {2}).next_u64(), Rng(Rng::prefix({2}), {2}).next_u64());
}

// Each stream's draws are independent of one another. Seeding all four state words with
// the same value made every stream's first two draws equal, so two questions asked of one
// fresh stream (a repair's "manual?" then "fixed?") were answered by one uniform.
TEST(Rng, SuccessiveDrawsOfAStreamAreIndependent) {
  constexpr int kStreams = 20000;
  int equal_first_two = 0;
  int first = 0, both = 0;
  for (int i = 0; i < kStreams; ++i) {
    Rng a({20250913ull, static_cast<std::uint64_t>(i), 0x4E9A1ull, 7ull, 0ull});
    if (a.next_u64() == a.next_u64()) ++equal_first_two;
    Rng b({20250913ull, static_cast<std::uint64_t>(i), 0x4E9A1ull, 7ull, 1ull});
    const bool q1 = b.bernoulli(0.3);
    const bool q2 = b.bernoulli(0.2);
    first += q1;
    both += q1 && q2;
  }
  EXPECT_EQ(equal_first_two, 0);
  // About 6,000 streams answer yes first; the second answer among them is Binomial(6000,
  // 0.2): standard deviation 0.005, so 0.03 is six of them.
  ASSERT_GT(first, 5000);
  EXPECT_NEAR(static_cast<double>(both) / first, 0.2, 0.03);
}

// Successes found by geometric skips are distributed as one Bernoulli draw per trial:
// Binomial(n, p) counts (mean and variance), at uniformly spread positions.
TEST(Rng, GeometricSkipsGiveBinomialCountsAtUniformPositions) {
  for (const double p : {0.003, 0.2}) {
    constexpr int kTrials = 20000, kN = 1000;
    double sum = 0, sum2 = 0, first_half = 0;
    for (int t = 0; t < kTrials; ++t) {
      Rng r({77ull, static_cast<std::uint64_t>(t)});
      int count = 0;
      for (std::uint64_t i = r.geometric(p); i < kN; i += 1 + r.geometric(p)) {
        ++count;
        first_half += i < kN / 2;
      }
      sum += count;
      sum2 += static_cast<double>(count) * count;
    }
    const double mean = sum / kTrials, var = sum2 / kTrials - mean * mean;
    const double want_mean = kN * p, want_var = kN * p * (1 - p);
    SCOPED_TRACE("p = " + std::to_string(p));
    EXPECT_NEAR(mean, want_mean, 4 * std::sqrt(want_var / kTrials));
    EXPECT_NEAR(var / want_var, 1.0, 0.05);
    EXPECT_NEAR(first_half / sum, 0.5, 4 * std::sqrt(0.25 / sum));
  }
  Rng r(3);
  EXPECT_EQ(r.geometric(1.0), 0u);
}

}  // namespace
}  // namespace faultline
