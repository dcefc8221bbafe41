// The policy modules on their own: no World, no clock, synthetic outcomes only
// (policies/module.h). Each worked example is checked against what the published
// algorithm must return.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "policies/builtin.h"
#include "policies/controller.h"
#include "policies/checkpoint/plans.h"
#include "policies/localization/localizers.h"
#include "policies/recovery/replace.h"

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
  EXPECT_FALSE(Params::resolve(byterobust_info().params, over, &p));
  return p;
}

// Replays `test` against ground truth: a group fails when it holds a faulty machine.
ReplayResult replay_against(const LocalizationStep& step, const std::set<MachineId>& faulty) {
  const auto& test = std::get<LocalizationTest>(step);
  const auto& replay = std::get<RunReplay>(test);
  ReplayResult r;
  for (const auto& g : replay.groups)
    r.group_failed.push_back(std::any_of(g.begin(), g.end(), [&](MachineId m) { return faulty.count(m) > 0; }));
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
  const Located located = std::get<Located>(loc->answer(ProbeResult{0, ProbeKind::kStress, {9, 7}, false}, view));
  EXPECT_EQ(located.evict, (std::vector<SlotId>{7, 9}));
  EXPECT_EQ(located.credit, Mechanism::kStopTimeEviction);
  EXPECT_TRUE(std::get<Located>(loc->answer(ProbeResult{0, ProbeKind::kStress, {}, false}, view)).evict.empty());
}

TEST(ModuleRegistry, NamesAreUniquePerKindAndFeedTheStacksChoices) {
  ModuleRegistry m;
  register_builtin_modules(m);
  EXPECT_EQ(m.names(ModuleKind::kLocalization), (std::vector<std::string>{"replay", "bisection", "stress"}));
  EXPECT_THROW(m.add(bisection_info(), make_bisection), std::invalid_argument);
  EXPECT_THROW(m.make_localizer("tor-bisection", byterobust_params()), std::invalid_argument);
  EXPECT_EQ(m.make_localizer("stress", byterobust_params())->info().name, "stress");
  for (auto [param, kind] : {std::pair{"localization", ModuleKind::kLocalization},
                             {"checkpoint", ModuleKind::kCheckpoint},
                             {"recovery", ModuleKind::kRecovery}})
    EXPECT_EQ(byterobust_info().find_param(param)->choices, m.names(kind)) << param;
}

// Every "read only with" condition of the stack's parameters names one of its choice
// parameters and one of that choice's modules (a typo would silently mark it always read),
// and the conditions hold exactly for the modules that read the parameter.
TEST(ModuleRegistry, ParametersSayWhichModuleChoicesReadThem) {
  const PolicyInfo& info = byterobust_info();
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
  EXPECT_FALSE(read_with("standby_pool", {{"recovery", info.find_param("recovery")->choice_index("requeue")}}));
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
  EXPECT_EQ(make_standby_recovery(byterobust_params({{"standby_pool", 7}}))->start(view_of(16, 4, 4))->size, 7);
  EXPECT_FALSE(make_reschedule_recovery(byterobust_params())->start(view_of(16, 4, 4)));
  const std::vector<SlotId> slots{3, 4};
  const AcquireMachines a = standby->replace(slots, "why", Mechanism::kOverEviction);
  EXPECT_EQ(a.mode, AcquireMode::kStandby);
  EXPECT_EQ(a.slots, slots);
  EXPECT_EQ(a.mechanism, Mechanism::kOverEviction);
  EXPECT_EQ(make_reschedule_recovery(byterobust_params())->replace(slots, "why", Mechanism::kReplay).mode,
            AcquireMode::kReschedule);
  const AcquireMachines q = make_requeue_recovery(byterobust_params())->replace(slots, "why", Mechanism::kReplay);
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
  auto tight = make_daly_checkpoint(byterobust_params({{"daly_min_interval_s", 300}, {"daly_max_interval_s", 400}}));
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
  const SetCheckpointPlan remote = make_remote_checkpoint(byterobust_params({{"checkpoint_interval_s", 600}}))->plan(view);
  EXPECT_EQ(remote.tier, CheckpointTier::kRemote);
  EXPECT_EQ(remote.blocking, Duration::seconds(6.77));
  EXPECT_EQ(remote.interval, Duration::seconds(600));
}

TEST(ModuleRegistry, AFactoryOfTheWrongKindIsRefused) {
  ModuleRegistry m;
  EXPECT_THROW(m.add(bisection_info(), ModuleRegistry::RecoveryFactory(make_requeue_recovery)), std::invalid_argument);
  m.add(requeue_recovery_info(), make_requeue_recovery);
  EXPECT_EQ(m.names(ModuleKind::kRecovery), std::vector<std::string>{"requeue"});
  EXPECT_TRUE(m.names(ModuleKind::kLocalization).empty());
}

}  // namespace
}  // namespace faultline::policies
