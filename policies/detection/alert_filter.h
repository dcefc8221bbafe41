// Which real-time inspection alerts are worth an eviction (ByteRobust §4.1), as the
// realtime detection module judges them: a GPU or host alert at once; a network alert
// (nic, switch) only once it repeats, `count` alerts within `window` on one machine,
// since links flap and recover on their own. Other kinds are not acted on.
#pragma once

#include <deque>
#include <map>

#include "policies/api/event.h"

namespace faultline::policies {

class AlertFilter {
 public:
  AlertFilter(int count, Duration window) : count_(count), window_(window) {}

  // Whether the alert, seen at `now`, calls for evicting its machine.
  bool evicts(const InspectionAlert& a, Instant now) {
    if (a.kind == "gpu" || a.kind == "host") return true;
    if (a.kind != "nic" && a.kind != "switch") return false;
    std::deque<Instant>& times = seen_[a.machine];
    times.push_back(now);
    while (!times.empty() && now - times.front() > window_) times.pop_front();
    if (static_cast<int>(times.size()) < count_) return false;
    seen_.erase(a.machine);
    return true;
  }

 private:
  int count_;
  Duration window_;
  std::map<MachineId, std::deque<Instant>> seen_;  // recent network alerts by machine
};

}  // namespace faultline::policies
