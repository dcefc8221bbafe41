// The ByteRobust fault-tolerance ladder, composed from the modules (policies/module.h)
// and registered as the `byterobust` stack. ladder.cc keeps the ladder and the order
// of its questions; what the questions need lives in policies/stacks/byterobust/ (incident
// identity, the MFU decline, a held code update) and in the modules.
//
// Flow (docs/domain.md §4): real-time inspection alerts that the detection module judges worth it
// evict at once (a network alert only once it repeats); a crash stops the job and runs the
// stop-time tests its log signature calls for, evicting what fails; if everything passes
// the job is reattempted as is. The same crash again soon after the restart (same
// signature, same machine or rank: escalation by locus) evicts the machine the log keeps
// naming, else escalates to a rollback of the code, then to the localization module
// (dual-phase replay, bisection, ...); a crash elsewhere is a new incident. A stalled job
// is diagnosed by stack aggregation and its outlier parallel group over-evicted (a job
// that stalls again before completing a step after a restart, with no outlier stacks,
// escalates to rollback, then localization); an MFU decline by repeated aggregation
// rounds and the fail-slow module; a NaN by the bit-wise alignment test, then
// localization. At every interruption the stop-verdict module may roll back or end the
// run. No diagnosis loop is unbounded: after max_fruitless_rounds rounds in a row that
// found nothing the stack requeues the job (an MFU decline: stops aggregating until the
// next restart), each fruitless round numbered in the decision log. Evicted machines are
// replaced through the recovery module; code updates are hot updates; the checkpoint
// module plans the saves.
//
// Each module is swapped by name through the stack's choice parameters (detection,
// localization, checkpoint, recovery, failslow, verdict); `faultline policies` lists the
// choices, generated from the module registry it is handed (builtin.cc hands it the
// program's: the built-in modules and those plugins registered).
#pragma once

#include <memory>

#include "policies/api/policy.h"

namespace faultline::policies {

class ModuleRegistry;

// The stack's parameters (params.cc): its own knobs, a choice among `modules` of each kind
// and the parameters those modules declare.
PolicyInfo byterobust_info(const ModuleRegistry& modules);
// Builds the stack from `modules`, which outlives it; `p` resolved against
// byterobust_info(modules).
std::unique_ptr<Policy> make_byterobust(const ModuleRegistry& modules, const Params& p);
// The same with byterobust_info(modules) computed once by the caller (the registration's
// factory), shared by every stack it builds.
std::unique_ptr<Policy> make_byterobust(const ModuleRegistry& modules,
                                        std::shared_ptr<const PolicyInfo> info, const Params& p);

}  // namespace faultline::policies
