#include "policies/recovery/flash.h"

#include <utility>

#include "policies/recovery/replace.h"

namespace faultline::policies {

namespace {

// standby's replacement, with in-place restarts: what FlashRecovery changes is how the
// job restarts, not where replacements come from.
class Flash final : public Recovery {
 public:
  explicit Flash(std::unique_ptr<Recovery> pool) : pool_(std::move(pool)) {}
  const ModuleInfo& info() const override { return flash_recovery_info(); }
  std::optional<SetStandbyPool> start(const ClusterView& view) const override {
    return pool_->start(view);
  }
  AcquireMachines replace(const std::vector<SlotId>& slots, const std::string& why,
                          Mechanism credit) const override {
    return pool_->replace(slots, why, credit);
  }
  Strike struck(MachineId m) override { return pool_->struck(m); }
  MachineSet avoided() const override { return pool_->avoided(); }
  bool restarts_in_place() const override { return true; }

 private:
  const std::unique_ptr<Recovery> pool_;
};

}  // namespace

const ModuleInfo& flash_recovery_info() {
  static const ModuleInfo info{ModuleKind::kRecovery,
                               "flash",
                               "1",
                               "FlashRecovery (arXiv 2509.03047): standby's warm pool, and "
                               "in-place restarts: only replaced ranks re-initialise, from a "
                               "data-parallel peer's memory; at most one step lost",
                               pool_params(),
                               pool_uses({Facility::kInPlaceRestart})};
  return info;
}

std::unique_ptr<Recovery> make_flash_recovery(const Params& p) {
  return std::make_unique<Flash>(make_standby_recovery(p));
}

}  // namespace faultline::policies
