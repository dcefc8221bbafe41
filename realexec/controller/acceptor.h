// Acceptor: the controller's listening socket and when it listens. Accepts pause for a moment
// when they fail for want of fds (the pending connection stays in the backlog, and the
// level-triggered listener would otherwise wake the loop at once, forever), and while
// kMaxUnauthenticated young handshakes are under way (the rest wait in the listen backlog);
// the listener is watched again when neither pause holds. Who is let in is the Controller's
// (controller_admission.cc).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "policies/api/time.h"
#include "realexec/net/reactor.h"

namespace faultline::live {

class Acceptor {
 public:
  explicit Acceptor(Reactor& reactor) : reactor_(reactor) {}
  Acceptor(const Acceptor&) = delete;
  Acceptor& operator=(const Acceptor&) = delete;
  ~Acceptor() { close(); }

  // Listens on host:port; false (and *err) when it cannot.
  bool listen(const std::string& host, int port, std::string* err);
  // Watches the listener: `ready` runs when connections wait.
  void start(std::function<void()> ready);
  // Stops listening and closes the socket.
  void close();

  // Accepts one connection: its fd, or -1 with errno set (none waiting, or a failure).
  int accept(std::string* peer);
  // The order of the connection accepted next.
  std::uint64_t next_seq() { return seq_++; }

  // accept() failed for want of fds: listening pauses for `pause`. True for the first failure
  // of a run of them (the one to say).
  bool starved(Duration pause);
  // accept() found nothing waiting: the count of the failures for want of fds before it
  // (0: none since the last), which ends their run.
  std::uint64_t recovered();

  // Every handshake under way is young: accepts pause until resume_handshakes() or `pause`.
  void pause_handshakes(Duration pause);
  void resume_handshakes();

 private:
  void watch_if_open();  // listens again when neither pause holds

  Reactor& reactor_;
  int fd_ = -1;
  bool starved_ = false;          // out of fds: accepting resumes after a pause
  bool handshakes_full_ = false;  // kMaxUnauthenticated young handshakes: resumes as one ends
  std::uint64_t seq_ = 0;
  std::uint64_t failures_ = 0;  // accepts failed for want of fds since the last success
};

}  // namespace faultline::live
