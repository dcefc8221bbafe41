#include "scenarios/stack_fields.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "scenarios/scenario.h"
#include "scenarios/scenario_reader.h"

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

// ---------------------------------------------------------------- fields a scenario sets

namespace {

// A stack and the values of its parameters: what decides which facilities it may use.
struct StackReading {
  const PolicyInfo* info = nullptr;
  Params values;
  bool may_use_any(const std::vector<Facility>& fs) const {
    for (Facility f : fs)
      if (may_use(*info, f, values)) return true;
    return false;
  }
};

// The stack the scenario file itself names, with its own parameters, when it differs from
// the one that runs (--set policy.stack, sim compare's other stacks): a field the file
// wrote for it describes the environment for the stack it was written for. None when the
// file names no registered stack or its parameters do not resolve.
std::optional<StackReading> file_stack(const json& original, const Registry& registry,
                                       const Scenario& sc) {
  const json* pj =
      original.is_object() && original.contains("policy") ? &original["policy"] : nullptr;
  if (!pj || !pj->is_object() || !pj->contains("stack") || !(*pj)["stack"].is_string())
    return std::nullopt;
  StackReading r;
  r.info = registry.find((*pj)["stack"].get<std::string>());
  if (!r.info) return std::nullopt;
  ParamValues overrides;
  if (pj->contains("params") && (*pj)["params"].is_object()) {
    for (auto it = (*pj)["params"].begin(); it != (*pj)["params"].end(); ++it) {
      const ParamSpec* spec = r.info->find_param(it.key());
      if (it->is_boolean())
        overrides[it.key()] = it->get<bool>() ? 1 : 0;
      else if (it->is_number())
        overrides[it.key()] = it->get<double>();
      else if (it->is_string() && spec && spec->choice_index(it->get<std::string>()) >= 0)
        overrides[it.key()] = it->get<std::string>();
      else
        return std::nullopt;
    }
  }
  if (Params::resolve(r.info->params, overrides, &r.values)) return std::nullopt;
  if (r.info->name == sc.policy && r.values == sc.policy_params)
    return std::nullopt;  // the same stack, the same choices: nothing more reads
  return r;
}

// What reads a field (`fs`) and why the stack does not, for the refusal: the facilities'
// summaries, and the module choices under which the stack would use one, with the
// scenario's.
std::string unread_why(const PolicyInfo& info, const Params& values,
                       const std::vector<Facility>& fs) {
  std::string what;
  for (Facility f : fs) what += (what.empty() ? "" : " or ") + std::string(facility_summary(f));
  const std::string tail = "; set policy.allow_unused_params=true (--allow-unused) to run anyway";
  const std::string when = when_used(info, fs);
  if (when.empty())
    return "stack '" + info.name + "' never reads it: it is read only with " + what + ", which '" +
           info.name + "' never uses" + tail;
  std::string now;  // the scenario's choice of each parameter `when` names
  for (std::size_t at = 0; at < when.size();) {
    const std::size_t eq = when.find('=', at);
    const std::string choice = when.substr(at, eq - at);
    const ParamSpec* cs = info.find_param(choice);
    now += (now.empty() ? "" : ", ") + choice + "=" +
           (cs && !cs->choices.empty() ? values.choice(choice) : std::string("-1"));
    const std::size_t next = when.find(" or ", eq);
    at = next == std::string::npos ? when.size() : next + 4;
  }
  return "stack '" + info.name + "' does not read it here: it is read only with " + what +
         ", which it uses only with " + when + " (this scenario has " + now + ")" + tail;
}

}  // namespace

namespace internal {

void find_unread_fields(const json& doc, const json& original, const Registry& registry,
                        Scenario& sc) {
  const PolicyInfo* info = registry.find(sc.policy);
  if (!info) return;
  const StackReading runs{info, sc.policy_params};  // one that declares nothing may read everything
  std::vector<StackReading> written_for;  // the stacks the file is written for, besides `runs`
  if (std::optional<StackReading> own = file_stack(original, registry, sc))
    written_for.push_back(*own);
  for (const auto& other : sc.compared_with)
    written_for.push_back({registry.find(other.stack), other.params});
  for (const SetField& s : fields_set(doc)) {
    if (runs.may_use_any(s.field->read_by)) {
      sc.read_fields.push_back(s.at);
      continue;
    }
    const json::json_pointer ptr = pointer_of(s.at);
    const bool as_written = original.contains(ptr) && original.at(ptr) == *s.value;
    bool kept = false;
    for (const StackReading& r : written_for)
      kept = kept || (as_written && r.may_use_any(s.field->read_by));
    sc.unread_fields.push_back({s.at, unread_why(*info, sc.policy_params, s.field->read_by), kept});
  }
}

}  // namespace internal

void refuse_unread_by_all(const std::vector<const Scenario*>& runs,
                          const std::vector<std::string>& labels) {
  if (runs.empty() || runs.front()->allow_unused_params) return;
  // A field some run's stack reads is not ignored; one only kept (the file's environment
  // for the stacks it is written for) is not either. One set otherwise that no run reads is.
  for (const Scenario* first : runs)
    for (const Scenario::UnreadField& u : first->unread_fields) {
      if (u.kept) continue;
      bool read = false;
      for (const Scenario* sc : runs) {
        const auto& v = sc->read_fields;
        read = read || std::find(v.begin(), v.end(), u.path) != v.end();
      }
      if (read) continue;
      if (runs.size() == 1) throw ScenarioError(first->file + ": " + u.path + ": " + u.why);
      std::string all;
      for (const auto& l : labels) all += (all.empty() ? "" : ", ") + l;
      // The reason names what reads the field.
      const auto what = u.why.find("it is read only with ");
      const auto end = u.why.find(", which ");
      throw ScenarioError(first->file + ": " + u.path + ": none of the runs here (" + all +
                          ") reads it: " + u.why.substr(what, end - what) +
                          "; set policy.allow_unused_params=true (--allow-unused) to run anyway");
    }
}

}  // namespace faultline::scenarios
