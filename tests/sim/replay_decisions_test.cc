// The decisions comparison of `faultline sim replay` (sim/replay_decisions.h), without the
// simulator: hand-made live event logs and hand-made simulator records, aligned, named
// alike, and each mismatch explained by a listed unmodelled difference or reported with
// both sides.
#include "sim/replay_decisions.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "eventlog/event_log.h"

namespace faultline::sim {
namespace {

using nlohmann::json;

// A live log of 4 job machines and 2 standbys: a kill on slot 1 answered by a reattempt,
// then machine 3 lost and replaced by standby 4 (named "s0").
class Log {
 public:
  Log() {
    traces::EventLogHeader h;
    h.stack = "byterobust";
    h.seed = 11;
    h.machines = 4;
    h.dp = 4;
    h.standby_machines = 2;
    lines_.push_back(traces::header_record(0, h).dump());
  }
  void action(double t, const Action& a) {
    ++id_;
    lines_.push_back(traces::action_record(t, id_, a).dump());
  }
  void failed_last(double t) {
    lines_.push_back(traces::outcome_record(t, {id_, false, "not connected", 0.1}).dump());
  }
  void restart(double t) {
    lines_.push_back(traces::restart_record(t, "controller restarted").dump());
  }
  void event(double t, const Event& e) { lines_.push_back(traces::event_record(t, e).dump()); }
  void fault(double t, MachineId m, traces::FaultKind k) {
    lines_.push_back(traces::fault_record(t, {m, m, k, "", false}).dump());
  }
  ActionId last_id() const { return id_; }
  traces::EventLog parse() const {
    std::string text;
    for (const auto& l : lines_) text += l + "\n";
    return traces::parse_event_log(text, "live.jsonl");
  }

 private:
  std::vector<std::string> lines_;
  ActionId id_ = 0;
};

std::string rec(double t, const Action& a) {
  return "R " + std::to_string(static_cast<long long>(t * 1e9)) + " A " + traces::to_json(a).dump();
}
std::string join(double t, MachineId m, SlotId s) {
  return "R " + std::to_string(static_cast<long long>(t * 1e9)) + " J " + std::to_string(m) + " " +
         std::to_string(s);
}

const std::vector<std::string> kNames = {"m0", "m1", "m2", "m3", "s0", "s1"};

// The live side of the shared story (8 decisions): kill on m1 at 10 s, m3 lost at 30 s.
void live_story(Log& log) {
  log.action(0.5, StartJob{"initial start"});
  log.fault(10, 1, traces::FaultKind::kKill);
  log.action(10.1, StopJob{"crash: killed by signal 9 (SIGKILL)"});
  log.action(
      10.2,
      RunProbe{ProbeKind::kGpuDiag, {1, 2}, Duration::seconds(60), "killed by signal 9 (SIGKILL)"});
  log.action(10.3, StartJob{"reattempt: stop-time tests found nothing", Mechanism::kReattempt});
  log.fault(30, 3, traces::FaultKind::kMachineDown);
  log.action(30.1,
             EvictMachines{{3}, "real-time host alert: agent lost", Mechanism::kRealtimeEviction});
  log.action(30.1, AcquireMachines{AcquireMode::kStandby,
                                   {3},
                                   "real-time host alert: agent lost",
                                   Mechanism::kRealtimeEviction});
  log.event(30.2, MachinesReady{log.last_id(), {4}});
  log.action(30.2, StartJob{"replacements ready"});
  log.action(40, RunProbe{ProbeKind::kGpuDiag, {4}, Duration::seconds(60), "check"});
}

// The simulator's side of the same story (its clock starts at the live 0.5 s), the
// replacement being its machine 6.
std::vector<std::string> sim_story() {
  return {
      rec(0, StartJob{"initial start"}),
      rec(9.7, StopJob{"crash: killed by signal 9 (SIGKILL)"}),
      rec(9.7,
          RunProbe{
              ProbeKind::kGpuDiag, {2, 1}, Duration::seconds(60), "killed by signal 9 (SIGKILL)"}),
      rec(9.8, StartJob{"reattempt: stop-time tests found nothing", Mechanism::kReattempt}),
      rec(29.6,
          EvictMachines{
              {3}, "real-time host alert: agent lost: machine down", Mechanism::kRealtimeEviction}),
      rec(29.6,
          AcquireMachines{
              AcquireMode::kStandby, {3}, "real-time host alert: x", Mechanism::kRealtimeEviction}),
      join(29.6, 6, 3),
      rec(29.6, Note{"a note is not a decision"}),
      rec(29.6, StartJob{"replacements ready"}),
      rec(39.5, RunProbe{ProbeKind::kGpuDiag, {6}, Duration::seconds(60), "check"})};
}

DecisionComparison compare(const traces::EventLog& log, const std::vector<std::string>& records,
                           double horizon_s = 600) {
  const auto sim = sim_decisions(records, 0.5, 4, live_slot_entries(log), kNames);
  DecisionContext ctx;
  ctx.horizon_s = horizon_s;
  for (const auto& f : log.faults) ctx.fault_times.push_back(f.t_s);
  for (const auto& a : log.actions)
    if (std::holds_alternative<StartJob>(a.value.action)) ctx.live_starts.push_back(a.t_s);
  return compare_decisions(live_decisions(log, kNames), sim, ctx);
}

TEST(ReplayDecisions, ReasonKindIsTheReasonsWordsBeforeItsFirstColon) {
  EXPECT_EQ(reason_kind("crash: killed by signal 9 (SIGKILL)"), "crash");
  EXPECT_EQ(reason_kind("killed by signal 9 (SIGKILL)"), "killed by signal #");
  EXPECT_EQ(reason_kind("dual-phase replay located slot(s) 12"),
            "dual-phase replay located slot #");
  EXPECT_EQ(reason_kind("previous test passed"), "previous test passed");
  EXPECT_EQ(reason_kind(""), "");
}

TEST(ReplayDecisions, TheSameStoryMatchesWithSimulatedMachinesNamedAsTheLiveRunNamedThem) {
  Log log;
  live_story(log);
  const auto parsed = log.parse();
  const auto entries = live_slot_entries(parsed);
  ASSERT_EQ(entries.size(), 4u);
  EXPECT_EQ(entries[3], (std::vector<MachineId>{3, 4}));
  const auto sim = sim_decisions(sim_story(), 0.5, 4, entries, kNames);
  ASSERT_EQ(sim.size(), 8u);  // the note left out
  EXPECT_EQ(sim[7].what, "gpu-diag [s0]");
  EXPECT_NEAR(sim[7].t_s, 40.0, 1e-9);
  const DecisionComparison c = compare(parsed, sim_story());
  EXPECT_EQ(c.live, 8u);
  EXPECT_EQ(c.matched, 8u);
  EXPECT_TRUE(c.mismatches.empty());
  EXPECT_TRUE(c.ok());
  const json j = decisions_json(c, 11);
  EXPECT_NE(format_decisions_text(j).find("decisions: 8 of 8 match the live run"),
            std::string::npos);
  EXPECT_TRUE(j.at("first_mismatch").is_null());
}

TEST(ReplayDecisions, DifferentActionsReportTheFirstMismatchWithBothSides) {
  Log log;
  live_story(log);
  auto records = sim_story();
  // The simulator evicted m1 after the kill where the live run reattempted.
  records[3] = rec(
      9.8, EvictMachines{{1}, "stop-time tests: gpu-diag failed", Mechanism::kStopTimeEviction});
  const DecisionComparison c = compare(log.parse(), records);
  EXPECT_EQ(c.matched, 7u);
  EXPECT_EQ(c.unexplained, 2u);
  EXPECT_FALSE(c.ok());
  const json j = decisions_json(c, 11);
  const json& m = j.at("first_mismatch");
  EXPECT_EQ(m.at("live").at("index"), 3);
  EXPECT_NEAR(m.at("live").at("t_s").get<double>(), 10.3, 1e-9);
  EXPECT_EQ(m.at("live").at("text"), "StartJob reattempt (reattempt)");
  EXPECT_EQ(m.at("sim").at("index"), 3);
  EXPECT_EQ(m.at("sim").at("text"), "EvictMachines [m1] stop_time_eviction (stop-time tests)");
  EXPECT_TRUE(m.at("explained_by").is_null());
  const std::string text = format_decisions_text(j);
  EXPECT_NE(text.find("decisions: 7 of 8 match the live run"), std::string::npos) << text;
  EXPECT_NE(text.find("live #3 t=10.30 s  StartJob reattempt (reattempt)"), std::string::npos)
      << text;
  EXPECT_NE(text.find("sim  #3 t=10.30 s  EvictMachines [m1] stop_time_eviction"),
            std::string::npos)
      << text;
}

TEST(ReplayDecisions, OtherMachinesOrAnotherReasonKindAreMismatches) {
  Log log;
  live_story(log);
  auto records = sim_story();
  records[2] = rec(
      9.7,
      RunProbe{ProbeKind::kGpuDiag, {1, 3}, Duration::seconds(60), "killed by signal 9 (SIGKILL)"});
  records[1] = rec(9.7, StopJob{"metric anomaly: loss"});
  const DecisionComparison c = compare(log.parse(), records);
  EXPECT_EQ(c.matched, 6u);
  EXPECT_EQ(c.unexplained, 4u);
}

TEST(ReplayDecisions, ListedDifferencesExplainSetUpAttemptsUnrecordedFaultsAndTheEnd) {
  Log log;
  log.action(0.2, StartJob{"initial start"});
  log.failed_last(0.3);  // agents still connecting
  live_story(log);
  // An agent killed outside `live inject`: no fault record, the live run reacted.
  log.action(50, StopJob{"real-time host alert: agent lost"});
  log.action(50, StartJob{"reattempt", Mechanism::kReattempt});
  auto records = sim_story();
  records.push_back(rec(595, StopJob{"no progress"}));  // past the live run's end
  const DecisionComparison c = compare(log.parse(), records, 600);
  EXPECT_EQ(c.matched, 8u);
  EXPECT_EQ(c.explained, 4u);
  EXPECT_EQ(c.unexplained, 0u);
  ASSERT_EQ(c.mismatches.size(), 4u);
  EXPECT_EQ(c.mismatches[0].explained_by, "set-up start attempts");
  EXPECT_EQ(c.mismatches[1].explained_by, "unrecorded fault");
  EXPECT_EQ(c.mismatches[3].explained_by, "end of the run");
  EXPECT_TRUE(c.ok());
  std::vector<std::string> listed;
  for (const auto& d : unmodelled_differences()) listed.push_back(d.name);
  for (const auto& m : c.mismatches)
    EXPECT_NE(std::find(listed.begin(), listed.end(), m.explained_by), listed.end());
}

TEST(ReplayDecisions, ARestartedControllersSetUpAndAJobThatNeverStartedAreExplained) {
  Log log;
  live_story(log);
  log.restart(45);  // the policy, built afresh, sets up again
  log.action(45.1, SetCheckpointPlan{Duration::zero(), Duration::zero(),
                                     CheckpointTier::kMemoryWithPeer, "every step"});
  log.action(45.2, StartJob{"initial start"});
  json d = compare_with_live(log.parse(), "/nonexistent/events.jsonl", sim_story(), 0.5, 600, 11);
  EXPECT_EQ(d.at("matched"), 8);
  EXPECT_EQ(d.at("unexplained"), 0) << d.dump(2);
  ASSERT_EQ(d.at("mismatches").size(), 2u);
  EXPECT_EQ(d.at("mismatches")[0].at("explained_by"), "controller restart");
  // No live start ever succeeded: what the policy did about the failed attempts, and the
  // simulated start, are set-up.
  Log never;
  never.action(0.2, StartJob{"initial start"});
  never.failed_last(0.3);
  never.action(0.3, RunProbe{ProbeKind::kGpuDiag, {1}, Duration::seconds(30), "launch failed"});
  d = compare_with_live(never.parse(), "/nonexistent/events.jsonl",
                        {rec(0, StartJob{"initial start"})}, 0, 600, 11);
  EXPECT_EQ(d.at("matched"), 0);
  EXPECT_EQ(d.at("explained"), 3);
  EXPECT_EQ(d.at("unexplained"), 0) << d.dump(2);
  for (const auto& m : d.at("mismatches")) EXPECT_EQ(m.at("explained_by"), "set-up start attempts");
}

TEST(ReplayDecisions, LiveMachineNamesComeFromTheConfigFileTheHeaderNames) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("faultline-decisions-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto cfg = dir / "live.json";
  std::ofstream(cfg) << R"({"machines":[{"name":"a"},{"name":"b"}],"standby":[{"name":"c"}]})";
  traces::EventLog log;
  log.header.config_file = cfg.string();
  EXPECT_EQ(live_machine_names(log, (dir / "state" / "events.jsonl").string()),
            (std::vector<std::string>{"a", "b", "c"}));
  std::filesystem::create_directories(dir / "state");
  std::ofstream(dir / "state" / "journal.json") << R"({"machine_names":["x","y","z"]})";
  EXPECT_EQ(live_machine_names(log, (dir / "state" / "events.jsonl").string()),
            (std::vector<std::string>{"x", "y", "z"}));
  std::filesystem::remove_all(dir);
}

TEST(ReplayDecisions, AMalformedRecordIsAnError) {
  EXPECT_THROW(sim_decisions({"R x A {}"}, 0, 4, {}, kNames), std::runtime_error);
}

}  // namespace
}  // namespace faultline::sim
