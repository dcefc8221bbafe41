// The World: everything a policy may see and do.
//
// sim::SimWorld (SimGrid) and live::LiveWorld (real processes) implement it once each;
// tests use FakeWorld. A policy must not reach past it: no other clock, no other
// randomness, no I/O. That is what lets the same policy code be scored in simulation
// and then run live.
#pragma once

#include <cstdint>
#include <string_view>

#include "policies/api/action.h"
#include "policies/api/cluster_view.h"
#include "policies/api/rng.h"
#include "policies/api/time.h"

namespace faultline {

// The contract every World honours (tests/conformance checks it on FakeWorld, SimWorld
// and LiveWorld):
// - act() returns at once and never calls back into the policy; the outcome arrives
//   later as an event (action.h says which, and every ActionFailed case).
// - An action the contract refuses is refused by every World alike: each asks refusal()
//   (policies/api/refusals.h, where each rule is written once with its wording and its
//   reason) before anything else, and answers ActionFailed{id, its reason}; only then
//   does a backend refuse what it cannot do itself.
// - Events are delivered one at a time, in time order; a policy is never re-entered.
// - Timers at the same instant fire in the order they were set; cancelling a timer that
//   fired or was cancelled does nothing.
class World {
 public:
  virtual ~World() = default;
  virtual Instant now() const = 0;
  virtual const ClusterView& cluster() const = 0;
  // Starts an action; its outcome comes back later as an Event. Never blocks.
  virtual ActionId act(Action a) = 0;
  // Fires TimerFired{id, tag} after `after`; timers at the same instant fire in the
  // order they were set.
  virtual TimerId set_timer(Duration after, std::uint64_t tag) = 0;
  virtual void cancel_timer(TimerId id) = 0;
  // A seeded stream owned by the policy stack.
  virtual Rng& rng() = 0;
  // Appends a line to the decision log.
  virtual void note(std::string_view reason) = 0;
  // Whether note() keeps its line: false when no decision log is being written, so a
  // policy may skip formatting text nobody reads (the simulator's default runs).
  virtual bool keeps_notes() const { return true; }
};

}  // namespace faultline
