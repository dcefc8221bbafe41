// The agent end-to-end tests' fixture (tests/realexec/agent/agent_e2e*_test.cc): a minimal
// controller on the test's reactor, and an agent started against it. Not in an anonymous
// namespace: every file's TEST_F(AgentE2E, ...) shares the one fixture class.
#pragma once

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

namespace faultline::live::agent_e2e {

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

}  // namespace faultline::live::agent_e2e
