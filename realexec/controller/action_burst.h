// ActionBurst: act()'s livelock guard. A policy that acts without end (each failure answered
// by a new action) would flood the log; the world stops the run with a clear message once
// more than a limit of actions come within one second. Unit-tested in
// tests/realexec/agent/policy_parts_test.cc.
#pragma once

#include "policies/api/time.h"

namespace faultline::live {

class ActionBurst {
 public:
  // An action at `now`: false when it is more than `max_per_second` in the second that began
  // with the first action of its burst (the actions taken since `start`).
  bool admit(Instant now, int max_per_second) {
    if (now - start_ > Duration::seconds(1)) {
      start_ = now;
      actions_ = 0;
    }
    return ++actions_ <= max_per_second;
  }

 private:
  Instant start_{};
  int actions_ = 0;
};

}  // namespace faultline::live
