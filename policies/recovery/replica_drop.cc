#include "policies/recovery/replica_drop.h"

#include "policies/recovery/replace.h"

namespace faultline::policies {

namespace {

class ReplicaDrop final : public Recovery {
 public:
  explicit ReplicaDrop(const Params& p)
      : standby_(make_standby_recovery(p)),
        groups_{static_cast<int>(p.get("min_replicas")),
                Duration::seconds(p.get("quorum_change_s")),
                Duration::seconds(p.get("replica_timeout_s")),
                "fault-tolerant data parallelism (FT-HSDP, torchft): a failed replica drops out, "
                "the others train on"} {}
  const ModuleInfo& info() const override { return replica_drop_recovery_info(); }
  std::optional<SetStandbyPool> start(const ClusterView& view) const override {
    return standby_->start(view);
  }
  AcquireMachines replace(const std::vector<SlotId>& slots, const std::string& why,
                          Mechanism credit) const override {
    return standby_->replace(slots, why, credit);
  }
  std::optional<EnableReplicaGroups> replica_groups(const ClusterView&) const override {
    return groups_;
  }

 private:
  std::unique_ptr<Recovery> standby_;  // replacements come from the warm pool
  EnableReplicaGroups groups_;
};

}  // namespace

const ModuleInfo& replica_drop_recovery_info() {
  static const ModuleInfo info{
      ModuleKind::kRecovery,
      "replica-drop",
      "1",
      "fault-tolerant data parallelism (FT-HSDP, torchft): a failed replica drops out while the "
      "others train, and rejoins from a live peer; stop-and-restart below min_replicas",
      pool_params({
          {"min_replicas",
           "replica groups: the fewest data-parallel replicas the job trains with; a failure "
           "that would leave fewer stops the job (recovery=replica-drop)",
           "count", 1, 1, 1 << 24},
          {"quorum_change_s",
           "replica groups: the pause of every replica at each quorum change, a replica "
           "dropped or rejoined (recovery=replica-drop)",
           "s", 10, 0, 3600},
          {"replica_timeout_s",
           "replica groups: how long the quorum waits in a collective for a hung replica before "
           "it drops it (recovery=replica-drop)",
           "s", 60, 1, 86400},
      }),
      pool_uses({Facility::kReplicaGroups})};
  return info;
}

std::unique_ptr<Recovery> make_replica_drop_recovery(const Params& p) {
  return std::make_unique<ReplicaDrop>(p);
}

}  // namespace faultline::policies
