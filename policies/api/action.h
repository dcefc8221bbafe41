// What a policy may ask a backend to do.
//
// A closed variant of small plain structs, so actions log, replay and compare as
// values. Every action carries a human-readable reason. The outcome arrives later as
// an Event (MachinesReady, JobStarted, ActionFailed, ...) tagged with the ActionId that
// World::act returned. A backend that cannot do an action answers ActionFailed.
#pragma once

#include <string>
#include <variant>
#include <vector>

#include "policies/api/ids.h"
#include "policies/api/time.h"

namespace faultline {

struct StopJob {
  std::string reason;
};
// Starts the job on the machines now placed in its slots, restoring the newest
// complete checkpoint; JobStarted follows once restore and init are done.
struct StartJob {
  std::string reason;
};
// Removes machines from the job (they go to repair); their slots become empty.
struct EvictMachines {
  MachineSet machines;
  std::string reason;
};
enum class AcquireMode : std::uint8_t {
  kRequeue,     // kill everything, reschedule the whole job (every slot refilled)
  kReschedule,  // cold machines from the scheduler for the empty slots only
  kStandby,     // warm standbys from the pool for the empty slots (shortfall fails)
  kOracle,      // unlimited ready spares, no delay (upper-bound baseline only)
};
// Fills the given slots (empty ones if the list is empty) with machines;
// MachinesReady follows when they are placed and their environment is ready.
struct AcquireMachines {
  AcquireMode mode = AcquireMode::kReschedule;
  std::vector<SlotId> slots;
  std::string reason;
};
enum class CheckpointTier : std::uint8_t { kRemote, kMemory, kMemoryWithPeer };
// How the job checkpoints from now on: every `interval` of training (rounded up to whole
// steps by the backend where steps are real), blocking training for `blocking`.
struct SetCheckpointPlan {
  Duration interval;
  Duration blocking;
  CheckpointTier tier = CheckpointTier::kRemote;
  std::string reason;
};
// Asks for ProgressStalled when no step completes for `stall_window`, and for
// StepTimeHigh when steps take more than `slow_ratio` x the baseline.
struct WatchProgress {
  Duration stall_window = Duration::minutes(10);
  double slow_ratio = 0;  // 0 = off
  std::string reason;
};
// Requests perfect fault knowledge (OracleFault events). Only the simulator grants it,
// and only for the oracle upper bound; live mode answers ActionFailed.
struct EnableOracle {
  std::string reason;
};
struct Note {
  std::string text;
};

using Action = std::variant<StopJob, StartJob, EvictMachines, AcquireMachines, SetCheckpointPlan,
                            WatchProgress, EnableOracle, Note>;

// One line for logs, e.g. "evict [12,13] (pp group of 12 holds all outliers)".
std::string describe(const Action& a);
const char* mode_name(AcquireMode m);
const char* tier_name(CheckpointTier t);

}  // namespace faultline
