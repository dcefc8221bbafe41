#include "policies/stacks/byterobust/incidents.h"

namespace faultline::policies {

namespace {
// Stand in for a crash signature when a stall or a NaN escalates like a recurring crash.
constexpr const char* kStallSignature = "(progress stalled)";
constexpr const char* kNanSignature = "(metric anomaly)";
}  // namespace

void Incidents::started(Instant now, std::int64_t step) {
  last_start_ = now;
  last_start_step_ = step;
  run_furthest_ = step;
  ++starts_;
}

CrashRecurrence Incidents::crash(Instant now, MachineId m, SlotId slot, const std::string& sig,
                                 std::int64_t step) {
  // A crash elsewhere is an independent incident with its own tests: at 10k+ machines the
  // job's MTBF is shorter than the window and unrelated CUDA errors share their signature,
  // so escalating on the signature alone would roll back good code and replay for nothing.
  // A replacement that crashes like its predecessor (the same rank) points at the code or
  // the data.
  const bool same_locus = m == kNoMachine ? last_machine_ == kNoMachine && last_slot_ < 0
                                          : m == last_machine_ || slot == last_slot_;
  // The same signature after the same step as the last crash is a recurrence however long
  // the job ran in between (slow steps, or a restore from far back).
  const bool same_step = step >= 0 && step == last_step_ && sig == last_sig_ && same_locus;
  const bool again = (soon(now) || same_step) && sig == last_sig_ && same_locus;
  // The same crash after the same step at the same rank, run again from a checkpoint, on
  // one machine after another, follows the rank, not a machine: the code or the data is at
  // fault. The stack escalates it like the same NaN, counting the machines it struck in
  // turn. On one machine it is the ladder's (tests, then an attributed eviction): a
  // persistent hardware fault recurs at the same step too, the same time after every
  // restart, and a replacement may be broken as well. Unlike a NaN, a crash right after a
  // restore from the step before counts: the exit came after its rank restored and
  // started (a failed restore has no step and never counts), and with a checkpoint every
  // step that is where a deterministic crash recurs.
  CrashRecurrence r;
  r.again = again;
  r.struck_another = same_step && m != kNoMachine && m != last_machine_;
  streak_ = same_step ? streak_ + 1 : 1;
  turns_ = !same_step ? 1 : turns_ + (r.struck_another ? 1 : 0);
  last_step_ = step;
  named_ = again && m != kNoMachine && m == last_machine_ ? named_ + 1 : 1;
  level_ = again ? level_ + 1 : 0;
  last_sig_ = sig;
  last_machine_ = m;
  last_slot_ = slot;
  r.level = level_;
  r.named = named_;
  r.streak = streak_;
  r.turns = turns_;
  return r;
}

int Incidents::stall(Instant now, std::int64_t last_step) {
  // Stalled again before the restart that answered the last stall got a single step done
  // (within recrash_window_s): that restart did not help.
  const bool again = last_sig_ == kStallSignature && starts_ == stall_answered_by_ &&
                     last_step <= last_start_step_;
  level_ = soon(now) && again ? level_ + 1 : 0;
  forget_locus(kStallSignature);
  stall_answered_by_ = starts_ + 1;  // whatever restarts the job next answers this stall
  return level_;
}

int Incidents::anomaly(bool nan, std::int64_t step) {
  // Identical: the same step as the last NaN, reached again from a checkpoint before it
  // (the steps in between ran clean).
  const bool same_step = nan && step >= 0 && step == last_nan_step_ && step > last_start_step_;
  nan_repeats_ = same_step ? nan_repeats_ + 1 : 1;
  last_nan_step_ = nan ? step : -1;
  return nan_repeats_;
}

bool Incidents::nan_again(Instant now) {
  const bool again = soon(now) && last_sig_ == kNanSignature;
  forget_locus(kNanSignature);
  return again;
}

void Incidents::forget_locus(const char* signature) {
  last_sig_ = signature;
  last_machine_ = kNoMachine;
  last_slot_ = -1;
}

std::optional<Ruling> Incidents::judge_progress(const StopVerdict& verdict, std::int64_t step,
                                                const std::string& why) {
  run_furthest_ = std::max(run_furthest_, step);
  if (run_furthest_ > furthest_) {
    furthest_ = run_furthest_;
    runs_without_progress_ = 0;
    judged_run_ = starts_;
    return std::nullopt;
  }
  if (judged_run_ == starts_) return std::nullopt;  // this run was counted at its first failure
  judged_run_ = starts_;
  const int runs = ++runs_without_progress_;
  const Verdict v = verdict.judge({0, runs});
  if (v == Verdict::kCarryOn) return std::nullopt;  // the words are built only when used
  const std::string what = std::to_string(runs) + " runs in a row that got no further than step " +
                           std::to_string(furthest_) + " (last: " + why + ")";
  return Ruling{v,
                {what + ", after a code rollback: the data or the code is at fault; do not requeue",
                 what + ": roll back recent code"}};
}

std::optional<Ruling> Incidents::judge_identical(const StopVerdict& verdict, int repeats, int times,
                                                 const std::string& what) {
  const Verdict v = verdict.judge({repeats, 0});
  if (v == Verdict::kCarryOn) return std::nullopt;
  return Ruling{v,
                {what + " " + std::to_string(times) +
                     " times in a row, after diagnosis and a code rollback: the data or the code "
                     "is at fault; do not requeue",
                 what + " again after a clean diagnosis"}};
}

}  // namespace faultline::policies
