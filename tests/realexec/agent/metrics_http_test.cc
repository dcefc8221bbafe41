// The /metrics endpoint (realexec/controller/metrics_http.h): what each request gets, and that
// hostile clients (garbage, an oversized head, a slowloris, a flood of connections) neither crash
// nor hang the reactor, and that Prometheus still gets its answer meanwhile.
#include "realexec/controller/metrics_http.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "realexec/net/wire.h"
#include "tests/realexec/idle_flood.h"

namespace faultline::live {
namespace {

const std::string kToken = "metrics-token-0123456789";

std::string body() { return "faultline_ettr 0.5\n"; }

int status_of(const std::string& head, const std::string& token = "") {
  return answer_request(head, token, body).status;
}

TEST(MetricsHttp, EachRequestGetsItsStatus) {
  EXPECT_EQ(status_of("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"), 200);
  EXPECT_EQ(status_of("GET /metrics?x=1 HTTP/1.0\r\n\r\n"), 200);
  EXPECT_EQ(status_of("GET /metrics HTTP/1.1\n\n"), 200) << "bare newlines";
  EXPECT_EQ(status_of("GET / HTTP/1.1\r\n\r\n"), 404);
  EXPECT_EQ(status_of("GET /metricsx HTTP/1.1\r\n\r\n"), 404);
  EXPECT_EQ(status_of("POST /metrics HTTP/1.1\r\n\r\n"), 405);
  EXPECT_EQ(status_of("HEAD /metrics HTTP/1.1\r\n\r\n"), 405);
  for (const char* bad :
       {"", "\r\n\r\n", "GET\r\n\r\n", "GET /metrics\r\n\r\n", "GET /metrics HTTP/2\r\n\r\n",
        "GET  /metrics HTTP/1.1\r\n\r\n", "get /metrics HTTP/1.1\r\n\r\n",
        "GET metrics HTTP/1.1\r\n\r\n", "GET /metrics HTTP/1.1\r\nno colon\r\n\r\n",
        "GET /metrics HTTP/1.1\r\n: empty name\r\n\r\n",
        "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"})
    EXPECT_EQ(status_of(bad), 400) << bad;
}

TEST(MetricsHttp, TheBearerTokenIsRequiredWhenConfigured) {
  const std::string get = "GET /metrics HTTP/1.1\r\n";
  EXPECT_EQ(status_of(get + "\r\n", kToken), 401);
  EXPECT_EQ(status_of(get + "Authorization: Bearer " + kToken + "\r\n\r\n", kToken), 200);
  EXPECT_EQ(status_of(get + "authorization:   bearer " + kToken + " \r\n\r\n", kToken), 200);
  EXPECT_EQ(status_of(get + "Authorization: Bearer " + kToken + "x\r\n\r\n", kToken), 401);
  EXPECT_EQ(status_of(get + "Authorization: Basic " + kToken + "\r\n\r\n", kToken), 401);
  EXPECT_EQ(status_of(get + "Authorization: Bearer \r\n\r\n", kToken), 401);
  EXPECT_EQ(
      status_of(get + "Authorization: Bearer x\r\nAuthorization: Bearer " + kToken + "\r\n\r\n",
                kToken),
      400);
  EXPECT_EQ(answer_request(get + "\r\n", kToken, [] { return std::string("secret"); })
                .body.find("secret"),
            std::string::npos)
      << "no metrics without the token";
}

// A server on a loopback port, its reactor driven by the test thread while clients run in
// other threads.
class Server : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string err;
    const int fd = listen_tcp("127.0.0.1", 0, &err);
    ASSERT_GE(fd, 0) << err;
    port_ = bound_port(fd);
    server_ = std::make_unique<MetricsServer>(reactor_, fd, kToken, body, Duration::millis(800));
  }
  int dial() const {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(port_));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    timeval tv{5, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 ? fd : (::close(fd), -1);
  }
  // Everything the server sends on `fd` until it closes (or 5 s pass).
  static std::string read_all(int fd) {
    std::string out;
    char buf[4096];
    for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;)
      out.append(buf, static_cast<std::size_t>(n));
    return out;
  }
  std::string exchange(const std::string& request) const {
    const int fd = dial();
    if (fd < 0) return "connect failed";
    ::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
    std::string out = read_all(fd);
    ::close(fd);
    return out;
  }
  // Runs the reactor while `client` runs in a thread; true when it finished within 10 s.
  bool with_reactor(const std::function<void()>& client) {
    std::atomic<bool> done{false};
    std::thread t([&] {
      client();
      done = true;
    });
    // The client's end is no reactor event: a tick lets run_until see it.
    std::uint64_t ticker = 0;
    std::function<void()> tick = [&] { ticker = reactor_.add_timer(Duration::millis(10), tick); };
    tick();
    const auto t0 = std::chrono::steady_clock::now();
    reactor_.run_until([&] { return done.load(); }, Duration::seconds(10));
    reactor_.cancel_timer(ticker);
    const bool ok = done && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(9);
    t.join();
    return ok;
  }
  std::string scrape() const {
    return exchange("GET /metrics HTTP/1.1\r\nAuthorization: Bearer " + kToken + "\r\n\r\n");
  }
  // Issue 52: a stranger's script that holds `idle` connections open and dials each one again
  // as soon as it is closed. Every new one pushed out the oldest that had sent nothing, and a
  // scrape accepted in the same batch as 32 of the flood's was pushed out before its request
  // was read (2 to 7 of 30 failed at 2,000 idle connections). 30 scrapes, each within 2 s.
  void scrapes_through_a_redialled_flood(int idle, int* ok, double* worst) const {
    live_test::IdleFlood flood("127.0.0.1", port_, idle);
    // Held: all dialled, and the server has been closing and taking them again (a second round).
    while (flood.dials() < 2 * idle) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    for (int i = 0; i < 30; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      const bool good = scrape().rfind("HTTP/1.1 200 ", 0) == 0;
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      *ok += good && s < 2;
      *worst = std::max(*worst, s);
    }
    flood.stop();
  }

  Reactor reactor_;
  int port_ = 0;
  std::unique_ptr<MetricsServer> server_;
};

TEST_F(Server, AScrapeGetsTheBodyWithContentTypeAndLength) {
  std::string r;
  ASSERT_TRUE(with_reactor([&] { r = scrape(); }));
  EXPECT_EQ(r.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << r;
  EXPECT_NE(r.find("Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"), std::string::npos)
      << r;
  EXPECT_NE(r.find("Content-Length: " + std::to_string(body().size()) + "\r\n"), std::string::npos)
      << r;
  EXPECT_EQ(r.substr(r.size() - body().size()), body());
}

TEST_F(Server, GarbageGets400AndTheServerCarriesOn) {
  std::string bad, unauth, good;
  ASSERT_TRUE(with_reactor([&] {
    bad = exchange(std::string("\x00\xff garbage\r\n\r\n", 14));
    unauth = exchange("GET /metrics HTTP/1.1\r\n\r\n");
    good = scrape();
  }));
  EXPECT_EQ(bad.rfind("HTTP/1.1 400 ", 0), 0u) << bad;
  EXPECT_EQ(unauth.rfind("HTTP/1.1 401 ", 0), 0u) << unauth;
  EXPECT_NE(unauth.find("WWW-Authenticate: Bearer"), std::string::npos);
  EXPECT_EQ(good.rfind("HTTP/1.1 200 ", 0), 0u) << good;
}

TEST_F(Server, AnOversizedHeadGets431) {
  std::string r;
  ASSERT_TRUE(with_reactor([&] {
    r = exchange("GET /metrics HTTP/1.1\r\nX-Pad: " + std::string(64 * 1024, 'a') + "\r\n\r\n");
  }));
  EXPECT_EQ(r.rfind("HTTP/1.1 431 ", 0), 0u) << r.substr(0, 200);
}

TEST_F(Server, ASlowlorisIsClosedAtItsDeadlineWhileScrapesGoOn) {
  std::string during;
  bool closed_by_server = false;
  ASSERT_TRUE(with_reactor([&] {
    const int slow = dial();
    ::send(slow, "GET /metr", 9, MSG_NOSIGNAL);  // and never the rest
    during = scrape();
    char c;
    const auto t0 = std::chrono::steady_clock::now();
    closed_by_server =
        ::read(slow, &c, 1) == 0;  // EOF at the 800 ms deadline (5 s receive timeout)
    closed_by_server =
        closed_by_server && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(3);
    ::close(slow);
  }));
  EXPECT_EQ(during.rfind("HTTP/1.1 200 ", 0), 0u) << during;
  EXPECT_TRUE(closed_by_server);
  EXPECT_EQ(server_->open_connections(), 0);
}

TEST_F(Server, AFloodOfIdleConnectionsIsBoundedAndAScrapeGetsThroughAfterIt) {
  std::string after;
  ASSERT_TRUE(with_reactor([&] {
    std::vector<int> idle;
    for (int i = 0; i < 3 * kMaxConnections; ++i) idle.push_back(dial());
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    EXPECT_LE(server_->open_connections(), kMaxConnections);
    for (int fd : idle) ::close(fd);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    after = scrape();
  }));
  EXPECT_GT(server_->turned_away(), 0u);
  EXPECT_EQ(after.rfind("HTTP/1.1 200 ", 0), 0u) << after;
}

// Issue 37, item 20: 64 idle unauthenticated connections held open starved authorized scrapes
// (0 of 30 got through): every new connection was closed at accept while the idle ones held
// their places until their deadlines. The oldest idle connection makes room now.
TEST_F(Server, ScrapesGetThroughWhileIdleConnectionsAreHeldOpen) {
  int ok = 0;
  ASSERT_TRUE(with_reactor([&] {
    std::vector<int> idle;
    for (int i = 0; i < 2 * kMaxConnections; ++i) idle.push_back(dial());
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    for (int i = 0; i < 10; ++i) {
      ok += scrape().rfind("HTTP/1.1 200 ", 0) == 0;
      idle.push_back(dial());  // the flood goes on between scrapes
    }
    for (int fd : idle) ::close(fd);
  }));
  EXPECT_EQ(ok, 10);
  EXPECT_GT(server_->turned_away(), 0u);
}

TEST_F(Server, ThirtyOfThirtyScrapesGetThroughSixtyFourIdleConnectionsDialledAgain) {
  int ok = 0;
  double worst = 0;
  ASSERT_TRUE(with_reactor([&] { scrapes_through_a_redialled_flood(64, &ok, &worst); }));
  EXPECT_EQ(ok, 30) << "slowest scrape " << worst << " s";
  EXPECT_GT(server_->turned_away(), 0u);
  EXPECT_LE(server_->open_connections(), kMaxConnections);
}

TEST_F(Server, ThirtyOfThirtyScrapesGetThroughTwoThousandIdleConnectionsDialledAgain) {
  if (!live_test::raise_nofile(2 * 2000 + 200))
    GTEST_SKIP() << "needs a hard RLIMIT_NOFILE of at least 4200 (ulimit -Hn) for 2,000 "
                    "connections held at both ends";
  int ok = 0;
  double worst = 0;
  ASSERT_TRUE(with_reactor([&] { scrapes_through_a_redialled_flood(2000, &ok, &worst); }));
  EXPECT_EQ(ok, 30) << "slowest scrape " << worst << " s";
  EXPECT_LE(server_->open_connections(), kMaxConnections);
}

TEST_F(Server, APeerThatNeverReadsItsAnswerIsClosedAtItsDeadline) {
  // An answer far larger than the socket buffers, so that writing it must wait on the peer.
  std::string err;
  const int fd = listen_tcp("127.0.0.1", 0, &err);
  ASSERT_GE(fd, 0) << err;
  port_ = bound_port(fd);
  MetricsServer big(
      reactor_, fd, "", [] { return std::string(64 << 20, 'x'); }, Duration::millis(800));
  ASSERT_TRUE(with_reactor([&] {
    const int c = dial();
    const std::string req = "GET /metrics HTTP/1.1\r\n\r\n";
    ::send(c, req.data(), req.size(), MSG_NOSIGNAL);
    const auto sent = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    EXPECT_EQ(big.open_connections(), 1) << "still writing";
    // Closed at the deadline (800 ms): polled, so that a loaded machine's late reactor turn
    // is not taken for a connection left open; never later than 5 s.
    while (big.open_connections() != 0 &&
           std::chrono::steady_clock::now() - sent < std::chrono::seconds(5))
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_EQ(big.open_connections(), 0) << "closed at the deadline";
    EXPECT_GE(std::chrono::steady_clock::now() - sent, std::chrono::milliseconds(800))
        << "closed before the deadline";
    ::close(c);
  }));
}

}  // namespace
}  // namespace faultline::live
