// The repair pipeline (repair_pipeline.h): a machine taken out of the job is checked
// (gpu_diag, then the bit-wise test) before it rejoins the pool, or retired.
#include "realexec/controller/repair_pipeline.h"

#include <algorithm>

#include "realexec/controller/live_world_internal.h"
#include "traces/config.h"

namespace faultline::live {

using nlohmann::json;
using world_detail::kRequestTimeoutS;

void RepairPipeline::agent_back(MachineId m) {
  if (j_.cluster.slot_of(m) < 0 && !in_pool(m) && !is_retired(m)) {
    if (queue_.agent_back(m, j_.now()))
      schedule(m, Duration::seconds(j_.config.repair.check_after_s));
  }
}

bool RepairPipeline::is_retired(MachineId m) const {
  const auto& r = j_.journal.state().retired;
  return std::find(r.begin(), r.end(), m) != r.end();
}

bool RepairPipeline::in_pool(MachineId m) const {
  const auto& sb = j_.cluster.standby();
  return std::find(sb.begin(), sb.end(), m) != sb.end();
}

void RepairPipeline::retire(MachineId m, const std::string& why) {
  auto& s = j_.journal.state();
  if (!is_retired(m)) s.retired.push_back(m);
  queue_.forget(m);
  j_.note(j_.config.machine(m).name + " retired: " + why +
          "; only an operator's repair returns it");
}

void RepairPipeline::take_out(MachineId m) {
  auto& s = j_.journal.state();
  const int strikes = ++s.strikes[m];
  if (j_.config.repair.retire_after > 0 && strikes >= j_.config.repair.retire_after) {
    retire(m, "taken out of the job " + std::to_string(strikes) + " times (repair.retire_after = " +
                  std::to_string(j_.config.repair.retire_after) + ")");
    return;
  }
  queue_.take_out(m, j_.now());
  schedule(m, Duration::seconds(j_.config.repair.check_after_s));
}

void RepairPipeline::schedule(MachineId m, Duration after) {
  queue_.schedule(m, after, [this, m] { run_check(m); });
}

void RepairPipeline::run_check(MachineId m) {
  const RepairQueue::Repair* r = queue_.find(m);
  if (!r || r->running) return;
  if (j_.cluster.slot_of(m) >= 0 || in_pool(m) || is_retired(m)) {
    queue_.forget(m);
    return;
  }
  if (!j_.link.connected(m)) return;  // checked when its agent is back (on_agent_connected)
  queue_.begin_check(m);
  const Duration deadline = Duration::seconds(60);
  // Whatever still runs there dies first: a machine is checked, and handed out again, only
  // without old ranks on it.
  j_.requests.send(m, json{{"type", "kill"}}, Duration::seconds(kRequestTimeoutS),
                   [this, m, deadline](const AgentReply& killed) {
                     if (!killed.ok)
                       return repair_failed(
                           m, "its old ranks were not killed (" + killed.detail + ")");
                     probe_repaired(m, deadline);
                   });
}

// gpu_diag, then the bit-wise test; a machine that passes both (and raised no alert since it
// was taken out) is back in the standby pool.
void RepairPipeline::probe_repaired(MachineId m, Duration deadline) {
  j_.probe(ProbeKind::kGpuDiag, {m}, deadline,
           [this, m, deadline](const MachineSet& failed, bool, const std::string& details) {
             if (!failed.empty()) return repair_failed(m, "gpu_diag failed" + details);
             j_.probe(ProbeKind::kBitwise, {m}, deadline,
                      [this, m](const MachineSet& failed2, bool, const std::string& details2) {
                        if (!failed2.empty())
                          return repair_failed(m, "bit-wise test failed" + details2);
                        const RepairQueue::Repair* r = queue_.find(m);
                        if (!r) return;
                        if (queue_.alerted_since_taken_out(m))
                          return repair_failed(
                              m, "it raised an inspection alert since it was taken out");
                        const int checks = r->checks;
                        queue_.forget(m);
                        if (j_.cluster.slot_of(m) >= 0 || in_pool(m) || is_retired(m)) return;
                        j_.cluster.set_health(m, Health::kHealthy);
                        j_.cluster.add_standby(m);
                        j_.note(j_.config.machine(m).name +
                                " passed its repair check (gpu_diag, bit-wise" +
                                (checks > 1 ? ", check " + std::to_string(checks) : std::string()) +
                                "); back in the standby pool");
                        j_.save();
                        j_.back_in_pool();
                      });
           });
}

void RepairPipeline::repair_failed(MachineId m, const std::string& why) {
  const RepairQueue::Repair* r = queue_.find(m);
  if (!r) return;
  if (!queue_.check_failed(m, j_.config.repair.max_checks, j_.now())) {  // left to an operator
    j_.note(j_.config.machine(m).name + " failed its repair check " + std::to_string(r->checks) +
            " times (" + why + "); left to an operator: faultline live inject CONFIG --machine " +
            j_.config.machine(m).name + " --fault repair");
    return;
  }
  j_.note(j_.config.machine(m).name + " failed its repair check (" + why + "); next check in " +
          traces::json_brief(j_.config.repair.retry_after_s) + " s");
  schedule(m, Duration::seconds(j_.config.repair.retry_after_s));
}

RepairPipeline::MachineState RepairPipeline::state(MachineId m) const {
  if (j_.cluster.slot_of(m) >= 0) return MachineState::kJob;
  if (in_pool(m)) return MachineState::kStandby;
  if (is_retired(m)) return MachineState::kRetired;
  if (const RepairQueue::Repair* r = queue_.find(m))
    return r->given_up  ? MachineState::kLeftToOperator
           : r->running ? MachineState::kRepairCheck
                        : MachineState::kAwaitingRepair;
  return MachineState::kOut;
}

}  // namespace faultline::live
