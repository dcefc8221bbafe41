// One timer at the time a module asks to be checked next (Detector::next_check,
// FailSlowPolicy::next_check): a stack keeps one of these per module instead of
// juggling timer ids, and a check time that did not move keeps its timer.
#pragma once

#include <algorithm>
#include <cstdint>

#include "policies/api/event.h"
#include "policies/api/world.h"

namespace faultline::policies {

class ModuleTimer {
 public:
  explicit ModuleTimer(std::uint64_t tag) : tag_(tag) {}

  // Moves the timer to `at` (Instant::max(): no timer).
  void schedule(World& w, Instant at) {
    if (at == at_) return;
    cancel(w);
    at_ = at;
    if (at != Instant::max()) id_ = w.set_timer(std::max(Duration::zero(), at - w.now()), tag_);
  }
  void cancel(World& w) {
    if (id_) w.cancel_timer(id_);
    id_ = 0;
    at_ = Instant::max();
  }
  // True when `t` is this timer firing (it is then spent: none is pending).
  bool fired(const TimerFired& t) {
    if (t.tag != tag_ || t.timer != id_ || id_ == 0) return false;
    id_ = 0;
    at_ = Instant::max();
    return true;
  }

 private:
  std::uint64_t tag_;
  TimerId id_ = 0;
  Instant at_ = Instant::max();
};

}  // namespace faultline::policies
