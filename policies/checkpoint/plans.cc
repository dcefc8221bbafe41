#include "policies/checkpoint/plans.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace faultline::policies {

namespace {

// Knobs several planners read, declared alike by each (policies/module.h).
ParamSpec remote_write_param() {
  return {"remote_checkpoint_write_s",
          "blocking time of a save to remote storage (checkpoint=remote or daly; Table 8: 6.77 s)",
          "s",
          6.77,
          0,
          1e5};
}
ParamSpec remote_interval_param() {
  return {"remote_checkpoint_interval_s",
          "remote copy interval (used if both memory copies are lost)",
          "s",
          3600,
          1,
          1e7};
}
// Sub-second intervals are real at small scale (a live run of 0.2 s steps that saves every
// few steps): `sim replay` maps a run's interval as it was measured.
ParamSpec interval_param() {
  return {"checkpoint_interval_s",
          "training time between saves (checkpoint=memory or remote)",
          "s",
          1800,
          1e-3,
          1e7};
}

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

// Remote saves at Daly's optimum for the interruptions seen so far.
class DalyPlan final : public CheckpointPlanner {
 public:
  explicit DalyPlan(const Params& p)
      : write_s_(p.get("remote_checkpoint_write_s")),
        prior_s_(p.get("daly_prior_mtbf_h") * 3600),
        weight_(p.get("daly_prior_weight")),
        min_s_(p.get("daly_min_interval_s")),
        max_s_(std::max(p.get("daly_min_interval_s"), p.get("daly_max_interval_s"))) {}
  const ModuleInfo& info() const override { return daly_checkpoint_info(); }
  SetCheckpointPlan plan(const ClusterView&) const override { return make(0, 0); }
  std::optional<SetCheckpointPlan> replan(int interruptions, Duration running,
                                          const ClusterView&) override {
    return make(interruptions, running.to_seconds());
  }

 private:
  SetCheckpointPlan make(int interruptions, double running_s) const {
    const double mtbi = observed_mtbi_s(interruptions, running_s, prior_s_, weight_);
    const double interval = std::clamp(daly_optimum_s(write_s_, mtbi), min_s_, max_s_);
    char why[160];
    std::snprintf(why, sizeof why,
                  "Daly: save every %.0f s for %d interruptions in %.1f h running (MTBI %.0f s)",
                  interval, interruptions, running_s / 3600, mtbi);
    return SetCheckpointPlan{Duration::seconds(interval), Duration::seconds(write_s_),
                             CheckpointTier::kRemote, why};
  }
  double write_s_, prior_s_, weight_, min_s_, max_s_;
};

}  // namespace

double daly_optimum_s(double write_s, double mtbi_s) {
  if (write_s <= 0) return 0;
  if (write_s >= 2 * mtbi_s) return mtbi_s;
  const double x = write_s / (2 * mtbi_s);
  return std::sqrt(2 * write_s * mtbi_s) * (1 + std::sqrt(x) / 3 + x / 9) - write_s;
}

double observed_mtbi_s(int interruptions, double running_s, double prior_mtbi_s,
                       double prior_weight) {
  return (prior_weight * prior_mtbi_s + std::max(0.0, running_s)) /
         (prior_weight + std::max(0, interruptions));
}

const ModuleInfo& daly_checkpoint_info() {
  static const ModuleInfo info{
      ModuleKind::kCheckpoint,
      "daly",
      "1",
      "remote saves at Daly's optimum, re-planned at every interruption from those seen so far",
      {
          {"daly_prior_mtbf_h",
           "prior mean time between interruptions, before any is seen (checkpoint=daly)", "h", 4,
           1e-3, 1e5},
          {"daly_prior_weight", "how many interruptions the prior is worth (checkpoint=daly)",
           "count", 1, 1e-3, 1e4},
          {"daly_min_interval_s", "shortest interval the planner sets (checkpoint=daly)", "s", 30,
           1e-3, 1e7},
          {"daly_max_interval_s", "longest interval the planner sets (checkpoint=daly)", "s", 21600,
           1e-3, 1e7},
          remote_write_param(),
      },
      std::vector<Facility>{}};
  return info;
}
std::unique_ptr<CheckpointPlanner> make_daly_checkpoint(const Params& p) {
  return std::make_unique<DalyPlan>(p);
}

const ModuleInfo& peer_checkpoint_info() {
  static const ModuleInfo info{
      ModuleKind::kCheckpoint,
      "peer",
      "1",
      "every step in host memory, backup on a peer outside the rank's TP/PP/DP groups",
      {{"checkpoint_blocking_s", "blocking time of an every-step in-memory save", "s", 0.02, 0,
        3600},
       remote_interval_param()},
      {{Facility::kPeerCheckpoint}}};
  return info;
}
std::unique_ptr<CheckpointPlanner> make_peer_checkpoint(const Params& p) {
  return std::make_unique<FixedPlan>(
      peer_checkpoint_info(),
      SetCheckpointPlan{
          Duration::zero(), Duration::seconds(p.get("checkpoint_blocking_s")),
          CheckpointTier::kMemoryWithPeer,
          "every step to host memory with a backup on a peer outside the rank's groups",
          Duration::seconds(p.get("remote_checkpoint_interval_s"))});
}

const ModuleInfo& memory_checkpoint_info() {
  static const ModuleInfo info{
      ModuleKind::kCheckpoint,
      "memory",
      "1",
      "Gemini-style: in memory with a copy on the next machine, periodically",
      {interval_param(),
       {"memory_checkpoint_blocking_s",
        "blocking time of an in-memory save (checkpoint=memory; Table 8: 1.84 s)", "s", 1.84, 0,
        3600},
       remote_interval_param()},
      std::vector<Facility>{}};
  return info;
}
std::unique_ptr<CheckpointPlanner> make_memory_checkpoint(const Params& p) {
  return std::make_unique<FixedPlan>(
      memory_checkpoint_info(),
      SetCheckpointPlan{Duration::seconds(p.get("checkpoint_interval_s")),
                        Duration::seconds(p.get("memory_checkpoint_blocking_s")),
                        CheckpointTier::kMemory,
                        "Gemini-style: to host memory with a copy on the next machine",
                        Duration::seconds(p.get("remote_checkpoint_interval_s"))});
}

const ModuleInfo& remote_checkpoint_info() {
  static const ModuleInfo info{ModuleKind::kCheckpoint,
                               "remote",
                               "1",
                               "Megatron-style: periodic blocking save to remote storage",
                               {interval_param(), remote_write_param()},
                               std::vector<Facility>{}};
  return info;
}
std::unique_ptr<CheckpointPlanner> make_remote_checkpoint(const Params& p) {
  return std::make_unique<FixedPlan>(
      remote_checkpoint_info(),
      SetCheckpointPlan{Duration::seconds(p.get("checkpoint_interval_s")),
                        Duration::seconds(p.get("remote_checkpoint_write_s")),
                        CheckpointTier::kRemote,
                        "Megatron-style: periodic blocking save to remote storage"});
}

}  // namespace faultline::policies
