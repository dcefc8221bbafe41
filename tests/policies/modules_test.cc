// The policy modules on their own: no World, no clock, synthetic outcomes only
// (policies/module.h). Each worked example is checked against what the published
// algorithm must return.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <map>
#include <set>

#include "policies/builtin.h"
#include "policies/checkpoint/plans.h"
#include "policies/failslow/ladders.h"
#include "policies/localization/localizers.h"
#include "policies/recovery/replace.h"
#include "policies/stacks/byterobust/ladder.h"
#include "policies/verdict/verdicts.h"

namespace faultline::policies {
namespace {

ClusterView view_of(int machines, int pp, int dp) {
  ClusterSpec c;
  c.machines = machines;
  c.gpus_per_machine = 2;
  c.tp = 2;
  c.pp = pp;
  c.dp = dp;
  return ClusterView(c);
}

Params byterobust_params(std::map<std::string, double> over = {}) {
  Params p;
  EXPECT_FALSE(Params::resolve(byterobust_info(modules()).params, over, &p));
  return p;
}

// Replays `test` against ground truth: a group fails when it holds a faulty machine.
ReplayResult replay_against(const LocalizationStep& step, const std::set<MachineId>& faulty) {
  const auto& test = std::get<LocalizationTest>(step);
  const auto& replay = std::get<RunReplay>(test);
  ReplayResult r;
  for (const auto& g : replay.groups)
    r.group_failed.push_back(
        std::any_of(g.begin(), g.end(), [&](MachineId m) { return faulty.count(m) > 0; }));
  return r;
}

// ByteRobust Fig. 6: 24 machines, m = 4, n = 6, SDC on machine 13: horizontal group 3
// ({12..15}) and vertical group 1 ({1, 7, 13, 19}) fail; they meet in 13. Two phases.
TEST(DualPhaseReplay, LocatesFigureSixInTwoPhases) {
  const ClusterView view = view_of(24, 4, 6);
  auto loc = make_dual_phase_replay(byterobust_params());
  LocalizationStep step = loc->begin("NaN persists", view);
  ASSERT_EQ(std::get<RunReplay>(std::get<LocalizationTest>(step)).groups.size(), 6u);
  EXPECT_EQ(std::get<RunReplay>(std::get<LocalizationTest>(step)).reason, "NaN persists");
  step = loc->answer(replay_against(step, {13}), view);
  const auto& phase2 = std::get<RunReplay>(std::get<LocalizationTest>(step));
  EXPECT_EQ(phase2.groups[1], (MachineSet{1, 7, 13, 19}));
  step = loc->answer(replay_against(step, {13}), view);
  const auto& located = std::get<Located>(step);
  EXPECT_EQ(located.evict, std::vector<SlotId>{13});
  EXPECT_FALSE(located.code_at_fault);
  EXPECT_EQ(located.credit, Mechanism::kReplay);
}

TEST(DualPhaseReplay, EveryGroupFailingIsTheCodeAndNoneFailingIsNothing) {
  const ClusterView view = view_of(24, 4, 6);
  auto loc = make_dual_phase_replay(byterobust_params());
  LocalizationStep step = loc->begin("x", view);
  ReplayResult all;
  all.group_failed.assign(6, true);
  EXPECT_TRUE(std::get<Located>(loc->answer(all, view)).code_at_fault);
  step = loc->begin("x", view);
  ReplayResult none;
  none.group_failed.assign(6, false);
  const Located nothing = std::get<Located>(loc->answer(none, view));
  EXPECT_TRUE(nothing.evict.empty());
  EXPECT_FALSE(nothing.code_at_fault);
}

TEST(DualPhaseReplay, TwoFaultyMachinesAreAmongTheIntersections) {
  const ClusterView view = view_of(24, 4, 6);
  auto loc = make_dual_phase_replay(byterobust_params());
  const std::set<MachineId> faulty{2, 17};
  LocalizationStep step = loc->begin("x", view);
  step = loc->answer(replay_against(step, faulty), view);
  step = loc->answer(replay_against(step, faulty), view);
  const auto& evict = std::get<Located>(step).evict;
  EXPECT_LE(evict.size(), 4u);
  for (MachineId m : faulty) EXPECT_NE(std::find(evict.begin(), evict.end(), m), evict.end());
}

// Adaptive group testing finds one faulty machine among 16 in log2(16) = 4 rounds, and
// any number of them.
TEST(Bisection, FindsEveryFaultyMachineInLogarithmicRounds) {
  const ClusterView view = view_of(16, 4, 4);
  for (const std::set<MachineId>& faulty : {std::set<MachineId>{5}, std::set<MachineId>{3, 12}}) {
    auto loc = make_bisection(byterobust_params());
    LocalizationStep step = loc->begin("x", view);
    int rounds = 0;
    while (std::holds_alternative<LocalizationTest>(step) && rounds < 20) {
      step = loc->answer(replay_against(step, faulty), view);
      ++rounds;
    }
    const auto& located = std::get<Located>(step);
    EXPECT_EQ(std::set<SlotId>(located.evict.begin(), located.evict.end()),
              std::set<SlotId>(faulty.begin(), faulty.end()));
    EXPECT_LE(rounds, 5);
  }
}

TEST(Bisection, NothingReproducedIsNothingFound) {
  const ClusterView view = view_of(16, 4, 4);
  auto loc = make_bisection(byterobust_params());
  LocalizationStep step = loc->begin("x", view);
  step = loc->answer(replay_against(step, {}), view);
  EXPECT_TRUE(std::get<Located>(step).evict.empty());
}

TEST(Stress, TestsEveryMachineWithItsDeadlineAndEvictsWhatFails) {
  const ClusterView view = view_of(16, 4, 4);
  auto loc = make_stress(byterobust_params({{"stress_deadline_s", 7200}}));
  LocalizationStep step = loc->begin("x", view);
  const auto& probe = std::get<RunProbe>(std::get<LocalizationTest>(step));
  EXPECT_EQ(probe.test, ProbeKind::kStress);
  EXPECT_EQ(probe.machines.size(), 16u);
  EXPECT_EQ(probe.deadline, Duration::seconds(7200));
  const Located located =
      std::get<Located>(loc->answer(ProbeResult{0, ProbeKind::kStress, {9, 7}, false}, view));
  EXPECT_EQ(located.evict, (std::vector<SlotId>{7, 9}));
  EXPECT_EQ(located.credit, Mechanism::kStopTimeEviction);
  EXPECT_TRUE(std::get<Located>(loc->answer(ProbeResult{0, ProbeKind::kStress, {}, false}, view))
                  .evict.empty());
}

// Times `step`'s grouped probe against ground truth: a group fails with a broken machine,
// and runs `slow` times longer with a slow one (every pair otherwise takes 1 s).
ProbeResult pairs_against(const LocalizationStep& step, const std::set<MachineId>& broken,
                          const std::map<MachineId, double>& slow,
                          std::vector<MachineSet>* groups = nullptr) {
  const auto& probe = std::get<RunProbe>(std::get<LocalizationTest>(step));
  EXPECT_EQ(probe.test, ProbeKind::kInterAllGather);
  if (groups) *groups = probe.groups;
  ProbeResult r{0, probe.test, {}, false};
  for (const auto& g : probe.groups) {
    bool failed = false;
    double t = 1;
    for (MachineId m : g) {
      failed |= broken.count(m) > 0;
      if (slow.count(m)) t = std::max(t, slow.at(m));
    }
    r.group_failed.push_back(failed);
    r.group_seconds.push_back(t);
    if (failed) r.failed.insert(r.failed.end(), g.begin(), g.end());
  }
  return r;
}

// DLRover's node check: round 1 pairs neighbours; the members of a pair that fails or lags
// are each paired with a machine that kept pace, and those that fail or lag again are the
// culprits: a broken machine, a slow one, and their partners cleared in two rounds.
TEST(Pairwise, PairsThenPairsEachSuspectWithAGoodMachineAndEvictsWhatFailsOrLagsTwice) {
  const ClusterView view = view_of(16, 4, 4);
  auto loc = make_pairwise(byterobust_params());
  EXPECT_TRUE(loc->places_slowdowns());
  std::vector<MachineSet> groups;
  LocalizationStep step = loc->begin("x", view);
  ProbeResult r1 = pairs_against(step, {10}, {{5, 1.3}}, &groups);
  ASSERT_EQ(groups.size(), 8u);
  for (std::size_t g = 0; g < groups.size(); ++g)
    EXPECT_EQ(groups[g],
              (MachineSet{static_cast<MachineId>(2 * g), static_cast<MachineId>(2 * g + 1)}));
  step = loc->answer(r1, view);
  ProbeResult r2 = pairs_against(step, {10}, {{5, 1.3}}, &groups);
  ASSERT_EQ(groups.size(), 4u) << "one pair per suspect: 4, 5, 10, 11";
  std::set<MachineId> suspects, partners;
  for (const auto& g : groups) {
    ASSERT_EQ(g.size(), 2u);
    suspects.insert(g[0]);
    partners.insert(g[1]);
  }
  EXPECT_EQ(suspects, (std::set<MachineId>{4, 5, 10, 11}));
  EXPECT_EQ(partners.size(), 4u);
  for (MachineId m : partners) EXPECT_EQ(suspects.count(m), 0u) << m;
  const Located found = std::get<Located>(loc->answer(r2, view));
  EXPECT_EQ(found.evict, (std::vector<SlotId>{5, 10}));
  EXPECT_FALSE(found.code_at_fault);
  EXPECT_EQ(found.credit, Mechanism::kStopTimeEviction);
  // Below the threshold (1.2 by default) a pair keeps pace.
  auto strict = make_pairwise(byterobust_params({{"pairwise_slow_ratio", 1.4}}));
  step = strict->begin("x", view);
  EXPECT_TRUE(
      std::get<Located>(strict->answer(pairs_against(step, {}, {{5, 1.3}}), view)).code_at_fault);
}

// No machine fails or lags twice (every pair keeps pace, or every suspect keeps pace with
// a second partner, or every pair fails): not the machines, the code. An odd machine out
// joins the last pair.
TEST(Pairwise, WhenNoMachineFailsTwiceTheCodeIsAtFaultAndAnOddMachineJoinsTheLastPair) {
  const ClusterView odd = view_of(9, 3, 3);
  auto loc = make_pairwise(byterobust_params());
  std::vector<MachineSet> groups;
  LocalizationStep step = loc->begin("x", odd);
  ProbeResult r = pairs_against(step, {}, {}, &groups);
  ASSERT_EQ(groups.size(), 4u);
  EXPECT_EQ(groups.back(), (MachineSet{6, 7, 8}));
  EXPECT_TRUE(std::get<Located>(loc->answer(r, odd)).code_at_fault);

  step = loc->begin("x", odd);
  std::set<MachineId> all;
  for (MachineId m = 0; m < 9; ++m) all.insert(m);
  EXPECT_TRUE(std::get<Located>(loc->answer(pairs_against(step, all, {}), odd)).code_at_fault);

  // A flaky pair that passes with second partners (a false failure in round 1).
  step = loc->begin("x", odd);
  ProbeResult flaky = pairs_against(step, {}, {});
  flaky.group_failed[1] = true;
  step = loc->answer(flaky, odd);
  const Located l = std::get<Located>(loc->answer(pairs_against(step, {}, {}), odd));
  EXPECT_TRUE(l.evict.empty());
  EXPECT_TRUE(l.code_at_fault);
  // The other localizers time nothing: a slowdown is not theirs to place.
  EXPECT_FALSE(make_dual_phase_replay(byterobust_params())->places_slowdowns());
  EXPECT_FALSE(make_bisection(byterobust_params())->places_slowdowns());
  EXPECT_FALSE(make_stress(byterobust_params())->places_slowdowns());
}

// Host scoring and lemon retirement answer on strikes; neither does the other's job.
TEST(Recovery, ScoredAvoidsFromItsStrikesAndNeverRetiresAndLemonTheOpposite) {
  Params p = byterobust_params();
  const auto scored = make_scored_recovery(p);
  const auto lemon = make_lemon_recovery(p);
  const auto standby = make_standby_recovery(p);
  for (int strikes = 1; strikes < 5; ++strikes) {
    const Recovery::Strike s = scored->struck(7), l = lemon->struck(7), b = standby->struck(7);
    EXPECT_EQ(s.avoid, strikes == 2) << strikes;  // from the 2nd strike on; asked for once
    EXPECT_FALSE(s.retire) << strikes;
    EXPECT_FALSE(l.avoid) << strikes;
    EXPECT_EQ(l.retire, strikes >= 2) << strikes;
    EXPECT_FALSE(b.avoid || b.retire) << strikes;
  }
  // Strikes are counted by machine: another machine's first strike avoids nothing.
  EXPECT_FALSE(scored->struck(8).avoid);
  EXPECT_EQ(scored->avoided(), MachineSet{7});
  EXPECT_TRUE(standby->avoided().empty());
  EXPECT_EQ(scored->replace({3}, "why", Mechanism::kRealtimeEviction).mode, AcquireMode::kStandby);
}

// The two stop verdicts share one ladder (roll back at limit - 1, stop at the limit; 0 =
// never) and differ only in what they count: identical recurrences, or runs without a
// newer checkpoint. Each ignores the other's count.
TEST(StopVerdict, EachCountsItsOwnRecurrencesOnTheSameLadder) {
  EXPECT_EQ(verdict_at(1, 3), Verdict::kCarryOn);
  EXPECT_EQ(verdict_at(2, 3), Verdict::kRollBack);
  EXPECT_EQ(verdict_at(3, 3), Verdict::kStop);
  EXPECT_EQ(verdict_at(7, 3), Verdict::kStop);
  EXPECT_EQ(verdict_at(0, 1), Verdict::kCarryOn);
  EXPECT_EQ(verdict_at(1, 1), Verdict::kStop) << "limit 1: no rollback first";
  for (int n = 0; n < 10; ++n) EXPECT_EQ(verdict_at(n, 0), Verdict::kCarryOn) << "0 = never";
  Params p = byterobust_params();
  const auto identical = make_identical_verdict(p);
  const auto no_progress = make_no_progress_verdict(p);
  EXPECT_EQ(identical->info().kind, ModuleKind::kVerdict);
  for (int n = 0; n < 8; ++n) {
    EXPECT_EQ(identical->judge({n, 0}), verdict_at(n, 3)) << n;
    EXPECT_EQ(identical->judge({0, n}), Verdict::kCarryOn) << n;
    EXPECT_EQ(no_progress->judge({0, n}), verdict_at(n, 4)) << n;
    EXPECT_EQ(no_progress->judge({n, 0}), Verdict::kCarryOn) << n;
  }
  EXPECT_STREQ(verdict_name(Verdict::kStop), "stop");
}

// The built-in localizers are those of the registration list, in its order (a localizer
// added to the tree is its file, its test and its line there: nothing here names it).
TEST(ModuleRegistry, NamesAreUniquePerKindAndFeedTheStacksChoices) {
  ModuleRegistry m;
  register_builtin_modules(m);
#define FAULTLINE_NAME_OF(id) id##_info().name,
  const std::vector<std::string> listed = {FAULTLINE_BUILTIN_LOCALIZERS(FAULTLINE_NAME_OF)};
#undef FAULTLINE_NAME_OF
  EXPECT_EQ(m.names(ModuleKind::kLocalization), listed);
  EXPECT_EQ(listed.front(), "replay");  // the stacks' default
  EXPECT_THROW(m.add(bisection_info(), make_bisection), std::invalid_argument);
  EXPECT_THROW(m.make_localizer("tor-bisection", byterobust_params()), std::invalid_argument);
  EXPECT_EQ(m.make_localizer("stress", byterobust_params())->info().name, "stress");
  for (auto [param, kind] : {std::pair{"localization", ModuleKind::kLocalization},
                             {"checkpoint", ModuleKind::kCheckpoint},
                             {"recovery", ModuleKind::kRecovery},
                             {"failslow", ModuleKind::kFailSlow},
                             {"verdict", ModuleKind::kVerdict}})
    EXPECT_EQ(byterobust_info(modules()).find_param(param)->choices, m.names(kind)) << param;
}

// The choice help lists exactly the registered modules of each kind: it is generated from
// the registry, as `faultline policies` is, so that no list written by hand (the module
// guide's table names none) has to grow when a module is added.
TEST(ModuleRegistry, ChoiceHelpNamesEveryRegisteredModule) {
  ModuleRegistry m;
  register_builtin_modules(m);
  for (ModuleKind kind : kModuleKinds) {
    const std::string k = module_kind_name(kind);
    EXPECT_EQ(byterobust_info(modules()).find_param(k)->choices, m.names(kind)) << k;
    const std::string help = byterobust_info(modules()).find_param(k)->help;
    for (const ModuleInfo* info : m.of(kind))
      EXPECT_NE(help.find(info->name + " (" + info->summary + ")"), std::string::npos)
          << k << ": " << help;
  }
}

// Every "read only with" condition of the stack's parameters names one of its choice
// parameters and one of that choice's modules (a typo would silently mark it always read),
// and the conditions hold exactly for the modules that read the parameter.
TEST(ModuleRegistry, ParametersSayWhichModuleChoicesReadThem) {
  const PolicyInfo& info = byterobust_info(modules());
  for (const ParamSpec& p : info.params)
    for (const std::string& cond : p.read_when) {
      const auto eq = cond.find('=');
      ASSERT_NE(eq, std::string::npos) << p.name << ": " << cond;
      const ParamSpec* choice = info.find_param(cond.substr(0, eq));
      ASSERT_NE(choice, nullptr) << p.name << ": " << cond;
      EXPECT_GE(choice->choice_index(cond.substr(eq + 1)), 0) << p.name << ": " << cond;
    }
  auto read_with = [&](const std::string& param, std::map<std::string, double> choices) {
    Params values;
    EXPECT_FALSE(Params::resolve(info.params, choices, &values).has_value());
    return param_is_read(info, *info.find_param(param), values);
  };
  const double peer = info.find_param("checkpoint")->choice_index("peer");
  const double remote = info.find_param("checkpoint")->choice_index("remote");
  EXPECT_FALSE(read_with("checkpoint_interval_s", {{"checkpoint", peer}}));
  EXPECT_TRUE(read_with("checkpoint_interval_s", {{"checkpoint", remote}}));
  EXPECT_TRUE(read_with("checkpoint_blocking_s", {{"checkpoint", peer}}));
  EXPECT_FALSE(read_with("remote_checkpoint_write_s", {{"checkpoint", peer}}));
  EXPECT_FALSE(read_with("standby_pool",
                         {{"recovery", info.find_param("recovery")->choice_index("requeue")}}));
  EXPECT_TRUE(read_with("probe_deadline_s", {}));  // the stack's own: always
}

// ByteRobust §6: the pool is the P99 of Binomial(N, p); published sizes 2, 2, 3, 4 for
// 128..1,024 machines at p = 1.2e-3. Only the standby module sizes a pool.
TEST(Recovery, StandbySizesThePoolAndEachModeRefillsItsWay) {
  auto standby = make_standby_recovery(byterobust_params());
  for (auto [machines, pool] : {std::pair{128, 2}, {256, 2}, {512, 3}, {1024, 4}}) {
    ClusterSpec c;
    c.machines = machines;
    c.gpus_per_machine = 1;
    c.tp = 1;
    c.pp = 1;
    c.dp = machines;
    EXPECT_EQ(standby->start(ClusterView(c))->size, pool) << machines;
  }
  EXPECT_EQ(make_standby_recovery(byterobust_params({{"standby_pool", 7}}))
                ->start(view_of(16, 4, 4))
                ->size,
            7);
  EXPECT_FALSE(make_reschedule_recovery(byterobust_params())->start(view_of(16, 4, 4)));
  const std::vector<SlotId> slots{3, 4};
  const AcquireMachines a = standby->replace(slots, "why", Mechanism::kOverEviction);
  EXPECT_EQ(a.mode, AcquireMode::kStandby);
  EXPECT_EQ(a.slots, slots);
  EXPECT_EQ(a.mechanism, Mechanism::kOverEviction);
  EXPECT_EQ(
      make_reschedule_recovery(byterobust_params())->replace(slots, "why", Mechanism::kReplay).mode,
      AcquireMode::kReschedule);
  const AcquireMachines q =
      make_requeue_recovery(byterobust_params())->replace(slots, "why", Mechanism::kReplay);
  EXPECT_EQ(q.mode, AcquireMode::kRequeue);
  EXPECT_TRUE(q.slots.empty());  // the whole job
}

// The adaptive planner (checkpoint=daly): Daly's optimum for the prior before any
// interruption, then for the observed mean time between interruptions; clamped; remote.
TEST(CheckpointPlanner, DalyReplansFromObservedInterruptions) {
  const ClusterView view = view_of(16, 4, 4);
  auto daly = make_daly_checkpoint(byterobust_params());
  const SetCheckpointPlan first = daly->plan(view);
  EXPECT_EQ(first.tier, CheckpointTier::kRemote);
  EXPECT_EQ(first.blocking, Duration::seconds(6.77));
  // Prior 4 h: sqrt(2 * 6.77 * 14400) = 441.6 s, times (1 + sqrt(x)/3 + x/9) with
  // x = 6.77 / 28800, less 6.77 s: 437.1 s.
  EXPECT_NEAR(first.interval.to_seconds(), 437.1, 0.1);
  EXPECT_NEAR(daly_optimum_s(6.77, 14400), 437.1, 0.1);
  // Ten interruptions in 10 h of running: MTBI (4 h + 10 h) / 11 = 4582 s, interval 244.6 s.
  const auto after = daly->replan(10, Duration::hours(10), view);
  ASSERT_TRUE(after);
  EXPECT_NEAR(observed_mtbi_s(10, 36000, 14400, 1), 50400.0 / 11, 1e-9);
  EXPECT_NEAR(after->interval.to_seconds(), daly_optimum_s(6.77, 50400.0 / 11), 1e-6);
  EXPECT_NEAR(after->interval.to_seconds(), 244.6, 0.1);
  // More interruptions in the same time: a shorter interval; none in a long run: longer.
  EXPECT_LT(daly->replan(100, Duration::hours(10), view)->interval, after->interval);
  EXPECT_GT(daly->replan(0, Duration::hours(1000), view)->interval, first.interval);
  // Clamped to [daly_min_interval_s, daly_max_interval_s].
  auto tight = make_daly_checkpoint(
      byterobust_params({{"daly_min_interval_s", 300}, {"daly_max_interval_s", 400}}));
  EXPECT_EQ(tight->plan(view).interval, Duration::seconds(400));
  EXPECT_EQ(tight->replan(10, Duration::hours(10), view)->interval, Duration::seconds(300));
  // A save that costs more than two MTBIs: Daly's answer is the MTBI itself.
  EXPECT_DOUBLE_EQ(daly_optimum_s(100, 40), 40);
  // Fixed plans answer nothing at a restart.
  EXPECT_FALSE(make_remote_checkpoint(byterobust_params())->replan(10, Duration::hours(10), view));
}

// Table 8's blocking times by tier; only the peer plan saves every step.
TEST(CheckpointPlanner, PlansFollowTheirTiersAndTable8) {
  const ClusterView view = view_of(16, 4, 4);
  const SetCheckpointPlan peer = make_peer_checkpoint(byterobust_params())->plan(view);
  EXPECT_EQ(peer.tier, CheckpointTier::kMemoryWithPeer);
  EXPECT_EQ(peer.interval, Duration::zero());
  EXPECT_EQ(peer.remote_interval, Duration::hours(1));
  const SetCheckpointPlan memory = make_memory_checkpoint(byterobust_params())->plan(view);
  EXPECT_EQ(memory.tier, CheckpointTier::kMemory);
  EXPECT_EQ(memory.blocking, Duration::seconds(1.84));
  EXPECT_EQ(memory.interval, Duration::seconds(1800));
  const SetCheckpointPlan remote =
      make_remote_checkpoint(byterobust_params({{"checkpoint_interval_s", 600}}))->plan(view);
  EXPECT_EQ(remote.tier, CheckpointTier::kRemote);
  EXPECT_EQ(remote.blocking, Duration::seconds(6.77));
  EXPECT_EQ(remote.interval, Duration::seconds(600));
}

TEST(ModuleRegistry, AFactoryOfTheWrongKindIsRefused) {
  ModuleRegistry m;
  EXPECT_THROW(m.add(bisection_info(), ModuleRegistry::RecoveryFactory(make_requeue_recovery)),
               std::invalid_argument);
  m.add(requeue_recovery_info(), make_requeue_recovery);
  EXPECT_EQ(m.names(ModuleKind::kRecovery), std::vector<std::string>{"requeue"});
  EXPECT_TRUE(m.names(ModuleKind::kLocalization).empty());
}

// ---------------------------------------------------------------- fail-slow handling

// The best lockstep step time by brute force: every way of giving parts*units whole
// units to `parts` workers, worker 0 running f times slower, in healthy unit times.
double brute_force_step(int parts, int units, double f) {
  const int total = parts * units;
  double best = 1e300;
  std::vector<int> n(parts, 0);
  // Enumerate compositions of `total` into `parts` parts (small cases only).
  std::function<void(int, int)> go = [&](int i, int left) {
    if (i == parts - 1) {
      n[i] = left;
      double t = n[0] * f;
      for (int k = 1; k < parts; ++k) t = std::max(t, static_cast<double>(n[k]));
      best = std::min(best, t);
      return;
    }
    for (int x = 0; x <= left; ++x) {
      n[i] = x;
      go(i + 1, left - x);
    }
  };
  go(0, total);
  return best;
}

TEST(StragglerRate, RebalancingMatchesEveryWholeUnitAssignment) {
  for (int parts : {1, 2, 3, 4})
    for (int units : {1, 2, 3, 5})
      for (double f : {1.0, 1.1, 1.5, 2.0, 3.7})
        EXPECT_DOUBLE_EQ(rebalanced_rate(parts, units, f),
                         std::min(1.0, units / brute_force_step(parts, units, f)))
            << parts << " parts, " << units << " units, f " << f;
  // Nothing to move to: the straggler's pace.
  EXPECT_DOUBLE_EQ(rebalanced_rate(1, 16, 2), 0.5);
  // Whole units: once a unit moves, some healthy worker does units + 1, so a 1.5x
  // straggler among 150 replicas of 16 micro-batches still costs 16/17, not 1/300.
  EXPECT_DOUBLE_EQ(rebalanced_rate(150, 16, 1.5), 16.0 / 17);
}

// The fail-slow tests' job: 4 machines of 8 GPUs, TP 8, `pp` stages, `dp` replicas, 8
// micro-batches per replica and 6 layers per stage.
ClusterSpec failslow_spec(int pp, int dp) {
  ClusterSpec c;
  c.machines = 4;
  c.gpus_per_machine = 8;
  c.tp = 8;
  c.pp = pp;
  c.dp = dp;
  c.micro_batches = 8;
  c.layers_per_stage = 6;
  return c;
}

TEST(StragglerRate, LevelsComposePipelineThenReplicas) {
  ClusterSpec c;
  c.pp = 2;
  c.dp = 2;
  c.micro_batches = 8;
  c.layers_per_stage = 6;
  EXPECT_DOUBLE_EQ(straggler_rate(c, 2, 0), 0.5);
  EXPECT_DOUBLE_EQ(straggler_rate(c, 2, 1), 8 / brute_force_step(2, 8, 2));
  const double pipeline = 6 / brute_force_step(2, 6, 2);  // its stage's layers spread first
  EXPECT_DOUBLE_EQ(straggler_rate(c, 2, 2), 8 / brute_force_step(2, 8, 1 / pipeline));
  EXPECT_LT(straggler_rate(c, 2, 1), straggler_rate(c, 2, 2));
  EXPECT_DOUBLE_EQ(straggler_rate(c, 1, 2), 1);  // not slow at all
}

// The ladder on a scripted straggler: each move comes exactly at the ski-rental
// break-even t* = T_i + C_j / (l_i - l_j), written here from the losses by brute force.
TEST(SkiRentalFailSlow, MovesUpTheLadderAtEachClosedFormBreakEven) {
  const ClusterView view(failslow_spec(2, 2));
  const double f = 2, C1 = 30, C2 = 180, C3 = 1200;
  auto m = make_ski_rental_failslow(byterobust_params({{"failslow", 1},
                                                       {"failslow_rebalance_cost_s", C1},
                                                       {"failslow_reconfigure_cost_s", C2},
                                                       {"failslow_restart_cost_s", C3}}));
  const double l0 = 1 - 1 / f;
  const double l1 = 1 - 8 / brute_force_step(2, 8, f);
  const double l2 = 1 - 8 / brute_force_step(2, 8, brute_force_step(2, 6, f) / 6);
  ASSERT_GT(l0, l1);
  ASSERT_GT(l1, l2);
  ASSERT_GT(l2, 0);
  auto at = [](double s) { return Instant::at(Duration::seconds(s)); };
  auto near = [&](Instant got, double want_s) { EXPECT_NEAR(got.to_seconds(), want_s, 1e-6); };
  // Slow steps reported at 1,000 s; located at 1,010 s, before the first break-even.
  const double t1 = 1000 + C1 / (l0 - l1);
  ASSERT_GT(t1, 1010);
  EXPECT_EQ(m->located(3, 3, f, at(1000), at(1010), view), SlowdownLevel::kTolerate);
  near(m->next_check(), t1);
  EXPECT_EQ(m->check(at(t1 - 1)), std::nullopt);  // early: stays
  EXPECT_FALSE(m->recovered(f));
  EXPECT_TRUE(m->recovered(1.0));
  EXPECT_EQ(m->check(at(t1)), SlowdownLevel::kRebalance);
  // Level 1's clock starts once its pause is over.
  const double t2 = t1 + C1 + C2 / (l1 - l2);
  near(m->next_check(), t2);
  EXPECT_FALSE(m->recovered(1 / (1 - l1)));
  EXPECT_EQ(m->check(at(t2)), SlowdownLevel::kReconfigure);
  const double t3 = t2 + C2 + C3 / l2;
  near(m->next_check(), t3);
  EXPECT_EQ(m->check(at(t3)), SlowdownLevel::kEvict);
  EXPECT_EQ(m->next_check(), Instant::max());

  // A restart undoes the workaround; the same machine located again resumes the ladder at
  // the level it had reached, the time spent there counted: 1,000 s at level 1 before the
  // stop, so the reconfiguration comes (t2 - t1 - C1) - 1000 s after the pause again.
  auto r = make_ski_rental_failslow(byterobust_params({{"failslow", 1}}));
  ASSERT_EQ(r->located(3, 3, f, at(1000), at(t1), view), SlowdownLevel::kRebalance);
  r->stopped(at(t1 + C1 + 1000));
  EXPECT_EQ(r->located(3, 3, f, at(50000), at(50100), view), SlowdownLevel::kRebalance);
  near(r->next_check(), 50100 + C1 + (t2 - t1 - C1) - 1000);
  // Another machine in the slot is another straggler: from the start.
  r->stopped(at(60000));
  EXPECT_EQ(r->located(3, 17, f, at(70000), at(70010), view), SlowdownLevel::kTolerate);
  near(r->next_check(), t1 - 1000 + 70000);
  EXPECT_TRUE(r->recovered(1.0));
  EXPECT_FALSE(r->recovered(1.0));  // forgotten

  // Located late, past the first break-even: it rebalances at once.
  auto late = make_ski_rental_failslow(byterobust_params({{"failslow", 1}}));
  EXPECT_EQ(late->located(3, 3, f, at(0), at(3600), view), SlowdownLevel::kRebalance);
}

// A backend that refuses the workarounds (live mode) leaves tolerate and evict: the
// ladder falls back to the level it was at and plans the eviction from there, and the
// next straggler never gets the refused levels.
TEST(SkiRentalFailSlow, ARefusedLevelIsLeftOutFromThenOn) {
  const ClusterView view(failslow_spec(2, 2));
  auto at = [](double s) { return Instant::at(Duration::seconds(s)); };
  auto m = make_ski_rental_failslow(byterobust_params({{"failslow", 1}}));
  const double l0 = 0.5;
  ASSERT_EQ(m->located(1, 1, 2, at(0), at(1000), view),
            SlowdownLevel::kRebalance);  // past its break-even
  m->refused(SlowdownLevel::kRebalance);
  // Reconfiguring also helps here, so it is next, at its break-even from the detection.
  const double l2 = 1 - 8 / brute_force_step(2, 8, brute_force_step(2, 6, 2) / 6);
  EXPECT_NEAR(m->next_check().to_seconds(), 180 / (l0 - l2), 1e-6);
  EXPECT_EQ(m->check(m->next_check()), SlowdownLevel::kReconfigure);
  m->refused(SlowdownLevel::kReconfigure);
  EXPECT_NEAR(m->next_check().to_seconds(), 1200 / l0, 1e-6);
  EXPECT_EQ(m->check(m->next_check()), SlowdownLevel::kEvict);
  EXPECT_EQ(m->located(2, 2, 2, at(10000), at(10010), view), SlowdownLevel::kTolerate);
  EXPECT_NEAR(m->next_check().to_seconds(), 10000 + 1200 / l0, 1e-6);
}

TEST(SkiRentalFailSlow, SkipsALevelThatWouldNotHelp) {
  // One data-parallel replica: rebalancing has nowhere to move micro-batches to, so the
  // ladder goes from tolerating straight to reconfiguring the pipeline.
  const ClusterView view(failslow_spec(4, 1));
  auto m = make_ski_rental_failslow(byterobust_params({{"failslow", 1}}));
  const double l0 = 0.5, l2 = 1 - 6 / brute_force_step(4, 6, 2);
  EXPECT_EQ(
      m->located(0, 0, 2, Instant::at(Duration::zero()), Instant::at(Duration::seconds(1)), view),
      SlowdownLevel::kTolerate);
  EXPECT_NEAR(m->next_check().to_seconds(), 180 / (l0 - l2), 1e-6);
  EXPECT_EQ(m->check(m->next_check()), SlowdownLevel::kReconfigure);
  // A straggler too slight to move a whole unit for: only eviction helps.
  auto slight = make_ski_rental_failslow(byterobust_params({{"failslow", 1}}));
  EXPECT_EQ(slight->located(0, 0, 1.05, Instant::at(Duration::zero()),
                            Instant::at(Duration::seconds(1)), view),
            SlowdownLevel::kTolerate);
  EXPECT_NEAR(slight->next_check().to_seconds(), 1200 / (1 - 1 / 1.05), 1e-6);
}

TEST(EvictFailSlow, EvictsAtOnceAsByteRobustDoes) {
  auto m = make_evict_failslow(byterobust_params());
  EXPECT_EQ(m->located(0, 0, 3, Instant{}, Instant{}, view_of(8, 2, 4)), SlowdownLevel::kEvict);
  EXPECT_EQ(m->next_check(), Instant::max());
  EXPECT_EQ(byterobust_info(modules()).find_param("failslow")->choices,
            (std::vector<std::string>{"evict", "ski_rental"}));
}

}  // namespace
}  // namespace faultline::policies
