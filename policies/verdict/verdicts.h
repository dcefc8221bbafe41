// The built-in StopVerdict modules (policies/module.h), registered in builtin.cc:
//
// - identical: ByteRobust's escalation of identical incidents (its §4; docs/domain.md §4): the
//   same NaN at the same step, or the same crash after the same step on one machine after
//   another, identical_incident_limit times in a row ends the run; the time before, the code
//   is rolled back. It counts nothing else: a recurrence that names no machine, or changes
//   its step or its signature, never stops the run.
// - no_progress: NVIDIA's resiliency extension's no-progress stop (its launcher ends a job
//   whose failing cycles complete no new checkpoint, instead of restarting up to
//   --max-restarts): no_progress_limit runs in a row that get no further than the furthest
//   step any run reached end the run, whatever failed; the run before, the code is rolled
//   back. The stack sees steps, not checkpoint markers, so a run that got further but failed
//   before its next save counts as progress: the stop comes later than NVRx's, never
//   sooner. It ignores identical incidents as such (they make no progress either, and so
//   reach the limit).
#pragma once

#include <memory>

#include "policies/module.h"

namespace faultline::policies {

const ModuleInfo& identical_verdict_info();
std::unique_ptr<StopVerdict> make_identical_verdict(const Params& p);
const ModuleInfo& no_progress_verdict_info();
std::unique_ptr<StopVerdict> make_no_progress_verdict(const Params& p);

// The ladder both share: stop at `count` >= `limit` (limit > 0), roll back at limit - 1
// (limit > 1), else carry on.
Verdict verdict_at(int count, int limit);

}  // namespace faultline::policies
