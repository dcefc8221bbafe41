#include "policies/builtin.h"

#include "policies/controller.h"
#include "policies/recovery/baselines.h"

namespace faultline::policies {

void register_builtin(Registry& r) {
  r.add(requeue_info(), make_requeue);
  r.add(oracle_info(), make_oracle);
  r.add(byterobust_info(), make_byterobust);
  r.add(reschedule_info(), make_reschedule);
  r.add(failover_bench_info(), make_failover_bench);
}

Registry builtin_registry() {
  Registry r;
  register_builtin(r);
  return r;
}

}  // namespace faultline::policies
