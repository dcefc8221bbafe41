// StepProgress: the job's progress as the step reports of its step rank (rank 0, or the
// lowest replica training) tell it: the latest step and when it came, the steps since the
// latest start, the healthy step times the ETTR accounting takes its nominal step from, the
// bound on a believable step, and the step samples for the policy's detection module
// (WatchSteps). No clock, no I/O: unit-tested in tests/realexec/agent/live_world_parts_test.cc.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "policies/api/action.h"
#include "policies/api/event.h"
#include "policies/api/time.h"

namespace faultline::live {

class StepProgress {
 public:
  // A step report is believed only when the job can have reached that step: at most
  // kStepSlack steps beyond the job's last one, plus as many as the time since its last
  // progress allows at steps kStepSpeedup times faster than the nominal step time (or the
  // healthy median).
  static constexpr double kStepSlack = 1000;
  static constexpr double kStepSpeedup = 10;
  // Accounting: a step this much over the median is not nominal.
  static constexpr double kHealthyStep = 1.5;
  // Healthy step times kept (the latest).
  static constexpr std::size_t kHealthyKept = 4096;

  // A restarted controller continues from the journal's last step and step times.
  void resume(std::int64_t last_step, std::vector<double> healthy_step_times);

  // Every rank started at `t`: the steps since the start and the pending sample begin again.
  void started(Instant t);
  // The step rank reported `step` at `t`: the job's progress.
  void advance(std::int64_t step, Instant t);
  // The step just reported took `step_time_s`: a healthy one (past the first two steps of a
  // start, at most kHealthyStep times the median) counts for the nominal step time.
  void add_step_time(double step_time_s);
  // The latest step (-1 before any), when it came (0 before any) and the steps since the start.
  std::int64_t last_step() const { return last_step_; }
  Instant last_progress_at() const { return last_progress_at_; }
  std::int64_t steps_since_start() const { return steps_since_start_; }
  const std::vector<double>& healthy_step_times() const { return healthy_; }
  // The accounting's step time: the healthy median, or `nominal_s` before any.
  double step_time_s(double nominal_s) const;

  // The highest step believable at `t` for a rank whose own last step is `floor` (the job's
  // last step and 0 count too), with the nominal step time `nominal_s`; `base` is the step
  // it is measured from.
  struct Bound {
    std::int64_t base = 0;
    double since_s = 0;  // seconds since the job's last progress
    double most = 0;
  };
  Bound believable(std::int64_t floor, double nominal_s, Instant t) const;
  // A step report refused: the count so far.
  std::uint64_t refuse() { return ++refused_; }

  // --- step samples (WatchSteps)
  void watch(const WatchSteps& w) { watch_ = w; }
  bool watching() const { return watch_.has_value(); }
  // Adds the report of `step` to the pending sample (`loss` and `grad_norm` finite or none,
  // `nan` whether either was NaN); the sample when the cadence asked for (or a NaN) is due at
  // `t`, which starts the next one.
  std::optional<StepSample> sample(std::int64_t step, double step_time_s,
                                   std::optional<double> loss, std::optional<double> grad_norm,
                                   bool nan, Instant t);

 private:
  // What the step rank reported since the last sample.
  struct PendingSample {
    Instant since{};
    std::int64_t steps = 0;
    double time_s = 0;
    std::optional<double> loss, grad_norm;
    bool nan = false;
  };
  std::int64_t last_step_ = -1;
  Instant last_progress_at_{};
  std::int64_t steps_since_start_ = 0;
  std::vector<double> healthy_;
  std::uint64_t refused_ = 0;
  std::optional<WatchSteps> watch_;
  PendingSample pending_;
};

}  // namespace faultline::live
