// `faultline sim replay` of runs at sub-second steps that checkpoint every step or every
// fraction of a second: their measured timings taken as they are, the recorded parameters
// and module choices, and the pauses no record explains.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/sim/replay_log.h"
#include "tests/support/cli.h"

namespace faultline::testing {
namespace {

using namespace replay_log;

// A small live run checkpoints far more often than once a second: the demo
// (realexec/scripts/live-local.sh) takes 0.2 s steps and byterobust saves every step,
// and a periodic plan of 1 s at a nominal 0.25 s step saves every 4 steps, which a job
// that runs faster than its nominal step does in under a second. The replay takes those
// timings as they are (no error, no value moved into a range) and its ETTR is the
// closed form of the run.
constexpr double kSmallStep = 0.2, kSmallInit = 3;

// The opening of a byterobust run at sub-second steps that checkpoints every step (done at
// kSmallInit).
void begin_every_step_run(LogFile& log, json params = json::object()) {
  replay_log::begin_every_step_run(log, std::move(params), kSmallStep, kSmallInit);
}

TEST(SimReplay, EveryStepCheckpointsAtSubSecondStepsReplay) {
  constexpr double kLength = 120;
  {  // byterobust, every step in memory with a peer copy
    LogFile log("every-step");
    begin_every_step_run(log);
    long step = 0;
    while (kSmallInit + (step + 1) * kSmallStep <= kLength + 1e-9) {
      ++step;
      log.add(progress(kSmallInit + step * kSmallStep, step));
    }
    log.add(summary(kLength, step, 0, kSmallStep));
    const json r = replay({log.write(), "--replicas", "2"});
    ASSERT_TRUE(r.contains("sim_ettr"));
    EXPECT_EQ(step, 585);
    // The checkpoint is inside the step time: the job loses only its start.
    EXPECT_NEAR(r["live"]["ettr"].get<double>(), (kLength - kSmallInit) / kLength, 1e-9);
    EXPECT_NEAR(r["sim_ettr"]["mean"].get<double>(), (kLength - kSmallInit) / kLength, 1e-6);
    EXPECT_DOUBLE_EQ(r["calibration"]["live.checkpoint_every_steps"]["value"].get<double>(), 1);
  }
}

// A live controller records every resolved parameter in the header, those its module
// choices never read included (an interval under the every-step peer plan). The replay
// leaves those out instead of handing the simulator a scenario it refuses.
TEST(SimReplay, RecordedParametersTheStackDoesNotReadAreLeftOut) {
  LogFile log("unread-params");
  begin_every_step_run(log, {{"checkpoint", 0},
                             {"checkpoint_interval_s", 1800},
                             {"memory_checkpoint_blocking_s", 1.84},
                             {"checkpoint_blocking_s", 0.02},
                             {"probe_deadline_s", 600}});
  for (long step = 1; step <= 100; ++step) log.add(progress(kSmallInit + step * kSmallStep, step));
  log.add(summary(kSmallInit + 100 * kSmallStep, 100, 0, kSmallStep));
  const json r = replay({log.write(), "--replicas", "1"});
  ASSERT_TRUE(r.contains("sim"));
  EXPECT_FALSE(r["sim"].contains("unread_params"));
  EXPECT_DOUBLE_EQ(r["sim"]["policy_params"]["probe_deadline_s"].get<double>(), 600);
}

// A choice parameter's number in the header is an index into the modules registered when the
// live run ran, plugins included: loaded in another order, it names another module. The
// header's choices name the module, and the replay runs that one, or refuses one it lacks.
TEST(SimReplay, ModuleChoicesAreReplayedByNameNotByIndex) {
  LogFile log("choices");
  begin_every_step_run(log, {{"localization", 0}});  // 0: "replay" here
  for (long step = 1; step <= 100; ++step) log.add(progress(kSmallInit + step * kSmallStep, step));
  log.add(summary(kSmallInit + 100 * kSmallStep, 100, 0, kSmallStep));
  std::ifstream in(log.write());
  std::vector<json> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(json::parse(l));
  lines[0]["choices"] = {{"localization", "bisection"}};
  LogFile chosen("choices-bisection");
  for (const auto& l : lines) chosen.add(l);
  const json r = replay({chosen.write(), "--replicas", "1"});
  ASSERT_TRUE(r.contains("sim"));
  EXPECT_EQ(r["sim"]["policy_modules"]["localization"]["name"], "bisection");

  lines[0]["choices"] = {{"localization", "no-such-localizer"}};
  LogFile missing("choices-missing");
  for (const auto& l : lines) missing.add(l);
  const CliResult bad = run_cli({"sim", "replay", missing.write()});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("policy.params.localization: the live run chose module "
                         "'no-such-localizer', which is not registered here"),
            std::string::npos)
      << bad.err;
}

// Pauses between steps that no record explains (a loaded host: the operator's guide
// followed while two builds ran read +10 pts) cost the live run and nothing in the
// simulator: the replay says how long they were and what share of the clock, and that
// share is the difference it reports.
TEST(SimReplay, PausesNoRecordExplainsAreReportedAsTheDifference) {
  constexpr double kLength = 120, kPause = 3;
  LogFile log("pauses");
  begin_every_step_run(log);
  double t = kSmallInit;
  long step = 0;
  while (true) {
    // Steps 100 and 300 take 3 s instead of 0.2 s.
    const double dt = step + 1 == 100 || step + 1 == 300 ? kPause : kSmallStep;
    if (t + dt > kLength + 1e-9) break;
    t += dt;
    log.add(progress(t, ++step));
  }
  log.add(summary(kLength, step, 0, kSmallStep));
  const json r = replay({log.write(), "--replicas", "2"});
  ASSERT_TRUE(r.contains("unmodelled_pauses")) << r.dump();
  const double paused = 2 * (kPause - kSmallStep);
  EXPECT_NEAR(r["unmodelled_pauses"]["seconds"].get<double>(), paused, 1e-6);
  EXPECT_EQ(r["unmodelled_pauses"]["gaps"].get<int>(), 2);
  EXPECT_NEAR(r["unmodelled_pauses"]["pts"].get<double>(), 100 * paused / kLength, 1e-6);
  // The simulator trains through them: its ETTR is higher by about that share.
  EXPECT_NEAR(r["ettr_diff_pts"].get<double>(), 100 * paused / kLength, 0.2);
}

TEST(SimReplay, PeriodicSubSecondCheckpointsReplayAtTheirMeasuredInterval) {
  {  // requeue, a periodic plan of 1 s at a nominal 0.25 s step: every 4 steps, at 0.2 s each
    constexpr double kEnd = 120.5;  // not on a checkpoint boundary
    LogFile log("periodic");
    json h = header("requeue");
    h["params"] = {{"checkpoint_interval_s", 1.0}, {"checkpoint_write_s", 0.05}};
    h["nominal_step_time_s"] = 0.25;
    h["checkpoint_every_steps"] = 4;
    log.add(h);
    log.add(action(0, 1,
                   {{"type", "SetCheckpointPlan"},
                    {"interval_s", 1.0},
                    {"blocking_s", 0.05},
                    {"tier", "remote"},
                    {"reason", "periodic"},
                    {"remote_interval_s", 3600.0}}));
    log.add(
        action(0, 2, {{"type", "StartJob"}, {"reason", "initial start"}, {"mechanism", "none"}}));
    log.add(outcome(kSmallInit, 2, kSmallInit));
    // Steps of 0.2 s; the step after every 4th is 0.1 s longer (the blocking save).
    double t = kSmallInit;
    long step = 0;
    while (true) {
      const double dt = kSmallStep + (step > 0 && step % 4 == 0 ? 0.1 : 0);
      if (t + dt > kEnd + 1e-9) break;
      t += dt;
      log.add(progress(t, ++step));
    }
    log.add(summary(kEnd, step, 0, kSmallStep));
    const json r = replay({log.write(), "--replicas", "2"});
    ASSERT_TRUE(r.contains("sim_ettr"));
    EXPECT_NEAR(r["sim"]["policy_params"]["checkpoint_interval_s"].get<double>(), 4 * kSmallStep,
                1e-9);
    EXPECT_NEAR(r["calibration"]["policy.params.checkpoint_write_s"]["value"].get<double>(), 0.1,
                1e-9);
    // 0.8 s of training and a 0.1 s stall, from the start to the end: 130 cycles and
    // 0.5 s of a last one (104.5 s), where the live run counted 522 whole steps.
    const Kept k = train(kSmallInit, kEnd, 4 * kSmallStep, 0.1);
    EXPECT_NEAR(k.committed + k.pending, 104.5, 1e-9);  // the test's own arithmetic
    EXPECT_NEAR(r["sim_ettr"]["mean"].get<double>(), (k.committed + k.pending) / kEnd, 1e-6);
    EXPECT_EQ(step, 522);
    EXPECT_NEAR(r["live"]["ettr"].get<double>(), step * kSmallStep / kEnd, 1e-9);
    EXPECT_NEAR(r["ettr_diff_pts"].get<double>(), 0, 0.2);
  }
}

}  // namespace
}  // namespace faultline::testing
