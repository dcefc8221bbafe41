// The World contract (policies/api/world.h, action.h) as a table: each row is a scripted
// policy and what it must observe, run against SimWorld (in process, through
// ReplicaRunner) and LiveWorld (a fake link answering as agents do, a manual reactor
// clock), and where it applies FakeWorld. Where the Worlds differ by design (live mode
// has no oracle, rounds checkpoints to whole steps) the row says so per World.
//
// The suite's other files (tests/conformance/): the refusal rules themselves, SimWorld's
// transfers, one detector across both Worlds, live mode's repair pipeline, what LiveWorld
// believes, the probes it relays, and the metrics it exports; their fixtures are in
// conformance_support.h.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "tests/conformance/conformance_support.h"
#include "tests/support/fake_world.h"

namespace faultline {
namespace {

using namespace conformance;

// ---------------------------------------------------------------- the table

enum class Want { kEvent, kActionFailed, kNothing };

struct Row {
  const char* name;
  // Builds the script; `failed_of`/`watch` let a row point at the action whose outcome matters.
  std::function<Script(ActionId* watch)> make;
  // What must follow the watched action, in SimWorld and in LiveWorld.
  Want sim, live;
  const char* failure = "";  // the ActionFailed reason, where both fail alike
};

// Starts the job; once JobStarted arrives, `then` runs (once).
Script started_then(ActionId* watch, std::function<ActionId(World&)> then) {
  auto done = std::make_shared<bool>(false);
  Script s;
  s.start = [](World& w) { w.act(StartJob{"first start"}); };
  s.on = [done, watch, then](const Event& e, World& w) {
    if (std::holds_alternative<JobStarted>(e) && !*done) {
      *done = true;
      *watch = then(w);
    }
  };
  return s;
}

std::vector<Row> rows() {
  return {
      {"StartJobOnARunningJobIsRefused",
       [](ActionId* watch) {
         return started_then(watch, [](World& w) { return w.act(StartJob{"again"}); });
       },
       Want::kActionFailed, Want::kActionFailed, "job already running"},
      {"StartJobWithAnEmptySlotIsRefused",
       [](ActionId* watch) {
         Script s;
         s.start = [watch](World& w) {
           w.act(EvictMachines{{1}, "empty slot 1"});
           *watch = w.act(StartJob{"with a hole"});
         };
         return s;
       },
       Want::kActionFailed, Want::kActionFailed, "slot"},
      {"EvictingAMachineOutsideTheJobLeavesTheJobRunning",
       [](ActionId* watch) {
         return started_then(watch, [](World& w) {
           w.act(EvictMachines{{4}, "the standby, not a job machine"});
           return w.act(StartJob{"refused only if the job still runs"});
         });
       },
       Want::kActionFailed, Want::kActionFailed, "job already running"},
      {"StopJobAnswersJobStoppedEvenWhenNothingRuns",
       [](ActionId* watch) {
         Script s;
         s.start = [watch](World& w) { *watch = w.act(StopJob{"nothing runs yet"}); };
         return s;
       },
       Want::kEvent, Want::kEvent},
      {"InspectionWithoutAPositiveIntervalIsRefused",
       [](ActionId* watch) {
         Script s;
         s.start = [watch](World& w) {
           *watch = w.act(EnableInspection{"gpu", Duration::zero(), "bad"});
         };
         return s;
       },
       Want::kActionFailed, Want::kActionFailed, "inspection interval must be positive"},
      {"OracleOnlyInTheSimulator",
       [](ActionId* watch) {
         Script s;
         s.start = [watch](World& w) { *watch = w.act(EnableOracle{"upper bound"}); };
         return s;
       },
       Want::kNothing, Want::kActionFailed},
      {"MitigateSlowdownWorksAroundASlowMachineInTheSimulatorOnly",
       [](ActionId* watch) {
         return started_then(watch, [](World& w) {
           return w.act(MitigateSlowdown{0, Mitigation::kRebalance, "straggler"});
         });
       },
       Want::kNothing, Want::kActionFailed, "live mode cannot rebalance"},
      {"LiveReplicaGroupsNeedAJobThatRunsThem",
       [](ActionId* watch) {
         Script s;
         s.start = [watch](World& w) {
           *watch = w.act(
               EnableReplicaGroups{1, Duration::seconds(10), Duration::seconds(60), "ft-hsdp"});
         };
         return s;
       },
       Want::kNothing, Want::kActionFailed,
       "the job's code does not run replica groups (job.replica_groups is false"},
      {"ARejoinOfAReplicaThatIsNotOutIsRefused",
       [](ActionId* watch) {
         Script s = started_then(watch, [](World& w) {
           return w.act(RejoinReplica{0, "nothing dropped"});
         });
         auto start = s.start;
         s.start = [start](World& w) {
           w.act(EnableReplicaGroups{1, Duration::seconds(10), Duration::seconds(60), "g"});
           start(w);
         };
         return s;
       },
       Want::kActionFailed, Want::kActionFailed},
      {"MitigateSlowdownWithoutARunningJobIsRefused",
       [](ActionId* watch) {
         Script s;
         s.start = [watch](World& w) {
           *watch = w.act(MitigateSlowdown{0, Mitigation::kReconfigure, "too early"});
         };
         return s;
       },
       Want::kActionFailed, Want::kActionFailed, "job not running"},
      // Live, only on replica groups (live_migrate.cc): this job is a faultline.Job.
      {"MigrateMachinesMovesAMachineToAStandbyInTheSimulatorOnlyForADdpJob",
       [](ActionId* watch) {
         return started_then(watch, [](World& w) {
           return w.act(MigrateMachines{{0}, "failure predicted on 0"});
         });
       },
       Want::kEvent, Want::kActionFailed, "live migration needs replica groups"},
      {"MigrateMachinesWithoutARunningJobIsRefused",
       [](ActionId* watch) {
         Script s;
         s.start = [watch](World& w) { *watch = w.act(MigrateMachines{{0}, "too early"}); };
         return s;
       },
       Want::kActionFailed, Want::kActionFailed, "job not running"},
      // An in-place restart (FlashRecovery): the simulator restarts the survivors' job in
      // place, live mode as an ordinary start (noted); neither refuses it.
      {"InPlaceStartJobRestartsTheJobInBothWorlds",
       [](ActionId* watch) {
         return started_then(watch, [](World& w) {
           w.act(StopJob{"a failure"});
           StartJob again{"replacements ready"};
           again.in_place = true;
           return w.act(again);
         });
       },
       Want::kEvent, Want::kEvent},
      {"AvoidMachinesIsAPreferenceBothBackendsTakeSilently",
       [](ActionId* watch) {
         return started_then(watch, [](World& w) {
           return w.act(AvoidMachines{{4, 1}, "host scoring"});
         });
       },
       Want::kNothing, Want::kNothing},
      {"StandbyShortfallIsFilledNotRefused",
       [](ActionId* watch) {
         Script s;
         s.start = [watch](World& w) {
           w.act(EvictMachines{{0, 1}, "two slots, one standby"});
           *watch = w.act(AcquireMachines{AcquireMode::kStandby, {}, "refill"});
         };
         return s;
       },
       // The simulator takes the second machine from the scheduler; live mode waits for one,
       // which its repair pipeline brings: an evicted machine that passes its check (10 s).
       Want::kEvent, Want::kEvent},
  };
}

bool answered(ActionId id) {
  for (const auto& s : g_seen) {
    if (auto* x = std::get_if<JobStopped>(&s.event); x && x->action == id) return true;
    if (auto* x = std::get_if<MachinesReady>(&s.event); x && x->action == id) return true;
    if (auto* x = std::get_if<JobStarted>(&s.event); x && x->action == id) return true;
  }
  return false;
}

void check(const Row& row, Want want, ActionId watch, const char* world) {
  SCOPED_TRACE(std::string(world) + ": " + row.name);
  ASSERT_NE(watch, 0u) << "the row's action was never taken";
  std::string why;
  const bool f = failed(watch, &why);
  switch (want) {
    case Want::kActionFailed:
      EXPECT_TRUE(f) << "no ActionFailed";
      EXPECT_NE(why.find(row.failure), std::string::npos) << why;
      break;
    case Want::kEvent:
      EXPECT_FALSE(f) << why;
      EXPECT_TRUE(answered(watch)) << "no outcome event";
      break;
    case Want::kNothing:
      EXPECT_FALSE(f) << why;
      EXPECT_FALSE(answered(watch));
      break;
  }
}

TEST(WorldConformance, EveryRowOnSimWorldAndLiveWorld) {
  const Registry reg = registry();
  for (const Row& row : rows()) {
    ActionId watch = 0;
    Script s = row.make(&watch);
    Sim::get().run(s);
    check(row, row.sim, watch, "SimWorld");

    watch = 0;
    Script l = row.make(&watch);
    Live live(reg);
    live.run(l, 120);
    check(row, row.live, watch, "LiveWorld");
  }
}

// The contract's refusals (policies/api/refusals.h) are the same in both Worlds, word for
// word: one script takes each refused action at the same point of a run (before the
// start, while the job runs, with slot 1 empty, after an EndRun), and both Worlds answer
// each with ActionFailed and the same reason.
TEST(WorldConformance, BothWorldsRefuseTheSameActionsWithTheSameReason) {
  struct Ask {
    std::string what;
    ActionId id = 0;
    std::string want;
  };
  const auto grouped = [](ProbeKind test, std::vector<MachineSet> groups) {
    RunProbe p{test, {0, 1, 2, 3}, Duration::seconds(30), "pairwise check"};
    p.groups = std::move(groups);
    return p;
  };
  const auto script = [&](std::vector<Ask>* asks) {
    const auto ask = [asks](World& w, std::string what, Action a, std::string want) {
      asks->push_back({std::move(what), w.act(std::move(a)), std::move(want)});
    };
    auto done = std::make_shared<bool>(false);
    Script s;
    s.start = [ask](World& w) {
      ask(w, "mitigate before a start", MitigateSlowdown{0, Mitigation::kRebalance, "early"},
          "job not running");
      ask(w, "inspection every 0 s", EnableInspection{"gpu", Duration::zero(), "bad"},
          "inspection interval must be positive");
      w.act(StartJob{"first start"});
    };
    s.on = [ask, done, grouped](const Event& e, World& w) {
      if (!std::holds_alternative<JobStarted>(e) || *done) return;
      *done = true;
      ask(w, "start while running", StartJob{"again"}, "job already running");
      ask(w, "mitigate a slot the job does not have",
          MitigateSlowdown{7, Mitigation::kReconfigure, "no such slot"}, "slot 7 has no machine");
      ask(w, "groups for gpu_diag", grouped(ProbeKind::kGpuDiag, {{0, 1}}),
          "groups: only inter_all_gather runs per group");
      ask(w, "a one-machine group", grouped(ProbeKind::kInterAllGather, {{0, 1}, {2}}),
          "groups[1]: a group needs at least two machines");
      ask(w, "a machine outside the fleet", grouped(ProbeKind::kInterAllGather, {{0, 100000}}),
          "groups[0]: machine 100000 is not in the fleet");
      ask(w, "a machine in two groups", grouped(ProbeKind::kInterAllGather, {{0, 1}, {1, 2}}),
          "groups[1]: machine 1 is in groups[0] already (a machine joins one group)");
      w.act(EvictMachines{{1}, "empty slot 1"});
      ask(w, "start with slot 1 empty", StartJob{"with a hole"},
          "cannot start: slot 1 has no machine");
      ask(w, "hot update with slot 1 empty", HotUpdate{"v2", "with a hole"},
          "cannot start: slot 1 has no machine");
      ask(w, "roll back with slot 1 empty", RollBack{"with a hole"},
          "cannot start: slot 1 has no machine");
      w.act(EndRun{"code_or_data", "the same incident everywhere"});
      ask(w, "start after EndRun", StartJob{"again"}, "the run was ended: code_or_data");
      ask(w, "acquire after EndRun", AcquireMachines{AcquireMode::kStandby, {}, "refill"},
          "the run was ended: code_or_data");
      ask(w, "hot update after EndRun", HotUpdate{"v2", "fix"}, "the run was ended: code_or_data");
      ask(w, "roll back after EndRun", RollBack{"back"}, "the run was ended: code_or_data");
    };
    return s;
  };
  const auto reasons = [](const std::vector<Ask>& asks, const char* world) {
    std::vector<std::string> out;
    for (const Ask& a : asks) {
      std::string why;
      EXPECT_TRUE(failed(a.id, &why)) << world << ": " << a.what << " was not refused";
      EXPECT_EQ(why, a.want) << world << ": " << a.what;
      out.push_back(why);
    }
    return out;
  };
  std::vector<Ask> sim_asks;
  Script s = script(&sim_asks);
  Sim::get().run(s);
  ASSERT_EQ(sim_asks.size(), 15u) << "the script did not reach its end in SimWorld";
  const auto sim = reasons(sim_asks, "SimWorld");

  const Registry reg = registry();
  Live live(reg);
  std::vector<Ask> live_asks;
  Script l = script(&live_asks);
  live.run(l, 10);
  ASSERT_EQ(live_asks.size(), 15u) << "the script did not reach its end in LiveWorld";
  const auto lv = reasons(live_asks, "LiveWorld");
  EXPECT_EQ(sim, lv);
}

// MachinesReady lists the machines newly placed: the standby (machine 4) into slot 2.
TEST(WorldConformance, MachinesReadyListsTheMachinesNewlyPlaced) {
  auto script = [](ActionId* watch) {
    Script s;
    s.start = [watch](World& w) {
      w.act(EvictMachines{{2}, "slot 2"});
      *watch = w.act(AcquireMachines{AcquireMode::kStandby, {2}, "standby"});
    };
    return s;
  };
  ActionId watch = 0;
  Script s = script(&watch);
  Sim::get().run(s);
  auto ready = seen<MachinesReady>();
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].action, watch);
  EXPECT_EQ(ready[0].machines, MachineSet{4});

  const Registry reg = registry();
  Live live(reg);
  Script l = script(&watch);
  live.run(l, 10);
  ready = seen<MachinesReady>();
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].machines, MachineSet{4});
}

// Timers at one instant fire in the order set; cancelling a fired timer does nothing.
TEST(WorldConformance, TimersFireInTheOrderSetAndCancellingAFiredOneIsHarmless) {
  auto script = [] {
    Script s;
    s.start = [](World& w) {
      w.set_timer(Duration::seconds(5), 2);
      w.set_timer(Duration::seconds(5), 1);
      const TimerId gone = w.set_timer(Duration::seconds(5), 3);
      w.cancel_timer(gone);
      w.set_timer(Duration::seconds(1), 0);
    };
    s.on = [](const Event& e, World& w) {
      if (auto* t = std::get_if<TimerFired>(&e); t && t->tag == 0) w.cancel_timer(t->timer);
    };
    return s;
  };
  auto tags = [] {
    std::vector<std::uint64_t> out;
    for (const auto& t : seen<TimerFired>()) out.push_back(t.tag);
    return out;
  };
  const std::vector<std::uint64_t> want{0, 2, 1};
  Script s = script();
  Sim::get().run(s);
  EXPECT_EQ(tags(), want) << "SimWorld";
  const Registry reg = registry();
  Live live(reg);
  Script l = script();
  live.run(l, 10);
  EXPECT_EQ(tags(), want) << "LiveWorld";
  // FakeWorld, for unit tests, keeps the same order.
  ClusterSpec spec;
  spec.machines = 4;
  testing::FakeWorld fake(spec);
  ScriptPolicy p;
  Script f = script();
  g_script = &f;
  g_seen.clear();
  p.start(fake);
  fake.advance_to(Instant{Duration::seconds(10).ns}, p);
  EXPECT_EQ(tags(), want) << "FakeWorld";
}

// Live mode rounds a checkpoint interval up to whole steps, and rolls back to the first
// version when none has run 20 steps.
TEST(WorldConformance, LiveRoundsCheckpointsToWholeStepsAndRollsBackToTheFirstVersion) {
  const Registry reg = registry();
  Live live(reg);
  Script s;
  s.start = [](World& w) {
    w.act(SetCheckpointPlan{Duration::seconds(3), Duration::zero(), CheckpointTier::kRemote,
                            "3 s = 1.5 steps"});
    w.act(StartJob{"start"});
  };
  bool once = false;
  s.on = [&](const Event& e, World& w) {
    if (!std::holds_alternative<JobStarted>(e) || once) return;
    once = true;
    w.act(HotUpdate{"v2", "new code"});
    w.act(RollBack{"back"});
  };
  live.run(s, 30);
  EXPECT_EQ(live.journal.state().ckpt_every, 2);
  EXPECT_EQ(live.journal.state().version, "v1");
  Live unknown(reg);
  Script u;
  ActionId id = 0;
  u.start = [&](World& w) { id = w.act(HotUpdate{"v9", "no such version"}); };
  unknown.run(u, 5);
  std::string why;
  EXPECT_TRUE(failed(id, &why));
  EXPECT_NE(why.find("unknown code version"), std::string::npos) << why;
}

}  // namespace
}  // namespace faultline
