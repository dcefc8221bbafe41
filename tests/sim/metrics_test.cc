// The replica result's codec (a forked replica's or an MPI rank's result to its parent):
// every field comes back as it went, each scalar set to a value of its own so that two
// swapped fields show.
#include "sim/metrics.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "policies/api/rng.h"

namespace faultline::sim {
namespace {

TEST(ReplicaResultCodec, EveryFieldComesBackUnderItsOwnName) {
  ReplicaResult r;
  r.replica = 7;
  r.ettr = 0.5;
  std::int64_t n = 100;
  for (std::int64_t* x : {&r.evictions_true,
                          &r.evictions_false,
                          &r.evictions_false_positive,
                          &r.false_failures,
                          &r.health_check_drains,
                          &r.repairs,
                          &r.retired,
                          &r.runs_ended,
                          &r.incident_count,
                          &r.faults_injected,
                          &r.checkpoints,
                          &r.events,
                          &r.flow_batches_real,
                          &r.flow_batches_cached,
                          &r.steps,
                          &r.standby_exhaustions,
                          &r.remote_fallbacks,
                          &r.machines_beyond_fleet,
                          &r.machines_used,
                          &r.preemptions})
    *x = ++n;
  r.max_fruitless_rounds = 3;
  r.elapsed_s = 11.5;
  r.exposure_s = 12.5;
  r.cpu_s = 13.5;
  r.finished = true;
  r.depleted = true;
  std::int64_t ns = 1000;
  for (const auto& k : kBuckets) r.breakdown.*k.field = ++ns;
  CategoryStats c{1, 2, 3.5, 4.5, 5.5, 6, 7, {}};
  for (int o = 0; o < kOutcomes; ++o) c.outcomes[o] = 20 + o;
  r.categories = {c};
  r.dominant = {2, 30.5, 40.5};
  r.timeline = {{1, 0.9, 0.8, 0.1}};
  r.incidents = {{5.5, 1, 6.5, 7.5, {3, 4}, Mechanism::named("my-localizer"), {8}, {9}}};
  r.decisions = {"a", "b"};
  r.resolved_by = {{"analyzer_over_eviction", 1}, {"my-localizer", 0}, {"replay", 2}};
  r.warnings = 201;
  r.warnings_false = 202;
  r.migrations = 203;
  r.migrations_needless = 204;
  std::int64_t at = 300;
  Attributed& a = r.attributed;
  for (std::int64_t* x : {&a.init, &a.inplace_init, &a.requeue, &a.reschedule, &a.standby_wake,
                          &a.on_call, &a.replay, &a.mfu_checkpoint})
    *x = ++at;
  for (auto& x : a.probe) x = ++at;

  const ReplicaResult d = decode(encode(r));
  EXPECT_EQ(d.replica, 7u);
  EXPECT_EQ(d.ettr, 0.5);
  n = 100;
  for (const std::int64_t* x : {&d.evictions_true,
                                &d.evictions_false,
                                &d.evictions_false_positive,
                                &d.false_failures,
                                &d.health_check_drains,
                                &d.repairs,
                                &d.retired,
                                &d.runs_ended,
                                &d.incident_count,
                                &d.faults_injected,
                                &d.checkpoints,
                                &d.events,
                                &d.flow_batches_real,
                                &d.flow_batches_cached,
                                &d.steps,
                                &d.standby_exhaustions,
                                &d.remote_fallbacks,
                                &d.machines_beyond_fleet,
                                &d.machines_used,
                                &d.preemptions})
    EXPECT_EQ(*x, ++n);
  EXPECT_EQ(d.max_fruitless_rounds, 3);
  EXPECT_EQ(d.elapsed_s, 11.5);
  EXPECT_EQ(d.exposure_s, 12.5);
  EXPECT_EQ(d.cpu_s, 13.5);
  EXPECT_TRUE(d.finished);
  EXPECT_TRUE(d.depleted);
  ns = 1000;
  for (const auto& k : kBuckets) EXPECT_EQ(d.breakdown.*k.field, ++ns) << k.name;
  ASSERT_EQ(d.categories.size(), 1u);
  EXPECT_EQ(d.categories[0].resolution_max_s, 4.5);
  EXPECT_EQ(d.categories[0].recurred, 7);
  EXPECT_EQ(d.categories[0].outcomes[kOutcomes - 1], 20 + kOutcomes - 1);
  EXPECT_EQ(d.dominant.at_s, 30.5);
  ASSERT_EQ(d.timeline.size(), 1u);
  EXPECT_EQ(d.timeline[0].waiting_h, 0.1);
  ASSERT_EQ(d.incidents.size(), 1u);
  EXPECT_EQ(d.incidents[0].slots, (std::vector<int>{3, 4}));
  EXPECT_EQ(d.incidents[0].evicted, std::vector<int>{9});
  EXPECT_EQ(d.decisions, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(d.resolved_by, r.resolved_by);
  EXPECT_EQ(d.warnings, 201);
  EXPECT_EQ(d.warnings_false, 202);
  EXPECT_EQ(d.migrations, 203);
  EXPECT_EQ(d.migrations_needless, 204);
  at = 300;
  const Attributed& b = d.attributed;
  for (const std::int64_t* x : {&b.init, &b.inplace_init, &b.requeue, &b.reschedule,
                                &b.standby_wake, &b.on_call, &b.replay, &b.mfu_checkpoint})
    EXPECT_EQ(*x, ++at);
  for (auto x : b.probe) EXPECT_EQ(x, ++at);
  EXPECT_EQ(d.incidents[0].machines, std::vector<int>{8});
  EXPECT_EQ(d.incidents[0].resolution, Mechanism::named("my-localizer"));
  EXPECT_EQ(d.dominant.category, 2);
  // Bit for bit: the same result encodes to the same bytes, and back to them.
  EXPECT_EQ(encode(d), encode(r));
}

// Bytes it did not write (a sweep store's chunk cut short, or of another build) are an
// error, never a read past their end: every prefix, one byte more, a count too large.
TEST(ReplicaResultCodec, BytesItDidNotWriteAreRefused) {
  ReplicaResult r;
  r.categories.resize(2);
  r.timeline.resize(3);
  r.incidents = {{5.5, 1, 6.5, 7.5, {3, 4}, Mechanism::kRollback, {8}, {9}}};
  r.decisions = {"a decision"};
  r.resolved_by = {{"replay", 1}, {"rollback", 2}};
  const std::vector<std::uint8_t> bytes = encode(r);
  for (std::size_t n = 0; n < bytes.size(); ++n)
    EXPECT_THROW(decode({bytes.begin(), bytes.begin() + n}), std::runtime_error) << n;
  std::vector<std::uint8_t> longer = bytes;
  longer.push_back(0);
  EXPECT_THROW(decode(longer), std::runtime_error);
  // The decisions' count (8 bytes before the last string's length and text) set to 2^62:
  // refused before anything is allocated for it.
  std::vector<std::uint8_t> huge = bytes;
  const std::size_t tail = 8 + 8 + 10;
  huge[huge.size() - tail + 7] = 0x40;
  EXPECT_THROW(decode(huge), std::runtime_error);
}

// The time-to-train bootstrap (sim/metrics.h) against what is known without it.

// n exponential(1) values, sorted.
std::vector<double> exponential_sample(std::size_t n, std::uint64_t seed) {
  Rng rng({seed, 77});
  std::vector<double> xs;
  for (std::size_t i = 0; i < n; ++i) xs.push_back(rng.exponential(1.0));
  std::sort(xs.begin(), xs.end());
  return xs;
}

// Coverage: for samples of a known distribution, the 95% intervals of the mean, the median
// and the 90th percentile hold the true value in about 95% of samples. Exponential(1): mean
// 1, median ln 2, p90 ln 10. 400 samples of 200: a true coverage of 95% gives 380 +- 4.4
// (sd); the percentile bootstrap undercovers a little on a skewed distribution, so the
// bounds are 88% and 98.5%.
TEST(Bootstrap, CoversTheTrueMeanAndQuantilesOfAKnownDistribution) {
  const int samples = 400;
  int mean_in = 0, p50_in = 0, p90_in = 0;
  for (int s = 0; s < samples; ++s) {
    const auto xs = exponential_sample(200, static_cast<std::uint64_t>(s));
    const Interval m = bootstrap_mean_ci95(xs, 1000, static_cast<std::uint64_t>(s));
    const auto q = bootstrap_quantile_ci95(xs, {0.5, 0.9}, 1000, static_cast<std::uint64_t>(s));
    mean_in += m.lo <= 1.0 && 1.0 <= m.hi;
    p50_in += q[0].lo <= std::log(2.0) && std::log(2.0) <= q[0].hi;
    p90_in += q[1].lo <= std::log(10.0) && std::log(10.0) <= q[1].hi;
  }
  for (int in : {mean_in, p50_in, p90_in}) {
    EXPECT_GE(in, 0.88 * samples);
    EXPECT_LE(in, 0.985 * samples);
  }
}

// A second method: the distribution-free interval of the median of n values is
// [X(l), X(u)] with l, u = n/2 -+ 1.96 sqrt(n)/2 (order statistics, 1-based; the binomial's
// normal approximation). For n = 1000 the bootstrap's ends fall within a few order
// statistics of those (its own Monte Carlo noise at 2,000 resamples is about 2).
TEST(Bootstrap, MedianIntervalAgreesWithTheOrderStatisticInterval) {
  for (std::uint64_t seed : {1, 2, 3}) {
    const auto xs = exponential_sample(1000, seed);
    const auto ci = bootstrap_quantile_ci95(xs, {0.5}, 2000, seed)[0];
    const double half = 1.959964 * std::sqrt(1000.0) / 2;  // 31.0
    const double l = 500 - half, u = 501 + half;           // 1-based ranks
    // The rank (1-based, fractional) of a value inside the sorted sample.
    auto rank = [&](double v) {
      const auto it = std::lower_bound(xs.begin(), xs.end(), v);
      const auto k = static_cast<double>(it - xs.begin());
      if (it == xs.begin() || it == xs.end()) return k + 1;
      return k + (v - *(it - 1)) / (*it - *(it - 1));  // between ranks k and k + 1
    };
    EXPECT_NEAR(rank(ci.lo), l, 6) << "seed " << seed;
    EXPECT_NEAR(rank(ci.hi), u, 6) << "seed " << seed;
  }
}

// Deterministic: the same values and seed give the same interval bit for bit; another seed
// another one. Censored values (+inf) make the ends they reach infinite, never NaN.
TEST(Bootstrap, SameSeedSameIntervalAndCensoredEndsAreInfinite) {
  const auto xs = exponential_sample(50, 9);
  const auto a = bootstrap_quantile_ci95(xs, {0.5, 0.99}, 500, 4);
  const auto b = bootstrap_quantile_ci95(xs, {0.5, 0.99}, 500, 4);
  const auto c = bootstrap_quantile_ci95(xs, {0.5, 0.99}, 500, 5);
  EXPECT_EQ(a[0].lo, b[0].lo);
  EXPECT_EQ(a[1].hi, b[1].hi);
  EXPECT_TRUE(a[0].lo != c[0].lo || a[0].hi != c[0].hi);
  EXPECT_LE(a[0].lo, a[0].hi);
  std::vector<double> censored = xs;
  for (int i = 0; i < 5; ++i)
    censored[censored.size() - 1 - i] = std::numeric_limits<double>::infinity();
  const auto d = bootstrap_quantile_ci95(censored, {0.5, 0.99}, 500, 4);
  EXPECT_TRUE(std::isfinite(d[0].lo) && std::isfinite(d[0].hi));
  EXPECT_TRUE(std::isinf(d[1].hi));
  EXPECT_FALSE(std::isnan(d[1].lo));
  const auto none = bootstrap_quantile_ci95({}, {0.5}, 500, 4);
  EXPECT_TRUE(std::isnan(none[0].lo));
}

}  // namespace
}  // namespace faultline::sim
