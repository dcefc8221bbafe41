#include "realexec/controller/agent_requests.h"

#include <vector>

namespace faultline::live {

namespace {

AgentReply failed_reply(std::string detail, bool timed_out = false) {
  AgentReply r;
  r.ok = false;
  r.detail = std::move(detail);
  r.timed_out = timed_out;
  return r;
}

}  // namespace

AgentRequests::~AgentRequests() {
  for (auto& [req, t] : timers_) reactor_.cancel_timer(t);
}

std::uint64_t AgentRequests::send(MachineId m, nlohmann::json msg, Duration timeout,
                                  Reply on_reply) {
  const std::uint64_t req = next_++;
  msg["req"] = req;
  if (!link_.send(m, msg)) {
    reactor_.defer([on_reply] { on_reply(failed_reply("agent not connected")); });
    return req;
  }
  replies_[req] = {m, std::move(on_reply)};
  timers_[req] = reactor_.add_timer(timeout, [this, req] {
    timers_.erase(req);
    auto it = replies_.find(req);
    if (it == replies_.end()) return;
    Reply r = std::move(it->second.second);
    replies_.erase(it);
    r(failed_reply("agent did not answer in time", true));
  });
  return req;
}

AgentRequests::Reply AgentRequests::take(std::uint64_t req) {
  Reply r = std::move(replies_[req].second);
  replies_.erase(req);
  if (auto t = timers_.find(req); t != timers_.end()) {
    reactor_.cancel_timer(t->second);
    timers_.erase(t);
  }
  return r;
}

void AgentRequests::answer(MachineId m, const AgentReply& reply) {
  if (!waits(reply.req, m)) return;
  take(reply.req)(reply);
}

void AgentRequests::fail_all_of(MachineId m, const std::string& why) {
  std::vector<std::uint64_t> reqs;
  for (const auto& [req, p] : replies_)
    if (p.first == m) reqs.push_back(req);
  for (auto req : reqs) take(req)(failed_reply(why));
}

bool AgentRequests::waits(std::uint64_t req, MachineId m) const {
  auto it = replies_.find(req);
  return it != replies_.end() && it->second.first == m;
}

}  // namespace faultline::live
