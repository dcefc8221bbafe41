// The baseline stacks against FakeWorld: which actions, in which order, for which
// observations.
#include "policies/stacks/baselines.h"

#include <gtest/gtest.h>

#include <limits>

#include "policies/builtin.h"
#include "tests/support/fake_world.h"

namespace faultline {
namespace {

using testing::FakeWorld;

ClusterSpec small() {
  ClusterSpec c;
  c.machines = 8;
  c.gpus_per_machine = 8;
  c.tp = 8;
  c.pp = 4;
  c.dp = 2;
  return c;
}

std::unique_ptr<Policy> make(const std::string& name, std::map<std::string, double> over = {}) {
  Registry r = policies::builtin_registry();
  Params p;
  EXPECT_FALSE(Params::resolve(r.find(name)->params, over, &p));
  return r.make(name, p);
}

TEST(Requeue, StartsWithRemoteCheckpointPlanThenStartsJob) {
  FakeWorld w(small());
  auto pol = make("requeue", {{"checkpoint_interval_s", 600}, {"checkpoint_write_s", 7}});
  pol->start(w);
  ASSERT_EQ(w.actions.size(), 2u);
  auto plan = std::get<SetCheckpointPlan>(w.actions[0]);
  EXPECT_EQ(plan.interval, Duration::seconds(600));
  EXPECT_EQ(plan.blocking, Duration::seconds(7));
  EXPECT_EQ(plan.tier, CheckpointTier::kRemote);
  EXPECT_TRUE(std::holds_alternative<StartJob>(w.actions[1]));
}

TEST(Requeue, CrashWhileRunningStopsAndRequeuesWholeJob) {
  FakeWorld w(small());
  auto pol = make("requeue");
  pol->start(w);
  const ActionId start = w.last_action_id();
  pol->on_event(JobStarted{start, 0}, w);
  pol->on_event(ProcessExit{3, 1, "CUDA error"}, w);
  ASSERT_EQ(w.actions.size(), 4u);
  EXPECT_TRUE(std::holds_alternative<StopJob>(w.actions[2]));
  auto acq = std::get<AcquireMachines>(w.actions[3]);
  EXPECT_EQ(acq.mode, AcquireMode::kRequeue);
  EXPECT_NE(acq.reason.find("CUDA error"), std::string::npos);
  // Machines ready -> start.
  pol->on_event(MachinesReady{w.last_action_id(), {}}, w);
  EXPECT_TRUE(std::holds_alternative<StartJob>(w.actions.back()));
}

TEST(Requeue, IgnoresInspectionAlertsAndStallsItHasNoDetectorFor) {
  FakeWorld w(small());
  auto pol = make("requeue");
  pol->start(w);
  pol->on_event(JobStarted{w.last_action_id(), 0}, w);
  const size_t before = w.actions.size();
  pol->on_event(InspectionAlert{2, "nic", "port down"}, w);
  pol->on_event(StepSample{10, std::numeric_limits<double>::infinity(), std::nullopt, std::nullopt,
                           false, true},
                w);
  EXPECT_EQ(w.actions.size(), before);
}

TEST(Requeue, FailureDuringRestartRequeuesAgainWithoutStopping) {
  FakeWorld w(small());
  auto pol = make("requeue");
  pol->start(w);
  pol->on_event(StartFailed{w.last_action_id(), kNoMachine, "HDFS error"}, w);
  ASSERT_TRUE(std::holds_alternative<AcquireMachines>(w.actions.back()));
  EXPECT_TRUE(w.all<StopJob>().empty());
}

TEST(Oracle, EvictsAndReplacesPersistentFaultyMachine) {
  FakeWorld w(small());
  auto pol = make("oracle");
  pol->start(w);
  ASSERT_TRUE(std::holds_alternative<EnableOracle>(w.actions[0]));
  pol->on_event(JobStarted{w.last_action_id(), 0}, w);
  pol->on_event(OracleFault{{5}, "cuda_error", true}, w);
  auto ev = w.all<EvictMachines>();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].machines, MachineSet{5});
  auto acq = w.all<AcquireMachines>();
  ASSERT_EQ(acq.size(), 1u);
  EXPECT_EQ(acq[0].mode, AcquireMode::kOracle);
  EXPECT_EQ(acq[0].slots, std::vector<SlotId>{5});
}

TEST(Oracle, TransientFaultRestartsInPlace) {
  FakeWorld w(small());
  auto pol = make("oracle");
  pol->start(w);
  pol->on_event(JobStarted{w.last_action_id(), 0}, w);
  pol->on_event(OracleFault{{}, "storage_service", false}, w);
  EXPECT_TRUE(w.all<EvictMachines>().empty());
  EXPECT_TRUE(w.all<AcquireMachines>().empty());
  EXPECT_TRUE(std::holds_alternative<StartJob>(w.actions.back()));
}

TEST(Oracle, RunsReplicaGroupsAtTheirCheapestWhereTheJobHasReplicas) {
  FakeWorld w(small());  // DP = 2
  auto pol = make("oracle");
  pol->start(w);
  auto groups = w.all<EnableReplicaGroups>();
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0].min_replicas, 1);
  EXPECT_EQ(groups[0].quorum_change, Duration::zero());
  EXPECT_EQ(groups[0].timeout, Duration::zero());
  ClusterSpec one = small();
  one.machines = 4;
  one.dp = 1;
  FakeWorld w1(one);
  auto alone = make("oracle");
  alone->start(w1);
  EXPECT_TRUE(w1.all<EnableReplicaGroups>().empty());  // no replica to drop
}

// A persistent fault the quorum dropped its replica for: the machine goes, a ready spare
// takes its slot, the replica rejoins once the spare is in; the job never stops.
TEST(Oracle, ABrokenMachineOfADroppedReplicaIsReplacedAndItsReplicaRejoins) {
  FakeWorld w(small());
  auto pol = make("oracle");
  pol->start(w);
  pol->on_event(JobStarted{w.last_action_id(), 0}, w);
  OracleFault f{{5}, "cuda_error", true};
  f.replica = 1;
  pol->on_event(f, w);
  auto ev = w.all<EvictMachines>();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].machines, MachineSet{5});
  EXPECT_EQ(ev[0].mechanism, Mechanism::kReplicaDrop);
  auto acq = w.all<AcquireMachines>();
  ASSERT_EQ(acq.size(), 1u);
  EXPECT_EQ(acq[0].mode, AcquireMode::kOracle);
  EXPECT_EQ(acq[0].slots, std::vector<SlotId>{5});
  const ActionId refill = w.last_action_id();
  pol->on_event(ReplicaDropped{1, 5, 1, "CUDA error", 10, 1}, w);
  EXPECT_TRUE(w.all<RejoinReplica>().empty());  // not before its spare is in
  pol->on_event(MachinesReady{refill, {8}}, w);
  auto rejoin = w.all<RejoinReplica>();
  ASSERT_EQ(rejoin.size(), 1u);
  EXPECT_EQ(rejoin[0].replica, 1);
  EXPECT_TRUE(w.all<StopJob>().empty());
  EXPECT_EQ(w.all<StartJob>().size(), 1u);  // the first start only
}

TEST(Oracle, ATransientDropRejoinsOnItsOwnMachinesAtOnce) {
  FakeWorld w(small());
  auto pol = make("oracle");
  pol->start(w);
  pol->on_event(JobStarted{w.last_action_id(), 0}, w);
  OracleFault f{{2}, "host_resource", false};
  f.replica = 0;
  const std::size_t before = w.actions.size();
  pol->on_event(f, w);
  EXPECT_EQ(w.actions.size(), before);  // the drop, when it comes, says when to rejoin
  pol->on_event(ReplicaDropped{0, 2, 1, "killed", 10, 1}, w);
  auto rejoin = w.all<RejoinReplica>();
  ASSERT_EQ(rejoin.size(), 1u);
  EXPECT_EQ(rejoin[0].replica, 0);
  EXPECT_TRUE(w.all<EvictMachines>().empty());
  // Its rejoin fails on the same machine: that one goes.
  pol->on_event(ReplicaDropped{0, 2, 1, "killed", 11, 1}, w);
  auto ev = w.all<EvictMachines>();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].machines, MachineSet{2});
}

TEST(Oracle, RestartsInPlaceAfterAFaultAndAfreshWithNewCode) {
  FakeWorld w(small());
  auto pol = make("oracle");
  pol->start(w);
  EXPECT_FALSE(w.all<StartJob>().back().in_place);  // the first start
  pol->on_event(JobStarted{w.last_action_id(), 0}, w);
  pol->on_event(OracleFault{{}, "storage_service", false}, w);
  EXPECT_TRUE(w.all<StartJob>().back().in_place);
  pol->on_event(JobStarted{w.last_action_id(), 0}, w);
  pol->on_event(CodeUpdateRequested{"v2"}, w);
  EXPECT_FALSE(w.all<StartJob>().back().in_place);
}

TEST(Oracle, MovesASlowMachineAndATrulyWarnedOneToReadySparesWithoutAPause) {
  FakeWorld w(small());
  auto pol = make("oracle");
  pol->start(w);
  pol->on_event(JobStarted{w.last_action_id(), 0}, w);
  // A warning alone is a prediction: the oracle waits for the truth.
  pol->on_event(FailureWarning{3, "gpu", Duration::minutes(10), "ECC"}, w);
  EXPECT_TRUE(w.all<MigrateMachines>().empty());
  OracleFault warned{{3}, "cuda_error", true};
  warned.lead = Duration::minutes(10);
  pol->on_event(warned, w);
  OracleFault slow{{6}, "mfu_decline", false};
  slow.slowdown = true;
  pol->on_event(slow, w);
  auto mv = w.all<MigrateMachines>();
  ASSERT_EQ(mv.size(), 2u);
  EXPECT_EQ(mv[0].machines, MachineSet{3});
  EXPECT_EQ(mv[1].machines, MachineSet{6});
  EXPECT_EQ(mv[0].pause, Duration::zero());
  EXPECT_EQ(mv[1].pause, Duration::zero());
  EXPECT_TRUE(w.all<StopJob>().empty());
  // A stop abandons the second: it is moved once the job runs again.
  pol->on_event(ActionFailed{w.last_action_id(), "job stopped during the migration"}, w);
  pol->on_event(OracleFault{{}, "storage_service", false}, w);
  EXPECT_EQ(w.all<MigrateMachines>().size(), 2u);
  pol->on_event(JobStarted{w.last_action_id(), 0}, w);
  mv = w.all<MigrateMachines>();
  ASSERT_EQ(mv.size(), 3u);
  EXPECT_EQ(mv[2].machines, MachineSet{6});
}

TEST(FakeWorld, TimersFireInTimeThenSetOrder) {
  FakeWorld w(small());
  struct Recorder : Policy {
    PolicyInfo i{"rec", "1", "", {}};
    std::vector<std::uint64_t> tags;
    const PolicyInfo& info() const override { return i; }
    void on_event(const Event& e, World&) override { tags.push_back(std::get<TimerFired>(e).tag); }
  } rec;
  w.set_timer(Duration::seconds(5), 1);
  w.set_timer(Duration::seconds(2), 2);
  w.set_timer(Duration::seconds(5), 3);
  const TimerId gone = w.set_timer(Duration::seconds(1), 4);
  w.cancel_timer(gone);
  w.advance_to(Instant{Duration::seconds(10).ns}, rec);
  EXPECT_EQ(rec.tags, (std::vector<std::uint64_t>{2, 1, 3}));
}

}  // namespace
}  // namespace faultline
