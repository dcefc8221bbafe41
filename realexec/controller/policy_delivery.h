// PolicyDelivery: the events waiting for the policy. Events raised while a handler of the
// policy runs (or while an action it took is being started) are queued and delivered after
// it returns, one at a time, so that the policy is never re-entered; an event raised outside
// a handler is delivered from the reactor (a deferred drain). Unit-tested in
// tests/realexec/agent/policy_parts_test.cc.
#pragma once

#include <deque>
#include <functional>
#include <utility>

#include "policies/api/event.h"
#include "realexec/net/reactor.h"

namespace faultline::live {

class PolicyDelivery {
 public:
  // `handle` hands one event to the policy.
  PolicyDelivery(Reactor& reactor, std::function<void(const Event&)> handle)
      : reactor_(reactor), handle_(std::move(handle)) {}

  // Queues `e`; a drain is deferred on the reactor unless a handler runs or one is deferred.
  void push(Event e) {
    queue_.push_back(std::move(e));
    if (!delivering_ && !drain_scheduled_) {
      drain_scheduled_ = true;
      reactor_.defer([this] {
        drain_scheduled_ = false;
        drain();
      });
    }
  }
  // Runs `f`, a handler of the policy (its start), then delivers what it raised.
  void run(const std::function<void()>& f) {
    delivering_ = true;
    f();
    delivering_ = false;
    drain();
  }

 private:
  // Delivers every queued event, unless a handler runs (the queue waits for it to return).
  void drain() {
    if (delivering_) return;
    delivering_ = true;
    while (!queue_.empty()) {
      Event e = std::move(queue_.front());
      queue_.pop_front();
      handle_(e);
    }
    delivering_ = false;
  }

  Reactor& reactor_;
  std::function<void(const Event&)> handle_;
  std::deque<Event> queue_;
  bool delivering_ = false;       // a handler of the policy runs
  bool drain_scheduled_ = false;  // a drain() is deferred on the reactor
};

}  // namespace faultline::live
