// The live event log: every Event and Action alternative round-trips exactly through
// JSON, records are validated with file:line and field, and a torn last line (a crash
// mid-write) is tolerated while a torn middle line is an error.
#include "eventlog/event_log.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "tests/support/full_disk.h"

namespace faultline::traces {
namespace {

using nlohmann::json;

// Field-by-field equality of the vocabulary, written out here rather than derived from
// the encoder, so a field the encoder forgets fails the round trip. NaN equals NaN.
bool same(double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

bool equal(const faultline::Event& a, const faultline::Event& b) {
  if (a.index() != b.index()) return false;
  return std::visit(
      [&](const auto& x) -> bool {
        using T = std::decay_t<decltype(x)>;
        const T& y = std::get<T>(b);
        if constexpr (std::is_same_v<T, ProcessExit>)
          return x.machine == y.machine && x.exit_code == y.exit_code && x.signature == y.signature;
        if constexpr (std::is_same_v<T, StartFailed>)
          return x.action == y.action && x.machine == y.machine && x.signature == y.signature;
        if constexpr (std::is_same_v<T, InspectionAlert>)
          return x.machine == y.machine && x.kind == y.kind && x.detail == y.detail;
        if constexpr (std::is_same_v<T, StepSample>)
          return x.step == y.step && same(x.step_time_s, y.step_time_s) &&
                 x.loss.has_value() == y.loss.has_value() && (!x.loss || same(*x.loss, *y.loss)) &&
                 x.grad_norm.has_value() == y.grad_norm.has_value() &&
                 (!x.grad_norm || same(*x.grad_norm, *y.grad_norm)) && x.nan == y.nan &&
                 x.steady == y.steady;
        if constexpr (std::is_same_v<T, JobStarted>)
          return x.action == y.action && x.step == y.step;
        if constexpr (std::is_same_v<T, JobStopped>) return x.action == y.action;
        if constexpr (std::is_same_v<T, MachinesReady>)
          return x.action == y.action && x.machines == y.machines;
        if constexpr (std::is_same_v<T, CodeUpdateRequested>)
          return x.version == y.version && x.urgent == y.urgent;
        if constexpr (std::is_same_v<T, TimerFired>) return x.timer == y.timer && x.tag == y.tag;
        if constexpr (std::is_same_v<T, ActionFailed>)
          return x.action == y.action && x.reason == y.reason;
        if constexpr (std::is_same_v<T, OracleFault>)
          return x.machines == y.machines && x.category == y.category &&
                 x.persistent == y.persistent && x.code_bug == y.code_bug &&
                 x.data_bug == y.data_bug && x.lead == y.lead && x.slowdown == y.slowdown &&
                 x.replica == y.replica;
        if constexpr (std::is_same_v<T, ProbeResult>)
          return x.action == y.action && x.test == y.test && x.failed == y.failed &&
                 x.timed_out == y.timed_out && x.group_failed == y.group_failed &&
                 x.group_seconds.size() == y.group_seconds.size() &&
                 std::equal(x.group_seconds.begin(), x.group_seconds.end(), y.group_seconds.begin(),
                            same);
        if constexpr (std::is_same_v<T, StacksCaptured>)
          return x.action == y.action && x.stacks == y.stacks;
        if constexpr (std::is_same_v<T, ReplayResult>)
          return x.action == y.action && x.group_failed == y.group_failed;
        if constexpr (std::is_same_v<T, ReplicaDropped>)
          return x.replica == y.replica && x.machine == y.machine && x.exit_code == y.exit_code &&
                 x.signature == y.signature && x.step == y.step && x.live == y.live;
        if constexpr (std::is_same_v<T, ReplicaRejoined>)
          return x.action == y.action && x.replica == y.replica && x.live == y.live;
        if constexpr (std::is_same_v<T, FailureWarning>)
          return x.machine == y.machine && x.kind == y.kind && x.lead == y.lead &&
                 x.detail == y.detail;
      },
      a);
}

bool equal(const faultline::Action& a, const faultline::Action& b) {
  if (a.index() != b.index()) return false;
  return std::visit(
      [&](const auto& x) -> bool {
        using T = std::decay_t<decltype(x)>;
        const T& y = std::get<T>(b);
        if constexpr (std::is_same_v<T, StopJob>) return x.reason == y.reason;
        if constexpr (std::is_same_v<T, StartJob>)
          return x.reason == y.reason && x.mechanism == y.mechanism && x.version == y.version &&
                 x.in_place == y.in_place;
        if constexpr (std::is_same_v<T, EvictMachines>)
          return x.machines == y.machines && x.reason == y.reason && x.mechanism == y.mechanism &&
                 x.retire == y.retire;
        if constexpr (std::is_same_v<T, AcquireMachines>)
          return x.mode == y.mode && x.slots == y.slots && x.reason == y.reason &&
                 x.mechanism == y.mechanism && x.same_domain == y.same_domain;
        if constexpr (std::is_same_v<T, SetCheckpointPlan>)
          return x.interval == y.interval && x.blocking == y.blocking && x.tier == y.tier &&
                 x.reason == y.reason && x.remote_interval == y.remote_interval;
        if constexpr (std::is_same_v<T, WatchSteps>)
          return x.every == y.every && x.reason == y.reason;
        if constexpr (std::is_same_v<T, EnableOracle>) return x.reason == y.reason;
        if constexpr (std::is_same_v<T, Note>) return x.text == y.text;
        if constexpr (std::is_same_v<T, EnableInspection>)
          return x.kind == y.kind && x.interval == y.interval && x.reason == y.reason;
        if constexpr (std::is_same_v<T, RunProbe>)
          return x.test == y.test && x.machines == y.machines && x.deadline == y.deadline &&
                 x.reason == y.reason && x.groups == y.groups;
        if constexpr (std::is_same_v<T, CaptureStacks>) return x.reason == y.reason;
        if constexpr (std::is_same_v<T, RunReplay>)
          return x.groups == y.groups && x.reason == y.reason;
        if constexpr (std::is_same_v<T, HotUpdate>)
          return x.version == y.version && x.reason == y.reason;
        if constexpr (std::is_same_v<T, RollBack>) return x.reason == y.reason;
        if constexpr (std::is_same_v<T, SetStandbyPool>)
          return x.size == y.size && x.reason == y.reason;
        if constexpr (std::is_same_v<T, EndRun>)
          return x.verdict == y.verdict && x.reason == y.reason;
        if constexpr (std::is_same_v<T, MitigateSlowdown>)
          return x.slot == y.slot && x.how == y.how && x.reason == y.reason;
        if constexpr (std::is_same_v<T, AvoidMachines>)
          return x.machines == y.machines && x.reason == y.reason;
        if constexpr (std::is_same_v<T, EnableReplicaGroups>)
          return x.min_replicas == y.min_replicas && x.quorum_change == y.quorum_change &&
                 x.timeout == y.timeout && x.reason == y.reason;
        if constexpr (std::is_same_v<T, RejoinReplica>)
          return x.replica == y.replica && x.reason == y.reason;
        if constexpr (std::is_same_v<T, MigrateMachines>)
          return x.machines == y.machines && x.reason == y.reason && x.mechanism == y.mechanism &&
                 x.pause == y.pause;
      },
      a);
}

// Every alternative with non-default values in every field (odd durations, large ids,
// non-ASCII text, infinities), so a dropped or defaulted field shows.
std::vector<faultline::Event> all_events() {
  const double inf = std::numeric_limits<double>::infinity();
  return {
      ProcessExit{3, 137, "RuntimeError: CUDA error: \"illegal\" memory access \xc3\xa9"},
      StartFailed{18446744073709551615ull, 7, "NCCL init failed"},
      InspectionAlert{2, "nic", "mlx5_0 down"},
      StepSample{123456789012345, inf, 1.2345678901234567, std::nullopt, true, true},
      JobStarted{42, 9000},
      JobStopped{43},
      MachinesReady{44, {5, 6, 2147483647}},
      CodeUpdateRequested{"v2.1-hotfix", false},
      TimerFired{7, 18446744073709551614ull},
      ActionFailed{45, "slots have no machine"},
      OracleFault{{1, 9},
                  "gpu_fatal",
                  true,
                  true,
                  true,
                  Duration::nanos(600'000'000'001),
                  true,
                  2147483647},
      ProbeResult{
          46, ProbeKind::kInterAllGather, {0, 3}, true, {true, false}, {inf, 0.12345678901234567}},
      StacksCaptured{47, StackSignatures({"train_step > gemm", "", "train_step > all_reduce"})},
      ReplayResult{48, {true, false, true}},
      ReplicaDropped{149, 2147483647, 134, "quorum timeout", 77, 148},
      ReplicaRejoined{49, 3, 150},
      FailureWarning{2147483647, "gpu", Duration::nanos(600'000'000'001), "ECC \xc3\xa9 rising"},
  };
}

std::vector<faultline::Action> all_actions() {
  return {
      StopJob{"crash: x"},
      StartJob{"reattempt", Mechanism::kReattempt, "v7", true},
      EvictMachines{{1, 2}, "real-time gpu alert", Mechanism::kRealtimeEviction, true},
      AcquireMachines{AcquireMode::kStandby, {4, 0}, "replace", Mechanism::kOverEviction, true},
      SetCheckpointPlan{Duration::nanos(1'800'000'000'007), Duration::millis(6.77),
                        CheckpointTier::kMemoryWithPeer, "every step", Duration::hours(2)},
      WatchSteps{Duration::nanos(600'000'000'001), "triggers"},
      EnableOracle{"upper bound"},
      Note{"line one\nline two\ttab"},
      EnableInspection{"host", Duration::seconds(2), "real-time inspection"},
      RunProbe{ProbeKind::kInterAllGather,
               {0, 1, 2, 3},
               Duration::infinite(),
               "NaN",
               {{0, 1}, {2, 3, 2147483647}}},
      CaptureStacks{"stall"},
      RunReplay{{{0, 1}, {}, {2, 3, 4}}, "phase 1"},
      HotUpdate{"v3", "urgent update"},
      RollBack{"crash after restart"},
      SetStandbyPool{-1, "P99"},
      EndRun{"code_or_data", "NaN at step 30 three times"},
      MitigateSlowdown{2147483647, Mitigation::kReconfigure, "straggler in slot 7: reconfigure"},
      AvoidMachines{{7, 2147483647, 0}, "evicted on evidence (scored)"},
      EnableReplicaGroups{75, Duration::nanos(10'000'000'001), Duration::seconds(61), "ft-hsdp"},
      RejoinReplica{2147483647, "its machines are ready"},
      MigrateMachines{{3, 2147483647},
                      "failure predicted",
                      Mechanism::kRealtimeEviction,
                      Duration::millis(20'000.5)},
  };
}

TEST(EventLogJson, EveryEventAlternativeRoundTripsExactly) {
  const auto events = all_events();
  ASSERT_EQ(events.size(), std::variant_size_v<faultline::Event>);  // one per alternative
  for (std::size_t i = 0; i < events.size(); ++i) {
    ASSERT_EQ(events[i].index(), i);
    const json j = to_json(events[i]);
    // Through text, as the log stores it.
    const json back = json::parse(j.dump());
    const faultline::Event e = event_from_json(back);
    EXPECT_TRUE(equal(events[i], e)) << j.dump();
    EXPECT_EQ(to_json(e).dump(), j.dump());
  }
}

TEST(EventLogJson, EveryActionAlternativeRoundTripsExactly) {
  const auto actions = all_actions();
  ASSERT_EQ(actions.size(), std::variant_size_v<faultline::Action>);
  for (std::size_t i = 0; i < actions.size(); ++i) {
    ASSERT_EQ(actions[i].index(), i);
    const json j = to_json(actions[i]);
    const faultline::Action a = action_from_json(json::parse(j.dump()));
    EXPECT_TRUE(equal(actions[i], a)) << j.dump();
  }
}

// An in-place start (FlashRecovery) says so; a standard one writes nothing new, and a log
// written before the field existed reads as standard starts.
TEST(EventLogJson, OnlyAnInPlaceStartCarriesInPlace) {
  const json plain = to_json(faultline::Action{StartJob{"ready"}});
  EXPECT_FALSE(plain.contains("in_place")) << plain.dump();
  EXPECT_FALSE(std::get<StartJob>(action_from_json(plain)).in_place);
  StartJob flash{"ready"};
  flash.in_place = true;
  const json j = to_json(faultline::Action{flash});
  EXPECT_EQ(j["in_place"], true);
  EXPECT_TRUE(std::get<StartJob>(action_from_json(j)).in_place);
}

TEST(EventLogJson, FieldNamesUnitsAndEnumsAreTheDocumentedOnes) {
  json j = to_json(
      faultline::Action{SetCheckpointPlan{Duration::seconds(30), Duration::millis(500),
                                          CheckpointTier::kRemote, "r", Duration::hours(1)}});
  EXPECT_EQ(
      j,
      json::parse(R"({"type":"SetCheckpointPlan","interval_s":30.0,"blocking_s":0.5,"tier":"remote",
                               "reason":"r","remote_interval_s":3600.0})"));
  j = to_json(
      faultline::Action{AcquireMachines{AcquireMode::kRequeue, {}, "q", Mechanism::kRequeue}});
  EXPECT_EQ(j["mode"], "requeue");
  EXPECT_EQ(j["mechanism"], "requeue");
  EXPECT_EQ(j["slots"], json::array());
  j = to_json(faultline::Event{ProbeResult{1, ProbeKind::kGpuDiag, {2}, false}});
  EXPECT_EQ(j["test"], "gpu-diag");
  EXPECT_EQ(to_json(faultline::Event{StepSample{1, std::nan(""), std::nullopt, std::nullopt, true,
                                                false}})["step_time_s"],
            "nan");
  EXPECT_EQ(to_json(faultline::Event{ProcessExit{1, 137, ""}}),
            json::parse(R"({"type":"ProcessExit","machine":1,"exit_code":137,"signature":""})"));
  // Sub-nanosecond-exact durations at the scale of a long run.
  for (std::int64_t ns : {1LL, 999'999'999LL, 86'400'000'000'001LL, 4'000'000'000'000'001LL}) {
    const faultline::Action a = action_from_json(json::parse(
        to_json(faultline::Action{RunProbe{ProbeKind::kStress, {}, Duration{ns}, ""}}).dump()));
    EXPECT_EQ(std::get<RunProbe>(a).deadline.ns, ns);
  }
}

TEST(EventLogJson, InverseNameLookupsCoverEveryEnumValue) {
  for (auto k : {AcquireMode::kRequeue, AcquireMode::kReschedule, AcquireMode::kStandby,
                 AcquireMode::kOracle})
    EXPECT_EQ(mode_from_name(mode_name(k)), k);
  for (auto t : {CheckpointTier::kRemote, CheckpointTier::kMemory, CheckpointTier::kMemoryWithPeer})
    EXPECT_EQ(tier_from_name(tier_name(t)), t);
  for (auto p : {ProbeKind::kGpuDiag, ProbeKind::kIntraAllToAll, ProbeKind::kInterAllGather,
                 ProbeKind::kBitwise, ProbeKind::kStress})
    EXPECT_EQ(probe_from_name(probe_name(p)), p);
  EXPECT_EQ(fault_kind_from_name("machine_down"), FaultKind::kMachineDown);
  EXPECT_EQ(fault_kind_from_name("nic_down"), FaultKind::kNicDown);
  EXPECT_FALSE(fault_kind_from_name("meteor"));
}

TEST(EventLogJson, DecodingErrorsNameThePathAndWhatWasExpected) {
  auto error_of = [](const std::string& text, bool action = false) {
    try {
      if (action)
        action_from_json(json::parse(text), "$.action");
      else
        event_from_json(json::parse(text), "$.event");
    } catch (const EventLogError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error_of(R"({"type":"ProcessExit","machine":"three"})"),
            "$.event.machine: expected an integer, got a string \"three\"");
  EXPECT_NE(error_of(R"({"type":"Teleport"})").find("$.event.type: expected one of ProcessExit|"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"type":"JobStarted","stp":3})").find("$.event.stp: unknown key"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"machine":1})").find("$.event.type: required string is missing"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"type":"AcquireMachines","mode":"warp"})", true)
                .find("$.action.mode: expected one of requeue|reschedule|standby|oracle"),
            std::string::npos);
  EXPECT_EQ(error_of(R"({"type":"RunReplay","groups":[[1],[2,"x"]]})", true),
            "$.action.groups[1][1]: expected an integer, got a string \"x\"");
  EXPECT_NE(error_of(R"({"type":"SetCheckpointPlan","interval_s":"30"})", true)
                .find("$.action.interval_s: expected seconds"),
            std::string::npos);
  EXPECT_NE(error_of("[1,2]").find("$.event: expected an object, got an array"), std::string::npos);
}

// ---------------------------------------------------------------- log files

class TempLog : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (std::filesystem::temp_directory_path() /
             ("faultline-eventlog-" + std::to_string(::getpid()) + "-" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".jsonl"))
                .string();
    std::filesystem::remove(path_);
  }
  void TearDown() override { std::filesystem::remove(path_); }
  void write_text(const std::string& text) {
    std::ofstream f(path_, std::ios::binary | std::ios::trunc);
    f << text;
  }
  std::string read_text() const {
    std::ifstream f(path_, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }
  std::string error_of() const {
    try {
      read_event_log(path_);
    } catch (const EventLogError& e) {
      return e.what();
    }
    return "no error";
  }
  static std::string header_line() {
    EventLogHeader h;
    h.stack = "requeue";
    h.params = {{"checkpoint_interval_s", 30}};
    h.seed = 7;
    h.machines = 4;
    h.gpus_per_machine = 1;
    h.tp = 1;
    h.pp = 1;
    h.dp = 4;
    h.standby_machines = 1;
    h.nominal_step_time_s = 0.5;
    h.checkpoint_every_steps = 60;
    h.config_file = "live.json";
    return header_record(0, h).dump() + "\n";
  }
  std::string path_;
};

TEST_F(TempLog, WriterOutputReadsBackRecordForRecord) {
  {
    EventLogWriter w(path_);
    EventLogHeader h;
    h.stack = "byterobust";
    h.params = {{"standby_pool", 1}, {"stall_window_s", 60}, {"localization", 4}};
    h.choices = {{"localization", "pp-group-replay"}};
    h.seed = 18446744073709551615ull;
    h.machines = 2;
    h.gpus_per_machine = 2;
    h.tp = 2;
    h.pp = 1;
    h.dp = 2;
    h.nominal_step_time_s = 0.25;
    h.checkpoint_every_steps = 1;
    ASSERT_TRUE(w.header(0, h));
    for (const auto& e : all_events()) ASSERT_TRUE(w.event(1.5, e));
    ActionId id = 1;
    for (const auto& a : all_actions()) ASSERT_TRUE(w.action(2.25, id++, a));
    ASSERT_TRUE(w.outcome(8.5, {2, true, "ranks up", 6.2}));
    ASSERT_TRUE(w.note(9, "evict 1: real-time host alert"));
    ASSERT_TRUE(w.fault(10, {1, 1, FaultKind::kSlow, "1.5", true}));
    ASSERT_TRUE(w.fault(11, {kNoMachine, -1, FaultKind::kUpdate, "v2", false}));
    ASSERT_TRUE(w.progress(12, {100, 2.5, false}));
    ASSERT_TRUE(w.progress(13, {101, std::nullopt, true}));
    ASSERT_TRUE(w.progress(14, {102, std::nan(""), false}));
    ASSERT_TRUE(w.restart(15, "controller restarted"));
    ASSERT_TRUE(w.summary(600, {600, 2000, 0, 500, 500.0 / 600, 0.25}));
    EXPECT_EQ(w.failed_writes(), 0u);
  }
  const EventLog log = read_event_log(path_);
  EXPECT_FALSE(log.torn_tail);
  EXPECT_EQ(log.header.stack, "byterobust");
  EXPECT_EQ(log.header.seed, 18446744073709551615ull);
  EXPECT_EQ(log.header.params.at("stall_window_s"), 60);
  EXPECT_EQ(log.header.choices.at("localization"), "pp-group-replay");
  EXPECT_EQ(log.header.tp, 2);
  EXPECT_EQ(log.header.checkpoint_every_steps, 1);
  ASSERT_EQ(log.events.size(), all_events().size());
  for (std::size_t i = 0; i < log.events.size(); ++i) {
    EXPECT_TRUE(equal(log.events[i].value, all_events()[i]));
    EXPECT_EQ(log.events[i].t_s, 1.5);
    EXPECT_EQ(log.events[i].line, i + 2);
  }
  ASSERT_EQ(log.actions.size(), all_actions().size());
  for (std::size_t i = 0; i < log.actions.size(); ++i) {
    EXPECT_TRUE(equal(log.actions[i].value.action, all_actions()[i]));
    EXPECT_EQ(log.actions[i].value.id, i + 1);
  }
  ASSERT_EQ(log.outcomes.size(), 1u);
  EXPECT_EQ(log.outcomes[0].value.duration_s, 6.2);
  EXPECT_EQ(log.outcomes[0].value.detail, "ranks up");
  ASSERT_EQ(log.notes.size(), 1u);
  ASSERT_EQ(log.faults.size(), 2u);
  EXPECT_EQ(log.faults[0].value.fault, FaultKind::kSlow);
  EXPECT_EQ(log.faults[0].value.slot, 1);
  EXPECT_TRUE(log.faults[0].value.persistent);
  EXPECT_EQ(log.faults[1].value.machine, kNoMachine);
  ASSERT_EQ(log.progress.size(), 3u);
  EXPECT_EQ(log.progress[0].value.loss, 2.5);
  EXPECT_FALSE(log.progress[1].value.loss);
  EXPECT_TRUE(log.progress[1].value.restart);
  EXPECT_TRUE(std::isnan(*log.progress[2].value.loss));
  ASSERT_EQ(log.restarts.size(), 1u);
  ASSERT_TRUE(log.summary);
  EXPECT_EQ(log.summary->value.final_step, 2000);
  EXPECT_EQ(log.records.size(), 1 + all_events().size() + all_actions().size() + 9);
  // One line per record, each a JSON object with t_s and kind.
  std::istringstream lines(read_text());
  std::string line;
  std::size_t n = 0;
  while (std::getline(lines, line)) {
    const json j = json::parse(line);
    EXPECT_TRUE(j.contains("t_s") && j.contains("kind")) << line;
    ++n;
  }
  EXPECT_EQ(n, log.records.size());
}

TEST_F(TempLog, WriterAppendsAndCutsATornTailLeftByACrash) {
  write_text(header_line() + R"({"t_s":1,"kind":"note","text":"ok"})" + "\n" +
             R"({"t_s":2,"kind":"no)");
  {
    EventLogWriter w(path_);
    ASSERT_TRUE(w.note(3, "resumed"));
  }
  const EventLog log = read_event_log(path_);
  EXPECT_FALSE(log.torn_tail);
  ASSERT_EQ(log.notes.size(), 2u);
  EXPECT_EQ(log.notes[1].value, "resumed");
  EXPECT_EQ(log.notes[1].line, 3u);
}

TEST_F(TempLog, WriterOnAnUnwritablePathThrowsAtOpen) {
  EXPECT_THROW(EventLogWriter("/nonexistent-dir/x/log.jsonl"), EventLogError);
}

TEST_F(TempLog, MalformedLineGivesFileLineAndField) {
  write_text(
      header_line() + R"({"t_s":1,"kind":"note","text":"ok"})" + "\n" +
      R"({"t_s":2,"kind":"event","event":{"type":"ProcessExit","machine":1,"exit_code":"137"}})" +
      "\n" + R"({"t_s":3,"kind":"note","text":"after"})" + "\n");
  EXPECT_EQ(error_of(), path_ + ":3: $.event.exit_code: expected an integer, got a string \"137\"");
}

// Issue 52, broken item 2: a controller that read the previous release's journal after a
// reboot restarted run time at 0, and its records (861 s, then 1 s) went into the log; `sim
// replay` took the log. Time going backwards is refused, naming the line and the time before.
TEST_F(TempLog, ALogWhoseTimeGoesBackwardsIsRefused) {
  write_text(header_line() + R"({"t_s":861.5,"kind":"note","text":"before the reboot"})" + "\n" +
             R"({"t_s":861.5,"kind":"note","text":"same time is fine"})" + "\n" +
             R"({"t_s":1,"kind":"note","text":"after"})" + "\n");
  EXPECT_EQ(error_of(), path_ +
                            ":4: $.t_s: expected at least 861.5, the time of line 3: the log's "
                            "time goes backwards");
  write_text(header_line() + R"({"t_s":861.5,"kind":"note","text":"before"})" + "\n" +
             R"({"t_s":900,"kind":"note","text":"after"})" + "\n");
  EXPECT_EQ(error_of(), "no error");
}

TEST_F(TempLog, BadRecordFieldsNameTheirLine) {
  write_text(header_line() + R"({"t_s":1,"kind":"fault","machine":1,"slot":1,"fault":"meteor"})" +
             "\n");
  EXPECT_NE(error_of().find(path_ + ":2: $.fault: expected one of kill|machine_down|crash"),
            std::string::npos)
      << error_of();
  write_text(header_line() + R"({"t_s":-1,"kind":"note","text":"x"})" + "\n");
  EXPECT_NE(error_of().find(path_ + ":2: $.t_s: expected a finite number in [0,"),
            std::string::npos)
      << error_of();
  write_text(header_line() + R"({"t_s":1,"kind":"note","text":"x","txt":"x"})" + "\n");
  EXPECT_NE(error_of().find(path_ + ":2: $.txt: unknown key"), std::string::npos) << error_of();
  write_text(header_line() +
             R"({"t_s":1,"kind":"fault","machine":1,"slot":1,"fault":"slow","detail":"fast"})" +
             "\n");
  EXPECT_NE(error_of().find(path_ + ":2: $.detail: expected the slowdown factor"),
            std::string::npos)
      << error_of();
  write_text(header_line() +
             R"({"t_s":1,"kind":"fault","machine":1,"slot":1,"fault":"warn","detail":"soon"})" +
             "\n");
  EXPECT_NE(error_of().find(path_ + ":2: $.detail: expected the lead time of a \"warn\" fault"),
            std::string::npos)
      << error_of();
  write_text(R"({"t_s":0,"kind":"note","text":"no header"})"
             "\n");
  EXPECT_EQ(error_of(), path_ + ":1: $.kind: expected \"header\" on the first line, got \"note\"");
  std::string h = header_line();
  h.replace(h.find("\"tp\":1"), 6, "\"tp\":2");
  write_text(h);
  EXPECT_NE(
      error_of().find(path_ + ":1: $.cluster: expected tp*pp*dp == machines*gpus_per_machine"),
      std::string::npos)
      << error_of();
  write_text(header_line() + header_line());
  EXPECT_NE(error_of().find(path_ + ":2: $.kind: expected one header"), std::string::npos)
      << error_of();
  write_text("");
  EXPECT_EQ(error_of(), path_ + ":1: $.kind: expected a \"header\" record, the log is empty");
}

// The account of lost time (issue 39): written and read back phase for phase; a log from
// before it (none) still reads; an unknown phase or a negative time names its field.
TEST_F(TempLog, AccountRecordsReadBackAndLogsWithoutThemStillRead) {
  write_text(header_line() + R"({"t_s":1,"kind":"note","text":"old log"})" + "\n");
  EXPECT_TRUE(read_event_log(path_).accounts.empty());
  std::remove(path_.c_str());
  {
    EventLogWriter w(path_);
    ASSERT_TRUE(w.write(json::parse(header_line())));
    AccountRecord a{100, 80, 0.8, {{"detection", 2.5}, {"failover", 10}, {"recompute", 7.5}}};
    ASSERT_TRUE(w.account(50, a));
    a.elapsed_s = 200;
    a.lost_s["degraded"] = 0.25;
    ASSERT_TRUE(w.account(200, a));
  }
  const EventLog log = read_event_log(path_);
  ASSERT_EQ(log.accounts.size(), 2u);
  EXPECT_EQ(log.accounts[0].t_s, 50);
  EXPECT_EQ(log.accounts[0].value.productive_s, 80);
  EXPECT_EQ(log.accounts[0].value.lost_s.at("failover"), 10);
  EXPECT_EQ(log.accounts[1].value.elapsed_s, 200);
  EXPECT_EQ(log.accounts[1].value.lost_s.size(), 4u);
  write_text(header_line() +
             R"({"t_s":1,"kind":"account","elapsed_s":1,"productive_s":0,"ettr":0,)"
             R"("lost_s":{"coffee":1}})" +
             "\n");
  EXPECT_NE(
      error_of().find(path_ + ":2: $.lost_s.coffee: expected a lost phase, one of detection|"),
      std::string::npos)
      << error_of();
  write_text(header_line() +
             R"({"t_s":1,"kind":"account","elapsed_s":1,"productive_s":0,"ettr":0,)"
             R"("lost_s":{"failover":-1}})" +
             "\n");
  EXPECT_NE(error_of().find(path_ + ":2: $.lost_s.failover: expected seconds >= 0"),
            std::string::npos)
      << error_of();
}

TEST_F(TempLog, TornLastLineIsToleratedWithAWarningFlag) {
  write_text(header_line() + R"({"t_s":1,"kind":"note","text":"ok"})" + "\n" +
             R"({"t_s":2,"kind":"progress","st)");
  const EventLog log = read_event_log(path_);
  EXPECT_TRUE(log.torn_tail);
  EXPECT_EQ(log.torn_line, 3u);
  EXPECT_EQ(log.records.size(), 2u);
  EXPECT_EQ(log.notes.size(), 1u);
  // A complete last line without its newline is not torn.
  write_text(header_line() + R"({"t_s":1,"kind":"note","text":"ok"})");
  const EventLog whole = read_event_log(path_);
  EXPECT_FALSE(whole.torn_tail);
  EXPECT_EQ(whole.notes.size(), 1u);
}

TEST_F(TempLog, TornMiddleLineIsAnError) {
  write_text(header_line() + R"({"t_s":1,"kind":"progress","st)" + "\n" +
             R"({"t_s":2,"kind":"note","text":"ok"})" + "\n");
  const std::string e = error_of();
  EXPECT_EQ(e.rfind(path_ + ":2: $: invalid JSON", 0), 0u) << e;
}

TEST(EventLogSummary, LiveEttrFromProgressUsesTheMedianHealthyStep) {
  // Steps of 1 s, a 3 s checkpoint stall after every 10th step, a restart that loses
  // 5 steps and takes 20 s: the median step is 1 s whatever the stalls and the gap.
  std::vector<Timed<ProgressRecord>> p;
  double t = 5;
  std::int64_t step = 0;
  for (int i = 0; i < 40; ++i) {
    ++step;
    t += 1 + (step % 10 == 1 && step > 1 ? 3 : 0);
    p.push_back({t, 0, {step, 1.0, false}});
  }
  step -= 5;
  t += 20;
  for (int i = 0; i < 15; ++i) {
    ++step;
    t += 1;
    p.push_back({t, 0, {step, 1.0, i == 0}});
  }
  const SummaryRecord s = summarize_progress(p, 100, 9);
  EXPECT_DOUBLE_EQ(s.step_time_s, 1.0);
  EXPECT_EQ(s.first_step, 0);
  EXPECT_EQ(s.final_step, 50);
  EXPECT_DOUBLE_EQ(s.productive_s, 50);
  EXPECT_DOUBLE_EQ(s.ettr, 0.5);
  // Without two consecutive healthy samples: the nominal step time.
  EXPECT_DOUBLE_EQ(summarize_progress({p[0]}, 100, 9).step_time_s, 9);
}

// A log on a disk that really fills: a 64 KiB tmpfs filled with a filler file when the
// tests run as root (and may mount), else a file-size limit (RLIMIT_FSIZE, SIGXFSZ
// ignored) set just above the log's size. Writes fail in the kernel either way, often
// after part of a line went out, which is what tore records before.
class FullDisk : public ::testing::Test {
 protected:
  // Leaves no room for the log to grow by another byte (tmpfs) or another byte past a
  // slack of 10 (file-size limit).
  void fill() { disk_.fill(std::filesystem::file_size(path_) + 10, true); }
  void free_space() { disk_.free_space(); }
  std::string read_text() const {
    std::ifstream f(path_, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }
  // Writes "note i" for i = first, first+1, ... until one fails (the disk is full);
  // returns the i that failed.
  int write_until_failure(EventLogWriter& w, int first) {
    for (int i = first; i < first + 2000; ++i)
      if (!w.note(i, "note " + std::to_string(i))) return i;
    ADD_FAILURE() << "no write failed on a full disk";
    return -1;
  }
  // Every line is a whole record (the file ends with a newline) and the log decodes with
  // no torn tail; returns the notes' numbers in file order.
  std::vector<int> notes_in_file() const {
    const std::string text = read_text();
    EXPECT_TRUE(text.empty() || text.back() == '\n') << "a torn record stayed in the file";
    std::vector<int> out;
    try {
      const EventLog log = read_event_log(path_);
      EXPECT_FALSE(log.torn_tail) << "torn line " << log.torn_line;
      for (const auto& n : log.notes) out.push_back(std::stoi(n.value.substr(5)));
    } catch (const EventLogError& e) {
      ADD_FAILURE() << e.what();
    }
    return out;
  }
  static EventLogHeader header() {
    EventLogHeader h;
    h.stack = "byterobust";
    return h;
  }

  faultline::testing::FullDiskDir disk_{"faultline-fulldisk"};
  const std::string dir_ = disk_.path();
  const std::string path_ = dir_ + "/events.jsonl";
  const bool mounted_ = disk_.mounted();
};

TEST_F(FullDisk, AFailedWriteLeavesNoTornRecordAndTheBacklogIsWrittenInOrderOnceThereIsRoom) {
  EventLogWriter w(path_);
  ASSERT_TRUE(w.header(0, header()));
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(w.note(i, "note " + std::to_string(i)));
  EXPECT_FALSE(w.health().failing);
  fill();
  const auto before = std::chrono::system_clock::now();
  const int failed_at = write_until_failure(w, 5);
  ASSERT_GT(failed_at, 0);
  for (int i = failed_at + 1; i < failed_at + 20; ++i)
    EXPECT_FALSE(w.note(i, "note " + std::to_string(i)));
  EXPECT_FALSE(w.flush()) << "the disk is still full";

  // While full: the file holds whole records only, up to the last one that went through.
  std::vector<int> want;
  for (int i = 0; i < failed_at; ++i) want.push_back(i);
  EXPECT_EQ(notes_in_file(), want);
  const StorageHealth h = w.health();
  EXPECT_TRUE(h.failing);
  EXPECT_EQ(h.outages, 1u);
  EXPECT_EQ(h.pending, 20u);
  EXPECT_EQ(h.lost, 0u);
  EXPECT_GE(h.failed_writes, 21u) << "each record tried once, and the flush";
  EXPECT_EQ(w.failed_writes(), h.failed_writes);
  EXPECT_EQ(h.last_error, path_ + ": " + std::strerror(mounted_ ? ENOSPC : EFBIG));
  const auto since =
      std::chrono::system_clock::time_point(std::chrono::milliseconds(h.since_unix_ms));
  EXPECT_LE(std::chrono::abs(since - before), std::chrono::seconds(2));

  // Room again: the next record goes out after the 20 that waited, in order.
  free_space();
  EXPECT_TRUE(w.note(failed_at + 20, "note " + std::to_string(failed_at + 20)));
  for (int i = failed_at; i <= failed_at + 20; ++i) want.push_back(i);
  EXPECT_EQ(notes_in_file(), want);
  EXPECT_FALSE(w.health().failing);
  EXPECT_EQ(w.health().pending, 0u);
  EXPECT_EQ(w.health().written_late, 20u);
  EXPECT_EQ(w.health().lost, 0u);
  EXPECT_EQ(w.health().outages, 1u);
  EXPECT_EQ(w.health().since_unix_ms, h.since_unix_ms) << "the outage that ended keeps its start";
}

TEST_F(FullDisk, ABacklogThatOverflowsCountsTheRecordsItLostAndFlushWritesTheRest) {
  EventLogWriter w(path_);
  w.set_backlog_limits(1 << 20, 8);
  ASSERT_TRUE(w.header(0, header()));
  fill();
  const int failed_at = write_until_failure(w, 0);
  ASSERT_GE(failed_at, 0);
  for (int i = failed_at + 1; i < failed_at + 12; ++i)
    EXPECT_FALSE(w.note(i, "note " + std::to_string(i)));
  EXPECT_EQ(w.health().pending, 8u);
  EXPECT_EQ(w.health().lost, 4u);
  EXPECT_EQ(w.health().outage_lost, 4u);
  EXPECT_TRUE(w.health().failing);

  free_space();
  EXPECT_TRUE(w.flush()) << "the backlog goes out without waiting for another record";
  std::vector<int> want;
  for (int i = 0; i < failed_at + 8; ++i)
    want.push_back(i);  // the oldest 8 waited; the 4 after were lost
  EXPECT_EQ(notes_in_file(), want);
  EXPECT_FALSE(w.health().failing);
  EXPECT_EQ(w.health().pending, 0u);
  EXPECT_EQ(w.health().written_late, 8u);
  EXPECT_EQ(w.health().lost, 4u);

  // A second outage counts on; its own tallies start over.
  fill();
  const int again = write_until_failure(w, failed_at + 12);
  ASSERT_GE(again, 0);
  EXPECT_EQ(w.health().outages, 2u);
  EXPECT_EQ(w.health().outage_lost, 0u);
  EXPECT_EQ(w.health().pending, 1u);
  free_space();
  EXPECT_TRUE(w.flush());
  EXPECT_EQ(w.health().written_late, 1u);
  EXPECT_EQ(notes_in_file().back(), again);
}

TEST_F(FullDisk, ABacklogStillWaitingWhenTheWriterClosesIsWrittenByItsLastFlush) {
  {
    EventLogWriter w(path_);
    ASSERT_TRUE(w.header(0, header()));
    fill();
    ASSERT_GE(write_until_failure(w, 0), 0);
    EXPECT_FALSE(w.note(9999, "note 9999"));
    free_space();
  }
  // The destructor's last flush wrote what waited.
  EXPECT_EQ(notes_in_file().back(), 9999);
}

}  // namespace
}  // namespace faultline::traces
