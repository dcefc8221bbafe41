// Maximum-likelihood fits against closed forms and known parameters, and the round
// trip fit -> generate -> stats.
#include "traces/fit.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>

#include "tests/support/shared_data.h"
#include "traces/category_map.h"
#include "traces/model.h"
#include "traces/readers.h"
#include "traces/stats.h"

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
  // The same sums in another order: equal to the last few bits.
  EXPECT_NEAR(r.dist.a, m, 1e-12);
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

// Issue 50: the recommendation names one family, and `trace fit -o` writes that one: the
// exponential where the test does not reject it, else the two-parameter family with the
// lower AIC.
TEST(Fit, RecommendationIsTheTestThenTheLowerAic) {
  const auto e = draw(1000, 2, [](Rng& r) { return r.exponential(4.0); });
  const FitSet fe = fit_all({e, {}});
  ASSERT_TRUE(fe.lr.ok);
  EXPECT_FALSE(fe.lr.exponential_rejected) << fe.lr.p_value;
  EXPECT_EQ(fe.lr.recommended, Family::kExponential);
  EXPECT_EQ(fe.recommended(), &fe.exponential);
  const auto w = draw(3000, 5, [](Rng& r) { return r.weibull(0.6, 10.0); });
  const FitSet fw = fit_all({w, {}});
  EXPECT_EQ(fw.lr.recommended, Family::kWeibull);
  EXPECT_EQ(fw.recommended(), &fw.weibull);
  EXPECT_NE(fw.lr.recommendation.find("use the Weibull, shape 0.6"), std::string::npos)
      << fw.lr.recommendation;
  EXPECT_NE(fw.lr.recommendation.find("below the lognormal's"), std::string::npos);
  const auto l = draw(3000, 6, [](Rng& r) { return r.lognormal(1.0, 1.5); });
  const FitSet fl = fit_all({l, {}});
  ASSERT_TRUE(fl.lr.exponential_rejected);
  EXPECT_EQ(fl.lr.recommended, Family::kLognormal);
  EXPECT_EQ(fl.recommended(), &fl.lognormal);
  char sigma[64];
  std::snprintf(sigma, sizeof sigma, "use the lognormal, sigma %.3g [", fl.lognormal.dist.b);
  EXPECT_NE(fl.lr.recommendation.find(sigma), std::string::npos) << fl.lr.recommendation;
  // Without the lognormal the Weibull is the only alternative.
  EXPECT_EQ(lr_test(fl.exponential, fl.weibull).recommended, Family::kWeibull);
  EXPECT_EQ(fitset_json(fl)["recommended"], "lognormal");
  // No test where the Weibull does not fit: the line says so and names the exponential.
  const FitSet equal = fit_all({{5, 5, 5, 5, 5, 5}, {}});
  EXPECT_FALSE(equal.lr.ok);
  EXPECT_EQ(equal.recommended(), &equal.exponential);
  EXPECT_EQ(equal.lr.recommendation,
            "no likelihood-ratio test (Weibull: shape beyond 1000 (values nearly equal)): use the "
            "exponential, one parameter");
  EXPECT_EQ(fitset_json(equal)["recommendation"], equal.lr.recommendation);
  EXPECT_EQ(fitset_json(equal)["recommended"], "exponential");
  // Nothing fits: nothing to say.
  const FitSet none = fit_all({{}, {3}});
  EXPECT_EQ(none.lr.recommendation, "");
  EXPECT_EQ(none.recommended(), nullptr);
  EXPECT_TRUE(fitset_json(none)["recommended"].is_null());
}

// A fleet of 2,000 nodes whose 54 faults of one class all sit on one host: the lognormal,
// which the test recommends, has sigma 11.2 (a mean gap of 1e39 days), beyond the
// schema's 10. The model is refused, not clipped; the report flags the fit.
TEST(FitModel, AFitOutsideTheSchemaIsRefused) {
  Trace t;
  t.fleet_nodes = 2000;
  const double days = 345;
  t.window = std::make_pair(0.0, days * 86400);
  const auto cat = t.intern_category("Other", "Pseudo", "");
  const auto host = t.intern_node("pseudo-host");
  Rng rng({1});
  for (int k = 0; k < 54; ++k) {
    Event e;
    e.time_s = rng.uniform() * days * 86400;
    e.node = host;
    e.category = cat;
    e.kind = EventKind::kFault;
    e.duration_s = 3600;
    t.events.push_back(e);
  }
  t.sort_by_time();
  const TraceFit f = fit_trace(t);
  const FitSet& tbf = f.by_class[0].tbf_days;
  ASSERT_EQ(tbf.lr.recommended, Family::kLognormal) << tbf.lr.recommendation;
  const double sigma = tbf.lognormal.dist.b;
  EXPECT_GT(sigma, 10);
  const ModelField mf = model_field(tbf.lognormal.dist);
  EXPECT_FALSE(mf.within());
  EXPECT_EQ(mf.range, &kLognormalSigmaRange);
  const FaultModel m = fault_model(t, identity_category_map(t), {});
  EXPECT_FALSE(m.ok());
  EXPECT_TRUE(m.model.is_null());
  ASSERT_EQ(m.refused.size(), 1u);
  char fitted[32];
  std::snprintf(fitted, sizeof fitted, "lognormal_sigma %.4g ", sigma);
  EXPECT_EQ(m.refused[0].rfind(std::string("category \"pseudo\": ") + fitted, 0), 0u)
      << m.refused[0];
  EXPECT_NE(m.refused[0].find("is outside the scenario schema's (0, 10]"), std::string::npos);
  const std::string table = fit_table(f);
  EXPECT_NE(table.find(std::string("    ! ") + fitted +
                       "is outside the scenario schema's (0, 10]: no fault model can hold"),
            std::string::npos)
      << table;
  const auto j = fit_json(f)["by_class"][0]["tbf_days"]["scenario_field"];
  EXPECT_EQ(j["key"], "lognormal_sigma");
  EXPECT_EQ(j["value"], sigma);
  EXPECT_EQ(j["allowed"], "(0, 10]");
  EXPECT_FALSE(j["within_schema"].get<bool>());
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

// ---------------------------------------------------------------- confidence intervals

TEST(FitCi, ExponentialWaldIntervalIsTheClosedForm) {
  // Exact data: rate = n / sum t and the observed information of log rate is n, so
  // Var(log rate) = 1/n and the 95% interval is rate * exp(-+1.96 / sqrt n).
  const int n = 400;
  const auto xs = draw(n, 21, [](Rng& r) { return r.exponential(3.0); });
  double sum = 0;
  for (double x : xs) sum += x;
  const FitResult r = fit_exponential({xs, {}});
  ASSERT_TRUE(r.ok);
  const double rate = n / sum, z = 1.959963984540054;
  EXPECT_DOUBLE_EQ(r.dist.a, rate);
  EXPECT_NEAR(r.ci_a.se, 1 / std::sqrt(static_cast<double>(n)), 1e-7);
  EXPECT_NEAR(r.ci_a.lo, rate * std::exp(-z / std::sqrt(static_cast<double>(n))), 1e-7 * rate);
  EXPECT_NEAR(r.ci_a.hi, rate * std::exp(z / std::sqrt(static_cast<double>(n))), 1e-7 * rate);
  // Right-censored: the information of log rate is the number of events, d.
  const FitResult c = fit_exponential({{1, 2, 3}, {10, 10}});
  // (Central differences of a log-likelihood of about -10: within a few 1e-7.)
  EXPECT_NEAR(c.ci_a.se, 1 / std::sqrt(3.0), 1e-6);
  EXPECT_NEAR(c.ci_a.hi, 3.0 / 26.0 * std::exp(z / std::sqrt(3.0)), 1e-6 * c.ci_a.hi);
}

TEST(FitCi, WeibullAndLognormalIntervalsMatchTheirAsymptoticWidths) {
  // Exact Weibull data: sd(log shape) ~ (sqrt 6 / pi) / sqrt n (the inverse Fisher
  // information); lognormal: sd(mu) = sigma / sqrt n, sd(log sigma) = 1 / sqrt(2n).
  const int n = 2000;
  const auto w = draw(n, 22, [](Rng& r) { return r.weibull(0.7, 10.0); });
  const FitResult fw = fit_weibull({w, {}});
  ASSERT_TRUE(fw.ok);
  EXPECT_NEAR(fw.ci_a.se, std::sqrt(6.0) / M_PI / std::sqrt(double{n}),
              0.05 / std::sqrt(double{n}));
  EXPECT_LT(fw.ci_a.lo, fw.dist.a);
  EXPECT_GT(fw.ci_a.hi, fw.dist.a);
  const auto l = draw(n, 23, [](Rng& r) { return r.lognormal(1.0, 0.5); });
  const FitResult fl = fit_lognormal({l, {}});
  ASSERT_TRUE(fl.ok);
  EXPECT_NEAR(fl.ci_a.se, fl.dist.b / std::sqrt(double{n}), 1e-6);
  EXPECT_NEAR(fl.ci_b.se, 1 / std::sqrt(2.0 * n), 1e-6);
  EXPECT_NEAR(fl.ci_a.hi - fl.dist.a, 1.959963984540054 * fl.dist.b / std::sqrt(double{n}), 1e-6);
}

// ---------------------------------------------------------------- interval censoring

TEST(FitInterval, LogIntervalIsStableInBothTails) {
  const Dist w{Family::kWeibull, 2.0, 1.0};
  // Where the direct difference is accurate, they agree.
  EXPECT_NEAR(w.log_interval(0.5, 1.5), std::log(w.cdf(1.5) - w.cdf(0.5)), 1e-12);
  EXPECT_NEAR(w.log_interval(0, 0.7), std::log(w.cdf(0.7)), 1e-12);
  EXPECT_DOUBLE_EQ(w.log_interval(2, INFINITY), w.log_survival(2));
  // Far upper tail: S(30) = e^-900 underflows, the log-space difference does not.
  EXPECT_NEAR(w.log_interval(30, 31), -900 + std::log1p(-std::exp(-61.0)), 1e-9);
  // Far lower tail of a lognormal: F(e^-40) is negligible next to F(e^-39) = Phi(-39),
  // whose log is -z^2/2 - log z - log sqrt(2 pi) (1 - 1/z^2 + ...).
  const Dist ln{Family::kLognormal, 0.0, 1.0};
  const double z = 39, expect = -0.5 * z * z - std::log(z) - 0.91893853320467274 - 1 / (z * z);
  EXPECT_NEAR(ln.log_interval(std::exp(-40.0), std::exp(-39.0)), expect, 1e-5);
  EXPECT_EQ(w.log_interval(1, 1), -INFINITY);
}

// Periodic inspection: every `every` time units until a follow-up end drawn per unit; a
// failure is seen only as the window between the last healthy inspection and the one
// that found it (20% crash loudly and are seen exactly); one still healthy at its last
// inspection is right-censored there.
Sample inspected(int n, Rng& rng, const std::function<double(Rng&)>& draw_x, double every) {
  Sample s;
  for (int i = 0; i < n; ++i) {
    const double x = draw_x(rng);
    const double follow = 5 + 35 * rng.uniform();
    const double last = std::floor(follow / every) * every;
    const bool loud = rng.uniform() < 0.2;
    if (x > last) {
      s.censored.push_back(last);
    } else if (loud) {
      s.observed.push_back(x);
    } else {
      const double lo = std::floor(x / every) * every;
      s.intervals.emplace_back(lo, lo + every);
    }
  }
  return s;
}

TEST(FitInterval, WeibullShapeCoverageUnderPeriodicInspection) {
  // 200 seeded traces of 150 nodes, Weibull(shape 0.7, scale 10) failures found by
  // inspections every 2 time units, some followed only 5 time units.
  const int traces = 200, n = 150;
  const double shape = 0.7;
  int covered = 0, ok = 0;
  double mean_shape = 0, mean_old = 0;
  for (int k = 0; k < traces; ++k) {
    Rng rng({9000 + static_cast<std::uint64_t>(k)});
    const Sample s = inspected(
        n, rng, [&](Rng& r) { return r.weibull(shape, 10.0); }, 2.0);
    const FitResult r = fit_weibull(s);
    ASSERT_TRUE(r.ok) << r.note;
    ASSERT_TRUE(std::isfinite(r.ci_a.lo) && std::isfinite(r.ci_a.hi)) << r.note;
    ++ok;
    covered += r.ci_a.lo <= shape && shape <= r.ci_a.hi;
    mean_shape += r.dist.a / traces;
    // The old reading: each failure at the start of its window (zero starts dropped).
    Sample old{s.observed, s.censored, {}};
    for (const auto& [lo, hi] : s.intervals) old.observed.push_back(lo);
    mean_old += fit_weibull(old).dist.a / traces;
  }
  const double coverage = static_cast<double>(covered) / ok;
  std::printf(
      "[ figures  ] 95%% CI coverage of shape %.3f (%d/%d), mean shape %.4f; "
      "failures at window starts: mean shape %.4f\n",
      coverage, covered, ok, mean_shape, mean_old);
  EXPECT_GE(coverage, 0.90);
  EXPECT_LE(coverage, 0.99);
  EXPECT_NEAR(mean_shape, shape, 0.03);
  // The test can fail: the old reading is far off.
  EXPECT_GT(std::fabs(mean_old - shape), 0.05);
}

TEST(FitInterval, ExponentialNotRejectedOnExponentialData) {
  // A 5%-level test rejects a true exponential in 5 of 100 seeds on average (sd 2.2):
  // at least 88 not rejected. On Weibull(0.7) data of the same design it rejects.
  int not_rejected = 0, rejected_weibull = 0;
  for (int k = 0; k < 100; ++k) {
    Rng rng({7000 + static_cast<std::uint64_t>(k)});
    const FitSet e = fit_all(inspected(
        150, rng, [](Rng& r) { return r.exponential(10.0); }, 2.0));
    ASSERT_TRUE(e.lr.ok);
    if (!e.lr.exponential_rejected) {
      ++not_rejected;
      EXPECT_EQ(e.lr.recommended, Family::kExponential);
      EXPECT_EQ(e.lr.recommendation.rfind("exponential not rejected against Weibull (LR p = ", 0),
                0u)
          << e.lr.recommendation;
      EXPECT_NE(e.lr.recommendation.find("use the exponential, one parameter"), std::string::npos);
    }
    const FitSet w = fit_all(inspected(
        150, rng, [](Rng& r) { return r.weibull(0.7, 10.0); }, 2.0));
    ASSERT_TRUE(w.lr.ok);
    rejected_weibull += w.lr.exponential_rejected;
  }
  std::printf(
      "[ figures  ] exponential data: not rejected in %d/100; Weibull(0.7) data: "
      "rejected in %d/100\n",
      not_rejected, rejected_weibull);
  EXPECT_GE(not_rejected, 88);
  EXPECT_GE(rejected_weibull, 80);
}

TEST(FitInterval, LikelihoodRatioPValueIsChiSquaredOneDf) {
  // P(chi2_1 > 3.841459) = 0.05; P(chi2_1 > 1) = 2 (1 - Phi(1)) = 0.317311.
  EXPECT_NEAR(chi2_1_sf(3.841458820694124), 0.05, 1e-12);
  EXPECT_NEAR(chi2_1_sf(1.0), 0.31731050786291415, 1e-12);
  EXPECT_EQ(chi2_1_sf(0), 1.0);
}

TEST(FitInterval, IntervalsAreCleanedAndReported) {
  // [L, L] is exact, [L, inf) is censored, bad ones are dropped.
  Sample s;
  s.observed = {1, 2, 3, 4, 5, 6};
  s.intervals = {{2, 2}, {3, INFINITY}, {-1, 2}, {5, 4}, {NAN, 1}, {0, 1}, {1, 2.5}};
  const FitSet f = fit_all(s);
  EXPECT_EQ(f.observed, 7u);
  EXPECT_EQ(f.censored, 1u);
  EXPECT_EQ(f.intervals, 2u);
  EXPECT_EQ(f.dropped, 3u);
  ASSERT_TRUE(f.weibull.ok) << f.weibull.note;
  EXPECT_TRUE(std::isnan(f.weibull.ks));  // Kaplan-Meier does not hold intervals
  const auto j = fitset_json(f);
  EXPECT_EQ(j["intervals"], 2);
  EXPECT_EQ(j["ci_level"], 0.95);
  EXPECT_TRUE(j["ci_method"].get<std::string>().rfind("wald", 0) == 0);
  ASSERT_EQ(j["weibull"]["ci"]["shape"].size(), 2u);
  EXPECT_TRUE(j["weibull"]["ks"].is_null());
  EXPECT_EQ(j["lr_test"]["df"], 1);
  EXPECT_EQ(j["recommendation"], f.lr.recommendation);
  // Same sample, same bytes.
  EXPECT_EQ(j.dump(), fitset_json(fit_all(s)).dump());
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
  const std::string path = ::faultline::testing::shared_trace("infinitehbd/fault_trace.json");
  FAULTLINE_REQUIRE_SHARED(path);
  ReadResult r = read_trace_file(path, Format::kInfiniteHbd, {});
  ASSERT_TRUE(r.ok());
  r.trace.sort_by_time();
  expect_round_trip(r.trace, 20);
}

TEST(FitTrace, RatesAreFaultsOverFleetExposure) {
  const std::string path = ::faultline::testing::shared_trace("infinitehbd/fault_trace.json");
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

TEST(FitTrace, TimeResolutionReadsCoarseFaultTimesAsIntervals) {
  // A fleet whose GPU faults have Weibull(0.7) gaps, its times then kept only to the
  // month (30 days, floored) as a monthly report would: read as exact, the gaps are
  // multiples of 30 days and the zero ones are dropped; with the resolution they are
  // intervals and the shape comes back near the exact-time fit's.
  const double month = 30 * 86400.0;
  const Trace exact = synthetic_source(42);
  Trace coarse = exact;
  for (Event& e : coarse.events) e.time_s = std::floor(e.time_s / month) * month;
  auto gpu = [](const TraceFit& f) -> const GroupFit& {
    for (const GroupFit& g : f.by_class)
      if (g.name == "GPU") return g;
    return f.overall;
  };
  const TraceFit fe = fit_trace(exact);
  const TraceFit fc = fit_trace(coarse);
  FitOptions o;
  o.time_resolution_s = month;
  const TraceFit fr = fit_trace(coarse, o);
  const FitResult &we = gpu(fe).tbf_days.weibull, &wc = gpu(fc).tbf_days.weibull,
                  &wr = gpu(fr).tbf_days.weibull;
  ASSERT_TRUE(we.ok && wc.ok && wr.ok);
  std::printf(
      "[ figures  ] GPU shape: exact times %.4f [%.4f, %.4f]; monthly as exact %.4f; "
      "monthly as intervals %.4f [%.4f, %.4f] (%zu intervals)\n",
      we.dist.a, we.ci_a.lo, we.ci_a.hi, wc.dist.a, wr.dist.a, wr.ci_a.lo, wr.ci_a.hi,
      gpu(fr).tbf_days.intervals);
  EXPECT_GT(gpu(fr).tbf_days.intervals, 0u);
  EXPECT_EQ(gpu(fr).tbf_days.observed, 0u);
  EXPECT_LT(std::fabs(wr.dist.a - we.dist.a), 0.5 * std::fabs(wc.dist.a - we.dist.a));
  EXPECT_TRUE(wr.ci_a.lo <= we.dist.a && we.dist.a <= wr.ci_a.hi);
  const auto j = fit_json(fr);
  EXPECT_EQ(j["time_resolution_s"], month);
  EXPECT_TRUE(j["by_class"][0]["tbf_days"]["weibull"]["ks"].is_null());
}

TEST(FitTrace, AfterFirstFaultTakesTheStretchBeforeTheFirstFaultOut) {
  // The generator starts every node in equilibrium (a warm-up of ten mean gaps), as a
  // fleet observed from some day on is: the stretch from the window start to a node's
  // first fault is a forward recurrence time. Read as a gap it pulls the shape toward 1.
  const int seeds = 8;
  double from_start = 0, after_first = 0;
  int covered = 0;
  for (int k = 0; k < seeds; ++k) {
    const Trace t = synthetic_source(42 + static_cast<std::uint64_t>(k));
    FitOptions o;
    const TraceFit a = fit_trace(t, o);
    o.after_first_fault = true;
    const TraceFit b = fit_trace(t, o);
    ASSERT_EQ(a.by_class[0].name, "GPU");
    ASSERT_EQ(b.by_class[0].name, "GPU");
    const FitResult &wa = a.by_class[0].tbf_days.weibull, &wb = b.by_class[0].tbf_days.weibull;
    ASSERT_TRUE(wa.ok && wb.ok);
    from_start += wa.dist.a / seeds;
    after_first += wb.dist.a / seeds;
    covered += wb.ci_a.lo <= 0.7 && 0.7 <= wb.ci_a.hi;
    // Fault-free nodes and first stretches are out: one censored stretch per faulty node.
    EXPECT_LT(b.by_class[0].tbf_days.censored, a.by_class[0].tbf_days.censored);
    if (k == 0) {
      EXPECT_EQ(fit_json(b)["tbf_from"], "first_fault");
    }
  }
  std::printf(
      "[ figures  ] GPU shape (generated 0.7), mean of %d traces: from the window "
      "start %.4f, after the first fault %.4f (CI covers 0.7 in %d)\n",
      seeds, from_start, after_first, covered);
  EXPECT_NEAR(after_first, 0.7, 0.03);
  EXPECT_GT(from_start - 0.7, 0.05);
  EXPECT_GE(covered, seeds - 2);
}

// A fit within the schema is written as rounded, with the report's line as its note.
TEST(FitModel, TheModelWritesTheRecommendedFitAndSaysWhy) {
  Trace t = synthetic_source(7);
  const TraceFit f = fit_trace(t);
  const FaultModel m = fault_model(t, identity_category_map(t), {});
  ASSERT_TRUE(m.ok()) << m.refused.front();
  for (const GroupFit& g : f.by_class) {
    const std::string name = slug(g.name);
    const nlohmann::ordered_json* cat = nullptr;
    for (const auto& c : m.model["categories"])
      if (c["name"] == name) cat = &c;
    ASSERT_NE(cat, nullptr) << name;
    const FitResult* r = g.tbf_days.recommended();
    ASSERT_NE(r, nullptr) << name;
    const ModelField mf = model_field(r->dist);
    for (const SchemaRange* k : {&kWeibullShapeRange, &kLognormalSigmaRange})
      EXPECT_EQ(cat->contains(k->key), mf.range == k) << name << " " << k->key;
    if (mf.range) {
      EXPECT_EQ((*cat)[mf.range->key].get<double>(), mf.written) << name;
    }
    EXPECT_NE(std::find(m.notes.begin(), m.notes.end(), name + ": " + g.tbf_days.lr.recommendation),
              m.notes.end())
        << name;
  }
}

}  // namespace
}  // namespace faultline::traces
