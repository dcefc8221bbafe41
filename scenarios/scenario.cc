#include "scenarios/scenario.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "scenarios/scenario_reader.h"
#include "scenarios/stack_fields.h"

namespace faultline::scenarios {

using nlohmann::json;

namespace {

// While scenario_fields() runs, every field the parser reads is recorded here: the
// scenario reference is generated from the parser itself, so it cannot drift from it.
thread_local std::vector<FieldInfo>* g_fields = nullptr;

// "$.faults.categories[3].name" -> "faults.categories[].name"
std::string schema_path(const std::string& path) {
  std::string out;
  for (size_t i = path.rfind("$.", 0) == 0 ? 2 : (path == "$" ? 1 : 0); i < path.size(); ++i) {
    if (path[i] == '[') {
      out += "[]";
      i = path.find(']', i);
      if (i == std::string::npos) break;
    } else {
      out += path[i];
    }
  }
  return out;
}

// Tells record() of every field the parser reads (json/strict_object.h's FieldObserver).
class Recorder : public FieldObserver {
 public:
  void field(const std::string& path, const char* type, const json* def, bool required,
             std::optional<std::pair<double, double>> range,
             const std::vector<std::string>& choices) override {
    internal::record(path, type, def ? def->dump() : "", required, range, choices);
  }
};

}  // namespace

namespace internal {

void record(const std::string& path, std::string type, std::string def, bool required,
            std::optional<std::pair<double, double>> range,
            const std::vector<std::string>& choices) {
  if (!g_fields) return;
  const std::string p = schema_path(path);
  for (const auto& f : *g_fields)
    if (f.path == p) return;
  FieldInfo f;
  f.path = p;
  f.type = std::move(type);
  f.default_json = required ? "" : std::move(def);
  f.required = required;
  if (range) {
    f.has_range = true;
    f.min = range->first;
    f.max = range->second;
  }
  f.choices = choices;
  g_fields->push_back(std::move(f));
}

FieldObserver* fields() {
  static thread_local Recorder recorder;
  return g_fields ? &recorder : nullptr;
}

}  // namespace internal

namespace {

using internal::fields;
using internal::find_unread_fields;
using internal::Obj;
using internal::parse_diagnosis;
using internal::parse_faults;
using internal::record;

// Applies "a.b[2].c=value" to the document.
void apply_set(json& doc, const std::string& set, const std::string& file) {
  auto eq = set.find('=');
  if (eq == std::string::npos || eq == 0)
    throw ScenarioError(file + ": --set " + set + ": expected path=value, e.g. job.pp=4");
  std::string path = set.substr(0, eq);
  std::string text = set.substr(eq + 1);
  json value;
  try {
    value = json::parse(text);
  } catch (const json::exception&) {
    value = text;
  }
  std::vector<std::string> parts;
  std::string cur;
  for (size_t i = 0; i < path.size(); ++i) {
    char c = path[i];
    if (c == '.' || c == '[' || c == ']') {
      if (!cur.empty()) parts.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) parts.push_back(cur);
  if (parts.empty()) throw ScenarioError(file + ": --set " + set + ": empty path");
  json* node = &doc;
  std::string where = "$";
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string& p = parts[i];
    const bool last = i + 1 == parts.size();
    if (node->is_array()) {
      json* next = nullptr;
      bool numeric = !p.empty() && p.find_first_not_of("0123456789") == std::string::npos;
      if (numeric) {
        size_t idx = std::stoul(p);
        if (idx >= node->size())
          throw ScenarioError(file + ": --set " + set + ": " + where + " has " +
                              std::to_string(node->size()) + " elements, no index " + p);
        next = &(*node)[idx];
      } else {
        for (auto& el : *node)
          if (el.is_object() && el.value("name", "") == p) next = &el;
        if (!next)
          throw ScenarioError(file + ": --set " + set + ": " + where + " has no element named '" +
                              p + "'");
      }
      where += "[" + p + "]";
      if (last) *next = value;
      node = next;
    } else {
      if (node->is_null()) *node = json::object();
      if (!node->is_object())
        throw ScenarioError(file + ": --set " + set + ": " + where + " is not an object");
      where += "." + p;
      if (last) {
        if (value.is_null())
          node->erase(p);  // path=null: the field's default applies
        else
          (*node)[p] = value;
      } else {
        node = &(*node)[p];
      }
    }
  }
}

// The JSON text as written; a syntax error is a ScenarioError.
json parse_json(const std::string& text, const std::string& file) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::parse_error& e) {
    std::string what = e.what();
    auto p = what.find("parse error");
    throw ScenarioError(file + ": $: invalid JSON (" +
                        (p == std::string::npos ? what : what.substr(p)) + ")");
  }
  return doc;
}

// The object `key` of the root, which the scenario must have.
const json& required_object(Obj& root, const std::string& key) {
  const json* j = root.get(key);
  if (!j) root.fail("$." + key, "required object is missing");
  return *j;
}

// $.cluster.scheduler: the scheduler's response times and how it picks machines.
void parse_scheduler(const json& j, const std::string& file, SchedulerSpec& sch) {
  Obj s(j, "$.cluster.scheduler", file, fields());
  sch.requeue_base_s = s.number("requeue_base_s", sch.requeue_base_s, 0, 1e7);
  sch.requeue_per_machine_s = s.number("requeue_per_machine_s", sch.requeue_per_machine_s, 0, 1e5);
  sch.reschedule_base_s = s.number("reschedule_base_s", sch.reschedule_base_s, 0, 1e7);
  sch.reschedule_per_machine_s =
      s.number("reschedule_per_machine_s", sch.reschedule_per_machine_s, 0, 1e5);
  sch.health_check_recall = s.number("health_check_recall", sch.health_check_recall, 0, 1);
  sch.standby_refill =
      s.choice("standby_refill", "free_pool", {"free_pool", "repaired"}) == "repaired"
          ? SchedulerSpec::Refill::kRepaired
          : SchedulerSpec::Refill::kFreePool;
  sch.host_selection =
      s.choice("host_selection", "random", {"random", "fewest_failures"}) == "random"
          ? SchedulerSpec::Pick::kRandom
          : SchedulerSpec::Pick::kFewestFailures;
  s.finish();
}

// $.cluster.repair, first part: repair times and outcomes, bad machines, the repair-time
// distribution.
void parse_repair_outcomes(Obj& r, RepairSpec& rp) {
  rp.auto_h = r.number("auto_h", rp.auto_h, 0, 1e5);
  rp.to_manual = r.number("to_manual", rp.to_manual, 0, 1);
  rp.auto_fail = r.number("auto_fail", rp.auto_fail, 0, 1);
  rp.manual_fail = r.number("manual_fail", rp.manual_fail, 0, 1);
  rp.retire_after = static_cast<int>(r.integer("retire_after", rp.retire_after, 0, 1000000));
  rp.bad_fraction = r.number("bad_fraction", rp.bad_fraction, 0, 1);
  rp.bad_rate_factor = r.number("bad_rate_factor", rp.bad_rate_factor, 1, 1000);
  rp.spare_machines =
      static_cast<int>(r.integer("spare_machines", rp.spare_machines, -1, 10'000'000));
  rp.cure_bad = r.number("cure_bad", rp.cure_bad, 0, 1);
  rp.failed_repair_leaves =
      r.choice("failed_repair_leaves", "fault", {"fault", "badness"}) == "fault"
          ? RepairSpec::Leaves::kFault
          : RepairSpec::Leaves::kBadness;
  rp.turn_bad_per_machine_day = r.number("turn_bad_per_machine_day", 0, 0, 1e3);
  const std::string dist = r.choice("repair_time", "fixed", {"fixed", "exponential", "lognormal"});
  rp.repair_time = dist == "fixed"         ? RepairSpec::Dist::kFixed
                   : dist == "exponential" ? RepairSpec::Dist::kExponential
                                           : RepairSpec::Dist::kLognormal;
  rp.repair_sigma = r.number("repair_sigma", 1, 1e-6, 10);
  if (r.has("repair_sigma") != (rp.repair_time == RepairSpec::Dist::kLognormal))
    r.fail(r.at(r.has("repair_sigma") ? "repair_sigma" : "repair_time"),
           r.has("repair_sigma")
               ? "only with repair_time \"lognormal\""
               : "lognormal needs its repair_sigma (the sigma of the log of a repair's duration; "
                 "the mean is auto_h or the category's repair_h)");
}

// $.cluster.repair, second part: the fleet (endless or finite) and its preemptible machines.
void parse_repair_fleet(Obj& r, const ClusterSpec& cl, RepairSpec& rp) {
  rp.fleet = r.choice("fleet", "endless", {"endless", "finite"}) == "finite"
                 ? RepairSpec::Fleet::kFinite
                 : RepairSpec::Fleet::kEndless;
  rp.fleet_machines = static_cast<int>(r.integer("fleet_machines", 0, 1, 10'000'000));
  if (r.has("fleet_machines")) {
    if (rp.fleet != RepairSpec::Fleet::kFinite)
      r.fail(r.at("fleet_machines"), "only with fleet \"finite\" (an endless fleet has no size)");
    if (r.has("spare_machines"))
      r.fail(r.at("fleet_machines"),
             "not with spare_machines (the free machines are the fleet less the job and "
             "its standbys)");
    const int need = cl.machines + cl.standby_machines;
    if (rp.fleet_machines < need)
      r.fail(
          r.at("fleet_machines"),
          "expected at least the job's " + std::to_string(cl.machines) + " machines" +
              (cl.standby_machines ? " and its " + std::to_string(cl.standby_machines) + " standbys"
                                   : std::string()) +
              " (" + std::to_string(need) + "), got " + std::to_string(rp.fleet_machines));
    rp.spare_machines = rp.fleet_machines - need;
  }
  rp.preemptible_machines = static_cast<int>(r.integer("preemptible_machines", 0, 0, 10'000'000));
  rp.preempt_s = r.number("preempt_s", rp.preempt_s, 0, 1e7);
  for (const char* k : {"preemptible_machines", "preempt_s"})
    if (r.has(k) && rp.fleet != RepairSpec::Fleet::kFinite)
      r.fail(r.at(k), "only with fleet \"finite\" (an endless fleet never waits for a machine)");
}

// $.cluster.repair, last part: the cross-field checks, once every field is read.
void check_repair(const Obj& r, const ClusterSpec& cl, const RepairSpec& rp) {
  if (r.has("cure_bad") && !rp.bad_model())
    r.fail(r.at("cure_bad"),
           "only with bad_fraction > 0 or turn_bad_per_machine_day > 0 (there are no bad "
           "machines)");
  if (r.has("spare_machines") && cl.nvlink_spares > 0)
    r.fail(r.at("spare_machines"),
           "not with cluster.nvlink_spares (the spares are the trays each domain leaves "
           "free)");
  // Parameters that cannot act as written are errors, not silently ignored.
  if (r.has("manual_fail") && rp.to_manual == 0)
    r.fail(r.at("manual_fail"), "only with to_manual > 0 (no machine reaches manual repair)");
  if (r.has("bad_rate_factor") && !rp.bad_model())
    r.fail(r.at("bad_rate_factor"),
           "only with bad_fraction > 0 or turn_bad_per_machine_day > 0 (there are no bad "
           "machines)");
  if (rp.bad_fraction == 1 && rp.bad_rate_factor != 1)
    r.fail(r.at("bad_fraction"), "expected < 1 with bad_rate_factor > 1 (bad relative to what?)");
  if (rp.auto_fail == 1 && rp.to_manual == 0 && rp.retire_after == 0)
    r.fail(r.at("auto_fail"),
           "expected < 1: every repair fails, no machine is retired, broken machines "
           "would cycle forever");
}

// $.cluster.repair: what happens to machines after they leave the job (RepairSpec).
void parse_repair(const json& j, const std::string& file, const ClusterSpec& cl, RepairSpec& rp) {
  Obj r(j, "$.cluster.repair", file, fields());
  parse_repair_outcomes(r, rp);
  parse_repair_fleet(r, cl, rp);
  check_repair(r, cl, rp);
  r.finish();
}

// $.cluster: machines, network, NVLink domains, then its scheduler and repair objects.
// Returns whether it sets standby_machines (a stack with a standby module sizes its own).
bool parse_cluster(const json& j, const std::string& file, Scenario& sc) {
  Obj c(j, "$.cluster", file, fields());
  auto& cl = sc.cluster;
  cl.machines = static_cast<int>(c.integer("machines", 0, 1, 1'000'000, true));
  cl.gpus_per_machine = static_cast<int>(c.integer("gpus_per_machine", 8, 1, 64));
  cl.rack_size = static_cast<int>(c.integer("rack_size", 16, 1, 4096));
  cl.racks_per_pod = static_cast<int>(c.integer("racks_per_pod", 16, 1, 4096));
  cl.spines = static_cast<int>(c.integer("spines", 8, 1, 4096));
  cl.standby_machines = static_cast<int>(c.integer("standby_machines", 0, 0, 100000));
  const bool sets_standby = c.has("standby_machines");
  cl.nic_gbps = c.number("nic_gbps", 3200, 1e-3, 1e7);
  cl.tor_uplink_gbps = c.number("tor_uplink_gbps", cl.nic_gbps * cl.rack_size, 1e-3, 1e9);
  cl.leaf_uplink_gbps =
      c.number("leaf_uplink_gbps", cl.tor_uplink_gbps * cl.racks_per_pod, 1e-3, 1e10);
  cl.storage_hosts = static_cast<int>(c.integer("storage_hosts", 4, 1, 10000));
  cl.storage_gbps = c.number("storage_gbps", 400, 1e-3, 1e7);
  cl.link_latency_us = c.number("link_latency_us", 2, 0, 1e6);
  cl.nvlink_domain = static_cast<int>(c.integer("nvlink_domain", 1, 1, 4096));
  cl.nvlink_gbps = c.number("nvlink_gbps", 7200.0 * cl.gpus_per_machine, 1e-3, 1e9);
  cl.nvlink_spares = static_cast<int>(c.integer("nvlink_spares", 0, 0, 4096));
  for (const char* f : {"nvlink_gbps", "nvlink_spares"})
    if (c.has(f) && cl.nvlink_domain == 1)
      c.fail(c.at(f), "only with cluster.nvlink_domain > 1 (the machines of an NVLink domain)");
  if (cl.machines % cl.nvlink_domain != 0)
    c.fail(c.at("nvlink_domain"),
           "expected a divisor of cluster.machines (" + std::to_string(cl.machines) +
               ": the job's slots fill whole domains), got " + std::to_string(cl.nvlink_domain));
  if (const json* sj = c.get("scheduler")) parse_scheduler(*sj, file, sc.scheduler);
  if (const json* rj = c.get("repair")) parse_repair(*rj, file, sc.cluster, sc.repair);
  c.finish();
  return sets_standby;
}

// $.job: the parallelism (which must fill the cluster's GPUs), step time, checkpoint and
// restart costs, and the horizon or the work to do. REQUIRES the cluster read.
void parse_job(const json& jj, const std::string& file, Scenario& sc) {
  Obj j(jj, "$.job", file, fields());
  auto& cl = sc.cluster;
  cl.tp = static_cast<int>(j.integer("tp", 1, 1, 1 << 20, true));
  cl.pp = static_cast<int>(j.integer("pp", 1, 1, 1 << 20, true));
  cl.dp = static_cast<int>(j.integer("dp", 1, 1, 1 << 24, true));
  cl.micro_batches = static_cast<int>(j.integer("micro_batches", cl.micro_batches, 1, 1 << 20));
  cl.layers_per_stage =
      static_cast<int>(j.integer("layers_per_stage", cl.layers_per_stage, 1, 1 << 20));
  auto& job = sc.job;
  job.step_time_s = j.number("step_time_s", 10, 1e-6, 1e6, true);
  job.checkpoint_bytes_per_machine = j.number("checkpoint_bytes_per_machine", 0, 0, 1e15);
  job.image_bytes = j.number("image_bytes", 0, 0, 1e15);
  job.init_s = j.number("init_s", 0, 0, 1e6);
  job.init_per_machine_s = j.number("init_per_machine_s", 0, 0, 1e4);
  job.first_init_s = j.number("first_init_s", job.init_s, 0, 1e6);
  job.inplace_init_s = j.number("inplace_init_s", job.init_s, 0, 1e6);
  job.collective_timeout_s = j.number("collective_timeout_s", 600, 0, 1e7);
  job.checkpoint_mfu_loss = j.number("checkpoint_mfu_loss", 0, 0, 0.5);
  job.restart_warmup_s = j.number("restart_warmup_s", 0, 0, 1e6);
  job.partial_replica_rate = j.number("partial_replica_rate", 1, 0, 1);
  job.on_call_fix_h = j.number("on_call_fix_h", 2, 0, 1e5);
  job.work_days = j.number("work_days", 0, 0, 36500);
  if (j.has("work_days") && !(job.work_days > 0))
    j.fail(j.at("work_days"),
           "expected a number > 0 (days of productive training the job needs), got " +
               json_brief(jj.at("work_days")));
  job.horizon_given = j.has("horizon_days") || job.work_days == 0;
  job.horizon_days =
      j.number("horizon_days", job.work_days > 0 ? job.work_days * kWorkCapFactor : 90, 1e-6, 36500,
               job.work_days == 0);
  if (job.work_days > 0 && job.horizon_days <= job.work_days)
    j.fail(j.at("horizon_days"),
           "expected more than job.work_days (" + json_brief(jj.at("work_days")) +
               "): the cap of a job of fixed work must leave time for the work");
  const std::int64_t ranks = static_cast<std::int64_t>(cl.tp) * cl.pp * cl.dp;
  const std::int64_t gpus = static_cast<std::int64_t>(cl.machines) * cl.gpus_per_machine;
  if (ranks != gpus)
    j.fail("$.job", "expected tp*pp*dp == cluster.machines*cluster.gpus_per_machine (" +
                        std::to_string(gpus) + "), got " + std::to_string(cl.tp) + "*" +
                        std::to_string(cl.pp) + "*" + std::to_string(cl.dp) + " = " +
                        std::to_string(ranks));
  const bool spans = cl.tp > cl.gpus_per_machine && cl.tp % cl.gpus_per_machine == 0 &&
                     (cl.nvlink_domain * cl.gpus_per_machine) % cl.tp == 0;
  if (cl.gpus_per_machine % cl.tp != 0 && !spans)
    j.fail("$.job.tp",
           "expected a divisor of cluster.gpus_per_machine (" +
               std::to_string(cl.gpus_per_machine) +
               ": tensor parallelism inside a machine), or a multiple of it that divides an NVLink "
               "domain's GPUs (cluster.nvlink_domain x gpus_per_machine = " +
               std::to_string(cl.nvlink_domain * cl.gpus_per_machine) + "), got " +
               std::to_string(cl.tp));
  job.cross_domain_slowdown = j.number("cross_domain_slowdown", 1, 1, 1000);
  if (j.has("cross_domain_slowdown") && !spans)
    j.fail("$.job.cross_domain_slowdown",
           "only with job.tp wider than a machine (a tensor-parallel group across an "
           "NVLink domain's machines)");
  j.finish();
}

// $.costs: prices of the run's GPUs, idle standbys and delay (CostSpec), in one currency
// unit. At least one is above 0: a run that costs nothing has no cost per anything.
CostSpec parse_costs(const json& cj, const std::string& file) {
  Obj c(cj, "$.costs", file, fields());
  CostSpec k;
  k.gpu_hour = c.number("gpu_hour", 0, 0, 1e9);
  k.spare_machine_hour = c.number("spare_machine_hour", 0, 0, 1e9);
  k.delay_day = c.number("delay_day", 0, 0, 1e15);
  c.finish();
  if (!(k.gpu_hour > 0 || k.spare_machine_hour > 0 || k.delay_day > 0))
    c.fail("$.costs", "expected at least one of gpu_hour, spare_machine_hour, delay_day above 0");
  return k;
}

// $.policy.stack: the registered stack it names.
const PolicyInfo& find_stack(const Obj& p, const Registry& registry, const std::string& stack) {
  const PolicyInfo* info = registry.find(stack);
  if (!info) {
    std::string all;
    for (const auto& n : registry.names()) all += (all.empty() ? "" : "|") + n;
    p.fail("$.policy.stack", "expected a registered stack (" + all + "), got \"" + stack + "\"");
  }
  return *info;
}

// $.policy.params as written: numbers, booleans (1/0) and module names (an index for a
// choice becomes its name in Params::resolve).
ParamValues read_param_overrides(Obj& p, const PolicyInfo& info) {
  ParamValues overrides;
  record("$.policy.params", "object", "{}", false);
  if (const json* params = p.get("params")) {
    if (!params->is_object())
      p.fail("$.policy.params", "expected an object, got " + json_type_of(*params));
    for (auto it = params->begin(); it != params->end(); ++it) {
      const std::string where = "$.policy.params." + it.key();
      const ParamSpec* spec = info.find_param(it.key());
      if (it->is_boolean())
        overrides[it.key()] = it->get<bool>() ? 1 : 0;
      else if (it->is_number())
        overrides[it.key()] = it->get<double>();
      else if (it->is_string() && spec && !spec->choices.empty()) {
        const int i = spec->choice_index(it->get<std::string>());
        if (i < 0) {
          std::string all;
          for (const auto& c : spec->choices) all += (all.empty() ? "" : "|") + c;
          p.fail(where, "expected one of " + all + ", got " + json_brief(*it));
        }
        overrides[it.key()] = it->get<std::string>();
      } else {
        p.fail(where,
               std::string(spec && !spec->choices.empty() ? "expected a module name or its index"
                                                          : "expected a number") +
                   ", got " + json_type_of(*it) + " " + json_brief(*it));
      }
    }
  }
  return overrides;
}

// Resolves the overrides against the stack's declared parameters into sc.policy_params;
// an error names the parameter it is about.
void resolve_params(const Obj& p, const PolicyInfo& info, const ParamValues& overrides,
                    Scenario& sc) {
  if (auto err = Params::resolve(info.params, overrides, &sc.policy_params)) {
    std::string key;
    for (const auto& [k, v] : overrides)
      if (!info.find_param(k) || err->find("'" + k + "'") != std::string::npos) {
        key = k;
        break;
      }
    p.fail("$.policy.params" + (key.empty() ? std::string() : "." + key), *err);
  }
}

// A parameter the stack will not read (a module that is not chosen declares it) would make
// every value give the same result: refuse it, naming when it would be read, or with
// $.policy.allow_unused_params list it in sc.unread_params. REQUIRES the params resolved.
void check_unread_params(Obj& p, const PolicyInfo& info, const ParamValues& overrides,
                         Scenario& sc) {
  const bool allow_unused = p.boolean("allow_unused_params", false);
  sc.allow_unused_params = allow_unused;
  for (const auto& [k, v] : overrides) {
    const ParamSpec* spec = info.find_param(k);
    if (!spec || param_is_read(info, *spec, sc.policy_params)) continue;
    if (allow_unused) {
      sc.unread_params.push_back(k);
      continue;
    }
    std::string when, now;
    for (const auto& c : spec->read_when) {
      when += (when.empty() ? "" : " or ") + c;
      const std::string choice = c.substr(0, c.find('='));
      const ParamSpec* cs = info.find_param(choice);
      if (cs && !cs->choices.empty() && now.find(choice + "=") == std::string::npos)
        now += (now.empty() ? "" : ", ") + choice + "=" + sc.policy_params.choice(choice);
    }
    p.fail("$.policy.params." + k,
           "stack '" + sc.policy + "' does not read it here: it is read only with " + when +
               " (this scenario has " + now +
               "); set policy.allow_unused_params=true (--allow-unused) to run anyway");
  }
}

// $.policy.compared_with: the other stacks the scenario is written for, each NAME or
// NAME+PARAM=VALUE+... as sim compare --stacks takes them (a VALUE is a number, true, false
// or a module name), resolved against the stack's declared parameters.
void parse_compared_with(Obj& p, const Registry& registry, Scenario& sc) {
  record("$.policy.compared_with", "array", "[]", false);
  const json* cw = p.get("compared_with");
  if (!cw) return;
  if (!cw->is_array())
    p.fail("$.policy.compared_with", "expected an array of stacks, got " + json_type_of(*cw));
  for (std::size_t i = 0; i < cw->size(); ++i) {
    const std::string at = "$.policy.compared_with[" + std::to_string(i) + "]";
    const json& e = (*cw)[i];
    if (!e.is_string())
      p.fail(at, "expected a stack, NAME or NAME+PARAM=VALUE+..., got " + json_type_of(e) + " " +
                     json_brief(e));
    std::vector<std::string> parts;
    std::stringstream ss(e.get<std::string>());
    for (std::string x; std::getline(ss, x, '+');) parts.push_back(x);
    const PolicyInfo* info = parts.empty() ? nullptr : registry.find(parts[0]);
    if (!info) {
      std::string all;
      for (const auto& n : registry.names()) all += (all.empty() ? "" : "|") + n;
      p.fail(at, "expected a registered stack (" + all + "), got " + json_brief(e));
    }
    ParamValues overrides;
    for (std::size_t k = 1; k < parts.size(); ++k) {
      const auto eq = parts[k].find('=');
      if (eq == std::string::npos || eq == 0)
        p.fail(at, "expected NAME+PARAM=VALUE+..., got '" + parts[k] + "'");
      const std::string key = parts[k].substr(0, eq), v = parts[k].substr(eq + 1);
      const ParamSpec* spec = info->find_param(key);
      char* end = nullptr;
      const double x = std::strtod(v.c_str(), &end);
      if (spec && spec->choice_index(v) >= 0)
        overrides[key] = v;
      else if (v == "true" || v == "false")
        overrides[key] = v == "true";
      else if (!v.empty() && end && *end == 0)
        overrides[key] = x;
      else
        p.fail(at, "parameter '" + key + "': expected a number or a module name, got '" + v + "'");
    }
    Scenario::OtherStack other{e.get<std::string>(), parts[0], {}};
    if (auto err = Params::resolve(info->params, overrides, &other.params)) p.fail(at, *err);
    sc.compared_with.push_back(std::move(other));
  }
}

// $.policy: the stack and its parameters. REQUIRES the cluster read: cluster_sets_standby
// is whether it sets standby_machines.
void parse_policy(const json& pj, const std::string& file, const Registry& registry,
                  bool cluster_sets_standby, Scenario& sc) {
  Obj p(pj, "$.policy", file, fields());
  sc.policy = p.string("stack", "", true);
  const PolicyInfo& info = find_stack(p, registry, sc.policy);
  const ParamValues overrides = read_param_overrides(p, info);
  resolve_params(p, info, overrides, sc);
  check_unread_params(p, info, overrides, sc);
  parse_compared_with(p, registry, sc);
  // Replica groups keep at least min_replicas of the job's data-parallel replicas.
  if (const ParamSpec* min = info.find_param("min_replicas");
      min && param_is_read(info, *min, sc.policy_params) &&
      sc.policy_params.get("min_replicas") > sc.cluster.dp)
    p.fail("$.policy.params.min_replicas",
           "expected at most the job's data-parallel degree job.dp (" +
               std::to_string(sc.cluster.dp) + "), got " +
               std::to_string(static_cast<long long>(sc.policy_params.get("min_replicas"))));
  // One knob per stack for the warm standby pool. A stack that reads `standby_pool`
  // (a standby recovery module) sizes the pool itself; cluster.standby_machines would
  // then only set how many are warm before the first refill, a second knob that looks
  // like the first. The pool of such a stack starts empty and fills toward its target.
  if (const ParamSpec* pool = info.find_param("standby_pool");
      pool && param_is_read(info, *pool, sc.policy_params) && cluster_sets_standby)
    p.fail("$.cluster.standby_machines",
           "stack '" + sc.policy +
               "' sizes its own warm standby pool (policy.params.standby_pool, -1 = P99 of "
               "Binomial(machines, standby_daily_p)): set that instead; cluster.standby_machines "
               "is the pool of "
               "stacks without a standby module");
  p.finish();
}

}  // namespace

Scenario parse_scenario(const std::string& text, const std::string& file,
                        const std::vector<std::string>& sets, const Registry& registry,
                        const LoadOptions& options) {
  const json original = parse_json(text, file);
  json doc = original;
  for (const auto& s : sets) apply_set(doc, s, file);
  Scenario sc;
  sc.file = file;
  sc.name = std::filesystem::path(file).stem().string();
  Obj root(doc, "$", file, fields());
  sc.description = root.string("description", "", true);
  sc.seed = static_cast<std::uint64_t>(root.integer("seed", 1, 0, INT64_MAX));
  sc.replicas = static_cast<int>(root.integer("replicas", 100, 1, 10'000'000));
  // The sections in the order they are read: errors and the field reference follow it.
  const bool cluster_sets_standby = parse_cluster(required_object(root, "cluster"), file, sc);
  parse_job(required_object(root, "job"), file, sc);
  parse_faults(required_object(root, "faults"), file, sc);
  if (const json* dj = root.get("diagnosis")) parse_diagnosis(*dj, file, sc.diagnosis);
  if (const json* cj = root.get("costs")) sc.costs = parse_costs(*cj, file);
  parse_policy(required_object(root, "policy"), file, registry, cluster_sets_standby, sc);
  root.finish();
  // Last, once every field is read and checked (the reference records them all first).
  find_unread_fields(doc, original, registry, sc);
  if (options.refuse_unread_fields) refuse_unread_by_all({&sc}, {sc.policy});
  return sc;
}

Scenario load_scenario(const std::string& path, const std::vector<std::string>& sets,
                       const Registry& registry, const LoadOptions& options) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ScenarioError(path + ": cannot open file");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw ScenarioError(path + ": read error");
  return parse_scenario(ss.str(), path, sets, registry, options);
}

std::vector<FieldInfo> scenario_fields(const Registry& registry) {
  // Documents that together visit every branch of the parser: fields read only when
  // present (recall and false-positive tables, repair knobs that need another) are
  // present; faults.trace needs a file, so its document stops at the load, after its
  // fields were read.
  json recall = json::object(), false_positive = json::object();
  recall["replay"] = 1;
  for (int k = 0; k < kProbeKinds; ++k) {
    recall[probe_key(static_cast<ProbeKind>(k))] = 1;
    false_positive[probe_key(static_cast<ProbeKind>(k))] = 0;
  }
  const json full = {
      {"description", "every field"},
      {"cluster",
       {{"machines", 4},
        {"scheduler", json::object()},
        {"repair",
         {{"to_manual", 0.5},
          {"manual_fail", 0.1},
          {"bad_fraction", 0.1},
          {"bad_rate_factor", 2}}}}},
      {"job", {{"tp", 8}, {"pp", 2}, {"dp", 2}, {"step_time_s", 1}, {"horizon_days", 1}}},
      {"faults",
       {{"categories",
         json::array(
             {{{"name", "a"},
               {"rate_per_machine_day", 1},
               {"symptom", "nan"},
               {"exits", true},
               {"alert", "gpu"},
               {"alert_coverage", 1},
               {"attribution", 1},
               {"recall", recall},
               {"warning",
                {{"lead_time_s", 600}, {"probability", 1}, {"false_per_machine_day", 0}}}}})}}},
      {"diagnosis", {{"false_positive", false_positive}}},
      {"costs", {{"gpu_hour", 1}}},
      {"policy", {{"stack", registry.names().empty() ? std::string() : registry.names().front()}}}};
  json traced = full;
  traced["faults"] = {{"trace",
                       {{"file", "/nonexistent/trace.csv"},
                        {"mode", "replay"},
                        {"node_order", "in_order"},
                        {"start_day", 0},
                        {"extra_slots", "bootstrap"}}}};
  std::vector<FieldInfo> fields;
  g_fields = &fields;
  for (const json* doc : {&full, static_cast<const json*>(&traced)}) {
    try {
      parse_scenario(doc->dump(), "reference.json", {}, registry);
    } catch (const ScenarioError&) {
      // the trace document ends at its file; anything else shows up as a missing field
    }
  }
  g_fields = nullptr;
  return fields;
}

}  // namespace faultline::scenarios
