// SessionTable: the controller's connections (sessions), each with its role in the handshake
// (hello, challenged, agent, client), which machine an agent's session speaks for (one live
// session a machine), and the unauthenticated sessions in accept order, of which the oldest
// makes room when too many are open (controller_admission.cc). The Controller decides who is
// let in; this keeps the table. Unit-tested in tests/realexec/agent/live_world_parts_test.cc.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <utility>

#include "policies/api/ids.h"
#include "policies/api/time.h"
#include "realexec/net/auth.h"
#include "realexec/net/wire.h"

namespace faultline::live {

struct Session {
  std::unique_ptr<Conn> conn;
  // kHello: waiting for the hello; kChallenged: for the answer to our challenge.
  enum class Role { kHello, kChallenged, kAgent, kClient } role = Role::kHello;
  ControllerHandshake handshake;
  bool read_only = false;  // a client that proved the status credential
  MachineId machine = kNoMachine;
  std::uint64_t timer = 0;       // handshake deadline, then heartbeat deadline
  std::uint64_t refused = 0;     // messages refused on this connection
  Instant last_heard{};          // agents: the last message received
  std::uint64_t seq = 0;         // accept order: the oldest unauthenticated one makes room
  std::uint64_t idle_timer = 0;  // clients: closed after kClientIdleS without a request
  Instant accepted{};
  int fd = -1;               // the connection's socket (owned by conn), for TCP_INFO
  bool stall_noted = false;  // agents: "silent but its host answers" was said

  bool unauthenticated() const { return role == Role::kHello || role == Role::kChallenged; }
  bool open() const { return conn && conn->is_open(); }
};

class SessionTable {
 public:
  using Map = std::map<std::uint64_t, Session>;

  // A new session, accepted as the `seq`th connection at `t`: its id (and it is
  // unauthenticated until leave_unauthenticated).
  std::uint64_t open(std::uint64_t seq, Instant t);
  // The session `sid` (none: closed).
  Session* find(std::uint64_t sid);
  const Session* find(std::uint64_t sid) const;
  Session& at(std::uint64_t sid) { return sessions_.at(sid); }
  void erase(std::uint64_t sid) { sessions_.erase(sid); }
  void clear() { sessions_.clear(); }
  Map& all() { return sessions_; }

  // --- agents: one session a machine
  // The session machine m's agent speaks through, while its connection is open.
  Session* agent(MachineId m);
  const Session* agent(MachineId m) const;
  // The session bound to machine m, open or not (0: none).
  std::uint64_t bound(MachineId m) const;
  void bind(MachineId m, std::uint64_t sid) { machine_session_[m] = sid; }
  void unbind(MachineId m) { machine_session_.erase(m); }
  // Session `sid` closed: machine m is unbound when it was bound to it (true then: the
  // machine's agent is lost).
  bool closed_agent(MachineId m, std::uint64_t sid);

  // --- unauthenticated sessions
  void leave_unauthenticated(std::uint64_t sid, const Session& s) {
    unauthenticated_.erase({s.seq, sid});
  }
  // The unauthenticated sessions still open, those gone or authenticated dropped first.
  std::size_t unauthenticated();
  // The session that makes room when too many handshakes are open: the oldest still silent
  // (no hello, `silent(fd)` says nothing waits to be read), else the oldest at least `grace`
  // old at `now`; 0 when every one is younger.
  std::uint64_t room_maker(Instant now, Duration grace,
                           const std::function<bool(int fd)>& silent) const;
  // Another unauthenticated session closed to make room: the count so far.
  std::uint64_t evicted() { return ++evicted_; }

 private:
  std::uint64_t next_ = 1;
  Map sessions_;
  std::map<MachineId, std::uint64_t> machine_session_;
  // Unauthenticated sessions by (accept order, sid): the oldest makes room.
  std::set<std::pair<std::uint64_t, std::uint64_t>> unauthenticated_;
  std::uint64_t evicted_ = 0;
};

}  // namespace faultline::live
