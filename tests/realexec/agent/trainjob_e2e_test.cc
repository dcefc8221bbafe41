// The agent with the real reference training job (realexec/trainjob): step reports of a
// two-rank job, an injected crash directive becoming the exit signature, and bit-wise
// probes whose hash moves under an injected sdc (label e2e).
#include <gtest/gtest.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "realexec/agent/agent.h"
#include "realexec/net/auth.h"

namespace faultline::live {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kTrainjobToken = "trainjob-token-0123456789";

int free_port() {
  std::string err;
  int fd = listen_tcp("127.0.0.1", 0, &err);
  int port = bound_port(fd);
  ::close(fd);
  return port;
}

class WithTrainjob : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/faultline-agent-tj-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    std::string err;
    listen_fd_ = listen_tcp("127.0.0.1", 0, &err);
    ASSERT_GE(listen_fd_, 0) << err;
    config_.file = dir_ + "/live.json";
    config_.controller_port = bound_port(listen_fd_);
    config_.heartbeat_s = 0.2;
    LiveMachine m;
    m.name = "m0";
    m.workdir = dir_ + "/work";
    config_.machines.push_back(m);
    config_.trainjob_bin = FAULTLINE_TRAINJOB_BIN;
    config_.job.versions["v1"] = {FAULTLINE_TRAINJOB_BIN, "--step-ms", "20", "--hidden", "16"};
    config_.job.env["FAULTLINE_RENDEZVOUS_S"] = "20";
    config_.job.env["FAULTLINE_COLLECTIVE_TIMEOUT_S"] = "5";
    r_.add_fd(listen_fd_, EPOLLIN, [this](std::uint32_t) {
      std::string peer;
      int fd = accept_tcp(listen_fd_, &peer);
      if (fd < 0) return;
      conn_ = std::make_unique<Conn>(
          r_, fd, peer,
          Conn::Handlers{
              [this](const json& m) {
                if (m["type"] == "hello") {
                  conn_->send(
                      handshake_.challenge(kTrainjobToken, decode_hello(m, kProtocolVersion)));
                } else if (m["type"] == "auth") {
                  if (handshake_.verify(kTrainjobToken, decode_auth(m)))
                    conn_->send({{"type", "welcome"}, {"machine", "m0"}, {"role", "job"}});
                } else {
                  got_.push_back(m);
                }
              },
              {}});
    });
    AgentOptions o;
    o.kmsg_path = dir_ + "/no-kmsg";
    o.log = [](const std::string&) {};
    agent_ = std::make_unique<Agent>(r_, config_, "m0", kTrainjobToken, o);
    agent_->start();
    ASSERT_TRUE(r_.run_until([&] { return agent_->connected(); }, Duration::seconds(5)));
  }
  void TearDown() override {
    agent_.reset();
    conn_.reset();
    r_.remove_fd(listen_fd_);
    ::close(listen_fd_);
    fs::remove_all(dir_);
  }
  json request(json m) {
    m["req"] = ++req_;
    conn_->send(m);
    json reply;
    r_.run_until(
        [&] {
          for (const auto& x : got_) {
            if (x.value("req", json()) == req_) reply = x;
          }
          return !reply.is_null();
        },
        Duration::seconds(60));
    return reply;
  }
  std::vector<json> of_type(const std::string& t) {
    std::vector<json> out;
    for (const auto& m : got_) {
      if (m["type"] == t) out.push_back(m);
    }
    return out;
  }

  std::string dir_;
  int listen_fd_ = -1;
  LiveConfig config_;
  Reactor r_;
  ControllerHandshake handshake_;
  std::unique_ptr<Conn> conn_;
  std::unique_ptr<Agent> agent_;
  std::vector<json> got_;
  std::int64_t req_ = 0;
};

TEST_F(WithTrainjob, StepsThenInjectedCrashSignature) {
  json d = request({{"type", "launch"},
                    {"gen", 1},
                    {"version", "v1"},
                    {"ranks", {{{"rank", 0}, {"local_rank", 0}}, {{"rank", 1}, {"local_rank", 1}}}},
                    {"world_size", 2},
                    {"master_addr", "127.0.0.1"},
                    {"master_port", free_port()},
                    {"ckpt_every", 5}});
  ASSERT_EQ(d["ok"], true) << d.dump();
  auto steps_of = [&](int rank) {
    int n = 0;
    for (const auto& m : of_type("report")) {
      n += m["rank"] == rank && m["gen"] == 1 && m["report"]["type"] == "step";
    }
    return n;
  };
  ASSERT_TRUE(
      r_.run_until([&] { return steps_of(0) >= 3 && steps_of(1) >= 3; }, Duration::seconds(30)));
  json c = request({{"type", "inject"}, {"fault", "crash"}, {"detail", "Xid 79: GPU fell off"}});
  ASSERT_EQ(c["ok"], true) << c.dump();
  // Rank 0 crashes; rank 1 then loses its peer (either exit may be reaped first).
  auto exit_of = [&](int rank) {
    for (const auto& m : of_type("exit")) {
      if (m["rank"] == rank) return m;
    }
    return json();
  };
  ASSERT_TRUE(r_.run_until([&] { return !exit_of(0).is_null(); }, Duration::seconds(30)));
  json e = exit_of(0);
  EXPECT_EQ(e["gen"], 1);
  EXPECT_EQ(e["code"], 1);
  EXPECT_EQ(e["signature"], "Xid 79: GPU fell off");
  json k = request({{"type", "kill"}, {"gen", 1}});
  EXPECT_EQ(k["ok"], true);
  EXPECT_EQ(of_type("exit").size(), 2u);
}

// Every kind the fault file carries is taken by the reference job and confirmed by the agent
// only on its acknowledgement (issue 52); each then shows in the job's own reports.
TEST_F(WithTrainjob, EveryFileFaultIsAcknowledgedThenSeenInTheReports) {
  json d = request({{"type", "launch"},
                    {"gen", 1},
                    {"version", "v1"},
                    {"ranks", {{{"rank", 0}, {"local_rank", 0}}}},
                    {"world_size", 1},
                    {"master_addr", "127.0.0.1"},
                    {"master_port", free_port()},
                    {"ckpt_every", 5}});
  ASSERT_EQ(d["ok"], true) << d.dump();
  auto steps = [&] {
    std::vector<json> out;
    for (const auto& m : of_type("report"))
      if (m["report"]["type"] == "step") out.push_back(m["report"]);
    return out;
  };
  ASSERT_TRUE(r_.run_until([&] { return steps().size() >= 5; }, Duration::seconds(30)));
  json started;
  for (const auto& m : of_type("report"))
    if (m["report"]["type"] == "started") started = m["report"];
  EXPECT_EQ(started["faults"], json::array({"crash", "hang", "nan", "slow", "sdc"}));
  auto inject = [&](json m) {
    m["type"] = "inject";
    m["deadline_ms"] = 10000;
    json r = request(m);
    EXPECT_EQ(r["ok"], true) << r.dump();
    return steps().size();
  };
  // nan: a step reported with a NaN gradient norm after the confirmation.
  std::size_t from = inject({{"fault", "nan"}});
  ASSERT_TRUE(r_.run_until(
      [&] {
        auto s = steps();
        for (std::size_t i = from; i < s.size(); ++i)
          if (s[i].value("grad_norm_nan", false) || s[i].value("loss_nan", false)) return true;
        return false;
      },
      Duration::seconds(30)));
  // slow 5: steps of 20 ms take about 100 ms.
  from = inject({{"fault", "slow"}, {"detail", "5"}});
  ASSERT_TRUE(r_.run_until([&] { return steps().size() >= from + 4; }, Duration::seconds(30)));
  EXPECT_GE(steps().back()["step_time_s"].get<double>(), 0.08);
  ASSERT_EQ(request({{"type", "inject"}, {"fault", "repair"}})["ok"], true);
  // sdc after=0 on a job already NaN: confirmed all the same (the kind is taken).
  inject({{"fault", "sdc"}, {"detail", "after=0"}});
  // hang, then crash on a fresh generation: the exit carries the crash's signature.
  inject({{"fault", "hang"}});
  ASSERT_EQ(request({{"type", "kill"}, {"gen", 1}})["ok"], true);
  ASSERT_EQ(request({{"type", "inject"}, {"fault", "repair"}})["ok"], true);
  d = request({{"type", "launch"},
               {"gen", 2},
               {"version", "v1"},
               {"ranks", {{{"rank", 0}, {"local_rank", 0}}}},
               {"world_size", 1},
               {"master_addr", "127.0.0.1"},
               {"master_port", free_port()},
               {"ckpt_every", 5}});
  ASSERT_EQ(d["ok"], true) << d.dump();
  ASSERT_TRUE(r_.run_until(
      [&] {
        for (const auto& m : of_type("report"))
          if (m["gen"] == 2 && m["report"]["type"] == "started") return true;
        return false;
      },
      Duration::seconds(30)));
  inject({{"fault", "crash"}, {"detail", "Xid 48: double bit ECC"}});
  ASSERT_TRUE(r_.run_until(
      [&] {
        for (const auto& m : of_type("exit"))
          if (m["gen"] == 2) return true;
        return false;
      },
      Duration::seconds(30)));
  for (const auto& m : of_type("exit"))
    if (m["gen"] == 2) EXPECT_EQ(m["signature"], "Xid 48: double bit ECC");
}

TEST_F(WithTrainjob, BitwiseProbeHashMovesUnderSdc) {
  json probe = {
      {"type", "probe"}, {"test", "bitwise"}, {"deadline_ms", 30000}, {"seed", 7}, {"steps", 3}};
  json a = request(probe);
  json b = request(probe);
  ASSERT_EQ(a["ok"], true) << a.dump();
  ASSERT_TRUE(a["hash"].is_string());
  EXPECT_EQ(a["hash"].get<std::string>().size(), 16u);
  EXPECT_EQ(a["hash"], b["hash"]);
  // The probe reads the machine's fault file (no rank runs to take an injected one: the agent
  // refuses that, so the directive is written as an earlier injection left it).
  fs::create_directories(config_.machines[0].workdir);
  std::ofstream(config_.machines[0].workdir + "/faults") << "sdc after=0\n";
  json c = request(probe);
  ASSERT_EQ(c["ok"], true) << c.dump();
  EXPECT_NE(c["hash"], a["hash"]);
  ASSERT_EQ(request({{"type", "inject"}, {"fault", "repair"}})["ok"], true);
  EXPECT_EQ(request(probe)["hash"], a["hash"]);
}

}  // namespace
}  // namespace faultline::live
