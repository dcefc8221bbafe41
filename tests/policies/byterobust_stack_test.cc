// The byterobust stack against FakeWorld: which actions for which observations (its
// fail-slow ladder, its code updates, its modules and its incident ladder: the other
// tests/policies/byterobust_*_test.cc files).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/policies/byterobust_fixtures.h"

namespace faultline {
namespace {

using namespace byterobust_test;

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
  h.ready();
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
  h.ready();
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
    d.ready();
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
    h.ready();
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
  h.captured(stacks);
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
  h.captured_alike();
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
  h.captured_alike();
  EXPECT_EQ(h.w.all<RollBack>().size(), 1u);
  h.started(100);
  h.stalled_at(5400, 100);
  h.captured_alike();
  EXPECT_EQ(h.w.all<RunReplay>().size(), 1u);
}

TEST(ByteRobust, AMachineHangThatStrikesAtTheRestartIsOverEvictedNotRolledBack) {
  // A code hang is reattempted; a machine hang that landed meanwhile strikes at the
  // restart, so the job stalls again before a step. Its stacks show the outlier group:
  // over-evict it, instead of rolling back good code and replaying for two hours.
  Harness h;
  h.stalled_at(4000, 100);
  h.captured_alike();
  h.started(100);
  h.stalled_at(4700, 100);
  std::vector<std::string> stacks(16, "optimizer.step > all_reduce");
  stacks[9] = "forward > all_gather";
  stacks[8] = stacks[10] = stacks[11] = "pipeline > irecv";
  h.captured(stacks);
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
  h.captured(stacks);
  h.ready();
  h.started(0);
  h.at(5000);
  h.p->on_event(InspectionAlert{3, "gpu", "Xid 79"}, h.w);
  h.ready();
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
  h.captured_alike();
  h.started(100);
  h.stalled_at(4700, 100);
  h.captured_alike();
  ASSERT_EQ(h.w.all<RollBack>().size(), 1u);
  h.started(100);
  h.stalled_at(5700, 140);
  EXPECT_EQ(h.w.all<CaptureStacks>().size(), 3u);
  h.captured_alike();
  EXPECT_TRUE(h.w.all<RunReplay>().empty());
  EXPECT_EQ(h.w.all<RollBack>().size(), 1u);
}

TEST(ByteRobust, StallLongAfterTheLastRestartIsDiagnosedAfresh) {
  Harness h;
  h.stalled_at(4000, 100);
  h.captured_alike();
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

}  // namespace
}  // namespace faultline
