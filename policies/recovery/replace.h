// The built-in Recovery modules (policies/module.h), registered in builtin.cc:
//
// - standby: ByteRobust's warm-standby pool (§6), sized as the P99 of
//   Binomial(machines, daily failure probability) unless `standby_pool` says otherwise;
//   evicted slots are refilled from it, the shortfall from the scheduler.
// - lemon: standby's pool, and lemon retirement (AIReSim's threshold removal): a machine
//   the stack evicted on evidence of its own fault lemon_strikes times leaves the fleet
//   instead of coming back from repair to be placed again.
// - scored: standby's pool, and host scoring (AIReSim's host selection by failure
//   history): a machine the stack evicted on evidence of its own fault scored_strikes
//   times is handed out last by the scheduler (AvoidMachines), replacements and standby
//   refills alike, instead of at random; it is never retired.
// - segment: NVLink-domain-aware spares (NVIDIA's resiliency extension "segments", GB200
//   NVL72 racks): each evicted slot is refilled from its own NVLink domain (a standby
//   parked there, else a free tray of its rack, woken like a standby), so a tensor-parallel
//   group wider than a machine stays on NVLink; only a domain with nothing free gets a
//   machine from elsewhere: standby's warm pool (drawn anywhere), then the scheduler.
// - reschedule: cold machines from the scheduler for the evicted slots only.
// - requeue: the whole job is torn down and rescheduled.
//
// Each declares the parameters it reads and is handed only those: standby, lemon, scored
// and segment the pool's (standby_pool, standby_daily_p, standby_quantile), lemon and
// scored their strikes too.
#pragma once

#include <memory>
#include <vector>

#include "policies/module.h"

namespace faultline::policies {

const ModuleInfo& standby_recovery_info();
std::unique_ptr<Recovery> make_standby_recovery(const Params& p);
const ModuleInfo& lemon_recovery_info();
std::unique_ptr<Recovery> make_lemon_recovery(const Params& p);
const ModuleInfo& scored_recovery_info();
std::unique_ptr<Recovery> make_scored_recovery(const Params& p);
const ModuleInfo& segment_recovery_info();
std::unique_ptr<Recovery> make_segment_recovery(const Params& p);
const ModuleInfo& reschedule_recovery_info();
std::unique_ptr<Recovery> make_reschedule_recovery(const Params& p);
const ModuleInfo& requeue_recovery_info();
std::unique_ptr<Recovery> make_requeue_recovery(const Params& p);
// The warm pool's parameters (standby_pool, standby_daily_p, standby_quantile), declared
// alike by every module that keeps one, followed by `own`.
std::vector<ParamSpec> pool_params(std::vector<ParamSpec> own = {});
// The facilities every module that keeps a warm pool may use (the pool, and the
// scheduler's cold machines that refill it and make up a shortfall), plus `own`.
std::vector<Facility> pool_uses(std::vector<Facility> own = {});

}  // namespace faultline::policies
