// Replica drop and rejoin (fault-tolerant data parallelism: Meta's FT-HSDP, arXiv
// 2602.00277, and torchft) as a recovery module of the byterobust stack.
//
// The job runs its data-parallel replicas as groups that fail apart (EnableReplicaGroups):
// a rank failure confined to one replica drops that replica from the quorum while the
// others train on with a smaller global batch; the stack evicts the machine the failure
// names, refills its slot from the warm standbys as `standby` does, and the replica rejoins
// at a step boundary with the model and optimizer state of a live peer (RejoinReplica).
// Below min_replicas, and for every fault that reaches all replicas (the code, the data, a
// job-wide fault, a NaN through the all-reduce), the job stops and restarts as under
// `standby`.
#pragma once

#include <memory>

#include "policies/module.h"

namespace faultline::policies {

const ModuleInfo& replica_drop_recovery_info();
std::unique_ptr<Recovery> make_replica_drop_recovery(const Params& p);

}  // namespace faultline::policies
