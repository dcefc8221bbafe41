// The byterobust stack's incident ladder against FakeWorld: what makes an incident new or the
// same again, fruitless rounds, and when the run is ended.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "policies/stacks/byterobust/ladder.h"
#include "tests/policies/byterobust_fixtures.h"

namespace faultline {
namespace {

using namespace byterobust_test;

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
