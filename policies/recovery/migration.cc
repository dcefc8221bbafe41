#include "policies/recovery/migration.h"

#include <sstream>

#include "policies/recovery/replace.h"

namespace faultline::policies {

namespace {

// Replacement as `standby` does it (delegated), plus migration on a warning.
class Migrate final : public Recovery {
 public:
  explicit Migrate(const Params& p)
      : standby_(make_standby_recovery(p)),
        pause_(Duration::seconds(p.get("migration_pause_s"))),
        min_lead_(Duration::seconds(p.get("migrate_min_lead_s"))) {}
  const ModuleInfo& info() const override { return migrate_recovery_info(); }
  std::optional<SetStandbyPool> start(const ClusterView& view) const override {
    return standby_->start(view);
  }
  AcquireMachines replace(const std::vector<SlotId>& slots, const std::string& why,
                          Mechanism credit) const override {
    return standby_->replace(slots, why, credit);
  }

  std::optional<MigrateMachines> migrate(const FailureWarning& w,
                                         const ClusterView& view) override {
    if (w.machine < 0 || w.machine >= view.machine_count() || view.slot_of(w.machine) < 0)
      return std::nullopt;  // not in the job: nothing of it to move
    // Too short a warning: the copy would not end before the failure, which then strikes a
    // job paused for nothing.
    if (w.lead < min_lead_) return std::nullopt;
    // No parked standby: the pool is spent on replacements; the failure is handled when it
    // comes (a migration would be refused).
    if (view.standby().empty()) return std::nullopt;
    std::ostringstream why;
    why << "failure predicted on " << w.machine << " in " << w.lead.to_seconds() << " s (" << w.kind
        << ": " << w.detail << ")";
    return MigrateMachines{{w.machine}, why.str(), Mechanism::kNone, pause_};
  }

 private:
  std::unique_ptr<Recovery> standby_;
  Duration pause_;
  Duration min_lead_;
};

}  // namespace

const ModuleInfo& migrate_recovery_info() {
  static const ModuleInfo info{
      ModuleKind::kRecovery,
      "migrate",
      "1",
      "warm standbys, and migration to one before a predicted failure (TrainMover, "
      "arXiv 2412.12636): the job pauses only for the swap",
      pool_params({{"migration_pause_s",
                    "the job's pause while a migrated machine's standby takes its place "
                    "(TrainMover: about 20 s at 1,024 GPUs) (recovery=migrate)",
                    "s", 20, 0, 3600},
                   {"migrate_min_lead_s",
                    "migrate only on a warning at least this far ahead of the failure (the "
                    "state copy must end first) (recovery=migrate)",
                    "s", 60, 0, 1e6}}),
      pool_uses({Facility::kMigration})};
  return info;
}

std::unique_ptr<Recovery> make_migrate_recovery(const Params& p) {
  return std::make_unique<Migrate>(p);
}

}  // namespace faultline::policies
