// `faultline sim replay` end to end, through the CLI: hand-written event logs (a header,
// a few faults, the actions and events a live run would have logged, a summary) are
// replayed and checked against quantities computed here independently of the simulator:
// the closed-form progress of a job that alternates training and checkpoint stalls, the
// mechanism each stack must use, and the number of faults in the log.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tests/support/cli.h"

namespace faultline::testing {
namespace {

using nlohmann::json;

// A live run as the tests write it: 4 machines x 1 GPU, dp 4, steps of 1 s, a checkpoint
// after every 30th step that stalls the next step by 3 s, process start 5 s.
constexpr double kStep = 1.0, kStall = 3.0, kInit = 5.0, kHorizon = 600.0;
constexpr int kEvery = 30;

class LogFile {
 public:
  explicit LogFile(const std::string& tag)
      : path_((std::filesystem::temp_directory_path() /
               ("faultline-replay-" + std::to_string(::getpid()) + "-" + tag + ".jsonl"))
                  .string()) {}
  ~LogFile() { std::filesystem::remove(path_); }
  void add(json record) { lines_.push_back(record.dump()); }
  void raw(const std::string& line) { lines_.push_back(line); }
  // The lines in time order, as a controller writes them (the reader refuses a log whose time
  // goes backwards): a stable sort by t_s; a line without one keeps its place after the line
  // before it.
  const std::string& write(bool trailing_newline = true) {
    std::vector<std::pair<double, std::size_t>> order;
    double t = 0;
    for (std::size_t i = 0; i < lines_.size(); ++i) {
      const json j = json::parse(lines_[i], nullptr, false);
      if (j.is_object() && j.contains("t_s") && j["t_s"].is_number()) t = j["t_s"].get<double>();
      order.emplace_back(t, i);
    }
    std::stable_sort(order.begin(), order.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<std::string> sorted;
    for (const auto& [when, i] : order) sorted.push_back(lines_[i]);
    lines_ = std::move(sorted);
    std::ofstream f(path_, std::ios::binary | std::ios::trunc);
    for (std::size_t i = 0; i < lines_.size(); ++i)
      f << lines_[i] << (i + 1 < lines_.size() || trailing_newline ? "\n" : "");
    return path_;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::vector<std::string> lines_;
};

json header(const std::string& stack = "requeue") {
  return {{"t_s", 0},
          {"kind", "header"},
          {"format", "faultline-eventlog"},
          {"version", 1},
          {"stack", stack},
          {"params", {{"checkpoint_interval_s", 30}, {"checkpoint_write_s", 0.5}}},
          {"seed", 3},
          {"cluster",
           {{"machines", 4},
            {"gpus_per_machine", 1},
            {"tp", 1},
            {"pp", 1},
            {"dp", 4},
            {"standby_machines", 1}}},
          {"nominal_step_time_s", kStep},
          {"checkpoint_every_steps", kEvery},
          {"config_file", "live.json"}};
}

json action(double t, int id, json a) {
  return {{"t_s", t}, {"kind", "action"}, {"id", id}, {"action", a}};
}
json outcome(double t, int id, double dur) {
  return {{"t_s", t},   {"kind", "outcome"}, {"id", id},
          {"ok", true}, {"detail", ""},      {"duration_s", dur}};
}
json fault(double t, int machine, int slot, const std::string& kind, const std::string& detail = "",
           std::optional<bool> persistent = std::nullopt) {
  json f = {{"t_s", t},     {"kind", "fault"}, {"machine", machine},
            {"slot", slot}, {"fault", kind},   {"detail", detail}};
  if (persistent) f["persistent"] = *persistent;
  return f;
}
json process_exit(double t, int machine, int code, const std::string& signature) {
  return {{"t_s", t},
          {"kind", "event"},
          {"event",
           {{"type", "ProcessExit"},
            {"machine", machine},
            {"exit_code", code},
            {"signature", signature}}}};
}
json progress(double t, long step, bool restart = false) {
  return {{"t_s", t}, {"kind", "progress"}, {"step", step}, {"loss", 2.0}, {"restart", restart}};
}
json summary(double elapsed, long final_step, long first_step = 0) {
  const double productive = (final_step - first_step) * kStep;
  return {{"t_s", elapsed},
          {"kind", "summary"},
          {"elapsed_s", elapsed},
          {"final_step", final_step},
          {"first_step", first_step},
          {"productive_s", productive},
          {"ettr", productive / elapsed},
          {"step_time_s", kStep}};
}

// The live timeline of a job that trains `from`..`to` (wall s) restarting from
// `committed` steps: progress samples, one per step, a checkpoint every kEvery steps
// stalling the next step. Returns the last step completed by `to`, and the committed
// (checkpointed) step at `to`.
std::pair<long, long> run_steps(LogFile& log, double from, double to, long committed) {
  double t = from;
  long step = committed;
  bool first = true;
  while (true) {
    const double dt = kStep + (step > committed && step % kEvery == 0 ? kStall : 0);
    if (t + dt > to + 1e-9) break;
    t += dt;
    ++step;
    log.add(progress(t, step, first && committed > 0));
    first = false;
  }
  long ckpt = committed;
  for (long s = committed + 1; s <= step; ++s)
    if (s % kEvery == 0 && s < step) ckpt = s;  // saved once the stall after it is done
  return {step, ckpt};
}

// Training time kept by a job that alternates `tau` of training and `delta` of
// checkpoint stall, from wall time `from` to `to`, starting from a fresh segment:
// closed form, with the progress of the last, partial segment kept.
struct Kept {
  double committed = 0;  // in complete checkpoints
  double pending = 0;    // since the last one
};
Kept train(double from, double to, double tau, double delta) {
  const double wall = to - from;
  const double cycles = std::floor(wall / (tau + delta));
  const double rest = wall - cycles * (tau + delta);
  Kept k;
  k.committed = cycles * tau + (rest >= tau + delta ? tau : 0);
  k.pending = std::min(rest, tau);
  if (rest >= tau && rest < tau + delta) k.pending = tau;  // in the stall: not yet committed
  return k;
}

json replay(std::vector<std::string> args) {
  args.insert(args.begin(), {"sim", "replay"});
  args.push_back("--format");
  args.push_back("json");
  CliResult r = run_cli(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  if (r.exit_code != 0) return json::object();
  return json::parse(r.out);
}

// A fault-free run: the simulated ETTR is the steady state implied by the checkpoint
// stall and the start time, which is also what the live run measured.
TEST(SimReplay, FaultFreeLogGivesTheCheckpointSteadyState) {
  LogFile log("nofault");
  json h = header();
  h["checkpoint_every_steps"] = 10;  // as known before the policy's plan: the plan decides
  log.add(h);
  log.add(action(0, 1,
                 {{"type", "SetCheckpointPlan"},
                  {"interval_s", 30.0},
                  {"blocking_s", 0.5},
                  {"tier", "remote"},
                  {"reason", "periodic"},
                  {"remote_interval_s", 3600.0}}));
  log.add(action(0, 2, {{"type", "StartJob"}, {"reason", "initial start"}, {"mechanism", "none"}}));
  log.add(outcome(kInit, 2, kInit));
  auto [last, ckpt] = run_steps(log, kInit, kHorizon, 0);
  (void)ckpt;
  log.add(summary(kHorizon, last));
  const json r = replay({log.write(), "--replicas", "4"});
  ASSERT_TRUE(r.contains("sim"));
  // Independent: init, then cycles of 30 s of training and a 3 s stall, to 600 s.
  const Kept k = train(kInit, kHorizon, kEvery * kStep, kStall);
  const double expected = (k.committed + k.pending) / kHorizon;
  EXPECT_NEAR(expected, 541.0 / 600.0, 1e-12);  // the test's own arithmetic, spelled out
  EXPECT_NEAR(r["sim"]["ettr"]["mean"].get<double>(), expected, 1e-6);
  EXPECT_NEAR(r["sim_ettr"]["mean"].get<double>(), expected, 1e-6);  // no jitter, no start delay
  EXPECT_NEAR(r["live"]["ettr"].get<double>(), static_cast<double>(last) / kHorizon, 1e-12);
  EXPECT_NEAR(r["ettr_diff_pts"].get<double>(), 0, 0.05);
  // The calibration came from the log, not from the header's 0.5 s or the defaults.
  EXPECT_DOUBLE_EQ(r["calibration"]["job.init_s"]["value"].get<double>(), kInit);
  EXPECT_NEAR(r["calibration"]["policy.params.checkpoint_write_s"]["value"].get<double>(), kStall,
              1e-9);
  EXPECT_DOUBLE_EQ(r["calibration"]["job.step_time_s"]["value"].get<double>(), kStep);
  EXPECT_DOUBLE_EQ(r["calibration"]["live.checkpoint_every_steps"]["value"].get<double>(), kEvery);
  EXPECT_DOUBLE_EQ(r["sim"]["policy_params"]["checkpoint_interval_s"].get<double>(),
                   kEvery * kStep);
  EXPECT_EQ(r["faults"]["in_log"], 0);
  EXPECT_EQ(r["sim"]["incidents"]["faults_injected_per_replica"].get<double>(), 0);
}

// A live run that loses one machine at kFault: its first start takes `first_init`, the agents
// see the exit kLag later, the whole job is requeued (kRequeue) and started again (kInit),
// then trains to the horizon. Returns the last step completed by the horizon.
constexpr double kFault = 190, kLag = 10, kRequeue = 8;
long machine_down_run(LogFile& log, double first_init) {
  log.add(header());
  log.add(action(0, 1, {{"type", "StartJob"}, {"reason", "initial start"}, {"mechanism", "none"}}));
  log.add(outcome(first_init, 1, first_init));
  auto [last1, ckpt1] = run_steps(log, first_init, kFault, 0);
  (void)last1;
  log.add(fault(kFault, 1, 1, "machine_down", "power cut"));
  log.add(process_exit(kFault + kLag, 1, 1, "agent lost"));
  const double t_exit = kFault + kLag;
  log.add(action(t_exit, 2,
                 {{"type", "AcquireMachines"},
                  {"mode", "requeue"},
                  {"slots", json::array()},
                  {"reason", "requeue whole job"},
                  {"mechanism", "requeue"}}));
  log.add(outcome(t_exit + kRequeue, 2, kRequeue));
  log.add(action(t_exit + kRequeue, 3,
                 {{"type", "StartJob"}, {"reason", "machines ready"}, {"mechanism", "none"}}));
  log.add(outcome(t_exit + kRequeue + kInit, 3, kInit));
  auto [last, ckpt] = run_steps(log, t_exit + kRequeue + kInit, kHorizon, ckpt1);
  (void)ckpt;
  log.add(summary(kHorizon, last));
  log.write();
  return last;
}

// One machine lost at a known time. Requeue must requeue the whole job; byterobust's
// host inspection (every 2 s) sees it before the exit (10 s later) and evicts it in real
// time. The requeue ETTR follows from the timeline: work since the last checkpoint is
// lost, and the job is back after exit lag + requeue + start.
TEST(SimReplay, MachineDownUnderRequeueAndByterobust) {
  LogFile log("machinedown");
  const long last = machine_down_run(log, kInit);
  const double t_exit = kFault + kLag;

  // Independent expectation for requeue: training from 5 s to the fault, keep what was
  // checkpointed, restart at fault + lag + requeue + init from a fresh segment.
  const Kept before = train(kInit, kFault, kEvery * kStep, kStall);
  const Kept after = train(t_exit + kRequeue + kInit, kHorizon, kEvery * kStep, kStall);
  const double expected = (before.committed + after.committed + after.pending) / kHorizon;
  EXPECT_DOUBLE_EQ(before.committed, 150);  // 5 checkpoints by 190 s; 20 s lost

  const json rq = replay({log.path(), "--stack", "requeue", "--replicas", "5"});
  ASSERT_TRUE(rq.contains("sim"));
  EXPECT_EQ(rq["faults"]["replayed"], 1);
  EXPECT_DOUBLE_EQ(rq["sim"]["incidents"]["faults_injected_per_replica"].get<double>(), 1);
  EXPECT_DOUBLE_EQ(rq["sim"]["resolved_by_per_replica"].value("requeue", 0.0), 1.0);
  EXPECT_EQ(rq["sim"]["resolved_by_per_replica"].size(), 1u);
  EXPECT_DOUBLE_EQ(rq["live"]["resolved_by"].value("requeue", 0.0), 1.0);
  EXPECT_NEAR(rq["sim"]["ettr"]["mean"].get<double>(), expected, 1e-6);
  EXPECT_NEAR(rq["live"]["ettr"].get<double>(), static_cast<double>(last) / kHorizon, 1e-12);
  EXPECT_DOUBLE_EQ(rq["calibration"]["cluster.scheduler.requeue_base_s"]["value"].get<double>(),
                   kRequeue);
  EXPECT_DOUBLE_EQ(rq["sim"]["evictions"]["true_per_replica"].get<double>(), 0);

  const json br = replay({log.path(), "--stack", "byterobust", "--replicas", "5"});
  ASSERT_TRUE(br.contains("sim"));
  EXPECT_EQ(br["stack"], "byterobust");
  EXPECT_DOUBLE_EQ(br["sim"]["incidents"]["faults_injected_per_replica"].get<double>(), 1);
  EXPECT_DOUBLE_EQ(br["sim"]["resolved_by_per_replica"].value("realtime_eviction", 0.0), 1.0);
  EXPECT_EQ(br["sim"]["resolved_by_per_replica"].size(), 1u);
  EXPECT_DOUBLE_EQ(br["sim"]["evictions"]["true_per_replica"].get<double>(), 1);
  // Not the recorded stack: its own defaults, not the header's parameters.
  EXPECT_FALSE(br["sim"]["policy_params"].contains("checkpoint_write_s"));
}

// In-place starts (recovery=flash live with job.in_place: the outcome begins "in place:") are
// timed apart from the ordinary restarts: job.inplace_init_s from theirs, job.init_s from the
// others'; a run without one gives job.inplace_init_s job.init_s's value.
TEST(SimReplay, InPlaceStartsAreCalibratedApart) {
  constexpr double kFirst = 2, kInPlace = 0.7, kOrdinary = 3.5;
  LogFile log("inplace");
  log.add(header());
  log.add(action(0, 1, {{"type", "StartJob"}, {"reason", "initial start"}, {"mechanism", "none"}}));
  log.add(outcome(kFirst, 1, kFirst));
  auto [s1, c1] = run_steps(log, kFirst, 100, 0);
  (void)c1;
  log.add(action(100, 2,
                 {{"type", "StartJob"},
                  {"reason", "restart"},
                  {"mechanism", "reattempt"},
                  {"in_place", true}}));
  json in_place = outcome(100 + kInPlace, 2, kInPlace);
  in_place["detail"] = "in place: ranks 0,2,3 kept, ranks 1 relaunched; every rank started";
  log.add(in_place);
  auto [s2, c2] = run_steps(log, 100 + kInPlace, 200, s1);
  (void)c2;
  // In place asked, an ordinary start taken (its outcome says nothing of in place).
  log.add(action(200, 3,
                 {{"type", "StartJob"},
                  {"reason", "restart"},
                  {"mechanism", "reattempt"},
                  {"in_place", true}}));
  log.add(outcome(200 + kOrdinary, 3, kOrdinary));
  auto [s3, c3] = run_steps(log, 200 + kOrdinary, kHorizon, s2);
  (void)c3;
  log.add(summary(kHorizon, s3));
  const json r = replay({log.write(), "--replicas", "1"});
  ASSERT_TRUE(r.contains("calibration"));
  EXPECT_DOUBLE_EQ(r["calibration"]["job.inplace_init_s"]["value"].get<double>(), kInPlace);
  EXPECT_EQ(r["calibration"]["job.inplace_init_s"]["samples"].get<int>(), 1);
  EXPECT_DOUBLE_EQ(r["calibration"]["job.init_s"]["value"].get<double>(), kOrdinary);
  EXPECT_DOUBLE_EQ(r["calibration"]["job.first_init_s"]["value"].get<double>(), kFirst);

  LogFile once("noinplace");
  once.add(header());
  once.add(
      action(0, 1, {{"type", "StartJob"}, {"reason", "initial start"}, {"mechanism", "none"}}));
  once.add(outcome(kFirst, 1, kFirst));
  auto [only, only_ckpt] = run_steps(once, kFirst, kHorizon, 0);
  (void)only_ckpt;
  once.add(summary(kHorizon, only));
  const json o = replay({once.write(), "--replicas", "1"});
  ASSERT_TRUE(o.contains("calibration"));
  EXPECT_DOUBLE_EQ(o["calibration"]["job.inplace_init_s"]["value"].get<double>(),
                   o["calibration"]["job.init_s"]["value"].get<double>());
  EXPECT_EQ(o["calibration"]["job.inplace_init_s"]["samples"].get<int>(), 0);
}

// The first start and the restarts are timed apart (job.first_init_s, job.init_s): a fresh
// launch of a PyTorch job took 2.2 s where a restart took 3.7 s, and one median for both put
// the replayed job's first steps, and any fault early in the run, in the wrong place.
TEST(SimReplay, FirstStartAndRestartsAreCalibratedApart) {
  constexpr double kFirst = 2;
  LogFile log("startkinds");
  machine_down_run(log, kFirst);
  const double t_exit = kFault + kLag;

  const json r = replay({log.path(), "--stack", "requeue", "--replicas", "3"});
  ASSERT_TRUE(r.contains("sim"));
  EXPECT_DOUBLE_EQ(r["calibration"]["job.first_init_s"]["value"].get<double>(), kFirst);
  EXPECT_DOUBLE_EQ(r["calibration"]["job.init_s"]["value"].get<double>(), kInit);
  // Independently: training from the first start's end to the fault, the checkpointed part
  // kept, then from the restart's end to the horizon.
  const Kept before = train(kFirst, kFault, kEvery * kStep, kStall);
  const Kept after = train(t_exit + kRequeue + kInit, kHorizon, kEvery * kStep, kStall);
  EXPECT_NEAR(r["sim"]["ettr"]["mean"].get<double>(),
              (before.committed + after.committed + after.pending) / kHorizon, 1e-6);

  // A run that never restarted: its one start stands for both.
  LogFile once("onestart");
  once.add(header());
  once.add(
      action(0, 1, {{"type", "StartJob"}, {"reason", "initial start"}, {"mechanism", "none"}}));
  once.add(outcome(kFirst, 1, kFirst));
  auto [only, only_ckpt] = run_steps(once, kFirst, kHorizon, 0);
  (void)only_ckpt;
  once.add(summary(kHorizon, only));
  const json o = replay({once.write(), "--replicas", "1"});
  ASSERT_TRUE(o.contains("sim"));
  EXPECT_DOUBLE_EQ(o["calibration"]["job.first_init_s"]["value"].get<double>(), kFirst);
  EXPECT_DOUBLE_EQ(o["calibration"]["job.init_s"]["value"].get<double>(), kFirst);
}

// Each recorded action takes its own live duration, the k-th of a kind as the live run's
// k-th, not the median of its kind: a PyTorch restart took 0.3 s of tests once and 1.1 s the
// next time, and with the median a second kill that landed live just after a restart began
// landed in the replay before it (a fault the replayed job never took, and a different test).
// Two machines lost; the first restart took 2 s, the second 40 s (median 21).
TEST(SimReplay, EachActionTakesItsOwnLiveDuration) {
  constexpr double kFast = 2, kSlow = 40, kSecond = 400;
  LogFile log("occurrences");
  log.add(header());
  log.add(action(0, 1, {{"type", "StartJob"}, {"reason", "initial start"}, {"mechanism", "none"}}));
  log.add(outcome(kInit, 1, kInit));
  long committed = 0;
  double from = kInit;
  int id = 1;
  for (const auto& [t_fault, init] : {std::pair{kFault, kFast}, std::pair{kSecond, kSlow}}) {
    auto [last, ckpt] = run_steps(log, from, t_fault, committed);
    (void)last;
    committed = ckpt;
    const int m = t_fault == kFault ? 1 : 2;
    log.add(fault(t_fault, m, m, "machine_down", "power cut"));
    const double t_exit = t_fault + kLag;
    log.add(process_exit(t_exit, m, 1, "lost"));
    log.add(action(t_exit, ++id,
                   {{"type", "AcquireMachines"},
                    {"mode", "requeue"},
                    {"slots", json::array()},
                    {"reason", "requeue whole job"},
                    {"mechanism", "requeue"}}));
    log.add(outcome(t_exit + kRequeue, id, kRequeue));
    log.add(action(t_exit + kRequeue, ++id,
                   {{"type", "StartJob"}, {"reason", "machines ready"}, {"mechanism", "none"}}));
    log.add(outcome(t_exit + kRequeue + init, id, init));
    from = t_exit + kRequeue + init;
  }
  auto [last, ckpt] = run_steps(log, from, kHorizon, committed);
  (void)ckpt;
  log.add(summary(kHorizon, last));
  log.write();

  const json r = replay({log.path(), "--replicas", "1"});
  ASSERT_TRUE(r.contains("sim"));
  EXPECT_DOUBLE_EQ(r["calibration"]["job.init_s"]["value"].get<double>(), (kFast + kSlow) / 2);
  EXPECT_EQ(r["timed_as_live"], 5);  // two requeues, three starts
  // Independently, from the live timeline: each segment from its own restart's end.
  const Kept a = train(kInit, kFault, kEvery * kStep, kStall);
  const Kept b = train(kFault + kLag + kRequeue + kFast, kSecond, kEvery * kStep, kStall);
  const Kept c = train(kSecond + kLag + kRequeue + kSlow, kHorizon, kEvery * kStep, kStall);
  EXPECT_NEAR(r["sim"]["ettr"]["mean"].get<double>(),
              (a.committed + b.committed + c.committed + c.pending) / kHorizon, 1e-6);

  // Another stack takes other decisions: the medians time them.
  const json other = replay({log.path(), "--stack", "byterobust", "--replicas", "1"});
  EXPECT_EQ(other["timed_as_live"], 0);
}

// Every recorded fault on a job slot before the end is injected exactly once, with the
// symptom the simulator knows for its kind; the others are reported as skipped.
TEST(SimReplay, InjectsExactlyTheRecordedFaults) {
  LogFile log("kinds");
  log.add(header());
  log.add(action(0, 1, {{"type", "StartJob"}, {"reason", "initial start"}, {"mechanism", "none"}}));
  log.add(outcome(kInit, 1, kInit));
  log.add(fault(50, 0, 0, "kill"));
  log.add(process_exit(50.5, 0, 137, ""));
  log.add(fault(100, 1, 1, "crash",
                "RuntimeError: CUDA error: an illegal memory access was encountered"));
  log.add(fault(150, 2, 2, "hang"));
  log.add(fault(200, 3, 3, "stop"));
  log.add(fault(250, 0, 0, "nan"));
  log.add(fault(300, 1, 1, "slow", "1.5"));
  log.add(fault(350, 2, 2, "sdc"));
  log.add(fault(400, 3, 3, "nic_down"));
  log.add(fault(450, 0, 0, "machine_down"));
  log.add(fault(500, -1, -1, "update", "v2"));
  log.add(fault(520, 4, -1, "kill"));  // a standby: not in the job
  log.add(fault(700, 1, 1, "kill"));   // after the end of the run
  log.add(summary(kHorizon, 300));
  const json r = replay({log.write(), "--stack", "requeue", "--replicas", "3"});
  ASSERT_TRUE(r.contains("sim"));
  EXPECT_EQ(r["faults"]["in_log"], 12);
  EXPECT_EQ(r["faults"]["replayed"], 10);
  EXPECT_EQ(r["faults"]["skipped"].size(), 2u);
  EXPECT_DOUBLE_EQ(r["sim"]["incidents"]["faults_injected_per_replica"].get<double>(), 10);
  const json& cats = r["sim"]["incidents"]["by_category"];
  ASSERT_EQ(cats.size(), 10u);
  std::map<std::string, std::string> symptom_of;
  for (auto it = cats.begin(); it != cats.end(); ++it) {
    EXPECT_DOUBLE_EQ(it.value()["injected_per_replica"].get<double>(), 1) << it.key();
    symptom_of[it.key().substr(0, it.key().find('#'))] = it.value()["symptom"];
  }
  EXPECT_EQ(symptom_of["kill"], "crash");
  EXPECT_EQ(symptom_of["crash"], "crash");
  EXPECT_EQ(symptom_of["hang"], "hang");
  EXPECT_EQ(symptom_of["stop"], "hang");
  EXPECT_EQ(symptom_of["nan"], "nan");
  EXPECT_EQ(symptom_of["slow"], "slowdown");
  EXPECT_EQ(symptom_of["sdc"], "nan");
  EXPECT_EQ(symptom_of["nic_down"], "hang");  // nothing exited in the log
  EXPECT_EQ(symptom_of["machine_down"], "crash");
  EXPECT_EQ(symptom_of["update"], "manual");
}

// A live run whose steps jitter (every 4th step takes 1.4 s instead of 1 s: the median
// is 1 s, the mean 1.1 s) and whose job starts 4 s after the clock (agents connecting).
// The live ETTR counts steps at the median over the whole clock; the replay must report
// the same quantity, not the simulator's own training-time ETTR.
TEST(SimReplay, StepJitterAndStartDelayAreCountedAsTheLiveRunCountsThem) {
  constexpr double kStart = 4;
  LogFile log("jitter");
  log.add(header());
  log.add(action(kStart, 1,
                 {{"type", "StartJob"}, {"reason", "initial start"}, {"mechanism", "none"}}));
  log.add(outcome(kStart + kInit, 1, kInit));
  double t = kStart + kInit;
  long step = 0;
  while (true) {
    const double dt =
        ((step + 1) % 4 == 0 ? 1.4 : 1.0) + (step > 0 && step % kEvery == 0 ? kStall : 0);
    if (t + dt > kHorizon) break;
    t += dt;
    ++step;
    log.add(progress(t, step));
  }
  // What the live run measured: steps at the median (1 s) over the 600 s clock.
  const double live = static_cast<double>(step) * kStep / kHorizon;
  log.add(summary(kHorizon, step));
  const json r = replay({log.write(), "--replicas", "2"});
  ASSERT_TRUE(r.contains("sim_ettr"));
  EXPECT_NEAR(r["live"]["ettr"].get<double>(), live, 1e-12);
  EXPECT_NEAR(r["calibration"]["job.step_time_s"]["value"].get<double>(), 1.1, 0.01);
  EXPECT_DOUBLE_EQ(r["calibration"]["live.start_offset_s"]["value"].get<double>(), kStart);
  EXPECT_NEAR(r["sim_ettr"]["mean"].get<double>(), live, 0.005);  // within half a point
  // Unconverted, the simulator's own ETTR is ~10% higher: the conversion is what matters.
  EXPECT_GT(r["sim"]["ettr"]["mean"].get<double>(), live + 0.05);
}

// The stop-time tests take the live run's measured time in the simulator, including the
// inter-machine all-gather, which the simulator runs as network flows.
TEST(SimReplay, ProbesTakeTheirMeasuredTimes) {
  LogFile log("probes");
  json h = header("byterobust");
  h["params"] = json::object();
  h["checkpoint_every_steps"] = 1;
  log.add(h);
  log.add(action(0, 1, {{"type", "StartJob"}, {"reason", "initial start"}, {"mechanism", "none"}}));
  log.add(outcome(kInit, 1, kInit));
  log.add(action(1, 2,
                 {{"type", "RunProbe"},
                  {"test", "inter-all-gather"},
                  {"machines", {0, 1}},
                  {"deadline_s", 600.0},
                  {"reason", ""}}));
  log.add(outcome(5, 2, 4.0));
  log.add(action(6, 3,
                 {{"type", "RunProbe"},
                  {"test", "gpu-diag"},
                  {"machines", {0}},
                  {"deadline_s", 600.0},
                  {"reason", ""}}));
  log.add(outcome(13, 3, 7.0));
  // A network crash: byterobust's plan for it is the inter-machine all-gather.
  log.add(fault(100, 1, 1, "crash", "NCCL WARN NET/IB : Got completion with error 12"));
  log.add(summary(kHorizon, 500));
  const std::string dir = log.path() + ".out";
  const json r = replay({log.write(), "--replicas", "1", "--out", dir, "--decisions"});
  ASSERT_TRUE(r.contains("sim"));
  EXPECT_DOUBLE_EQ(r["calibration"]["diagnosis.gpu_diag_s"]["value"].get<double>(), 7.0);
  std::ifstream f(dir + "/decisions.log");
  std::string line;
  double asked = -1, answered = -1;
  while (std::getline(f, line)) {
    auto at = [&]() { return std::stod(line.substr(line.find("t=") + 2)); };
    if (line.find("act probe inter-all-gather") != std::string::npos && asked < 0) asked = at();
    if (line.find("event probe inter-all-gather") != std::string::npos && answered < 0)
      answered = at();
  }
  std::filesystem::remove_all(dir);
  ASSERT_GE(asked, 0);
  ASSERT_GE(answered, 0);
  EXPECT_NEAR(answered - asked, 4.0, 0.04);  // within 1%
}

// Two kills 0.05 s apart, m2 first (issue 52's schedule, the injections' order swapped by a
// loaded host): m2's exit in its own words reaches the log 0.11 s after its fault, after the
// second fault (on m1). The exit names m2, so it is m2's fault's: the replay's m2 exits then,
// with that line, and the policy sees what it saw live. (The replay took a fault's exit only
// up to the next fault on any machine, so m2's crash became an instant exit without a line
// and the live run's "killed by signal" probe an unexplained decision.)
TEST(SimReplay, AnExitAfterAnotherMachinesFaultStillBelongsToItsOwnFault) {
  LogFile log("overlap");
  log.add(header());
  log.add(action(0, 1, {{"type", "StartJob"}, {"reason", "initial start"}, {"mechanism", "none"}}));
  log.add(outcome(kInit, 1, kInit));
  log.add(fault(100, 2, 2, "kill"));
  log.add(fault(100.05, 1, 1, "kill"));
  log.add(process_exit(100.11, 2, 137, "killed by signal 9 (SIGKILL)"));
  log.add(summary(kHorizon, 500));
  const std::string dir = log.path() + ".out";
  const json r = replay({log.write(), "--replicas", "1", "--out", dir, "--decisions"});
  ASSERT_TRUE(r.contains("sim"));
  std::ifstream f(dir + "/decisions.log");
  std::string line, exit_of_m2;
  while (std::getline(f, line))
    if (exit_of_m2.empty() && line.find("event process exit on 2 ") != std::string::npos)
      exit_of_m2 = line;
  std::filesystem::remove_all(dir);
  ASSERT_FALSE(exit_of_m2.empty());
  EXPECT_NE(exit_of_m2.find("code 137: killed by signal 9 (SIGKILL)"), std::string::npos)
      << exit_of_m2;
  EXPECT_NEAR(std::stod(exit_of_m2.substr(exit_of_m2.find("t=") + 2)), 100.11, 0.001) << exit_of_m2;
}

// Two kills 12 ms apart where the second machine's exit reached the controller first: the
// policy stopped the job for it, and the first machine's rank died with the rest, its exit
// never shown. The replay shows the policy the same exit first (it probed the second
// machine live), not an instant exit of the first kill.
TEST(SimReplay, AKillWhoseExitTheStopCoveredStrikesAJobAlreadyDown) {
  LogFile log("covered");
  log.add(header());
  log.add(action(0, 1, {{"type", "StartJob"}, {"reason", "initial start"}, {"mechanism", "none"}}));
  log.add(outcome(kInit, 1, kInit));
  log.add(fault(100, 1, 1, "kill"));
  log.add(fault(100.012, 2, 2, "kill"));
  log.add(process_exit(100.029, 2, 137, "killed by signal 9 (SIGKILL)"));
  log.add(action(100.0291, 2, {{"type", "StopJob"}, {"reason", "crash"}}));
  log.add(outcome(100.07, 2, 0.04));
  log.add(summary(kHorizon, 500));
  const std::string dir = log.path() + ".out";
  const json r = replay({log.write(), "--replicas", "1", "--out", dir, "--decisions"});
  ASSERT_TRUE(r.contains("sim"));
  std::ifstream f(dir + "/decisions.log");
  std::string line, first_exit;
  while (std::getline(f, line))
    if (first_exit.empty() && line.find("event process exit on ") != std::string::npos)
      first_exit = line;
  std::filesystem::remove_all(dir);
  ASSERT_FALSE(first_exit.empty());
  EXPECT_NE(first_exit.find("process exit on 2 "), std::string::npos) << first_exit;
  EXPECT_NEAR(std::stod(first_exit.substr(first_exit.find("t=") + 2)), 100.029, 0.001)
      << first_exit;
}

// Start attempts that fail while agents connect are set-up, not incidents: the job's time
// zero is its first successful start. What a controller logs after the summary (shutting
// down, its policy reacting to the stopped ranks) is not part of the run.
TEST(SimReplay, SetUpAttemptsAndShutdownAreNotIncidents) {
  LogFile log("setup");
  log.add(header());
  log.add(
      action(0.01, 1, {{"type", "StartJob"}, {"reason", "initial start"}, {"mechanism", "none"}}));
  log.add({{"t_s", 0.02},
           {"kind", "outcome"},
           {"id", 1},
           {"ok", false},
           {"detail", "agent not connected"},
           {"duration_s", 0.01}});
  log.add(action(0.02, 2,
                 {{"type", "AcquireMachines"},
                  {"mode", "requeue"},
                  {"slots", json::array()},
                  {"reason", "start failed"},
                  {"mechanism", "requeue"}}));
  log.add(outcome(0.03, 2, 0.01));
  log.add(
      action(2.0, 3, {{"type", "StartJob"}, {"reason", "machines ready"}, {"mechanism", "none"}}));
  log.add(outcome(2.0 + kInit, 3, kInit));
  log.add(summary(kHorizon, 500));
  log.add(action(kHorizon + 0.01, 4,
                 {{"type", "AcquireMachines"},
                  {"mode", "requeue"},
                  {"slots", json::array()},
                  {"reason", "exit"},
                  {"mechanism", "requeue"}}));
  log.add(action(kHorizon + 0.02, 5,
                 {{"type", "StartJob"}, {"reason", "ready"}, {"mechanism", "none"}}));
  log.add(fault(kHorizon + 0.03, 1, 1, "kill"));
  const json r = replay({log.write(), "--replicas", "2"});
  ASSERT_TRUE(r.contains("sim"));
  EXPECT_TRUE(r["live"]["resolved_by"].empty()) << r["live"]["resolved_by"];
  EXPECT_DOUBLE_EQ(r["calibration"]["live.start_offset_s"]["value"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(r["calibration"]["job.init_s"]["value"].get<double>(), kInit);
  EXPECT_EQ(r["faults"]["in_log"], 1);
  EXPECT_EQ(r["faults"]["replayed"], 0);
  EXPECT_EQ(r["faults"]["skipped"].size(), 1u);
  // Simulated from the first successful start: (600 - 2) s of which init and the
  // checkpoint stalls are lost, converted to the 600 s live clock. No progress samples:
  // the stall is the header's checkpoint_write_s (0.5 s), not measured.
  const Kept k = train(kInit, kHorizon - 2.0, kEvery * kStep, 0.5);
  EXPECT_NEAR(r["sim_ettr"]["mean"].get<double>(), (k.committed + k.pending) / kHorizon, 1e-6);
}

// A small live run checkpoints far more often than once a second: the demo
// (realexec/scripts/live-local.sh) takes 0.2 s steps and byterobust saves every step,
// and a periodic plan of 1 s at a nominal 0.25 s step saves every 4 steps, which a job
// that runs faster than its nominal step does in under a second. The replay takes those
// timings as they are (no error, no value moved into a range) and its ETTR is the
// closed form of the run.
json summary_at(double elapsed, long final_step, double step) {
  return {{"t_s", elapsed},
          {"kind", "summary"},
          {"elapsed_s", elapsed},
          {"final_step", final_step},
          {"first_step", 0},
          {"productive_s", final_step * step},
          {"ettr", final_step * step / elapsed},
          {"step_time_s", step}};
}

constexpr double kSmallStep = 0.2, kSmallInit = 3;

// The opening of a byterobust run at sub-second steps that checkpoints every step in memory
// with a peer copy: header (with the stack's recorded `params`), plan, the first start (done
// at kSmallInit).
void begin_every_step_run(LogFile& log, json params = json::object()) {
  json h = header("byterobust");
  h["params"] = std::move(params);
  h["nominal_step_time_s"] = kSmallStep;
  h["checkpoint_every_steps"] = 1;
  log.add(h);
  log.add(action(0, 1,
                 {{"type", "SetCheckpointPlan"},
                  {"interval_s", 0.0},
                  {"blocking_s", 0.02},
                  {"tier", "memory+peer"},
                  {"reason", "every step"},
                  {"remote_interval_s", 3600.0}}));
  log.add(action(0, 2, {{"type", "StartJob"}, {"reason", "initial start"}, {"mechanism", "none"}}));
  log.add(outcome(kSmallInit, 2, kSmallInit));
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
    log.add(summary_at(kLength, step, kSmallStep));
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
  log.add(summary_at(kSmallInit + 100 * kSmallStep, 100, kSmallStep));
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
  log.add(summary_at(kSmallInit + 100 * kSmallStep, 100, kSmallStep));
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
  log.add(summary_at(kLength, step, kSmallStep));
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
    log.add(summary_at(kEnd, step, kSmallStep));
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

// The phases of a live run with two silent data corruptions, each seen only in the step
// samples (the job reports a NaN loss and trains on; it has no NaN check that exits),
// each located by replay and replaced from a pool of one standby, which the machine
// taken out rejoins 30 s after its eviction (its repair check passed). Every phase has a
// known length, so the replayed ETTR is a sum written out here. Replayed as an exit at
// once, or with the pool refilled after the scheduler's large-cluster default (120 s),
// the replay took other paths and other times (59.8% for the demo's 81.4%).
TEST(SimReplay, NanSeenInStepSamplesAndPoolReturnsReplayPhaseByPhase) {
  constexpr double kBitwise = 2, kReplay = 3, kWake = 0.5, kBack = 30;
  LogFile log("sdc-phases");
  json h = header("byterobust");
  h["params"] = {{"standby_pool", 1}};
  h["checkpoint_every_steps"] = 1;
  log.add(h);
  log.add(action(0, 1,
                 {{"type", "SetCheckpointPlan"},
                  {"interval_s", 0.0},
                  {"blocking_s", 0.02},
                  {"tier", "memory+peer"},
                  {"reason", "every step"},
                  {"remote_interval_s", 3600.0}}));
  log.add(action(0, 2, {{"type", "StartJob"}, {"reason", "initial start"}, {"mechanism", "none"}}));
  log.add(outcome(kInit, 2, kInit));
  int id = 3;
  double t0 = kInit;  // the job trains from here
  long step = 0;
  std::vector<double> restarts;
  // A corruption on `machine` (slot `slot`) at `at`. Returns when the job trains again.
  // `bitwise`: the policy runs the bit-wise test first (not for a NaN soon after the last
  // round's restart: it goes straight to replay).
  auto sdc = [&](double at, int machine, int slot, bool bitwise) {
    for (double t = t0 + 1; t <= at + 1e-9; t += 1) log.add(progress(t, ++step));
    // after=3: the corruption escapes the one-step bit-wise test (after=0 would fail it).
    log.add(fault(at, machine, slot, "sdc", "after=3", true));
    // The NaN is in the next step's sample: the policy stops the job, bit-wise (passes),
    // replay (two phases), evicts and takes the standby, restarts from the last step.
    double t = at + kStep;
    log.add({{"t_s", t}, {"kind", "note"}, {"text", "detected: metric anomaly loss NaN"}});
    log.add(action(t, id, {{"type", "StopJob"}, {"reason", "metric anomaly: loss"}}));
    log.add(outcome(t, id++, 0.01));
    if (bitwise) {
      log.add(action(t, id,
                     {{"type", "RunProbe"},
                      {"test", "bitwise"},
                      {"machines", {0, 1, 2, 3}},
                      {"deadline_s", 60.0},
                      {"reason", "NaN"}}));
      log.add(outcome(t + kBitwise, id++, kBitwise));
      t += kBitwise;
    }
    for (int phase = 0; phase < 2; ++phase) {
      log.add(action(t, id,
                     {{"type", "RunReplay"}, {"groups", {{0, 1}, {2, 3}}}, {"reason", "replay"}}));
      log.add(outcome(t + kReplay, id++, kReplay));
      t += kReplay;
    }
    const double evicted = t;
    log.add(action(t, id,
                   {{"type", "EvictMachines"},
                    {"machines", {machine}},
                    {"reason", "dual-phase replay located it"},
                    {"mechanism", "replay"}}));
    log.add(outcome(t, id++, 0.0));
    log.add(action(t, id,
                   {{"type", "AcquireMachines"},
                    {"mode", "standby"},
                    {"slots", {slot}},
                    {"reason", "dual-phase replay located it"},
                    {"mechanism", "replay"}}));
    log.add(outcome(t + kWake, id++, kWake));
    t += kWake;
    log.add(action(
        t, id, {{"type", "StartJob"}, {"reason", "replacements ready"}, {"mechanism", "none"}}));
    log.add(outcome(t + kInit, id++, kInit));
    t += kInit;
    log.add(progress(t, step, true));
    log.add(
        {{"t_s", evicted + kBack},
         {"kind", "note"},
         {"text", "m" + std::to_string(machine) +
                      " passed its repair check (gpu_diag, bit-wise); back in the standby pool"}});
    t0 = t;
    return t;
  };
  const double back1 = sdc(200.5, 1, 1, true);
  const double back2 = sdc(301.3, 2, 2, false);
  for (double t = t0 + 1; t <= kHorizon + 1e-9; t += 1) log.add(progress(t, ++step));
  log.add(summary(kHorizon, step));
  // Each incident: NaN sample 1 s, bit-wise 2 s (the first only), two replay phases 6 s,
  // standby 0.5 s, start 5 s; the part of the step under way at the fault is lost (the job
  // saves every step). The second eviction, 100 s after the first, finds the pool refilled.
  EXPECT_DOUBLE_EQ(back1, 215.0);
  EXPECT_NEAR(back2, 313.8, 1e-9);
  const double kept = (200 - kInit) + (301 - back1) + (kHorizon - back2);  // 195 + 86 + 286.2
  EXPECT_NEAR(kept, 567.2, 1e-9);
  EXPECT_EQ(step, 567);  // the live count: whole steps

  const std::string dir = log.path() + ".out";
  const json r = replay({log.write(), "--replicas", "2", "--out", dir});
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(r.contains("sim"));
  EXPECT_DOUBLE_EQ(r["sim"]["resolved_by_per_replica"].value("replay", 0.0), 2.0);
  EXPECT_DOUBLE_EQ(r["sim"]["standby_exhaustions_per_replica"].get<double>(), 0);
  EXPECT_NEAR(r["calibration"]["cluster.scheduler.reschedule_base_s"]["value"].get<double>(),
              kBack - kBitwise, 1e-9);  // a return is the pool refill plus its self-check
  EXPECT_NEAR(r["sim"]["ettr"]["mean"].get<double>(), kept / kHorizon, 1e-6);
  EXPECT_NEAR(r["sim_ettr"]["mean"].get<double>(), kept / kHorizon, 1e-6);
  EXPECT_NEAR(r["live"]["ettr"].get<double>(), 567.0 / kHorizon, 1e-12);
  EXPECT_NEAR(r["ettr_diff_pts"].get<double>(), 0, 0.05);
}

// `live inject --fault sdc` without a detail is `sdc after=0`: the corruption starts at the
// first step of every process on the machine, the one-step bit-wise test's too, which fails
// there, and the policy evicts the machine at once (stop_time_eviction). The replay gave every
// sdc a bit-wise recall of 0 and localized it by replay instead: the decisions parted.
TEST(SimReplay, AnSdcFromTheFirstStepFailsTheBitwiseTestAsItDidLive) {
  LogFile log("sdc-after-0");
  json h = header("byterobust");
  h["params"] = {{"standby_pool", 1}};
  log.add(h);
  log.add(action(0, 1, {{"type", "StartJob"}, {"reason", "initial start"}, {"mechanism", "none"}}));
  log.add(outcome(kInit, 1, kInit));
  long step = 0;
  for (double t = kInit + 1; t <= 200 + 1e-9; t += 1) log.add(progress(t, ++step));
  log.add(fault(200.5, 1, 1, "sdc", "", true));
  double t = 200.5 + kStep;
  log.add({{"t_s", t}, {"kind", "note"}, {"text", "detected: metric anomaly grad_norm x1e30"}});
  log.add(action(t, 2, {{"type", "StopJob"}, {"reason", "metric anomaly: grad_norm"}}));
  log.add(outcome(t, 2, 0.01));
  log.add(action(t, 3,
                 {{"type", "RunProbe"},
                  {"test", "bitwise"},
                  {"machines", {0, 1, 2, 3}},
                  {"deadline_s", 60.0},
                  {"reason", "NaN: bit-wise alignment on every machine"}}));
  log.add(outcome(t + 2, 3, 2));
  t += 2;
  log.add({{"t_s", t},
           {"kind", "event"},
           {"event",
            {{"type", "ProbeResult"},
             {"action", 3},
             {"test", "bitwise"},
             {"failed", {1}},
             {"timed_out", false}}}});
  log.add(action(t, 4,
                 {{"type", "EvictMachines"},
                  {"machines", {1}},
                  {"reason", "failed bitwise"},
                  {"mechanism", "stop_time_eviction"}}));
  log.add(outcome(t, 4, 0.0));
  log.add(action(t, 5,
                 {{"type", "AcquireMachines"},
                  {"mode", "standby"},
                  {"slots", {1}},
                  {"reason", "failed bitwise"},
                  {"mechanism", "stop_time_eviction"}}));
  log.add(outcome(t + 0.5, 5, 0.5));
  t += 0.5;
  log.add(action(t, 6,
                 {{"type", "StartJob"}, {"reason", "replacements ready"}, {"mechanism", "none"}}));
  log.add(outcome(t + kInit, 6, kInit));
  t += kInit;
  step = 180;  // the last checkpoint before the corruption
  log.add(progress(t, step, true));
  for (double u = t + 1; u <= kHorizon + 1e-9; u += 1) log.add(progress(u, ++step));
  log.add(summary(kHorizon, step));
  const json r = replay({log.write(), "--replicas", "1"});
  ASSERT_TRUE(r.contains("sim"));
  EXPECT_DOUBLE_EQ(r["sim"]["resolved_by_per_replica"].value("stop_time_eviction", 0.0), 1.0)
      << r["sim"]["resolved_by_per_replica"].dump();
  EXPECT_DOUBLE_EQ(r["sim"]["resolved_by_per_replica"].value("replay", 0.0), 0.0);
  // Every live decision taken (the log leaves out the live set-up, which the replay adds).
  EXPECT_EQ(r["decisions"]["matched"], r["decisions"]["live"]) << r["decisions"].dump(2);
}

TEST(SimReplay, TextOutputShowsLiveAndSimulatedEttrAndCalibration) {
  LogFile log("text");
  log.add(header());
  log.add(action(0, 1, {{"type", "StartJob"}, {"reason", "initial start"}, {"mechanism", "none"}}));
  log.add(outcome(kInit, 1, kInit));
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
  log.add(action(0, 1, {{"type", "StartJob"}, {"reason", "initial start"}, {"mechanism", "none"}}));
  log.add(outcome(kInit, 1, kInit));
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
  log.add(action(0, 1, {{"type", "StartJob"}, {"reason", "initial start"}, {"mechanism", "none"}}));
  log.add(outcome(kInit, 1, kInit));
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
