// OneShotTimer: one reactor timer under a name, armed or not. Firing disarms it before its
// callback runs; cancel() is a no-op when it is not armed. Its owner cancels it when it goes
// (a timer left armed fires into a destroyed owner).
#pragma once

#include <cstdint>
#include <functional>
#include <utility>

#include "policies/api/time.h"
#include "realexec/net/reactor.h"

namespace faultline::live {

class OneShotTimer {
 public:
  explicit OneShotTimer(Reactor& reactor) : reactor_(reactor) {}
  OneShotTimer(const OneShotTimer&) = delete;
  OneShotTimer& operator=(const OneShotTimer&) = delete;

  // Arms the timer for `after` from now (a timer already armed is forgotten, not cancelled:
  // cancel it first).
  void arm(Duration after, std::function<void()> fire) {
    id_ = reactor_.add_timer(after, [this, fire = std::move(fire)] {
      id_ = 0;
      fire();
    });
  }
  void cancel() {
    if (id_) reactor_.cancel_timer(id_);
    id_ = 0;
  }
  bool armed() const { return id_ != 0; }

 private:
  Reactor& reactor_;
  std::uint64_t id_ = 0;
};

}  // namespace faultline::live
