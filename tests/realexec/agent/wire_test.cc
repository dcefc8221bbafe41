// The framed protocol: round trips, limits and bad frames closing with a reason,
// ordering under a burst, TCP helpers and the token file.
#include "realexec/net/wire.h"

#include <gtest/gtest.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace faultline::live {
namespace {

using nlohmann::json;

struct Pair {
  Reactor r;
  int raw = -1;  // the peer end when only one side is a Conn
  std::unique_ptr<Conn> a;
  std::unique_ptr<Conn> b;
  std::vector<json> got_a;
  std::vector<json> got_b;
  std::string closed_a;
  std::string closed_b;

  // Two Conns on a socketpair, or one Conn and a raw fd (`raw_b`).
  explicit Pair(bool raw_b = false) {
    int sv[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
    a = std::make_unique<Conn>(r, sv[0], "a",
                               Conn::Handlers{[this](const json& m) { got_a.push_back(m); },
                                              [this](const std::string& w) { closed_a = w; }});
    if (raw_b) {
      raw = sv[1];
    } else {
      b = std::make_unique<Conn>(r, sv[1], "b",
                                 Conn::Handlers{[this](const json& m) { got_b.push_back(m); },
                                                [this](const std::string& w) { closed_b = w; }});
    }
  }
  ~Pair() {
    if (raw >= 0) ::close(raw);
  }
  void write_raw(const std::string& bytes) {
    ASSERT_EQ(::write(raw, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  }
};

std::string frame(const std::string& body, std::uint32_t len) {
  std::string f(4, '\0');
  f[0] = static_cast<char>(len >> 24);
  f[1] = static_cast<char>(len >> 16);
  f[2] = static_cast<char>(len >> 8);
  f[3] = static_cast<char>(len);
  return f + body;
}

TEST(Wire, MessagesRoundTrip) {
  Pair p;
  json m = {{"type", "launch"},
            {"req", 7},
            {"ranks", {{{"rank", 0}, {"local_rank", 0}}}},
            {"text", "naïve \"quoted\"\n"}};
  ASSERT_TRUE(p.a->send(m));
  ASSERT_TRUE(p.b->send({{"type", "done"}, {"req", 7}}));
  ASSERT_TRUE(p.r.run_until([&] { return p.got_b.size() == 1 && p.got_a.size() == 1; },
                            Duration::seconds(2)));
  EXPECT_EQ(p.got_b[0], m);
  EXPECT_EQ(p.got_a[0]["type"], "done");
}

TEST(Wire, BurstArrivesInOrder) {
  Pair p;
  for (int i = 0; i < 10000; ++i) ASSERT_TRUE(p.a->send({{"type", "report"}, {"i", i}}));
  ASSERT_TRUE(p.r.run_until([&] { return p.got_b.size() == 10000; }, Duration::seconds(10)));
  for (int i = 0; i < 10000; ++i) ASSERT_EQ(p.got_b[i]["i"], i);
}

TEST(Wire, OversizeLengthPrefixClosesWithReason) {
  Pair p(true);
  p.write_raw(frame("", 2u << 20));
  ASSERT_TRUE(p.r.run_until([&] { return !p.closed_a.empty(); }, Duration::seconds(2)));
  EXPECT_NE(p.closed_a.find("frame length 2097152"), std::string::npos) << p.closed_a;
  EXPECT_FALSE(p.a->is_open());
}

TEST(Wire, ZeroLengthFrameCloses) {
  Pair p(true);
  p.write_raw(frame("", 0));
  ASSERT_TRUE(p.r.run_until([&] { return !p.closed_a.empty(); }, Duration::seconds(2)));
  EXPECT_NE(p.closed_a.find("frame length 0"), std::string::npos);
}

TEST(Wire, InvalidJsonCloses) {
  Pair p(true);
  std::string body = "{\"type\": oops";
  p.write_raw(frame(body, static_cast<std::uint32_t>(body.size())));
  ASSERT_TRUE(p.r.run_until([&] { return !p.closed_a.empty(); }, Duration::seconds(2)));
  EXPECT_EQ(p.closed_a, "frame is not valid JSON");
  EXPECT_TRUE(p.got_a.empty());
}

TEST(Wire, NonObjectCloses) {
  Pair p(true);
  std::string ok = "{\"type\":\"heartbeat\"}";
  std::string arr = "[1,2]";
  p.write_raw(frame(ok, static_cast<std::uint32_t>(ok.size())) +
              frame(arr, static_cast<std::uint32_t>(arr.size())));
  ASSERT_TRUE(p.r.run_until([&] { return !p.closed_a.empty(); }, Duration::seconds(2)));
  EXPECT_EQ(p.closed_a, "frame is not a JSON object");
  ASSERT_EQ(p.got_a.size(), 1u);  // what came before the bad frame was delivered
}

TEST(Wire, FrameSplitAcrossWrites) {
  Pair p(true);
  std::string body = "{\"type\":\"x\",\"n\":1}";
  std::string f = frame(body, static_cast<std::uint32_t>(body.size()));
  p.write_raw(f.substr(0, 2));
  p.r.run_until([&] { return false; }, Duration::millis(20));
  p.write_raw(f.substr(2, 9));
  p.r.run_until([&] { return false; }, Duration::millis(20));
  p.write_raw(f.substr(11));
  ASSERT_TRUE(p.r.run_until([&] { return p.got_a.size() == 1; }, Duration::seconds(2)));
  EXPECT_EQ(p.got_a[0]["n"], 1);
}

TEST(Wire, PeerCloseIsReported) {
  Pair p;
  p.b.reset();
  ASSERT_TRUE(p.r.run_until([&] { return !p.closed_a.empty(); }, Duration::seconds(2)));
  EXPECT_EQ(p.closed_a, "peer closed the connection");
  EXPECT_FALSE(p.a->send({{"type", "x"}}));
}

TEST(Wire, CloseAfterFlushDeliversQueuedMessages) {
  Pair p;
  p.a->send({{"type", "refused"}, {"reason", "bad token"}});
  p.a->close_after_flush("refused");
  ASSERT_TRUE(p.r.run_until([&] { return !p.closed_b.empty() && !p.closed_a.empty(); },
                            Duration::seconds(2)));
  ASSERT_EQ(p.got_b.size(), 1u);
  EXPECT_EQ(p.got_b[0]["reason"], "bad token");
  EXPECT_EQ(p.closed_a, "refused");
}

TEST(Wire, OnCloseMayDestroyTheConn) {
  Pair p;
  bool done = false;
  p.b->set_handlers({nullptr, [&](const std::string&) {
                       p.b.reset();
                       done = true;
                     }});
  p.a.reset();
  ASSERT_TRUE(p.r.run_until([&] { return done; }, Duration::seconds(2)));
  EXPECT_EQ(p.b, nullptr);
}

TEST(Wire, LoopbackTcp) {
  Reactor r;
  std::string err;
  int lfd = listen_tcp("127.0.0.1", 0, &err);
  ASSERT_GE(lfd, 0) << err;
  int port = bound_port(lfd);
  ASSERT_GT(port, 0);
  int cfd = connect_tcp("127.0.0.1", port, &err);
  ASSERT_GE(cfd, 0) << err;
  std::vector<json> got;
  std::unique_ptr<Conn> server;
  r.add_fd(lfd, EPOLLIN, [&](std::uint32_t) {
    std::string peer;
    int fd = accept_tcp(lfd, &peer);
    if (fd < 0) return;
    EXPECT_EQ(peer.rfind("127.0.0.1:", 0), 0u);
    server = std::make_unique<Conn>(r, fd, peer,
                                    Conn::Handlers{[&](const json& m) { got.push_back(m); }, {}});
  });
  Conn client(r, cfd, "controller", {}, true);
  client.send({{"type", "hello"}, {"n", 1}});  // queued until connected
  ASSERT_TRUE(r.run_until([&] { return got.size() == 1; }, Duration::seconds(2)));
  EXPECT_EQ(got[0]["n"], 1);
  r.remove_fd(lfd);
  ::close(lfd);
}

TEST(Wire, ConnectFailureIsReported) {
  Reactor r;
  std::string err;
  int lfd = listen_tcp("127.0.0.1", 0, &err);
  int port = bound_port(lfd);
  ::close(lfd);  // nobody listens there now
  int cfd = connect_tcp("127.0.0.1", port, &err);
  ASSERT_GE(cfd, 0) << err;
  std::string why;
  Conn c(r, cfd, "nobody", {nullptr, [&](const std::string& w) { why = w; }}, true);
  ASSERT_TRUE(r.run_until([&] { return !why.empty(); }, Duration::seconds(2)));
  EXPECT_NE(why.find("cannot connect"), std::string::npos) << why;
}

TEST(Wire, SplitHostPort) {
  std::string h;
  int p = 0;
  EXPECT_TRUE(split_host_port("127.0.0.1:7700", &h, &p));
  EXPECT_EQ(h, "127.0.0.1");
  EXPECT_EQ(p, 7700);
  EXPECT_TRUE(split_host_port("[::1]:80", &h, &p));
  EXPECT_EQ(h, "::1");
  EXPECT_FALSE(split_host_port("host", &h, &p));
  EXPECT_FALSE(split_host_port("host:", &h, &p));
  EXPECT_FALSE(split_host_port("host:70000", &h, &p));
  EXPECT_FALSE(split_host_port("host:12a", &h, &p));
  EXPECT_FALSE(split_host_port("::1:80", &h, &p));
}

TEST(Wire, TokensEqual) {
  EXPECT_TRUE(tokens_equal("abcdefghijklmnop", "abcdefghijklmnop"));
  EXPECT_FALSE(tokens_equal("abcdefghijklmnop", "abcdefghijklmnoq"));
  EXPECT_FALSE(tokens_equal("abcdefghijklmnop", "abcdefghijklmno"));
  EXPECT_FALSE(tokens_equal("", "a"));
  EXPECT_TRUE(tokens_equal("", ""));
}

class TokenFile : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/faultline-token-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }
  std::string write(const std::string& name, const std::string& text, mode_t mode) {
    std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    ::chmod(path.c_str(), mode);
    return path;
  }
  std::string dir_;
};

TEST_F(TokenFile, LoadsOneLine) {
  std::string path = write("ok", "0123456789abcdef-secret\n", 0600);
  std::string token, err;
  ASSERT_TRUE(load_token(path, &token, &err)) << err;
  EXPECT_EQ(token, "0123456789abcdef-secret");
}

TEST_F(TokenFile, RejectsShortToken) {
  std::string path = write("short", "tooshort\n", 0600);
  std::string token, err;
  EXPECT_FALSE(load_token(path, &token, &err));
  EXPECT_EQ(err, path + ": token: expected at least 16 characters, got 8");
}

TEST_F(TokenFile, RejectsAnyGroupOrOtherAccess) {
  for (mode_t mode : {0644, 0640, 0604, 0620, 0610, 0602}) {
    std::string path = write("open", "0123456789abcdef-secret\n", mode);
    ::chmod(path.c_str(), mode);
    std::string token, err;
    EXPECT_FALSE(load_token(path, &token, &err)) << std::oct << mode;
    EXPECT_NE(err.find(path + ": token: file is accessible by group or others"), std::string::npos)
        << err;
    EXPECT_NE(err.find("expected mode 0600 or 0400"), std::string::npos);
  }
  std::string path = write("readonly", "0123456789abcdef-secret\n", 0400);
  ::chmod(path.c_str(), 0400);
  std::string token, err;
  EXPECT_TRUE(load_token(path, &token, &err)) << err;
}

TEST_F(TokenFile, RejectsMissingFileAndSeveralLines) {
  std::string token, err;
  EXPECT_FALSE(load_token(dir_ + "/missing", &token, &err));
  EXPECT_NE(err.find("missing: token: cannot read"), std::string::npos) << err;
  std::string two = write("two", "0123456789abcdef\n0123456789abcdef\n", 0600);
  EXPECT_FALSE(load_token(two, &token, &err));
  EXPECT_NE(err.find("expected one line"), std::string::npos) << err;
  EXPECT_FALSE(load_token("", &token, &err));
  EXPECT_NE(err.find("token_file"), std::string::npos);
}

}  // namespace
}  // namespace faultline::live
