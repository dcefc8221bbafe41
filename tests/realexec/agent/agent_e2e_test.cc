// The agent end to end against a minimal controller in the test, on one reactor:
// authentication, launches of a helper rank program (no shell), reports, exits and
// their signatures, kill of a stopped rank, captures, probes, replays, injected faults,
// inspection alerts, disconnection, invalid requests, shutdown and machine_down.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "realexec/agent/agent.h"
#include "realexec/agent/stack_capture.h"
#include "realexec/net/auth.h"

namespace faultline::live {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kToken = "test-token-0123456789abcdef";

// A Python rank that registers faulthandler on FAULTLINE_STACK_FD as faultline.Job does
// (python/faultline/report.py), announces the signal argv[1] in its started report from a
// known function and blocks there.
constexpr const char* kPyRank = R"(
import faulthandler, json, os, signal, sys, time
if sys.argv[1] == "SIGUSR2":
    faulthandler.register(signal.SIGUSR2, file=int(os.environ["FAULTLINE_STACK_FD"]),
                          all_threads=True, chain=False)
def blocked_in_a_known_function():
    os.write(3, (json.dumps({"type": "started", "rank": int(os.environ["RANK"]), "step": 0,
                             "pid": os.getpid(), "stack_signal": sys.argv[1]}) + "\n").encode())
    while True:
        time.sleep(3600)
blocked_in_a_known_function()
)";

// Accepts agent connections, checks the hello's token, records every message.
class FakeController {
 public:
  FakeController(Reactor& r, std::string token) : r_(r), token_(std::move(token)) {
    std::string err;
    listen_fd_ = listen_tcp("127.0.0.1", 0, &err);
    EXPECT_GE(listen_fd_, 0) << err;
    port_ = bound_port(listen_fd_);
    accept_on();
  }
  ~FakeController() {
    conn_.reset();
    if (accepting_) r_.remove_fd(listen_fd_);
    ::close(listen_fd_);
  }
  int port() const { return port_; }
  void accept_on() {
    if (accepting_) return;
    accepting_ = true;
    r_.add_fd(listen_fd_, EPOLLIN, [this](std::uint32_t) {
      std::string peer;
      int fd = accept_tcp(listen_fd_, &peer);
      if (fd < 0) return;
      ++connections;
      conn_ = std::make_unique<Conn>(
          r_, fd, peer,
          Conn::Handlers{[this](const json& m) { on_message(m); },
                         [this](const std::string& why) { closed.push_back(why); }});
    });
  }
  // Connections then wait in the listen backlog.
  void accept_off() {
    if (!accepting_) return;
    accepting_ = false;
    r_.remove_fd(listen_fd_);
  }
  void send_raw(const json& m) { EXPECT_TRUE(conn_ && conn_->send(m)); }
  void drop() {
    if (conn_) conn_->close("test drops the agent");
  }
  bool connected() const { return conn_ && conn_->is_open() && welcomed_; }

  // Sends `m` with a fresh req and waits for its done/error.
  json request(json m, Duration timeout = Duration::seconds(30)) {
    std::int64_t req = next_req_++;
    m["req"] = req;
    EXPECT_TRUE(conn_ && conn_->send(m));
    json reply;
    r_.run_until(
        [&] {
          for (const auto& x : messages) {
            if ((x["type"] == "done" || x["type"] == "error") && x.contains("req") &&
                x["req"] == req) {
              reply = x;
              return true;
            }
          }
          return false;
        },
        timeout);
    EXPECT_FALSE(reply.is_null()) << "no reply to " << m.dump();
    return reply;
  }
  std::vector<json> of_type(const std::string& type) const {
    std::vector<json> out;
    for (const auto& m : messages) {
      if (m["type"] == type) out.push_back(m);
    }
    return out;
  }
  std::size_t index_of(const std::function<bool(const json&)>& pred) const {
    for (std::size_t i = 0; i < messages.size(); ++i) {
      if (pred(messages[i])) return i;
    }
    return std::string::npos;
  }

  std::vector<json> messages;
  std::vector<json> hellos;
  std::vector<json> auths;
  bool skip_challenge = false;  // a rogue that welcomes without proving anything
  std::vector<std::string> closed;
  int connections = 0;

 private:
  // The controller's side of the handshake (auth.h), or a rogue's when `skip_challenge`.
  void on_message(const json& m) {
    const std::string type = m.value("type", "");
    if (type == "hello") {
      hellos.push_back(m);
      if (skip_challenge) {
        conn_->send({{"type", "welcome"}, {"machine", m["name"]}, {"role", "job"}});
        return;
      }
      conn_->send(handshake_.challenge(token_, decode_hello(m, kProtocolVersion)));
      return;
    }
    if (type == "auth") {
      auths.push_back(m);
      if (!handshake_.verify(token_, decode_auth(m))) {
        conn_->send({{"type", "refused"}, {"reason", "bad token"}});
        conn_->close_after_flush("refused");
        return;
      }
      welcomed_ = true;
      conn_->send({{"type", "welcome"}, {"machine", handshake_.hello().name}, {"role", "job"}});
      return;
    }
    messages.push_back(m);
  }

  Reactor& r_;
  std::string token_;
  int listen_fd_ = -1;
  int port_ = 0;
  bool accepting_ = false;
  bool welcomed_ = false;
  std::unique_ptr<Conn> conn_;
  ControllerHandshake handshake_;
  std::int64_t next_req_ = 1;
};

class AgentE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/faultline-agent-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    fs::create_directories(dir_ + "/sys/class/net/eth0");
    set_operstate("up");
    std::ofstream(dir_ + "/kmsg") << "6,1,1,-;boot line\n";

    config_.file = dir_ + "/live.json";
    config_.controller_host = "127.0.0.1";
    config_.heartbeat_s = 0.1;
    LiveMachine m;
    m.name = "m0";
    m.addr = "127.0.0.1";
    m.workdir = dir_ + "/work";
    m.nic = "eth0";
    m.gpu_pci = {"0000:3b:00.0"};
    config_.machines.push_back(m);
    LiveMachine s = m;
    s.name = "s0";
    config_.standby.push_back(s);
    const std::string helper = FAULTLINE_AGENT_TEST_RANK;
    config_.job.versions["v1"] = {helper, "report", "3", "7"};
    config_.job.versions["sleep"] = {helper, "sleep"};
    config_.job.versions["env"] = {helper, "env"};
    config_.job.versions["flood"] = {helper, "flood", "300000"};
    config_.job.versions["junk"] = {helper, "junk"};
    config_.job.versions["take"] = {helper, "take"};
    config_.job.versions["clean"] = {helper, "report", "0", "0"};
    // A Python rank as faultline.Job announces its stack dump (argv: the signal it names).
    for (const char* sig : {"SIGUSR2", "SIGKILL"})
      config_.job.versions[std::string("py-") + sig] = {"/usr/bin/python3", "-c", kPyRank, sig};
    config_.job.env["FAULTLINE_TEST_EXTRA"] = "extra";
    config_.trainjob_bin = helper;
    config_.probe_bin = helper;
  }
  void TearDown() override {
    agent_.reset();
    controller_.reset();
    fs::remove_all(dir_);
  }
  void set_operstate(const std::string& s) {
    std::ofstream(dir_ + "/sys/class/net/eth0/operstate") << s << "\n";
  }
  void start(const std::string& controller_token = kToken, const std::string& name = "m0") {
    controller_ = std::make_unique<FakeController>(r_, controller_token);
    config_.controller_port = controller_->port();
    AgentOptions o = agent_options_;
    o.sysfs_root = dir_ + "/sys";
    o.kmsg_path = dir_ + "/kmsg";
    o.ip_program = "/nonexistent/ip";  // never touch the host's interfaces
    o.backoff_min = Duration::millis(100);
    o.backoff_max = Duration::millis(400);
    o.log = [this](const std::string& l) { logs_.push_back(l); };
    agent_ = std::make_unique<Agent>(r_, config_, name, kToken, o);
    agent_->start();
    if (controller_token == kToken) {
      ASSERT_TRUE(r_.run_until([&] { return controller_->connected() && agent_->connected(); },
                               Duration::seconds(5)));
    }
  }
  json launch(const std::string& version, std::vector<std::pair<int, int>> ranks, int gen = 1,
              int world = 4) {
    json rs = json::array();
    for (auto [r, l] : ranks) rs.push_back({{"rank", r}, {"local_rank", l}});
    return controller_->request({{"type", "launch"},
                                 {"gen", gen},
                                 {"version", version},
                                 {"ranks", rs},
                                 {"world_size", world},
                                 {"master_addr", "127.0.0.1"},
                                 {"master_port", 29500},
                                 {"ckpt_every", 50}});
  }
  bool wait(const std::function<bool()>& pred, double seconds = 10) {
    return r_.run_until(pred, Duration::seconds(seconds));
  }
  bool logged(const std::string& part) const {
    for (const auto& l : logs_) {
      if (l.find(part) != std::string::npos) return true;
    }
    return false;
  }
  std::string read_file(const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  std::string dir_;
  LiveConfig config_;
  Reactor r_;
  std::unique_ptr<FakeController> controller_;
  std::unique_ptr<Agent> agent_;
  AgentOptions agent_options_;  // what start() does not set (a scripted host)
  std::vector<std::string> logs_;
};

TEST_F(AgentE2E, HandshakeProvesTheTokenWithoutSendingItAndHeartbeatsFollow) {
  start();
  ASSERT_EQ(controller_->hellos.size(), 1u);
  ASSERT_EQ(controller_->auths.size(), 1u);
  const json& h = controller_->hellos[0];
  EXPECT_FALSE(h.contains("token"));
  EXPECT_EQ(h["role"], "agent");
  EXPECT_EQ(h["name"], "m0");
  EXPECT_EQ(h["proto"], 2);
  EXPECT_TRUE(is_hex256(h["nonce"].get<std::string>()));
  const json& a = controller_->auths[0];
  EXPECT_EQ(a["pid"], ::getpid());
  EXPECT_EQ(a["ranks"], json::array());
  EXPECT_TRUE(is_hex256(a["proof"].get<std::string>()));
  // Nothing the agent sent contains the token.
  for (const json& m : {h, a}) EXPECT_EQ(m.dump().find(kToken), std::string::npos) << m.dump();
  EXPECT_TRUE(wait([&] { return controller_->of_type("heartbeat").size() >= 3; }, 5));
}

// A controller on the port that does not hold the token: its proof fails, the agent says
// so, sends no proof of its own and keeps redialling; one that skips the challenge and
// welcomes at once is not believed either. The job's requests are never obeyed.
TEST_F(AgentE2E, RogueControllerIsRefusedAndLearnsNoProof) {
  start("another-token-0123456789");
  ASSERT_TRUE(wait([&] { return controller_->hellos.size() >= 3; }, 10));
  EXPECT_TRUE(logged("failed authentication: its proof does not match our token"));
  EXPECT_TRUE(controller_->auths.empty()) << "the agent answered a controller that proved nothing";
  EXPECT_TRUE(controller_->messages.empty());
  for (const json& h : controller_->hellos) EXPECT_EQ(h.dump().find(kToken), std::string::npos);
  EXPECT_FALSE(agent_->connected());
  controller_->skip_challenge = true;
  const std::size_t before = controller_->hellos.size();
  ASSERT_TRUE(wait([&] { return controller_->hellos.size() >= before + 2; }, 10));
  EXPECT_TRUE(logged("sent 'welcome' before proving the token; closing"));
  EXPECT_FALSE(agent_->connected());
  EXPECT_TRUE(controller_->messages.empty()) << "no heartbeat, report or reply to a rogue";
}

TEST_F(AgentE2E, StandbyMachinesRunAgentsToo) {
  start(kToken, "s0");
  EXPECT_EQ(controller_->hellos[0]["name"], "s0");
}

TEST_F(AgentE2E, UnknownMachineNameIsAConfigError) {
  controller_ = std::make_unique<FakeController>(r_, kToken);
  try {
    Agent a(r_, config_, "nope", kToken);
    FAIL() << "expected LiveConfigError";
  } catch (const LiveConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              config_.file + ": machines: no machine or standby named 'nope'");
  }
}

TEST_F(AgentE2E, WrongTokenIsRefusedLoggedAndRetried) {
  start("another-token-0123456789");
  ASSERT_TRUE(wait([&] { return controller_->hellos.size() >= 3; }, 10));
  EXPECT_TRUE(logged("failed authentication"));
  EXPECT_FALSE(agent_->connected());
  EXPECT_FALSE(agent_->finished());
}

TEST_F(AgentE2E, LaunchForwardsReportsAndExitsWithSignature) {
  start();
  json d = launch("v1", {{2, 0}, {3, 1}});
  EXPECT_EQ(d["type"], "done");
  EXPECT_EQ(d["ok"], true);
  EXPECT_TRUE(d.contains("duration_s"));
  ASSERT_TRUE(wait([&] { return controller_->of_type("exit").size() == 2; }));
  auto reports = controller_->of_type("report");
  ASSERT_EQ(reports.size(), 8u);  // 3 steps + 1 fatal per rank
  for (const auto& r : reports) {
    EXPECT_EQ(r["gen"], 1);
    if (r["report"]["type"] == "step") {
      EXPECT_EQ(r["report"]["rank"], r["rank"]);
    }
  }
  for (const auto& e : controller_->of_type("exit")) {
    EXPECT_EQ(e["gen"], 1);
    EXPECT_TRUE(e["rank"] == 2 || e["rank"] == 3);
    EXPECT_EQ(e["code"], 7);
    EXPECT_EQ(e["signal"], 0);
    EXPECT_EQ(e["signature"], "CUDA error: illegal memory access");  // the fatal report's
    // Reports of a rank arrive before its exit.
    std::size_t exit_at = controller_->index_of(
        [&](const json& m) { return m["type"] == "exit" && m["rank"] == e["rank"]; });
    std::size_t fatal_at = controller_->index_of([&](const json& m) {
      return m["type"] == "report" && m["rank"] == e["rank"] && m["report"]["type"] == "fatal";
    });
    EXPECT_LT(fatal_at, exit_at);
  }
  // stdout and stderr in the rank's log.
  std::string log = read_file(config_.machines[0].workdir + "/logs/rank2.gen1.log");
  EXPECT_NE(log.find("loading shard 3"), std::string::npos);
  EXPECT_NE(log.find("illegal memory access"), std::string::npos);
  EXPECT_TRUE(agent_->rank_pids().empty());
}

// Issue 37, item 7: a job writing ~70k step reports a second filled the agent's queue to the
// controller past 16 MiB; the agent dropped its own connection, the controller took that for
// a lost machine. Step reports are coalesced at the agent (a burst, then 100 a second, the
// newest kept), other reports keep their order after the newest step, and the connection
// stays up.
TEST_F(AgentE2E, AFloodOfStepReportsIsCoalescedAndTheConnectionStays) {
  start();
  ASSERT_EQ(launch("flood", {{0, 0}})["ok"], true);
  // 300,000 reports took 9.4 to 10.2 s to write and read on a loaded 2-core machine: the wait
  // is for their end, not a bound on it.
  ASSERT_TRUE(wait(
      [&] {
        for (const auto& r : controller_->of_type("report"))
          if (r["report"]["type"] == "checkpoint") return true;
        return false;
      },
      60));
  const auto reports = controller_->of_type("report");
  ASSERT_GE(reports.size(), 2u);
  EXPECT_LT(reports.size(), 2000u) << "not coalesced";
  const json& last_step = reports[reports.size() - 2]["report"];
  EXPECT_EQ(last_step["type"], "step");
  EXPECT_EQ(last_step["step"], 299999) << "the newest step comes before the checkpoint";
  std::int64_t prev = -1;
  for (const auto& r : reports)
    if (r["report"]["type"] == "step") {
      EXPECT_GT(r["report"]["step"].get<std::int64_t>(), prev);
      prev = r["report"]["step"].get<std::int64_t>();
    }
  EXPECT_TRUE(agent_->connected());
  EXPECT_FALSE(logged("lost the controller"));
  EXPECT_TRUE(logged("coalescing them"));
}

// Issue 37, item 13: an agent had no handshake deadline: a controller port that accepts and
// never answers (a wedged controller, a port taken by something else) held it forever. It
// closes and redials when no welcome comes in time.
TEST_F(AgentE2E, AControllerThatNeverAnswersIsLeftAtTheHandshakeDeadline) {
  std::string err;
  const int silent = listen_tcp("127.0.0.1", 0, &err);  // accepts (the backlog does), says nothing
  ASSERT_GE(silent, 0) << err;
  config_.controller_port = bound_port(silent);
  AgentOptions o;
  o.sysfs_root = dir_ + "/sys";
  o.kmsg_path = dir_ + "/kmsg";
  o.ip_program = "/nonexistent/ip";
  o.backoff_min = Duration::millis(100);
  o.backoff_max = Duration::millis(100);
  o.handshake_timeout = Duration::millis(300);
  o.log = [this](const std::string& l) { logs_.push_back(l); };
  agent_ = std::make_unique<Agent>(r_, config_, "m0", kToken, o);
  agent_->start();
  r_.run_until([&] { return false; }, Duration::seconds(1.5));
  int deadlines = 0;
  for (const auto& l : logs_) deadlines += l.find("handshake deadline") != std::string::npos;
  EXPECT_GE(deadlines, 2) << "closed at the deadline, redialled, closed again";
  EXPECT_FALSE(agent_->connected());
  agent_.reset();
  ::close(silent);
}

TEST_F(AgentE2E, WithoutAFatalReportTheLastErrorLineOfStderrIsTheSignature) {
  config_.job.env["FAULTLINE_TEST_NO_FATAL"] = "1";
  start();
  launch("v1", {{0, 0}});
  ASSERT_TRUE(wait([&] { return controller_->of_type("exit").size() == 1; }));
  EXPECT_EQ(controller_->of_type("exit")[0]["signature"],
            "RuntimeError: CUDA error: an illegal memory access was encountered");
}

TEST_F(AgentE2E, CleanExitSignatureIsTheExitCode) {
  start();
  launch("clean", {{0, 0}});
  ASSERT_TRUE(wait([&] { return controller_->of_type("exit").size() == 1; }));
  EXPECT_EQ(controller_->of_type("exit")[0]["signature"], "exit code 0");
}

TEST_F(AgentE2E, RanksGetTheLaunchEnvironment) {
  start();
  launch("env", {{5, 1}}, 3, 8);
  ASSERT_TRUE(wait([&] { return controller_->of_type("report").size() == 1; }));
  json env = controller_->of_type("report")[0]["report"];
  const std::string work = config_.machines[0].workdir;
  EXPECT_EQ(env["RANK"], "5");
  EXPECT_EQ(env["WORLD_SIZE"], "8");
  EXPECT_EQ(env["LOCAL_RANK"], "1");
  EXPECT_EQ(env["MASTER_ADDR"], "127.0.0.1");
  EXPECT_EQ(env["MASTER_PORT"], "29500");
  EXPECT_EQ(env["FAULTLINE_HOST_ADDR"], "127.0.0.1");
  EXPECT_EQ(env["FAULTLINE_CKPT_DIR"], work + "/ckpt");
  EXPECT_EQ(env["FAULTLINE_CKPT_EVERY"], "50");
  EXPECT_EQ(env["FAULTLINE_FAULT_FILE"], work + "/faults");
  EXPECT_EQ(env["FAULTLINE_REPORT_FD"], "3");
  EXPECT_EQ(env["FAULTLINE_TEST_EXTRA"], "extra");
  EXPECT_TRUE(fs::is_directory(work + "/ckpt"));
  // Issue 37, item 8: a launch while ranks of an older generation still run (a machine
  // evicted while its agent was silent, so the kill never reached it) was refused with
  // "still running", and the controller retried without end (generation 2 -> 587 in 30 s,
  // never training again). The old ranks die first now, then the launch goes on.
  json d = launch("env", {{0, 0}}, 4);
  EXPECT_EQ(d["type"], "done") << d.dump();
  EXPECT_EQ(d["ok"], true) << d.dump();
  EXPECT_EQ(d["gen"], 4);
  ASSERT_TRUE(wait([&] { return controller_->of_type("exit").size() == 1; }));
  const json old = controller_->of_type("exit")[0];
  EXPECT_EQ(old["gen"], 3);
  EXPECT_EQ(old["signal"], SIGKILL);
  ASSERT_TRUE(wait([&] { return controller_->of_type("report").size() == 2; }));
  EXPECT_EQ(controller_->of_type("report")[1]["gen"], 4);
  EXPECT_EQ(controller_->of_type("report")[1]["report"]["RANK"], "0");
}

// Issue 52: gdb spent 9 to 10 s on each PyTorch rank of a loaded 2-core machine, so the
// capture of a hung DDP job hit its 15 s deadline everywhere and found no outlier. A rank
// that announced its stack signal dumps its own Python stacks; a stopped one cannot run the
// handler and is answered at once, not signalled.
TEST_F(AgentE2E, APythonRankDumpsItsOwnStacksAndAStoppedOneIsAnsweredAtOnce) {
  if (find_program("/usr/bin/python3").empty()) GTEST_SKIP() << "no /usr/bin/python3";
  start();
  json d = launch("py-SIGUSR2", {{0, 0}, {1, 1}});
  ASSERT_EQ(d["ok"], true) << d.dump();
  // Python's start on a loaded machine: awaited.
  ASSERT_TRUE(wait([&] { return controller_->of_type("report").size() == 2; }, 60));
  for (const auto& r : controller_->of_type("report"))
    EXPECT_EQ(r["report"]["stack_signal"], "SIGUSR2") << r.dump();
  json c = controller_->request({{"type", "capture"}});
  ASSERT_EQ(c["type"], "done") << c.dump();
  const std::string sig = "blocked_in_a_known_function < <module>";
  EXPECT_EQ(c["by_rank"]["0"], sig);
  EXPECT_EQ(c["by_rank"]["1"], sig);
  std::cout << "capture of 2 Python ranks took " << c["duration_s"] << " s" << std::endl;
  EXPECT_LT(c["duration_s"].get<double>(), 5.0);
  auto pids = agent_->rank_pids();
  json s = controller_->request({{"type", "inject"}, {"fault", "stop"}});
  EXPECT_EQ(s["ok"], true) << s.dump();
  for (int i = 0; i < 500 && process_state(pids[0]) != 'T'; ++i) ::usleep(10000);
  c = controller_->request({{"type", "capture"}});
  ASSERT_EQ(c["type"], "done") << c.dump();
  EXPECT_EQ(c["by_rank"]["0"], std::string("[stopped] ") + kStoppedNoPython);
  EXPECT_EQ(c["by_rank"]["1"], sig);
  std::cout << "with rank 0 stopped: " << c["duration_s"] << " s" << std::endl;
  EXPECT_LT(c["duration_s"].get<double>(), 5.0);
  EXPECT_TRUE(controller_->of_type("exit").empty()) << "a capture ended a rank";
}

TEST_F(AgentE2E, AStackSignalOtherThanTheUserSignalsIsRefusedInOneLine) {
  if (find_program("/usr/bin/python3").empty()) GTEST_SKIP() << "no /usr/bin/python3";
  start();
  ASSERT_EQ(launch("py-SIGKILL", {{0, 0}})["ok"], true);
  ASSERT_TRUE(wait([&] { return logged("stack_signal"); }, 60));
  EXPECT_TRUE(
      logged("rank 0: report line dropped: report: stack_signal: expected \"SIGUSR1\" "
             "or \"SIGUSR2\" (the signal on which the rank dumps its Python stacks), "
             "got \"SIGKILL\""));
  EXPECT_TRUE(controller_->of_type("report").empty());
}

TEST_F(AgentE2E, KillWorksOnAStoppedRankAndCaptureMarksIt) {
  start();
  launch("sleep", {{0, 0}, {1, 1}});
  auto pids = agent_->rank_pids();
  ASSERT_EQ(pids.size(), 2u);
  wait([] { return false; }, 0.3);  // let the helpers reach their sleeping function
  json d = controller_->request({{"type", "inject"}, {"fault", "stop"}});
  EXPECT_EQ(d["ok"], true);
  EXPECT_EQ(d["rank"], 0);
  for (int i = 0; i < 100 && process_state(pids[0]) != 'T'; ++i) ::usleep(10000);
  if (!find_program("gdb").empty()) {
    json c = controller_->request({{"type", "capture"}});
    ASSERT_EQ(c["type"], "done");
    std::string s0 = c["by_rank"]["0"];
    std::string s1 = c["by_rank"]["1"];
    EXPECT_EQ(s0.rfind("[stopped] ", 0), 0u) << s0;
    EXPECT_NE(s0.find("helper_sleep_forever < main"), std::string::npos) << s0;
    EXPECT_NE(s1.find("helper_sleep_forever < main"), std::string::npos) << s1;
    EXPECT_EQ(s1.find("[stopped]"), std::string::npos) << s1;
  }
  json k = controller_->request({{"type", "kill"}, {"gen", 1}});
  EXPECT_EQ(k["type"], "done");
  EXPECT_EQ(k["ok"], true);
  auto exits = controller_->of_type("exit");
  ASSERT_EQ(exits.size(), 2u);  // before the kill's done
  for (const auto& e : exits) {
    EXPECT_EQ(e["signature"], "killed by signal 9 (SIGKILL)");
    EXPECT_EQ(e["signal"], 9);
    EXPECT_EQ(e["code"], -1);
  }
  EXPECT_TRUE(agent_->rank_pids().empty());
  EXPECT_NE(::kill(pids[0], 0), 0);
  // Nothing left to kill.
  json again = controller_->request({{"type", "kill"}, {"gen", 1}});
  EXPECT_EQ(again["ok"], true);
}

TEST_F(AgentE2E, InjectedKillIsAnExitWithSignal) {
  start();
  launch("sleep", {{0, 0}});
  EXPECT_EQ(controller_->request({{"type", "inject"}, {"fault", "kill"}})["ok"], true);
  ASSERT_TRUE(wait([&] { return controller_->of_type("exit").size() == 1; }));
  EXPECT_EQ(controller_->of_type("exit")[0]["signature"], "killed by signal 9 (SIGKILL)");
  json none = controller_->request({{"type", "inject"}, {"fault", "kill"}});
  EXPECT_EQ(none["ok"], false);
  EXPECT_EQ(none["detail"], "no local rank 0 running");
}

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

TEST_F(AgentE2E, InspectionAlerts) {
  start();
  json d = controller_->request(
      {{"type", "inspect"}, {"kinds", {{"nic", 0.1}, {"gpu", 0.1}, {"host", 0.1}, {"switch", 1}}}});
  EXPECT_EQ(d["ok"], true);
  EXPECT_EQ(d["active"], json::array({"gpu", "host", "nic"}));
  EXPECT_EQ(d["ignored"], json::array({"switch"}));
  wait([] { return false; }, 0.3);
  EXPECT_TRUE(controller_->of_type("alert").empty());  // NIC up, quiet kernel log
  set_operstate("down");
  ASSERT_TRUE(wait([&] { return controller_->of_type("alert").size() >= 2; }));
  EXPECT_EQ(controller_->of_type("alert")[0]["kind"], "nic");
  EXPECT_EQ(controller_->of_type("alert")[0]["detail"], "nic eth0 is down (operstate down)");
  set_operstate("up");
  wait([] { return false; }, 0.2);
  controller_->messages.clear();
  {
    std::ofstream k(dir_ + "/kmsg", std::ios::app);
    k << "4,10,100,-;NVRM: Xid (PCI:0000:af:00): 79, another machine's GPU\n";
    k << "4,11,101,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.\n";
    k << "2,12,102,-;mce: [Hardware Error]: Machine check events logged\n";
  }
  ASSERT_TRUE(wait([&] { return controller_->of_type("alert").size() >= 2; }));
  wait([] { return false; }, 0.3);
  auto alerts = controller_->of_type("alert");
  ASSERT_EQ(alerts.size(), 2u);
  for (const auto& a : alerts) {
    if (a["kind"] == "gpu") {
      EXPECT_NE(a["detail"].get<std::string>().find("fallen off the bus"), std::string::npos);
    } else {
      EXPECT_EQ(a["kind"], "host");
      EXPECT_NE(a["detail"].get<std::string>().find("Machine check"), std::string::npos);
    }
  }
  // An empty set stops inspection.
  EXPECT_EQ(controller_->request({{"type", "inspect"}, {"kinds", json::object()}})["ok"], true);
  set_operstate("down");
  controller_->messages.clear();
  wait([] { return false; }, 0.3);
  EXPECT_TRUE(controller_->of_type("alert").empty());
}

TEST_F(AgentE2E, UnreadableKernelLogIsSaidOnce) {
  fs::remove(dir_ + "/kmsg");
  start();
  json d = controller_->request({{"type", "inspect"}, {"kinds", {{"gpu", 1}}}});
  EXPECT_EQ(d["ok"], true);
  EXPECT_NE(d["detail"].get<std::string>().find("kernel log unavailable"), std::string::npos);
  controller_->request({{"type", "inspect"}, {"kinds", {{"gpu", 1}}}});
  int said = 0;
  for (const auto& l : logs_) said += l.find("kernel log unavailable") != std::string::npos;
  EXPECT_EQ(said, 1);
}

TEST_F(AgentE2E, Probes) {
  start();
  json b = controller_->request(
      {{"type", "probe"}, {"test", "bitwise"}, {"deadline_ms", 10000}, {"seed", 42}, {"steps", 3}});
  EXPECT_EQ(b["ok"], true) << b.dump();
  EXPECT_EQ(b["test"], "bitwise");
  EXPECT_EQ(b["hash"], "h-42-3");
  EXPECT_EQ(b["timed_out"], false);
  EXPECT_EQ(b["result"]["fault_file"], config_.machines[0].workdir + "/faults");
  json s = controller_->request(
      {{"type", "probe"}, {"test", "stress"}, {"deadline_ms", 10000}, {"seed", 1}, {"steps", 3}});
  EXPECT_EQ(s["hash"], "h-1-30");
  json g = controller_->request({{"type", "probe"}, {"test", "gpu_diag"}, {"deadline_ms", 10000}});
  EXPECT_EQ(g["ok"], true) << g.dump();
  EXPECT_EQ(g["detail"], "no_gpu");
  EXPECT_EQ(g["verdict"], "no_gpu");
  json a = controller_->request(
      {{"type", "probe"}, {"test", "intra_all_to_all"}, {"deadline_ms", 10000}});
  EXPECT_EQ(a["detail"], "no_gpu");
  json ag = controller_->request({{"type", "probe"},
                                  {"test", "inter_all_gather"},
                                  {"deadline_ms", 10000},
                                  {"rank", 1},
                                  {"world_size", 2},
                                  {"master_addr", "127.0.0.1"},
                                  {"master_port", 29600}});
  EXPECT_EQ(ag["ok"], true) << ag.dump();
  EXPECT_EQ(ag["result"]["kind"], "allgather");
  EXPECT_EQ(ag["collective_s"], 0.25) << "the all-gather's own time, lifted into the reply";
  config_.job.env["FAULTLINE_TEST_HANG"] = "1";
  json t = controller_->request({{"type", "probe"},
                                 {"test", "inter_all_gather"},
                                 {"deadline_ms", 300},
                                 {"rank", 0},
                                 {"world_size", 2},
                                 {"master_addr", "127.0.0.1"},
                                 {"master_port", 29600}});
  EXPECT_EQ(t["ok"], false);
  EXPECT_EQ(t["timed_out"], true);
  EXPECT_LT(t["duration_s"].get<double>(), 5.0);
  config_.probe_bin = "";
  json n = controller_->request({{"type", "probe"}, {"test", "gpu_diag"}, {"deadline_ms", 1000}});
  EXPECT_EQ(n["ok"], true);
  EXPECT_EQ(n["detail"], "no probe program");
}

TEST_F(AgentE2E, Replay) {
  start();
  json base = {{"type", "replay"},           {"steps", 20},          {"world_size", 2},
               {"master_addr", "127.0.0.1"}, {"master_port", 29700}, {"deadline_ms", 10000}};
  json r0 = base;
  r0["rank"] = 0;
  json d0 = controller_->request(r0);
  EXPECT_EQ(d0["ok"], true) << d0.dump();
  EXPECT_EQ(d0["hash"], "r-20");
  EXPECT_EQ(d0["from_step"], 40);
  json r1 = base;
  r1["rank"] = 1;
  json d1 = controller_->request(r1);
  EXPECT_EQ(d1["ok"], true);
  EXPECT_FALSE(d1.contains("hash"));
}

TEST_F(AgentE2E, ShutdownKillsRanksRepliesAndExitsZero) {
  start();
  launch("sleep", {{0, 0}});
  pid_t pid = agent_->rank_pids().at(0);
  // The agent stops the reactor it shares with the fake controller when it finishes, so
  // wait for that first, then let the controller read what was sent.
  controller_->send_raw({{"type", "shutdown"}, {"req", 77}});
  ASSERT_TRUE(wait([&] { return agent_->finished(); }));
  EXPECT_EQ(agent_->exit_code(), 0);
  ASSERT_TRUE(wait([&] {
    return controller_->index_of([](const json& m) {
      return m["type"] == "done" && m["req"] == 77;
    }) != std::string::npos;
  }));
  EXPECT_TRUE(wait([&] { return !controller_->closed.empty(); }));  // the agent hung up
  EXPECT_EQ(controller_->of_type("exit").size(), 1u);
  EXPECT_NE(::kill(pid, 0), 0);
}

TEST_F(AgentE2E, MachineDownKillsEverythingAndExits137) {
  start();
  launch("sleep", {{0, 0}, {1, 1}});
  auto pids = agent_->rank_pids();
  controller_->send_raw({{"type", "inject"}, {"fault", "machine_down"}, {"req", 99}});
  ASSERT_TRUE(wait([&] { return agent_->finished(); }));
  EXPECT_EQ(agent_->exit_code(), 137);
  wait([] { return false; }, 0.2);
  EXPECT_EQ(controller_->index_of([](const json& m) { return m["req"] == 99; }),
            std::string::npos);  // no reply: the machine is gone
  // The ranks die at once (the reactor's child watch reaps them).
  EXPECT_TRUE(wait([&] {
    for (auto [rank, pid] : pids) {
      if (::kill(pid, 0) == 0) return false;
    }
    return true;
  }));
}

// inter_all_gather with a relayed rendezvous (PROTOCOL.md, "Probes across machines"), with the
// real faultline-probe and GPUs hidden: rank 0's agent sends its probe's blob before its reply;
// another rank's probe takes the controller's relay; a relay that fits no running probe of this
// connection, a second one, or one for rank 0 is refused with an error and writes nothing.
TEST_F(AgentE2E, RelayedRendezvousBlobsGoOutOnceAndOnlyFittingRelaysAreTaken) {
  config_.probe_bin = FAULTLINE_PROBE_BIN;
  config_.job.env["CUDA_VISIBLE_DEVICES"] = "";  // no GPU: the probe does its rendezvous alone
  start();
  auto reason = [&](json m) {
    json r = controller_->request(std::move(m));
    EXPECT_EQ(r["type"], "error") << r.dump();
    return r.value("reason", "");
  };
  auto probe = [](std::int64_t req, int rank) {
    return json{{"type", "probe"},
                {"req", req},
                {"test", "inter_all_gather"},
                {"deadline_ms", 10000},
                {"rank", rank},
                {"world_size", 2},
                {"master_addr", "127.0.0.1"},
                {"master_port", 29600},
                {"rendezvous", true}};
  };
  auto reply_to = [&](std::int64_t req) {
    json reply;
    wait(
        [&] {
          for (const auto& x : controller_->messages)
            if ((x["type"] == "done" || x["type"] == "error") && x.value("req", json()) == req)
              reply = x;
          return !reply.is_null();
        },
        20);
    return reply;
  };
  // A rendezvous file as the probe writes it: magic, 2 ranks, 128 bytes.
  const std::string blob =
      "464c525630303031"
      "02000000"
      "80000000" +
      std::string(256, 'a');
  EXPECT_EQ(reason({{"type", "rendezvous"}, {"probe_req", 500}, {"blob", blob}}),
            "rendezvous: probe_req: no inter_all_gather probe with a relayed rendezvous runs for "
            "request 500");
  EXPECT_EQ(reason({{"type", "rendezvous"}, {"probe_req", 500}, {"blob", "ABC"}}),
            "rendezvous: blob: expected an even number (2 to 2048) of lowercase hex digits");

  // Rank 1: the relay reaches its probe, once.
  controller_->send_raw(probe(500, 1));
  const json first =
      controller_->request({{"type", "rendezvous"}, {"probe_req", 500}, {"blob", blob}});
  EXPECT_EQ(first["type"], "done") << first.dump();
  EXPECT_EQ(first["ok"], true);
  EXPECT_EQ(reason({{"type", "rendezvous"}, {"probe_req", 500}, {"blob", blob}}),
            "rendezvous: probe_req: request 500 already has its blob");
  const json r1 = reply_to(500);
  ASSERT_FALSE(r1.is_null());
  EXPECT_EQ(r1["ok"], true) << r1.dump();
  EXPECT_EQ(r1["rendezvous"], "ok") << r1.dump();
  EXPECT_EQ(r1["verdict"], "no_gpu");
  EXPECT_EQ(r1["result"]["kind"], "allgather") << "the CPU all-gather ran for the data path";

  // Rank 0: its probe's blob goes to the controller once, before the reply; a relay to it is
  // refused. The relay goes right behind the probe on the same connection, so the agent reads
  // it while the probe runs: without a GPU rank 0's probe publishes and ends within a fraction
  // of a second (sooner since it no longer loads cuBLAS), and a relay sent after the blob was
  // seen sometimes found no probe running.
  controller_->send_raw(probe(600, 0));
  EXPECT_EQ(reason({{"type", "rendezvous"}, {"probe_req", 600}, {"blob", blob}}),
            "rendezvous: probe_req: request 600 is rank 0, which publishes the blob");
  ASSERT_TRUE(wait([&] { return !controller_->of_type("rendezvous").empty(); }));
  const json r0 = reply_to(600);
  ASSERT_FALSE(r0.is_null());
  EXPECT_EQ(r0["ok"], true) << r0.dump();
  EXPECT_EQ(r0["rendezvous"], "ok");
  const auto published = controller_->of_type("rendezvous");
  ASSERT_EQ(published.size(), 1u);
  EXPECT_EQ(published[0]["probe_req"], 600);
  const std::string sent = published[0].value("blob", "");
  EXPECT_EQ(sent.size(), 2u * (16 + 128)) << sent;
  EXPECT_EQ(sent.substr(0, 32),
            "464c525630303031"
            "02000000"
            "80000000");
  EXPECT_LT(
      controller_->index_of([](const json& m) { return m["type"] == "rendezvous"; }),
      controller_->index_of([](const json& m) { return m["type"] == "done" && m["req"] == 600; }));
  // The relays were checked where the probes ran and the files are gone.
  EXPECT_TRUE(fs::is_empty(config_.machines[0].workdir + "/rendezvous"));

  // Rank 1 whose rank 0 never publishes: timed out within its deadline, saying so.
  json lonely = probe(700, 1);
  lonely["deadline_ms"] = 5000;  // the probe's own is 4.5 s: room for its ~0.5 s of loading
  controller_->send_raw(lonely);
  const json r2 = reply_to(700);
  ASSERT_FALSE(r2.is_null());
  EXPECT_EQ(r2["ok"], false) << r2.dump();
  EXPECT_EQ(r2["timed_out"], true);
  EXPECT_EQ(r2["rendezvous"], "timed_out");
  EXPECT_LT(r2["report"]["elapsed_s"].get<double>(), 4.5) << "the probe ended within its deadline";
  EXPECT_LT(r2["duration_s"].get<double>(), 5.0 + 0.5)
      << "killed at the agent's deadline at the latest";
}

}  // namespace
}  // namespace faultline::live
