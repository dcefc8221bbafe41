// The analytic models against published numbers and values computed by hand.
#include "analysis/models.h"

#include <gtest/gtest.h>

#include <cmath>

#include "policies/checkpoint/plans.h"

namespace faultline::analysis {
namespace {

// ByteRobust §6: pools of 2, 2, 3, 4 standby machines for jobs of 128, 256, 512 and
// 1,024 machines, the 99th percentile of Binomial(N, p) with p ~ 1.2e-3 per day.
TEST(Standby, PublishedPoolSizes) {
  EXPECT_EQ(standby_pool_size(128, 1.2e-3, 0.99), 2);
  EXPECT_EQ(standby_pool_size(256, 1.2e-3, 0.99), 2);
  EXPECT_EQ(standby_pool_size(512, 1.2e-3, 0.99), 3);
  EXPECT_EQ(standby_pool_size(1024, 1.2e-3, 0.99), 4);
}

TEST(Standby, CdfMatchesHandComputedSums) {
  // (1-p)^128 + 128 p (1-p)^127, and the exact sums for 1,024 machines.
  EXPECT_NEAR(binomial_cdf(1, 128, 1.2e-3), 0.989411666280939, 1e-13);
  EXPECT_NEAR(binomial_cdf(4, 1024, 1.2e-3), 0.991525487931267, 1e-13);
  EXPECT_NEAR(binomial_cdf(3, 1024, 1.2e-3), 0.963775019171001, 1e-13);
  EXPECT_DOUBLE_EQ(binomial_cdf(-1, 10, 0.5), 0.0);
  EXPECT_DOUBLE_EQ(binomial_cdf(10, 10, 0.5), 1.0);
  EXPECT_NEAR(binomial_cdf(5, 10, 0.5), 638.0 / 1024.0, 1e-14);
}

TEST(Standby, StableForHugeJobsAndEdges) {
  // 10^6 machines at p = 1e-3: mean 1000, sd ~31.6; the 99th percentile is near
  // 1000 + 2.326 sd = 1073.6 (normal approximation), where a naive pmf underflows.
  const auto k = standby_pool_size(1'000'000, 1e-3, 0.99);
  EXPECT_GE(k, 1071);
  EXPECT_LE(k, 1076);
  EXPECT_GE(binomial_cdf(k, 1'000'000, 1e-3), 0.99);
  EXPECT_LT(binomial_cdf(k - 1, 1'000'000, 1e-3), 0.99);
  EXPECT_EQ(standby_pool_size(100, 0.0, 0.99), 0);
  EXPECT_EQ(standby_pool_size(100, 1.0, 0.99), 100);
  EXPECT_EQ(standby_pool_size(100, 1.5, 0.99), -1);
  EXPECT_EQ(standby_pool_size(0, 0.1, 0.99), 0);
}

TEST(Daly, MatchesHandComputedValues) {
  // tau / (M e^(R/M) (e^((tau+delta)/M) - 1)), computed separately.
  EXPECT_NEAR(daly_ettr(14400, 600, 3600, 300), 0.770912459055713, 1e-13);
  EXPECT_NEAR(daly_ettr(86400, 1800, 7200, 600), 0.863851419287759, 1e-13);
  // No failures in sight: ETTR tends to tau / (tau + delta).
  EXPECT_NEAR(daly_ettr(1e15, 0, 3600, 400), 0.9, 1e-9);
  EXPECT_TRUE(std::isnan(daly_ettr(0, 0, 1, 1)));
}

TEST(Daly, OptimumIsTheMaximumAndNearDalysEstimate) {
  for (double M : {3600.0, 14400.0, 86400.0}) {
    for (double d : {10.0, 300.0, 1800.0}) {
      const auto o = daly_optimal_interval(M, 600, d);
      EXPECT_GT(o.ettr, daly_ettr(M, 600, o.interval_s * 0.99, d)) << M << " " << d;
      EXPECT_GT(o.ettr, daly_ettr(M, 600, o.interval_s * 1.01, d)) << M << " " << d;
      EXPECT_NEAR(o.ettr, daly_ettr(M, 600, o.interval_s, d), 1e-15);
      // Daly's higher-order estimate is within a few percent of the true optimum.
      EXPECT_NEAR(daly_interval_estimate(d, M), o.interval_s, 0.05 * o.interval_s) << M << " " << d;
    }
  }
  // The restart cost scales ETTR but does not move the optimum.
  EXPECT_NEAR(daly_optimal_interval(14400, 0, 300).interval_s,
              daly_optimal_interval(14400, 3000, 300).interval_s, 1e-6);
  EXPECT_DOUBLE_EQ(daly_optimal_interval(14400, 0, 0).interval_s, 0.0);
}

// The daly checkpoint module's interval (policies/checkpoint, the formula
// daly_interval_estimate uses) is within 0.05% ETTR of the numeric optimum of Daly's exact
// ETTR, found independently by search.
TEST(Daly, TheCheckpointModuleIntervalIsNearTheExactOptimum) {
  for (double M : {600.0, 3600.0, 4 * 3600.0, 24 * 3600.0})
    for (double d : {1.0, 6.77, 60.0, 600.0}) {
      const Optimum o = daly_optimal_interval(M, 60, d);
      EXPECT_NEAR(daly_ettr(M, 60, policies::daly_optimum_s(d, M), d), o.ettr, 5e-4)
          << M << " " << d;
    }
}

TEST(Young, SqrtTwoDeltaM) {
  EXPECT_NEAR(young_interval(300, 14400), 2939.38769133981, 1e-9);
  EXPECT_DOUBLE_EQ(young_interval(0, 14400), 0.0);
  // Young's first-order optimum approaches Daly's when delta << M.
  EXPECT_NEAR(young_interval(1, 1e6) / daly_optimal_interval(1e6, 0, 1).interval_s, 1.0, 1e-3);
}

TEST(Meta, MatchesHandComputedValuesAndUnits) {
  // N r = 1200 x 1e-3 per day = 1.2 / 86400 per second.
  EXPECT_NEAR(meta_ettr(1200, 1e-3, 600, 1800, 6.77), 0.975497711385511, 1e-13);
  EXPECT_NEAR(meta_best_interval(1200, 1e-3, 6.77), 987.360116674762, 1e-9);
  // The best interval maximises the approximation.
  const double best = meta_best_interval(1200, 1e-3, 6.77);
  EXPECT_GT(meta_ettr(1200, 1e-3, 600, best, 6.77), meta_ettr(1200, 1e-3, 600, best * 1.1, 6.77));
  EXPECT_GT(meta_ettr(1200, 1e-3, 600, best, 6.77), meta_ettr(1200, 1e-3, 600, best * 0.9, 6.77));
  // Small losses: Meta's approximation is close to Daly's exact value (M = 1/(N r)).
  const double M = 86400.0 / 1.2;
  EXPECT_NEAR(meta_ettr(1200, 1e-3, 600, 1800, 6.77), daly_ettr(M, 600, 1800, 6.77), 0.002);
}

}  // namespace
}  // namespace faultline::analysis
