// The built-in FailSlowPolicy modules (policies/module.h), registered in builtin.cc:
//
// - evict: ByteRobust's answer to an MFU decline: the located straggler's parallel group
//   is over-evicted at once (checkpoint-restart on replacements).
// - ski_rental: Greyhound/FALCON's (ATC'25) multi-level mitigation, chosen by the
//   deterministic ski-rental rule. Level 0 tolerates the straggler, 1 rebalances
//   micro-batches away from its data-parallel replica, 2 also reconfigures its pipeline
//   (layers off its stage), 3 evicts it. Each level i loses a share l_i of the job's
//   throughput (predicted from the job's shape and the measured slowdown with
//   straggler_rate) and costs C_i to enter (failslow_*_cost_s: the job's pause, or the
//   restart). The ladder stays at level i, entered at T_i, until the extra loss it pays
//   over the next useful level j, (l_i - l_j)(t - T_i), reaches what j costs, C_j: so it
//   moves at the break-even t* = T_i + C_j / (l_i - l_j), never paying more than twice
//   what hindsight would (a transient straggler gone early costs little; a persistent one
//   reaches the level that stops the loss). Level 0's clock starts when the detector
//   reported the slow steps; a level's own clock when its pause is over. A level the
//   backend refuses (live mode cannot re-lay a running job) is left out from then on: with
//   eviction the only move left, the ladder is the classic two-option ski rental,
//   tolerating until C_3 / l_0 and then evicting.
#pragma once

#include <memory>

#include "policies/module.h"

namespace faultline::policies {

const ModuleInfo& evict_failslow_info();
std::unique_ptr<FailSlowPolicy> make_evict_failslow(const Params& p);
const ModuleInfo& ski_rental_failslow_info();
std::unique_ptr<FailSlowPolicy> make_ski_rental_failslow(const Params& p);

}  // namespace faultline::policies
