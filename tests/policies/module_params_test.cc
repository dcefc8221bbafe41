// Policy modules built from their own declared parameters alone (ModuleInfo::params), with
// no stack: a module is tested and reused without one, so each reads only the knobs it
// declares, and is handed only those (policies/module.h). This binary links the policies
// library alone. Each behaviour a knob drives is checked against an expectation computed
// here, independently of the module's code.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "policies/builtin.h"
#include "policies/checkpoint/plans.h"
#include "policies/detection/detectors.h"
#include "policies/failslow/ladders.h"
#include "policies/localization/localizers.h"
#include "policies/recovery/flash.h"
#include "policies/recovery/migration.h"
#include "policies/recovery/replace.h"
#include "policies/verdict/verdicts.h"

namespace faultline::policies {
namespace {

// The module's own parameters, resolved with `over`: nothing of any stack's.
Params own(const ModuleInfo& info, std::map<std::string, double> over = {}) {
  Params p;
  const auto err = Params::resolve(info.params, over, &p);
  EXPECT_FALSE(err) << info.name << ": " << *err;
  return p;
}

ClusterView view_of(int machines, int gpus = 1, int tp = 1, int pp = 1, int dp = 0) {
  ClusterSpec c;
  c.machines = machines;
  c.gpus_per_machine = gpus;
  c.tp = tp;
  c.pp = pp;
  c.dp = dp > 0 ? dp : machines * gpus / (tp * pp);
  return ClusterView(c);
}

Instant instant_at(double s) { return Instant::at(Duration::seconds(s)); }

// Smallest k with P[Binomial(n, p) <= k] >= q, by summing the pmf term by term (the
// recurrence pmf(k + 1) = pmf(k) (n - k) / (k + 1) p / (1 - p)).
int binomial_quantile_by_sum(long n, double p, double q) {
  long double pmf = std::pow(1.0L - p, n), cdf = pmf;
  int k = 0;
  while (cdf < q) {
    pmf *= static_cast<long double>(n - k) / (k + 1) * p / (1 - p);
    cdf += pmf;
    ++k;
  }
  return k;
}

// Daly 2006, eq. 37, written out: sqrt(2 d M) (1 + sqrt(d / 2M) / 3 + d / 18M) - d.
double daly(double d, double m) {
  return std::sqrt(2 * d * m) * (1 + std::sqrt(d / (2 * m)) / 3 + d / (18 * m)) - d;
}

TEST(ModuleParams, StandbyRequestsThePoolItIsGivenOrTheBinomialQuantile) {
  const ClusterView view = view_of(512);
  EXPECT_EQ(
      make_standby_recovery(own(standby_recovery_info(), {{"standby_pool", 3}}))->start(view)->size,
      3);
  // Default: the P99 of Binomial(machines, 1.2e-3); ByteRobust §6 publishes 3 for 512.
  const int p99 = binomial_quantile_by_sum(512, 1.2e-3, 0.99);
  EXPECT_EQ(p99, 3);
  EXPECT_EQ(make_standby_recovery(own(standby_recovery_info()))->start(view)->size, p99);
  // The sizing knobs are its own too.
  const int q = binomial_quantile_by_sum(512, 0.01, 0.999);
  EXPECT_GT(q, p99);
  EXPECT_EQ(make_standby_recovery(own(standby_recovery_info(),
                                      {{"standby_daily_p", 0.01}, {"standby_quantile", 0.999}}))
                ->start(view)
                ->size,
            q);
}

TEST(ModuleParams, LemonKeepsThePoolAndRetiresAtItsStrikes) {
  auto lemon =
      make_lemon_recovery(own(lemon_recovery_info(), {{"standby_pool", 5}, {"lemon_strikes", 4}}));
  EXPECT_EQ(lemon->start(view_of(64))->size, 5);
  for (int strike = 1; strike <= 3; ++strike) EXPECT_FALSE(lemon->struck(5).retire) << strike;
  EXPECT_TRUE(lemon->struck(5).retire);  // the 4th strike
  EXPECT_EQ(make_lemon_recovery(own(lemon_recovery_info()))->start(view_of(1024))->size,
            binomial_quantile_by_sum(1024, 1.2e-3, 0.99));
}

// flash (FlashRecovery) keeps standby's pool, sized by the same knobs, refills evicted
// slots from it, and is the one recovery module that restarts in place.
TEST(ModuleParams, FlashKeepsStandbysPoolAndRestartsInPlace) {
  const ClusterView view = view_of(512);
  EXPECT_EQ(
      make_flash_recovery(own(flash_recovery_info(), {{"standby_pool", 3}}))->start(view)->size, 3);
  EXPECT_EQ(make_flash_recovery(own(flash_recovery_info()))->start(view)->size,
            binomial_quantile_by_sum(512, 1.2e-3, 0.99));
  EXPECT_EQ(make_flash_recovery(own(flash_recovery_info(), {{"standby_daily_p", 0.01}}))
                ->start(view)
                ->size,
            binomial_quantile_by_sum(512, 0.01, 0.99));
  const auto flash = make_flash_recovery(own(flash_recovery_info()));
  const AcquireMachines a = flash->replace({3, 4}, "why", Mechanism::kRealtimeEviction);
  EXPECT_EQ(a.mode, AcquireMode::kStandby);
  EXPECT_EQ(a.slots, (std::vector<SlotId>{3, 4}));
  EXPECT_TRUE(flash->restarts_in_place());
  ModuleRegistry r;
  register_builtin_modules(r);
  for (const ModuleInfo* m : r.of(ModuleKind::kRecovery))
    EXPECT_EQ(r.make_recovery(m->name, own(*m))->restarts_in_place(), m->name == "flash")
        << m->name;
}

// migrate (TrainMover) keeps standby's pool and refills evicted slots from it; on a warning
// for a machine of the job, ahead by at least migrate_min_lead_s, with a standby parked, it
// migrates that machine with its pause; otherwise it lets the failure come. No other
// recovery module migrates.
TEST(ModuleParams, MigrateMovesAWarnedMachineWhenTheLeadCoversTheCopy) {
  ClusterView view = view_of(16);
  EXPECT_EQ(
      make_migrate_recovery(own(migrate_recovery_info(), {{"standby_pool", 3}}))->start(view)->size,
      3);
  const auto migrate = make_migrate_recovery(
      own(migrate_recovery_info(), {{"migration_pause_s", 7}, {"migrate_min_lead_s", 120}}));
  const AcquireMachines a = migrate->replace({3, 4}, "why", Mechanism::kRealtimeEviction);
  EXPECT_EQ(a.mode, AcquireMode::kStandby);
  EXPECT_EQ(a.slots, (std::vector<SlotId>{3, 4}));
  const FailureWarning ahead{5, "gpu", Duration::seconds(600), "predicted: ecc"};
  EXPECT_FALSE(migrate->migrate(ahead, view)) << "no standby parked";
  view.add_standby(view.add_machine());
  const auto m = migrate->migrate(ahead, view);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->machines, (MachineSet{5}));
  EXPECT_EQ(m->pause.ns, Duration::seconds(7).ns);
  EXPECT_NE(m->reason.find("failure predicted on 5"), std::string::npos) << m->reason;
  EXPECT_FALSE(migrate->migrate({5, "gpu", Duration::seconds(119), "late"}, view));
  EXPECT_TRUE(migrate->migrate({5, "gpu", Duration::seconds(120), "just"}, view));
  EXPECT_FALSE(migrate->migrate({16, "gpu", Duration::seconds(600), "a standby"}, view));
  EXPECT_FALSE(migrate->migrate({99, "gpu", Duration::seconds(600), "no such"}, view));
  EXPECT_EQ(make_migrate_recovery(own(migrate_recovery_info()))->migrate(ahead, view)->pause.ns,
            Duration::seconds(20).ns);  // TrainMover's reported downtime
  ModuleRegistry r;
  register_builtin_modules(r);
  for (const ModuleInfo* info : r.of(ModuleKind::kRecovery))
    EXPECT_EQ(r.make_recovery(info->name, own(*info))->migrate(ahead, view).has_value(),
              info->name == "migrate")
        << info->name;
}

TEST(ModuleParams, RealtimeDetectionStallsAfterExactlyItsWindow) {
  auto d = make_realtime_detection(own(realtime_detection_info(), {{"stall_window_s", 45}}));
  ASSERT_TRUE(d->watch());
  d->restart(instant_at(0), 0);
  StepSample s;
  s.step = 1;
  s.step_time_s = 1;
  EXPECT_FALSE(d->observe(s, instant_at(5)));
  EXPECT_EQ(d->next_check(), instant_at(50));
  EXPECT_FALSE(d->check(instant_at(49.999)));
  const auto f = d->check(instant_at(50));
  ASSERT_TRUE(f);
  ASSERT_TRUE(std::holds_alternative<ProgressStalled>(*f));
  EXPECT_EQ(std::get<ProgressStalled>(*f).last_step, 1);
  EXPECT_EQ(std::get<ProgressStalled>(*f).stalled_for, Duration::seconds(45));
}

TEST(ModuleParams, RealtimeDetectionJudgesSlowStepsByItsRatioAndTime) {
  auto d = make_realtime_detection(
      own(realtime_detection_info(), {{"slow_ratio", 1.2}, {"slow_for_s", 30}}));
  d->restart(instant_at(0), 0);
  StepSample s;
  s.steady = true;
  s.step = 0;
  s.step_time_s = 1.0;
  d->observe(s, instant_at(0));
  s.step = 10;
  s.step_time_s = 1.5;  // 1.5x the baseline, above 1.2x
  d->observe(s, instant_at(10));
  EXPECT_EQ(d->next_check(), instant_at(40));  // slow for slow_for_s
  const auto f = d->check(instant_at(40));
  ASSERT_TRUE(f);
  EXPECT_TRUE(std::holds_alternative<StepTimeHigh>(*f));
}

TEST(ModuleParams, CheckpointPlansCarryTheirOwnTimes) {
  const ClusterView view = view_of(16);
  const SetCheckpointPlan memory =
      make_memory_checkpoint(
          own(memory_checkpoint_info(), {{"checkpoint_interval_s", 900},
                                         {"memory_checkpoint_blocking_s", 2.5},
                                         {"remote_checkpoint_interval_s", 7200}}))
          ->plan(view);
  EXPECT_EQ(memory.tier, CheckpointTier::kMemory);
  EXPECT_EQ(memory.interval, Duration::seconds(900));
  EXPECT_EQ(memory.blocking, Duration::seconds(2.5));
  EXPECT_EQ(memory.remote_interval, Duration::seconds(7200));

  const SetCheckpointPlan peer =
      make_peer_checkpoint(own(peer_checkpoint_info(), {{"checkpoint_blocking_s", 0.05}}))
          ->plan(view);
  EXPECT_EQ(peer.blocking, Duration::seconds(0.05));
  EXPECT_EQ(peer.remote_interval, Duration::seconds(3600));  // its default

  const SetCheckpointPlan remote =
      make_remote_checkpoint(own(remote_checkpoint_info(), {{"remote_checkpoint_write_s", 12}}))
          ->plan(view);
  EXPECT_EQ(remote.interval, Duration::seconds(1800));
  EXPECT_EQ(remote.blocking, Duration::seconds(12));
}

TEST(ModuleParams, DalyPlansDalysOptimumForItsWriteTimeAndPrior) {
  auto planner = make_daly_checkpoint(
      own(daly_checkpoint_info(), {{"remote_checkpoint_write_s", 60}, {"daly_prior_mtbf_h", 2}}));
  const SetCheckpointPlan plan = planner->plan(view_of(16));
  EXPECT_EQ(plan.tier, CheckpointTier::kRemote);
  EXPECT_EQ(plan.blocking, Duration::seconds(60));
  EXPECT_NEAR(plan.interval.to_seconds(), daly(60, 7200), 1e-6);
}

TEST(ModuleParams, SkiRentalEvictsAtTheBreakEvenOfItsRestartCost) {
  // One machine, one stage, one replica: neither rebalancing nor reconfiguring helps, so
  // the ladder rents (loses 1 - 1/f of the throughput) until that adds up to the restart
  // cost: at since + C / (1 - 1/f).
  ClusterSpec c;
  c.machines = 1;
  c.gpus_per_machine = 8;
  c.tp = 8;
  c.pp = 1;
  c.dp = 1;
  c.micro_batches = 8;
  c.layers_per_stage = 6;
  const ClusterView view(c);
  const double f = 2, cost = 600;
  auto m = make_ski_rental_failslow(
      own(ski_rental_failslow_info(), {{"failslow_restart_cost_s", cost}}));
  EXPECT_EQ(m->located(0, 0, f, instant_at(100), instant_at(110), view), SlowdownLevel::kTolerate);
  EXPECT_NEAR(m->next_check().to_seconds(), 100 + cost / (1 - 1 / f), 1e-6);
  EXPECT_EQ(m->check(m->next_check()), SlowdownLevel::kEvict);
}

TEST(ModuleParams, StressTestsEveryMachineWithItsDeadline) {
  const ClusterView view = view_of(8);
  auto loc = make_stress(own(stress_info(), {{"stress_deadline_s", 1234}}));
  const LocalizationStep step = loc->begin("why", view);
  const auto& probe = std::get<RunProbe>(std::get<LocalizationTest>(step));
  EXPECT_EQ(probe.test, ProbeKind::kStress);
  EXPECT_EQ(probe.deadline, Duration::seconds(1234));
  EXPECT_EQ(probe.machines.size(), 8u);
}

TEST(ModuleParams, IdenticalVerdictStopsAtItsLimit) {
  auto v = make_identical_verdict(own(identical_verdict_info(), {{"identical_incident_limit", 5}}));
  EXPECT_EQ(v->judge({3, 0}), Verdict::kCarryOn);
  EXPECT_EQ(v->judge({4, 0}), Verdict::kRollBack);  // the time before: roll back
  EXPECT_EQ(v->judge({5, 0}), Verdict::kStop);
  auto n = make_no_progress_verdict(own(no_progress_verdict_info(), {{"no_progress_limit", 2}}));
  EXPECT_EQ(n->judge({0, 1}), Verdict::kRollBack);
  EXPECT_EQ(n->judge({0, 2}), Verdict::kStop);
}

// Builds module `m` of `r` from `p`, whatever its kind.
void build(const ModuleRegistry& r, const ModuleInfo& m, const Params& p) {
  switch (m.kind) {
    case ModuleKind::kDetection:
      ASSERT_TRUE(r.make_detector(m.name, p));
      return;
    case ModuleKind::kLocalization:
      ASSERT_TRUE(r.make_localizer(m.name, p));
      return;
    case ModuleKind::kRecovery:
      ASSERT_TRUE(r.make_recovery(m.name, p));
      return;
    case ModuleKind::kCheckpoint:
      ASSERT_TRUE(r.make_checkpoint(m.name, p));
      return;
    case ModuleKind::kFailSlow:
      ASSERT_TRUE(r.make_failslow(m.name, p));
      return;
    case ModuleKind::kVerdict:
      ASSERT_TRUE(r.make_verdict(m.name, p));
      return;
  }
}

// Every built-in module builds from its own declaration's defaults: one that read a knob it
// does not declare would throw "undeclared policy parameter" here.
TEST(ModuleParams, EveryBuiltInModuleBuildsFromItsOwnDeclarationAlone) {
  ModuleRegistry r;
  register_builtin_modules(r);
  ASSERT_GE(r.all().size(), 20u);
  for (const ModuleInfo* m : r.all()) {
    SCOPED_TRACE(std::string(module_kind_name(m->kind)) + "=" + m->name);
    EXPECT_NO_THROW(build(r, *m, own(*m)));
    std::set<std::string> names;
    for (const ParamSpec& s : m->params) EXPECT_TRUE(names.insert(s.name).second) << s.name;
  }
}

// The registry hands a factory the module's declared knobs and nothing else, however many
// the stack resolved: reading a stack knob from a module throws.
TEST(ModuleParams, TheRegistryHandsAFactoryOnlyItsDeclaredKnobs) {
  ModuleRegistry r;
  std::map<std::string, double> seen;
  ModuleInfo info{ModuleKind::kVerdict, "probe", "1", "test", {{"mine", "", "count", 7, 0, 100}}};
  r.add(info, [&](const Params& p) -> std::unique_ptr<StopVerdict> {
    seen = {p.values().begin(), p.values().end()};
    return make_identical_verdict(own(identical_verdict_info()));
  });
  ModuleInfo greedy{ModuleKind::kVerdict, "greedy", "1", "reads a stack knob it does not declare"};
  r.add(greedy, [](const Params& p) -> std::unique_ptr<StopVerdict> {
    p.get("stack_knob");
    return nullptr;
  });
  Params stack;
  ASSERT_FALSE(
      Params::resolve({{"stack_knob", "", "s", 1, 0, 10}, {"mine", "", "count", 7, 0, 100}},
                      {{"mine", 9}}, &stack));
  r.make_verdict("probe", stack);
  EXPECT_EQ(seen, (std::map<std::string, double>{{"mine", 9}}));  // the stack's value, alone
  r.make_verdict("probe", Params{});  // a stack that lacks it: the declared default
  EXPECT_EQ(seen, (std::map<std::string, double>{{"mine", 7}}));
  EXPECT_THROW(r.make_verdict("greedy", stack), std::logic_error);
}

// The stack's table declares only what the stack reads: a knob a module declares is the
// module's, read exactly when the stack chooses a module that declares it (each condition
// once), with one spec, whichever module declares it.
TEST(ModuleParams, TheStackDeclaresNoKnobOnlyAModuleReads) {
  ModuleRegistry r;
  register_builtin_modules(r);
  std::map<std::string, std::vector<std::string>> declared_by;
  std::map<std::string, const ParamSpec*> spec;
  for (const ModuleInfo* m : r.all())
    for (const ParamSpec& s : m->params) {
      declared_by[s.name].push_back(std::string(module_kind_name(m->kind)) + "=" + m->name);
      if (auto [it, fresh] = spec.emplace(s.name, &s); !fresh) {
        EXPECT_EQ(it->second->help, s.help) << s.name;
        EXPECT_EQ(it->second->unit, s.unit) << s.name;
        EXPECT_EQ(it->second->default_value, s.default_value) << s.name;
        EXPECT_EQ(it->second->min, s.min) << s.name;
        EXPECT_EQ(it->second->max, s.max) << s.name;
      }
    }
  const Registry stacks = builtin_registry();
  ASSERT_NE(stacks.find("byterobust"), nullptr);
  const PolicyInfo& br = *stacks.find("byterobust");
  for (const ParamSpec& p : br.params) {
    SCOPED_TRACE(p.name);
    auto it = declared_by.find(p.name);
    if (it == declared_by.end()) {
      EXPECT_TRUE(p.read_when.empty());  // the stack's own (or a choice): always read
      continue;
    }
    EXPECT_EQ(p.read_when, it->second);
  }
  for (const char* moved :
       {"standby_pool", "standby_daily_p", "standby_quantile", "checkpoint_blocking_s",
        "remote_checkpoint_interval_s", "checkpoint_interval_s", "memory_checkpoint_blocking_s",
        "remote_checkpoint_write_s", "stress_deadline_s", "stall_window_s", "slow_ratio",
        "slow_for_s"}) {
    ASSERT_TRUE(declared_by.count(moved)) << moved << " is declared by no module";
    ASSERT_NE(br.find_param(moved), nullptr) << moved;
    EXPECT_FALSE(br.find_param(moved)->read_when.empty()) << moved << " is still the stack's";
  }
  // Not read under the timeout detector, which reads no knob: a scenario setting it there
  // is refused.
  Params timeout;
  ASSERT_FALSE(Params::resolve(br.params, {{"detection", 1}}, &timeout));
  ASSERT_EQ(br.find_param("detection")->choices.at(1), "timeout");
  EXPECT_FALSE(param_is_read(br, *br.find_param("stall_window_s"), timeout));
  EXPECT_TRUE(param_is_read(br, *br.find_param("probe_deadline_s"), timeout));
}

// A stack that declares a knob a module declares keeps it always read, and composing
// twice adds no condition twice.
TEST(ModuleParams, AddModuleParamsSharesNamesWithoutRepeatingConditions) {
  ModuleRegistry r;
  register_builtin_modules(r);
  std::vector<ParamSpec> params = {{"stall_window_s", "", "s", 600, 1, 86400}};
  add_module_params(r, params);
  add_module_params(r, params);
  auto find = [&](const std::string& n) {
    return *std::find_if(params.begin(), params.end(),
                         [&](const ParamSpec& p) { return p.name == n; });
  };
  EXPECT_TRUE(find("stall_window_s").read_when.empty());
  EXPECT_EQ(find("standby_pool").read_when,
            (std::vector<std::string>{"recovery=standby", "recovery=lemon", "recovery=scored",
                                      "recovery=segment", "recovery=replica-drop", "recovery=flash",
                                      "recovery=migrate"}));
  EXPECT_EQ(find("remote_checkpoint_write_s").read_when,
            (std::vector<std::string>{"checkpoint=remote", "checkpoint=daly"}));
}

}  // namespace
}  // namespace faultline::policies
