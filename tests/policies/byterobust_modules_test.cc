// The byterobust stack's modules swapped by name against FakeWorld, and the stop-time tests'
// plans.
#include <gtest/gtest.h>

#include <tuple>
#include <vector>

#include "policies/stacks/byterobust/stop_time.h"
#include "tests/policies/byterobust_fixtures.h"

namespace faultline {
namespace {

using namespace byterobust_test;

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
