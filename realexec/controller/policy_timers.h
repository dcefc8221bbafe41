// PolicyTimers: the policy's timers (World::set_timer, cancel_timer) as reactor timers, each
// under the policy's own id (1, 2, ...). A timer that fires is forgotten before its callback
// runs; the ones still set when the world goes are cancelled. Unit-tested in
// tests/realexec/agent/policy_parts_test.cc.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <utility>

#include "policies/api/ids.h"
#include "policies/api/time.h"
#include "realexec/net/reactor.h"

namespace faultline::live {

class PolicyTimers {
 public:
  explicit PolicyTimers(Reactor& reactor) : reactor_(reactor) {}
  PolicyTimers(const PolicyTimers&) = delete;
  PolicyTimers& operator=(const PolicyTimers&) = delete;
  ~PolicyTimers() {
    for (auto& [id, t] : reactor_timers_) reactor_.cancel_timer(t);
  }

  // A timer `after` from now: `fire` gets its id then.
  TimerId set(Duration after, std::function<void(TimerId)> fire) {
    const TimerId id = next_++;
    reactor_timers_[id] = reactor_.add_timer(after, [this, id, fire = std::move(fire)] {
      reactor_timers_.erase(id);
      fire(id);
    });
    return id;
  }
  // Cancels timer `id`; nothing when it fired or is unknown.
  void cancel(TimerId id) {
    auto it = reactor_timers_.find(id);
    if (it == reactor_timers_.end()) return;
    reactor_.cancel_timer(it->second);
    reactor_timers_.erase(it);
  }

 private:
  Reactor& reactor_;
  std::map<TimerId, std::uint64_t> reactor_timers_;  // policy timer -> reactor timer
  TimerId next_ = 1;
};

}  // namespace faultline::live
