// The `migrate` Recovery module (policies/module.h): migration before a predicted failure
// (TrainMover, arXiv 2412.12636). Evicted slots are refilled from a warm standby pool, as
// `standby` refills them (the same pool parameters); and on a FailureWarning for a machine
// of the training job whose lead time covers the state copy (migrate_min_lead_s), it asks
// for MigrateMachines: the machine's work moves to a warm standby while the job trains, and
// the job pauses only for the swap (migration_pause_s; TrainMover reports about 20 s of
// downtime at 1,024 GPUs, v3 abstract). Without a parked standby it lets the failure come.
#pragma once

#include <memory>

#include "policies/module.h"

namespace faultline::policies {

const ModuleInfo& migrate_recovery_info();
// Requires p to hold the values of the parameters migrate_recovery_info() declares.
std::unique_ptr<Recovery> make_migrate_recovery(const Params& p);

}  // namespace faultline::policies
