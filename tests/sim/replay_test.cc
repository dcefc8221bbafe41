// `faultline sim replay` end to end, through the CLI: hand-written event logs (a header,
// a few faults, the actions and events a live run would have logged, a summary) are
// replayed and checked against quantities computed here independently of the simulator:
// the closed-form progress of a job that alternates training and checkpoint stalls, the
// mechanism each stack must use, and the number of faults in the log. The logs' records:
// replay_log.h; runs at sub-second steps, silent data corruptions and what the replay
// reports: the other tests/sim/replay_*_test.cc files.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/sim/replay_log.h"
#include "tests/support/cli.h"

namespace faultline::testing {
namespace {

using namespace replay_log;

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
  initial_start(log, first_init);
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
  initial_start(log, kFirst);
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

  const json o = replay_one_start("noinplace", kFirst);
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
  const json o = replay_one_start("onestart", kFirst);
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
  initial_start(log);
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
  initial_start(log);
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
  initial_start(log);
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
  const Decisions d = replay_decisions(log);
  const json& r = d.result;
  ASSERT_TRUE(r.contains("sim"));
  EXPECT_DOUBLE_EQ(r["calibration"]["diagnosis.gpu_diag_s"]["value"].get<double>(), 7.0);
  const double asked = time_of(first_line(d.lines, "act probe inter-all-gather"));
  const double answered = time_of(first_line(d.lines, "event probe inter-all-gather"));
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
  initial_start(log);
  log.add(fault(100, 2, 2, "kill"));
  log.add(fault(100.05, 1, 1, "kill"));
  log.add(process_exit(100.11, 2, 137, "killed by signal 9 (SIGKILL)"));
  log.add(summary(kHorizon, 500));
  const Decisions d = replay_decisions(log);
  ASSERT_TRUE(d.result.contains("sim"));
  const std::string exit_of_m2 = first_line(d.lines, "event process exit on 2 ");
  ASSERT_FALSE(exit_of_m2.empty());
  EXPECT_NE(exit_of_m2.find("code 137: killed by signal 9 (SIGKILL)"), std::string::npos)
      << exit_of_m2;
  EXPECT_NEAR(time_of(exit_of_m2), 100.11, 0.001) << exit_of_m2;
}

// Two kills 12 ms apart where the second machine's exit reached the controller first: the
// policy stopped the job for it, and the first machine's rank died with the rest, its exit
// never shown. The replay shows the policy the same exit first (it probed the second
// machine live), not an instant exit of the first kill.
TEST(SimReplay, AKillWhoseExitTheStopCoveredStrikesAJobAlreadyDown) {
  LogFile log("covered");
  log.add(header());
  initial_start(log);
  log.add(fault(100, 1, 1, "kill"));
  log.add(fault(100.012, 2, 2, "kill"));
  log.add(process_exit(100.029, 2, 137, "killed by signal 9 (SIGKILL)"));
  log.add(action(100.0291, 2, {{"type", "StopJob"}, {"reason", "crash"}}));
  log.add(outcome(100.07, 2, 0.04));
  log.add(summary(kHorizon, 500));
  const Decisions d = replay_decisions(log);
  ASSERT_TRUE(d.result.contains("sim"));
  const std::string first_exit = first_line(d.lines, "event process exit on ");
  ASSERT_FALSE(first_exit.empty());
  EXPECT_NE(first_exit.find("process exit on 2 "), std::string::npos) << first_exit;
  EXPECT_NEAR(time_of(first_exit), 100.029, 0.001) << first_exit;
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

}  // namespace
}  // namespace faultline::testing
