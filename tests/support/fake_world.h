// FakeWorld: a World for unit tests, with a manual clock and a (time, sequence)
// ordered timer queue. It records every action and answers nothing by itself: a test
// feeds the policy the events it wants, in the order it wants.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "policies/api/policy.h"

namespace faultline::testing {

// ByteRobust's Fig. 7 cluster: 16 machines of 2 GPUs, TP=2, PP=4, DP=4.
inline ClusterSpec spec16() {
  ClusterSpec c;
  c.machines = 16;
  c.gpus_per_machine = 2;
  c.tp = 2;
  c.pp = 4;
  c.dp = 4;
  return c;
}

class FakeWorld : public World {
 public:
  explicit FakeWorld(const ClusterSpec& spec, std::uint64_t seed = 1) : view_(spec), rng_(seed) {}

  Instant now() const override { return now_; }
  const ClusterView& cluster() const override { return view_; }
  ClusterView& mutable_cluster() { return view_; }
  ActionId act(Action a) override {
    actions.push_back(std::move(a));
    return next_action_++;
  }
  TimerId set_timer(Duration after, std::uint64_t tag) override {
    const TimerId id = next_timer_++;
    timers_[{(now_ + after).ns, id}] = tag;
    return id;
  }
  void cancel_timer(TimerId id) override {
    for (auto it = timers_.begin(); it != timers_.end(); ++it)
      if (it->first.second == id) {
        timers_.erase(it);
        return;
      }
  }
  Rng& rng() override { return rng_; }
  void note(std::string_view reason) override { notes.emplace_back(reason); }

  // Moves the clock to `t`, firing due timers into `policy` in (time, id) order.
  void advance_to(Instant t, Policy& policy) {
    while (!timers_.empty() && timers_.begin()->first.first <= t.ns) {
      auto it = timers_.begin();
      now_ = Instant{it->first.first};
      TimerFired ev{it->first.second, it->second};
      timers_.erase(it);
      policy.on_event(ev, *this);
    }
    now_ = t;
  }
  ActionId last_action_id() const { return next_action_ - 1; }
  template <class T>
  std::vector<T> all() const {
    std::vector<T> out;
    for (const auto& a : actions)
      if (auto* x = std::get_if<T>(&a)) out.push_back(*x);
    return out;
  }

  std::vector<Action> actions;
  std::vector<std::string> notes;

 private:
  ClusterView view_;
  Rng rng_;
  Instant now_{};
  ActionId next_action_ = 1;
  TimerId next_timer_ = 1;
  std::map<std::pair<std::int64_t, TimerId>, std::uint64_t> timers_;
};

}  // namespace faultline::testing
