// What `faultline sim replay` reports: its text output, the live decisions beside the
// simulated ones (standby waits and parked standbys included), and a bad log's one-line error.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/sim/replay_log.h"
#include "tests/support/cli.h"

namespace faultline::testing {
namespace {

using namespace replay_log;

TEST(SimReplay, TextOutputShowsLiveAndSimulatedEttrAndCalibration) {
  LogFile log("text");
  log.add(header());
  initial_start(log);
  log.add(summary(kHorizon, 500));
  log.raw(R"({"t_s":601,"kind":"no)");  // torn by a crash mid-write
  CliResult r = run_cli({"sim", "replay", log.write(false), "--replicas", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("torn last line"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("ETTR       live 83.33%"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("sim  "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("job.init_s"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("StartJob:first median of 1"), std::string::npos) << r.out;
}

// The decisions: the replay sets the live run's actions beside replica 0's. A live run
// that answered a killed rank by evicting another machine (the requeue stack requeues)
// mismatches: the report names the first mismatch with both sides, and --check-decisions
// fails; the live start matches the simulated one.
TEST(SimReplay, DecisionsThatDifferFromTheSimulatorsAreReportedAndChecked) {
  auto write = [](LogFile& log, bool wrong) {
    log.add(header());
    log.add(action(0, 1,
                   {{"type", "SetCheckpointPlan"},
                    {"interval_s", 30.0},
                    {"blocking_s", 0.5},
                    {"tier", "remote"},
                    {"reason", "periodic blocking save to remote storage"},
                    {"remote_interval_s", 3600.0}}));
    log.add(
        action(0, 2, {{"type", "StartJob"}, {"reason", "initial start"}, {"mechanism", "none"}}));
    log.add(outcome(kInit, 2, kInit));
    log.add(fault(100, 1, 1, "kill"));
    if (wrong)
      log.add(action(101, 3,
                     {{"type", "EvictMachines"},
                      {"machines", {2}},
                      {"reason", "a wrong guess"},
                      {"mechanism", "stop_time_eviction"}}));
    log.add(summary(kHorizon, 500));
    return log.write();
  };
  LogFile plain("decisions-plain"), bad("decisions-bad");
  const json g = replay({write(plain, false), "--replicas", "1"});
  ASSERT_TRUE(g.contains("decisions")) << g.dump();
  EXPECT_EQ(g["decisions"]["replica"], 0);
  EXPECT_EQ(g["decisions"]["live"], 2);
  EXPECT_EQ(g["decisions"]["matched"], 2) << g["decisions"].dump(2);
  CliResult r =
      run_cli({"sim", "replay", write(bad, true), "--replicas", "1", "--check-decisions"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("decisions: 2 of 3 match the live run"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("first mismatch"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(
                "live #2 t=101.00 s  EvictMachines [machine 2] stop_time_eviction (a wrong guess)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("    sim  #"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("decisions: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("not explained by a listed unmodelled difference"), std::string::npos)
      << r.err;
}

// A standby acquisition that waited for a machine (the pool was empty: live mode notes
// "standby waits for machines" and fills the slot when a machine is back from repair)
// measured that wait, not a standby's wake: the wake is calibrated from the others. (Found
// by the decisions check of the ssh fault suite: a 7.7 s wait made every replayed wake
// 3.9 s, the job was still down when the next fault struck and the replay missed it.)
TEST(SimReplay, AStandbyAcquisitionThatWaitedForMachinesIsNotAWake) {
  LogFile log("wake");
  log.add(header());
  initial_start(log);
  const json acquire = {{"type", "AcquireMachines"},
                        {"mode", "standby"},
                        {"slots", {1}},
                        {"reason", "x"},
                        {"mechanism", "none"}};
  log.add(action(100, 2, acquire));
  log.add(outcome(100.01, 2, 0.01));
  log.add(action(200, 3, acquire));
  log.add({{"t_s", 200},
           {"kind", "note"},
           {"text", "standby waits for machines: 1 slots to fill, 0 standby machines connected"}});
  log.add(outcome(208, 3, 8));
  log.add(summary(kHorizon, 500));
  const json r = replay({log.write(), "--replicas", "1"});
  const json& wake = r["calibration"]["diagnosis.standby_wake_s"];
  EXPECT_DOUBLE_EQ(wake["value"].get<double>(), 0.01) << wake.dump();
  EXPECT_EQ(wake["samples"], 1);
}

// A stack that sizes its own standby pool: the live run's standbys were connected and
// parked before its job started, so a machine lost early is replaced from the pool at
// once, not after the scheduler's refill (120 s by default). (Found by the decisions check
// of the Slurm fault suite: the replay's pool was still empty at the first eviction, the
// job stayed down, and the NaN that followed struck nothing.)
TEST(SimReplay, TheLiveRunsStandbysAreParkedWhenTheJobStarts) {
  LogFile log("parked");
  json h = header("byterobust");
  h["params"] = {{"standby_pool", 1}};
  log.add(h);
  initial_start(log);
  log.add(fault(50, 3, 3, "machine_down", "", true));
  log.add(summary(kHorizon, 500));
  const json r = replay({log.write(), "--replicas", "1"});
  EXPECT_EQ(r["sim"]["standby_exhaustions_per_replica"].get<double>(), 0) << r["sim"].dump();
}

TEST(SimReplay, BadLogIsAOneLineErrorWithFileAndLine) {
  LogFile log("bad");
  log.add(header());
  log.add({{"t_s", 10}, {"kind", "fault"}, {"machine", 1}, {"slot", 1}, {"fault", "meteor"}});
  log.add(summary(kHorizon, 500));
  CliResult r = run_cli({"sim", "replay", log.write()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err.rfind("faultline: " + log.path() + ":2: $.fault: expected one of kill|", 0), 0u)
      << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1);

  CliResult missing = run_cli({"sim", "replay", "/nonexistent/log.jsonl"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("cannot open file"), std::string::npos);

  LogFile ok("stack");
  ok.add(header());
  ok.add(summary(kHorizon, 500));
  CliResult stack = run_cli({"sim", "replay", ok.write(), "--stack", "teleport"});
  EXPECT_EQ(stack.exit_code, 2);
  EXPECT_NE(stack.err.find("--stack: expected a registered stack"), std::string::npos) << stack.err;
}

}  // namespace
}  // namespace faultline::testing
