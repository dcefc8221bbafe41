// `faultline agent CONFIG --name NAME` as a separate process: command-line and config
// errors, then a real run against a minimal controller ending in machine_down (137).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "realexec/net/auth.h"
#include "realexec/net/proc.h"
#include "realexec/net/wire.h"

namespace faultline::live {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kToken = "main-test-token-0123456789";

class AgentMain : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/faultline-agent-main-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    std::ofstream(dir_ + "/token") << kToken << "\n";
    ::chmod((dir_ + "/token").c_str(), 0600);
  }
  void TearDown() override { fs::remove_all(dir_); }

  void write_config(int port) {
    json c = {{"controller", "127.0.0.1:" + std::to_string(port)},
              {"token_file", "token"},
              {"heartbeat_s", 0.1},
              {"trainjob_bin", FAULTLINE_AGENT_TEST_RANK},
              {"machines", {{{"name", "m0"}, {"workdir", "work/m0"}}}},
              {"job", {{"versions", {{"v1", {FAULTLINE_AGENT_TEST_RANK, "sleep"}}}}}}};
    std::ofstream(dir_ + "/live.json") << c.dump(2);
  }
  ChildResult run(std::vector<std::string> args) {
    Reactor r;
    SpawnSpec spec;
    spec.argv = {FAULTLINE_AGENT_MAIN};
    spec.argv.insert(spec.argv.end(), args.begin(), args.end());
    spec.env = make_env({});
    ChildResult out;
    bool done = false;
    run_child(r, spec, Duration::seconds(20), [&](const ChildResult& res) {
      out = res;
      done = true;
    });
    r.run_until([&] { return done; }, Duration::seconds(30));
    return out;
  }
  std::string dir_;
};

TEST_F(AgentMain, UsageAndConfigErrorsExit2) {
  EXPECT_EQ(run({"--help"}).exit_code(), 0);
  ChildResult r = run({dir_ + "/live.json"});
  EXPECT_EQ(r.exit_code(), 2);
  EXPECT_NE(r.err.find("missing --name NAME"), std::string::npos) << r.err;
  r = run({dir_ + "/missing.json", "--name", "m0"});
  EXPECT_EQ(r.exit_code(), 2);
  EXPECT_NE(r.err.find("missing.json"), std::string::npos) << r.err;
  write_config(7700);
  r = run({dir_ + "/live.json", "--name", "m9"});
  EXPECT_EQ(r.exit_code(), 2);
  EXPECT_NE(r.err.find("no machine or standby named 'm9'"), std::string::npos) << r.err;
  ::chmod((dir_ + "/token").c_str(), 0644);
  r = run({dir_ + "/live.json", "--name", "m0"});
  EXPECT_EQ(r.exit_code(), 2);
  EXPECT_NE(r.err.find("token: file is accessible by group or others"), std::string::npos) << r.err;
}

TEST_F(AgentMain, RunsUntilMachineDown) {
  Reactor r;
  std::string err;
  int lfd = listen_tcp("127.0.0.1", 0, &err);
  ASSERT_GE(lfd, 0) << err;
  write_config(bound_port(lfd));
  std::unique_ptr<Conn> conn;
  ControllerHandshake handshake;
  std::vector<json> got;
  r.add_fd(lfd, EPOLLIN, [&](std::uint32_t) {
    std::string peer;
    int fd = accept_tcp(lfd, &peer);
    if (fd < 0) return;
    conn = std::make_unique<Conn>(
        r, fd, peer,
        Conn::Handlers{[&](const json& m) {
                         got.push_back(m);
                         if (m["type"] == "hello") {
                           conn->send(
                               handshake.challenge(kToken, decode_hello(m, kProtocolVersion)));
                         } else if (m["type"] == "auth") {
                           if (handshake.verify(kToken, decode_auth(m)))
                             conn->send({{"type", "welcome"}, {"machine", "m0"}, {"role", "job"}});
                         }
                       },
                       {}});
  });
  SpawnSpec spec;
  spec.argv = {FAULTLINE_AGENT_MAIN, dir_ + "/live.json", "--name", "m0"};
  spec.env = make_env({});
  ChildResult res;
  bool exited = false;
  run_child(r, spec, Duration::seconds(30), [&](const ChildResult& x) {
    res = x;
    exited = true;
  });
  auto has = [&](const std::string& type) {
    for (const auto& m : got) {
      if (m["type"] == type) return true;
    }
    return false;
  };
  ASSERT_TRUE(r.run_until([&] { return has("heartbeat"); }, Duration::seconds(10)));
  // The token file was read: the agent proved it, without sending it.
  ASSERT_GE(got.size(), 2u);
  EXPECT_EQ(got[1]["type"], "auth");
  for (const json& m : got) EXPECT_EQ(m.dump().find(kToken), std::string::npos);
  conn->send({{"type", "launch"},
              {"req", 1},
              {"gen", 2},
              {"version", "v1"},
              {"ranks", {{{"rank", 0}, {"local_rank", 0}}}},
              {"world_size", 1},
              {"master_addr", "127.0.0.1"},
              {"master_port", 29500}});
  ASSERT_TRUE(r.run_until([&] { return has("done"); }, Duration::seconds(10)));
  pid_t rank_pid = got.back()["pids"]["0"];
  EXPECT_TRUE(fs::is_directory(dir_ + "/work/m0/logs"));
  conn->send({{"type", "inject"}, {"req", 2}, {"fault", "machine_down"}});
  ASSERT_TRUE(r.run_until([&] { return exited; }, Duration::seconds(10)));
  EXPECT_EQ(res.exit_code(), 137) << res.err;
  // The rank died with the machine (it is not our child: poll until it is gone).
  bool gone = false;
  for (int i = 0; i < 200 && !gone; ++i) {
    gone = ::kill(rank_pid, 0) != 0;
    if (!gone) ::usleep(10000);
  }
  EXPECT_TRUE(gone);
  conn.reset();
  r.remove_fd(lfd);
  ::close(lfd);
}

}  // namespace
}  // namespace faultline::live
