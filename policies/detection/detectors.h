// The built-in Detector modules (policies/module.h), registered in builtin.cc.
//
// Four single-purpose detectors, each pure (it is handed the time with every call):
// - StallDetector: no step completed for stall_window_s. A steady sample (the
//   simulator's promise that steps keep coming) counts as progress until the next
//   sample; a steady sample with an infinite step time is a stopped counter.
// - SlowStepDetector: steps slower than slow_ratio x the healthy baseline (the median
//   of healthy step times, kept across restarts) for slow_for_s; reported again every
//   slow_for_s while they stay slow (one MFU-decline round per report). Per-step samples
//   are judged when they arrive (a hang is the stall detector's); steady samples also
//   when the time comes.
// - NanDetector: any NaN or Inf in loss or gradients.
// - JumpDetector: the loss or the gradient norm above jump_ratio x its recent mean
//   (an exponential mean over the samples since the restart, after a warm-up).
// Metric findings are reported once per run: the stack's diagnosis restarts the job.
//
// Two registered detection modules compose them: "realtime" (all four, with the real-time
// inspections, ByteRobust §4.1, and the judgement of their alerts: alert_filter.h) and
// "timeout" (none: process exits and the collective timeout only).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "policies/module.h"

namespace faultline::policies {

class StallDetector {
 public:
  explicit StallDetector(Duration window) : window_(window) {}
  void restart(Instant now, std::int64_t step);
  void observe(const StepSample& s, Instant now);
  std::optional<Finding> check(Instant now);
  Instant next_check() const;

 private:
  Duration window_;
  Instant last_advance_{};
  std::int64_t last_step_ = 0;
  bool moving_ = false;  // the last sample was steady with a finite step time
  bool reported_ = false;
};

class SlowStepDetector {
 public:
  SlowStepDetector(double ratio, Duration slow_for) : ratio_(ratio), slow_for_(slow_for) {}
  void restart(Instant now, std::int64_t step);
  std::optional<Finding> observe(const StepSample& s, Instant now);
  std::optional<Finding> check(Instant now);
  Instant next_check() const;
  // The healthy step time the ratio is taken against (0 until known).
  double baseline() const;

 private:
  std::optional<Finding> due(Instant now);
  double ratio_;
  Duration slow_for_;
  // A multiset of doubles kept as counts per distinct value: a value already present
  // costs no allocation (step times repeat exactly in a steady job).
  class Counted {
   public:
    bool empty() const { return n_ == 0; }
    std::size_t size() const { return n_; }
    double min() const { return counts_.begin()->first; }
    double max() const { return counts_.rbegin()->first; }
    void insert(double x) {
      ++counts_[x];
      ++n_;
    }
    void erase_one(double x);  // requires x present
   private:
    std::map<double, std::uint32_t> counts_;
    std::size_t n_ = 0;
  };
  static constexpr std::size_t kWindow = 4096;
  // Step times judged healthy, the last kWindow in a ring (oldest at head_), and the same
  // split into the lower and upper half, so the median costs O(log n) per sample, not O(n).
  std::vector<double> healthy_;
  std::size_t head_ = 0;
  Counted lower_, upper_;             // lower_.size() == upper_.size() or one less
  int since_restart_ = 0;             // samples since the restart
  double last_ = 0;                   // the latest sample's step time
  bool steady_ = false;               // the latest sample was steady
  std::optional<Instant> report_at_;  // slow since report_at_ - slow_for, next report then
};

class NanDetector {
 public:
  void restart() { reported_ = false; }
  std::optional<Finding> observe(const StepSample& s);

 private:
  bool reported_ = false;
};

class JumpDetector {
 public:
  JumpDetector(double ratio, int warmup) : ratio_(ratio), warmup_(warmup) {}
  void restart();
  std::optional<Finding> observe(const StepSample& s);

 private:
  struct Mean {
    double value = 0;
    int samples = 0;
  };
  std::optional<Finding> judge(const char* metric, const std::optional<double>& v, Mean& m);
  double ratio_;
  int warmup_;
  Mean loss_, grad_;
  bool reported_ = false;
};

const ModuleInfo& realtime_detection_info();
std::unique_ptr<Detector> make_realtime_detection(const Params& p);
const ModuleInfo& timeout_detection_info();
std::unique_ptr<Detector> make_timeout_detection(const Params& p);

// The four detectors of "realtime" as one Detector, for a plugin that adds its own
// detection to them: construct it from the plugin's parameters, which must declare
// realtime_detection_info().params (the knobs these read), and forward to it.
std::unique_ptr<Detector> make_step_detectors(const Params& p);

}  // namespace faultline::policies
