// Migration in live mode (MigrateMachines, recovery=migrate) on the job library's replica
// groups: the Migrations part (migrations.h) keeps the migration under way and its steps; and
// the operator's failure warning that asks for it (`faultline live inject --fault warn`).
#include "realexec/controller/live_world.h"
#include "traces/config.h"

namespace faultline::live {

void LiveWorld::warn(MachineId m, double lead_s) {
  const std::string lead = traces::json_brief(lead_s);
  record_fault(m, "warn", lead, false);
  deliver(FailureWarning{m, "operator", Duration::seconds(lead_s),
                         "faultline live inject --fault warn: a failure in " + lead + " s"});
}

void LiveWorld::act_on(ActionId id, const MigrateMachines& a, Instant t) {
  migrations_.start(id, a, t);
}

}  // namespace faultline::live
