#include "realexec/controller/session_table.h"

namespace faultline::live {

std::uint64_t SessionTable::open(std::uint64_t seq, Instant t) {
  const std::uint64_t sid = next_++;
  Session& s = sessions_[sid];
  s.seq = seq;
  s.accepted = t;
  unauthenticated_.emplace(s.seq, sid);
  return sid;
}

Session* SessionTable::find(std::uint64_t sid) {
  const auto it = sessions_.find(sid);
  return it == sessions_.end() ? nullptr : &it->second;
}

const Session* SessionTable::find(std::uint64_t sid) const {
  const auto it = sessions_.find(sid);
  return it == sessions_.end() ? nullptr : &it->second;
}

Session* SessionTable::agent(MachineId m) {
  return const_cast<Session*>(static_cast<const SessionTable*>(this)->agent(m));
}

const Session* SessionTable::agent(MachineId m) const {
  const auto it = machine_session_.find(m);
  if (it == machine_session_.end()) return nullptr;
  const Session* s = find(it->second);
  return s && s->open() ? s : nullptr;
}

std::uint64_t SessionTable::bound(MachineId m) const {
  const auto it = machine_session_.find(m);
  return it == machine_session_.end() ? 0 : it->second;
}

bool SessionTable::closed_agent(MachineId m, std::uint64_t sid) {
  const auto it = machine_session_.find(m);
  if (it == machine_session_.end() || it->second != sid) return false;
  machine_session_.erase(it);
  return true;
}

std::size_t SessionTable::unauthenticated() {
  while (!unauthenticated_.empty()) {
    const Session* s = find(unauthenticated_.begin()->second);
    if (s && s->unauthenticated()) break;
    unauthenticated_.erase(unauthenticated_.begin());
  }
  return unauthenticated_.size();
}

std::uint64_t SessionTable::room_maker(Instant now, Duration grace,
                                       const std::function<bool(int fd)>& silent) const {
  for (const auto& [seq, sid] : unauthenticated_) {
    const Session* s = find(sid);
    if (s && s->role == Session::Role::kHello && silent(s->fd)) return sid;
  }
  if (unauthenticated_.empty()) return 0;
  const std::uint64_t oldest = unauthenticated_.begin()->second;
  const Session* s = find(oldest);
  if (s && now - s->accepted >= grace) return oldest;
  return 0;
}

}  // namespace faultline::live
