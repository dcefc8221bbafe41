// The two reference stacks a comparison is made against: `requeue`, common practice, below,
// and `oracle`, the upper bound, above. No stack or module in the tree beats the oracle on a
// shipped scenario (tests/sim/bounds_test.cc checks it on every one).
//
// `requeue` is common practice (docs/domain.md §6): crashes are seen when the processes exit,
// hangs when the job's collective timeout kills it; every incident kills and requeues
// the whole job, which restarts from the last periodic checkpoint in remote storage.
//
// `oracle` is told every fault the instant it strikes, and at a failure warning whether it
// is true (EnableOracle: OracleFault), and takes for each fault the best recovery the job
// allows, at the most favourable cost any module could be given:
// - every step checkpointed in memory with a peer copy and remotely, blocking nothing (no
//   checkpoint module saves newer or cheaper);
// - a job with data-parallel replicas runs replica groups (EnableReplicaGroups) with a
//   quorum of one, no pause at a quorum change and no timeout for a hang: a fault confined
//   to a replica drops it, its broken machine is swapped for a ready spare at once and it
//   rejoins (replica-drop's parameters go down to these; its detection and refills are
//   slower);
// - a fault that stops the job is met by swapping broken machines for unlimited ready
//   spares and restarting at once, in place where the job has peers to restore from
//   (StartJob::in_place: what flash does, without detection, diagnosis or a standby's wake),
//   a code fault by a rollback, a data fault by paging the on-call (EndRun);
// - a slow machine, and a machine a true warning names, moves to a ready spare while the
//   job trains, without a pause (MigrateMachines: migrate's pause goes down to 0 s, and it
//   also moves machines on false warnings; ski_rental's levels all cost more than a free
//   move).
// Where a bound is not exact: a scenario whose in-place restart costs more than a whole-job
// one (job.inplace_init_s above job.init_s) or whose partial_replica_rate makes a dropped
// replica dearer than a restart would let `standby` beat it; no shipped scenario does.
#pragma once

#include <memory>

#include "policies/api/policy.h"

namespace faultline::policies {

const PolicyInfo& requeue_info();
std::unique_ptr<Policy> make_requeue(const Params& p);

// `failover-bench`: an experiment, not a policy. At `at_s` it evicts the machines of
// slots 0..k-1 and refills them with the chosen mode, once; the run's failover time is
// then that acquisition plus the restart. Used to reproduce ByteRobust Fig. 12.
const PolicyInfo& failover_bench_info();
std::unique_ptr<Policy> make_failover_bench(const Params& p);

const PolicyInfo& oracle_info();
std::unique_ptr<Policy> make_oracle(const Params& p);

}  // namespace faultline::policies
