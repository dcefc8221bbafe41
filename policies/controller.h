// The ByteRobust fault-tolerance state machine, composed from the modules
// (detection, diagnosis, localization, recovery, checkpoint) and registered as the
// `byterobust` stack.
//
// Flow (DOMAIN §4): real-time inspection alerts evict at once (network alerts only
// after `flap_count` alerts within `flap_window_s`); a crash stops the job and runs the
// stop-time tests its log signature calls for, evicting what fails; if everything
// passes the job is reattempted as is. The same crash again soon after the restart (same
// signature, same machine or rank: escalation by locus) evicts the machine the log keeps
// naming, else escalates to a rollback of the code, then to dual-phase replay (or
// bisection); a crash elsewhere is a new incident. A stalled job is diagnosed by stack
// aggregation and its outlier parallel group over-evicted (a job that stalls again before
// completing a step after a restart, with no outlier stacks, escalates to rollback, then
// replay); an MFU decline by repeated aggregation rounds; a NaN by the bit-wise alignment
// test, then replay. No diagnosis loop is unbounded: after max_fruitless_rounds rounds in
// a row that found nothing the stack requeues the job (an MFU decline: stops aggregating
// until the next restart), each fruitless round numbered in the decisions log. Evicted machines are
// replaced from the warm-standby pool; code updates are hot updates. Checkpoints are taken every
// step in memory with a peer backup.
//
// Each module can be swapped by name through the stack's choice parameters: detection
// (realtime | timeout), localization (replay | bisection | stress), checkpoint (peer |
// memory | remote) and recovery (standby | reschedule | requeue).
#pragma once

#include <memory>

#include "policies/api/policy.h"

namespace faultline::policies {

const PolicyInfo& byterobust_info();
std::unique_ptr<Policy> make_byterobust(const Params& p);

const PolicyInfo& reschedule_info();
std::unique_ptr<Policy> make_reschedule(const Params& p);

}  // namespace faultline::policies
