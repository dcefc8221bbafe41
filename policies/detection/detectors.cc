#include "policies/detection/detectors.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "policies/detection/alert_filter.h"

namespace faultline::policies {

namespace {

bool finite_positive(double t) { return std::isfinite(t) && t > 0; }

}  // namespace

std::string describe(const Finding& f) {
  return std::visit(
      [](const auto& x) -> std::string {
        using T = std::decay_t<decltype(x)>;
        std::ostringstream o;
        if constexpr (std::is_same_v<T, ProgressStalled>)
          o << "progress stalled at step " << x.last_step << " for " << x.stalled_for.to_seconds()
            << " s";
        else if constexpr (std::is_same_v<T, StepTimeHigh>)
          o << "step time high x" << std::to_string(x.ratio);
        else
          o << "metric anomaly " << x.metric << (x.nan ? " NaN" : " x" + std::to_string(x.ratio));
        return o.str();
      },
      f);
}

// ---------------------------------------------------------------- stall

void StallDetector::restart(Instant now, std::int64_t step) {
  last_advance_ = now;
  last_step_ = step;
  moving_ = false;
  reported_ = false;
}

void StallDetector::observe(const StepSample& s, Instant now) {
  // A steady sample promised progress up to now; any sample with a higher step shows it.
  if (s.step > last_step_ || moving_) {
    last_advance_ = now;
    reported_ = false;
  }
  last_step_ = std::max(last_step_, s.step);
  moving_ = s.steady && finite_positive(s.step_time_s);
}

std::optional<Finding> StallDetector::check(Instant now) {
  if (reported_ || moving_ || now - last_advance_ < window_) return std::nullopt;
  reported_ = true;
  return ProgressStalled{last_step_, now - last_advance_};
}

Instant StallDetector::next_check() const {
  if (reported_ || moving_ || window_.is_infinite()) return Instant::max();
  return last_advance_ + window_;
}

// ---------------------------------------------------------------- slow steps

void SlowStepDetector::restart(Instant now, std::int64_t step) {
  since_restart_ = 0;
  last_ = 0;
  steady_ = false;
  report_at_.reset();
}

void SlowStepDetector::Counted::erase_one(double x) {
  auto it = counts_.find(x);
  if (--it->second == 0) counts_.erase(it);
  --n_;
}

double SlowStepDetector::baseline() const {
  // The median of the window: the middle value, or the mean of the two middle ones.
  if (upper_.empty()) return 0;
  if (lower_.size() < upper_.size()) return upper_.min();
  return (lower_.max() + upper_.min()) / 2;
}

std::optional<Finding> SlowStepDetector::observe(const StepSample& s, Instant now) {
  ++since_restart_;
  steady_ = s.steady;
  last_ = s.step_time_s;
  if (!finite_positive(s.step_time_s)) {
    report_at_.reset();  // no step time (unknown, or a stopped counter: the stall detector's)
    return std::nullopt;
  }
  const double base = baseline();
  const bool slow = ratio_ > 0 && base > 0 && s.step_time_s > ratio_ * base;
  // Live steps right after a (re)start are slow for reasons of their own (communicators,
  // data loaders); a steady sample already averages them out.
  if (!slow && (s.steady || since_restart_ > 2)) {
    const double x = s.step_time_s;
    if (!lower_.empty() && x <= lower_.max())
      lower_.insert(x);
    else
      upper_.insert(x);
    if (healthy_.size() < kWindow) {
      healthy_.push_back(x);
    } else {
      const double old = healthy_[head_];
      healthy_[head_] = x;
      head_ = (head_ + 1) % kWindow;
      // An equal value in the other half is the same value: either copy will do.
      if (!lower_.empty() && old <= lower_.max())
        lower_.erase_one(old);
      else
        upper_.erase_one(old);
    }
    // Rebalance: the upper half holds the middle value of an odd count.
    while (lower_.size() > upper_.size()) {
      const double v = lower_.max();
      upper_.insert(v);
      lower_.erase_one(v);
    }
    while (upper_.size() > lower_.size() + 1) {
      const double v = upper_.min();
      lower_.insert(v);
      upper_.erase_one(v);
    }
  }
  if (!slow) {
    report_at_.reset();
    return std::nullopt;
  }
  if (!report_at_) report_at_ = now + slow_for_;
  return due(now);
}

std::optional<Finding> SlowStepDetector::due(Instant now) {
  if (!report_at_ || now < *report_at_) return std::nullopt;
  // Report again after another slow_for while the steps stay slow.
  while (*report_at_ <= now) *report_at_ = *report_at_ + slow_for_;
  return StepTimeHigh{last_ / baseline()};
}

std::optional<Finding> SlowStepDetector::check(Instant now) {
  // A per-step stream is judged when its samples arrive: without them the job may be
  // hung, not slow. A steady sample's step time holds until the next one.
  if (!steady_) return std::nullopt;
  return due(now);
}

Instant SlowStepDetector::next_check() const {
  return steady_ && report_at_ ? *report_at_ : Instant::max();
}

// ---------------------------------------------------------------- metrics

std::optional<Finding> NanDetector::observe(const StepSample& s) {
  if (!s.nan || reported_) return std::nullopt;
  reported_ = true;
  return MetricAnomaly{"loss", std::numeric_limits<double>::infinity(), true, s.step};
}

void JumpDetector::restart() {
  loss_ = {};
  grad_ = {};
  reported_ = false;
}

std::optional<Finding> JumpDetector::judge(const char* metric, const std::optional<double>& v,
                                           Mean& m) {
  if (!v || !std::isfinite(*v)) return std::nullopt;
  if (m.samples >= warmup_ && m.value > 0 && *v > ratio_ * m.value)
    return MetricAnomaly{metric, *v / m.value, false};
  m.value = m.samples == 0 ? *v : 0.8 * m.value + 0.2 * *v;
  ++m.samples;
  return std::nullopt;
}

std::optional<Finding> JumpDetector::observe(const StepSample& s) {
  if (reported_ || s.nan) return std::nullopt;
  auto f = judge("loss", s.loss, loss_);
  if (!f) f = judge("grad_norm", s.grad_norm, grad_);
  if (f) reported_ = true;
  return f;
}

// ---------------------------------------------------------------- modules

namespace {

class Realtime final : public Detector {
 public:
  explicit Realtime(const Params& p)
      : stall_(Duration::seconds(p.get("stall_window_s"))),
        slow_(p.get("slow_ratio"), Duration::seconds(p.get("slow_for_s"))),
        jump_(p.get("jump_ratio"), static_cast<int>(p.get("jump_warmup"))),
        alerts_(static_cast<int>(p.get("flap_count")), Duration::seconds(p.get("flap_window_s"))) {
    for (const char* kind : {"gpu", "nic", "host", "switch"})
      inspections_.push_back(
          EnableInspection{kind, Duration::seconds(p.get(std::string("inspect_") + kind + "_s")),
                           "real-time inspection"});
  }
  const ModuleInfo& info() const override { return realtime_detection_info(); }
  std::optional<WatchSteps> watch() const override {
    return WatchSteps{Duration::zero(), "stall, slow-step, NaN and loss-jump detection"};
  }
  void restart(Instant now, std::int64_t step) override {
    stall_.restart(now, step);
    slow_.restart(now, step);
    nan_.restart();
    jump_.restart();
  }
  std::optional<Finding> observe(const StepSample& s, Instant now) override {
    stall_.observe(s, now);
    auto nan = nan_.observe(s);
    auto jump = jump_.observe(s);
    auto slow = slow_.observe(s, now);
    if (nan) return nan;
    if (jump) return jump;
    return slow;
  }
  std::optional<Finding> check(Instant now) override {
    if (auto f = stall_.check(now)) return f;
    return slow_.check(now);
  }
  Instant next_check() const override { return std::min(stall_.next_check(), slow_.next_check()); }
  std::vector<EnableInspection> inspections() const override { return inspections_; }
  bool alert(const InspectionAlert& a, Instant now) override { return alerts_.evicts(a, now); }

 private:
  StallDetector stall_;
  SlowStepDetector slow_;
  NanDetector nan_;
  JumpDetector jump_;
  AlertFilter alerts_;
  std::vector<EnableInspection> inspections_;
};

class TimeoutOnly final : public Detector {
 public:
  const ModuleInfo& info() const override { return timeout_detection_info(); }
  std::optional<WatchSteps> watch() const override { return std::nullopt; }
  void restart(Instant, std::int64_t) override {}
  std::optional<Finding> observe(const StepSample&, Instant) override { return std::nullopt; }
  std::optional<Finding> check(Instant) override { return std::nullopt; }
  Instant next_check() const override { return Instant::max(); }
};

}  // namespace

const ModuleInfo& realtime_detection_info() {
  static const ModuleInfo info{
      ModuleKind::kDetection,
      "realtime",
      "1",
      "stall, slow-step, NaN and loss/grad-norm jump detection on step samples, with real-time "
      "inspections",
      {
          {"stall_window_s", "no progress for this long starts stack aggregation", "s", 600, 1,
           86400},
          {"slow_ratio", "step time above this multiple of normal is an MFU decline", "ratio", 1.2,
           1.01, 100},
          {"slow_for_s", "how long steps must stay slow", "s", 300, 1, 86400},
          {"jump_ratio",
           "a loss or gradient norm above this multiple of its recent mean is an anomaly", "ratio",
           5, 1.01, 1e6},
          {"jump_warmup", "samples after a restart before jumps are judged", "count", 5, 0, 1e6},
          {"inspect_gpu_s", "GPU inspection interval (driver hang, lost GPU, temperature)", "s", 10,
           0.1, 3600},
          {"inspect_nic_s", "NIC inspection interval", "s", 30, 0.1, 3600},
          {"inspect_host_s", "host kernel inspection interval (Xid, OS faults)", "s", 2, 0.1, 3600},
          {"inspect_switch_s", "switch inspection interval", "s", 30, 0.1, 3600},
          {"flap_window_s", "network alerts: window for counting repeats", "s", 300, 1, 86400},
          {"flap_count", "network alerts: evict after this many within the window", "count", 2, 1,
           100},
      },
      // Its stalls and slow steps are what a stack captures stacks for.
      {{Facility::kInspections, Facility::kCaptureStacks}}};
  return info;
}
std::unique_ptr<Detector> make_realtime_detection(const Params& p) {
  return std::make_unique<Realtime>(p);
}
std::unique_ptr<Detector> make_step_detectors(const Params& p) {
  return std::make_unique<Realtime>(p);
}

const ModuleInfo& timeout_detection_info() {
  static const ModuleInfo info{
      ModuleKind::kDetection,
      "timeout",
      "1",
      "process exits and the NCCL collective timeout only: no samples, no inspections",
      {},
      std::vector<Facility>{}};
  return info;
}
std::unique_ptr<Detector> make_timeout_detection(const Params&) {
  return std::make_unique<TimeoutOnly>();
}

}  // namespace faultline::policies
