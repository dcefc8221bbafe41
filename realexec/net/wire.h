// The framed, authenticated message protocol between live-mode processes over TCP.
//
// A frame is a 4-byte big-endian length N (1..kMaxFrameBytes) followed by N bytes of
// one UTF-8 JSON object. A frame that is too long, not JSON, or not an object closes the
// connection with a reason; nothing received is ever passed to a shell. Every connection
// opens with a mutual challenge-response handshake (auth.h, PROTOCOL.md); a peer that
// cannot prove the shared token is refused and logged by the accepting side.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "realexec/net/reactor.h"

namespace faultline::live {

inline constexpr std::size_t kMaxFrameBytes = 1 << 20;          // 1 MiB per message
inline constexpr std::size_t kMaxQueuedBytes = 16 * (1 << 20);  // unsent output per peer
inline constexpr int kProtocolVersion = 2;  // 2: challenge-response authentication

// One framed connection on a non-blocking socket, driven by a Reactor.
// Owns the fd. Callbacks run on the reactor thread; on_close runs at most once, from a
// deferred callback, so it may destroy the Conn.
class Conn {
 public:
  struct Handlers {
    std::function<void(const nlohmann::json&)> on_message;
    std::function<void(const std::string& why)> on_close;
  };
  // `connecting`: fd is a non-blocking connect() in progress; completion (or failure,
  // reported through on_close) is detected on the first writable event.
  Conn(Reactor& r, int fd, std::string peer, Handlers h, bool connecting = false);
  ~Conn();
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;

  // Queues one message. Returns false when closed, or when the peer is so slow that
  // the queue would exceed kMaxQueuedBytes (the connection is then closed).
  bool send(const nlohmann::json& msg);
  // Closes at once (fd removed from the reactor); on_close(why) follows, deferred.
  // Output still queued gets one non-blocking write attempt first.
  void close(const std::string& why);
  // Stops reading, sends what is queued, then closes as close(why) (e.g. after a
  // refusal or the reply to a shutdown).
  void close_after_flush(const std::string& why);
  bool is_open() const { return fd_ >= 0; }
  // The largest frame accepted from the peer (kMaxFrameBytes unless lowered, e.g. before a
  // peer has authenticated); a longer one closes the connection with the reason.
  void set_max_frame(std::size_t bytes) { max_frame_ = std::min(bytes, kMaxFrameBytes); }
  // Bytes queued and not yet written to the socket.
  std::size_t backlog() const { return out_.size() - out_off_; }
  const std::string& peer() const { return peer_; }
  // Replaces the handlers (e.g. after the hello has been checked).
  void set_handlers(Handlers h) { h_ = std::move(h); }

 private:
  void on_io(std::uint32_t ev);
  void read_some();
  void write_some();
  void update_interest();

  Reactor& r_;
  int fd_ = -1;
  std::string peer_;
  Handlers h_;
  bool connecting_ = false;
  bool closing_ = false;         // close_after_flush() called, or closed
  bool close_reported_ = false;  // on_close has run
  std::string closing_why_;
  std::uint32_t interest_ = 0;  // epoll events currently asked for
  std::string in_;
  std::string out_;
  std::size_t out_off_ = 0;
  std::size_t max_frame_ = kMaxFrameBytes;
  std::shared_ptr<bool> alive_;
};

// Splits "host:port". Returns false when malformed.
bool split_host_port(const std::string& s, std::string* host, int* port);
// A listening TCP socket (non-blocking, SO_REUSEADDR) on host:port; port 0 picks one.
// Returns the fd, or -1 with *err set.
int listen_tcp(const std::string& host, int port, std::string* err);
// The port a listening socket is bound to.
int bound_port(int fd);
// A non-blocking connect() to host:port. Returns the fd (connect may be in progress),
// or -1 with *err set.
int connect_tcp(const std::string& host, int port, std::string* err);
// Accepts one pending connection as a non-blocking fd; -1 when none. *peer = "ip:port".
int accept_tcp(int listen_fd, std::string* peer);
// accept() failed for want of fds or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM): the connection
// stays in the backlog, and a level-triggered listener would wake the loop at once, forever.
bool accept_starved(int err);
// Bytes received on `fd` that nobody has read yet (FIONREAD); 0 on error. Tells a peer that
// has spoken from one that has not, before the reactor gets to its read.
std::size_t bytes_waiting(int fd);

// The wall-clock time for a log line: "2026-11-25T09:10:11.123Z" (UTC, milliseconds).
std::string log_stamp();
// The same for a wall-clock time given as milliseconds since the Unix epoch.
std::string utc_stamp(std::int64_t unix_ms);

// Reads the shared token from `path`: one line, at least 16 characters, file not
// readable by others. Returns false with *err naming the file and what was wrong.
bool load_token(const std::string& path, std::string* token, std::string* err);
// Constant-time comparison.
bool tokens_equal(std::string_view a, std::string_view b);

}  // namespace faultline::live
