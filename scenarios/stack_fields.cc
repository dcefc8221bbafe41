#include "scenarios/stack_fields.h"

#include <algorithm>

namespace faultline::scenarios {

namespace {

using F = Facility;
// The probe kinds whose default recall follows a category's alert kind (default_recall):
// every stop-time test of one machine but the stress test.
const std::vector<Facility> kMachineTests = {F::kProbeGpuDiag, F::kProbeIntraAllToAll,
                                             F::kProbeInterAllGather, F::kProbeBitwise};

}  // namespace

// Where the simulator reads each one, and on which action's path, beside it.
// lint: table
const std::vector<StackField>& stack_fields() {
  static const std::vector<StackField> table = [] {
    std::vector<StackField> t = {
        // The pool's size before any SetStandbyPool (sim_world.cc run(), refill_pool); only
        // AcquireMachines standby and MigrateMachines take a machine from it.
        {"cluster.standby_machines", {F::kStandby}},
        // AcquireMachines requeue (sim_actions.cc).
        {"cluster.scheduler.requeue_base_s", {F::kRequeue}},
        {"cluster.scheduler.requeue_per_machine_s", {F::kRequeue}},
        // AcquireMachines reschedule, a standby request's shortfall and the pool's refills.
        {"cluster.scheduler.reschedule_base_s", {F::kReschedule, F::kStandby}},
        {"cluster.scheduler.reschedule_per_machine_s", {F::kReschedule, F::kStandby}},
        // machine_free and refill_pool: only while a pool is kept.
        {"cluster.scheduler.standby_refill", {F::kStandby}},
        // start_job: only an in-place restart (StartJob::in_place).
        {"job.inplace_init_s", {F::kInPlaceRestart}},
        // apply(SetCheckpointPlan): only a memory+peer plan with blocking.
        {"job.checkpoint_mfu_loss", {F::kPeerCheckpoint}},
        // update_rate with replica groups (sim_replicas.cc).
        {"job.partial_replica_rate", {F::kReplicaGroups}},
        // apply(EndRun).
        {"job.on_call_fix_h", {F::kEndRun}},
        // alert_inspections; default_recall of the machine tests; a FailureWarning's kind.
        {"faults.categories[].alert",
         [] {
           std::vector<Facility> v = kMachineTests;
           v.push_back(F::kInspections);
           v.push_back(F::kMigration);
           return v;
         }()},
        {"faults.categories[].alert_coverage", {F::kInspections}},  // alert_inspections
        // attributed(): the machine a crash log or a failed start names.
        {"faults.categories[].attribution", {F::kCrashCulprit}},
        {"faults.categories[].misattribution", {F::kCrashCulprit}},
        {"faults.categories[].recall.replay", {F::kReplay}},  // the replay's outcome
        // A warning is sent to the stack, which only a migrating one acts on; the fault
        // strikes lead_time_s later either way.
        {"faults.categories[].warning", {F::kMigration}},
        {"faults.categories[].replica_confined", {F::kReplicaGroups}},  // drop_replica
        // apply(RunProbe) and the standby pool's refills (a refill runs the GPU check).
        {"diagnosis.gpu_diag_s", {F::kProbeGpuDiag, F::kStandby}},
        {"diagnosis.intra_all_to_all_s", {F::kProbeIntraAllToAll}},
        {"diagnosis.inter_all_gather_bytes", {F::kProbeInterAllGather}},
        {"diagnosis.group_setup_s", {F::kProbeGroups}},
        {"diagnosis.bitwise_s", {F::kProbeBitwise}},
        {"diagnosis.stress_s", {F::kProbeStress}},
        {"diagnosis.capture_s", {F::kCaptureStacks}},
        {"diagnosis.replay_s", {F::kReplay}},
        {"diagnosis.rebalance_s", {F::kMitigation}},  // apply(MitigateSlowdown)
        {"diagnosis.reconfigure_s", {F::kMitigation}},
        // false_positive(): the bit-wise test's default is 0, not this rate.
        {"diagnosis.false_positive_rate",
         {F::kProbeGpuDiag, F::kProbeIntraAllToAll, F::kProbeInterAllGather, F::kProbeStress}},
        // AcquireMachines standby and MigrateMachines: the standbys wake.
        {"diagnosis.standby_wake_s", {F::kStandby}},
    };
    // A test's own recall and false-positive rate: read when that test runs. Each beside
    // the line of its kind (after recall.replay, after false_positive_rate).
    const std::pair<const char*, Facility> tests[] = {{"gpu_diag", F::kProbeGpuDiag},
                                                      {"intra_all_to_all", F::kProbeIntraAllToAll},
                                                      {"inter_all_gather", F::kProbeInterAllGather},
                                                      {"bitwise", F::kProbeBitwise},
                                                      {"stress", F::kProbeStress}};
    for (const char* kind : {"faults.categories[].recall.", "diagnosis.false_positive."}) {
      const std::string after =
          kind[0] == 'f' ? "faults.categories[].recall.replay" : "diagnosis.false_positive_rate";
      auto at = std::find_if(t.begin(), t.end(), [&](const auto& x) { return x.path == after; });
      for (const auto& [test, f] : tests) at = t.insert(at + 1, {std::string(kind) + test, {f}});
    }
    return t;
  }();
  return table;
}

std::vector<Facility> facilities_reading(const std::string& path) {
  for (const auto& f : stack_fields())
    if (f.path == path) return f.read_by;
  return {};
}

std::string when_used(const PolicyInfo& info, const std::vector<Facility>& fs) {
  if (!info.uses) return "always";
  std::vector<std::pair<std::string, std::string>> conds;  // choice, "a|b|c"
  for (const FacilityUse& u : *info.uses) {
    if (std::find(fs.begin(), fs.end(), u.facility) == fs.end()) continue;
    if (u.when.empty()) return "always";
    for (const std::string& c : u.when) {
      const std::string choice = c.substr(0, c.find('='));
      const std::string module = c.substr(c.find('=') + 1);
      auto it = std::find_if(conds.begin(), conds.end(),
                             [&](const auto& x) { return x.first == choice; });
      if (it == conds.end())
        conds.emplace_back(choice, module);
      else if (("|" + it->second + "|").find("|" + module + "|") == std::string::npos)
        it->second += "|" + module;
    }
  }
  std::string out;
  for (const auto& [choice, modules] : conds)
    out += (out.empty() ? "" : " or ") + choice + "=" + modules;
  return out;
}

namespace {

using nlohmann::json;

// Every value at schema path `path` ("faults.categories[].recall.stress") under `j`, whose
// JSON path is `at`, in document order.
void values_at(const json& j, const std::string& path, const std::string& at,
               const StackField& field, std::vector<SetField>& out) {
  if (path.empty()) {
    out.push_back({at, &field, &j});
    return;
  }
  const auto dot = path.find('.');
  std::string key = path.substr(0, dot);
  const std::string rest = dot == std::string::npos ? std::string() : path.substr(dot + 1);
  const bool each = key.size() > 2 && key.compare(key.size() - 2, 2, "[]") == 0;
  if (each) key.resize(key.size() - 2);
  if (!j.is_object() || !j.contains(key)) return;
  const json& v = j[key];
  if (!each) return values_at(v, rest, at + "." + key, field, out);
  if (!v.is_array()) return;
  for (std::size_t i = 0; i < v.size(); ++i)
    values_at(v[i], rest, at + "." + key + "[" + std::to_string(i) + "]", field, out);
}

}  // namespace

std::vector<SetField> fields_set(const json& doc) {
  std::vector<SetField> out;
  for (const StackField& f : stack_fields()) values_at(doc, f.path, "$", f, out);
  return out;
}

json::json_pointer pointer_of(const std::string& at) {
  std::string p;
  for (std::size_t i = at.rfind("$", 0) == 0 ? 1 : 0; i < at.size(); ++i) {
    if (at[i] == ']') continue;
    p += at[i] == '.' || at[i] == '[' ? '/' : at[i];
  }
  return json::json_pointer(p);
}

std::vector<std::string> drop_unread_fields(json& doc, const PolicyInfo& info,
                                            const Params& values) {
  std::vector<std::string> dropped;
  for (const SetField& s : fields_set(doc)) {
    bool read = false;
    for (Facility f : s.field->read_by) read |= may_use(info, f, values);
    if (!read) dropped.push_back(s.at);
  }
  // Erased after the walk, which holds pointers into the document.
  for (const std::string& at : dropped) {
    const json::json_pointer ptr = pointer_of(at);
    doc[ptr.parent_pointer()].erase(ptr.back());
  }
  return dropped;
}

}  // namespace faultline::scenarios
