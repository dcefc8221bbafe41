#include "policies/failslow/ladders.h"

#include <algorithm>
#include <array>

namespace faultline::policies {

namespace {

class EvictAtOnce final : public FailSlowPolicy {
 public:
  const ModuleInfo& info() const override { return evict_failslow_info(); }
  SlowdownLevel located(SlotId, MachineId, double, Instant, Instant, const ClusterView&) override {
    return SlowdownLevel::kEvict;
  }
  Instant next_check() const override { return Instant::max(); }
  std::optional<SlowdownLevel> check(Instant) override { return std::nullopt; }
  bool recovered(double) override { return false; }
};

class SkiRental final : public FailSlowPolicy {
 public:
  explicit SkiRental(const Params& p)
      : cost_{0, p.get("failslow_rebalance_cost_s"), p.get("failslow_reconfigure_cost_s"),
              p.get("failslow_restart_cost_s")} {}
  const ModuleInfo& info() const override { return ski_rental_failslow_info(); }

  SlowdownLevel located(SlotId, MachineId machine, double ratio, Instant since, Instant now,
                        const ClusterView& view) override {
    if (machine == machine_ && stopped_at_ != Instant::max()) {
      // The same straggler after a restart: resume, counting the time already spent at
      // this level (its rent is paid), the workaround applied again from now.
      const Duration spent = std::max(Duration::zero(), stopped_at_ - entered_);
      stopped_at_ = Instant::max();
      entered_ = (level_ == 0 ? since : now + Duration::seconds(cost_[level_])) - spent;
      plan();
      if (now >= next_) return advance(now);
      return static_cast<SlowdownLevel>(level_);
    }
    const double f = std::max(1.0, ratio);
    for (int i = 0; i < 3; ++i) loss_[i] = 1 - straggler_rate(view.spec(), f, i);
    loss_[3] = 0;
    machine_ = machine;
    stopped_at_ = Instant::max();
    level_ = 0;
    entered_ = since;
    plan();
    if (now >= next_) return advance(now);
    return SlowdownLevel::kTolerate;
  }
  void refused(SlowdownLevel level) override {
    const int l = static_cast<int>(level);
    if (l <= 0 || l >= 3) return;  // tolerating and evicting are always possible
    usable_[l] = false;
    if (level_ == l) {
      level_ = before_;
      entered_ = before_entered_;
    }
    plan();
  }
  void stopped(Instant now) override {
    if (machine_ != kNoMachine && stopped_at_ == Instant::max()) stopped_at_ = now;
  }
  Instant next_check() const override { return next_; }
  std::optional<SlowdownLevel> check(Instant now) override {
    if (next_ == Instant::max() || now < next_) return std::nullopt;
    return advance(now);
  }
  bool recovered(double ratio) override {
    if (machine_ == kNoMachine || level_ >= 3) return false;
    const double expected = 1 / (1 - loss_[level_]);
    if (ratio >= (1 + expected) / 2) return false;
    machine_ = kNoMachine;
    return true;
  }

 private:
  // The next level that loses less than this one, and when paying its cost breaks even.
  void plan() {
    next_ = Instant::max();
    for (int j = level_ + 1; j <= 3; ++j)
      if (usable_[j] && loss_[j] < loss_[level_]) {
        target_ = j;
        next_ = entered_ + Duration::seconds(cost_[j] / (loss_[level_] - loss_[j]));
        return;
      }
  }
  SlowdownLevel advance(Instant now) {
    before_ = level_;
    before_entered_ = entered_;
    level_ = target_;
    entered_ = now + Duration::seconds(cost_[level_]);  // its pause first
    if (level_ < 3) {
      plan();
    } else {
      next_ = Instant::max();
      machine_ = kNoMachine;  // evicted: a straggler in its slot later is another machine
    }
    return static_cast<SlowdownLevel>(level_);
  }
  std::array<double, 4> cost_;
  std::array<double, 4> loss_{};
  int level_ = 0, target_ = 0;
  int before_ = 0;  // the level before the last move, and when it was entered
  Instant before_entered_{};
  std::array<bool, 4> usable_{true, true, true, true};  // levels the backend has not refused
  MachineId machine_ = kNoMachine;                      // the straggler tracked
  Instant stopped_at_ = Instant::max();  // when the job stopped under it (max: running)
  Instant entered_{};
  Instant next_ = Instant::max();
};

}  // namespace

const ModuleInfo& evict_failslow_info() {
  static const ModuleInfo info{ModuleKind::kFailSlow,
                               "evict",
                               "1",
                               "over-evict the straggler's parallel group at once (ByteRobust)",
                               {},
                               std::vector<Facility>{}};
  return info;
}
std::unique_ptr<FailSlowPolicy> make_evict_failslow(const Params&) {
  return std::make_unique<EvictAtOnce>();
}

const ModuleInfo& ski_rental_failslow_info() {
  static const ModuleInfo info{
      ModuleKind::kFailSlow,
      "ski_rental",
      "1",
      "Greyhound/FALCON ladder: tolerate, rebalance, reconfigure, evict, each at the ski-rental "
      "break-even",
      {
          {"failslow_rebalance_cost_s",
           "what rebalancing micro-batches costs the job (its pause; failslow=ski_rental)", "s", 30,
           0, 1e6},
          {"failslow_reconfigure_cost_s",
           "what reconfiguring the straggler's pipeline costs the job (its pause; "
           "failslow=ski_rental)",
           "s", 180, 0, 1e6},
          {"failslow_restart_cost_s",
           "what evicting the straggler costs the job: the restart, warm-up and lost steps "
           "(failslow=ski_rental)",
           "s", 1200, 0, 1e7},
      },
      {{Facility::kMitigation}}};
  return info;
}
std::unique_ptr<FailSlowPolicy> make_ski_rental_failslow(const Params& p) {
  return std::make_unique<SkiRental>(p);
}

}  // namespace faultline::policies
