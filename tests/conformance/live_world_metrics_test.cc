// What LiveWorld exports: its metrics are its own account, in the simulator's phases, and
// the documented ones.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "tests/conformance/conformance_support.h"
#include "traces/time_phases.h"

namespace faultline {
namespace {

using namespace conformance;

// ---------------------------------------------------------------- what LiveWorld exports

// One sample of LiveWorld::metrics(): a gauge or counter by name and labels, or a histogram's
// _count or _sum.
double metric(const std::vector<live::MetricFamily>& families, const std::string& name,
              const live::Labels& labels = {}) {
  for (const auto& f : families) {
    for (const auto& smp : f.samples)
      if (f.name == name && smp.labels == labels) return smp.value;
    for (const auto& [l, h] : f.histograms) {
      if (f.name + "_count" == name && l == labels) return static_cast<double>(h.count());
      if (f.name + "_sum" == name && l == labels) return h.sum();
    }
  }
  ADD_FAILURE() << "no sample " << name;
  return std::nan("");
}

// The metrics are LiveWorld's own account: an incident is counted once, by category and
// resolution, with its recovery time; the lost phases (the simulator's names) sum to the
// unproductive time in the final account; the ETTR is the status's, and once the summary is
// written it is final (it used to keep falling with the clock, so a scrape after the summary
// disagreed with the summary).
TEST(LiveWorldMetrics, AnIncidentIsCountedOnceAndTheAccountIsFinalAfterTheSummary) {
  RunningLive r;
  const auto metrics = [&] { return r.live.world->metrics(); };
  for (int s = 1; s <= 5; ++s) {  // each step reported when it is done
    r.advance(kStepS);
    r.step(0, 0, s);
  }
  r.advance(kStepS);  // then rank 0 falls silent
  r.live.world->act(StopJob{"drill"});
  r.advance(3);
  auto m = metrics();
  EXPECT_EQ(metric(m, "faultline_incidents_opened_total", {{"category", "policy_stop"}}), 1);
  EXPECT_EQ(metric(m, "faultline_incidents_open"), 1);
  r.live.world->act(StartJob{"again"});
  r.advance(1);
  m = metrics();
  EXPECT_EQ(metric(m, "faultline_incidents_total",
                   {{"category", "policy_stop"}, {"resolution", "recovered"}}),
            1);
  EXPECT_EQ(metric(m, "faultline_incidents_open"), 0);
  EXPECT_EQ(metric(m, "faultline_recovery_latency_seconds_count"), 1);
  EXPECT_EQ(metric(m, "faultline_detection_latency_seconds_count"), 1);
  EXPECT_NEAR(metric(m, "faultline_detection_latency_seconds_sum"), kStepS, 0.11)
      << "from the last step report";
  EXPECT_NEAR(metric(m, "faultline_lost_seconds_total", {{"phase", "diagnosis"}}), 3, 0.11)
      << "stop to restart";
  EXPECT_NEAR(metric(m, "faultline_lost_seconds_total", {{"phase", "detection"}}), kStepS, 0.11)
      << "from the last step report";
  EXPECT_EQ(metric(m, "faultline_ettr"), r.live.world->status()["ettr_so_far"].get<double>());
  EXPECT_EQ(metric(m, "faultline_machines", {{"state", "job"}}), 4);
  EXPECT_EQ(metric(m, "faultline_standby_pool_machines", {{"pool", "actual"}}), 1);
  EXPECT_EQ(metric(m, "faultline_step"), 5);

  const double ettr = r.live.world->write_summary();
  r.advance(10);
  m = metrics();
  double lost = 0;
  for (std::size_t i = 1; i < kTimePhaseCount; ++i)
    lost += metric(m, "faultline_lost_seconds_total", {{"phase", kTimePhaseNames[i]}});
  EXPECT_NEAR(lost,
              metric(m, "faultline_elapsed_seconds") - metric(m, "faultline_productive_seconds"),
              1e-9)
      << "the final account";
  EXPECT_EQ(metric(m, "faultline_run_ended"), 1);
  EXPECT_EQ(metric(m, "faultline_ettr"), ettr) << "final";
  EXPECT_EQ(r.live.world->status()["ettr_so_far"].get<double>(), ettr) << "final";
}

// Issue 39: the account of lost time, phase by phase, on a manual clock (kStepS = 2 s steps):
// the first two steps of a start over the nominal time are warm-up, a checkpoint step's excess
// is checkpoint, a slow step's is degraded, a killed rank's incident splits into detection,
// diagnosis and failover, and going back to step 0 moves the ten steps done to recompute. An
// account record is written at the incident's close, and a controller restarted from the
// journal continues every counter from where it was.
TEST(LiveWorldMetrics, LostTimeIsMeasuredInTheSimulatorsPhasesAndSurvivesARestart) {
  RunningLive r;
  const auto lost = [](const std::vector<live::MetricFamily>& m, const char* phase) {
    return metric(m, "faultline_lost_seconds_total", {{"phase", phase}});
  };
  const auto report = [&](std::int64_t step, double took, bool ckpt) {
    r.advance(took);
    json rep = {{"type", "step"},      {"rank", 0},   {"step", step},
                {"step_time_s", took}, {"loss", 1.0}, {"grad_norm", 1.0}};
    if (ckpt) rep["checkpoint_step"] = step;
    r.send(0, {{"type", "report"}, {"gen", r.gen}, {"rank", 0}, {"report", rep}});
  };
  const auto before_steps = r.live.world->metrics();
  report(1, 2 * kStepS, false);  // warm-up: kStepS over
  report(2, 2 * kStepS, false);  // warm-up: kStepS over
  for (int s = 3; s <= 8; ++s) report(s, kStepS, false);
  report(9, 3 * kStepS, true);    // a checkpoint: 2 kStepS over
  report(10, 2 * kStepS, false);  // a slow step: kStepS over
  r.advance(1);                   // rank 0 falls silent, then its exit is known
  r.exit(0, 0, 1, 0, "RuntimeError: boom");
  r.advance(3);  // the policy diagnoses
  r.live.world->act(StartJob{"again"});
  r.advance(0.5);
  r.gen = r.live.journal.state().gen;
  report(1, kStepS, false);  // back at step 0: steps 1..10 are recomputed
  r.advance(1.5);            // a pause between two steps
  report(2, kStepS, false);
  const auto m = r.live.world->metrics();
  EXPECT_NEAR(lost(m, "warmup") - lost(before_steps, "warmup"), 2 * kStepS, 1e-9);
  EXPECT_NEAR(lost(m, "checkpoint"), 2 * kStepS, 1e-9);
  EXPECT_NEAR(lost(m, "degraded"), 0.5 + kStepS + 0.5 + 1.5, 1e-9)
      << "before each start's first step (0.5 s each), the slow step and the pause";
  EXPECT_NEAR(lost(m, "detection"), 1, 1e-9) << "from the last step report to the exit";
  EXPECT_NEAR(lost(m, "diagnosis") - lost(before_steps, "diagnosis"), 3, 1e-9);
  EXPECT_NEAR(lost(m, "recompute"), 10 * kStepS, 1e-9);
  EXPECT_EQ(lost(m, "restore"), 0) << "live ranks report no restore time";
  EXPECT_EQ(lost(m, "waiting_for_machines"), 0);
  double sum = 0;
  for (std::size_t i = 1; i < kTimePhaseCount; ++i) sum += lost(m, kTimePhaseNames[i]);
  EXPECT_NEAR(
      sum, metric(m, "faultline_elapsed_seconds") - metric(m, "faultline_productive_seconds"), 1e-9)
      << "at a step report the phases sum to elapsed - productive";
  bool account = false;
  std::ifstream in(r.live.dir / "events.jsonl");
  for (std::string line; std::getline(in, line);)
    account |= json::parse(line).value("kind", "") == "account";
  EXPECT_TRUE(account) << "an account record at the incident's close";

  Restarted after(r, [](json&) {});
  after.world->start();
  const auto again = after.world->metrics();
  for (std::size_t i = 1; i < kTimePhaseCount; ++i)
    EXPECT_GE(lost(again, kTimePhaseNames[i]), lost(m, kTimePhaseNames[i])) << kTimePhaseNames[i];
  EXPECT_NEAR(lost(again, "recompute"), 10 * kStepS, 1e-9);
}

// The names LiveWorld exports are exactly docs/metrics.md's table (the Grafana dashboard is
// checked against that table by GrafanaDashboard.EveryMetricItQueriesIsOneTheControllerExports),
// with the documented type; the lost-time counter has one sample per shared lost phase.
TEST(LiveWorldMetrics, TheExportedMetricsAreTheDocumentedOnes) {
  std::ifstream in(std::string(FAULTLINE_SOURCE_DIR) + "/docs/metrics.md");
  ASSERT_TRUE(in) << "docs/metrics.md";
  std::map<std::string, std::string> documented;
  const std::regex row(R"(^\| `(faultline_[a-z_]+)` \| (gauge|counter|histogram) \|)");
  std::smatch m;
  for (std::string line; std::getline(in, line);)
    if (std::regex_search(line, m, row)) documented[m[1]] = m[2];
  RunningLive r;
  std::map<std::string, std::string> exported;
  for (const auto& f : r.live.world->metrics()) {
    exported[f.name] = f.type == live::MetricType::kGauge     ? "gauge"
                       : f.type == live::MetricType::kCounter ? "counter"
                                                              : "histogram";
    if (f.name != "faultline_lost_seconds_total") continue;
    std::set<std::string> phases;
    for (const auto& smp : f.samples) phases.insert(smp.labels.at(0).second);
    EXPECT_EQ(phases, std::set<std::string>(kTimePhaseNames.begin() + 1, kTimePhaseNames.end()));
  }
  EXPECT_EQ(exported, documented);
}

}  // namespace
}  // namespace faultline
