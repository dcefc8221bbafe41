// What SimWorld keeps of the policy's standing requests and of the questions it asked and
// is still waiting on (plain state; sim_actions.cc sets it, the symptom model reads it).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "policies/api/action.h"

namespace faultline::sim {

// Standing requests: the checkpoint plan in force, the oracle, step samples, inspections.
struct PolicySettings {
  CheckpointTier tier = CheckpointTier::kRemote;
  // The plan in force blocks for job.checkpoint_mfu_loss x its interval, above its own
  // blocking (Attributed::mfu_checkpoint).
  bool mfu_blocking = false;
  std::int64_t remote_interval = Duration::hours(1).ns;  // between remote checkpoints
  bool oracle = false;
  bool watch_steps = false;                     // the policy asked for StepSamples
  std::map<std::string, Duration> inspections;  // enabled inspections, by name
};

// Questions under way: tests and replays kept (moved from their action) until they answer.
struct PendingDiagnoses {
  std::map<ActionId, RunProbe> probes;
  std::map<ActionId, std::vector<double>> group_seconds;  // a grouped probe's timings
  std::map<ActionId, RunReplay> replays;
};

}  // namespace faultline::sim
