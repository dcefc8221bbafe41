// Incident identity for the byterobust stack: whether a failure is "the same failure
// again" (docs/domain.md §4, stop-time step 3), how far up the ladder it has climbed, and
// the counts a stop verdict is asked about (policies/module.h, Recurrence). A value type: it
// is told what happened, with the time, and answers; it never acts.
//
// Three kinds of incident share one identity (the last one's signature, machine, rank
// and step), so that a crash after a stall, or a NaN after a crash, starts over:
// - a crash recurs when it comes within recrash_window_s of the restart that answered
//   the last one, with the same log signature, at the same locus (the same machine or the
//   same rank, or again no machine at all); the same signature after the same step at the
//   same locus recurs however long the job ran in between;
// - a stall recurs when the restart that answered the last stall got no step done;
// - a NaN at the same step as the last one, reached again from a checkpoint before it,
//   is identical (the same batch exploded on whatever machines).
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>

#include "policies/api/event.h"
#include "policies/module.h"

namespace faultline::policies {

// What a crash is, against the incidents before it.
struct CrashRecurrence {
  bool again = false;  // the same failure again: the ladder climbs (level)
  // The same crash after the same step, on another machine than the last: it follows the
  // rank, not a machine.
  bool struck_another = false;
  int level = 0;   // 0: a new incident; 1: again once (roll back); 2+: again after that
  int named = 0;   // crashes in a row whose log named this same machine
  int streak = 0;  // identical crashes in a row (signature, step, rank)
  int turns = 0;   // the machines they struck in turn
};

// The words a verdict's answer carries.
struct VerdictReasons {
  std::string stop, roll_back;
};

// A stop verdict's answer that acts (roll back, or stop), with the words it carries.
struct Ruling {
  Verdict verdict = Verdict::kCarryOn;
  VerdictReasons reasons;
};

class Incidents {
 public:
  explicit Incidents(Duration recrash_window) : recrash_window_(recrash_window) {}

  // The job (re)started at `now`, restored at `step`.
  void started(Instant now, std::int64_t step);
  // A step sample of the current run.
  void stepped(std::int64_t step) { run_furthest_ = std::max(run_furthest_, step); }

  // A crash (or a failed start) of machine `m` in `slot` (kNoMachine, -1: none named) with
  // log signature `sig`, after `step` (-1: unknown), at `now`.
  CrashRecurrence crash(Instant now, MachineId m, SlotId slot, const std::string& sig,
                        std::int64_t step);
  // A stall at `now` whose last step was `last_step`. Returns the ladder's level.
  int stall(Instant now, std::int64_t last_step);
  // A metric anomaly at `step` (`nan`: a NaN). Returns the identical NaN incidents in a
  // row, this one included.
  int anomaly(bool nan, std::int64_t step);
  // After anomaly(), once the stack diagnoses it: whether a NaN came again soon after the
  // restart that answered the last one (that round's evictions did not remove the cause).
  bool nan_again(Instant now);

  // A run ended at `step` (-1: unknown; then the furthest its samples showed), by `why`.
  // Counts the runs in a row that got no further than any run before them and asks
  // `verdict` about them: its ruling, or nullopt (progress, or carry on). A run is counted
  // once: a second failure of the same run (a crash during a stall's stack capture) is
  // not another run without progress, and gets nullopt.
  std::optional<Ruling> judge_progress(const StopVerdict& verdict, std::int64_t step,
                                       const std::string& why);
  // Asks `verdict` about `repeats` identical incidents in a row (`what` recurred `times`
  // times, at least `repeats`): its ruling, or nullopt.
  static std::optional<Ruling> judge_identical(const StopVerdict& verdict, int repeats, int times,
                                               const std::string& what);

  int level() const { return level_; }
  // The ladder starts over (a recovery found its culprit, or the stack gave up).
  void settle() { level_ = 0; }
  // An attributed eviction answered the crashes that named one machine.
  void named_machine_evicted() {
    level_ = 0;
    named_ = 0;
  }
  // Whether `now` is within the recrash window of the last start.
  bool soon(Instant now) const { return now - last_start_ < recrash_window_; }

 private:
  void forget_locus(const char* signature);

  Duration recrash_window_;
  Instant last_start_{};
  std::int64_t last_start_step_ = 0;  // the step the latest start restored
  int starts_ = 0;
  int level_ = 0;
  std::string last_sig_;                 // the last incident's signature
  MachineId last_machine_ = kNoMachine;  // ... the machine its log named
  SlotId last_slot_ = -1;                // ... and that machine's rank
  std::int64_t last_step_ = -1;          // the step the last crash came after (-1: unknown)
  int named_ = 0;
  int streak_ = 0;
  int turns_ = 0;
  int stall_answered_by_ = -1;       // the start that restarted the job after the last stall
  std::int64_t last_nan_step_ = -1;  // the step of the last NaN
  int nan_repeats_ = 0;
  std::int64_t furthest_ = -1;      // the furthest step any run reached
  std::int64_t run_furthest_ = -1;  // the furthest step the current run reached
  int runs_without_progress_ = 0;
  int judged_run_ = -1;  // the start whose run judge_progress last counted
};

}  // namespace faultline::policies
