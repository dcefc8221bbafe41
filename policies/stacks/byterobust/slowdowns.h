// An MFU decline, from the detector's report to the straggler's fate (ByteRobust §4.3,
// with the fail-slow module's ladder, policies/module.h FailSlowPolicy): rounds of stack
// aggregation a few seconds apart flag the slots whose stacks stand out; the slot flagged
// most often is the straggler, handed to the fail-slow module, whose levels it applies
// (tolerate, rebalance, reconfigure, evict) at the times the module names. A slowdown
// that no stacks place may go to a localizer that times what it tests; after
// max_fruitless_rounds sequences (or searches) that placed nothing it gives up until the
// next restart, instead of capturing every slot's stacks every few minutes for days.
//
// The byterobust stack owns one and calls it from its handlers; it acts through the
// World it is given, and evicts through the stack's eviction (over_evict), which stops
// the job and refills the slots.
#pragma once

#include <array>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "policies/localization/localization.h"
#include "policies/module.h"
#include "policies/stacks/byterobust/module_timer.h"
#include "policies/stacks/byterobust/timer_tags.h"

namespace faultline::policies {

class Slowdowns {
 public:
  // Evicts the parallel group of `slot` (an over-eviction), for `why`.
  using OverEvict = std::function<void(World&, SlotId slot, const std::string& why)>;
  Slowdowns(std::unique_ptr<FailSlowPolicy> module, const Params& p, OverEvict over_evict);

  const FailSlowPolicy& module() const { return *module_; }

  // The job (re)started: rounds cut short start over on the next report, and the
  // straggler is forgotten (a restart lays the job out afresh).
  void restarted(World& w);
  // The run ended at `now` (the fail-slow module's clock stops).
  void stopped(Instant now);
  // The MFU rounds under way, if any, are called off (the job stalled).
  void cancel_rounds() { rounds_left_ = 0; }
  bool in_rounds() const { return rounds_left_ > 0; }

  // A step sample while the job runs (a straggler may be gone).
  void sample(const StepSample& s, World& w);
  // The detector reports slow steps while the job runs. Returns the stack capture it asked
  // for (0: none: rounds under way, given up, or a straggler already tracked).
  ActionId slow(double ratio, World& w);
  // A timer fired while the job runs (`running`) or not. Returns the stack capture it
  // asked for, if any (0).
  ActionId timer(const TimerFired& t, World& w, bool running);
  // An action failed. True when it was its MitigateSlowdown (the backend lacks it).
  bool refused(const ActionFailed& f, World& w, bool running);

  // Stacks captured during the rounds (in_rounds()). Returns true when nothing stands out
  // and `can_search` (the localizer places slowdowns) and searches remain: the stack then
  // starts a search, between search_began() and search_ended().
  bool stacks(const StackVerdict& v, World& w, bool can_search);
  void search_began() { searching_ = true; }
  // The search ended (found: it evicted something). Returns whether one was under way.
  bool search_ended(bool found);
  // The search never began (the stack gave up first).
  void search_abandoned() { searching_ = false; }

 private:
  void mitigate(World& w, SlowdownLevel level);
  void check(World& w);
  void forget_straggler(World& w);

  std::unique_ptr<FailSlowPolicy> module_;
  OverEvict over_evict_;
  int rounds_;
  Duration round_gap_;
  int max_fruitless_;
  ModuleTimer timer_;
  SlotId straggler_ = -1;            // the straggler the module tracks (-1: none)
  ActionId pending_mitigation_ = 0;  // its last MitigateSlowdown, and the level it applies
  SlowdownLevel pending_level_ = SlowdownLevel::kTolerate;
  std::array<bool, 4> refused_{};  // levels the backend refused (it lacks MitigateSlowdown)
  Instant slow_since_{};           // when the detector reported slow steps
  double slow_ratio_ = 1;          // how slow, then
  double last_step_time_s_ = 0;    // the latest steady sample's step time
  double healthy_step_s_ = 0;      // the step time without the straggler (its ratio's base)
  double fastest_step_s_ = 0;      // the fastest steps of the job so far
  int rounds_left_ = 0;
  std::map<SlotId, int> flagged_;  // how often each slot stood out in these rounds
  int fruitless_ = 0;              // sequences since the restart that flagged nothing
  bool given_up_ = false;
  bool searching_ = false;      // a localizer searches for a slowdown
  int searches_fruitless_ = 0;  // such searches in a row that found nothing
};

}  // namespace faultline::policies
