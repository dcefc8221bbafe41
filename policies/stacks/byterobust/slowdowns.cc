#include "policies/stacks/byterobust/slowdowns.h"

#include <algorithm>
#include <cmath>

namespace faultline::policies {

Slowdowns::Slowdowns(std::unique_ptr<FailSlowPolicy> module, const Params& p, OverEvict over_evict)
    : module_(std::move(module)),
      over_evict_(std::move(over_evict)),
      rounds_(static_cast<int>(p.get("mfu_rounds"))),
      round_gap_(Duration::seconds(p.get("mfu_round_s"))),
      max_fruitless_(static_cast<int>(p.get("max_fruitless_rounds"))),
      timer_(timer_tags::kFailSlow) {}

void Slowdowns::restarted(World& w) {
  rounds_left_ = 0;
  fruitless_ = 0;
  given_up_ = false;
  flagged_.clear();
  forget_straggler(w);
}

void Slowdowns::stopped(Instant now) {
  if (straggler_ >= 0) module_->stopped(now);
}

void Slowdowns::sample(const StepSample& s, World& w) {
  if (!std::isfinite(s.step_time_s) || s.step_time_s <= 0) return;
  last_step_time_s_ = s.step_time_s;
  if (fastest_step_s_ == 0 || s.step_time_s < fastest_step_s_) fastest_step_s_ = s.step_time_s;
  if (straggler_ >= 0 && module_->recovered(s.step_time_s / healthy_step_s_)) {
    w.note("straggler in slot " + std::to_string(straggler_) + " gone: steps at " +
           std::to_string(s.step_time_s / healthy_step_s_) + "x healthy");
    forget_straggler(w);
  }
}

ActionId Slowdowns::slow(double ratio, World& w) {
  if (rounds_left_ > 0 || given_up_ || straggler_ >= 0) return 0;
  slow_since_ = w.now();
  // How slow, against the fastest steps the job has run: the detector's baseline adapts
  // to the steps it sees, a rebalanced straggler's among them, so its ratio understates a
  // straggler that comes back after a restart. (Its own ratio when the job never ran
  // faster, a straggler there from the first start.)
  slow_ratio_ = std::max(ratio, fastest_step_s_ > 0 ? last_step_time_s_ / fastest_step_s_ : 1.0);
  healthy_step_s_ = last_step_time_s_ / slow_ratio_;
  rounds_left_ = rounds_;
  flagged_.clear();
  return w.act(CaptureStacks{"MFU decline"});
}

ActionId Slowdowns::timer(const TimerFired& t, World& w, bool running) {
  if (timer_.fired(t)) {
    if (straggler_ >= 0 && running) check(w);
    return 0;
  }
  if (t.tag == timer_tags::kMfuRound && rounds_left_ > 0 && running)
    return w.act(CaptureStacks{"MFU decline round"});
  return 0;
}

bool Slowdowns::refused(const ActionFailed& f, World& w, bool running) {
  if (f.action != pending_mitigation_ || pending_mitigation_ == 0) return false;
  // The backend cannot work around the straggler (live mode): the module plans without
  // that level from now on (tolerate until eviction breaks even). A module that asks for a
  // refused level again gets the eviction at once.
  pending_mitigation_ = 0;
  refused_[static_cast<int>(pending_level_)] = true;
  module_->refused(pending_level_);
  if (straggler_ >= 0 && running) check(w);
  return true;
}

bool Slowdowns::stacks(const StackVerdict& v, World& w, bool can_search) {
  for (SlotId s : v.outliers) ++flagged_[s];
  if (--rounds_left_ > 0) {
    w.set_timer(round_gap_, timer_tags::kMfuRound);
    return false;
  }
  // Nothing stands out in the stacks, but the localizer times what it tests (the pairwise
  // check): let it place the slowdown. Each search that finds nothing counts; after
  // max_fruitless_rounds of them in a row no more, until one evicts something.
  if (flagged_.empty() && can_search && searches_fruitless_ < max_fruitless_) return true;
  if (flagged_.empty()) {
    // A transient, or a slowdown stacks cannot place.
    ++fruitless_;
    w.act(Note{"fruitless round " + std::to_string(fruitless_) + "/" +
                   std::to_string(max_fruitless_) + ": MFU aggregation flagged no slot",
               fruitless_});
    if (fruitless_ >= max_fruitless_) {
      given_up_ = true;
      w.note("giving up on the MFU decline until the next restart: no slot stands out");
    }
    return false;
  }
  auto most = std::max_element(flagged_.begin(), flagged_.end(),
                               [](const auto& a, const auto& b) { return a.second < b.second; });
  straggler_ = most->first;
  mitigate(w, module_->located(straggler_, w.cluster().machine_in(straggler_), slow_ratio_,
                               slow_since_, w.now(), w.cluster()));
  return false;
}

bool Slowdowns::search_ended(bool found) {
  const bool was = searching_;
  if (searching_) searches_fruitless_ = found ? 0 : searches_fruitless_ + 1;
  searching_ = false;
  return was;
}

// Applies the module's level to the straggler: tolerate and wait, work around it, or
// over-evict its group.
void Slowdowns::mitigate(World& w, SlowdownLevel level) {
  const SlotId slot = straggler_;
  const std::string where = "straggler in slot " + std::to_string(slot);
  switch (level) {
    case SlowdownLevel::kTolerate:
      w.note(where + " tolerated (" + module_->info().name + ")");
      break;
    case SlowdownLevel::kRebalance:
    case SlowdownLevel::kReconfigure:
      if (refused_[static_cast<int>(level)]) return mitigate(w, SlowdownLevel::kEvict);
      pending_level_ = level;
      pending_mitigation_ = w.act(MitigateSlowdown{
          slot,
          level == SlowdownLevel::kRebalance ? Mitigation::kRebalance : Mitigation::kReconfigure,
          where + ": " + slowdown_level_name(level) + " (" + module_->info().name + ")"});
      break;
    case SlowdownLevel::kEvict:
      forget_straggler(w);
      over_evict_(w, slot, "MFU decline: slot " + std::to_string(slot) + " flagged most often");
      return;
  }
  timer_.schedule(w, module_->next_check());
}

// The module's check time came (or a level was refused): the level it answers, or wait.
void Slowdowns::check(World& w) {
  if (auto level = module_->check(w.now()))
    mitigate(w, *level);
  else
    timer_.schedule(w, module_->next_check());
}

void Slowdowns::forget_straggler(World& w) {
  straggler_ = -1;
  pending_mitigation_ = 0;
  healthy_step_s_ = 0;
  timer_.cancel(w);
}

}  // namespace faultline::policies
