// Fault arrivals: a job of N machines with per-machine rate λ sees faults at N·λ,
// for Poisson and for Weibull renewal processes (started in equilibrium).
#include "sim/faults.h"

#include <gtest/gtest.h>

#include <cmath>

namespace faultline::sim {
namespace {

scenarios::FaultCategory category(double rate, double shape, scenarios::FaultScope scope) {
  scenarios::FaultCategory c;
  c.name = "x";
  c.rate_per_machine_day = rate;
  c.weibull_shape = shape;
  c.scope = scope;
  return c;
}

// Mean count over replicas and its standard error.
std::pair<double, double> count(const scenarios::FaultCategory& c, int machines, double days,
                                int reps) {
  const std::int64_t horizon = static_cast<std::int64_t>(days * 86400e9);
  double sum = 0, sum2 = 0;
  for (int r = 0; r < reps; ++r) {
    FaultStream s({c}, machines, 16, 99, r);
    double n = 0;
    while (s.peek_time() < horizon) {
      s.next();
      ++n;
    }
    sum += n;
    sum2 += n * n;
  }
  const double mean = sum / reps;
  const double var = sum2 / reps - mean * mean;
  return {mean, std::sqrt(var / reps)};
}

TEST(FaultStream, PoissonMachineFaultsArriveAtNLambda) {
  const int n = 1200;
  const double lambda = 1e-3, days = 90;
  auto [mean, se] = count(category(lambda, 1, scenarios::FaultScope::kMachine), n, days, 400);
  const double expected = n * lambda * days;  // 108
  EXPECT_NEAR(mean, expected, 4 * se) << "se " << se;
  EXPECT_NEAR(se, std::sqrt(expected / 400), 0.2 * std::sqrt(expected / 400));  // Poisson variance
}

// Lognormal renewal (faults.categories[].lognormal_sigma): mean-matched to the rate, so the
// job still sees N·λ, and the log of a slot's gaps has the stated sigma.
TEST(FaultStream, LognormalRenewalArrivesAtNLambdaWithTheStatedSigma) {
  const int n = 200;
  const double lambda = 2e-3, days = 365, sigma = 1.2;
  scenarios::FaultCategory c = category(lambda, 1, scenarios::FaultScope::kMachine);
  c.lognormal_sigma = sigma;
  auto [mean, se] = count(c, n, days, 200);
  EXPECT_NEAR(mean, n * lambda * days, 4 * se) << "se " << se;
  // Gaps of each slot over a long run: their log has sd sigma and mean ln(1/λ) - sigma²/2.
  FaultStream s({c}, 20, 16, 5, 0);
  std::vector<std::int64_t> last(20, -1);
  double sum = 0, sum2 = 0, k = 0;
  const std::int64_t horizon = static_cast<std::int64_t>(20000 * 86400e9);
  while (s.peek_time() < horizon) {
    const FaultArrival a = s.next();
    if (last[a.slot] >= 0) {
      const double g = std::log((a.at_ns - last[a.slot]) / 86400e9);
      sum += g;
      sum2 += g * g;
      ++k;
    }
    last[a.slot] = a.at_ns;
  }
  const double m = sum / k, sd = std::sqrt(sum2 / k - m * m);
  EXPECT_NEAR(sd, sigma, 0.05);
  EXPECT_NEAR(m, std::log(1 / lambda) - sigma * sigma / 2, 0.08);
}

TEST(FaultStream, WeibullRenewalInEquilibriumArrivesAtNLambda) {
  const int n = 300;
  const double lambda = 2e-3, days = 60;
  for (double shape : {0.7, 1.5}) {
    auto [mean, se] = count(category(lambda, shape, scenarios::FaultScope::kMachine), n, days, 300);
    EXPECT_NEAR(mean, n * lambda * days, 4 * se) << "shape " << shape;
  }
}

TEST(FaultStream, RackScopeTargetsFirstSlotOfARack) {
  FaultStream s({category(1e-2, 1, scenarios::FaultScope::kRack)}, 64, 16, 1, 0);
  for (int i = 0; i < 50; ++i) {
    FaultArrival a = s.next();
    EXPECT_EQ(a.slot % 16, 0);
    EXPECT_LT(a.slot, 64);
  }
}

TEST(FaultStream, SameSeedSameArrivalsDifferentReplicaDifferent) {
  auto c = category(1e-2, 1, scenarios::FaultScope::kMachine);
  FaultStream a({c}, 100, 16, 5, 3), b({c}, 100, 16, 5, 3), d({c}, 100, 16, 5, 4);
  const FaultArrival x = a.next(), y = b.next(), z = d.next();
  EXPECT_EQ(x.at_ns, y.at_ns);
  EXPECT_EQ(x.slot, y.slot);
  EXPECT_NE(x.at_ns, z.at_ns);
}

}  // namespace
}  // namespace faultline::sim
