// Two reference policy stacks that bracket what any real policy can reach.
//
// `requeue` is common practice (DOMAIN §6): crashes are seen when the processes exit,
// hangs when the job's collective timeout kills it; every incident kills and requeues
// the whole job, which restarts from the last periodic checkpoint in remote storage.
// `oracle` is the upper bound: it is told every fault the instant it happens (EnableOracle),
// swaps broken machines for unlimited ready spares and checkpoints every step in memory
// with a peer copy, so only restore, init and at most one step are lost.
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
