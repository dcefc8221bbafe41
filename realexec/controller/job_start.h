// JobStart: the start of the job in flight (a StartJob, HotUpdate, RollBack, or a restarted
// controller's adoption), from its action to every rank started or its failure: the action,
// when it began, the generation it launched, the timer of job.startup_timeout_s and, for an
// in-place start, its note. LiveWorld's ranks (live_ranks.cc) drive it.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "policies/api/ids.h"
#include "policies/api/time.h"
#include "realexec/controller/one_shot_timer.h"

namespace faultline::live {

class JobStart {
 public:
  explicit JobStart(Reactor& reactor) : timer_(reactor) {}

  // Action `id` starts the job at `t`: nothing launched yet, a previous start's timer off.
  void begin(ActionId id, Instant t) {
    timer_.cancel();
    id_ = id;
    began_ = t;
    launch_gen_ = -1;
  }
  // The start ends (every rank started, it failed, or it is abandoned): its action (0 when
  // none was under way), its timer off.
  ActionId end() {
    timer_.cancel();
    return std::exchange(id_, 0);
  }
  // The start under way (0: none).
  ActionId id() const { return id_; }
  bool pending() const { return id_ != 0; }
  Instant began() const { return began_; }

  // The start launched generation `gen`; until then (-1) the journal's generation is the
  // outgoing one, whose late reports must not complete it.
  void launched(std::int64_t gen) { launch_gen_ = gen; }
  bool launched_gen(std::int64_t gen) const { return launch_gen_ == gen; }

  // job.startup_timeout_s from the launch.
  OneShotTimer& timer() { return timer_; }

  // An in-place start's "in place: ..." that prefixes its outcome (empty: an ordinary one).
  const std::string& in_place_note() const { return in_place_note_; }
  void set_in_place_note(std::string note) { in_place_note_ = std::move(note); }

 private:
  ActionId id_ = 0;
  Instant began_{};
  std::int64_t launch_gen_ = -1;
  OneShotTimer timer_;
  std::string in_place_note_;
};

}  // namespace faultline::live
