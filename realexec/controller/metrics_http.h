// The controller's HTTP endpoint for Prometheus: `GET /metrics` on its own listening
// socket (metrics_listen), separate from the framed control protocol.
//
// It runs on the controller's reactor and never blocks it: sockets are non-blocking, a
// request is read into a bounded buffer, and every connection has one deadline for
// reading its request and writing the answer. Anyone who can reach the port can connect,
// so it expects hostile input: a request is at most kMaxRequestBytes, at most
// kMaxConnections are open at once (a further one pushes out the oldest whose request is not
// complete and has nothing more waiting to be read; while none is, accepts wait in the listen
// backlog for kFullPause), a connection that has not finished by
// its deadline (a slowloris) is closed, and accept() failing for want of fds pauses accepts
// (kAcceptPause) instead of waking the loop at once, forever. Only `GET /metrics`
// answers with the metrics; 400 malformed, 401 without the bearer token when one is
// configured, 404 another path, 405 another method, 431 too large. One request per
// connection (`Connection: close`).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "realexec/net/reactor.h"

namespace faultline::live {

inline constexpr std::size_t kMaxRequestBytes = 8192;  // request line and headers
inline constexpr int kMaxConnections = 32;
// How long accepts wait when kMaxConnections are open and every one is being answered or has
// bytes waiting to be read.
inline constexpr Duration kFullPause = Duration::millis(10);
inline constexpr Duration kAcceptPause = Duration::millis(250);  // after accept lacks fds

// One parsed answer: status code and body; what respond() sends for a request.
struct HttpAnswer {
  int status = 200;
  std::string body;
};

// The answer to one complete request head (request line and headers, up to and including
// the blank line). `token` empty: no authentication. `metrics` is called only for an
// authorized `GET /metrics`. Pure, for the unit tests.
HttpAnswer answer_request(std::string_view head, const std::string& token,
                          const std::function<std::string()>& metrics);

class MetricsServer {
 public:
  // Takes ownership of `listen_fd` (a listening, non-blocking socket) and starts accepting.
  // `metrics` renders the body on the reactor thread; `token` empty: no authentication.
  // `deadline`: how long one connection may take from accept to its last byte written.
  MetricsServer(Reactor& reactor, int listen_fd, std::string token,
                std::function<std::string()> metrics, Duration deadline = Duration::seconds(5));
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  int open_connections() const { return static_cast<int>(conns_.size()); }
  // Connections closed because kMaxConnections were open: pushed out idle, or refused.
  std::uint64_t turned_away() const { return turned_away_; }

 private:
  struct Connection {
    std::string in;
    std::string out;
    std::size_t out_off = 0;
    std::uint64_t timer = 0;
    std::uint64_t seq = 0;  // accept order: the oldest idle one makes room for a new one
    Instant accepted;
  };
  void on_accept();
  // False (and accepts paused for kFullPause) when kMaxConnections are open and none is idle.
  bool room_for_one();
  // The fd of the oldest idle connection (request incomplete, nothing waiting), or -1.
  int idle_victim() const;
  void pause_accepts(Duration d);
  void on_io(int fd, std::uint32_t events);
  bool read_request(int fd, Connection& c);  // false: the connection was closed
  void respond(int fd, Connection& c, const HttpAnswer& a);
  void write_some(int fd, Connection& c);
  void close_conn(int fd);

  Reactor& reactor_;
  int listen_fd_;
  std::string token_;
  std::function<std::string()> metrics_;
  Duration deadline_;
  std::map<int, Connection> conns_;
  std::uint64_t turned_away_ = 0;
  std::uint64_t next_seq_ = 0;
  std::uint64_t pause_timer_ = 0;  // accepts paused until it fires
};

}  // namespace faultline::live
