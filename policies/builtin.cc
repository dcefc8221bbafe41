#include "policies/builtin.h"

#include <memory>
#include <stdexcept>

#include "policies/checkpoint/plans.h"
#include "policies/detection/detectors.h"
#include "policies/failslow/ladders.h"
#include "policies/localization/localizers.h"
#include "policies/recovery/flash.h"
#include "policies/recovery/migration.h"
#include "policies/recovery/replace.h"
#include "policies/recovery/replica_drop.h"
#include "policies/stacks/baselines.h"
#include "policies/stacks/byterobust/ladder.h"
#include "policies/stacks/reschedule.h"
#include "policies/verdict/verdicts.h"

namespace faultline::policies {

void register_builtin(Registry& r, const ModuleRegistry& modules) {
  r.add(requeue_info(), make_requeue);
  r.add(oracle_info(), make_oracle);
  auto info = std::make_shared<const PolicyInfo>(byterobust_info(modules));
  r.add(*info, [&modules, info](const Params& p) { return make_byterobust(modules, info, p); });
  r.add(reschedule_info(), make_reschedule);
  r.add(failover_bench_info(), make_failover_bench);
}

Registry builtin_registry(const ModuleRegistry& modules) {
  Registry r;
  register_builtin(r, modules);
  return r;
}

Registry builtin_registry() { return builtin_registry(modules()); }

void register_builtin_modules(ModuleRegistry& m) {
  // The first of a kind is a stack's default choice.
  m.add(realtime_detection_info(), make_realtime_detection);
  m.add(timeout_detection_info(), make_timeout_detection);
#define FAULTLINE_ADD_LOCALIZER(name) m.add(name##_info(), make_##name);
  FAULTLINE_BUILTIN_LOCALIZERS(FAULTLINE_ADD_LOCALIZER)
#undef FAULTLINE_ADD_LOCALIZER
  m.add(peer_checkpoint_info(), make_peer_checkpoint);
  m.add(memory_checkpoint_info(), make_memory_checkpoint);
  m.add(remote_checkpoint_info(), make_remote_checkpoint);
  m.add(daly_checkpoint_info(), make_daly_checkpoint);
  m.add(standby_recovery_info(), make_standby_recovery);
  m.add(reschedule_recovery_info(), make_reschedule_recovery);
  m.add(requeue_recovery_info(), make_requeue_recovery);
  m.add(lemon_recovery_info(), make_lemon_recovery);
  m.add(scored_recovery_info(), make_scored_recovery);
  m.add(segment_recovery_info(), make_segment_recovery);
  m.add(replica_drop_recovery_info(), make_replica_drop_recovery);
  m.add(flash_recovery_info(), make_flash_recovery);
  m.add(migrate_recovery_info(), make_migrate_recovery);
  m.add(evict_failslow_info(), make_evict_failslow);
  m.add(ski_rental_failslow_info(), make_ski_rental_failslow);
  m.add(identical_verdict_info(), make_identical_verdict);
  m.add(no_progress_verdict_info(), make_no_progress_verdict);
}

namespace {
ModuleRegistry& process_modules() {
  static ModuleRegistry m = [] {
    ModuleRegistry r;
    register_builtin_modules(r);
    return r;
  }();
  return m;
}
bool g_frozen = false;
}  // namespace

const ModuleRegistry& modules() {
  g_frozen = true;
  return process_modules();
}

ModuleRegistry& modules_for_registration() {
  if (g_frozen)
    throw std::logic_error(
        "policy modules are registered before the first stack is built or described");
  return process_modules();
}

}  // namespace faultline::policies
