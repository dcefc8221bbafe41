// The controller's door: accepting connections, room for handshakes when many arrive at
// once, refusals, and the notes about them (rate-limited: anyone can connect).

#include <cerrno>
#include <cstring>
#include <iostream>

#include "realexec/controller/controller_internal.h"
#include "realexec/controller/host_liveness.h"
#include "realexec/controller/live_controller.h"

namespace faultline::live {

using nlohmann::json;
using namespace controller_detail;

void Controller::on_accept() {
  // At most kAcceptsPerWake at a time, then back to the loop (the level-triggered listener
  // calls again): a flood dialled again as fast as it is pushed out would otherwise keep this
  // loop going while the hellos of the ones it let in, and every agent, wait unread.
  for (int i = 0; i < kAcceptsPerWake; ++i) {
    if (!room_for_handshake()) return;
    std::string peer;
    const int fd = acceptor_.accept(&peer);
    if (fd < 0) {
      const int e = errno;
      if (accept_starved(e)) {
        // Out of fds: the pending connection stays in the backlog; accepts pause a moment.
        if (acceptor_.starved(Duration::seconds(kAcceptPauseS)))
          world_->note(std::string("cannot accept connections: ") + std::strerror(e) +
                       "; pausing accepts for " + std::to_string(kAcceptPauseS) +
                       " s at a time until fds are free (raise LimitNOFILE)");
      } else if (e == EAGAIN) {
        if (const std::uint64_t failures = acceptor_.recovered())
          world_->note("accepting connections again after " + std::to_string(failures) +
                       " failures for want of fds");
      }
      return;
    }
    const std::uint64_t sid = sessions_.open(acceptor_.next_seq(), reactor_.now());
    Session& s = sessions_.at(sid);
    s.conn = std::make_unique<Conn>(
        reactor_, fd, peer,
        Conn::Handlers{[this, sid](const json& m) { on_message(sid, m); },
                       [this, sid](const std::string& why) { on_close(sid, why); }});
    s.conn->set_max_frame(kMaxFrameBeforeAuth);
    s.fd = fd;
    // Keepalive probes tell a silent agent whose host answers from a host that is gone; the
    // kernel gives up on the connection only after the heartbeat timer has (two probes more).
    enable_keepalive(fd, 1, 1, static_cast<int>(std::ceil(config_.heartbeat_timeout_s)) + 2);
    s.timer = reactor_.add_timer(Duration::seconds(kHelloTimeoutS), [this, sid] {
      Session* late = sessions_.find(sid);
      if (!late) return;
      late->timer = 0;
      if (late->unauthenticated()) refuse(sid, "no authenticated hello within 5 s");
    });
  }
}

bool Controller::room_for_handshake() {
  if (static_cast<int>(sessions_.unauthenticated()) < kMaxUnauthenticated) return true;
  // The oldest connection still silent first: no hello read and nothing waiting to be read.
  // Agents and operators send their hello as they connect: one queued in the listen backlog
  // has it waiting when accepted, and one accepted before it arrived is the newest, pushed out
  // only after 64 more accepts. Connections held open without a word make room for each other
  // at the rate accept() takes them. A grace of 0.1 s (64 accepts per 0.1 s) left the accept
  // queue full of them: the kernel dropped the SYNs of agents and operators (retried after 1,
  // 3, 7 s), and `live status` behind 2,000 took 8.4 s; a restarted agent 7.7 s. Then the
  // oldest past kHandshakeGraceS.
  if (const std::uint64_t sid =
          sessions_.room_maker(reactor_.now(), Duration::seconds(kHandshakeGraceS),
                               [](int fd) { return bytes_waiting(fd) == 0; })) {
    make_room_unauthenticated(sid);
    return true;
  }
  // A herd of agents redialling at once (a controller restart): every handshake is young
  // and finishes in a round trip. The rest wait in the listen backlog (accepts resume as
  // soon as one finishes, or after a short pause) instead of pushing out the ones under way.
  acceptor_.pause_handshakes(Duration::seconds(kHandshakePauseS));
  return false;
}

void Controller::leave_unauthenticated(std::uint64_t sid, const Session& s) {
  sessions_.leave_unauthenticated(sid, s);
  acceptor_.resume_handshakes();
}

void Controller::make_room_unauthenticated(std::uint64_t sid) {
  // An agent or an operator finishes its handshake in milliseconds, so a flood of idle
  // connections only pushes out its own.
  Session* s = sessions_.find(sid);
  if (!s) return;
  const std::uint64_t evicted = sessions_.evicted();
  note_unauthenticated("closed the unauthenticated connection from " + s->conn->peer() +
                       (s->role == Session::Role::kHello ? " (no hello)" : "") + ": " +
                       std::to_string(kMaxUnauthenticated) + " were open (" +
                       std::to_string(evicted) + " closed so far)");
  leave_unauthenticated(sid, *s);
  s->role = Session::Role::kClient;  // its close is no refusal to report again
  s->conn->close("too many unauthenticated connections");
}

void Controller::make_room_clients(bool read_only) {
  std::vector<std::pair<Instant, std::uint64_t>> same;
  for (const auto& [sid, s] : sessions_.all())
    if (s.role == Session::Role::kClient && s.machine == kNoMachine && s.read_only == read_only &&
        s.open() && s.idle_timer != 0)
      same.emplace_back(s.last_heard, sid);
  if (static_cast<int>(same.size()) < kMaxClientsPerAccess) return;
  std::sort(same.begin(), same.end());
  Session& lru = sessions_.at(same.front().second);
  note_session(read_only, std::string("closed the least recently active ") +
                              (read_only ? "read-only" : "admin") + " session (from " +
                              lru.conn->peer() + "): " + std::to_string(kMaxClientsPerAccess) +
                              " were open");
  lru.conn->close("too many sessions of this access");
}

void Controller::arm_client_idle(std::uint64_t sid) {
  Session* s = sessions_.find(sid);
  if (!s) return;
  if (s->idle_timer) reactor_.cancel_timer(s->idle_timer);
  s->last_heard = reactor_.now();
  s->idle_timer = reactor_.add_timer(Duration::seconds(kClientIdleS), [this, sid] {
    Session* idle = sessions_.find(sid);
    if (!idle) return;
    idle->idle_timer = 0;
    if (idle->open())
      idle->conn->close("idle for " + std::to_string(static_cast<int>(kClientIdleS)) + " s");
  });
}

void Controller::note_bad_credential(const std::string& text) {
  NoteWindow& n = bad_credential_notes_;
  const bool say = n.admit(reactor_, [this](std::uint64_t unsaid, std::uint64_t total) {
    const std::string line = std::to_string(unsaid) +
                             " more connections refused for a bad token in the last minute (" +
                             std::to_string(total) + " bad proofs so far): a credential attack?";
    world_->note(line);
    std::cerr << log_stamp() << " faultline live: " << line << "\n";
  });
  if (!say) return;
  const std::string line = text + " (" + std::to_string(n.total()) + " bad proofs so far)";
  world_->note(line);
  std::cerr << log_stamp() << " faultline live: " << line << "\n";
}

void Controller::refuse(std::uint64_t sid, const std::string& why) {
  Session* found = sessions_.find(sid);
  if (!found) return;
  Session& s = *found;
  if (why == "bad token") {
    const Hello& h = s.handshake.hello();
    note_bad_credential("refused connection from " + s.conn->peer() + " (" + h.proof_role() +
                        (h.name.empty() ? "" : " " + h.name.substr(0, 64)) +
                        (h.read_only ? ", read-only" : "") + "): bad token");
  } else {
    note_unauthenticated("refused connection from " + s.conn->peer() + ": " + why);
  }
  s.conn->send(json{{"type", "refused"}, {"reason", why}});
  leave_unauthenticated(sid, s);
  s.role = Session::Role::kClient;  // no further messages are acted on
  s.conn->set_handlers(
      {[](const json&) {}, [this, sid](const std::string& w) { on_close(sid, w); }});
  reactor_.add_timer(Duration::seconds(0.2), [this, sid] {
    Session* refused = sessions_.find(sid);
    if (refused && refused->conn->is_open()) refused->conn->close("refused");
  });
}

void Controller::note_unauthenticated(const std::string& text) {
  // Anyone can connect: the first 20 are noted, then one line per 1000, so that a flood of
  // connections cannot fill the event log or the terminal.
  ++unauthenticated_;
  if (unauthenticated_ > 20 && unauthenticated_ % 1000 != 0) return;
  const std::string line =
      text +
      (unauthenticated_ > 20 ? " (" + std::to_string(unauthenticated_) + " refused so far)" : "");
  world_->note(line);
  std::cerr << log_stamp() << " faultline live: " << line << "\n";
}

void Controller::note_session(bool read_only, const std::string& text) {
  const bool say = session_notes_[read_only ? 1 : 0].admit(
      reactor_, [this, read_only](std::uint64_t unsaid, std::uint64_t total) {
        world_->note(
            std::to_string(unsaid) + " more notes about " + (read_only ? "read-only" : "admin") +
            " sessions in the last minute were left out (" + std::to_string(total) + " so far)");
      });
  if (say) world_->note(text);
}

void Controller::note_refusal(Session& s, const std::string& reason) {
  if (s.role == Session::Role::kClient && s.machine == kNoMachine) {
    // A client's refusals count across its sessions: a new session starts no new allowance.
    ++s.refused;
    return note_session(s.read_only, "refused a message from " + s.conn->peer() + ": " + reason);
  }
  // The first few of each connection, then one line per 1000: a flood of junk must not
  // fill the event log.
  ++s.refused;
  if (s.refused <= 5 || s.refused % 1000 == 0) {
    const std::string who =
        s.machine != kNoMachine ? "agent of " + config_machine_name(s.machine) : s.conn->peer();
    world_->note("refused a message from " + who + ": " + reason +
                 (s.refused > 5 ? " (" + std::to_string(s.refused) + " refused so far)" : ""));
  }
}

}  // namespace faultline::live
