#include "policies/recovery/replace.h"

#include "policies/recovery/standby.h"

namespace faultline::policies {

namespace {

// Replacement by one acquisition mode; the standby pool is sized at the start.
class Replace final : public Recovery {
 public:
  Replace(const ModuleInfo& info, AcquireMode mode, int pool, double daily_p, double quantile)
      : info_(info), mode_(mode), pool_(pool), daily_p_(daily_p), quantile_(quantile) {}
  const ModuleInfo& info() const override { return info_; }

  std::optional<SetStandbyPool> start(const ClusterView& view) const override {
    if (mode_ != AcquireMode::kStandby) return std::nullopt;
    const int pool = pool_ >= 0 ? pool_ : binomial_quantile(view.spec().machines, daily_p_, quantile_);
    return SetStandbyPool{pool, "P99 of Binomial(machines, daily failure probability)"};
  }

  AcquireMachines replace(const std::vector<SlotId>& slots, const std::string& why,
                          Mechanism credit) const override {
    // A requeue refills every slot: it names none.
    return AcquireMachines{mode_, mode_ == AcquireMode::kRequeue ? std::vector<SlotId>{} : slots, why, credit};
  }

 private:
  const ModuleInfo& info_;
  AcquireMode mode_;
  int pool_;
  double daily_p_, quantile_;
};

}  // namespace

const ModuleInfo& standby_recovery_info() {
  static const ModuleInfo info{ModuleKind::kRecovery, "standby", "1",
                               "warm standbys (P99 of Binomial(machines, p)); shortfall from the scheduler"};
  return info;
}
std::unique_ptr<Recovery> make_standby_recovery(const Params& p) {
  return std::make_unique<Replace>(standby_recovery_info(), AcquireMode::kStandby,
                                   static_cast<int>(p.get("standby_pool")), p.get("standby_daily_p"),
                                   p.get("standby_quantile"));
}

const ModuleInfo& reschedule_recovery_info() {
  static const ModuleInfo info{ModuleKind::kRecovery, "reschedule", "1", "cold machines for the evicted slots"};
  return info;
}
std::unique_ptr<Recovery> make_reschedule_recovery(const Params&) {
  return std::make_unique<Replace>(reschedule_recovery_info(), AcquireMode::kReschedule, 0, 0, 0);
}

const ModuleInfo& requeue_recovery_info() {
  static const ModuleInfo info{ModuleKind::kRecovery, "requeue", "1", "requeue the whole job"};
  return info;
}
std::unique_ptr<Recovery> make_requeue_recovery(const Params&) {
  return std::make_unique<Replace>(requeue_recovery_info(), AcquireMode::kRequeue, 0, 0, 0);
}

}  // namespace faultline::policies
