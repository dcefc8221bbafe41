// The `flash` Recovery module (policies/module.h), registered in builtin.cc: FlashRecovery's
// scale-independent restart (arXiv 2509.03047) on top of standby's warm pool.
//
// Evicted slots are refilled as `standby` refills them (warm standbys, the shortfall from
// the scheduler), and the stack's restarts after a failure are in place
// (StartJob::in_place): only the replaced ranks re-initialise and fetch their state from a
// data-parallel peer's memory, the survivors keep their processes, state and communicators,
// and at most the step in flight is lost. So the restart does not grow with the job: the
// backend charges job.inplace_init_s plus job.init_per_machine_s per restarted machine,
// instead of job.init_s plus job.init_per_machine_s per machine of the job and a restore
// of the last checkpoint. It declares the pool's parameters (standby_pool, standby_daily_p,
// standby_quantile) and nothing else.
#pragma once

#include <memory>

#include "policies/module.h"

namespace faultline::policies {

const ModuleInfo& flash_recovery_info();
std::unique_ptr<Recovery> make_flash_recovery(const Params& p);

}  // namespace faultline::policies
