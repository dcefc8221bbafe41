#include "sim/assumptions.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <iomanip>
#include <sstream>

#include "policies/api/action.h"
#include "policies/builtin.h"

namespace faultline::sim {

using nlohmann::json;

namespace {

// One part of the unproductive time and the inputs that set its length.
struct Part {
  std::string what;
  json inputs;                                           // path -> value
  std::function<std::int64_t(const ReplicaResult&)> ns;  // its length in one replica
};

// The stack's parameter `name` as an input ("policy.params.NAME": value) when the stack
// declares and reads it with its module choices.
bool add_param(const scenarios::Scenario& sc, const Registry& registry, const std::string& name,
               json& inputs) {
  const PolicyInfo* info = registry.find(sc.policy);
  const ParamSpec* spec = info ? info->find_param(name) : nullptr;
  if (!spec || !param_is_read(*info, *spec, sc.policy_params)) return false;
  inputs["policy.params." + name] = sc.policy_params.get(name);
  return true;
}

// The parts the accounting attributes, with their inputs, in no particular order.
std::vector<Part> parts(const scenarios::Scenario& sc) {
  const auto& j = sc.job;
  const auto& s = sc.scheduler;
  const auto& d = sc.diagnosis;
  std::vector<Part> out = {
      {"warm-up after each restart",
       {{"job.restart_warmup_s", j.restart_warmup_s}},
       [](const ReplicaResult& r) { return r.breakdown.warmup; }},
      {"process init at each start",
       {{"job.init_s", j.init_s}},
       [](const ReplicaResult& r) { return r.attributed.init; }},
      {"process init at each in-place restart",
       {{"job.inplace_init_s", j.inplace_init_s}},
       [](const ReplicaResult& r) { return r.attributed.inplace_init; }},
      {"checkpoint restore at each start",
       {{"job.checkpoint_bytes_per_machine", j.checkpoint_bytes_per_machine}},
       [](const ReplicaResult& r) { return r.breakdown.restore; }},
      {"whole-job requeues",
       {{"cluster.scheduler.requeue_base_s", s.requeue_base_s},
        {"cluster.scheduler.requeue_per_machine_s", s.requeue_per_machine_s}},
       [](const ReplicaResult& r) { return r.attributed.requeue; }},
      {"cold replacement machines",
       {{"cluster.scheduler.reschedule_base_s", s.reschedule_base_s},
        {"cluster.scheduler.reschedule_per_machine_s", s.reschedule_per_machine_s}},
       [](const ReplicaResult& r) { return r.attributed.reschedule; }},
      {"warm standbys waking",
       {{"diagnosis.standby_wake_s", d.standby_wake_s}},
       [](const ReplicaResult& r) { return r.attributed.standby_wake; }},
      {"waiting for the on-call after an ended run",
       {{"job.on_call_fix_h", j.on_call_fix_h}},
       [](const ReplicaResult& r) { return r.attributed.on_call; }},
      {"replays",
       {{"diagnosis.replay_s", d.replay_s}},
       [](const ReplicaResult& r) { return r.attributed.replay; }},
      {"in-memory checkpoints' throughput cost",
       {{"job.checkpoint_mfu_loss", j.checkpoint_mfu_loss}},
       [](const ReplicaResult& r) { return r.attributed.mfu_checkpoint; }},
  };
  // Init grows with the machines restarted; a fresh machine pulls the job's image.
  if (j.init_per_machine_s > 0)
    for (auto* p : {&out[1], &out[2]}) p->inputs["job.init_per_machine_s"] = j.init_per_machine_s;
  if (j.image_bytes > 0)
    for (auto* p : {&out[4], &out[5]}) p->inputs["job.image_bytes"] = j.image_bytes;
  const double probe_input[kProbeKinds] = {d.gpu_diag_s, d.intra_all_to_all_s,
                                           d.inter_all_gather_bytes, d.bitwise_s, d.stress_s};
  for (int k = 0; k < kProbeKinds; ++k) {
    const std::string key = probe_key(static_cast<ProbeKind>(k));
    const std::string input =
        "diagnosis." + key + (k == static_cast<int>(ProbeKind::kInterAllGather) ? "_bytes" : "_s");
    out.push_back({"stop-time test " + key, {{input, probe_input[k]}}, [k](const ReplicaResult& r) {
                     return r.attributed.probe[k];
                   }});
  }
  return out;
}

// The stack's checkpoint plan, where it reads a parameter of the shipped stacks' names:
// the interval behind recompute, the save's blocking time behind the checkpoint bucket
// (less what checkpoint_mfu_loss set).
void add_plan_parts(const scenarios::Scenario& sc, std::vector<Part>& out) {
  const Registry registry = policies::builtin_registry();
  json interval = json::object();
  if (add_param(sc, registry, "checkpoint_interval_s", interval))
    out.push_back({"recompute since the last checkpoint", interval,
                   [](const ReplicaResult& r) { return r.breakdown.recompute; }});
  json blocking = json::object();
  for (const char* p : {"checkpoint_write_s", "remote_checkpoint_write_s",
                        "memory_checkpoint_blocking_s", "checkpoint_blocking_s"})
    if (add_param(sc, registry, p, blocking)) break;
  if (blocking.empty()) return;
  add_param(sc, registry, "checkpoint_interval_s", blocking);
  out.push_back({"blocking checkpoint saves", blocking, [](const ReplicaResult& r) {
                   return r.breakdown.checkpoint - r.attributed.mfu_checkpoint;
                 }});
}

// "700 s", "0.0071", "4.6e+10 B": a value with the unit its path's suffix names.
std::string with_unit(const std::string& path, double v) {
  std::ostringstream o;
  o << std::setprecision(4) << v;
  const auto ends = [&](const char* s) {
    const std::string x(s);
    return path.size() >= x.size() && path.compare(path.size() - x.size(), x.size(), x) == 0;
  };
  if (ends("_s")) o << " s";
  if (ends("_h")) o << " h";
  if (ends("bytes") || ends("bytes_per_machine")) o << " B";
  return o.str();
}

}  // namespace

json dominant_assumptions(const scenarios::Scenario& sc, const std::vector<ReplicaResult>& rs) {
  json out = json::array();
  if (rs.empty()) return out;
  const double n = static_cast<double>(rs.size());
  double lost_s = 0;  // mean unproductive time
  for (const auto& r : rs) lost_s += (r.breakdown.total() - r.breakdown.productive) * 1e-9 / n;
  if (!(lost_s > 0)) return out;
  std::vector<Part> all = parts(sc);
  add_plan_parts(sc, all);
  std::vector<std::pair<double, const Part*>> sized;
  for (const Part& p : all) {
    double s = 0;
    for (const auto& r : rs) s += p.ns(r) * 1e-9 / n;
    if (s > 0) sized.emplace_back(s, &p);
  }
  std::stable_sort(sized.begin(), sized.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (const auto& [s, p] : sized)
    out.push_back({{"what", p->what},
                   {"inputs", p->inputs},
                   {"lost_s_per_replica", s},
                   {"share_of_unproductive", s / lost_s}});
  return out;
}

std::string assumption_lines(const json& result) {
  if (!result.contains("dominant_assumptions")) return {};
  std::ostringstream o;
  int shown = 0;
  for (const auto& a : result["dominant_assumptions"]) {
    const double share = a["share_of_unproductive"].get<double>();
    if (share < 0.05 || shown == 3) break;
    if (shown++ == 0) o << "\ndominant assumptions, by share of the unproductive time\n";
    std::string inputs;
    for (auto it = a["inputs"].begin(); it != a["inputs"].end(); ++it)
      inputs += (inputs.empty() ? "" : ", ") + it.key() + " " +
                with_unit(it.key(), it.value().get<double>());
    o << "  " << std::fixed << std::setprecision(1) << std::setw(5) << 100 * share << "%  "
      << a["what"].get<std::string>() << " (" << inputs << ")\n";
  }
  return o.str();
}

}  // namespace faultline::sim
