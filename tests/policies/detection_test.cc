// Detection modules without a World: synthetic sample streams, the time passed in by
// hand, conclusions checked against the closed-form instants they must fall on.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <vector>

#include "policies/builtin.h"
#include "policies/detection/detectors.h"

namespace faultline::policies {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

Instant at(double s) { return Instant{Duration::seconds(s).ns}; }

StepSample step(std::int64_t n, double t, bool steady = false) {
  StepSample s;
  s.step = n;
  s.step_time_s = t;
  s.steady = steady;
  return s;
}

TEST(StallDetector, PerStepSamplesStallOneWindowAfterTheLastStep) {
  StallDetector d(Duration::seconds(60));
  d.restart(at(0), 0);
  for (int i = 1; i <= 10; ++i) d.observe(step(i, 1.0), at(i));
  EXPECT_EQ(d.next_check(), at(70));
  EXPECT_FALSE(d.check(at(69.999)));
  auto f = d.check(at(70));
  ASSERT_TRUE(f);
  const auto& st = std::get<ProgressStalled>(*f);
  EXPECT_EQ(st.last_step, 10);
  EXPECT_EQ(st.stalled_for, Duration::seconds(60));
  EXPECT_FALSE(d.check(at(200))) << "reported once per stall";
  EXPECT_EQ(d.next_check(), Instant::max());
  d.observe(step(11, 1.0), at(201));  // progress again: a later stall is a new one
  EXPECT_EQ(d.next_check(), at(261));
}

TEST(StallDetector, ASteadySamplePromisesProgressUntilTheCounterStops) {
  StallDetector d(Duration::seconds(600));
  d.restart(at(1000), 500);
  d.observe(step(500, 2.0, true), at(1000));
  EXPECT_EQ(d.next_check(), Instant::max()) << "steps keep coming at 2 s";
  EXPECT_FALSE(d.check(at(5000)));
  d.observe(step(2500, kInf, true), at(5000));  // the counter stops at step 2500
  EXPECT_EQ(d.next_check(), at(5600));
  auto f = d.check(at(5600));
  ASSERT_TRUE(f);
  EXPECT_EQ(std::get<ProgressStalled>(*f).last_step, 2500);
}

TEST(StallDetector, NoStepAfterARestartIsAStallFromTheRestart) {
  StallDetector d(Duration::seconds(60));
  d.restart(at(100), 42);
  d.observe(step(42, kInf, true), at(130));  // stopped at the restored step, no progress since
  auto f = d.check(at(160));
  ASSERT_TRUE(f);
  EXPECT_EQ(std::get<ProgressStalled>(*f).last_step, 42);
  EXPECT_EQ(std::get<ProgressStalled>(*f).stalled_for, Duration::seconds(60));
}

TEST(SlowStepDetector, PerStepSamplesReportAfterSlowForAndAgainWhileSlow) {
  SlowStepDetector d(1.2, Duration::seconds(300));
  d.restart(at(0), 0);
  double t = 0;
  for (int i = 1; i <= 50; ++i) ASSERT_FALSE(d.observe(step(i, 1.0), at(t += 1.0)));
  EXPECT_DOUBLE_EQ(d.baseline(), 1.0);
  // Steps at 1.5 s from t = 50: reported at the first sample at or after t = 50 + 1.5 + 300.
  std::vector<double> reports;
  for (int i = 51; i <= 500; ++i) {
    t += 1.5;
    if (auto f = d.observe(step(i, 1.5), at(t))) {
      reports.push_back(t);
      EXPECT_DOUBLE_EQ(std::get<StepTimeHigh>(*f).ratio, 1.5);
    }
    EXPECT_FALSE(d.check(at(t + 1000))) << "a per-step stream is judged on its samples only";
  }
  // Slow since the sample at 51.5 s: reported by the sample at 351.5 s, then 300 s later.
  EXPECT_EQ(reports, (std::vector<double>{50 + 1.5 * 201, 50 + 1.5 * 401}));
  EXPECT_DOUBLE_EQ(d.baseline(), 1.0) << "slow steps do not move the baseline";
  ASSERT_FALSE(d.observe(step(501, 1.0), at(t += 1.0)));  // healthy again
}

TEST(SlowStepDetector, FirstStepsAfterARestartAreNotTheBaselineButTheBaselineSurvivesRestarts) {
  SlowStepDetector d(1.2, Duration::seconds(10));
  d.restart(at(0), 0);
  d.observe(step(1, 9.0), at(9));  // the first two steps warm up communicators
  d.observe(step(2, 9.0), at(18));
  EXPECT_EQ(d.baseline(), 0.0);
  d.observe(step(3, 2.0), at(20));
  d.observe(step(4, 2.0), at(22));
  EXPECT_DOUBLE_EQ(d.baseline(), 2.0);
  d.restart(at(100), 4);
  EXPECT_DOUBLE_EQ(d.baseline(), 2.0);
  EXPECT_FALSE(d.observe(step(5, 3.0), at(103)));  // slow (> 2.4), not yet for 10 s
  EXPECT_TRUE(d.observe(step(6, 3.0), at(113)));
}

// The baseline is the median of the last 4,096 healthy step times, kept incrementally;
// checked against sorting the window, over 10,000 samples with many repeated values
// (ties across the two halves) and a window that slides.
TEST(SlowStepDetector, TheBaselineIsTheMedianOfTheLast4096HealthySamples) {
  SlowStepDetector d(0, Duration::seconds(10));  // ratio 0: every sample is healthy
  d.restart(at(0), 0);
  std::vector<double> seen;
  std::uint64_t x = 12345;
  for (int i = 1; i <= 10000; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    const double t = i < 5000 ? 1.0 + static_cast<double>((x >> 33) % 7) * 0.25
                              : 0.5 + static_cast<double>((x >> 33) % 1000) * 1e-3;
    d.observe(step(i, t, true), at(i));
    seen.push_back(t);
    if (i % 10 != 0 && (i < 4090 || i > 4110))
      continue;  // every tenth, and every one as the window fills
    std::vector<double> w(
        seen.end() - static_cast<std::ptrdiff_t>(std::min<std::size_t>(seen.size(), 4096)),
        seen.end());
    const auto mid = w.begin() + static_cast<std::ptrdiff_t>(w.size() / 2);
    std::nth_element(w.begin(), mid, w.end());
    const double want = w.size() % 2 ? *mid : (*std::max_element(w.begin(), mid) + *mid) / 2;
    ASSERT_EQ(d.baseline(), want) << "after " << i << " samples";
  }
}

TEST(SlowStepDetector, SteadySamplesAreJudgedWhenTheTimeComes) {
  SlowStepDetector d(1.2, Duration::seconds(300));
  d.restart(at(0), 0);
  d.observe(step(0, 2.0, true), at(0));
  EXPECT_EQ(d.next_check(), Instant::max());
  EXPECT_FALSE(d.observe(step(50, 2.6, true), at(100)));  // x1.3 from t = 100
  EXPECT_EQ(d.next_check(), at(400));
  EXPECT_FALSE(d.check(at(399)));
  auto f = d.check(at(400));
  ASSERT_TRUE(f);
  EXPECT_DOUBLE_EQ(std::get<StepTimeHigh>(*f).ratio, 1.3);
  EXPECT_EQ(d.next_check(), at(700));
  d.observe(step(300, 2.0, true), at(650));  // the slowdown ended
  EXPECT_EQ(d.next_check(), Instant::max());
  EXPECT_FALSE(d.check(at(700)));
}

TEST(MetricDetectors, NanOncePerRunAndJumpsAfterTheWarmup) {
  NanDetector nan;
  StepSample s = step(1, 1.0);
  s.nan = true;
  auto f = nan.observe(s);
  ASSERT_TRUE(f);
  EXPECT_TRUE(std::get<MetricAnomaly>(*f).nan);
  EXPECT_FALSE(nan.observe(s)) << "the stack's diagnosis restarts the job";
  nan.restart();
  EXPECT_TRUE(nan.observe(s));

  JumpDetector jump(5, 5);
  StepSample l = step(1, 1.0);
  l.loss = 100;  // before the warm-up nothing is judged
  EXPECT_FALSE(jump.observe(l));
  jump.restart();
  for (int i = 0; i < 5; ++i) {
    l.loss = 2.0;
    ASSERT_FALSE(jump.observe(l));
  }
  l.loss = 9.9;  // below 5 x 2.0
  EXPECT_FALSE(jump.observe(l));
  // The mean is now 0.8 * 2 + 0.2 * 9.9 = 3.58; 18 is above 5 x 3.58 = 17.9.
  l.loss = 18;
  f = jump.observe(l);
  ASSERT_TRUE(f);
  EXPECT_EQ(std::get<MetricAnomaly>(*f).metric, "loss");
  EXPECT_NEAR(std::get<MetricAnomaly>(*f).ratio, 18 / 3.58, 1e-12);

  JumpDetector grad(5, 2);
  StepSample g = step(1, 1.0);
  for (double v : {1.0, 1.0}) {
    g.grad_norm = v;
    ASSERT_FALSE(grad.observe(g));
  }
  g.grad_norm = 50;
  f = grad.observe(g);
  ASSERT_TRUE(f);
  EXPECT_EQ(std::get<MetricAnomaly>(*f).metric, "grad_norm");
}

Params stack_params(std::map<std::string, double> over = {}) {
  Registry r = builtin_registry();
  Params p;
  EXPECT_FALSE(Params::resolve(r.find("byterobust")->params, over, &p));
  return p;
}

TEST(DetectionModules, RealtimeComposesTheFourAndTimeoutWatchesNothing) {
  const auto& m = modules();
  ASSERT_NE(m.find(ModuleKind::kDetection, "realtime"), nullptr);
  auto none = m.make_detector("timeout", stack_params());
  EXPECT_FALSE(none->watch());
  auto d = m.make_detector(
      "realtime", stack_params({{"stall_window_s", 60}, {"slow_ratio", 1.2}, {"slow_for_s", 30}}));
  ASSERT_TRUE(d->watch());
  d->restart(at(0), 0);
  d->observe(step(0, 1.0, true), at(0));
  d->observe(step(10, 1.5, true), at(10));
  EXPECT_EQ(d->next_check(), at(40));
  auto f = d->check(at(40));
  ASSERT_TRUE(f);
  EXPECT_TRUE(std::holds_alternative<StepTimeHigh>(*f));
  d->observe(step(30, kInf, true), at(50));  // then it hangs: the stall comes first
  EXPECT_EQ(d->next_check(), at(110));
  f = d->check(at(110));
  ASSERT_TRUE(f);
  EXPECT_TRUE(std::holds_alternative<ProgressStalled>(*f));
  // Its own parameters are the stack's: a scenario sets policy.params.jump_ratio.
  EXPECT_NE(builtin_registry().find("byterobust")->find_param("jump_ratio"), nullptr);
}

}  // namespace
}  // namespace faultline::policies
