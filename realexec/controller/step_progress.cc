#include "realexec/controller/step_progress.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "traces/stats.h"

namespace faultline::live {

void StepProgress::resume(std::int64_t last_step, std::vector<double> healthy_step_times) {
  last_step_ = last_step;
  healthy_ = std::move(healthy_step_times);
}

void StepProgress::started(Instant t) {
  steps_since_start_ = 0;
  pending_ = PendingSample{};
  pending_.since = t;
}

void StepProgress::advance(std::int64_t step, Instant t) {
  last_step_ = step;
  last_progress_at_ = t;
  ++steps_since_start_;
}

// Healthy step times, for the ETTR accounting's nominal step (not for detection, which is the
// policy's): past the first steps of a run and not far above the median so far.
void StepProgress::add_step_time(double step_time_s) {
  if (std::isfinite(step_time_s) && step_time_s > 0 && steps_since_start_ > 2 &&
      (healthy_.empty() || step_time_s <= kHealthyStep * traces::median(healthy_))) {
    healthy_.push_back(step_time_s);
    if (healthy_.size() > kHealthyKept) healthy_.erase(healthy_.begin());
  }
}

double StepProgress::step_time_s(double nominal_s) const {
  return healthy_.empty() ? nominal_s : traces::median(healthy_);
}

StepProgress::Bound StepProgress::believable(std::int64_t floor, double nominal_s,
                                             Instant t) const {
  Bound b;
  b.base = std::max({last_step_, floor, std::int64_t{0}});
  double step_s = nominal_s;
  if (!healthy_.empty()) step_s = std::min(step_s, traces::median(healthy_));
  b.since_s = (t - last_progress_at_).to_seconds();
  b.most = static_cast<double>(b.base) + kStepSlack +
           kStepSpeedup * std::max(0.0, b.since_s) / std::max(step_s, 1e-6);
  return b;
}

// Observations for the policy's detection module, at the cadence it asked for: the steps
// since the last sample, their mean step time, the latest finite loss and gradient norm, and
// whether any of them was NaN.
std::optional<StepSample> StepProgress::sample(std::int64_t step, double step_time_s,
                                               std::optional<double> loss,
                                               std::optional<double> grad_norm, bool nan,
                                               Instant t) {
  if (!watch_) return std::nullopt;
  pending_.steps += 1;
  if (std::isfinite(step_time_s) && step_time_s > 0) pending_.time_s += step_time_s;
  pending_.nan |= nan;
  if (loss) pending_.loss = *loss;
  if (grad_norm) pending_.grad_norm = *grad_norm;
  if (!pending_.nan && watch_->every.ns > 0 && t - pending_.since < watch_->every)
    return std::nullopt;
  StepSample out;
  out.step = step;
  out.step_time_s = pending_.time_s / static_cast<double>(pending_.steps);
  out.loss = pending_.loss;
  out.grad_norm = pending_.grad_norm;
  out.nan = pending_.nan;
  pending_ = PendingSample{};
  pending_.since = t;
  return out;
}

}  // namespace faultline::live
