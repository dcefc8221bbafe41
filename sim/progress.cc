#include "sim/progress.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

namespace faultline::sim {

namespace {
std::int64_t scale(std::int64_t ns, double f) {
  return static_cast<std::int64_t>(std::llround(ns * f));
}
}  // namespace

void ProgressModel::set_plan(std::int64_t interval_ns, std::int64_t blocking_ns) {
  interval_ = interval_ns;
  blocking_ = interval_ns > 0 ? blocking_ns : 0;
}

void ProgressModel::record(std::int64_t start, std::int64_t end, double rate) {
  if (!record_ || end <= start) return;
  if (!segments_.empty() && segments_.back().end == start && segments_.back().rate == rate) {
    segments_.back().end = end;
  } else {
    segments_.push_back({start, end, rate});
  }
}

// The stretches that make no progress come first, in order: the warm-up after a start, a
// pause around a slow machine (degraded), a quorum change (missing_replicas). Each takes from
// the front of [at, at + dt); false when nothing is left to run.
bool ProgressModel::run_stops(std::int64_t& at, std::int64_t& dt, Breakdown& b) {
  const std::pair<std::int64_t*, std::int64_t Breakdown::*> stops[] = {
      {&warmup_left_, &Breakdown::warmup},
      {&pause_left_, &Breakdown::degraded},
      {&quorum_left_, &Breakdown::missing_replicas}};
  for (const auto& [left, bucket] : stops) {
    if (*left <= 0) continue;
    const std::int64_t use = std::min(*left, dt);
    *left -= use;
    b.*bucket += use;
    at += use;
    dt -= use;
    if (dt == 0) return false;
  }
  return true;
}

void ProgressModel::run(std::int64_t at, std::int64_t dt, Breakdown& b) {
  if (dt <= 0 || !run_stops(at, dt, b)) return;
  const double rate = speed();  // the slow machines' rate and the missing replicas' share
  if (rate <= 0) {              // no replica's step counts: nothing is trained
    b.missing_replicas += dt;
    return;
  }
  std::int64_t slow = 0;  // wall time the rate took: degraded and missing_replicas
  const std::int64_t start = at;
  std::int64_t left = dt;
  std::int64_t progress_gain = 0;
  // Finish an open checkpoint block first.
  if (in_ckpt_ > 0) {
    const std::int64_t need = blocking_ - in_ckpt_;
    const std::int64_t use = std::min(need, left);
    in_ckpt_ += use;
    b.checkpoint += use;
    left -= use;
    if (in_ckpt_ >= blocking_) {
      committed_ += seg_progress_;
      seg_progress_ = 0;
      in_ckpt_ = 0;
      ++checkpoints_;
    }
  }
  if (left > 0 && interval_ <= 0) {
    const std::int64_t gain = scale(left, rate);
    seg_progress_ += gain;
    progress_gain += gain;
    slow += left - gain;
    left = 0;
  }
  while (left > 0) {
    // Wall time to finish the current training segment at this rate.
    // (A plan set mid-segment with a shorter interval makes the save due at once.)
    const std::int64_t need_prog = std::max<std::int64_t>(0, interval_ - seg_progress_);
    const std::int64_t need_wall = static_cast<std::int64_t>(std::ceil(need_prog / rate));
    if (left < need_wall) {
      const std::int64_t gain = std::min(need_prog, scale(left, rate));
      seg_progress_ += gain;
      progress_gain += gain;
      slow += left - gain;
      left = 0;
      break;
    }
    // Complete this segment, then as many whole cycles as fit, in closed form.
    seg_progress_ += need_prog;
    progress_gain += need_prog;
    slow += need_wall - need_prog;
    left -= need_wall;
    const std::int64_t cycle_wall =
        static_cast<std::int64_t>(std::ceil(interval_ / rate)) + blocking_;
    if (left < blocking_) {
      in_ckpt_ = left;
      b.checkpoint += left;
      left = 0;
      if (blocking_ == 0) {
        committed_ += seg_progress_;
        seg_progress_ = 0;
        ++checkpoints_;
      }
      break;
    }
    left -= blocking_;
    b.checkpoint += blocking_;
    committed_ += seg_progress_;
    seg_progress_ = 0;
    ++checkpoints_;
    if (cycle_wall > 0 && left >= cycle_wall) {
      const std::int64_t k = left / cycle_wall;
      const std::int64_t wall_train = static_cast<std::int64_t>(std::ceil(interval_ / rate));
      committed_ += k * interval_;
      progress_gain += k * interval_;
      b.checkpoint += k * blocking_;
      slow += k * (wall_train - interval_);
      checkpoints_ += k;
      left -= k * cycle_wall;
    }
    if (blocking_ == 0 && left > 0 && seg_progress_ == 0) continue;
  }
  split_slow(slow, b);
  // Progress is provisionally productive; lose() takes back what was not checkpointed.
  b.productive += progress_gain;
  if (record_ && progress_gain > 0)
    record(start, start + dt, static_cast<double>(progress_gain) / dt);
}

// The wall time the rate took from progress: the missing replicas' share of it (1 - f of
// the speed r f lost, r the slow machines' rate and f the replica factor) to
// missing_replicas, the rest to degraded.
void ProgressModel::split_slow(std::int64_t slow, Breakdown& b) const {
  if (replica_ >= 1 || slow <= 0) {
    b.degraded += slow;
    return;
  }
  const double missing = rate_ * (1 - replica_) / (1 - rate_ * replica_);
  const std::int64_t m = scale(slow, missing);
  b.missing_replicas += m;
  b.degraded += slow - m;
}

std::int64_t ProgressModel::wall_to_gain(std::int64_t need) const {
  if (need <= 0) return 0;
  const double rate = speed();
  if (rate <= 0) return std::numeric_limits<std::int64_t>::max();
  auto wall = [&](std::int64_t progress) {
    return static_cast<std::int64_t>(std::ceil(progress / rate));
  };
  std::int64_t w = warmup_left_ + pause_left_ + quorum_left_;
  std::int64_t seg = seg_progress_;
  if (in_ckpt_ > 0) {  // the open checkpoint block ends first, committing the segment
    w += blocking_ - in_ckpt_;
    seg = 0;
  }
  if (interval_ <= 0) return std::max<std::int64_t>(1, w + wall(need));
  const std::int64_t first = std::max<std::int64_t>(0, interval_ - seg);
  if (need <= first) return std::max<std::int64_t>(1, w + wall(need));
  w += wall(first) + blocking_;
  need -= first;
  const std::int64_t k = (need - 1) / interval_;  // whole cycles before the one that ends it
  w += k * (wall(interval_) + blocking_);
  need -= k * interval_;
  return w + wall(need);
}

void ProgressModel::trim_segments(std::int64_t progress_ns) {
  while (record_ && progress_ns > 0 && !segments_.empty()) {
    auto& s = segments_.back();
    const double have = (s.end - s.start) * s.rate;
    if (have <= progress_ns) {
      progress_ns -= static_cast<std::int64_t>(have);
      segments_.pop_back();
    } else {
      s.end -= static_cast<std::int64_t>(progress_ns / s.rate);
      progress_ns = 0;
    }
  }
}

void ProgressModel::lose(Breakdown& b) {
  b.productive -= seg_progress_;
  b.recompute += seg_progress_;
  trim_segments(seg_progress_);
  seg_progress_ = 0;
  in_ckpt_ = 0;
  warmup_left_ = 0;
  pause_left_ = 0;
  quorum_left_ = 0;
}

void ProgressModel::restore_pending(std::int64_t ns, std::int64_t at, Breakdown& b) {
  if (ns <= 0) return;
  seg_progress_ += ns;
  b.recompute -= ns;
  b.productive += ns;
  // For timelines the kept progress reappears when it is restored (lose() trimmed the
  // segments it was trained in).
  record(at, at + 1, static_cast<double>(ns));
}

void ProgressModel::roll_back_committed(std::int64_t to, Breakdown& b) {
  if (to >= committed_) return;
  const std::int64_t lost = committed_ - to;
  b.productive -= lost;
  b.recompute += lost;
  trim_segments(lost);
  committed_ = to;
}

void ProgressModel::keep(Breakdown&) {}  // pending progress already counts as productive

}  // namespace faultline::sim
