// Live mode's handshake end to end against real processes: credentials, replayed and wrong
// answers, and a rogue controller.
#include "tests/realexec/live/live_cluster.h"
#include "tests/realexec/live/raw_peer.h"

namespace {

using namespace faultline::live_e2e;

// The handshake against real processes: the read-only credential reads status and nothing
// else; a recorded answer, a wrong one and an old clear-text hello are refused; a rogue
// controller on the port gets hellos without a secret, no answer to its challenge, and
// nothing it can replay; the agents come back to the real controller, which adopts the job.
TEST(LiveE2E, AuthenticationReadOnlyCredentialReplayAndRogueController) {
  LiveCluster c("auth", json::object());
  const std::string status_token = c.add_status_token();
  c.start_controller();
  c.start_agents();
  ASSERT_FALSE(c.wait_step(10, 60).is_null());
  const std::string host = c.controller_host();
  const int port = c.controller_port();
  // Read-only: status answers; stop and inject are refused; the CLI's status uses it.
  {
    RawPeer p(host, port);
    const json w = p.authenticate(status_token, "client-read");
    ASSERT_FALSE(w.is_null()) << p.refusal();
    EXPECT_EQ(w.value("access", ""), "read");
    ASSERT_TRUE(p.send(json{{"type", "status"}, {"req", 1}}));
    EXPECT_EQ(p.receive_type("done").value("ok", false), true);
    for (const json& m :
         {json{{"type", "stop"}, {"req", 2}},
          json{{"type", "inject"}, {"req", 3}, {"machine", "m1"}, {"fault", "kill"}},
          json{{"type", "update"}, {"req", 4}, {"version", "v1"}}}) {
      ASSERT_TRUE(p.send(m));
      const json r = p.receive_type("done");
      EXPECT_EQ(r.value("ok", true), false) << m.dump();
      EXPECT_NE(r.value("detail", "").find("read-only"), std::string::npos) << r.dump();
    }
    // The status credential is no admin credential, nor the other way round.
    RawPeer q(host, port);
    EXPECT_TRUE(q.authenticate(status_token, "client").is_null());
    RawPeer q2(host, port);
    EXPECT_TRUE(q2.authenticate(c.token(), "client-read").is_null());
  }
  EXPECT_EQ(c.client({"status", c.config()}), 0) << "status with the read-only credential";
  {
    // A config whose token_file holds the status credential cannot stop the run.
    json cfg = json::parse(slurp(c.config()));
    cfg["token_file"] = c.write_token("admin-guess", status_token);
    cfg.erase("status_token_file");
    std::ofstream(c.dir() + "/reader.json") << cfg.dump();
    EXPECT_NE(c.client({"stop", c.dir() + "/reader.json"}), 0);
    EXPECT_TRUE(c.controller_alive());
  }
  // A recorded answer replayed on a new connection, with the same hello, is refused.
  {
    faultline::live::PeerHandshake h("client", "");
    const json hello = h.hello(2);
    RawPeer p(host, port);
    p.send(hello);
    const json ch = p.receive_type("challenge");
    ASSERT_FALSE(ch.is_null());
    const auto answer = h.answer(c.token(), faultline::live::decode_challenge(ch));
    ASSERT_TRUE(answer);
    p.send(*answer);
    ASSERT_FALSE(p.receive_type("welcome").is_null());
    RawPeer replay(host, port);
    replay.send(hello);
    ASSERT_FALSE(replay.receive_type("challenge").is_null());
    replay.send(*answer);
    EXPECT_TRUE(replay.receive_type("welcome").is_null());
    EXPECT_EQ(replay.refusal(), "bad token");
    RawPeer wrong(host, port);
    wrong.send(faultline::live::PeerHandshake("agent", "m2").hello(2));
    ASSERT_FALSE(wrong.receive_type("challenge").is_null());
    wrong.send(json{{"type", "auth"}, {"proof", std::string(64, 'f')}});
    EXPECT_TRUE(wrong.receive_type("welcome").is_null());
    EXPECT_EQ(wrong.refusal(), "bad token");
  }
  // A rogue controller takes the port.
  const long before = c.last_step();
  c.kill_controller(SIGKILL);
  const int lfd = socket(AF_INET, SOCK_STREAM, 0);
  const int one = 1;
  setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  inet_pton(AF_INET, host.c_str(), &a.sin_addr);
  ASSERT_EQ(bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0) << strerror(errno);
  ASSERT_EQ(listen(lfd, 64), 0);
  timeval tv{0, 200000};
  setsockopt(lfd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::vector<json> heard;
  std::set<std::string> names;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(8);
  while (std::chrono::steady_clock::now() < until) {
    const int fd = accept(lfd, nullptr, nullptr);
    if (fd < 0) continue;
    RawPeer agent(fd);
    for (int i = 0; i < 4; ++i) {
      const json m = agent.receive();
      if (m.is_null() || m.is_discarded()) break;
      heard.push_back(m);
      if (m.value("type", "") == "hello") {
        names.insert(m.value("name", ""));
        // A challenge with a proof it cannot make; then a welcome and a request for luck.
        agent.send(json{{"type", "challenge"},
                        {"nonce", std::string(64, '1')},
                        {"proof", std::string(64, '2')}});
        agent.send(json{{"type", "welcome"}, {"machine", m.value("name", "")}, {"role", "job"}});
        agent.send(json{{"type", "kill"}, {"req", 1}, {"gen", 1}});
      }
    }
  }
  close(lfd);
  EXPECT_GE(names.size(), 4u) << "the agents redialled the port";
  for (const json& m : heard) {
    EXPECT_EQ(m.value("type", ""), "hello")
        << "an agent said more than hello to a rogue: " << m.dump();
    EXPECT_EQ(m.dump().find(c.token()), std::string::npos) << "the token went on the wire";
    EXPECT_FALSE(m.contains("token"));
  }
  // What the rogue heard gets it nothing from the real controller.
  c.start_controller(false);
  ASSERT_FALSE(
      c.wait_for([](const json& r) { return r.value("kind", "") == "restart"; }, 20).is_null());
  for (const json& m : heard) {
    RawPeer p(host, port);
    if (!p.ok()) continue;
    p.send(m);
    if (p.receive_type("challenge").is_null()) continue;
    for (const json& again : heard) p.send(again);  // all it has for an answer
    EXPECT_TRUE(p.receive_type("welcome").is_null());
    break;
  }
  // The ranks kept running under agents that obeyed no one; the real controller adopts them.
  const json adopted = c.wait_for(
      [](const json& r) {
        return r.value("kind", "") == "outcome" &&
               r.value("detail", "").find("adopted") != std::string::npos;
      },
      40);
  EXPECT_FALSE(adopted.is_null()) << "the ranks did not survive the rogue";
  ASSERT_FALSE(c.wait_step(before + 20, 60).is_null());
  c.stop_run();
}

}  // namespace
