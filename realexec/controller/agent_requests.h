// AgentRequests: the requests LiveWorld sent to agents and waits to hear answered. Each gets a
// fresh req id; its handler hears the agent's reply, or a synthetic failed one (ok false, a
// detail) when the agent is not connected, is lost, or does not answer before the timeout.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "policies/api/ids.h"
#include "policies/api/time.h"
#include "realexec/controller/machine_link.h"
#include "realexec/net/messages.h"
#include "realexec/net/reactor.h"

namespace faultline::live {

class AgentRequests {
 public:
  using Reply = std::function<void(const AgentReply&)>;

  AgentRequests(Reactor& reactor, MachineLink& link) : reactor_(reactor), link_(link) {}
  AgentRequests(const AgentRequests&) = delete;
  AgentRequests& operator=(const AgentRequests&) = delete;
  ~AgentRequests();  // cancels the timeouts still armed

  // Sends `msg` to machine m with a fresh req id, which it returns. Not connected: `on_reply`
  // hears "agent not connected" from the reactor (deferred), and nothing waits.
  std::uint64_t send(MachineId m, nlohmann::json msg, Duration timeout, Reply on_reply);
  // Machine m's reply: its request's handler hears it; a reply to no request of m is ignored.
  void answer(MachineId m, const AgentReply& reply);
  // Every request waiting on machine m fails with `why` (its agent is lost).
  void fail_all_of(MachineId m, const std::string& why);
  // Whether request `req` waits for machine m's reply.
  bool waits(std::uint64_t req, MachineId m) const;

 private:
  // Removes request `req` (and cancels its timeout); returns its handler.
  Reply take(std::uint64_t req);

  Reactor& reactor_;
  MachineLink& link_;
  std::uint64_t next_ = 1;
  std::map<std::uint64_t, std::pair<MachineId, Reply>> replies_;  // req -> machine, handler
  std::map<std::uint64_t, std::uint64_t> timers_;                 // req -> its timeout's timer
};

}  // namespace faultline::live
