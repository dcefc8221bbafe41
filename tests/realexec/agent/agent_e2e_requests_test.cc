// The agent end to end: exits around kills and disconnections, bad report lines and invalid
// requests, and injected faults confirmed only once the job acknowledges them.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/realexec/agent/agent_e2e_fixture.h"

namespace faultline::live {
namespace {

using namespace agent_e2e;

// A host in which the test decides when each rank exits: spawn_rank runs nothing (a rank is
// its report socket), a signal lands on no process, and exit(i, status) is the wait status
// the agent then learns of the i-th rank launched.
class ScriptedHost final : public AgentHost {
 public:
  bool spawn_rank(const SpawnSpec& spec, Spawned* out, std::string*) override {
    out->pid = static_cast<pid_t>(kFirstPid + report_fds.size());
    out->stderr_fd = -1;
    report_fds.push_back(::fcntl(spec.extra_fds.at(3), F_DUPFD_CLOEXEC, 0));
    on_exits.emplace_back();
    return report_fds.back() >= 0;
  }
  void watch_rank(Reactor&, pid_t pid, std::function<void(int)> cb) override {
    on_exits.at(static_cast<std::size_t>(pid - kFirstPid)) = std::move(cb);
  }
  void signal_group(pid_t pid, int sig) override { signals.emplace_back(pid - kFirstPid, sig); }
  void kill_group(pid_t pid, int sig) override { signals.emplace_back(pid - kFirstPid, sig); }
  void say(std::size_t i, const std::string& line) {
    const std::string l = line + "\n";
    ASSERT_EQ(::write(report_fds.at(i), l.data(), l.size()), static_cast<ssize_t>(l.size()));
  }
  // The rank is gone: its end of the socket closes. Its wait status follows in exit().
  void gone(std::size_t i) {
    ::close(report_fds.at(i));
    report_fds[i] = -1;
  }
  void exit(std::size_t i, int status) {
    if (report_fds.at(i) >= 0) gone(i);
    auto cb = std::move(on_exits.at(i));
    ASSERT_TRUE(cb);
    cb(status);
  }

  static constexpr pid_t kFirstPid = 424200;
  std::vector<int> report_fds;
  std::vector<std::function<void(int)>> on_exits;
  std::vector<std::pair<int, int>> signals;  // (rank index, signal)
};

// Issue 52 (the storm at 2,000 agents lost a crash this way): a rank crashed in its own
// words (a fatal report, exit code 1) just before the controller's kill reached its agent,
// and the agent learnt of the exit only after it had sent its SIGKILL. It took the exit for
// its kill's: the exit said "exit code 1", the controller dropped it as an echo of the stop,
// and the crash left no trace. A rank the SIGKILL ended has a wait status that says so; one
// that exited with a code of its own had died before the kill landed, and keeps its words.
TEST_F(AgentE2E, ACrashJustBeforeTheKillKeepsItsOwnWords) {
  auto host = std::make_shared<ScriptedHost>();
  agent_options_.host = host;
  start();
  ASSERT_EQ(launch("v1", {{0, 0}, {1, 1}}).value("ok", false), true);
  ASSERT_EQ(host->report_fds.size(), 2u);
  // Rank 1 says why and is gone (exit code 1); its agent has not seen the exit yet.
  host->say(1, R"({"type":"fatal","rank":1,"signature":"fleet fault 7: crash on m0"})");
  host->gone(1);
  // The controller's stop reaches the agent first: it signals both ranks.
  controller_->send_raw({{"type", "kill"}, {"gen", 1}, {"req", 900}});
  ASSERT_TRUE(wait([&] { return host->signals.size() == 2; }));
  for (const auto& [i, sig] : host->signals) EXPECT_EQ(sig, SIGKILL) << "rank " << i;
  host->exit(1, 1 << 8);  // then its wait status: exited with code 1, not of the signal
  ASSERT_TRUE(wait([&] { return controller_->of_type("exit").size() == 1; }));
  const json e = controller_->of_type("exit")[0];
  EXPECT_EQ(e["gen"], 1);
  EXPECT_EQ(e["rank"], 1);
  EXPECT_EQ(e["code"], 1);
  EXPECT_EQ(e["signal"], 0);
  EXPECT_EQ(e["signature"], "fleet fault 7: crash on m0") << "the crash is the rank's own";
  // Rank 0, which the kill did end (whatever it had said before), is the kill's.
  host->say(0, R"({"type":"fatal","rank":0,"signature":"said before the kill"})");
  host->exit(0, SIGKILL);  // the wait status of a death by SIGKILL
  ASSERT_TRUE(wait([&] { return controller_->of_type("exit").size() == 2; }));
  const json k = controller_->of_type("exit")[1];
  EXPECT_EQ(k["rank"], 0);
  EXPECT_EQ(k["signal"], SIGKILL);
  EXPECT_EQ(k["signature"], "killed by signal 9 (SIGKILL)");
  ASSERT_TRUE(wait([&] {
    return controller_->index_of([](const json& m) {
      return m["type"] == "done" && m.value("req", 0) == 900;
    }) != std::string::npos;
  })) << "the kill is done once both ranks are reaped";
}

TEST_F(AgentE2E, BadReportLinesAreDropped) {
  start();
  launch("junk", {{0, 0}});
  ASSERT_TRUE(wait([&] { return controller_->of_type("exit").size() == 1; }));
  auto reports = controller_->of_type("report");
  ASSERT_EQ(reports.size(), 2u);
  EXPECT_EQ(reports[0]["report"]["step"], 1);
  // Python's bare NaN is read, and forwarded the canonical way: null plus the flag.
  EXPECT_EQ(reports[1]["report"]["step"], 2);
  EXPECT_TRUE(reports[1]["report"]["loss"].is_null());
  EXPECT_EQ(reports[1]["report"]["loss_nan"], true);
  EXPECT_TRUE(logged("report line dropped: not JSON"));
  EXPECT_TRUE(logged("report line dropped: not a JSON object"));
  EXPECT_TRUE(logged("report line dropped: longer than 4 KiB"));
  EXPECT_TRUE(logged("report line dropped: report: type: expected a string, got an integer"));
  EXPECT_TRUE(
      logged("report line dropped: report: loss_nan: expected true or false, got a string"));
}

TEST_F(AgentE2E, ExitsWhileDisconnectedAreDeliveredAfterReconnect) {
  start();
  launch("sleep", {{0, 0}, {1, 1}});
  auto pids = agent_->rank_pids();
  controller_->accept_off();
  controller_->drop();
  ASSERT_TRUE(wait([&] { return !agent_->connected(); }));
  ::kill(pids[1], SIGKILL);  // dies while the agent has no controller
  ASSERT_TRUE(wait([&] { return agent_->rank_pids().size() == 1; }));
  wait([] { return false; }, 0.3);
  EXPECT_TRUE(controller_->of_type("exit").empty());
  EXPECT_EQ(::kill(pids[0], 0), 0);  // the other rank keeps running
  controller_->accept_on();
  ASSERT_TRUE(wait([&] { return controller_->of_type("exit").size() == 1; }));
  json e = controller_->of_type("exit")[0];
  EXPECT_EQ(e["rank"], 1);
  EXPECT_EQ(e["pid"], pids[1]);
  // The new handshake tells a restarted controller what still runs.
  const json& h = controller_->auths.back();
  EXPECT_EQ(h["gen"], 1);
  ASSERT_EQ(h["ranks"].size(), 1u);
  EXPECT_EQ(h["ranks"][0]["rank"], 0);
  EXPECT_EQ(h["ranks"][0]["pid"], pids[0]);
  EXPECT_GE(controller_->connections, 2);
}

TEST_F(AgentE2E, InvalidRequestsGetErrorsAndTheAgentCarriesOn) {
  start();
  auto reason = [&](json m) {
    json r = controller_->request(std::move(m));
    EXPECT_EQ(r["type"], "error") << r.dump();
    return r.value("reason", "");
  };
  auto launch_msg = [](json patch) {
    json m = {{"type", "launch"},    {"gen", 1},
              {"version", "v1"},     {"ranks", {{{"rank", 0}, {"local_rank", 0}}}},
              {"world_size", 2},     {"master_addr", "127.0.0.1"},
              {"master_port", 29500}};
    m.merge_patch(patch);
    return m;
  };
  EXPECT_EQ(reason(launch_msg({{"version", "rm -rf /"}})),
            "launch: version: unknown code version 'rm -rf /'");
  EXPECT_EQ(reason(launch_msg({{"gen", "1"}})),
            "launch: gen: expected an integer in [0, 9007199254740992]");
  EXPECT_EQ(reason(launch_msg({{"master_port", 70000}})),
            "launch: master_port: expected an integer in [1, 65535], got 70000");
  EXPECT_EQ(reason(launch_msg({{"ranks", {{{"rank", 5}, {"local_rank", 0}}}}})),
            "launch: rank: expected an integer in [0, 1], got 5");
  EXPECT_EQ(reason(launch_msg({{"master_addr", "a;b"}})),
            "launch: master_addr: expected a host name or IP address");
  EXPECT_EQ(reason(launch_msg({{"ranks", "all"}})).substr(0, 15), "launch: ranks: ");
  EXPECT_EQ(reason({{"type", "frobnicate"}}),
            "frobnicate: type: unknown message type 'frobnicate'");
  EXPECT_EQ(reason({{"type", "probe"}, {"test", "gpu_diag"}, {"deadline_ms", -1}}),
            "probe: deadline_ms: expected an integer in [1, 3600000], got -1");
  EXPECT_EQ(reason({{"type", "probe"}, {"test", "rowhammer"}, {"deadline_ms", 10}}).substr(0, 13),
            "probe: test: ");
  EXPECT_EQ(reason({{"type", "inject"}, {"fault", "crash"}, {"detail", "two\nlines"}}),
            "inject: detail: expected a single line of printable characters");
  EXPECT_EQ(reason({{"type", "inject"}, {"fault", "crash"}, {"detail", std::string(201, 'x')}}),
            "inject: detail: expected at most 200 characters");
  EXPECT_EQ(reason({{"type", "inject"}, {"fault", "slow"}, {"detail", "fast"}}),
            "inject: detail: slow expects a slowdown factor in [1, 100], e.g. \"3\"");
  EXPECT_EQ(reason({{"type", "inject"}, {"fault", "reboot"}}).substr(0, 14), "inject: fault:");
  EXPECT_EQ(reason({{"type", "inspect"}, {"kinds", {{"nic", "often"}}}}),
            "inspect: kinds.nic: expected an interval in seconds in [0.05, 86400]");
  EXPECT_EQ(reason({{"type", "replay"}, {"steps", 0}}),
            "replay: steps: expected an integer in [1, 10000000], got 0");
  // Still serving.
  EXPECT_EQ(launch("clean", {{0, 0}})["ok"], true);
}

TEST_F(AgentE2E, MissingReqGetsAnErrorWithNullReq) {
  start();
  controller_->send_raw({{"type", "kill"}, {"req", "seven"}});
  ASSERT_TRUE(wait([&] { return !controller_->of_type("error").empty(); }));
  json e = controller_->of_type("error")[0];
  EXPECT_TRUE(e["req"].is_null());
  EXPECT_EQ(e["reason"], "kill: req: expected an integer in [0, 9007199254740992]");
  controller_->send_raw({{"no_type", 1}});
  ASSERT_TRUE(wait([&] { return controller_->of_type("error").size() == 2; }));
  EXPECT_EQ(controller_->of_type("error")[1]["reason"], "type: missing (expected a string)");
  EXPECT_TRUE(controller_->connected());
}

// A fault-file directive is written with an id and confirmed only once the job acknowledged it
// by that id; the acknowledgements stay with the agent (the controller gets no report of them).
TEST_F(AgentE2E, FaultDirectivesAreConfirmedOnlyOnceTheJobAcknowledgesThem) {
  config_.job.env["FAULTLINE_TEST_BAD_ACKS"] = "1";
  start();
  launch("take", {{0, 0}, {1, 1}});
  ASSERT_TRUE(wait([&] { return controller_->of_type("report").size() == 2; }));  // started
  const std::string faults = config_.machines[0].workdir + "/faults";
  auto confirmed = [&](json m) {
    m["type"] = "inject";
    m["deadline_ms"] = 5000;
    json d = controller_->request(m);
    EXPECT_EQ(d["ok"], true) << d.dump();
    EXPECT_EQ(d["detail"].get<std::string>().rfind("id=" + d.value("id", "?") + " ", 0), 0u)
        << d.dump();
    return d;
  };
  json crash = confirmed({{"fault", "crash"}, {"detail", "CUDA error: an illegal memory access"}});
  EXPECT_EQ(crash["rank"], 0);
  EXPECT_EQ(crash["detail"],
            "id=" + crash["id"].get<std::string>() + " crash CUDA error: an illegal memory access");
  json hang = confirmed({{"fault", "hang"}, {"local_rank", 1}});
  EXPECT_EQ(hang["rank"], 1);  // taken by local rank 1, the one it names
  EXPECT_EQ(hang["detail"], "id=" + hang["id"].get<std::string>() + " local_rank=1 hang");
  json nan = confirmed({{"fault", "nan"}});
  json slow = confirmed({{"fault", "slow"}, {"detail", "3"}});
  json sdc = confirmed({{"fault", "sdc"}, {"detail", "after=5"}});
  EXPECT_NE(nan["id"], slow["id"]);
  // One-shot directives were consumed by the job; persistent ones stay.
  EXPECT_EQ(read_file(faults),
            slow["detail"].get<std::string>() + "\n" + sdc["detail"].get<std::string>() + "\n");
  for (const auto& r : controller_->of_type("report"))
    EXPECT_EQ(r["report"]["type"], "started") << r.dump();
  // A job's word is checked: an id no injection waits for, and a malformed one, are refused.
  EXPECT_TRUE(logged("report line dropped: fault: unknown id '0123456789abcdef'"));
  EXPECT_TRUE(logged("report line dropped: report: id: expected 1 to 64 letters"));
  // nic_down with a NIC runs the fixed `ip` argv (here a missing program: fails cleanly).
  json nic = controller_->request({{"type", "inject"}, {"fault", "nic_down"}});
  EXPECT_EQ(nic["type"], "done");
  EXPECT_EQ(nic["ok"], false);
  EXPECT_NE(nic["detail"].get<std::string>().find("cannot execute /nonexistent/ip"),
            std::string::npos);
  json repair = controller_->request({{"type", "inject"}, {"fault", "repair"}});
  EXPECT_EQ(repair["type"], "done");
  EXPECT_FALSE(fs::exists(faults));
}

// A directive the job does not take by its deadline is taken back out of the fault file and
// answered as not applied: it never acts late.
TEST_F(AgentE2E, ADirectiveNotAcknowledgedInTimeIsWithdrawnFromTheFaultFile) {
  config_.job.env["FAULTLINE_TEST_TAKE"] = "nan";
  start();
  launch("take", {{0, 0}});
  ASSERT_TRUE(wait([&] { return controller_->of_type("report").size() == 1; }));
  const std::string faults = config_.machines[0].workdir + "/faults";
  json slow = controller_->request(
      {{"type", "inject"}, {"fault", "slow"}, {"detail", "3"}, {"deadline_ms", 300}});
  EXPECT_EQ(slow["ok"], false);
  EXPECT_EQ(slow["detail"],
            "not acknowledged by the job within 0.300 s: cancelled (removed from the fault file)");
  EXPECT_EQ(read_file(faults), "");
  // The job still takes what it can: the next one is confirmed.
  EXPECT_EQ(controller_->request({{"type", "inject"}, {"fault", "nan"}})["ok"], true);
}

// A fault the job cannot express, or no job to take it: refused at once, nothing written.
TEST_F(AgentE2E, AFaultTheJobCannotExpressIsRefusedBeforeAnythingIsWritten) {
  config_.job.env["FAULTLINE_TEST_FAULTS"] = "crash,hang";
  start();
  const std::string faults = config_.machines[0].workdir + "/faults";
  json none = controller_->request({{"type", "inject"}, {"fault", "nan"}});
  EXPECT_EQ(none["ok"], false);
  EXPECT_EQ(none["detail"], "no local rank 0 running to take nan: nothing injected");
  launch("take", {{0, 0}});
  ASSERT_TRUE(wait([&] { return controller_->of_type("report").size() == 1; }));
  json nan = controller_->request({{"type", "inject"}, {"fault", "nan"}});
  EXPECT_EQ(nan["ok"], false);
  EXPECT_EQ(nan["detail"],
            "the job on m0 (rank 0) cannot express nan: it takes only crash, hang; nothing "
            "injected");
  EXPECT_FALSE(fs::exists(faults) && !read_file(faults).empty());
  controller_->request({{"type", "kill"}});
  config_.job.env["FAULTLINE_TEST_FAULTS"] = "-";  // a job that never acknowledges
  launch("take", {{0, 0}}, 2);
  ASSERT_TRUE(wait([&] { return controller_->of_type("report").size() == 2; }));
  json crash = controller_->request({{"type", "inject"}, {"fault", "crash"}});
  EXPECT_EQ(crash["ok"], false);
  EXPECT_EQ(crash["detail"],
            "the job on m0 (rank 0) cannot express crash: it acknowledges no injected fault; "
            "nothing injected");
}

// The controller gave up on an inject while this agent was stopped and sent a cancel behind
// it: the agent reads both when it resumes, and the cancel wins (issue 52: a kill landed late,
// with no fault record).
TEST_F(AgentE2E, ACancelReadBehindItsInjectWinsAndNothingLands) {
  start();
  launch("take", {{0, 0}});
  ASSERT_TRUE(wait([&] { return controller_->of_type("report").size() == 1; }));
  const pid_t pid = agent_->rank_pids()[0];
  controller_->send_raw({{"type", "inject"}, {"fault", "kill"}, {"req", 700}});
  controller_->send_raw({{"type", "cancel"}, {"inject_req", 700}, {"req", 701}});
  controller_->send_raw({{"type", "inject"}, {"fault", "nan"}, {"req", 702}});
  controller_->send_raw({{"type", "cancel"}, {"inject_req", 702}, {"req", 703}});
  ASSERT_TRUE(wait([&] {
    return controller_->index_of([](const json& m) { return m.value("req", 0) == 703; }) !=
           std::string::npos;
  }));
  wait([] { return false; }, 0.5);
  EXPECT_EQ(::kill(pid, 0), 0) << "the cancelled kill landed";
  EXPECT_TRUE(controller_->of_type("exit").empty());
  for (int req : {700, 702})
    EXPECT_EQ(controller_->index_of([&](const json& m) { return m.value("req", 0) == req; }),
              std::string::npos)
        << "request " << req << " was applied";
  EXPECT_TRUE(logged("injection of request 700 cancelled by the controller before it was applied"));
  EXPECT_TRUE(logged("injection of request 702 cancelled by the controller before it was applied"));
  const std::string faults = config_.machines[0].workdir + "/faults";
  EXPECT_FALSE(fs::exists(faults) && !read_file(faults).empty());
  // A cancel of a directive waiting for its acknowledgement takes it back out of the file.
  config_.job.env["FAULTLINE_TEST_TAKE"] = "crash";
  controller_->request({{"type", "kill"}});
  launch("take", {{0, 0}}, 2);
  ASSERT_TRUE(wait([&] { return controller_->of_type("report").size() == 2; }));
  controller_->send_raw(
      {{"type", "inject"}, {"fault", "sdc"}, {"detail", "after=1"}, {"req", 710}});
  ASSERT_TRUE(wait([&] { return read_file(faults).find("sdc after=1") != std::string::npos; }));
  json c = controller_->request({{"type", "cancel"}, {"inject_req", 710}});
  EXPECT_EQ(c["ok"], true);
  EXPECT_EQ(read_file(faults), "");
}

TEST_F(AgentE2E, NicDownNeedsAConfiguredNic) {
  config_.machines[0].nic = "";
  start();
  json r = controller_->request({{"type", "inject"}, {"fault", "nic_down"}});
  EXPECT_EQ(r["type"], "error");
  EXPECT_EQ(r["reason"], "inject: fault: nic_down needs a nic in the config of machine m0");
  json repair = controller_->request({{"type", "inject"}, {"fault", "repair"}});
  EXPECT_EQ(repair["ok"], true);
}

}  // namespace
}  // namespace faultline::live
