// Maximum-likelihood fits against closed forms and known parameters, and the round
// trip fit -> generate -> stats.
#include "traces/fit.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "traces/model.h"
#include "traces/readers.h"
#include "traces/stats.h"
#include "tests/support/shared_data.h"

namespace faultline::traces {
namespace {

std::vector<double> draw(int n, std::uint64_t seed, const std::function<double(Rng&)>& f) {
  Rng rng({seed});
  std::vector<double> xs(static_cast<std::size_t>(n));
  for (auto& x : xs) x = f(rng);
  return xs;
}

TEST(Fit, ExponentialMleIsOneOverTheMean) {
  const auto xs = draw(1000, 1, [](Rng& r) { return r.exponential(3.0); });
  double mean = 0;
  for (double x : xs) mean += x;
  mean /= static_cast<double>(xs.size());
  const FitResult r = fit_exponential({xs, {}});
  ASSERT_TRUE(r.ok);
  EXPECT_DOUBLE_EQ(r.dist.a, 1 / mean);
  // log L = n log(rate) - rate * sum = -n (log mean + 1)
  EXPECT_NEAR(r.loglik, -1000 * (std::log(mean) + 1), 1e-6);
  EXPECT_NEAR(r.aic, 2 - 2 * r.loglik, 1e-9);
}

TEST(Fit, CensoredExponentialIsEventsOverExposure) {
  const FitResult r = fit_exponential({{1, 2, 3}, {10, 10}});
  ASSERT_TRUE(r.ok);
  EXPECT_DOUBLE_EQ(r.dist.a, 3.0 / 26.0);
}

TEST(Fit, WeibullShapeRecoveredFromKnownSamples) {
  for (double k : {0.5, 0.8, 1.0, 1.5, 3.0}) {
    const int n = 4000;
    const auto xs =
        draw(n, 7 + static_cast<std::uint64_t>(k * 10), [&](Rng& r) { return r.weibull(k, 50.0); });
    const FitResult r = fit_weibull({xs, {}});
    ASSERT_TRUE(r.ok) << r.note;
    // Asymptotic sd of the shape MLE: k * sqrt(6) / pi / sqrt(n) ~ 0.78 k / sqrt(n).
    const double se = 0.78 * k / std::sqrt(static_cast<double>(n));
    EXPECT_NEAR(r.dist.a, k, 4 * se) << "shape " << k;
    EXPECT_NEAR(r.dist.b, 50.0, 50.0 * 6 / (k * std::sqrt(static_cast<double>(n))))
        << "shape " << k;
    EXPECT_LT(r.ks, 1.63 / std::sqrt(static_cast<double>(n)));  // KS 1% critical value
    EXPECT_LT(r.iterations, 60);
  }
}

TEST(Fit, WeibullWithCensoringStillRecoversShape) {
  // Censor every draw above 80: the likelihood, not the truncated sample, carries it.
  const auto xs = draw(5000, 3, [](Rng& r) { return r.weibull(0.7, 40.0); });
  Sample s;
  for (double x : xs) (x > 80 ? s.censored : s.observed).push_back(x > 80 ? 80 : x);
  ASSERT_GT(s.censored.size(), 500u);
  const FitResult r = fit_weibull(s);
  ASSERT_TRUE(r.ok);
  EXPECT_NEAR(r.dist.a, 0.7, 0.05);
  EXPECT_NEAR(r.dist.b, 40.0, 5.0);
}

TEST(Fit, LognormalClosedFormAndCensoredNewton) {
  const auto xs = draw(3000, 11, [](Rng& r) { return r.lognormal(2.0, 0.8); });
  double m = 0, v = 0;
  for (double x : xs) m += std::log(x);
  m /= 3000;
  for (double x : xs) v += (std::log(x) - m) * (std::log(x) - m);
  const FitResult r = fit_lognormal({xs, {}});
  ASSERT_TRUE(r.ok);
  EXPECT_DOUBLE_EQ(r.dist.a, m);
  EXPECT_NEAR(r.dist.b, std::sqrt(v / 3000), 1e-12);
  Sample s;
  for (double x : xs) (x > 15 ? s.censored : s.observed).push_back(x > 15 ? 15 : x);
  const FitResult c = fit_lognormal(s);
  ASSERT_TRUE(c.ok) << c.note;
  EXPECT_NEAR(c.dist.a, 2.0, 0.06);
  EXPECT_NEAR(c.dist.b, 0.8, 0.06);
}

TEST(Fit, AicPicksTheGeneratingFamily) {
  const auto w = draw(3000, 5, [](Rng& r) { return r.weibull(0.6, 10.0); });
  EXPECT_EQ(fit_all({w, {}}).best()->dist.family, Family::kWeibull);
  const auto l = draw(3000, 6, [](Rng& r) { return r.lognormal(1.0, 1.5); });
  EXPECT_EQ(fit_all({l, {}}).best()->dist.family, Family::kLognormal);
}

TEST(Fit, DegenerateSamplesAreNotOk) {
  EXPECT_FALSE(fit_weibull({{5, 5, 5, 5}, {}}).ok);
  EXPECT_FALSE(fit_lognormal({{5, 5, 5}, {}}).ok);
  EXPECT_FALSE(fit_exponential({{}, {3}}).ok);
  const FitSet z = fit_all({{0, 0, 1, 2, 3, NAN}, {}});
  EXPECT_EQ(z.dropped, 3u);
  EXPECT_EQ(z.observed, 3u);
}

TEST(Fit, KolmogorovSmirnovWithoutCensoringIsTheClassicStatistic) {
  Dist d;
  d.family = Family::kExponential;
  d.a = 1;
  // Sample {1}: the ECDF jumps 0 -> 1 at 1 where F(1) = 0.632; D = max(0.632, 1 - 0.632).
  EXPECT_NEAR(ks_statistic(d, {{1}, {}}), 1 - std::exp(-1.0), 1e-12);
  // Sample {1, 2}: steps at 1/2 and 1.
  const double f1 = 1 - std::exp(-1.0), f2 = 1 - std::exp(-2.0);
  EXPECT_NEAR(ks_statistic(d, {{2, 1}, {}}), std::max({f1, 0.5 - f1, f2 - 0.5, 1 - f2}), 1e-12);
}

// Source trace: a fleet with per-node Weibull(0.7) gaps and lognormal repairs, two classes.
Trace synthetic_source(std::uint64_t seed) {
  TraceFit f;
  f.source = "synthetic";
  f.fleet_nodes = 800;
  f.window_days = 300;
  auto group = [](const char* name, double rate, double shape, double mu, double sigma) {
    GroupFit g;
    g.name = name;
    g.rate_per_node_day = rate;
    g.members = {{Category{"L", name, "d"}, 1}};
    g.tbf_days.observed = 1000;
    g.tbf_days.exponential.ok = g.tbf_days.weibull.ok = true;
    g.tbf_days.exponential.aic = 1;
    g.tbf_days.weibull.aic = 0;
    g.tbf_days.weibull.dist = {Family::kWeibull, shape, 1};
    g.repair_h.observed = 1000;
    g.repair_h.lognormal.ok = true;
    g.repair_h.lognormal.aic = 0;
    g.repair_h.lognormal.dist = {Family::kLognormal, mu, sigma};
    return g;
  };
  f.by_class = {group("GPU", 3e-3, 0.7, std::log(20.0), 1.5),
                group("NIC", 1e-3, 1.0, std::log(5.0), 1.0)};
  f.overall = f.by_class[0];
  GenerateOptions o;
  o.seed = seed;
  return generate_trace(f, o);
}

void expect_round_trip(const Trace& source, int replicas) {
  const TraceStats s0 = compute_stats(source);
  const TraceFit fit = fit_trace(source);
  double rate = 0, median = 0;
  for (int k = 0; k < replicas; ++k) {
    GenerateOptions o;
    o.seed = 1000 + static_cast<std::uint64_t>(k);
    const TraceStats s = compute_stats(generate_trace(fit, o));
    EXPECT_EQ(s.fleet_nodes, s0.fleet_nodes);
    rate += s.faults_per_1000_node_days / replicas;
    median += s.repair_h.median / replicas;
  }
  // Sampling error of the source rate, with nodes as the independent units (faults
  // cluster on nodes, so this is wider than Poisson): sd of the per-node counts.
  const PairingResult p = pair_faults(source);
  std::vector<double> per_node(static_cast<std::size_t>(s0.fleet_nodes), 0.0);
  for (const FaultSpan& f : p.faults) per_node[static_cast<std::size_t>(f.node)] += 1;
  const Summary c = summarize(per_node);
  const double n = static_cast<double>(s0.faults);
  const double rate_se =
      s0.faults_per_1000_node_days * c.stddev * std::sqrt(static_cast<double>(c.n)) / n;
  // The median of n lognormal repairs: sd ~ 1.2533 sigma m / sqrt(n).
  EXPECT_NEAR(rate, s0.faults_per_1000_node_days, 3 * rate_se) << "rate";
  const FitResult* rep = fit.overall.repair_h.best();
  ASSERT_NE(rep, nullptr);
  const double sigma = rep->dist.family == Family::kLognormal ? rep->dist.b : 1.5;
  const double median_se = 1.2533 * sigma * s0.repair_h.median / std::sqrt(n);
  EXPECT_NEAR(median, s0.repair_h.median, 3 * median_se) << "repair median";
}

TEST(FitRoundTrip, SyntheticSourceRatesAndRepairMediansComeBack) {
  expect_round_trip(synthetic_source(42), 8);
}

TEST(FitRoundTrip, InfiniteHbdRatesAndRepairMediansComeBack) {
  const std::string path = FAULTLINE_SOURCE_DIR "/../shared/traces/infinitehbd/fault_trace.json";
  FAULTLINE_REQUIRE_SHARED(path);
  ReadResult r = read_trace_file(path, Format::kInfiniteHbd, {});
  ASSERT_TRUE(r.ok());
  r.trace.sort_by_time();
  expect_round_trip(r.trace, 20);
}

TEST(FitTrace, RatesAreFaultsOverFleetExposure) {
  const std::string path = FAULTLINE_SOURCE_DIR "/../shared/traces/infinitehbd/fault_trace.json";
  FAULTLINE_REQUIRE_SHARED(path);
  ReadResult r = read_trace_file(path, Format::kInfiniteHbd, {});
  const TraceFit f = fit_trace(r.trace);
  EXPECT_EQ(f.fleet_nodes, 400);
  EXPECT_NEAR(f.overall.rate_per_node_day * 1000, 4.2308, 5e-4);
  // 400 fleet nodes: 231 faulty ones end censored, 169 fault-free ones are censored windows.
  EXPECT_EQ(f.overall.tbf_days.censored, 400u);
  EXPECT_EQ(f.overall.tbf_days.observed + f.overall.tbf_days.dropped, 584u);
  // With censoring the exponential rate is the empirical one (up to the dropped zero gaps).
  EXPECT_NEAR(f.overall.tbf_days.exponential.dist.a, f.overall.rate_per_node_day,
              0.01 * f.overall.rate_per_node_day);
  // Faults cluster on nodes: the Weibull shape is well below 1 and beats the exponential.
  ASSERT_TRUE(f.overall.tbf_days.weibull.ok);
  EXPECT_LT(f.overall.tbf_days.weibull.dist.a, 0.7);
  EXPECT_EQ(f.overall.tbf_days.best()->dist.family, Family::kWeibull);
  EXPECT_EQ(f.by_class.front().name, "GPU");
  EXPECT_EQ(f.by_class.front().faults, 158u);
  const auto j = fit_json(f);
  EXPECT_EQ(j["overall"]["tbf_days"]["best"], "weibull");
}

}  // namespace
}  // namespace faultline::traces
