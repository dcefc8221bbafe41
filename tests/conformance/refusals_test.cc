// The contract's refusal rules (policies/api/refusals.h) on their own, without a World.
#include "policies/api/refusals.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "policies/api/action.h"
#include "policies/api/cluster_view.h"

namespace faultline {
namespace {

// The contract's refusal rules themselves, each on the edge of what it refuses: a wrong
// rule (too strict, too lax, another wording, another order) fails here.
TEST(Refusals, EachRuleRefusesWhatItSaysAndNothingElse) {
  ClusterSpec spec;
  spec.machines = 4;
  spec.gpus_per_machine = 1;
  spec.tp = 1;
  spec.pp = 2;
  spec.dp = 2;
  spec.standby_machines = 1;  // machine 4
  const ClusterView full(spec);
  ClusterView one_empty(spec), two_empty(spec);
  one_empty.vacate(1);
  two_empty.vacate(1);
  two_empty.vacate(3);
  const RefusalContext idle{.cluster = full};
  const RefusalContext running{.cluster = full, .job_running = true};
  const RefusalContext ended{.cluster = full, .ended = true, .verdict = "code_or_data"};
  const RefusalContext ended_running{
      .cluster = full, .job_running = true, .ended = true, .verdict = "code_or_data"};
  const RefusalContext ended_no_verdict{.cluster = full, .ended = true};
  const RefusalContext hole{.cluster = one_empty};
  const RefusalContext holes{.cluster = two_empty};
  const RefusalContext hole_running{.cluster = one_empty, .job_running = true};
  const auto why = [](const Action& a, const RefusalContext& c) {
    return refusal(a, c).value_or("(let through)");
  };
  const std::string ok = "(let through)";
  const std::string was_ended = "the run was ended: code_or_data";

  // StartJob: ended, then running, then empty slots.
  EXPECT_EQ(why(StartJob{"s"}, idle), ok);
  EXPECT_EQ(why(StartJob{"s"}, running), "job already running");
  EXPECT_EQ(why(StartJob{"s"}, ended), was_ended);
  EXPECT_EQ(why(StartJob{"s"}, ended_running), was_ended);
  EXPECT_EQ(why(StartJob{"s"}, ended_no_verdict), "the run was ended");
  EXPECT_EQ(why(StartJob{"s"}, hole), "cannot start: slot 1 has no machine");
  EXPECT_EQ(why(StartJob{"s"}, holes), "cannot start: slots 1, 3 have no machine");
  EXPECT_EQ(why(StartJob{"s"}, hole_running), "job already running");
  EXPECT_EQ(empty_slot_refusal(full), std::nullopt);
  EXPECT_EQ(empty_slot_refusal(two_empty), "cannot start: slots 1, 3 have no machine");

  // HotUpdate and RollBack restart a running job in place: only an EndRun or a hole stops
  // them. A RollBack's hole is the World's to refuse, after it rolled the code back.
  for (const Action& a : {Action{HotUpdate{"v2", "h"}}, Action{RollBack{"r"}}}) {
    SCOPED_TRACE(describe(a));
    const bool update = std::holds_alternative<HotUpdate>(a);
    EXPECT_EQ(why(a, idle), ok);
    EXPECT_EQ(why(a, running), ok);
    EXPECT_EQ(why(a, ended), was_ended);
    EXPECT_EQ(why(a, hole), update ? "cannot start: slot 1 has no machine" : ok);
    EXPECT_EQ(why(a, holes), update ? "cannot start: slots 1, 3 have no machine" : ok);
  }

  // AcquireMachines: only after an EndRun (filling a hole is what it is for).
  EXPECT_EQ(why(AcquireMachines{AcquireMode::kStandby, {}, "a"}, hole), ok);
  EXPECT_EQ(why(AcquireMachines{AcquireMode::kOracle, {}, "a"}, idle), ok) << "a backend's call";
  EXPECT_EQ(why(AcquireMachines{AcquireMode::kRequeue, {}, "a"}, ended), was_ended);

  // What stops or shrinks the job, or only reports, stays allowed after an EndRun.
  for (const Action& a :
       {Action{StopJob{"s"}}, Action{EvictMachines{{1}, "e"}}, Action{EndRun{"x", "again"}},
        Action{Note{"n"}}, Action{CaptureStacks{"c"}}, Action{SetStandbyPool{2, "p"}},
        Action{RunProbe{ProbeKind::kGpuDiag, {0}, Duration::seconds(1), "p"}},
        Action{EnableOracle{"o"}}, Action{AvoidMachines{{4}, "a"}}}) {
    SCOPED_TRACE(describe(a));
    EXPECT_EQ(why(a, ended_running), ok);
  }

  // EnableInspection: a positive interval only.
  EXPECT_EQ(why(EnableInspection{"gpu", Duration::zero(), "i"}, idle),
            "inspection interval must be positive");
  EXPECT_EQ(why(EnableInspection{"gpu", Duration{-1}, "i"}, idle),
            "inspection interval must be positive");
  EXPECT_EQ(why(EnableInspection{"gpu", Duration{1}, "i"}, idle), ok);

  // RunProbe: only its groups are checked.
  const auto grouped = [](ProbeKind test, std::vector<MachineSet> groups) {
    RunProbe p{test, {0, 99}, Duration::seconds(30), "g"};
    p.groups = std::move(groups);
    return Action{p};
  };
  EXPECT_EQ(why(grouped(ProbeKind::kGpuDiag, {}), idle), ok) << "no groups: machines unchecked";
  EXPECT_EQ(why(grouped(ProbeKind::kInterAllGather, {{0, 1}, {2, 3}}), idle), ok);
  EXPECT_EQ(why(grouped(ProbeKind::kInterAllGather, {{3, 4}}), idle), ok)
      << "a standby is in the fleet";
  EXPECT_EQ(why(grouped(ProbeKind::kInterAllGather, {{0, 1, 2, 3, 4}}), idle), ok);
  EXPECT_EQ(why(grouped(ProbeKind::kBitwise, {{0, 1}}), idle),
            "groups: only inter_all_gather runs per group");
  EXPECT_EQ(why(grouped(ProbeKind::kInterAllGather, {{0, 1}, {2}}), idle),
            "groups[1]: a group needs at least two machines");
  EXPECT_EQ(why(grouped(ProbeKind::kInterAllGather, {{}}), idle),
            "groups[0]: a group needs at least two machines");
  EXPECT_EQ(why(grouped(ProbeKind::kInterAllGather, {{0, 5}}), idle),
            "groups[0]: machine 5 is not in the fleet");
  EXPECT_EQ(why(grouped(ProbeKind::kInterAllGather, {{-1, 0}}), idle),
            "groups[0]: machine -1 is not in the fleet");
  EXPECT_EQ(why(grouped(ProbeKind::kInterAllGather, {{0, 1}, {2, 3}, {3, 1}}), idle),
            "groups[2]: machine 3 is in groups[1] already (a machine joins one group)");
  EXPECT_EQ(why(grouped(ProbeKind::kInterAllGather, {{2, 2}}), idle),
            "groups[0]: machine 2 is in groups[0] already (a machine joins one group)");

  // MitigateSlowdown: a running job, and a machine in the slot.
  const auto mitigate = [](SlotId s) {
    return Action{MitigateSlowdown{s, Mitigation::kRebalance, "m"}};
  };
  EXPECT_EQ(why(mitigate(0), idle), "job not running");
  EXPECT_EQ(why(mitigate(9), idle), "job not running");
  EXPECT_EQ(why(mitigate(0), running), ok);
  EXPECT_EQ(why(mitigate(3), running), ok);
  EXPECT_EQ(why(mitigate(4), running), "slot 4 has no machine");
  EXPECT_EQ(why(mitigate(-1), running), "slot -1 has no machine");
  EXPECT_EQ(why(mitigate(1), hole_running), "slot 1 has no machine");
  EXPECT_EQ(why(mitigate(0), hole_running), ok);

  // MigrateMachines: a running job, machines, each of them in the job.
  const auto migrate = [](MachineSet ms) { return Action{MigrateMachines{std::move(ms), "w"}}; };
  EXPECT_EQ(why(migrate({0}), idle), "job not running");
  EXPECT_EQ(why(migrate({0, 3}), running), ok);
  EXPECT_EQ(why(migrate({}), running), "no machines to migrate");
  EXPECT_EQ(why(migrate({0, 4}), running), "machine 4 is not in the job") << "a standby";
  EXPECT_EQ(why(migrate({5}), running), "machine 5 is not in the job");
  EXPECT_EQ(why(migrate({-1}), running), "machine -1 is not in the job");
  EXPECT_EQ(why(migrate({1}), hole_running), "machine 1 is not in the job") << "evicted";

  // EnableReplicaGroups: a minimum between 1 and the data-parallel degree (2 here).
  const auto groups = [](int min) {
    return Action{EnableReplicaGroups{min, Duration::seconds(10), Duration::seconds(60), "g"}};
  };
  EXPECT_EQ(why(groups(1), idle), ok);
  EXPECT_EQ(why(groups(2), running), ok);
  EXPECT_EQ(why(groups(0), idle), "min_replicas 0 is not between 1 and the data-parallel degree 2");
  EXPECT_EQ(why(groups(3), idle), "min_replicas 3 is not between 1 and the data-parallel degree 2");

  // RejoinReplica: a running job, a replica of it, every slot of the replica filled.
  const auto rejoin = [](int r) { return Action{RejoinReplica{r, "r"}}; };
  EXPECT_EQ(why(rejoin(0), idle), "job not running");
  EXPECT_EQ(why(rejoin(1), running), ok);
  EXPECT_EQ(why(rejoin(2), running), "no replica 2");
  EXPECT_EQ(why(rejoin(-1), running), "no replica -1");
  EXPECT_EQ(why(rejoin(0), hole_running), "slot 1 of replica 0 has no machine");
  EXPECT_EQ(why(rejoin(1), hole_running), ok);
}

}  // namespace
}  // namespace faultline
