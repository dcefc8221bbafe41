// The byterobust stack against FakeWorld: which actions for which observations.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <limits>

#include "policies/builtin.h"
#include "policies/stacks/byterobust/ladder.h"
#include "policies/stacks/byterobust/stop_time.h"
#include "tests/support/fake_world.h"

namespace faultline {
namespace {

using testing::FakeWorld;

ClusterSpec spec16() {
  ClusterSpec c;
  c.machines = 16;
  c.gpus_per_machine = 2;
  c.tp = 2;
  c.pp = 4;
  c.dp = 4;
  return c;
}

constexpr double kInf = std::numeric_limits<double>::infinity();

// Observations as the simulator sends them (steady samples), so the stack's detection
// module draws the conclusions: tests say what the job did, not what was concluded.
void sample(FakeWorld& w, Policy& p, std::int64_t step, double step_time, bool nan = false) {
  p.on_event(StepSample{step, step_time, std::nullopt, std::nullopt, nan, true}, w);
}
// The job started from `step` and steps take 1 s (the healthy baseline).
void started(FakeWorld& w, Policy& p, std::int64_t step) {
  p.on_event(JobStarted{w.last_action_id(), step}, w);
  sample(w, p, step, 1.0);
}
// The step counter stops at `step` one stall window (600 s) before `t`; at `t` the
// detector reports the stall.
void stalled_at(FakeWorld& w, Policy& p, double t, std::int64_t step) {
  w.advance_to(Instant{Duration::seconds(t - 600).ns}, p);
  sample(w, p, step, kInf);
  w.advance_to(Instant{Duration::seconds(t).ns}, p);
}
// Steps slow down to 1.3 s; slow_for (300 s) later the detector reports it.
void slowed(FakeWorld& w, Policy& p) {
  sample(w, p, 0, 1.3);
  w.advance_to(w.now() + Duration::seconds(300), p);
}

struct Harness {
  FakeWorld w{spec16()};
  std::unique_ptr<Policy> p;
  explicit Harness(std::map<std::string, double> over = {}) {
    Registry r = policies::builtin_registry();
    Params params;
    EXPECT_FALSE(Params::resolve(r.find("byterobust")->params, over, &params));
    p = r.make("byterobust", params);
    p->start(w);
    faultline::started(w, *p, 0);
    w.actions.clear();
  }
  void at(double s) { w.advance_to(Instant{Duration::seconds(s).ns}, *p); }
  void started(std::int64_t step) { faultline::started(w, *p, step); }
  void stalled_at(double t, std::int64_t step) { faultline::stalled_at(w, *p, t, step); }
  void nan() { sample(w, *p, 0, 1.0, true); }
  void nan_at(std::int64_t step) { sample(w, *p, step, 1.0, true); }
  void slowed() { faultline::slowed(w, *p); }
};

TEST(ByteRobust, StartsWithEveryStepPeerCheckpointInspectionsAndP99Pool) {
  FakeWorld w(spec16());
  Registry r = policies::builtin_registry();
  Params params;
  ASSERT_FALSE(Params::resolve(r.find("byterobust")->params, {}, &params));
  auto p = r.make("byterobust", params);
  p->start(w);
  auto plan = w.all<SetCheckpointPlan>();
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(plan[0].tier, CheckpointTier::kMemoryWithPeer);
  EXPECT_EQ(plan[0].interval, Duration::zero());
  EXPECT_EQ(w.all<EnableInspection>().size(), 4u);
  auto pool = w.all<SetStandbyPool>();
  ASSERT_EQ(pool.size(), 1u);
  EXPECT_EQ(pool[0].size, 1);  // P99 of Binomial(16, 1.2e-3)
  EXPECT_TRUE(std::holds_alternative<StartJob>(w.actions.back()));
}

TEST(ByteRobust, GpuAlertEvictsAtOnceAndTakesAStandby) {
  Harness h;
  h.p->on_event(InspectionAlert{5, "gpu", "Xid 79"}, h.w);
  auto ev = h.w.all<EvictMachines>();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].machines, MachineSet{5});
  EXPECT_EQ(ev[0].mechanism, Mechanism::kRealtimeEviction);
  auto acq = h.w.all<AcquireMachines>();
  ASSERT_EQ(acq.size(), 1u);
  EXPECT_EQ(acq[0].mode, AcquireMode::kStandby);
  EXPECT_EQ(acq[0].slots, std::vector<SlotId>{5});
  h.p->on_event(MachinesReady{h.w.last_action_id(), {}}, h.w);
  EXPECT_TRUE(std::holds_alternative<StartJob>(h.w.actions.back()));
}

// Lemon retirement (recovery=lemon, AIReSim's threshold removal): the second eviction of
// a machine on evidence of its own fault retires it; evictions as collateral of an
// over-eviction are no evidence against a machine and count no strike.
TEST(ByteRobust, LemonRecoveryRetiresAMachineEvictedOnEvidenceTwice) {
  Harness h({{"recovery", 3}, {"lemon_strikes", 2}});
  h.p->on_event(InspectionAlert{5, "gpu", "Xid 79"}, h.w);
  auto ev = h.w.all<EvictMachines>();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_FALSE(ev[0].retire);
  EXPECT_EQ(h.w.all<AcquireMachines>()[0].mode, AcquireMode::kStandby);
  h.p->on_event(MachinesReady{h.w.last_action_id(), {}}, h.w);
  h.started(0);
  // Back from repair and in the job again, it fails again.
  h.p->on_event(InspectionAlert{5, "gpu", "Xid 79"}, h.w);
  ev = h.w.all<EvictMachines>();
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_TRUE(ev[1].retire);
  EXPECT_EQ(ev[1].machines, MachineSet{5});
  // The default recovery never retires.
  Harness d;
  for (int i = 0; i < 3; ++i) {
    d.p->on_event(InspectionAlert{5, "gpu", "Xid 79"}, d.w);
    d.p->on_event(MachinesReady{d.w.last_action_id(), {}}, d.w);
    d.started(0);
  }
  for (const auto& e : d.w.all<EvictMachines>()) EXPECT_FALSE(e.retire);
  EXPECT_EQ(d.w.all<EvictMachines>().size(), 3u);
}

// Migration before a predicted failure (recovery=migrate, TrainMover): a warning for a machine
// of the training job, with a standby parked, moves it (MigrateMachines, the module's pause),
// and the job is neither stopped nor its machines evicted; its outcome needs nothing more.
// Not while the stack replaces machines; the default recovery ignores warnings.
TEST(ByteRobust, MigrateRecoveryMovesAWarnedMachineWhileTheJobTrains) {
  const int migrate = policies::byterobust_info(policies::modules())
                          .find_param("recovery")
                          ->choice_index("migrate");
  ASSERT_GE(migrate, 0);
  Harness h({{"recovery", migrate}, {"migration_pause_s", 12}});
  h.w.mutable_cluster().add_standby(h.w.mutable_cluster().add_machine());
  h.p->on_event(FailureWarning{5, "gpu", Duration::seconds(900), "predicted: ecc"}, h.w);
  ASSERT_EQ(h.w.actions.size(), 1u) << describe(h.w.actions.back());
  const auto m = h.w.all<MigrateMachines>();
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].machines, MachineSet{5});
  EXPECT_EQ(m[0].pause.ns, Duration::seconds(12).ns);
  h.p->on_event(MachinesReady{h.w.last_action_id(), {16}}, h.w);
  h.p->on_event(ActionFailed{h.w.last_action_id(), "job stopped during the migration"}, h.w);
  EXPECT_EQ(h.w.actions.size(), 1u) << describe(h.w.actions.back());
  // While the stack replaces machines (an alert's eviction), a warning is left alone.
  h.p->on_event(InspectionAlert{9, "gpu", "Xid 79"}, h.w);
  const std::size_t before = h.w.actions.size();
  h.p->on_event(FailureWarning{3, "gpu", Duration::seconds(900), "predicted: ecc"}, h.w);
  EXPECT_EQ(h.w.actions.size(), before);
  Harness d;
  d.w.mutable_cluster().add_standby(d.w.mutable_cluster().add_machine());
  d.p->on_event(FailureWarning{5, "gpu", Duration::seconds(900), "predicted: ecc"}, d.w);
  EXPECT_TRUE(d.w.actions.empty());
}

// Host scoring (recovery=scored, AIReSim's host selection by failure history): a machine
// evicted on evidence of its own fault joins the list the scheduler hands out last, sent
// before the acquisition it should apply to; the list grows and never retires anyone. A
// machine evicted as collateral of an over-eviction is no evidence and stays off it; the
// default recovery sends no list.
TEST(ByteRobust, ScoredRecoveryAsksTheSchedulerToHandOutMachinesEvictedOnEvidenceLast) {
  const int scored =
      policies::byterobust_info(policies::modules()).find_param("recovery")->choice_index("scored");
  ASSERT_GE(scored, 0);
  Harness h({{"recovery", scored}, {"scored_strikes", 1}});
  for (MachineId m : {5, 9}) {
    h.p->on_event(InspectionAlert{m, "gpu", "Xid 79"}, h.w);
    const auto last = h.w.actions.back();
    ASSERT_TRUE(std::holds_alternative<AcquireMachines>(last)) << describe(last);
    ASSERT_TRUE(std::holds_alternative<AvoidMachines>(h.w.actions[h.w.actions.size() - 2]));
    h.p->on_event(MachinesReady{h.w.last_action_id(), {}}, h.w);
    h.started(0);
  }
  const auto avoid = h.w.all<AvoidMachines>();
  ASSERT_EQ(avoid.size(), 2u);
  EXPECT_EQ(avoid[0].machines, MachineSet{5});
  EXPECT_EQ(avoid[1].machines, (MachineSet{5, 9}));
  // Machine 5 again: already on the list, nothing new to send.
  h.p->on_event(InspectionAlert{5, "gpu", "Xid 79"}, h.w);
  EXPECT_EQ(h.w.all<AvoidMachines>().size(), 2u);
  for (const auto& e : h.w.all<EvictMachines>()) EXPECT_FALSE(e.retire);
  Harness d;
  d.p->on_event(InspectionAlert{5, "gpu", "Xid 79"}, d.w);
  EXPECT_TRUE(d.w.all<AvoidMachines>().empty());
}

TEST(ByteRobust, NetworkAlertsNeedTwoWithinFiveMinutes) {
  Harness h;
  h.p->on_event(InspectionAlert{3, "nic", "port down"}, h.w);
  h.at(400);  // the first alert is outside the window by now
  h.p->on_event(InspectionAlert{3, "nic", "port down"}, h.w);
  EXPECT_TRUE(h.w.all<EvictMachines>().empty());
  h.at(430);
  h.p->on_event(InspectionAlert{3, "nic", "port down"}, h.w);
  ASSERT_EQ(h.w.all<EvictMachines>().size(), 1u);
}

TEST(ByteRobust, CrashRunsTestsEvictsWhatFailsOrReattempts) {
  Harness h;
  h.at(4000);
  h.p->on_event(ProcessExit{7, 1, "RuntimeError: CUDA error: an illegal memory access"}, h.w);
  auto probes = h.w.all<RunProbe>();
  ASSERT_EQ(probes.size(), 1u);
  EXPECT_EQ(probes[0].test, ProbeKind::kGpuDiag);
  h.p->on_event(ProbeResult{h.w.last_action_id(), ProbeKind::kGpuDiag, {}, false}, h.w);  // passes
  ASSERT_EQ(h.w.all<RunProbe>().size(), 2u);
  EXPECT_EQ(h.w.all<RunProbe>()[1].test, ProbeKind::kIntraAllToAll);
  h.p->on_event(ProbeResult{h.w.last_action_id(), ProbeKind::kIntraAllToAll, {7}, false},
                h.w);  // machine 7 fails
  auto ev = h.w.all<EvictMachines>();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].machines, MachineSet{7});
  EXPECT_EQ(ev[0].mechanism, Mechanism::kStopTimeEviction);
}

TEST(ByteRobust, EnvironmentCrashIsReattemptedThenRolledBackIfItRecurs) {
  Harness h;
  h.at(4000);
  h.p->on_event(ProcessExit{kNoMachine, 1, "OSError: [Errno 5] Input/output error: '/mnt/hdfs/x'"},
                h.w);
  auto starts = h.w.all<StartJob>();
  ASSERT_EQ(starts.size(), 1u);
  EXPECT_EQ(starts[0].mechanism, Mechanism::kReattempt);
  h.started(0);
  h.at(4100);  // crashes again soon after the restart
  h.p->on_event(ProcessExit{kNoMachine, 1, "OSError: [Errno 5] Input/output error: '/mnt/hdfs/x'"},
                h.w);
  EXPECT_EQ(h.w.all<RollBack>().size(), 1u);
}

TEST(ByteRobust, StallCapturesStacksAndOverEvictsThePipelineGroup) {
  Harness h;
  h.stalled_at(600, 100);
  ASSERT_EQ(h.w.all<CaptureStacks>().size(), 1u);
  std::vector<std::string> stacks(16, "optimizer.step > all_reduce");
  stacks[15] = "forward > all_gather";
  stacks[14] = "pipeline > isend";
  stacks[12] = stacks[13] = "pipeline > irecv";
  h.p->on_event(StacksCaptured{h.w.last_action_id(), StackSignatures(stacks)}, h.w);
  auto ev = h.w.all<EvictMachines>();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].machines, (MachineSet{12, 13, 14, 15}));
  EXPECT_EQ(ev[0].mechanism, Mechanism::kOverEviction);
}

TEST(ByteRobust, StallSoonAfterTheRestartForAStallRollsBackThenReplays) {
  // A hang in the job's own code (Table 2): every rank waits in the same place, so the
  // aggregation finds no outliers and the job is reattempted; it stalls again at once.
  Harness h;
  h.stalled_at(4000, 100);
  h.p->on_event(StacksCaptured{h.w.last_action_id(),
                               StackSignatures(std::vector<std::string>(16, "all_reduce"))},
                h.w);
  auto starts = h.w.all<StartJob>();
  ASSERT_EQ(starts.size(), 1u);
  EXPECT_EQ(starts[0].mechanism, Mechanism::kReattempt);
  // The stuck job is stopped before the restart in place (a start on a running job is
  // refused, and the refusal used to requeue the whole job).
  ASSERT_EQ(h.w.all<StopJob>().size(), 1u);
  EXPECT_TRUE(h.w.all<AcquireMachines>().empty());
  h.started(100);  // and stalls before step 101
  h.stalled_at(4700, 100);
  ASSERT_EQ(h.w.all<CaptureStacks>().size(), 2u);  // the stacks are read every time
  h.p->on_event(StacksCaptured{h.w.last_action_id(),
                               StackSignatures(std::vector<std::string>(16, "all_reduce"))},
                h.w);
  EXPECT_EQ(h.w.all<RollBack>().size(), 1u);
  h.started(100);
  h.stalled_at(5400, 100);
  h.p->on_event(StacksCaptured{h.w.last_action_id(),
                               StackSignatures(std::vector<std::string>(16, "all_reduce"))},
                h.w);
  EXPECT_EQ(h.w.all<RunReplay>().size(), 1u);
}

TEST(ByteRobust, AMachineHangThatStrikesAtTheRestartIsOverEvictedNotRolledBack) {
  // A code hang is reattempted; a machine hang that landed meanwhile strikes at the
  // restart, so the job stalls again before a step. Its stacks show the outlier group:
  // over-evict it, instead of rolling back good code and replaying for two hours.
  Harness h;
  h.stalled_at(4000, 100);
  h.p->on_event(StacksCaptured{h.w.last_action_id(),
                               StackSignatures(std::vector<std::string>(16, "all_reduce"))},
                h.w);
  h.started(100);
  h.stalled_at(4700, 100);
  std::vector<std::string> stacks(16, "optimizer.step > all_reduce");
  stacks[9] = "forward > all_gather";
  stacks[8] = stacks[10] = stacks[11] = "pipeline > irecv";
  h.p->on_event(StacksCaptured{h.w.last_action_id(), StackSignatures(stacks)}, h.w);
  EXPECT_TRUE(h.w.all<RollBack>().empty());
  auto ev = h.w.all<EvictMachines>();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].machines, (MachineSet{8, 9, 10, 11}));
}

TEST(ByteRobust, StallAfterAnUnrelatedRecoveryIsDiagnosedAfresh) {
  // A stall is answered by an over-eviction; later a GPU alert restarts the job and a new
  // hang stalls it soon after: the latest restart did not answer a stall, so aggregate.
  Harness h;
  h.stalled_at(4000, 100);
  std::vector<std::string> stacks(16, "optimizer.step > all_reduce");
  stacks[15] = "forward > all_gather";
  h.p->on_event(StacksCaptured{h.w.last_action_id(), StackSignatures(stacks)}, h.w);
  h.p->on_event(MachinesReady{h.w.last_action_id(), {}}, h.w);
  h.started(0);
  h.at(5000);
  h.p->on_event(InspectionAlert{3, "gpu", "Xid 79"}, h.w);
  h.p->on_event(MachinesReady{h.w.last_action_id(), {}}, h.w);
  h.started(0);
  h.stalled_at(5700, 100);
  EXPECT_TRUE(h.w.all<RollBack>().empty());
  EXPECT_EQ(h.w.all<CaptureStacks>().size(), 2u);
}

TEST(ByteRobust, StallAfterProgressSinceTheRestartIsANewIncident) {
  // The rollback fixed the code; 40 steps later a machine hangs: aggregate its stacks
  // rather than escalate to replay.
  Harness h;
  h.stalled_at(4000, 100);
  h.p->on_event(StacksCaptured{h.w.last_action_id(),
                               StackSignatures(std::vector<std::string>(16, "all_reduce"))},
                h.w);
  h.started(100);
  h.stalled_at(4700, 100);
  h.p->on_event(StacksCaptured{h.w.last_action_id(),
                               StackSignatures(std::vector<std::string>(16, "all_reduce"))},
                h.w);
  ASSERT_EQ(h.w.all<RollBack>().size(), 1u);
  h.started(100);
  h.stalled_at(5700, 140);
  EXPECT_EQ(h.w.all<CaptureStacks>().size(), 3u);
  h.p->on_event(StacksCaptured{h.w.last_action_id(),
                               StackSignatures(std::vector<std::string>(16, "all_reduce"))},
                h.w);
  EXPECT_TRUE(h.w.all<RunReplay>().empty());
  EXPECT_EQ(h.w.all<RollBack>().size(), 1u);
}

TEST(ByteRobust, StallLongAfterTheLastRestartIsDiagnosedAfresh) {
  Harness h;
  h.stalled_at(4000, 100);
  h.p->on_event(StacksCaptured{h.w.last_action_id(),
                               StackSignatures(std::vector<std::string>(16, "all_reduce"))},
                h.w);
  h.started(0);
  h.stalled_at(4000 + 7200, 100);  // an unrelated hang two hours later
  EXPECT_TRUE(h.w.all<RollBack>().empty());
  EXPECT_EQ(h.w.all<CaptureStacks>().size(), 2u);
}

TEST(ByteRobust, NanRunsBitwiseAlignmentThenReplayWhenItPasses) {
  Harness h;
  h.nan();
  auto probes = h.w.all<RunProbe>();
  ASSERT_EQ(probes.size(), 1u);
  EXPECT_EQ(probes[0].test, ProbeKind::kBitwise);
  EXPECT_EQ(probes[0].machines.size(), 16u);
  h.p->on_event(ProbeResult{h.w.last_action_id(), ProbeKind::kBitwise, {}, false}, h.w);
  auto replays = h.w.all<RunReplay>();
  ASSERT_EQ(replays.size(), 1u);
  // TP=2 machines, PP=4, DP=4: k=1, m=4, n=4 -> four horizontal groups of four.
  EXPECT_EQ(replays[0].groups.size(), 4u);
  std::vector<bool> h1(4, false);
  h1[3] = true;  // group {12..15}
  h.p->on_event(ReplayResult{h.w.last_action_id(), h1}, h.w);
  std::vector<bool> v(4, false);
  v[1] = true;  // vertical group x mod 4 == 1 -> {1, 5, 9, 13}
  h.p->on_event(ReplayResult{h.w.last_action_id(), v}, h.w);
  auto ev = h.w.all<EvictMachines>();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].machines, MachineSet{13});
  EXPECT_EQ(ev[0].mechanism, Mechanism::kReplay);
}

TEST(ByteRobust, ReplayWithTwoFaultyMachinesEvictsEveryIntersection) {
  // Machines 6 and 13 faulty: horizontal groups 1 and 3 fail, then vertical groups 2 and
  // 1. Picking the first of each (1, 1 -> machine 5) would miss both; evict all four
  // intersections instead of replaying again.
  Harness h;
  h.nan();
  h.p->on_event(ProbeResult{h.w.last_action_id(), ProbeKind::kBitwise, {}, false}, h.w);
  h.p->on_event(ReplayResult{h.w.last_action_id(), {false, true, false, true}}, h.w);
  h.p->on_event(ReplayResult{h.w.last_action_id(), {false, true, true, false}}, h.w);
  auto ev = h.w.all<EvictMachines>();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].machines, (MachineSet{5, 6, 13, 14}));
  EXPECT_EQ(ev[0].mechanism, Mechanism::kReplay);
}

TEST(ByteRobust, MfuRoundsCutShortByARestartStartOverOnTheNextReport) {
  Harness h;
  h.slowed();
  ASSERT_EQ(h.w.all<CaptureStacks>().size(), 1u);
  // A crash interrupts the rounds; after the restart the job is still slow.
  h.at(4000);
  h.p->on_event(ProcessExit{kNoMachine, 1, "OSError: [Errno 5] Input/output error"}, h.w);
  h.started(0);
  h.slowed();
  EXPECT_EQ(h.w.all<CaptureStacks>().size(), 2u);
}

// The fail-slow ladder inside the stack: a straggler the MFU rounds place is tolerated
// until the ski-rental break-even, then worked around; a backend that refuses the
// workaround (live mode) gets the over-eviction instead, and a straggler that recovers
// is forgotten.
void place_straggler(Harness& h, SlotId slot) {
  std::vector<std::string> stacks(
      16, "train_step > optimizer.step > all_reduce(grads) > ncclKernel wait");
  stacks[slot] = "train_step > forward > transformer_layer > gemm";
  for (int round = 0; round < 5; ++round) {
    ASSERT_TRUE(std::holds_alternative<CaptureStacks>(h.w.actions.back()));
    h.p->on_event(StacksCaptured{h.w.last_action_id(), StackSignatures(stacks)}, h.w);
    if (round < 4) h.at(h.w.now().to_seconds() + 10);  // the next round's timer
  }
}

TEST(ByteRobustFailSlow, TheLadderWorksAroundAStragglerAndFallsBackToEvictionWhenRefused) {
  Harness h({{"failslow", 1}});
  h.slowed();  // 1.3x, reported at 300 s
  const double since = h.w.now().to_seconds();
  place_straggler(h, 6);
  EXPECT_TRUE(h.w.all<EvictMachines>().empty());
  EXPECT_TRUE(h.w.all<MitigateSlowdown>().empty());  // tolerated until the break-even
  // 16 micro-batches over 4 replicas: one moves to each of three others, 16/17.
  const double l0 = 1 - 1 / 1.3, l1 = 1 - 16.0 / 17;
  const double t1 = since + 30 / (l0 - l1);
  h.at(t1 - 0.001);
  EXPECT_TRUE(h.w.all<MitigateSlowdown>().empty());
  h.at(t1);
  auto m = h.w.all<MitigateSlowdown>();
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].slot, 6);
  EXPECT_EQ(m[0].how, Mitigation::kRebalance);
  // Refused (live mode): back to tolerating, and the reconfiguration (16/17 here too) is
  // next, at its break-even from the detection; refused as well, eviction is the only move
  // left, at C3 / l0: the two-option ski rental.
  h.p->on_event(ActionFailed{h.w.last_action_id(), "live mode cannot rebalance a running job"},
                h.w);
  EXPECT_TRUE(h.w.all<EvictMachines>().empty());
  h.at(since + 180 / (l0 - l1));
  m = h.w.all<MitigateSlowdown>();
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[1].how, Mitigation::kReconfigure);
  h.p->on_event(ActionFailed{h.w.last_action_id(), "live mode cannot reconfigure a running job"},
                h.w);
  EXPECT_TRUE(h.w.all<EvictMachines>().empty());
  const double t3 = since + 1200 / l0;
  h.at(t3 - 0.001);
  EXPECT_TRUE(h.w.all<EvictMachines>().empty());
  h.at(t3);
  auto ev = h.w.all<EvictMachines>();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].mechanism, Mechanism::kOverEviction);
  EXPECT_EQ(ev[0].machines, (MachineSet{4, 5, 6, 7}));  // slot 6's pipeline
  EXPECT_EQ(h.w.all<MitigateSlowdown>().size(), 2u);
  // The next straggler is offered neither again: tolerated, then evicted at C3 / l0.
  h.p->on_event(MachinesReady{h.w.last_action_id(), {}}, h.w);
  h.started(0);
  h.slowed();
  const double since2 = h.w.now().to_seconds();
  place_straggler(h, 9);
  h.at(since2 + 1200 / l0);
  EXPECT_EQ(h.w.all<MitigateSlowdown>().size(), 2u);
  ASSERT_EQ(h.w.all<EvictMachines>().size(), 2u);
  EXPECT_EQ(h.w.all<EvictMachines>()[1].machines, (MachineSet{8, 9, 10, 11}));
}

TEST(ByteRobustFailSlow, AStragglerThatRecoversIsForgotten) {
  Harness h({{"failslow", 1}});
  h.slowed();
  place_straggler(h, 9);
  sample(h.w, *h.p, 500, 1.0);  // steps back at the healthy 1 s
  h.at(1e5);
  EXPECT_TRUE(h.w.all<MitigateSlowdown>().empty());
  EXPECT_TRUE(h.w.all<EvictMachines>().empty());
  // The default module evicts at once, as before.
  Harness d;
  d.slowed();
  place_straggler(d, 9);
  ASSERT_EQ(d.w.all<EvictMachines>().size(), 1u);
  EXPECT_TRUE(d.w.all<MitigateSlowdown>().empty());
}

// A rebalanced straggler's steps (16/17 of full speed here) are what the detector then
// sees as normal, so after a restart undoes the rebalance its ratio understates the
// straggler (1.3 / 1.0625 = 1.22). Judged against that, the rebalanced steps looked
// healthy and the ladder forgot a straggler that was still there, for good: it must
// measure against the fastest steps the job ran, resume, and evict at the break-even.
TEST(ByteRobustFailSlow, AStragglerBackAfterARestartIsStillJudgedAgainstHealthySteps) {
  Harness h({{"failslow", 1}});
  const double rebalanced = 17.0 / 16;
  h.slowed();
  place_straggler(h, 6);
  h.at(1000);
  ASSERT_EQ(h.w.all<MitigateSlowdown>().size(), 1u);
  for (int i = 0; i < 3; ++i)
    sample(h.w, *h.p, 900 + i, rebalanced);  // the detector's baseline moves
  h.at(5000);
  h.p->on_event(ProcessExit{kNoMachine, 1, "OSError: [Errno 5] Input/output error"}, h.w);
  h.started(1000);  // the restart undoes the rebalance: 1.3 s steps again
  h.slowed();
  place_straggler(h, 6);
  auto m = h.w.all<MitigateSlowdown>();
  ASSERT_EQ(m.size(), 2u);  // resumed at the level reached, applied again at once
  EXPECT_EQ(m[1].how, Mitigation::kRebalance);
  sample(h.w, *h.p, 1500, rebalanced);
  h.at(h.w.now().to_seconds() + 1e5);
  auto ev = h.w.all<EvictMachines>();
  ASSERT_EQ(ev.size(), 1u) << "the straggler was forgotten while still slow";
  EXPECT_EQ(ev[0].mechanism, Mechanism::kOverEviction);
}

TEST(ByteRobust, UrgentCodeUpdateIsAHotUpdate) {
  Harness h;
  h.p->on_event(CodeUpdateRequested{"v2", true}, h.w);
  auto hu = h.w.all<HotUpdate>();
  ASSERT_EQ(hu.size(), 1u);
  EXPECT_EQ(hu[0].version, "v2");
  EXPECT_TRUE(h.w.all<AcquireMachines>().empty());
}

// A non-urgent code update rides the next restart (ByteRobust §5: merged into the next
// recovery), whether it arrives while the job runs (held for the deferral window) or while
// the stack is recovering (merged into the restart under way). It used to be dropped: the
// next JobStarted forgot it, and the window's timer then found nothing to apply.
// Counted by description so that it states the outcome, not the action that carries it.
int starts_on(const FakeWorld& w, const std::string& version) {
  int n = 0;
  for (const Action& a : w.actions)
    if ((std::holds_alternative<StartJob>(a) || std::holds_alternative<HotUpdate>(a)) &&
        describe(a).find(version) != std::string::npos)
      ++n;
  return n;
}

TEST(ByteRobust, DeferredCodeUpdateIsAppliedByTheNextRecoveryNotDropped) {
  for (double defer : {1.0, 0.0}) {
    SCOPED_TRACE(defer ? "held for the window, then a failure" : "arrives during a recovery");
    Harness h({{"defer_non_urgent", defer}});
    if (defer) h.p->on_event(CodeUpdateRequested{"v2", false}, h.w);
    EXPECT_TRUE(h.w.all<StopJob>().empty()) << "a held update must not stop the job";
    h.p->on_event(InspectionAlert{5, "gpu", "Xid 79"}, h.w);  // a recovery begins
    if (!defer) h.p->on_event(CodeUpdateRequested{"v2", false}, h.w);
    h.p->on_event(MachinesReady{h.w.last_action_id(), {}}, h.w);
    EXPECT_EQ(starts_on(h.w, "v2"), 1) << "the recovery's restart does not carry the update";
    h.started(0);
    h.at(25 * 3600.0);  // past the 24 h deferral window
    EXPECT_EQ(starts_on(h.w, "v2"), 1) << "the update was lost, or applied twice";
  }
}

// Two successive deferred updates each get their own window: v2 held at 0 h rides a
// recovery at 1 h, v3 held at 20 h is forced at 44 h, not at 24 h by v2's spent window.
// It used to be: every held update armed a timer with the same tag, and any of them
// forced the update held when it fired.
TEST(ByteRobust, SecondDeferredUpdateIsForcedAtTheEndOfItsOwnWindow) {
  Harness h;  // defer_non_urgent 1, deferral_window_h 24
  h.p->on_event(CodeUpdateRequested{"v2", false}, h.w);
  h.at(3600);
  h.p->on_event(InspectionAlert{5, "gpu", "Xid 79"}, h.w);  // a recovery begins
  h.p->on_event(MachinesReady{h.w.last_action_id(), {}}, h.w);
  ASSERT_EQ(starts_on(h.w, "v2"), 1) << "the recovery's restart does not carry v2";
  h.started(0);
  h.at(20 * 3600.0);
  h.p->on_event(CodeUpdateRequested{"v3", false}, h.w);
  h.at(43 * 3600.0);
  EXPECT_EQ(starts_on(h.w, "v3"), 0) << "v3 was forced before its window (v2's timer)";
  EXPECT_TRUE(h.w.all<HotUpdate>().empty());
  h.at(45 * 3600.0);
  EXPECT_EQ(starts_on(h.w, "v3"), 1) << "v3 was not forced at the end of its window";
  EXPECT_EQ(starts_on(h.w, "v2"), 1);
}

// Updates held one after the other without a restart in between: the newest carries the
// older ones and is forced when the oldest one's window ends, once.
TEST(ByteRobust, NewerHeldUpdateKeepsTheOldestWindow) {
  Harness h;
  h.p->on_event(CodeUpdateRequested{"v2", false}, h.w);
  h.at(10 * 3600.0);
  h.p->on_event(CodeUpdateRequested{"v3", false}, h.w);
  h.at(23 * 3600.0);
  EXPECT_TRUE(h.w.all<HotUpdate>().empty());
  h.at(25 * 3600.0);
  auto hu = h.w.all<HotUpdate>();
  ASSERT_EQ(hu.size(), 1u);
  EXPECT_EQ(hu[0].version, "v3");
  h.started(0);
  h.at(40 * 3600.0);
  EXPECT_EQ(h.w.all<HotUpdate>().size(), 1u) << "v3 applied twice";
  EXPECT_EQ(starts_on(h.w, "v2"), 0);
}

// Modules swapped by name (by index here; scenarios give the names): checkpoint,
// detection, recovery and localization each change what the stack does.
TEST(ByteRobustModules, CheckpointModulesSetTheirPlans) {
  Registry r = policies::builtin_registry();
  for (auto [choice, tier, blocking] : {std::tuple{1.0, CheckpointTier::kMemory, 1.84},
                                        std::tuple{2.0, CheckpointTier::kRemote, 6.77}}) {
    Params params;
    ASSERT_FALSE(Params::resolve(r.find("byterobust")->params, {{"checkpoint", choice}}, &params));
    FakeWorld fw(spec16());
    r.make("byterobust", params)->start(fw);
    auto plan = fw.all<SetCheckpointPlan>();
    ASSERT_EQ(plan.size(), 1u);
    EXPECT_EQ(plan[0].tier, tier);
    EXPECT_EQ(plan[0].interval, Duration::seconds(1800));
    EXPECT_EQ(plan[0].blocking, Duration::seconds(blocking));
  }
}

TEST(ByteRobustModules, TimeoutDetectionEnablesNoInspectionOrWatch) {
  FakeWorld w(spec16());
  Registry r = policies::builtin_registry();
  Params params;
  ASSERT_FALSE(Params::resolve(r.find("byterobust")->params, {{"detection", 1}}, &params));
  r.make("byterobust", params)->start(w);
  EXPECT_TRUE(w.all<EnableInspection>().empty());
  EXPECT_TRUE(w.all<WatchSteps>().empty());
  EXPECT_EQ(w.all<SetStandbyPool>().size(), 1u);  // the other modules are unchanged
}

TEST(ByteRobustModules, RecoveryModulesReplaceEvictedMachinesTheirWay) {
  {
    Harness h({{"recovery", 1}});
    h.p->on_event(InspectionAlert{5, "gpu", "Xid 79"}, h.w);
    auto acq = h.w.all<AcquireMachines>();
    ASSERT_EQ(acq.size(), 1u);
    EXPECT_EQ(acq[0].mode, AcquireMode::kReschedule);
    EXPECT_EQ(acq[0].slots, std::vector<SlotId>{5});
  }
  {
    Harness h({{"recovery", 2}});
    h.p->on_event(InspectionAlert{5, "gpu", "Xid 79"}, h.w);
    ASSERT_EQ(h.w.all<EvictMachines>().size(), 1u);
    auto acq = h.w.all<AcquireMachines>();
    ASSERT_EQ(acq.size(), 1u);
    EXPECT_EQ(acq[0].mode, AcquireMode::kRequeue);
    EXPECT_TRUE(acq[0].slots.empty());
  }
  FakeWorld w(spec16());
  Registry r = policies::builtin_registry();
  Params params;
  ASSERT_FALSE(Params::resolve(r.find("byterobust")->params, {{"recovery", 1}}, &params));
  r.make("byterobust", params)->start(w);
  EXPECT_TRUE(w.all<SetStandbyPool>().empty());  // no pool without the standby module
}

// recovery=flash (FlashRecovery): a restart after replacements or a reattempt is in place;
// the first start, a restart after a requeue and one after a NaN are not, nor is any
// restart under standby.
TEST(ByteRobustModules, FlashRestartsInPlaceExceptAfterARequeueOrANan) {
  const double flash = policies::builtin_registry()
                           .find("byterobust")
                           ->find_param("recovery")
                           ->choice_index("flash");
  ASSERT_GE(flash, 0);
  auto last_start = [](FakeWorld& w) {
    EXPECT_TRUE(std::holds_alternative<StartJob>(w.actions.back())) << describe(w.actions.back());
    return std::holds_alternative<StartJob>(w.actions.back()) ? std::get<StartJob>(w.actions.back())
                                                              : StartJob{"none"};
  };
  {
    FakeWorld w(spec16());
    Registry r = policies::builtin_registry();
    Params params;
    ASSERT_FALSE(Params::resolve(r.find("byterobust")->params, {{"recovery", flash}}, &params));
    r.make("byterobust", params)->start(w);
    EXPECT_FALSE(last_start(w).in_place) << "the first start has no survivors";
    EXPECT_EQ(w.all<SetStandbyPool>().size(), 1u) << "standby's pool";
  }
  Harness h({{"recovery", flash}});
  h.p->on_event(InspectionAlert{5, "gpu", "Xid 79"}, h.w);
  ASSERT_EQ(h.w.all<AcquireMachines>().size(), 1u);
  EXPECT_EQ(h.w.all<AcquireMachines>()[0].mode, AcquireMode::kStandby);
  h.p->on_event(MachinesReady{h.w.last_action_id(), {}}, h.w);
  EXPECT_TRUE(last_start(h.w).in_place);
  // The start fails: the stack falls back to a requeue, after which nothing survives.
  h.p->on_event(ActionFailed{h.w.last_action_id(), "refused"}, h.w);
  ASSERT_EQ(std::get<AcquireMachines>(h.w.actions.back()).mode, AcquireMode::kRequeue);
  h.p->on_event(MachinesReady{h.w.last_action_id(), {}}, h.w);
  EXPECT_FALSE(last_start(h.w).in_place);
  h.started(0);
  // Replacements after that run are in place again; a NaN's are not.
  h.at(100);
  h.p->on_event(InspectionAlert{6, "gpu", "Xid 79"}, h.w);
  h.p->on_event(MachinesReady{h.w.last_action_id(), {}}, h.w);
  EXPECT_TRUE(last_start(h.w).in_place);
  h.started(0);
  h.nan();
  ASSERT_TRUE(std::holds_alternative<RunProbe>(h.w.actions.back()));
  h.p->on_event(ProbeResult{h.w.last_action_id(), ProbeKind::kBitwise, {13}, false}, h.w);
  ASSERT_TRUE(std::holds_alternative<AcquireMachines>(h.w.actions.back()))
      << describe(h.w.actions.back());
  h.p->on_event(MachinesReady{h.w.last_action_id(), {}}, h.w);
  EXPECT_FALSE(last_start(h.w).in_place);
  // standby never restarts in place.
  Harness s;
  s.p->on_event(InspectionAlert{5, "gpu", "Xid 79"}, s.w);
  s.p->on_event(MachinesReady{s.w.last_action_id(), {}}, s.w);
  EXPECT_FALSE(last_start(s.w).in_place);
}

TEST(ByteRobustModules, StressLocalizationTestsEveryMachineThenEvictsOrReattempts) {
  for (bool finds : {true, false}) {
    Harness h({{"localization", 2}});
    h.nan();
    h.p->on_event(ProbeResult{h.w.last_action_id(), ProbeKind::kBitwise, {}, false}, h.w);
    EXPECT_TRUE(h.w.all<RunReplay>().empty());
    auto probes = h.w.all<RunProbe>();
    ASSERT_EQ(probes.size(), 2u);
    EXPECT_EQ(probes[1].test, ProbeKind::kStress);
    EXPECT_EQ(probes[1].machines.size(), 16u);
    h.p->on_event(ProbeResult{h.w.last_action_id(), ProbeKind::kStress,
                              finds ? MachineSet{9} : MachineSet{}, false},
                  h.w);
    if (finds) {
      auto ev = h.w.all<EvictMachines>();
      ASSERT_EQ(ev.size(), 1u);
      EXPECT_EQ(ev[0].machines, MachineSet{9});
      EXPECT_EQ(ev[0].mechanism, Mechanism::kStopTimeEviction);
    } else {
      EXPECT_TRUE(h.w.all<EvictMachines>().empty());
      auto starts = h.w.all<StartJob>();
      ASSERT_EQ(starts.size(), 1u);
      EXPECT_EQ(starts[0].mechanism, Mechanism::kReattempt);
    }
  }
}

TEST(StopTime, SignaturesMapToTestPlans) {
  using policies::classify_crash;
  using policies::CrashKind;
  EXPECT_EQ(classify_crash("TypeError: unsupported operand", 1), CrashKind::kUserCode);
  EXPECT_EQ(classify_crash("NCCL WARN NET/IB : Got completion with error 12", 1),
            CrashKind::kNetwork);
  EXPECT_EQ(classify_crash("NVRM: Xid (PCI:0000:1b:00): 79", 1), CrashKind::kMachine);
  EXPECT_EQ(classify_crash("RuntimeError: Rank 0: found NaN in local grad norm", 1),
            CrashKind::kNumeric);
  EXPECT_EQ(classify_crash("OSError: [Errno 5] Input/output error", 1), CrashKind::kEnvironment);
  EXPECT_TRUE(policies::test_plan(CrashKind::kEnvironment).empty());
  EXPECT_EQ(policies::test_plan(CrashKind::kNumeric), std::vector<ProbeKind>{ProbeKind::kBitwise});
}

}  // namespace
}  // namespace faultline

namespace faultline {
namespace {

using testing::FakeWorld;

struct Ladder {
  FakeWorld w{spec16()};
  std::unique_ptr<Policy> p;
  explicit Ladder(std::map<std::string, double> over = {}) {
    Registry r = policies::builtin_registry();
    Params params;
    EXPECT_FALSE(Params::resolve(r.find("byterobust")->params, over, &params));
    p = r.make("byterobust", params);
    p->start(w);
    started();
  }
  void started() {
    faultline::started(w, *p, 0);
    w.actions.clear();
  }
  void started(std::int64_t step) { faultline::started(w, *p, step); }
  void nan() { sample(w, *p, 0, 1.0, true); }
  void nan_at(std::int64_t step) { sample(w, *p, step, 1.0, true); }
  void slowed() { faultline::slowed(w, *p); }
  void at(double s) { w.advance_to(Instant{Duration::seconds(s).ns}, *p); }
  // Answers every stop-time test of the plan with "passed".
  void tests_pass() {
    for (int i = 0;
         i < 5 && !w.all<RunProbe>().empty() && std::holds_alternative<RunProbe>(w.actions.back());
         ++i)
      p->on_event(ProbeResult{w.last_action_id(), w.all<RunProbe>().back().test, {}, false}, w);
  }
  int max_fruitless() const {
    int m = 0;
    for (const auto& n : w.all<Note>()) m = std::max(m, n.fruitless_round);
    return m;
  }
};

const char* kCuda = "RuntimeError: CUDA error: an illegal memory access";

// Escalation by locus: the same signature on another machine soon after a restart is an
// independent incident (at scale the job's MTBF is shorter than the window), not "the
// same crash again": it gets its own tests, no rollback. Failed on the signature-only rule.
TEST(ByteRobustLadder, SameSignatureOnAnotherMachineIsANewIncident) {
  Ladder h;
  h.at(4000);
  h.p->on_event(ProcessExit{7, 1, kCuda}, h.w);
  h.tests_pass();
  ASSERT_EQ(h.w.all<StartJob>().size(), 1u);  // reattempt
  h.started();
  h.at(4100);
  h.p->on_event(ProcessExit{3, 1, kCuda}, h.w);
  EXPECT_TRUE(h.w.all<RollBack>().empty());
  ASSERT_EQ(h.w.all<RunProbe>().size(), 1u);
  EXPECT_EQ(h.w.all<RunProbe>()[0].test, ProbeKind::kGpuDiag);
  // The suspects are machine 3 and its pipeline neighbours (slots 0..3 form its group).
  EXPECT_EQ(h.w.all<RunProbe>()[0].machines, (MachineSet{0, 2, 3}));
}

// Evidence the tests miss: the crash log names machine 7 again after its tests passed and
// a reattempt: evict it, instead of rolling back good code and replaying for an hour.
TEST(ByteRobustLadder, CrashLogNamingTheSameMachineTwiceEvictsIt) {
  Ladder h;
  h.at(4000);
  h.p->on_event(ProcessExit{7, 1, kCuda}, h.w);
  h.tests_pass();
  h.started();
  h.at(4100);
  h.p->on_event(ProcessExit{7, 1, kCuda}, h.w);
  auto ev = h.w.all<EvictMachines>();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].machines, MachineSet{7});
  EXPECT_EQ(ev[0].mechanism, Mechanism::kAttributedEviction);
  EXPECT_TRUE(h.w.all<RollBack>().empty());
  // The replacement in the same rank crashes the same way: now it is the code.
  auto& view = h.w.mutable_cluster();
  view.vacate(7);
  const MachineId fresh = view.add_machine();
  view.place(fresh, 7);
  h.p->on_event(MachinesReady{h.w.last_action_id(), {fresh}}, h.w);
  h.started();
  h.at(4200);
  h.p->on_event(ProcessExit{fresh, 1, kCuda}, h.w);
  EXPECT_EQ(h.w.all<RollBack>().size(), 1u);
}

// No loop runs unbounded: NaNs that replay cannot place come back after every restart;
// after max_fruitless_rounds (3) fruitless rounds the stack gives up and requeues, and it
// never reports a fourth.
TEST(ByteRobustLadder, FruitlessRoundsAreBoundedThenTheStackRequeues) {
  Ladder h;
  double t = 4000;
  bool requeued = false;
  for (int round = 0; round < 6 && !requeued; ++round) {
    h.at(t += 60);
    h.nan();
    if (!h.w.all<RunProbe>().empty() && std::holds_alternative<RunProbe>(h.w.actions.back()))
      h.p->on_event(ProbeResult{h.w.last_action_id(), ProbeKind::kBitwise, {}, false}, h.w);
    for (const auto& a : h.w.all<AcquireMachines>()) requeued |= a.mode == AcquireMode::kRequeue;
    if (requeued) break;
    for (int phase = 0; phase < 2 && std::holds_alternative<RunReplay>(h.w.actions.back());
         ++phase) {
      const auto groups = std::get<RunReplay>(h.w.actions.back()).groups.size();
      h.p->on_event(ReplayResult{h.w.last_action_id(), std::vector<bool>(groups, false)}, h.w);
    }
    ASSERT_TRUE(std::holds_alternative<StartJob>(h.w.actions.back()))
        << describe(h.w.actions.back());
    const int seen = h.max_fruitless();
    EXPECT_LE(seen, 3);
    h.started(0);
  }
  EXPECT_TRUE(requeued);
  EXPECT_EQ(h.max_fruitless(), 3);
}

// An MFU decline that no aggregation can place stops being aggregated after the declared
// number of fruitless sequences, until the next restart (it used to capture every slot's
// stacks every 5 minutes for days).
TEST(ByteRobustLadder, MfuAggregationThatFlagsNothingGivesUpUntilTheNextRestart) {
  Ladder h;
  const std::vector<std::string> same(16, "train_step > forward > gemm");
  int captures = 0;
  for (int report = 0; report < 10; ++report) {
    h.slowed();
    for (int round = 0; round < 5; ++round) {
      if (h.w.all<CaptureStacks>().size() == static_cast<size_t>(captures)) break;
      ++captures;
      h.p->on_event(StacksCaptured{h.w.last_action_id(), StackSignatures(same)}, h.w);
      h.p->on_event(TimerFired{0, 1}, h.w);  // the next MFU round
    }
  }
  EXPECT_EQ(captures, 3 * 5);
  EXPECT_EQ(h.max_fruitless(), 3);
}

// A localizer that times its tests (localization=pairwise) is handed the MFU decline that
// stack aggregation could not place: the stack stops the job, the pairs find the slow
// machine in two rounds and it is evicted. Searches that find nothing count: after
// max_fruitless_rounds of them in a row the stack gives up on the decline as before.
TEST(ByteRobustLadder, APairwiseLocalizerIsHandedTheSlowdownStacksCannotPlace) {
  Ladder h({{"localization", 3}});
  const std::vector<std::string> same(16, "train_step > forward > gemm");
  // Runs the MFU rounds on uniform stacks; true when the stack then started a search.
  auto rounds = [&] {
    h.slowed();
    for (int round = 0; round < 5 && std::holds_alternative<CaptureStacks>(h.w.actions.back());
         ++round) {
      h.p->on_event(StacksCaptured{h.w.last_action_id(), StackSignatures(same)}, h.w);
      if (round < 4) h.p->on_event(TimerFired{0, 1}, h.w);  // the next MFU round
    }
    return std::holds_alternative<RunProbe>(h.w.actions.back());
  };
  // Answers the last grouped probe: every group takes 1 s, a group holding `slow` 1.3 s.
  auto answer = [&](MachineId slow) {
    const RunProbe probe = h.w.all<RunProbe>().back();
    ProbeResult r{h.w.last_action_id(), probe.test, {}, false};
    for (const auto& g : probe.groups) {
      r.group_failed.push_back(false);
      r.group_seconds.push_back(std::count(g.begin(), g.end(), slow) ? 1.3 : 1.0);
    }
    h.p->on_event(r, h.w);
    return probe;
  };
  ASSERT_TRUE(rounds());
  EXPECT_EQ(h.w.all<StopJob>().size(), 1u);
  EXPECT_EQ(answer(5).groups.size(), 8u);
  EXPECT_EQ(answer(5).groups.size(), 2u);  // round 2: machines 4 and 5, each with a new partner
  const auto ev = h.w.all<EvictMachines>();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].machines, MachineSet{5});
  EXPECT_EQ(ev[0].mechanism, Mechanism::kStopTimeEviction);
  h.p->on_event(MachinesReady{h.w.last_action_id(), {}}, h.w);
  h.started();
  // A slowdown no pair shows (every pair keeps pace): the job restarts, and no rollback.
  for (int search = 0; search < 3; ++search) {
    ASSERT_TRUE(rounds()) << search;
    answer(kNoMachine);
    EXPECT_TRUE(h.w.all<RollBack>().empty());
    ASSERT_TRUE(std::holds_alternative<StartJob>(h.w.actions.back())) << search;
    h.started();
  }
  EXPECT_FALSE(rounds())
      << "three fruitless searches in a row: the decline is left to the MFU rounds";
}

}  // namespace
}  // namespace faultline

namespace faultline {
namespace {

// Answers a NaN round of the byterobust stack as a backend whose machines are all fine
// would: bit-wise alignment passes, both replay phases find nothing; returns the action
// the round ended with.
Action clean_nan_round(Ladder& h) {
  if (std::holds_alternative<RunProbe>(h.w.actions.back()))
    h.p->on_event(ProbeResult{h.w.last_action_id(), ProbeKind::kBitwise, {}, false}, h.w);
  for (int phase = 0; phase < 2 && std::holds_alternative<RunReplay>(h.w.actions.back()); ++phase) {
    const auto groups = std::get<RunReplay>(h.w.actions.back()).groups.size();
    h.p->on_event(ReplayResult{h.w.last_action_id(), std::vector<bool>(groups, false)}, h.w);
  }
  return h.w.actions.back();
}

// The review's silent loop: a deterministic NaN (a bad batch at step 30) looped stop ->
// bit-wise -> replay -> reattempt forever. Now: the first time is diagnosed, the second
// rolls the code back, the third (identical_incident_limit) ends the run with its verdict.
TEST(ByteRobustLadder, TheSameNanAtTheSameStepRollsBackThenEndsTheRun) {
  Ladder h;
  double t = 4000;
  h.at(t);
  h.nan_at(30);
  EXPECT_TRUE(std::holds_alternative<StartJob>(clean_nan_round(h)))
      << "first time: diagnosed, reattempted";
  h.started(20);  // restored from the checkpoint at step 20
  h.at(t += 15);
  h.nan_at(30);
  ASSERT_TRUE(std::holds_alternative<RollBack>(h.w.actions.back())) << describe(h.w.actions.back());
  h.started(20);
  h.at(t += 15);
  h.nan_at(30);
  const auto ended = h.w.all<EndRun>();
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(ended[0].verdict, "code_or_data");
  EXPECT_NE(ended[0].reason.find("NaN at step 30 3 times in a row"), std::string::npos)
      << ended[0].reason;
  EXPECT_EQ(h.w.all<RollBack>().size(), 1u);
  // An ended run does nothing more, whatever happens.
  const std::size_t n = h.w.actions.size();
  h.p->on_event(ProcessExit{3, 1, kCuda}, h.w);
  h.nan_at(30);
  h.at(t += 3600);
  EXPECT_EQ(h.w.actions.size(), n);
}

// NaNs at different steps, or at the step the job restarted from (the machine, not the
// data: nothing ran clean in between), are separate incidents: no rollback, no end.
TEST(ByteRobustLadder, NanAtOtherStepsOrAtTheRestartStepIsNotTheSameIncident) {
  Ladder h;
  double t = 4000;
  for (std::int64_t step : {30, 31, 30, 45}) {
    h.at(t += 3000);  // outside recrash_window_s: each a fresh incident
    h.nan_at(step);
    clean_nan_round(h);
    h.started(20);
  }
  for (int i = 0; i < 3; ++i) {
    h.at(t += 3000);
    h.nan_at(20);  // at the restored step itself
    clean_nan_round(h);
    h.started(20);
  }
  EXPECT_TRUE(h.w.all<EndRun>().empty());
  EXPECT_TRUE(h.w.all<RollBack>().empty());
}

// Answers whatever the byterobust stack asks after a crash as a backend whose machines are
// all fine would (tests pass, replay finds nothing, replacements are ready at once) until
// it starts the job again or ends the run; returns the last action. Evictions take effect.
// `failing`, when given, names the machines a test fails instead.
Action answer_until_start(Ladder& h,
                          const std::function<MachineSet(const RunProbe&)>& failing = {}) {
  for (int i = 0; i < 20; ++i) {
    const Action a = h.w.actions.back();
    if (const auto* p = std::get_if<RunProbe>(&a)) {
      h.p->on_event(
          ProbeResult{h.w.last_action_id(), p->test, failing ? failing(*p) : MachineSet{}, false},
          h.w);
    } else if (const auto* r = std::get_if<RunReplay>(&a)) {
      h.p->on_event(ReplayResult{h.w.last_action_id(), std::vector<bool>(r->groups.size(), false)},
                    h.w);
    } else if (std::holds_alternative<AcquireMachines>(a)) {
      // Evicted machines leave their slots; a fresh machine takes each.
      std::vector<MachineId> fresh;
      auto& view = h.w.mutable_cluster();
      for (const auto& ev : h.w.all<EvictMachines>())
        for (const MachineId m : ev.machines) {
          const SlotId slot = view.slot_of(m);
          if (slot < 0) continue;
          view.vacate(slot);
          fresh.push_back(view.add_machine());
          view.place(fresh.back(), slot);
        }
      h.p->on_event(MachinesReady{h.w.last_action_id(), fresh}, h.w);
    } else if (std::holds_alternative<CaptureStacks>(a)) {
      h.p->on_event(StacksCaptured{h.w.last_action_id(),
                                   StackSignatures(std::vector<std::string>(16, "train_step"))},
                    h.w);
    } else {
      return a;
    }
  }
  return h.w.actions.back();
}

// A crash that follows the data and names no machine (a corrupt shard kills the data
// loader at the same step in every run): the identical-incident verdict counts recurrences
// by machine and never stops it, so the stack loops (tests, reattempt, rollback, replay,
// requeue) until people notice. The no-progress verdict (verdict=no_progress) counts runs
// that get no further than any before (the first crash's run did: it started at step 0):
// the third rolls the code back, the fourth (no_progress_limit) ends the run, whatever the
// crash said.
TEST(StopVerdict, RunsWithoutProgressEndTheRunWhereIdenticalIncidentsNeverDo) {
  const char* shard =
      "RuntimeError: DataLoader worker exited unexpectedly: shard-01873.tar: truncated record";
  const int verdict_choice = policies::byterobust_info(policies::modules())
                                 .find_param("verdict")
                                 ->choice_index("no_progress");
  ASSERT_GE(verdict_choice, 0);
  for (const bool no_progress : {false, true}) {
    Ladder h(no_progress ? std::map<std::string, double>{{"verdict", verdict_choice}}
                         : std::map<std::string, double>{});
    double t = 4000;
    int crashes = 0;
    // The first run made progress (from step 0 to 30); the restarts restore step 29 and
    // crash after step 30 again.
    for (; crashes < 12 && h.w.all<EndRun>().empty(); ++crashes) {
      h.at(t += 60);
      h.p->on_event(ProcessExit{kNoMachine, 1, shard, 30}, h.w);
      const Action a = answer_until_start(h);
      if (std::holds_alternative<EndRun>(a)) break;
      h.started(29);
    }
    if (!no_progress) {
      EXPECT_TRUE(h.w.all<EndRun>().empty()) << "identical: no machine to count, so no verdict";
      continue;
    }
    const auto ended = h.w.all<EndRun>();
    ASSERT_EQ(ended.size(), 1u);
    EXPECT_EQ(crashes, 4) << "the fifth crash: the fourth run in a row without progress";
    EXPECT_EQ(ended[0].verdict, "code_or_data");
    EXPECT_NE(ended[0].reason.find("4 runs in a row that got no further than step 30"),
              std::string::npos)
        << ended[0].reason;
    const auto rollbacks = h.w.all<RollBack>();
    ASSERT_GE(rollbacks.size(), 1u);
    EXPECT_NE(rollbacks.back().reason.find("3 runs in a row that got no further than step 30"),
              std::string::npos)
        << rollbacks.back().reason;
  }
}

// Progress resets the count: runs that crash but each get further than the last are
// failures of machines, not of the code or the data, and never end the run.
TEST(StopVerdict, RunsThatCommitNewerCheckpointsNeverEndTheRun) {
  const int verdict_choice = policies::byterobust_info(policies::modules())
                                 .find_param("verdict")
                                 ->choice_index("no_progress");
  Ladder h({{"verdict", verdict_choice}});
  double t = 4000;
  for (int k = 0; k < 10; ++k) {
    h.at(t += 3000);
    h.p->on_event(ProcessExit{kNoMachine, 1, kCuda, 30 + 100 * k}, h.w);
    answer_until_start(h);
    h.started(29 + 100 * k);
  }
  EXPECT_TRUE(h.w.all<EndRun>().empty());
  for (const auto& r : h.w.all<RollBack>())
    EXPECT_EQ(r.reason.find("got no further"), std::string::npos) << r.reason;
}

// The crash twin of the NaN loop: a crash at the same step in the same rank, whatever
// machine runs it (data or code at fault), looped tests -> reattempt -> rollback -> replay
// -> requeue for ever. Now: tested, then (named twice) its machine evicted, as a hardware
// fault would be; when it strikes the replacement the code is rolled back; named twice
// there, the replacement is evicted too; when it strikes a third machine the run ends.
TEST(ByteRobustLadder, TheSameCrashAtTheSameStepFollowsItsRankRollsBackThenEndsTheRun) {
  // Restored from a checkpoint 10 steps before the crash, or from the step just before it
  // (a checkpoint every step), and long after the restart (slow steps) or at once.
  for (const std::int64_t restored : {20, 30})
    for (const double gap : {3000.0, 2.0}) {
      SCOPED_TRACE("restored " + std::to_string(restored) + ", gap " + std::to_string(gap));
      Ladder h;
      const SlotId slot = h.w.cluster().slot_of(7);
      double t = 4000;
      int crashes = 0;
      std::set<MachineId> struck;
      for (; crashes < 12; ++crashes) {
        h.at(t += gap);
        const MachineId m = h.w.cluster().machine_in(slot);  // whoever runs the rank now
        struck.insert(m);
        h.p->on_event(ProcessExit{m, 1, kCuda, 30}, h.w);
        const Action last = answer_until_start(h);
        if (!h.w.all<EndRun>().empty()) break;
        ASSERT_TRUE(std::holds_alternative<StartJob>(last) ||
                    std::holds_alternative<RollBack>(last))
            << describe(last);
        h.started(restored);
      }
      const auto ended = h.w.all<EndRun>();
      ASSERT_EQ(ended.size(), 1u) << "no verdict after " << crashes << " identical crashes";
      EXPECT_EQ(crashes + 1, 5);
      EXPECT_EQ(struck.size(), 3u) << "machine 7, then two replacements";
      EXPECT_EQ(h.w.all<EvictMachines>().size(), 2u);
      EXPECT_EQ(ended[0].verdict, "code_or_data");
      EXPECT_NE(ended[0].reason.find("the same crash at step 30"), std::string::npos)
          << ended[0].reason;
      EXPECT_NE(ended[0].reason.find("on 3 machines in turn"), std::string::npos)
          << ended[0].reason;
      EXPECT_NE(ended[0].reason.find("5 times in a row"), std::string::npos) << ended[0].reason;
      EXPECT_EQ(h.w.all<RollBack>().size(), 1u);
    }
}

// A misattributing log (it names the next pipeline stage, the rank that saw its broken
// peer first) with a stop-time test that missed the culprit once: the named machine is
// evicted after the log named it twice, and its replacement crashes at the same step,
// because the culprit next to it is still there. That is not yet a crash that follows
// the rank: the named rank's neighbours are tested again first, the culprit is found,
// and no code is rolled back and no run ended. It rolled back (then ended the run) at once.
TEST(ByteRobustLadder, AReplacementThatCrashesLikeItsPredecessorIsTestedBeforeTheCodeIsBlamed) {
  Ladder h;
  const MachineId culprit = 7;
  const SlotId culprit_slot = h.w.cluster().slot_of(culprit);
  const auto group = h.w.cluster().pp_group(culprit_slot);
  const auto at = std::find(group.begin(), group.end(), culprit_slot);
  ASSERT_NE(at, group.end());
  const SlotId named_slot =
      group[(static_cast<std::size_t>(at - group.begin()) + 1) % group.size()];
  ASSERT_NE(named_slot, culprit_slot);
  double t = 4000;
  std::vector<MachineSet> tested;
  for (int crash = 0; crash < 6 && h.w.cluster().slot_of(culprit) >= 0; ++crash) {
    h.at(t += 60);
    h.p->on_event(ProcessExit{h.w.cluster().machine_in(named_slot), 1, kCuda, 30}, h.w);
    answer_until_start(h, [&](const RunProbe& probe) {
      tested.push_back(probe.machines);
      const bool has = std::count(probe.machines.begin(), probe.machines.end(), culprit) > 0;
      return has && crash > 0 ? MachineSet{culprit}
                              : MachineSet{};  // the first crash's tests miss it
    });
    if (!h.w.all<EndRun>().empty()) break;
    h.started(20);
  }
  EXPECT_TRUE(h.w.all<EndRun>().empty());
  EXPECT_TRUE(h.w.all<RollBack>().empty()) << "rolled back good code";
  EXPECT_EQ(h.w.cluster().slot_of(culprit), -1) << "the culprit stayed";
  ASSERT_FALSE(tested.empty());
  EXPECT_NE(std::count(tested.back().begin(), tested.back().end(), culprit), 0);
}

// A crash that stays with its machine, at the same step every time (a persistent hardware
// fault strikes the same time after every restart): the ladder evicts the machine; no
// verdict, no rollback.
TEST(ByteRobustLadder, TheSameCrashThatStaysWithItsMachineEvictsItAndNeverEndsTheRun) {
  Ladder h;
  double t = 4000;
  for (int i = 0; i < 2; ++i) {
    h.at(t += 60);
    h.p->on_event(ProcessExit{7, 1, kCuda, 30}, h.w);
    answer_until_start(h);
    h.started(20);
  }
  EXPECT_EQ(h.w.cluster().slot_of(7), -1) << "evicted";
  EXPECT_TRUE(h.w.all<EndRun>().empty());
  EXPECT_TRUE(h.w.all<RollBack>().empty());
}

// Crashes after other steps, with no step known, in another rank or with another
// signature are separate incidents: never the verdict.
TEST(ByteRobustLadder, CrashesAtOtherStepsOrRanksAreNotTheSameIncident) {
  struct Case {
    MachineId machine;
    std::int64_t step;
  };
  const std::vector<std::vector<Case>> runs = {
      {{7, 30}, {7, 31}, {7, 30}, {7, 45}, {7, 30}, {7, 46}},  // other steps in between
      {{7, -1}, {7, -1}, {7, -1}, {7, -1}},                    // step unknown
      {{7, 30}, {3, 30}, {7, 30}, {3, 30}, {7, 30}},           // alternating ranks
  };
  for (const auto& run : runs) {
    Ladder h;
    double t = 4000;
    for (const Case& c : run) {
      h.at(t += 3000);
      h.p->on_event(ProcessExit{c.machine, 1, kCuda, c.step}, h.w);
      answer_until_start(h);
      h.started(20);
    }
    EXPECT_TRUE(h.w.all<EndRun>().empty()) << "run starting at machine " << run[0].machine;
  }
  Ladder h;
  double t = 4000;
  for (const char* sig :
       {kCuda, "RuntimeError: NCCL error: unhandled system error", kCuda, "Segmentation fault"}) {
    h.at(t += 3000);
    h.p->on_event(ProcessExit{7, 1, sig, 30}, h.w);
    answer_until_start(h);
    h.started(20);
  }
  EXPECT_TRUE(h.w.all<EndRun>().empty()) << "other signatures in between";
}

// 0 turns the rule off, as before.
TEST(ByteRobustLadder, IdenticalIncidentLimitZeroNeverEndsTheRun) {
  FakeWorld w{spec16()};
  Registry r = policies::builtin_registry();
  Params params;
  ASSERT_FALSE(
      Params::resolve(r.find("byterobust")->params, {{"identical_incident_limit", 0}}, &params));
  auto p = r.make("byterobust", params);
  p->start(w);
  faultline::started(w, *p, 0);
  for (int i = 0; i < 5; ++i) {
    w.advance_to(w.now() + Duration::seconds(3000), *p);
    sample(w, *p, 30, 1.0, true);
    if (std::holds_alternative<RunProbe>(w.actions.back()))
      p->on_event(ProbeResult{w.last_action_id(), ProbeKind::kBitwise, {}, false}, w);
    for (int phase = 0; phase < 2 && std::holds_alternative<RunReplay>(w.actions.back()); ++phase)
      p->on_event(ReplayResult{w.last_action_id(),
                               std::vector<bool>(
                                   std::get<RunReplay>(w.actions.back()).groups.size(), false)},
                  w);
    faultline::started(w, *p, 20);
  }
  EXPECT_TRUE(w.all<EndRun>().empty());
}

}  // namespace
}  // namespace faultline
