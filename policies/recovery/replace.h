// The built-in Recovery modules (policies/module.h), registered in builtin.cc:
//
// - standby: ByteRobust's warm-standby pool (§6), sized as the P99 of
//   Binomial(machines, daily failure probability) unless `standby_pool` says otherwise;
//   evicted slots are refilled from it, the shortfall from the scheduler.
// - lemon: standby's pool, and lemon retirement (AIReSim's threshold removal): a machine
//   the stack evicted on evidence of its own fault lemon_strikes times leaves the fleet
//   instead of coming back from repair to be placed again.
// - reschedule: cold machines from the scheduler for the evicted slots only.
// - requeue: the whole job is torn down and rescheduled.
//
// Each reads the stack's parameters it needs (standby: standby_pool, standby_daily_p,
// standby_quantile).
#pragma once

#include <memory>

#include "policies/module.h"

namespace faultline::policies {

const ModuleInfo& standby_recovery_info();
std::unique_ptr<Recovery> make_standby_recovery(const Params& p);
const ModuleInfo& lemon_recovery_info();
std::unique_ptr<Recovery> make_lemon_recovery(const Params& p);
const ModuleInfo& reschedule_recovery_info();
std::unique_ptr<Recovery> make_reschedule_recovery(const Params& p);
const ModuleInfo& requeue_recovery_info();
std::unique_ptr<Recovery> make_requeue_recovery(const Params& p);

}  // namespace faultline::policies
