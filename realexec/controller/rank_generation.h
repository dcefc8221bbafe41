// RankGeneration: what the current generation's ranks said, as LiveWorld believes it (see
// live_ranks.cc). A launch starts a new generation and forgets the previous one's word:
// which ranks started and from which step, each rank's latest step report, which ranks
// exited cleanly, whether the generation's first exit went to the policy, the victim held
// for its cause (a rank that exited because a peer stopped answering), and the budgets of
// the notes about exits and holding ranks. No clock, no I/O: unit-tested in
// tests/realexec/agent/live_world_parts_test.cc.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "policies/api/ids.h"
#include "policies/api/time.h"

namespace faultline::live {

class RankGeneration {
 public:
  // Notes of dropped exits: this many at once (every rank of a large job may exit at a stop),
  // then one a second; exits past that are counted.
  static constexpr int kDroppedExitBurst = 16;
  // Ranks holding in place noted per generation.
  static constexpr int kHoldingNotes = 16;

  // A rank that exited because a peer stopped answering, held until its cause exits too.
  struct Victim {
    MachineId machine = kNoMachine;
    std::int64_t rank = -1;
    int code = 1;
    std::string signature;
  };
  // The slot whose ranks stalled first: `slot` -1 when no slot's ranks are all behind every
  // other rank; `behind` its latest step, `others` the earliest step of every other rank.
  struct Laggard {
    SlotId slot = -1;
    std::int64_t behind = -1;
    std::int64_t others = std::numeric_limits<std::int64_t>::max();
  };

  // A new generation launched at `t`: every rank's word forgotten, the budgets full (the
  // count of unnoted exits carries over: the caller notes it first).
  void launch(Instant t);

  // --- starting
  void started(std::int64_t rank) { started_.insert(rank); }
  std::size_t started_count() const { return started_.size(); }
  bool has_started(std::int64_t rank) const { return started_.count(rank) > 0; }
  // The step the generation started from (a rank's restored step; 0 before one said).
  std::int64_t start_step() const { return start_step_; }
  void set_start_step(std::int64_t step) { start_step_ = step; }

  // --- steps
  void record_step(std::int64_t rank, std::int64_t step, Instant t);
  // The last step `rank` reported in this generation (the start step before its first).
  std::int64_t rank_step(std::int64_t rank) const;
  // When `rank` last reported a step, if it did in this generation.
  std::optional<Instant> reported_at(std::int64_t rank) const;
  // The slot whose ranks stalled first, from the ranks' latest steps (`g` ranks a slot).
  Laggard laggard(SlotId slots, int g) const;

  // --- exits
  void clean_exit(std::int64_t rank) { clean_exits_.insert(rank); }
  void forget_clean_exit(std::int64_t rank) { clean_exits_.erase(rank); }
  bool exited_cleanly(std::int64_t rank) const { return clean_exits_.count(rank) > 0; }
  std::size_t clean_exit_count() const { return clean_exits_.size(); }
  // The generation's first exit went to the policy: the others are its echoes.
  bool exit_reported() const { return exit_reported_; }
  void mark_exit_reported() { exit_reported_ = true; }
  // Holds `v` when no victim is held (the first victim speaks for them all); true when held.
  bool hold_victim(Victim v);
  // The victim held, released (none when none was held).
  std::optional<Victim> take_victim();
  bool holds_victim() const { return victim_.has_value(); }

  // --- note budgets
  // Whether a dropped exit at `t` may be noted (the budget refills at one a second up to
  // kDroppedExitBurst); when not, it is counted as unnoted.
  bool admit_dropped_note(Instant t);
  // The count of exits not noted one by one since the last call.
  int take_unnoted() { return std::exchange(unnoted_, 0); }
  // Whether another rank holding in place may be noted (kHoldingNotes a generation).
  bool admit_holding_note() { return ++holding_notes_ <= kHoldingNotes; }

 private:
  std::set<std::int64_t> started_;
  std::int64_t start_step_ = 0;
  // The latest step each rank reported in this run of the job, and when (a rank's exit comes
  // after its own last report: one agent, one ordered connection).
  std::map<std::int64_t, std::int64_t> steps_;
  std::map<std::int64_t, Instant> reported_at_;
  std::set<std::int64_t> clean_exits_;
  bool exit_reported_ = false;
  std::optional<Victim> victim_;
  double budget_ = kDroppedExitBurst;
  Instant budget_at_{};
  int unnoted_ = 0;
  int holding_notes_ = 0;
};

}  // namespace faultline::live
