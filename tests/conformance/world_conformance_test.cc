// The World contract (policies/api/world.h, action.h) as a table: each row is a scripted
// policy and what it must observe, run against SimWorld (in process, through
// ReplicaRunner) and LiveWorld (a fake link answering as agents do, a manual reactor
// clock), and where it applies FakeWorld. Where the Worlds differ by design (live mode
// has no oracle, rounds checkpoints to whole steps) the row says so per World.
//
// Also here, because it needs both Worlds: the same detector, fed the sample stream of a
// simulated run and the one live mode delivers for the same step timeline, reaches the
// same conclusions.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <set>
#include <simgrid/s4u.hpp>
#include <string>
#include <vector>

#include "eventlog/event_log.h"
#include "policies/api/refusals.h"
#include "policies/builtin.h"
#include "policies/detection/detectors.h"
#include "realexec/controller/journal.h"
#include "realexec/controller/live_world.h"
#include "realexec/live_config.h"
#include "realexec/net/messages.h"
#include "realexec/net/reactor.h"
#include "scenarios/scenario.h"
#include "sim/network.h"
#include "sim/runner.h"
#include "tests/support/fake_world.h"
#include "traces/time_phases.h"

namespace faultline {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// ---------------------------------------------------------------- the scripted policy

struct Seen {
  Instant at;
  Event event;
};

// What a row does: at the start, and on each event. Both get the World.
struct Script {
  std::function<void(World&)> start;
  std::function<void(const Event&, World&)> on = [](const Event&, World&) {};
};

Script* g_script = nullptr;
std::vector<Seen> g_seen;

class ScriptPolicy final : public Policy {
 public:
  const PolicyInfo& info() const override { return script_info(); }
  void start(World& w) override { g_script->start(w); }
  void on_event(const Event& e, World& w) override {
    g_seen.push_back({w.now(), e});
    g_script->on(e, w);
  }
  static const PolicyInfo& script_info() {
    static const PolicyInfo info{
        "conformance-script", "1", "a scripted policy for the World conformance suite", {}};
    return info;
  }
};

Registry registry() {
  Registry r = policies::builtin_registry();
  r.add(ScriptPolicy::script_info(),
        [](const Params&) { return std::make_unique<ScriptPolicy>(); });
  return r;
}

template <class T>
std::vector<T> seen() {
  std::vector<T> out;
  for (const auto& s : g_seen)
    if (auto* x = std::get_if<T>(&s.event)) out.push_back(*x);
  return out;
}

// ---------------------------------------------------------------- the Worlds

// Four job machines (PP 2 x DP 2, one GPU each) and one warm standby, steps of 2 s.
constexpr double kStepS = 2;

// The simulated run's faults (a trace, in order, on machine 0): steps slow from 2 s to
// 3 s at 600 s, and the counter stops at 890 s. The rows act long before.
constexpr double kSlowAt = 600, kHangAt = 890;

// SimWorld: one SimGrid engine per process, so one runner for every row; a row is a replica.
struct Sim {
  Registry reg = registry();
  scenarios::Scenario sc;
  std::unique_ptr<sim::ReplicaRunner> runner;
  std::uint64_t replica = 0;
  Sim() {
    const json doc = {{"description", "World conformance: four machines, one standby, no faults"},
                      {"seed", 3},
                      {"replicas", 1},
                      {"cluster",
                       {{"machines", 4},
                        {"gpus_per_machine", 1},
                        {"rack_size", 4},
                        {"storage_hosts", 1},
                        {"standby_machines", 1},
                        {"scheduler",
                         {{"requeue_base_s", 60},
                          {"requeue_per_machine_s", 0},
                          {"reschedule_base_s", 30},
                          {"reschedule_per_machine_s", 0}}}}},
                      {"job",
                       {{"tp", 1},
                        {"pp", 2},
                        {"dp", 2},
                        {"step_time_s", kStepS},
                        {"checkpoint_bytes_per_machine", 0},
                        {"image_bytes", 0},
                        {"init_s", 0},
                        {"horizon_days", 0.05},
                        {"collective_timeout_s", 0}}},
                      {"faults",
                       {{"categories", json::array({{{"name", "slow"},
                                                     {"rate_per_machine_day", 0},
                                                     {"symptom", "slowdown"},
                                                     {"slowdown_factor", 1.5},
                                                     {"duration_s", 1e6},
                                                     {"persistent", false}},
                                                    {{"name", "hang"},
                                                     {"rate_per_machine_day", 0},
                                                     {"symptom", "hang"},
                                                     {"persistent", false}}})}}},
                      {"policy", {{"stack", "conformance-script"}}}};
    sc = scenarios::parse_scenario(doc.dump(), "conformance.json", {}, reg);
    auto tl = std::make_shared<traces::FleetTimelines>();
    tl->nodes.resize(4);
    tl->category_scope = {traces::Scope::kNode, traces::Scope::kNode};
    tl->window_end_s = 0.05 * 86400;
    tl->trace_nodes = 4;
    tl->nodes[0] = {{kSlowAt, 0}, {kHangAt, 1}};
    tl->faults = 2;
    scenarios::TraceSource ts;
    ts.mode = "replay";
    ts.node_order = "in_order";
    ts.timelines = std::move(tl);
    sc.trace = std::move(ts);
    runner = std::make_unique<sim::ReplicaRunner>(sc, reg);
  }
  static Sim& get() {
    static Sim s;
    return s;
  }
  void run(Script& script) {
    g_script = &script;
    g_seen.clear();
    runner->run(replica++, {});
  }
};

// An agent's side of the link, answered at once: kill, launch (every rank reports it
// started from step 0), inspect.
class FakeLink final : public live::MachineLink {
 public:
  bool send(MachineId m, const json& msg) override {
    sent.push_back({m, msg});
    return true;
  }
  bool connected(MachineId) const override { return true; }
  double silent_s(MachineId m) const override { return silent.count(m) ? silent.at(m) : 0; }
  std::deque<std::pair<MachineId, json>> sent;
  std::map<MachineId, double> silent;  // agents frozen: their requests are never answered
};

struct Live {
  fs::path dir;
  live::Reactor reactor{live::ManualClock{}};
  FakeLink link;
  live::LiveConfig config;
  live::Journal journal;
  traces::EventLogWriter log;
  std::unique_ptr<live::LiveWorld> world;
  std::string probe_hash = "h";    // what agents answer a bit-wise probe; empty: no hash (it fails)
  std::int64_t restored_step = 0;  // the step every rank says it started from

  // `job`: fields that replace the job's (replica groups: pp 1, dp 4, replica_groups).
  Live(const Registry& reg, const std::string& stack = "conformance-script",
       json params = json::object(), const json& job = json::object())
      : dir(make_dir()),
        config(live::parse_live_config(config_text(dir, stack, params, job),
                                       (dir / "live.json").string(), reg)),
        journal((dir / "journal.json").string()),
        log((dir / "events.jsonl").string()) {
    std::string err;
    EXPECT_TRUE(journal.load(&err)) << err;
    world = std::make_unique<live::LiveWorld>(config, reg, reactor, link, log, journal);
  }
  ~Live() {
    world.reset();
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  static fs::path make_dir() {
    char tmpl[] = "/tmp/faultline-conformance-XXXXXX";
    return fs::path(::mkdtemp(tmpl));
  }
  static std::string config_text(const fs::path& dir, const std::string& stack, const json& params,
                                 const json& job) {
    json machines = json::array();
    for (int i = 0; i < 4; ++i)
      machines.push_back({{"name", "m" + std::to_string(i)},
                          {"addr", "127.0.0.1"},
                          {"workdir", "m" + std::to_string(i)}});
    const json doc = {
        {"controller", "127.0.0.1:1"},
        {"token_file", "token"},
        {"machines", machines},
        {"standby", json::array({{{"name", "s0"}, {"addr", "127.0.0.1"}, {"workdir", "s0"}}})},
        {"job",
         {{"versions", {{"v1", {"/bin/true"}}, {"v2", {"/bin/true"}}}},
          {"version", "v1"},
          {"gpus_per_machine", 1},
          {"tp", 1},
          {"pp", 2},
          {"dp", 2},
          {"master_port", 29500},
          {"nominal_step_time_s", kStepS}}},
        {"policy", {{"stack", stack}, {"params", params}}},
        // No reference runs here (a manual clock does not reap children): the bit-wise
        // probe's answer is the agents' majority.
        {"trainjob_bin", "/nonexistent/faultline-trainjob"},
        {"state_dir", dir.string()}};
    json out = doc;
    out["job"].update(job);
    return out.dump();
  }
  // Answers what the controller sent, as agents would, until nothing is left.
  void pump() {
    while (!link.sent.empty()) {
      auto [m, msg] = link.sent.front();
      link.sent.pop_front();
      if (link.silent.count(m)) continue;
      const std::string type = msg.value("type", "");
      json done{{"type", "done"}, {"req", msg["req"]}, {"ok", true}};
      if (type == "probe" && !probe_hash.empty()) done["hash"] = probe_hash;
      world->on_agent_message(m, done);
      if (type == "launch")
        for (const auto& r : msg["ranks"])
          world->on_agent_message(
              m, {{"type", "report"},
                  {"gen", msg["gen"]},
                  {"report", {{"type", "started"}, {"rank", r["rank"]}, {"step", restored_step}}}});
    }
  }
  void run(Script& script, double seconds) {
    g_script = &script;
    g_seen.clear();
    world->start();
    advance(seconds);
  }
  // Moves the clock, answering the agents' side at every step.
  void advance(double seconds) {
    const Instant end = reactor.now() + Duration::seconds(seconds);
    pump();
    while (reactor.now() < end) {
      reactor.advance_to(std::min(end, reactor.now() + Duration::millis(100)));
      pump();
    }
  }
};

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

bool failed(ActionId id, std::string* why) {
  for (const auto& f : seen<ActionFailed>())
    if (f.action == id) {
      *why = f.reason;
      return true;
    }
  return false;
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

// A start that is abandoned (stopped while restoring its checkpoint) stops its transfers:
// the restore of the next start has the storage link to itself, so it takes exactly what a
// restore on an idle network takes, by the closed form of max-min sharing. SimGrid allows
// one engine per process, so the run happens in a fresh process (a death-test child).
TEST(SimWorldTransfers, AnAbandonedRestoreStopsLoadingTheNetwork) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto body = [] {
    const json doc = {
        {"description", "eight machines restoring 50 GB each from one storage host"},
        {"seed", 1},
        {"replicas", 1},
        {"cluster",
         {{"machines", 8},
          {"gpus_per_machine", 1},
          {"rack_size", 8},
          {"storage_hosts", 1},
          {"standby_machines", 0},
          {"storage_gbps", 400},
          {"link_latency_us", 2}}},
        {"job",
         {{"tp", 1},
          {"pp", 2},
          {"dp", 4},
          {"step_time_s", 2},
          {"checkpoint_bytes_per_machine", 50e9},
          {"image_bytes", 0},
          {"init_s", 0},
          {"horizon_days", 0.01},
          {"collective_timeout_s", 0}}},
        {"faults",
         {{"categories", json::array({{{"name", "crash"}, {"rate_per_machine_day", 0}}})}}},
        {"policy", {{"stack", "conformance-script"}}}};
    const Registry reg = registry();
    const scenarios::Scenario sc = scenarios::parse_scenario(doc.dump(), "abandon.json", {}, reg);
    // Restore: 8 flows share the 50 GB/s storage link; each also loads it with 5% of its
    // rate in the other direction (SimGrid's cross-traffic), so all end at
    // 8 x 1.05 x 50 GB / 50 GB/s, after the route's latency (4 links of 2 us).
    const double want = 8 * 1.05 * 50e9 / 50e9 + 4 * 2e-6;
    std::vector<double> took;  // seconds from each StartJob to its JobStarted
    double started_at = 0;
    Script s;
    s.start = [&](World& w) {
      started_at = 0;
      w.act(StartJob{"first: abandoned half-way through its restore"});
      w.set_timer(Duration::seconds(4), 1);
    };
    s.on = [&](const Event& e, World& w) {
      auto restart = [&](const char* why) {
        w.act(StopJob{why});
        started_at = static_cast<double>(w.now().ns) * 1e-9;
        w.act(StartJob{why});
      };
      if (auto* t = std::get_if<TimerFired>(&e); t && t->tag == 1) {
        if (!took.empty()) std::exit(3);  // the first restore was not under way at 4 s
        restart("second: right after the abandoned one");
      } else if (std::holds_alternative<JobStarted>(e)) {
        took.push_back(static_cast<double>(w.now().ns) * 1e-9 - started_at);
        if (took.size() == 1) restart("third: on a network nobody else uses");
      }
    };
    g_script = &s;
    g_seen.clear();
    sim::ReplicaRunner runner(sc, reg);
    runner.run(0, {});
    std::fprintf(stderr, "restores took");
    for (double t : took) std::fprintf(stderr, " %.9f s", t);
    std::fprintf(stderr, "; closed form %.9f s\n", want);
    bool ok = took.size() == 2;
    for (double t : took) ok = ok && std::abs(t - want) < 1e-6;
    std::exit(ok ? 0 : 1);
  };
  EXPECT_EXIT(body(), ::testing::ExitedWithCode(0), "restores took");
}

// The closed form of a batch's time on an idle network (what replaces SimGrid for
// whole-job batches, whose SimGrid cost is quadratic) against SimGrid itself, on batches
// small enough to run through both: whole-job restores (one storage host's link shared),
// peer copies (same-rack pairs cross their ToR link twice), pulls to new machines and
// standbys (shorter routes, so other sharing weights), mixed sizes (several completion
// waves) and a lone transfer (bounded by the TCP window, not a link).
TEST(SimWorldTransfers, TheClosedFormAgreesWithSimGridToTheNanosecond) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto body = [] {
    ClusterSpec spec;
    spec.machines = 96;
    spec.rack_size = 8;
    spec.standby_machines = 4;
    spec.storage_hosts = 3;
    ClusterView view(spec);
    sim::Platform platform(view);
    sim::FlowNet flows(platform);
    using sim::Transfer;
    std::vector<std::pair<std::string, std::vector<Transfer>>> cases;
    const int n = spec.machines;
    for (double bytes : {50e9, 3.3e9}) {
      std::vector<Transfer> b;
      for (int s = 0; s < n; ++s)
        b.push_back({platform.storage_host(s % 3), platform.slot_host(s), bytes});
      cases.emplace_back("whole-job restore " + std::to_string(bytes), b);
    }
    {
      std::vector<Transfer> b;
      for (int s = 0; s < n; s += 3)
        b.push_back({platform.slot_host((s + 1) % n), platform.slot_host(s), 20e9});
      cases.emplace_back("peer copies", b);
    }
    {
      std::vector<Transfer> b;
      for (int s : {5, 17, 40, 41, 90})
        b.push_back({platform.storage_host(s % 3), platform.slot_host(s), 8e9});
      for (int i = 0; i < 4; ++i)
        b.push_back({platform.storage_host(i % 3), platform.standby_host(i), 8e9});
      b.push_back({platform.standby_host(0), platform.slot_host(7), 30e9});
      cases.emplace_back("pulls to new machines and standbys", b);
    }
    {
      std::vector<Transfer> b;
      for (int s = 0; s < n; ++s)
        b.push_back({platform.storage_host(s % 3), platform.slot_host(s), 1e9 * (1 + s % 5)});
      cases.emplace_back("mixed sizes", b);
    }
    cases.emplace_back("one transfer",
                       std::vector<Transfer>{{platform.slot_host(3), platform.slot_host(60), 1e9}});
    std::vector<std::int64_t> got(cases.size(), -1);
    simgrid::s4u::Actor::create("driver", platform.control_host(), [&] {
      for (std::size_t i = 0; i < cases.size(); ++i) {
        bool finished = false;
        flows.start(cases[i].second, sim::FlowNet::key_of(cases[i].second), [&, i](std::int64_t d) {
          got[i] = d;
          finished = true;
        });
        while (!finished) simgrid::s4u::this_actor::sleep_for(1);
      }
    });
    platform.engine().run();
    bool ok = true;
    for (std::size_t i = 0; i < cases.size(); ++i) {
      const std::int64_t closed = flows.fluid_duration(cases[i].second);
      std::fprintf(stderr, "%s: SimGrid %lld ns, closed form %lld ns\n", cases[i].first.c_str(),
                   static_cast<long long>(got[i]), static_cast<long long>(closed));
      ok = ok && got[i] > 0 && std::llabs(closed - got[i]) <= 1;
    }
    std::exit(ok ? 0 : 1);
  };
  EXPECT_EXIT(body(), ::testing::ExitedWithCode(0), "closed form");
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

// ---------------------------------------------------------------- one detector, two Worlds

// The samples a World delivered, and the findings a fresh realtime detector draws from
// them, with its checks run when it asks (as the stack's timer does).
struct Finding {
  double at_s;
  std::string what;
  std::int64_t step = -1;
};
std::vector<Finding> findings_of(const std::vector<std::pair<Instant, StepSample>>& stream,
                                 Instant end) {
  const Registry reg = registry();
  Params p;
  Params::resolve(reg.find("byterobust")->params, {{"stall_window_s", 120}, {"slow_for_s", 60}},
                  &p);
  auto d = policies::modules().make_detector("realtime", p);
  std::vector<Finding> out;
  auto note = [&](const std::optional<policies::Finding>& f, Instant t) {
    if (!f) return;
    Finding x{t.to_seconds(), policies::describe(*f)};
    if (auto* st = std::get_if<policies::ProgressStalled>(&*f)) x.step = st->last_step;
    x.what = x.what.substr(
        0, x.what.find(' ', x.what.find(' ') + 1));  // "progress stalled", "step time", ...
    out.push_back(x);
  };
  d->restart(Instant{}, 0);
  for (std::size_t i = 0; i <= stream.size(); ++i) {
    const Instant next = i < stream.size() ? stream[i].first : end;
    while (d->next_check() <= next) {
      const Instant t = d->next_check();
      note(d->check(t), t);
    }
    if (i < stream.size()) note(d->observe(stream[i].second, stream[i].first), stream[i].first);
  }
  return out;
}

// ---------------------------------------------------------------- live mode's repair pipeline

std::vector<std::string> notes_of(const fs::path& dir) {
  std::vector<std::string> out;
  std::ifstream in(dir / "events.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    const json r = json::parse(line, nullptr, false);
    if (r.is_object() && r.value("kind", "") == "note") out.push_back(r.value("text", ""));
  }
  return out;
}

int count_with(const std::vector<std::string>& notes, const std::string& part) {
  int n = 0;
  for (const auto& t : notes) n += t.find(part) != std::string::npos;
  return n;
}

// Every 15 s the machine in slot 2 is evicted and a standby takes its place. Machines taken
// out pass their repair check 10 s later and rejoin the pool, so m2 and s0 take turns, until
// each has been taken out retire_after = 3 times and is retired.
TEST(LiveRepair, EvictedMachinesRejoinThePoolAfterTheirCheckAndRetireAfterThreeStrikes) {
  Script s;
  s.start = [](World& w) { w.set_timer(Duration::seconds(1), 1); };
  s.on = [](const Event& e, World& w) {
    if (!std::holds_alternative<TimerFired>(e)) return;
    w.act(EvictMachines{{w.cluster().machine_in(2)}, "drill"});
    w.act(AcquireMachines{AcquireMode::kStandby, {2}, "refill"});
    w.set_timer(Duration::seconds(15), 1);
  };
  const Registry reg = registry();
  Live live(reg);
  live.run(s, 100);
  const auto notes = notes_of(live.dir);
  EXPECT_EQ(count_with(notes, "m2 passed its repair check"), 2);
  EXPECT_EQ(count_with(notes, "s0 passed its repair check"), 2);
  EXPECT_EQ(count_with(notes, "m2 retired: taken out of the job 3 times"), 1);
  EXPECT_EQ(count_with(notes, "s0 retired: taken out of the job 3 times"), 1);
  const json st = live.world->status();
  EXPECT_EQ(st["retired"], json::array({"m2", "s0"}));
  EXPECT_TRUE(st["standby"].empty());
  EXPECT_TRUE(st["slots"][2].is_null()) << "no machine left to fill slot 2";
  // An operator's repair returns a retired machine and clears its strikes.
  EXPECT_TRUE(live.world->repaired(2));
  live.advance(1);
  EXPECT_EQ(live.world->status()["retired"], json::array({"s0"}));
  EXPECT_EQ(live.world->cluster().machine_in(2), 2)
      << "the waiting refill took the repaired machine";
}

// A machine the policy retires (EvictMachines::retire, lemon retirement) gets no repair
// check and never rejoins the pool, whatever its strikes; an operator's repair returns it.
TEST(LiveRepair, AMachineThePolicyRetiresIsNotCheckedAndDoesNotRejoin) {
  Script s;
  s.start = [](World& w) {
    w.act(EvictMachines{{1}, "a lemon", Mechanism::kRealtimeEviction, true});
    w.act(EvictMachines{{2}, "an ordinary eviction", Mechanism::kRealtimeEviction});
  };
  const Registry reg = registry();
  Live live(reg);
  live.run(s, 40);
  const auto notes = notes_of(live.dir);
  EXPECT_EQ(count_with(notes, "m1 retired: the policy retired it (a lemon)"), 1);
  EXPECT_EQ(count_with(notes, "m1 passed its repair check"), 0);
  EXPECT_EQ(count_with(notes, "m2 passed its repair check"), 1);
  const json st = live.world->status();
  EXPECT_EQ(st["retired"], json::array({"m1"}));
  EXPECT_EQ(st["standby"], json::array({"s0", "m2"}));
  EXPECT_TRUE(live.world->repaired(1));
  live.advance(1);
  EXPECT_TRUE(live.world->status()["retired"].empty());
}

// A check that keeps failing (the bit-wise probe without a matching hash) is retried
// max_checks times, then the machine is left to an operator, who returns it.
TEST(LiveRepair, AMachineThatKeepsFailingItsCheckIsLeftToAnOperator) {
  Script s;
  s.start = [](World& w) { w.act(EvictMachines{{1}, "suspect"}); };
  const Registry reg = registry();
  Live live(reg);
  live.probe_hash = "";
  live.run(s, 10 + 3 * 61);
  const auto notes = notes_of(live.dir);
  EXPECT_EQ(count_with(notes, "m1 failed its repair check (bit-wise test failed"), 2)
      << "then retried";
  EXPECT_EQ(count_with(notes, "m1 failed its repair check 3 times"), 1);
  EXPECT_EQ(count_with(notes, "left to an operator"), 1);
  const json st = live.world->status();
  ASSERT_EQ(st["repairing"].size(), 1u);
  EXPECT_EQ(st["repairing"][0]["state"], "left to an operator");
  EXPECT_TRUE(live.world->repaired(1));
  EXPECT_TRUE(live.world->status()["repairing"].empty());
  EXPECT_EQ(live.world->status()["standby"], json::array({"s0", "m1"}));
}

// A standby whose agent was lost leaves the pool, and rejoins once its agent is back and
// it passed its check (it never failed the job: no strike).
TEST(LiveRepair, AStandbyWhoseAgentComesBackRejoinsThePool) {
  Script s;
  s.start = [](World&) {};
  const Registry reg = registry();
  Live live(reg);
  live.run(s, 1);
  live.world->on_agent_lost(4, "connection reset");
  EXPECT_TRUE(live.world->status()["standby"].empty());
  live.advance(30);
  EXPECT_TRUE(live.world->status()["standby"].empty()) << "no check while its agent is away";
  live.world->on_agent_connected(4, live::Auth{});
  live.advance(11);
  EXPECT_EQ(live.world->status()["standby"], json::array({"s0"}));
  EXPECT_EQ(count_with(notes_of(live.dir), "s0 passed its repair check"), 1);
  EXPECT_TRUE(live.world->status()["retired"].empty());
}

// A machine out of the job and out of the pool (evicted, its repair check pending) whose
// agent is lost has nothing for the policy to decide, but the loss happened: the event log
// notes it, as it notes a lost standby's (the storm at 2,000 agents: a rack partitioned
// while one of its machines awaited its check left no trace of that machine at all).
TEST(LiveRepair, AnEvictedMachinesLostAgentIsNotedWithoutAnAlert) {
  Script s;
  s.start = [](World& w) { w.act(EvictMachines{{1}, "drill"}); };
  int alerts = 0;
  s.on = [&](const Event& e, World&) { alerts += std::holds_alternative<InspectionAlert>(e); };
  const Registry reg = registry();
  Live live(reg);
  live.run(s, 1);
  live.world->on_agent_lost(1, "peer closed the connection");
  live.advance(1);
  EXPECT_EQ(count_with(notes_of(live.dir),
                       "agent of m1 lost (peer closed the connection); it is out of the job"),
            1);
  EXPECT_EQ(alerts, 0) << "not the job's machine: nothing to decide";
  live.world->on_agent_connected(1, live::Auth{});
  live.advance(11);
  EXPECT_EQ(count_with(notes_of(live.dir), "m1 passed its repair check"), 1);
}

TEST(DetectorAcrossWorlds, TheSameSampleTimelineGivesTheSameFindingsInSimulationAndLive) {
  // The simulated run (the scenario's trace: slower steps at 600 s, a hang at 890 s):
  // the samples SimWorld delivers to a policy that only watches.
  const double slow_at = kSlowAt, hang_at = kHangAt, end_s = 1500;
  auto at = [](double s) { return Instant{Duration::seconds(s).ns}; };
  Script watcher;
  watcher.start = [](World& w) {
    w.act(WatchSteps{Duration::zero(), "samples"});
    w.act(StartJob{"start"});
  };
  Sim::get().run(watcher);
  std::vector<std::pair<Instant, StepSample>> sim;
  Instant sim_t0 = Instant::max();
  for (const auto& x : g_seen) {
    if (std::holds_alternative<JobStarted>(x.event) && sim_t0 == Instant::max()) sim_t0 = x.at;
    if (auto* smp = std::get_if<StepSample>(&x.event))
      sim.push_back({Instant{(x.at - sim_t0).ns}, *smp});
  }
  ASSERT_EQ(sim.size(), 3u) << "a sample at the start, at the slowdown and at the hang";
  EXPECT_EQ(sim[1].second.step_time_s, 3.0);
  EXPECT_TRUE(std::isinf(sim[2].second.step_time_s));
  const auto from_sim = findings_of(sim, at(end_s));

  // The live run of the same timeline: rank 0 reports every step, LiveWorld samples them
  // (WatchSteps every step) for the policy. The script records what it is given.
  const Registry reg = registry();
  Live live(reg);
  Script s;
  s.start = [](World& w) {
    w.act(WatchSteps{Duration::zero(), "samples"});
    w.act(StartJob{"start"});
  };
  live.run(s, 0.5);
  ASSERT_EQ(seen<JobStarted>().size(), 1u);
  const Instant t0 = live.reactor.now();
  const std::int64_t gen = live.journal.state().gen;
  double t = 0;
  for (std::int64_t step = 1;; ++step) {
    const double dt = t < slow_at ? 2.0 : 3.0;
    if (t + dt > hang_at) break;  // the step under way when the counter stops never ends
    t += dt;
    live.reactor.advance_to(t0 + Duration::seconds(t));
    live.world->on_agent_message(0, {{"type", "report"},
                                     {"gen", gen},
                                     {"report",
                                      {{"type", "step"},
                                       {"rank", 0},
                                       {"step", step},
                                       {"step_time_s", dt},
                                       {"loss", 1.0},
                                       {"grad_norm", 1.0}}}});
  }
  live.reactor.advance_to(t0 + Duration::seconds(end_s));
  std::vector<std::pair<Instant, StepSample>> from_live_stream;
  for (const auto& x : g_seen)
    if (auto* smp = std::get_if<StepSample>(&x.event))
      from_live_stream.push_back({Instant{(x.at - t0).ns}, *smp});
  ASSERT_EQ(from_live_stream.size(), 396u) << "one sample per step report";
  const auto from_live = findings_of(from_live_stream, at(end_s));

  // Slow steps reported slow_for after they began, again every slow_for until the hang;
  // then the stall, one window after the last step.
  ASSERT_FALSE(from_sim.empty());
  ASSERT_EQ(from_sim.size(), from_live.size())
      << "sim " << from_sim.size() << ", live " << from_live.size();
  for (std::size_t i = 0; i < from_sim.size(); ++i) {
    SCOPED_TRACE("finding " + std::to_string(i) + ": " + from_sim[i].what);
    EXPECT_EQ(from_sim[i].what, from_live[i].what);
    EXPECT_NEAR(from_sim[i].at_s, from_live[i].at_s, 3.0) << "within one step";
    if (from_sim[i].step >= 0) {
      EXPECT_NEAR(from_sim[i].step, from_live[i].step, 1);
    }
  }
  EXPECT_EQ(from_sim.back().what, "progress stalled");
}

// ---------------------------------------------------------------- what LiveWorld believes

// A LiveWorld whose job runs (every rank started from step 0), with step samples at every
// report, and what agents would send it.
struct RunningLive {
  Registry reg = registry();
  Live live{reg};
  Script script;
  std::int64_t gen = 0;
  RunningLive() {
    script.start = [](World& w) {
      w.act(WatchSteps{Duration::zero(), "samples"});
      w.act(StartJob{"start"});
    };
    live.run(script, 0.5);
    gen = live.journal.state().gen;
  }
  std::vector<std::string> refused;  // what on_agent_message refused (the controller notes it)
  void send(MachineId m, const json& msg) {
    try {
      live.world->on_agent_message(m, msg);
    } catch (const live::BadMessage& e) {
      refused.push_back(e.reason);
    }
  }
  bool was_refused(const std::string& part) const {
    for (const auto& x : refused)
      if (x.find(part) != std::string::npos) return true;
    return false;
  }
  void step(MachineId m, std::int64_t rank, std::int64_t step,
            std::optional<std::int64_t> claimed = std::nullopt) {
    send(m, {{"type", "report"},
             {"gen", gen},
             {"rank", rank},
             {"report",
              {{"type", "step"},
               {"rank", claimed.value_or(rank)},
               {"step", step},
               {"step_time_s", kStepS},
               {"loss", 1.0},
               {"grad_norm", 1.0}}}});
  }
  void exit(MachineId m, std::int64_t rank, int code, int signal, const std::string& signature) {
    send(m, {{"type", "exit"},
             {"gen", gen},
             {"rank", rank},
             {"code", code},
             {"signal", signal},
             {"signature", signature}});
  }
  void advance(double s) { live.advance(s); }
  std::vector<std::string> notes() const {
    std::vector<std::string> out;
    std::ifstream in(live.dir / "events.jsonl");
    for (std::string line; std::getline(in, line);) {
      const json r = json::parse(line, nullptr, false);
      if (r.is_object() && r.value("kind", "") == "note") out.push_back(r.value("text", ""));
    }
    return out;
  }
  bool noted(const std::string& part) const {
    for (const auto& n : notes())
      if (n.find(part) != std::string::npos) return true;
    return false;
  }
};

// A controller restarted from the journal another one left: on another boot (a reboot, a
// failover host) whose monotonic clock started over.
struct Restarted {
  live::Reactor reactor{live::ManualClock{}};  // the new boot's monotonic clock: zero
  live::Journal journal;
  std::unique_ptr<live::LiveWorld> world;
  Restarted(RunningLive& r, const std::function<void(json&)>& edit)
      : journal((r.live.dir / "journal.json").string()) {
    r.live.world.reset();
    const std::string path = (r.live.dir / "journal.json").string();
    std::ifstream in(path);
    json j = json::parse(in);
    in.close();
    edit(j);
    std::ofstream(path) << j.dump();
    std::string err;
    EXPECT_TRUE(journal.load(&err)) << err;
    world = std::make_unique<live::LiveWorld>(r.live.config, r.reg, reactor, r.live.link,
                                              r.live.log, journal);
  }
};

// Issue 37, item 4: the journal's time origin was a CLOCK_MONOTONIC value, so a controller
// restarted after a reboot or on another host reported negative run time (ETTR 0%, negative
// event times that `sim replay` rejects). The origin is on the wall clock now; run time
// never goes back, even when the new host's wall clock is behind.
TEST(LiveWorldBelief, RunTimeSurvivesARebootAndAFailover) {
  const std::int64_t second = 1000000000;
  {
    RunningLive r;
    Restarted after(r, [&](json& j) {
      j["origin_ns"] = std::int64_t{1000000} * second;  // the old boot had been up 11 days
      j["origin_unix_ns"] = live::wall_now_ns() - 100 * second;
      j["last_t_ns"] = 0;
    });
    EXPECT_NEAR(after.world->now().to_seconds(), 100, 2);
  }
  {
    RunningLive r;
    Restarted behind(r, [&](json& j) {
      j["origin_unix_ns"] = live::wall_now_ns() - 100 * second;
      j["last_t_ns"] = 1000 * second;  // the host that wrote it was 900 s ahead
    });
    EXPECT_NEAR(behind.world->now().to_seconds(), 1000, 1e-6);
  }
}

// Issue 52: on a host whose wall clock is behind, the first restart continued from the
// journal's run time, but the origin stayed on the clock that was ahead: every later restart
// on that host found the clock behind again and dropped its downtime (ETTR 110%).
TEST(LiveWorldBelief, RestartsOnAClockThatIsBehindKeepTheirDowntime) {
  const std::int64_t second = 1000000000;
  RunningLive r;
  {
    Restarted behind(r, [&](json& j) {
      j["origin_unix_ns"] = live::wall_now_ns() - 100 * second;
      j["last_t_ns"] = 1000 * second;  // the host that wrote it was 900 s ahead
    });
    EXPECT_NEAR(behind.world->now().to_seconds(), 1000, 1e-6);
    behind.world->start();  // saves the journal
  }
  // The controller is down for 50 s on the same host: as if its wall clock moved on 50 s.
  Restarted again(r, [&](json& j) {
    j["origin_unix_ns"] = j["origin_unix_ns"].get<std::int64_t>() - 50 * second;
  });
  EXPECT_NEAR(again.world->now().to_seconds(), 1050, 1);
}

// Issue 37, item 19: swapping two machines' order in the config and restarting gave 15 s of
// refused reports until a stall forced a restart: the journal's ids index the config, and
// the ids then named other machines. The journal keeps the names and ids are mapped back.
TEST(LiveWorldBelief, AReorderedConfigIsMappedBackByName) {
  RunningLive r;
  ASSERT_EQ(r.live.world->cluster().machine_in(1), 1);
  Restarted after(r, [](json& j) {
    // What a journal says after the operator swapped m1 and m2 in the config: slot 1 runs
    // the machine now listed third, slot 2 the one listed second.
    j["machine_names"] = json::array({"m0", "m2", "m1", "m3", "s0"});
  });
  EXPECT_EQ(after.world->cluster().machine_in(0), 0);
  EXPECT_EQ(after.world->cluster().machine_in(1), 2);
  EXPECT_EQ(after.world->cluster().machine_in(2), 1);
  EXPECT_EQ(after.world->cluster().machine_in(3), 3);
}

// Issue 37, item 17: a rank that died while the controller was down left no exit and no
// incident in the log: its exit had nowhere to go, and the restarted controller only said it
// could not adopt. The missing rank is a gap in the log now, said and counted as lost.
TEST(LiveWorldBelief, ARankThatEndedWhileNoControllerRanIsAGapInTheLog) {
  RunningLive r;
  const std::int64_t gen = r.gen;
  ASSERT_TRUE(r.live.journal.state().running);
  Restarted after(r, [](json&) {});
  for (MachineId m = 0; m < 4; ++m) {  // slot m runs rank m; m2's rank died meanwhile
    live::Auth a;
    a.gen = gen;
    if (m != 2) a.alive_ranks = {m};
    after.world->on_agent_connected(m, a);
  }
  after.world->start();
  after.reactor.advance_to(after.reactor.now() + Duration::seconds(30));
  EXPECT_EQ(after.world->lost_before_restart(), 1u);
  EXPECT_TRUE(r.noted("event log gap: rank 2 on m2 (generation " + std::to_string(gen) +
                      ") ended while no controller was running"));
  EXPECT_FALSE(r.noted("event log gap: rank 1"));
  EXPECT_TRUE(r.noted("cannot adopt generation"));
}

// Issue 37, item 18: action ids repeated after controller restarts: the journal held the next
// id as of its last save, and actions taken after it were numbered again. Ids are reserved in
// blocks saved before use.
TEST(LiveWorldBelief, ActionIdsNeverRepeatAcrossRestarts) {
  RunningLive r;
  ActionId last = 0;
  for (int i = 0; i < 3; ++i) last = r.live.world->act(WatchSteps{Duration::zero(), "again"});
  Restarted after(r, [](json&) {});
  const ActionId next = after.world->act(WatchSteps{Duration::zero(), "after the restart"});
  EXPECT_GT(next, last);
}

// The fuzz found it: a standby's agent (or any session) could report an exit or a step of
// a rank it does not run; the exit stopped and restarted the job, a forged step 1000000
// went to the policy as progress. An agent now speaks for its own slot's ranks only.
TEST(LiveWorldBelief, ReportsAndExitsCountOnlyFromTheMachineThatRunsTheRank) {
  RunningLive r;
  ASSERT_EQ(seen<JobStarted>().size(), 1u);
  r.exit(4, 1, 1, 0, "forged by the standby");         // s0 runs no rank
  r.exit(0, 2, 1, 0, "forged by m0 about m2's rank");  // m0 runs rank 0 only
  r.step(4, 0, 1000000);                               // the standby as rank 0
  r.step(0, 0, 777, 3);                                // rank 0's pipe claiming rank 3
  r.step(3, 3, 888);                                   // rank 3's own step: not rank 0's progress
  r.advance(1);
  EXPECT_TRUE(seen<ProcessExit>().empty()) << describe(Event{seen<ProcessExit>().front()});
  for (const auto& smp : seen<StepSample>()) {
    EXPECT_NE(smp.step, 1000000);
    EXPECT_NE(smp.step, 777);
    EXPECT_NE(smp.step, 888);
  }
  EXPECT_TRUE(r.was_refused("exit: rank 2 is not run by m0"));
  EXPECT_TRUE(r.was_refused("report.rank 3 differs from the rank of its pipe, 0"));
  EXPECT_EQ(r.refused.size(), 2u) << "the standby's messages are dropped without a word";
  // What the right machines say still counts.
  r.step(0, 0, 1);
  r.advance(0.1);  // events reach the policy at the reactor's next turn
  ASSERT_FALSE(seen<StepSample>().empty());
  EXPECT_EQ(seen<StepSample>().back().step, 1);
  r.exit(1, 1, 1, 0, "CUDA error: an illegal memory access was encountered");
  r.advance(0.1);
  ASSERT_EQ(seen<ProcessExit>().size(), 1u);
  EXPECT_EQ(seen<ProcessExit>()[0].machine, 1);
}

// Issue 52: a replica reporting step 10^15 was believed: the detector's progress jumped
// there, every true step after it looked like no progress, and the stall restarted a healthy
// job (ETTR 98% -> 29%). A step beyond what the job can have reached is refused and noted.
TEST(LiveWorldBelief, AStepFarBeyondWhatTheJobCanHaveReachedIsRefused) {
  RunningLive r;
  const Instant t0 = r.live.reactor.now();
  const auto at = [&](double s) { r.live.reactor.advance_to(t0 + Duration::seconds(s)); };
  for (std::int64_t step = 1; step <= 5; ++step) {
    at(kStepS * static_cast<double>(step));
    r.step(0, 0, step);
  }
  at(11);
  r.step(0, 0, 1000000000000000);  // 10^15, two seconds after step 5
  for (std::int64_t step = 6; step <= 8; ++step) {
    at(kStepS * static_cast<double>(step));
    r.step(0, 0, step);
  }
  r.advance(0.1);
  std::vector<std::int64_t> steps;
  for (const auto& smp : seen<StepSample>()) steps.push_back(smp.step);
  EXPECT_EQ(steps, (std::vector<std::int64_t>{1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_TRUE(
      r.noted("refused a step report of rank 0 on m0: step 1000000000000000 is beyond "
              "what the job can have reached"))
      << r.notes().back();
  // A step the job can reach (a fast stretch: 500 steps in 2 s of 2 s nominal steps) counts.
  at(18);
  r.step(0, 0, 508);
  r.advance(0.1);
  EXPECT_EQ(seen<StepSample>().back().step, 508);
}

// A new run whose ranks restore an old checkpoint starts from its step: the first start's
// restored step is the base the next reports are checked against, not a step to refuse.
TEST(LiveWorldBelief, ANewRunOnAnOldCheckpointStartsFromItsStep) {
  const Registry reg = registry();
  Live live(reg);
  live.restored_step = 50000;
  Script s;
  s.start = [](World& w) {
    w.act(WatchSteps{Duration::zero(), "samples"});
    w.act(StartJob{"start"});
  };
  live.run(s, 0.5);
  ASSERT_EQ(seen<JobStarted>().size(), 1u);
  EXPECT_EQ(seen<JobStarted>()[0].step, 50000);
  live.world->on_agent_message(
      0, {{"type", "report"},
          {"gen", live.journal.state().gen},
          {"report", {{"type", "step"}, {"rank", 0}, {"step", 50001}, {"step_time_s", kStepS}}}});
  live.advance(0.1);
  ASSERT_EQ(seen<StepSample>().size(), 1u);
  EXPECT_EQ(seen<StepSample>()[0].step, 50001);
}

// Issue 52: one replica's false quorum_failed got its three healthy peers killed: the members
// that did not say the quorum failed were judged hung after the grace, although they went on
// reporting steps in it. A member that trains on is not hung.
TEST(LiveWorldBelief, OneReplicasFalseQuorumFailedKillsNoHealthyPeer) {
  const Registry reg = registry();
  Live live(reg, "conformance-script", json::object(),
            {{"pp", 1}, {"dp", 4}, {"replica_groups", true}});
  Script s;
  s.start = [](World& w) {
    w.act(EnableReplicaGroups{1, Duration::zero(), Duration::seconds(10), "groups"});
    w.act(StartJob{"start"});
  };
  live.run(s, 0.5);
  ASSERT_EQ(seen<JobStarted>().size(), 1u);
  const std::int64_t gen = live.journal.state().gen;
  const std::int64_t q = live.journal.state().replica_quorum;
  const auto report = [&](std::int64_t r, json body) {
    body["rank"] = r;
    live.world->on_agent_message(static_cast<MachineId>(r),
                                 {{"type", "report"}, {"gen", gen}, {"rank", r}, {"report", body}});
  };
  const auto steps = [&](std::int64_t from, std::int64_t to, std::int64_t first_replica) {
    for (std::int64_t step = from; step <= to; ++step)
      for (std::int64_t r = first_replica; r < 4; ++r)
        report(r, {{"type", "step"}, {"step", step}, {"step_time_s", 0.5}});
  };
  steps(1, 3, 0);
  live.link.sent.clear();
  report(0, {{"type", "quorum_failed"}, {"quorum", q}, {"step", 4}, {"detail", "forged"}});
  for (std::int64_t step = 4; step <= 6; ++step) {  // replicas 1 to 3 train on in quorum q
    live.advance(0.5);
    steps(step, step, 1);
  }
  live.advance(3);  // past the controller's grace for the others to say so
  EXPECT_TRUE(seen<ReplicaDropped>().empty()) << describe(Event{seen<ReplicaDropped>().front()});
  EXPECT_TRUE(seen<ProcessExit>().empty());
  std::ifstream in(live.dir / "events.jsonl");
  bool noted = false;
  for (std::string line; std::getline(in, line);)
    noted |= line.find("but replica 1, 2, 3 trained on in it: no replica is judged hung") !=
             std::string::npos;
  EXPECT_TRUE(noted);
}

// Issue 52: with a stall window shorter than stalled_agent_timeout_s, a frozen agent's stall
// was captured before the agent was declared lost: its slot's "<no answer>" was one stack
// among the others, and the waiting partner's stack was the outlier evicted. A capture that an
// agent with late heartbeats does not answer attributes the stall to that agent's machine.
TEST(LiveWorldBelief, AStallCaptureThatAFrozenAgentDoesNotAnswerNamesItsMachine) {
  RunningLive r;
  r.live.link.silent[2] = 1;  // m2's agent frozen (its heartbeats late from now on)
  const ActionId capture = r.live.world->act(CaptureStacks{"stalled"});
  r.live.link.silent[2] = 40;
  r.advance(31);  // past the capture's 30 s
  EXPECT_TRUE(seen<StacksCaptured>().empty())
      << "stacks delivered: " << seen<StacksCaptured>().front().stacks.at(2);
  const auto alerts = seen<InspectionAlert>();
  ASSERT_EQ(alerts.size(), 1u);
  EXPECT_EQ(alerts[0].machine, 2);
  EXPECT_EQ(alerts[0].kind, "host");
  ASSERT_EQ(seen<ActionFailed>().size(), 1u);
  EXPECT_EQ(seen<ActionFailed>()[0].action, capture);
  EXPECT_EQ(seen<ActionFailed>()[0].reason,
            "the agent of m2 is silent: the stall is attributed to it");
  // An agent that answers late but heartbeats (a slow capture) is no silent agent.
  RunningLive slow;
  slow.live.link.silent[1] = 0.5;
  slow.live.world->act(CaptureStacks{"stalled"});
  slow.advance(31);
  EXPECT_TRUE(seen<InspectionAlert>().empty());
  ASSERT_EQ(seen<StacksCaptured>().size(), 1u);
  EXPECT_EQ(seen<StacksCaptured>()[0].stacks.at(1), "<no answer>");
}

constexpr const char* kPeerTimeout = "collective: all_gather: timed out receiving from rank 2";

// A rank that times out waiting for a peer is the victim: the exit of the rank that caused
// it, arriving a little later, is the one reported (it used to be the victim's).
// CI caught it under load: a start's kill phase still counted the outgoing generation's
// "started" reports (late, from the start before it), declared the new start done before
// launching it, and took the old ranks' exits for crashes of the new run. While a start
// kills, only the generation it launches can complete it.
TEST(LiveWorldBelief, AStartIsCompletedOnlyByTheGenerationItLaunches) {
  RunningLive r;
  ASSERT_EQ(seen<JobStarted>().size(), 1u);
  const std::int64_t old_gen = r.gen;
  r.live.world->act(StopJob{"stop"});
  r.advance(0.5);
  ASSERT_EQ(seen<JobStopped>().size(), 1u);
  r.live.world->act(StartJob{"again"});  // kills first: requests queued, not yet answered
  for (MachineId m = 0; m < 4; ++m)
    r.send(m, {{"type", "report"},
               {"gen", old_gen},
               {"rank", m},
               {"report", {{"type", "started"}, {"rank", m}, {"step", 0}}}});
  r.exit(0, 0, 1, 0, "exit code 1");  // an old rank dying of the kill
  // An old rank that crashed in its own words just before the kill (issue 52: the storm's
  // crash on s17): the start under way covers it, and the log says it happened.
  r.exit(1, 1, 1, 0, "fleet fault 7: crash on m1");
  r.live.reactor.advance_to(r.live.reactor.now() +
                            Duration::millis(1));  // deliver; kills unanswered
  EXPECT_EQ(seen<JobStarted>().size(), 1u) << "the new start was completed by the old generation";
  EXPECT_TRUE(seen<ProcessExit>().empty());
  EXPECT_TRUE(r.noted("fleet fault 7: crash on m1"));
  EXPECT_FALSE(r.noted("exit code 1"));
  EXPECT_EQ(r.live.journal.state().gen, old_gen) << "not launched yet";
  r.advance(1);  // the kills are answered; the launch runs and its ranks report
  ASSERT_EQ(seen<JobStarted>().size(), 2u);
  EXPECT_EQ(r.live.journal.state().gen, old_gen + 1);
  EXPECT_TRUE(seen<ProcessExit>().empty());
}

TEST(LiveWorldBelief, AVictimsExitWaitsForTheExitOfItsCause) {
  RunningLive r;
  r.exit(1, 1, 1, 0, kPeerTimeout);
  r.advance(0.3);
  EXPECT_TRUE(seen<ProcessExit>().empty()) << "held for the cause";
  r.exit(2, 2, -1, 9, "");
  r.advance(0.1);  // well inside the grace
  ASSERT_EQ(seen<ProcessExit>().size(), 1u);
  EXPECT_EQ(seen<ProcessExit>()[0].machine, 2);
  EXPECT_EQ(seen<ProcessExit>()[0].exit_code, 128 + 9);
  r.advance(3);
  EXPECT_EQ(seen<ProcessExit>().size(), 1u) << "the victim's exit is not reported as well";
}

// No cause exits: the machine whose ranks stopped reporting steps first is named; when
// every rank reached the same step, none is (as the simulator's watchdog exit).
TEST(LiveWorldBelief, AVictimsExitNamesTheMachineThatStalledFirstOrNone) {
  for (const bool laggard : {true, false}) {
    SCOPED_TRACE(laggard ? "rank 2 behind" : "all at step 10");
    RunningLive r;
    for (std::int64_t rank = 0; rank < 4; ++rank) r.step(rank, rank, laggard && rank == 2 ? 9 : 10);
    r.exit(1, 1, 1, 0, kPeerTimeout);
    r.advance(1);
    EXPECT_TRUE(seen<ProcessExit>().empty()) << "held for the cause";
    r.advance(1);
    ASSERT_EQ(seen<ProcessExit>().size(), 1u);
    const ProcessExit x = seen<ProcessExit>()[0];
    EXPECT_EQ(x.machine, laggard ? 2 : kNoMachine);
    EXPECT_EQ(x.signature, kPeerTimeout);
    EXPECT_EQ(x.step, 10) << "the victim's own last step";
    EXPECT_TRUE(
        r.noted(laggard ? "m2's ranks stalled first, after step 9" : "the exit names no machine"));
  }
}

// Any other exit is reported at once, with the step its rank last reported.
TEST(LiveWorldBelief, AnOrdinaryExitIsReportedAtOnceWithItsRanksStep) {
  RunningLive r;
  r.step(0, 0, 12);
  r.step(3, 3, 11);
  r.exit(3, 3, 1, 0, "CUDA error: an illegal memory access was encountered");
  r.advance(0.1);  // the reactor's next turn, not the victims' grace
  ASSERT_EQ(seen<ProcessExit>().size(), 1u);
  EXPECT_EQ(seen<ProcessExit>()[0].machine, 3);
  EXPECT_EQ(seen<ProcessExit>()[0].step, 11);
}

// Issue 52 (the storm at 2,000 agents): a rank that crashed with its own words while the job
// was already stopping, or after another rank's exit had been reported, left nothing in the
// event log (13 of 50 injected crashes): its exit was dropped as an echo. It is not a new
// incident (the restart under way covers it), but the log records that it happened.
TEST(LiveWorldBelief, ACrashDuringAnotherIncidentIsRecordedNotDropped) {
  RunningLive r;
  r.exit(1, 1, 1, 0, "CUDA error: an illegal memory access was encountered");
  r.advance(0.1);
  ASSERT_EQ(seen<ProcessExit>().size(), 1u);
  r.exit(2, 2, 1, 0, "RuntimeError: a second fault on m2");  // its own words, not a peer's
  r.exit(3, 3, -1, 9, "");                                   // dying of a kill: an echo
  r.exit(0, 0, 1, 0, kPeerTimeout);                          // a victim: an echo
  r.advance(0.1);
  EXPECT_EQ(seen<ProcessExit>().size(), 1u) << "no second incident";
  EXPECT_TRUE(r.noted("RuntimeError: a second fault on m2"));
  EXPECT_FALSE(r.noted(kPeerTimeout));
  EXPECT_FALSE(r.noted("rank 3 on m3"));
  // A crash of a rank whose generation the restart already replaced (the storm at 2,000
  // agents lost two this way): noted too, and still no incident.
  r.gen -= 1;
  r.exit(1, 1, 1, 0, "RuntimeError: a crash of the stopped generation");
  r.advance(0.1);
  EXPECT_TRUE(r.noted("RuntimeError: a crash of the stopped generation"));
  EXPECT_EQ(seen<ProcessExit>().size(), 1u);
}

// The storm at 4,000 agents: a generation that lasted minutes (its start never completed)
// took 50 separate crashes, and the first 16 notes used up a per-generation cap: 34 crashes
// left nothing in the log. A burst at one stop is still bounded (16 at once), but the budget
// comes back at one a second, and what it held back is counted in the next note.
TEST(LiveWorldBelief, CrashesOfALongGenerationAreAllNotedAndABurstIsCounted) {
  RunningLive r;
  r.exit(1, 1, 1, 0, "CUDA error: an illegal memory access was encountered");
  r.advance(0.1);
  ASSERT_EQ(seen<ProcessExit>().size(), 1u);
  auto count = [&](const std::string& part) {
    int n = 0;
    for (const auto& t : r.notes()) n += t.find(part) != std::string::npos;
    return n;
  };
  for (int i = 0; i < 20; ++i) r.exit(2, 2, 1, 0, "RuntimeError: burst " + std::to_string(i));
  r.advance(0.1);
  EXPECT_EQ(count("RuntimeError: burst "), 16) << "a burst is bounded";
  EXPECT_FALSE(r.noted("more ranks exited"));
  // Separate crashes a few seconds apart, for a minute: each one noted.
  for (int i = 0; i < 20; ++i) {
    r.advance(3);
    r.exit(3, 3, 1, 0, "RuntimeError: crash " + std::to_string(i));
  }
  r.advance(0.1);
  EXPECT_EQ(count("RuntimeError: crash "), 20);
  EXPECT_TRUE(r.noted("4 more ranks exited in their own words")) << "the burst's rest counted";
  EXPECT_EQ(seen<ProcessExit>().size(), 1u) << "no new incident";
}

// inter_all_gather with a probe_bin (PROTOCOL.md, "Probes across machines"): the NCCL id that
// rank 0's agent sends is relayed once, to the other machines of that probe only, each with its
// own probe request; a blob from another machine, for no running probe, or a second one is
// refused and relays nothing. A machine whose probe did not join is the one that fails.
TEST(LiveWorldBelief, ARendezvousBlobIsRelayedOnceFromRankZeroOfARunningProbeOnly) {
  RunningLive r;
  r.live.config.probe_bin = "/nonexistent/faultline-probe";
  auto& sent = r.live.link.sent;
  sent.clear();
  const ActionId id = r.live.world->act(
      RunProbe{ProbeKind::kInterAllGather, {1, 2, 3}, Duration::seconds(30), "t"});
  std::map<MachineId, json> probes;
  for (const auto& [m, msg] : sent)
    if (msg.value("type", "") == "probe") probes[m] = msg;
  sent.clear();
  ASSERT_EQ(probes.size(), 3u);
  for (const auto& [m, msg] : probes) EXPECT_EQ(msg.value("rendezvous", false), true) << m;
  EXPECT_EQ(probes[1]["rank"], 0);
  auto blob = [](const json& req) {
    return json{{"type", "rendezvous"}, {"probe_req", req}, {"blob", "00ff"}};
  };
  r.send(2, blob(probes[2]["req"]));  // rank 1 publishing
  r.send(1, blob(999999));            // no such probe
  r.send(1, blob(probes[2]["req"]));  // another machine's probe
  EXPECT_TRUE(sent.empty()) << sent.front().second.dump();
  EXPECT_EQ(r.refused.size(), 3u);
  EXPECT_TRUE(
      r.was_refused("rendezvous: probe_req: 999999 is not a running inter_all_gather probe of this "
                    "machine as rank 0"));
  r.send(1, blob(probes[1]["req"]));
  ASSERT_EQ(sent.size(), 2u);
  for (const auto& [m, msg] : sent) {
    EXPECT_EQ(msg.value("type", ""), "rendezvous");
    EXPECT_EQ(msg["probe_req"], probes[m]["req"]) << "each agent hears of its own probe";
    EXPECT_EQ(msg["blob"], "00ff");
  }
  EXPECT_EQ(sent[0].first, 2);
  EXPECT_EQ(sent[1].first, 3);
  r.send(1, blob(probes[1]["req"]));
  EXPECT_TRUE(r.was_refused("already published its blob"));
  EXPECT_EQ(sent.size(), 2u);
  // m3's probe never joined (killed at the deadline): it alone fails; m1 and m2 waited for it.
  r.send(1, {{"type", "done"},
             {"req", probes[1]["req"]},
             {"ok", false},
             {"rendezvous", "ok"},
             {"detail", "x"}});
  r.send(2, {{"type", "done"},
             {"req", probes[2]["req"]},
             {"ok", false},
             {"rendezvous", "ok"},
             {"detail", "x"}});
  r.send(3, {{"type", "done"},
             {"req", probes[3]["req"]},
             {"ok", false},
             {"timed_out", true},
             {"rendezvous", "not_reached"},
             {"detail", "killed at the deadline"}});
  r.advance(0.2);
  const auto results = seen<ProbeResult>();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].action, id);
  EXPECT_EQ(results[0].failed, MachineSet({3}));
  // After the probe, its rank 0 can publish nothing more.
  r.send(1, blob(probes[1]["req"]));
  EXPECT_TRUE(
      r.was_refused("rendezvous: probe_req: " + probes[1]["req"].dump() + " is not a running"));
}

// Without rank 0's id nobody can join: its machine is the one that fails, not the ranks that
// timed out waiting for it.
TEST(LiveWorldBelief, WhenRankZeroNeverPublishesItsMachineAloneFailsTheRelayedProbe) {
  RunningLive r;
  r.live.config.probe_bin = "/nonexistent/faultline-probe";
  auto& sent = r.live.link.sent;
  sent.clear();
  r.live.world->act(RunProbe{ProbeKind::kInterAllGather, {1, 2}, Duration::seconds(30), "t"});
  std::map<MachineId, json> probes;
  for (const auto& [m, msg] : sent) probes[m] = msg;
  sent.clear();
  ASSERT_EQ(probes.size(), 2u);
  r.send(1, {{"type", "done"},
             {"req", probes[1]["req"]},
             {"ok", false},
             {"timed_out", true},
             {"rendezvous", "not_reached"},
             {"detail", "killed at the deadline"}});
  r.send(2, {{"type", "done"},
             {"req", probes[2]["req"]},
             {"ok", false},
             {"timed_out", true},
             {"rendezvous", "timed_out"},
             {"detail", "deadline_exceeded"}});
  r.advance(0.2);
  const auto results = seen<ProbeResult>();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].failed, MachineSet({1}));
}

// DLRover's pairwise node check: each group is its own all-gather, all at once, with ranks,
// rank 0 and master port of its own, and its own relay; each is timed from the sending to its
// last reply, and a failed group lists all its machines.
// A group whose machines all report their all-gather's own time (collective_s) is timed by
// the slowest of them, the process start left out, as the simulator times pairs; a group
// where one did not is timed from the sending to its last reply. A collective_s that is not
// a number in [0, 1e6] is refused with its reply.
// Acts a grouped inter_all_gather on {m1, m2} and {m3, s0}, with a probe program so that the
// test answers the probes (not the agents' side of the pump); the probe message each machine
// got, and the action's id.
std::map<MachineId, json> grouped_probe(RunningLive& r, ActionId* id = nullptr) {
  r.live.config.probe_bin = "/nonexistent/faultline-probe";
  auto& sent = r.live.link.sent;
  sent.clear();
  RunProbe probe{ProbeKind::kInterAllGather, {}, Duration::seconds(30), "pairs"};
  probe.groups = {{1, 2}, {3, 4}};  // m1 m2, then m3 and the standby s0
  const ActionId a = r.live.world->act(probe);
  if (id) *id = a;
  std::map<MachineId, json> probes;
  for (const auto& [m, msg] : sent)
    if (msg.value("type", "") == "probe") probes[m] = msg;
  sent.clear();
  return probes;
}

TEST(LiveWorldBelief, AGroupIsTimedByItsCollectiveWhenEveryMachineReportsIt) {
  RunningLive r;
  std::map<MachineId, json> probes = grouped_probe(r);
  ASSERT_EQ(probes.size(), 4u);
  r.advance(1.5);
  r.send(1, {{"type", "done"}, {"req", probes[1]["req"]}, {"ok", true}, {"collective_s", 0.010}});
  r.send(2, {{"type", "done"}, {"req", probes[2]["req"]}, {"ok", true}, {"collective_s", 0.013}});
  r.send(3, {{"type", "done"}, {"req", probes[3]["req"]}, {"ok", true}, {"collective_s", -1}});
  EXPECT_TRUE(r.was_refused("collective_s: expected a number in [0, 1e+06]"));
  r.send(3, {{"type", "done"}, {"req", probes[3]["req"]}, {"ok", true}, {"collective_s", 0.011}});
  r.send(4, {{"type", "done"}, {"req", probes[4]["req"]}, {"ok", true}});
  r.advance(0.2);
  const auto results = seen<ProbeResult>();
  ASSERT_EQ(results.size(), 1u);
  ASSERT_EQ(results[0].group_seconds.size(), 2u);
  EXPECT_DOUBLE_EQ(results[0].group_seconds[0], 0.013);
  EXPECT_NEAR(results[0].group_seconds[1], 1.5, 0.11) << "s0 said nothing of its collective";
  EXPECT_EQ(results[0].group_failed, std::vector<bool>({false, false}));
}

TEST(LiveWorldBelief, AGroupedProbeRunsOneRendezvousPerGroupAndTimesEach) {
  RunningLive r;
  auto& sent = r.live.link.sent;
  ActionId id = 0;
  std::map<MachineId, json> probes = grouped_probe(r, &id);
  ASSERT_EQ(probes.size(), 4u);
  for (const auto& [m, msg] : probes) {
    EXPECT_EQ(msg["test"], "inter_all_gather") << m;
    EXPECT_EQ(msg["world_size"], 2) << m;
    EXPECT_EQ(msg["master_addr"], "127.0.0.1") << m;
    EXPECT_EQ(msg.value("rendezvous", false), true) << m;
  }
  EXPECT_EQ(probes[1]["rank"], 0);
  EXPECT_EQ(probes[2]["rank"], 1);
  EXPECT_EQ(probes[3]["rank"], 0);
  EXPECT_EQ(probes[4]["rank"], 1);
  EXPECT_EQ(probes[1]["master_port"], probes[2]["master_port"]);
  EXPECT_EQ(probes[3]["master_port"], probes[4]["master_port"]);
  EXPECT_NE(probes[1]["master_port"], probes[3]["master_port"])
      << "both rank 0s listen on one host";
  // Group 1's rank 0 publishes to group 1 only.
  r.send(3, {{"type", "rendezvous"}, {"probe_req", probes[3]["req"]}, {"blob", "00ff"}});
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].first, 4);
  EXPECT_EQ(sent[0].second["probe_req"], probes[4]["req"]);
  sent.clear();
  EXPECT_TRUE(r.refused.empty());
  // Group 0 passes at once; group 1 fails two seconds later, s0 never having joined.
  r.send(1, {{"type", "done"}, {"req", probes[1]["req"]}, {"ok", true}});
  r.send(2, {{"type", "done"}, {"req", probes[2]["req"]}, {"ok", true}});
  r.advance(2);
  EXPECT_TRUE(seen<ProbeResult>().empty()) << "one result, once every group is done";
  r.send(3, {{"type", "done"},
             {"req", probes[3]["req"]},
             {"ok", false},
             {"rendezvous", "ok"},
             {"detail", "x"}});
  r.send(4, {{"type", "done"},
             {"req", probes[4]["req"]},
             {"ok", false},
             {"rendezvous", "not_reached"},
             {"detail", "crashed"}});
  r.advance(0.2);
  const auto results = seen<ProbeResult>();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].action, id);
  EXPECT_EQ(results[0].test, ProbeKind::kInterAllGather);
  EXPECT_EQ(results[0].group_failed, std::vector<bool>({false, true}));
  ASSERT_EQ(results[0].group_seconds.size(), 2u);
  EXPECT_NEAR(results[0].group_seconds[0], 0, 1e-9);
  EXPECT_NEAR(results[0].group_seconds[1], 2, 0.11);
  EXPECT_EQ(results[0].failed, MachineSet({3, 4})) << "the whole failed group";
  EXPECT_FALSE(results[0].timed_out);
  EXPECT_TRUE(seen<ActionFailed>().empty());
  // The journal's outcome times each group and keeps what its agents said.
  std::string detail;
  std::ifstream in(r.live.dir / "events.jsonl");
  for (std::string line; std::getline(in, line);) {
    const json e = json::parse(line, nullptr, false);
    if (e.is_object() && e.value("kind", "") == "outcome" && e.value("id", ActionId{0}) == id)
      detail = e.value("detail", "");
  }
  EXPECT_NE(
      detail.find("inter_all_gather per group: g0 0.00s ok, g1 2.00s failed (m3: x; s0: crashed"),
      std::string::npos)
      << detail;
  EXPECT_NE(detail.find("rendezvous: s0 did not join"), std::string::npos) << detail;
}

// Groups only for inter_all_gather, of two machines or more, each machine in one group: else
// ActionFailed, and no agent hears of it.
TEST(LiveWorldBelief, AGroupedProbeIsRefusedForAnotherTestASingleMachineOrAMachineTwice) {
  RunningLive r;
  auto& sent = r.live.link.sent;
  sent.clear();
  const auto refused = [&](ProbeKind test, std::vector<MachineSet> groups, const std::string& why) {
    RunProbe probe{test, {1, 2}, Duration::seconds(30), "t"};
    probe.groups = std::move(groups);
    const ActionId id = r.live.world->act(probe);
    r.advance(0.1);
    std::string reason;
    EXPECT_TRUE(failed(id, &reason)) << why;
    EXPECT_NE(reason.find(why), std::string::npos) << reason;
    EXPECT_TRUE(sent.empty()) << sent.front().second.dump();
  };
  refused(ProbeKind::kGpuDiag, {{1, 2}}, "groups: only inter_all_gather runs per group");
  refused(ProbeKind::kInterAllGather, {{1, 2}, {3}},
          "groups[1]: a group needs at least two machines");
  refused(ProbeKind::kInterAllGather, {{1, 2}, {2, 3}},
          "groups[1]: machine 2 is in groups[0] already");
  refused(ProbeKind::kInterAllGather, {{1, 99}}, "groups[0]: machine 99 is not in the fleet");
  EXPECT_TRUE(seen<ProbeResult>().empty());
}

// ---------------------------------------------------------------- what LiveWorld exports

// One sample of LiveWorld::metrics(): a gauge or counter by name and labels, or a histogram's
// _count or _sum.
double metric(const std::vector<live::MetricFamily>& families, const std::string& name,
              const live::Labels& labels = {}) {
  for (const auto& f : families) {
    for (const auto& smp : f.samples)
      if (f.name == name && smp.labels == labels) return smp.value;
    for (const auto& [l, h] : f.histograms) {
      if (f.name + "_count" == name && l == labels) return static_cast<double>(h.count());
      if (f.name + "_sum" == name && l == labels) return h.sum();
    }
  }
  ADD_FAILURE() << "no sample " << name;
  return std::nan("");
}

// The metrics are LiveWorld's own account: an incident is counted once, by category and
// resolution, with its recovery time; the lost phases (the simulator's names) sum to the
// unproductive time in the final account; the ETTR is the status's, and once the summary is
// written it is final (it used to keep falling with the clock, so a scrape after the summary
// disagreed with the summary).
TEST(LiveWorldMetrics, AnIncidentIsCountedOnceAndTheAccountIsFinalAfterTheSummary) {
  RunningLive r;
  const auto metrics = [&] { return r.live.world->metrics(); };
  for (int s = 1; s <= 5; ++s) {  // each step reported when it is done
    r.advance(kStepS);
    r.step(0, 0, s);
  }
  r.advance(kStepS);  // then rank 0 falls silent
  r.live.world->act(StopJob{"drill"});
  r.advance(3);
  auto m = metrics();
  EXPECT_EQ(metric(m, "faultline_incidents_opened_total", {{"category", "policy_stop"}}), 1);
  EXPECT_EQ(metric(m, "faultline_incidents_open"), 1);
  r.live.world->act(StartJob{"again"});
  r.advance(1);
  m = metrics();
  EXPECT_EQ(metric(m, "faultline_incidents_total",
                   {{"category", "policy_stop"}, {"resolution", "recovered"}}),
            1);
  EXPECT_EQ(metric(m, "faultline_incidents_open"), 0);
  EXPECT_EQ(metric(m, "faultline_recovery_latency_seconds_count"), 1);
  EXPECT_EQ(metric(m, "faultline_detection_latency_seconds_count"), 1);
  EXPECT_NEAR(metric(m, "faultline_detection_latency_seconds_sum"), kStepS, 0.11)
      << "from the last step report";
  EXPECT_NEAR(metric(m, "faultline_lost_seconds_total", {{"phase", "diagnosis"}}), 3, 0.11)
      << "stop to restart";
  EXPECT_NEAR(metric(m, "faultline_lost_seconds_total", {{"phase", "detection"}}), kStepS, 0.11)
      << "from the last step report";
  EXPECT_EQ(metric(m, "faultline_ettr"), r.live.world->status()["ettr_so_far"].get<double>());
  EXPECT_EQ(metric(m, "faultline_machines", {{"state", "job"}}), 4);
  EXPECT_EQ(metric(m, "faultline_standby_pool_machines", {{"pool", "actual"}}), 1);
  EXPECT_EQ(metric(m, "faultline_step"), 5);

  const double ettr = r.live.world->write_summary();
  r.advance(10);
  m = metrics();
  double lost = 0;
  for (std::size_t i = 1; i < kTimePhaseCount; ++i)
    lost += metric(m, "faultline_lost_seconds_total", {{"phase", kTimePhaseNames[i]}});
  EXPECT_NEAR(lost,
              metric(m, "faultline_elapsed_seconds") - metric(m, "faultline_productive_seconds"),
              1e-9)
      << "the final account";
  EXPECT_EQ(metric(m, "faultline_run_ended"), 1);
  EXPECT_EQ(metric(m, "faultline_ettr"), ettr) << "final";
  EXPECT_EQ(r.live.world->status()["ettr_so_far"].get<double>(), ettr) << "final";
}

// Issue 39: the account of lost time, phase by phase, on a manual clock (kStepS = 2 s steps):
// the first two steps of a start over the nominal time are warm-up, a checkpoint step's excess
// is checkpoint, a slow step's is degraded, a killed rank's incident splits into detection,
// diagnosis and failover, and going back to step 0 moves the ten steps done to recompute. An
// account record is written at the incident's close, and a controller restarted from the
// journal continues every counter from where it was.
TEST(LiveWorldMetrics, LostTimeIsMeasuredInTheSimulatorsPhasesAndSurvivesARestart) {
  RunningLive r;
  const auto lost = [](const std::vector<live::MetricFamily>& m, const char* phase) {
    return metric(m, "faultline_lost_seconds_total", {{"phase", phase}});
  };
  const auto report = [&](std::int64_t step, double took, bool ckpt) {
    r.advance(took);
    json rep = {{"type", "step"},      {"rank", 0},   {"step", step},
                {"step_time_s", took}, {"loss", 1.0}, {"grad_norm", 1.0}};
    if (ckpt) rep["checkpoint_step"] = step;
    r.send(0, {{"type", "report"}, {"gen", r.gen}, {"rank", 0}, {"report", rep}});
  };
  const auto before_steps = r.live.world->metrics();
  report(1, 2 * kStepS, false);  // warm-up: kStepS over
  report(2, 2 * kStepS, false);  // warm-up: kStepS over
  for (int s = 3; s <= 8; ++s) report(s, kStepS, false);
  report(9, 3 * kStepS, true);    // a checkpoint: 2 kStepS over
  report(10, 2 * kStepS, false);  // a slow step: kStepS over
  r.advance(1);                   // rank 0 falls silent, then its exit is known
  r.exit(0, 0, 1, 0, "RuntimeError: boom");
  r.advance(3);  // the policy diagnoses
  r.live.world->act(StartJob{"again"});
  r.advance(0.5);
  r.gen = r.live.journal.state().gen;
  report(1, kStepS, false);  // back at step 0: steps 1..10 are recomputed
  r.advance(1.5);            // a pause between two steps
  report(2, kStepS, false);
  const auto m = r.live.world->metrics();
  EXPECT_NEAR(lost(m, "warmup") - lost(before_steps, "warmup"), 2 * kStepS, 1e-9);
  EXPECT_NEAR(lost(m, "checkpoint"), 2 * kStepS, 1e-9);
  EXPECT_NEAR(lost(m, "degraded"), 0.5 + kStepS + 0.5 + 1.5, 1e-9)
      << "before each start's first step (0.5 s each), the slow step and the pause";
  EXPECT_NEAR(lost(m, "detection"), 1, 1e-9) << "from the last step report to the exit";
  EXPECT_NEAR(lost(m, "diagnosis") - lost(before_steps, "diagnosis"), 3, 1e-9);
  EXPECT_NEAR(lost(m, "recompute"), 10 * kStepS, 1e-9);
  EXPECT_EQ(lost(m, "restore"), 0) << "live ranks report no restore time";
  EXPECT_EQ(lost(m, "waiting_for_machines"), 0);
  double sum = 0;
  for (std::size_t i = 1; i < kTimePhaseCount; ++i) sum += lost(m, kTimePhaseNames[i]);
  EXPECT_NEAR(
      sum, metric(m, "faultline_elapsed_seconds") - metric(m, "faultline_productive_seconds"), 1e-9)
      << "at a step report the phases sum to elapsed - productive";
  bool account = false;
  std::ifstream in(r.live.dir / "events.jsonl");
  for (std::string line; std::getline(in, line);)
    account |= json::parse(line).value("kind", "") == "account";
  EXPECT_TRUE(account) << "an account record at the incident's close";

  Restarted after(r, [](json&) {});
  after.world->start();
  const auto again = after.world->metrics();
  for (std::size_t i = 1; i < kTimePhaseCount; ++i)
    EXPECT_GE(lost(again, kTimePhaseNames[i]), lost(m, kTimePhaseNames[i])) << kTimePhaseNames[i];
  EXPECT_NEAR(lost(again, "recompute"), 10 * kStepS, 1e-9);
}

// The names LiveWorld exports are exactly docs/metrics.md's table (the Grafana dashboard is
// checked against that table by GrafanaDashboard.EveryMetricItQueriesIsOneTheControllerExports),
// with the documented type; the lost-time counter has one sample per shared lost phase.
TEST(LiveWorldMetrics, TheExportedMetricsAreTheDocumentedOnes) {
  std::ifstream in(std::string(FAULTLINE_SOURCE_DIR) + "/docs/metrics.md");
  ASSERT_TRUE(in) << "docs/metrics.md";
  std::map<std::string, std::string> documented;
  const std::regex row(R"(^\| `(faultline_[a-z_]+)` \| (gauge|counter|histogram) \|)");
  std::smatch m;
  for (std::string line; std::getline(in, line);)
    if (std::regex_search(line, m, row)) documented[m[1]] = m[2];
  RunningLive r;
  std::map<std::string, std::string> exported;
  for (const auto& f : r.live.world->metrics()) {
    exported[f.name] = f.type == live::MetricType::kGauge     ? "gauge"
                       : f.type == live::MetricType::kCounter ? "counter"
                                                              : "histogram";
    if (f.name != "faultline_lost_seconds_total") continue;
    std::set<std::string> phases;
    for (const auto& smp : f.samples) phases.insert(smp.labels.at(0).second);
    EXPECT_EQ(phases, std::set<std::string>(kTimePhaseNames.begin() + 1, kTimePhaseNames.end()));
  }
  EXPECT_EQ(exported, documented);
}

}  // namespace
}  // namespace faultline
