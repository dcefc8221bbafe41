// The controller's state directory as a restarted controller finds it (issue 52): what is
// there is checked before it is believed, and the event log it writes stays readable.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "eventlog/event_log.h"
#include "policies/builtin.h"
#include "realexec/controller/journal.h"
#include "realexec/controller/live_controller.h"
#include "realexec/live_config.h"
#include "realexec/net/reactor.h"

namespace faultline::live {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// A state directory with a config of two machines and a standby, and what a controller
// constructed on it (it writes the log's first records and listens, nothing more) leaves.
struct StateDir {
  fs::path dir;
  Registry reg = policies::builtin_registry();
  StateDir() {
    char tmpl[] = "/tmp/faultline-ctlstate-XXXXXX";
    dir = fs::path(::mkdtemp(tmpl));
    std::ofstream(dir / "token") << "0123456789abcdef0123456789abcdef\n";
    fs::permissions(dir / "token", fs::perms::owner_read | fs::perms::owner_write);
  }
  ~StateDir() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  LiveConfig config(const std::vector<std::string>& machines) const {
    json ms = json::array();
    for (const auto& m : machines) ms.push_back({{"name", m}, {"workdir", m}});
    const json doc = {
        {"controller", "127.0.0.1:1"},
        {"token_file", "token"},
        {"machines", ms},
        {"standby", json::array({{{"name", "s0"}, {"workdir", "s0"}}})},
        {"job",
         {{"versions", {{"v1", {"/bin/true"}}}}, {"version", "v1"}, {"nominal_step_time_s", 1}}},
        {"trainjob_bin", "/bin/true"},
        {"state_dir", (dir / "state").string()}};
    LiveConfig c = parse_live_config(doc.dump(), (dir / "live.json").string(), reg);
    c.controller_port = 0;  // any free port: the tests never connect
    return c;
  }
  // A journal as a controller that ran `gen` generations for `run_s` s left it.
  void journal(std::int64_t gen, double run_s, const std::vector<std::string>& names) const {
    fs::create_directories(dir / "state");
    Journal j((dir / "state" / "journal.json").string());
    j.state().origin_unix_ns = wall_now_ns() - static_cast<std::int64_t>(run_s * 1e9);
    j.state().last_t_ns = static_cast<std::int64_t>(run_s * 1e9);
    j.state().gen = gen;
    j.state().version = j.state().good_version = "v1";
    j.state().slots = {0, 1};
    j.state().standby = {2};
    j.state().machine_names = names;
    std::string err;
    ASSERT_TRUE(j.save(&err)) << err;
  }
  void run_controller(const LiveConfig& c) const {
    Reactor reactor{ManualClock{}};
    Controller ctl(c, reg, reactor, false);
  }
  std::string log_path() const { return (dir / "state" / "events.jsonl").string(); }
};

// Issue 52: after events.jsonl was deleted or rotated, the restarted controller wrote a log
// with no header, which `sim replay` and `faultline report` refuse. A new, empty log gets a
// header, and a note that the earlier log is gone.
TEST(ControllerState, AResumedRunWhoseLogWasDeletedOrRotatedWritesAHeader) {
  for (const bool rotated : {false, true}) {
    SCOPED_TRACE(rotated ? "rotated (truncated to empty)" : "deleted");
    StateDir s;
    const LiveConfig c = s.config({"m0", "m1"});
    s.journal(3, 500, {"m0", "m1", "s0"});
    if (rotated) std::ofstream(s.log_path()).flush();
    s.run_controller(c);
    traces::EventLog log;
    ASSERT_NO_THROW(log = traces::read_event_log(s.log_path()));
    EXPECT_EQ(log.header.machines, 2);
    EXPECT_GE(log.records.front().t_s, 500) << "the header is at the run time it was written";
    ASSERT_FALSE(log.notes.empty());
    EXPECT_NE(log.notes.front().value.find("the earlier log was deleted or rotated away"),
              std::string::npos)
        << log.notes.front().value;
  }
}

// Issue 52: after the config's machines were reordered, the log's earlier records got the new
// names: records carry machine ids, and readers named them from the current config (or the
// journal, remapped to it). The run keeps its order, the header says it, and a machine that
// would take another id is refused in one line naming the field.
TEST(ControllerState, AReorderedConfigKeepsTheRunsMachineIdsAndTheHeaderNamesThem) {
  StateDir s;
  s.journal(2, 100, {"m0", "m1", "s0"});
  s.run_controller(s.config({"m1", "m0"}));  // the operator listed m1 first
  const traces::EventLog log = traces::read_event_log(s.log_path());
  EXPECT_EQ(log.records.front().json.value("machine_names", json::array()),
            json::array({"m0", "m1", "s0"}));
  ASSERT_FALSE(log.notes.empty());
  EXPECT_NE(log.notes.back().value.find("the run's order is kept"), std::string::npos)
      << log.notes.back().value;

  // s0, the run's standby, listed as a job machine and m1 as the standby: refused.
  StateDir moved;
  moved.journal(2, 100, {"m0", "m1", "s0"});
  LiveConfig c = moved.config({"m0", "m1"});
  std::swap(c.machines[1], c.standby[0]);
  try {
    moved.run_controller(c);
    ADD_FAILURE() << "a machine moved to the other list was not refused";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(
        std::string(e.what()).find("live.json: machines: s0 would be machine 1 of the run in"),
        std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace faultline::live
