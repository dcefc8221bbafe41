// The World conformance suite's fixtures, shared by its files (tests/conformance/): a
// scripted policy that records what it observes, SimWorld through one ReplicaRunner per
// process (SimGrid allows one engine), and LiveWorld on a fake agents' link and a manual
// reactor clock. Not in an anonymous namespace: every file of the program shares the one
// runner and the one script.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "eventlog/event_log.h"
#include "policies/builtin.h"
#include "realexec/controller/journal.h"
#include "realexec/controller/live_world.h"
#include "realexec/live_config.h"
#include "realexec/net/messages.h"
#include "realexec/net/reactor.h"
#include "scenarios/scenario.h"
#include "sim/runner.h"

namespace faultline::conformance {

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

inline Script* g_script = nullptr;
inline std::vector<Seen> g_seen;

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

inline Registry registry() {
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

// ---------------------------------------------------------------- outcomes

inline bool failed(ActionId id, std::string* why) {
  for (const auto& f : seen<ActionFailed>())
    if (f.action == id) {
      *why = f.reason;
      return true;
    }
  return false;
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

}  // namespace faultline::conformance
