// The parts of the byterobust stack's ladder that are values (policies/stacks/byterobust/,
// policies/detection/alert_filter.h, policies/stacks/byterobust/stop_time.h), each driven alone
// with synthetic inputs and checked against the rule its header states. The stack's own
// tests (byterobust_stack_test.cc and the other byterobust_*_test.cc files) check the ladder
// that composes them.
#include <gtest/gtest.h>

#include "policies/detection/alert_filter.h"
#include "policies/stacks/byterobust/held_update.h"
#include "policies/stacks/byterobust/incidents.h"
#include "policies/stacks/byterobust/stop_time.h"
#include "policies/verdict/verdicts.h"

namespace faultline::policies {
namespace {

Instant at(double s) { return Instant{} + Duration::seconds(s); }

// The same crash (signature, machine) within the window climbs the ladder; a crash
// elsewhere, or after the window, is a new incident.
TEST(Incidents, TheSameCrashSoonClimbsAndACrashElsewhereStartsOver) {
  Incidents inc(Duration::seconds(1800));
  inc.started(at(0), 0);
  EXPECT_FALSE(inc.crash(at(100), 3, 3, "CUDA error", 50).again);
  inc.started(at(200), 50);
  CrashRecurrence r = inc.crash(at(300), 3, 3, "CUDA error", 60);
  EXPECT_TRUE(r.again);
  EXPECT_EQ(r.level, 1);
  EXPECT_EQ(r.named, 2);  // the log named machine 3 twice in a row
  inc.started(at(400), 60);
  EXPECT_EQ(inc.crash(at(500), 3, 3, "CUDA error", 70).level, 2);
  inc.started(at(600), 70);
  r = inc.crash(at(700), 9, 9, "CUDA error", 80);  // another machine and rank
  EXPECT_FALSE(r.again);
  EXPECT_EQ(r.level, 0);
  inc.started(at(800), 80);
  EXPECT_FALSE(inc.crash(at(800 + 1801), 9, 9, "CUDA error", 90).again);  // past the window
}

// The same crash after the same step at the same rank, on one machine after another,
// follows the rank: each change of machine is a turn, however long the job ran between.
TEST(Incidents, TheSameStepOnAnotherMachineCountsTurns) {
  Incidents inc(Duration::seconds(60));
  inc.started(at(0), 0);
  inc.crash(at(10), 4, 2, "Xid 79", 500);
  inc.started(at(10'000), 400);
  CrashRecurrence r = inc.crash(at(20'000), 5, 2, "Xid 79", 500);  // the replacement, slot 2
  EXPECT_TRUE(r.again);
  EXPECT_TRUE(r.struck_another);
  EXPECT_EQ(r.streak, 2);
  EXPECT_EQ(r.turns, 2);
  inc.started(at(30'000), 400);
  r = inc.crash(at(40'000), 5, 2, "Xid 79", 500);  // the same machine again: no new turn
  EXPECT_FALSE(r.struck_another);
  EXPECT_EQ(r.streak, 3);
  EXPECT_EQ(r.turns, 2);
}

// A stall recurs only when the restart that answered the last one got no step done.
TEST(Incidents, AStallRecursOnlyBeforeTheRestartGotAStepDone) {
  Incidents inc(Duration::seconds(1800));
  inc.started(at(0), 100);
  EXPECT_EQ(inc.stall(at(600), 150), 0);
  inc.started(at(700), 150);
  EXPECT_EQ(inc.stall(at(1300), 150), 1);  // no step past the restore
  inc.started(at(1400), 150);
  EXPECT_EQ(inc.stall(at(2000), 151), 0);  // progress: a new incident
}

// The same NaN at the same step, reached again from a checkpoint before it, is identical.
TEST(Incidents, TheSameNanStepAfterARestoreIsIdentical) {
  Incidents inc(Duration::seconds(1800));
  inc.started(at(0), 0);
  EXPECT_EQ(inc.anomaly(true, 42), 1);
  inc.started(at(100), 40);
  EXPECT_EQ(inc.anomaly(true, 42), 2);
  inc.started(at(200), 42);  // restored at the NaN's step itself: not a rerun of it
  EXPECT_EQ(inc.anomaly(true, 42), 1);
  EXPECT_EQ(inc.anomaly(false, 42), 1);  // a loss jump is never identical
}

// Runs that get no further than any before them: the verdict module rules on the count,
// and the ruling carries the count and the furthest step in its words.
TEST(Incidents, RunsWithoutProgressAreRuledOnWithTheirCount) {
  Params p;
  ASSERT_FALSE(Params::resolve(no_progress_verdict_info().params, {{"no_progress_limit", 3}}, &p));
  const auto verdict = make_no_progress_verdict(p);
  Incidents inc(Duration::seconds(1800));
  inc.started(at(0), 0);
  EXPECT_FALSE(inc.judge_progress(*verdict, 10, "crash"));  // progress: step 10
  inc.started(at(100), 5);
  EXPECT_FALSE(inc.judge_progress(*verdict, 8, "crash"));  // 1 run without progress
  inc.started(at(200), 5);
  auto r = inc.judge_progress(*verdict, 9, "stall");  // 2 = limit - 1: roll back
  ASSERT_TRUE(r);
  EXPECT_EQ(r->verdict, Verdict::kRollBack);
  EXPECT_EQ(r->reasons.roll_back,
            "2 runs in a row that got no further than step 10 (last: stall): roll back recent "
            "code");
  inc.started(at(300), 5);
  r = inc.judge_progress(*verdict, -1, "crash");  // unknown step: the run's furthest (5)
  ASSERT_TRUE(r);
  EXPECT_EQ(r->verdict, Verdict::kStop);
  inc.started(at(400), 5);
  EXPECT_FALSE(inc.judge_progress(*verdict, 11, "crash"));  // further: the count restarts
}

// Issue 50: two failures of one run (a crash during a stall's stack capture, a crash
// queued while a NaN is diagnosed) are one run without progress, not two. Counted twice,
// the no-progress verdict ended runs on the dense job that a hung machine stopped: the
// stall, the crash under its capture and one restart made "4 runs in a row".
TEST(Incidents, TwoFailuresOfOneRunCountAsOneRunWithoutProgress) {
  Params p;
  ASSERT_FALSE(Params::resolve(no_progress_verdict_info().params, {{"no_progress_limit", 3}}, &p));
  const auto verdict = make_no_progress_verdict(p);
  Incidents inc(Duration::seconds(1800));
  inc.started(at(0), 0);
  EXPECT_FALSE(inc.judge_progress(*verdict, 10, "progress stalled"));  // progress: step 10
  EXPECT_FALSE(inc.judge_progress(*verdict, 10, "crash"));  // the same run: still progress
  inc.started(at(100), 10);
  EXPECT_FALSE(inc.judge_progress(*verdict, 10, "progress stalled"));  // 1 run without progress
  EXPECT_FALSE(inc.judge_progress(*verdict, 10, "crash")) << "the same run counted twice";
  inc.started(at(200), 10);
  auto r = inc.judge_progress(*verdict, 10, "progress stalled");  // 2 = limit - 1: roll back
  ASSERT_TRUE(r);
  EXPECT_EQ(r->verdict, Verdict::kRollBack);
  EXPECT_EQ(r->reasons.roll_back,
            "2 runs in a row that got no further than step 10 (last: progress stalled): roll "
            "back recent code");
}

// Network alerts evict once `count` of them fall within the window on one machine; GPU
// and host alerts at once; other kinds never.
TEST(AlertFilter, NetworkAlertsEvictOnlyWhenTheyRepeatWithinTheWindow) {
  AlertFilter f(2, Duration::seconds(300));
  EXPECT_TRUE(f.evicts(InspectionAlert{1, "gpu", "Xid 79"}, at(0)));
  EXPECT_TRUE(f.evicts(InspectionAlert{1, "host", "kernel oops"}, at(0)));
  EXPECT_FALSE(f.evicts(InspectionAlert{1, "disk", "slow"}, at(0)));
  EXPECT_FALSE(f.evicts(InspectionAlert{2, "nic", "link down"}, at(0)));
  EXPECT_FALSE(f.evicts(InspectionAlert{3, "nic", "link down"}, at(10)));   // another machine
  EXPECT_FALSE(f.evicts(InspectionAlert{2, "switch", "flap"}, at(301)));    // the first expired
  EXPECT_TRUE(f.evicts(InspectionAlert{2, "nic", "link down"}, at(400)));   // 301 and 400
  EXPECT_FALSE(f.evicts(InspectionAlert{2, "nic", "link down"}, at(401)));  // counted afresh
}

// A held update: by choice until the window ends or a restart carries it; for a recovery
// until its restart, or at once when it came after that restart was asked for.
TEST(HeldUpdate, RidesTheNextRestartOrIsForcedWhenTheWindowEnds) {
  const Instant end = at(24 * 3600);
  HeldUpdate u;
  EXPECT_EQ(u.requested("v2", false, true, false, end), HeldUpdate::Answer::kHoldForWindow);
  EXPECT_FALSE(u.window_ended(false).has_value());  // a recovery: it rides its restart
  EXPECT_EQ(u.restart(), "v2");
  EXPECT_FALSE(u.started().has_value());  // applied by that start
  EXPECT_EQ(u.restart(), "");             // and not again

  EXPECT_EQ(u.requested("v3", false, true, false, end), HeldUpdate::Answer::kHoldForWindow);
  EXPECT_EQ(u.window_ended(true).value_or("-"), "v3");  // the job runs: forced now
  u.applying("v3");
  EXPECT_FALSE(u.started().has_value());

  EXPECT_EQ(u.requested("v4", true, true, false, end), HeldUpdate::Answer::kApplyNow);  // urgent
  EXPECT_EQ(u.requested("v5", false, false, true, end), HeldUpdate::Answer::kHoldForRecovery);
  EXPECT_EQ(u.started().value_or("-"), "v5");  // the start under way was asked for before it came
  u.restart();
  u.roll_back();  // a rollback does not carry it (it may be the bug)
  EXPECT_EQ(u.started().value_or("-"), "v5");
}

// The window's end is the deferral timer's time: the oldest held update's, kept by a newer
// one that carries it, and gone with the update (a restart carried it, it was applied).
TEST(HeldUpdate, WindowEndIsTheOldestHeldUpdatesAndGoesWithIt) {
  HeldUpdate u;
  EXPECT_EQ(u.window_end(), Instant::max());
  u.requested("v2", false, true, false, at(24 * 3600));
  u.requested("v3", false, true, false, at(34 * 3600));  // carries v2 and its window
  EXPECT_EQ(u.window_end(), at(24 * 3600));
  EXPECT_EQ(u.restart(), "v3");
  u.started();  // v3 rode this start
  EXPECT_EQ(u.window_end(), Instant::max());
  u.requested("v4", false, true, false, at(44 * 3600));  // a window of its own
  EXPECT_EQ(u.window_end(), at(44 * 3600));
  u.applying("v4");
  EXPECT_EQ(u.window_end(), Instant::max());
  u.requested("v5", false, true, false, at(50 * 3600));
  EXPECT_FALSE(u.window_ended(false).has_value());  // ended during a recovery: rides it
  EXPECT_EQ(u.window_end(), Instant::max());
}

// Stop-time tests run the plan in order on the same suspects; a NaN's alignment test
// says so once when it ends.
TEST(StopTimeTests, RunThePlanInOrderAndTheNanTestOnce) {
  StopTimeTests t(Duration::seconds(600));
  t.begin(CrashKind::kMachine, {4, 5});
  std::vector<ProbeKind> ran;
  while (auto p = t.next("why")) {
    EXPECT_EQ(p->machines, (MachineSet{4, 5}));
    EXPECT_EQ(p->deadline, Duration::seconds(600));
    ran.push_back(p->test);
  }
  EXPECT_EQ(ran, test_plan(CrashKind::kMachine));
  const RunProbe nan = t.begin_nan({1, 2, 3});
  EXPECT_EQ(nan.test, ProbeKind::kBitwise);
  EXPECT_FALSE(t.next("why"));  // nothing follows it in the plan
  EXPECT_TRUE(t.end_nan());
  EXPECT_FALSE(t.end_nan());
}

// A suspect that leaves the job during the tests (an alert evicted it) is not tested
// again; with no suspect left, no test is.
TEST(StopTimeTests, ASuspectThatLeftTheJobIsNotTestedAgain) {
  StopTimeTests t(Duration::seconds(600));
  t.begin(CrashKind::kMachine, {4, 5});
  ASSERT_EQ(t.next("why")->machines, (MachineSet{4, 5}));
  t.forget({5, 9});
  ASSERT_EQ(t.next("why")->machines, MachineSet{4});
  t.forget({4});
  EXPECT_FALSE(t.next("why"));
}

}  // namespace
}  // namespace faultline::policies
