#include "policies/recovery/replace.h"

#include <algorithm>
#include <unordered_map>

#include "policies/recovery/standby.h"

namespace faultline::policies {

namespace {

// Replacement by one acquisition mode; the standby pool is sized at the start.
class Replace final : public Recovery {
 public:
  Replace(const ModuleInfo& info, AcquireMode mode, int pool, double daily_p, double quantile,
          int lemon_strikes = 0, int avoid_strikes = 0, bool same_domain = false)
      : info_(info),
        mode_(mode),
        pool_(pool),
        daily_p_(daily_p),
        quantile_(quantile),
        lemon_(lemon_strikes),
        avoid_(avoid_strikes),
        same_domain_(same_domain) {}
  const ModuleInfo& info() const override { return info_; }
  // Lemon retirement retires at the lemon_-th strike; host scoring avoids from the
  // avoid_-th on (each machine once).
  Strike struck(MachineId m) override {
    const int strikes = ++strikes_[m];
    Strike s{lemon_ > 0 && strikes >= lemon_, false};
    if (avoid_ > 0 && strikes >= avoid_ &&
        std::find(avoided_.begin(), avoided_.end(), m) == avoided_.end()) {
      avoided_.push_back(m);
      s.avoid = true;
    }
    return s;
  }
  MachineSet avoided() const override { return avoided_; }

  std::optional<SetStandbyPool> start(const ClusterView& view) const override {
    if (mode_ != AcquireMode::kStandby) return std::nullopt;
    const int pool =
        pool_ >= 0 ? pool_ : binomial_quantile(view.spec().machines, daily_p_, quantile_);
    return SetStandbyPool{pool, "P99 of Binomial(machines, daily failure probability)"};
  }

  AcquireMachines replace(const std::vector<SlotId>& slots, const std::string& why,
                          Mechanism credit) const override {
    // A requeue refills every slot: it names none.
    return AcquireMachines{mode_, mode_ == AcquireMode::kRequeue ? std::vector<SlotId>{} : slots,
                           why, credit, same_domain_};
  }

 private:
  const ModuleInfo& info_;
  AcquireMode mode_;
  int pool_;
  double daily_p_, quantile_;
  int lemon_;         // retire at this many strikes (0: never)
  int avoid_;         // hand out last from this many strikes (0: never)
  bool same_domain_;  // replacements from each slot's own NVLink domain first
  std::unordered_map<MachineId, int> strikes_;  // evictions on evidence, by machine
  MachineSet avoided_;                          // in the order they were first avoided
};

}  // namespace

std::vector<Facility> pool_uses(std::vector<Facility> own) {
  // The pool's refills and a shortfall come from the scheduler, cold.
  std::vector<Facility> uses = {Facility::kStandby, Facility::kReschedule};
  uses.insert(uses.end(), own.begin(), own.end());
  return uses;
}

// The warm pool's knobs, declared alike by every module that keeps one (plus its own).
std::vector<ParamSpec> pool_params(std::vector<ParamSpec> own) {
  std::vector<ParamSpec> params = {
      {"standby_pool", "warm standby machines; -1 = P99 of Binomial(machines, p)", "count", -1, -1,
       100000},
      {"standby_daily_p", "a machine's daily failure probability (pool sizing)", "ratio", 1.2e-3, 0,
       1},
      {"standby_quantile", "pool sizing quantile", "ratio", 0.99, 0.5, 0.999999},
  };
  params.insert(params.end(), own.begin(), own.end());
  return params;
}

const ModuleInfo& standby_recovery_info() {
  static const ModuleInfo info{
      ModuleKind::kRecovery,
      "standby",
      "1",
      "warm standbys (P99 of Binomial(machines, p)); shortfall from the scheduler",
      pool_params(),
      pool_uses()};
  return info;
}
std::unique_ptr<Recovery> make_standby_recovery(const Params& p) {
  return std::make_unique<Replace>(standby_recovery_info(), AcquireMode::kStandby,
                                   static_cast<int>(p.get("standby_pool")),
                                   p.get("standby_daily_p"), p.get("standby_quantile"));
}

const ModuleInfo& lemon_recovery_info() {
  static const ModuleInfo info{ModuleKind::kRecovery,
                               "lemon",
                               "1",
                               "warm standbys, and machines evicted on evidence lemon_strikes "
                               "times retired for good (AIReSim)",
                               pool_params({{"lemon_strikes",
                                             "retire a machine the stack evicted on evidence of "
                                             "its own fault this many times (recovery=lemon)",
                                             "count", 2, 1, 1000}}),
                               pool_uses()};
  return info;
}
std::unique_ptr<Recovery> make_lemon_recovery(const Params& p) {
  return std::make_unique<Replace>(lemon_recovery_info(), AcquireMode::kStandby,
                                   static_cast<int>(p.get("standby_pool")),
                                   p.get("standby_daily_p"), p.get("standby_quantile"),
                                   static_cast<int>(p.get("lemon_strikes")));
}

const ModuleInfo& scored_recovery_info() {
  static const ModuleInfo info{ModuleKind::kRecovery,
                               "scored",
                               "1",
                               "warm standbys, and machines evicted on evidence scored_strikes "
                               "times handed out last by the scheduler "
                               "(AIReSim host scoring)",
                               pool_params({{"scored_strikes",
                                             "the scheduler hands out last a machine the stack "
                                             "evicted on evidence of its own fault this many "
                                             "times (recovery=scored)",
                                             "count", 2, 1, 1000}}),
                               pool_uses()};
  return info;
}
std::unique_ptr<Recovery> make_scored_recovery(const Params& p) {
  return std::make_unique<Replace>(scored_recovery_info(), AcquireMode::kStandby,
                                   static_cast<int>(p.get("standby_pool")),
                                   p.get("standby_daily_p"), p.get("standby_quantile"), 0,
                                   static_cast<int>(p.get("scored_strikes")));
}

const ModuleInfo& segment_recovery_info() {
  static const ModuleInfo info{
      ModuleKind::kRecovery,
      "segment",
      "1",
      "NVLink-domain-aware spares (NVIDIA resiliency extension segments): each slot refilled from "
      "its own domain's "
      "free trays, so TP groups stay on NVLink; standby's warm pool for the rest",
      pool_params(),
      pool_uses()};
  return info;
}
std::unique_ptr<Recovery> make_segment_recovery(const Params& p) {
  return std::make_unique<Replace>(segment_recovery_info(), AcquireMode::kStandby,
                                   static_cast<int>(p.get("standby_pool")),
                                   p.get("standby_daily_p"), p.get("standby_quantile"), 0, 0, true);
}

const ModuleInfo& reschedule_recovery_info() {
  static const ModuleInfo info{
      ModuleKind::kRecovery,    "reschedule", "1", "cold machines for the evicted slots", {},
      {{Facility::kReschedule}}};
  return info;
}
std::unique_ptr<Recovery> make_reschedule_recovery(const Params&) {
  return std::make_unique<Replace>(reschedule_recovery_info(), AcquireMode::kReschedule, 0, 0, 0);
}

const ModuleInfo& requeue_recovery_info() {
  static const ModuleInfo info{ModuleKind::kRecovery,   "requeue", "1",
                               "requeue the whole job", {},        {{Facility::kRequeue}}};
  return info;
}
std::unique_ptr<Recovery> make_requeue_recovery(const Params&) {
  return std::make_unique<Replace>(requeue_recovery_info(), AcquireMode::kRequeue, 0, 0, 0);
}

}  // namespace faultline::policies
