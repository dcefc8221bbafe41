#include "policies/checkpoint/plans.h"

namespace faultline::policies {

namespace {

// A fixed plan, decided from the parameters when the module is built.
class FixedPlan final : public CheckpointPlanner {
 public:
  FixedPlan(const ModuleInfo& info, SetCheckpointPlan plan) : info_(info), plan_(std::move(plan)) {}
  const ModuleInfo& info() const override { return info_; }
  SetCheckpointPlan plan(const ClusterView&) const override { return plan_; }

 private:
  const ModuleInfo& info_;
  SetCheckpointPlan plan_;
};

}  // namespace

const ModuleInfo& peer_checkpoint_info() {
  static const ModuleInfo info{ModuleKind::kCheckpoint, "peer", "1",
                               "every step in host memory, backup on a peer outside the rank's TP/PP/DP groups"};
  return info;
}
std::unique_ptr<CheckpointPlanner> make_peer_checkpoint(const Params& p) {
  return std::make_unique<FixedPlan>(
      peer_checkpoint_info(),
      SetCheckpointPlan{Duration::zero(), Duration::seconds(p.get("checkpoint_blocking_s")),
                        CheckpointTier::kMemoryWithPeer,
                        "every step to host memory with a backup on a peer outside the rank's groups",
                        Duration::seconds(p.get("remote_checkpoint_interval_s"))});
}

const ModuleInfo& memory_checkpoint_info() {
  static const ModuleInfo info{ModuleKind::kCheckpoint, "memory", "1",
                               "Gemini-style: in memory with a copy on the next machine, periodically"};
  return info;
}
std::unique_ptr<CheckpointPlanner> make_memory_checkpoint(const Params& p) {
  return std::make_unique<FixedPlan>(
      memory_checkpoint_info(),
      SetCheckpointPlan{Duration::seconds(p.get("checkpoint_interval_s")),
                        Duration::seconds(p.get("memory_checkpoint_blocking_s")), CheckpointTier::kMemory,
                        "Gemini-style: to host memory with a copy on the next machine",
                        Duration::seconds(p.get("remote_checkpoint_interval_s"))});
}

const ModuleInfo& remote_checkpoint_info() {
  static const ModuleInfo info{ModuleKind::kCheckpoint, "remote", "1",
                               "Megatron-style: periodic blocking save to remote storage"};
  return info;
}
std::unique_ptr<CheckpointPlanner> make_remote_checkpoint(const Params& p) {
  return std::make_unique<FixedPlan>(
      remote_checkpoint_info(),
      SetCheckpointPlan{Duration::seconds(p.get("checkpoint_interval_s")),
                        Duration::seconds(p.get("remote_checkpoint_write_s")), CheckpointTier::kRemote,
                        "Megatron-style: periodic blocking save to remote storage"});
}

}  // namespace faultline::policies
