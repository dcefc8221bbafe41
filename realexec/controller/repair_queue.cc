#include "realexec/controller/repair_queue.h"

#include <utility>

namespace faultline::live {

RepairQueue::~RepairQueue() {
  for (auto& [m, r] : repairs_)
    if (r.timer) reactor_.cancel_timer(r.timer);
}

const RepairQueue::Repair* RepairQueue::find(MachineId m) const {
  const auto it = repairs_.find(m);
  return it == repairs_.end() ? nullptr : &it->second;
}

void RepairQueue::take_out(MachineId m, Instant t) {
  Repair& r = repairs_[m];
  if (r.timer) reactor_.cancel_timer(r.timer);
  r = Repair{};
  r.since = t;
}

bool RepairQueue::agent_back(MachineId m, Instant t) {
  Repair& r = repairs_[m];
  if (r.running || r.given_up || r.timer != 0) return false;
  if (r.since.ns == 0) r.since = t;
  return true;
}

void RepairQueue::schedule(MachineId m, Duration after, std::function<void()> check) {
  Repair& r = repairs_[m];
  if (r.timer) reactor_.cancel_timer(r.timer);
  r.timer = reactor_.add_timer(after, [this, m, check = std::move(check)] {
    auto it = repairs_.find(m);
    if (it == repairs_.end()) return;
    it->second.timer = 0;
    check();
  });
}

void RepairQueue::forget(MachineId m) {
  if (auto r = repairs_.find(m); r != repairs_.end()) {
    if (r->second.timer) reactor_.cancel_timer(r->second.timer);
    repairs_.erase(r);
  }
}

bool RepairQueue::begin_check(MachineId m) {
  auto it = repairs_.find(m);
  if (it == repairs_.end() || it->second.running) return false;
  it->second.running = true;
  ++it->second.checks;
  return true;
}

bool RepairQueue::check_failed(MachineId m, int max_checks, Instant t) {
  auto it = repairs_.find(m);
  if (it == repairs_.end()) return false;
  Repair& r = it->second;
  r.running = false;
  if (r.checks >= max_checks) {
    r.given_up = true;
    return false;
  }
  r.since = t;
  return true;
}

bool RepairQueue::alerted_since_taken_out(MachineId m) const {
  const auto it = repairs_.find(m);
  const auto a = last_alert_.find(m);
  return it != repairs_.end() && a != last_alert_.end() && a->second >= it->second.since;
}

}  // namespace faultline::live
