// The fault sections of a scenario: $.faults (the categories, a per-job rate made per
// machine, and a trace with its mapping's categories) and $.diagnosis (what stop-time tests
// take and see), with what a category's recall and a test's false positives default to.
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "scenarios/scenario.h"
#include "scenarios/scenario_reader.h"
#include "traces/arrivals.h"

namespace faultline::scenarios {

using nlohmann::json;

namespace internal {
namespace {

// The category's closing cross-field checks (bug kinds, scope, symptom, attribution); the
// fields are read.
void check_category(const Obj& o, const FaultCategory& c) {
  if (c.code_bug && c.scope != FaultScope::kJob)
    o.fail(o.at("code_bug"), "expected scope \"job\" for a code bug (code runs everywhere)");
  if (c.data_bug && c.scope != FaultScope::kJob)
    o.fail(o.at("data_bug"), "expected scope \"job\" for a data bug (every run reads the data)");
  if (c.data_bug && c.code_bug)
    o.fail(o.at("data_bug"),
           "expected false with \"code_bug\": true (a bug follows the code or the data)");
  if (c.data_bug && (c.symptom == Symptom::kSlowdown || c.symptom == Symptom::kManual))
    o.fail(o.at("data_bug"), "expected symptom crash, hang or nan for a data bug");
  if (c.symptom == Symptom::kManual && c.scope != FaultScope::kJob)
    o.fail(o.at("scope"),
           "expected \"job\" for symptom \"manual\" (a code change affects the whole job)");
  if (o.has("non_urgent") && c.symptom != Symptom::kManual)
    o.fail(o.at("non_urgent"), "only with \"symptom\": \"manual\" (a share of the code updates)");
  if (c.persistent && c.scope == FaultScope::kJob)
    o.fail(o.at("persistent"), "expected false for scope \"job\" (no machine to evict)");
  if (o.has("attribution") && c.scope == FaultScope::kJob)
    o.fail(o.at("attribution"),
           "only with scope \"machine\" or \"rack\" (a job-wide fault has no culprit machine)");
}

// One fault category at `path` (faults.categories[i], or a category of a trace mapping). A
// rate_per_job_day comes back as the marker -rate - 1, which the caller makes per machine.
FaultCategory parse_category(const json& j, const std::string& path, const std::string& file) {
  Obj o(j, path, file, fields());
  FaultCategory c;
  c.name = o.string("name", "", true);
  if (c.name.empty()) o.fail(o.at("name"), "expected a non-empty string");
  c.fault_class = o.choice("class", "explicit", {"explicit", "implicit", "manual"});
  const bool per_machine = o.has("rate_per_machine_day");
  const bool per_job = o.has("rate_per_job_day");
  if (per_machine == per_job)
    o.fail(path, "expected exactly one of rate_per_machine_day or rate_per_job_day");
  c.rate_per_machine_day = o.number("rate_per_machine_day", 0, 0, 1e6);
  // rate_per_job_day is converted once the machine count is known (see below).
  double job_rate = o.number("rate_per_job_day", -1, 0, 1e9);
  if (per_job) c.rate_per_machine_day = -job_rate - 1;  // marker, resolved by caller
  c.weibull_shape = o.number("weibull_shape", 1, 0.05, 20);
  c.lognormal_sigma = o.number("lognormal_sigma", 0, 0, 10);
  if (o.has("lognormal_sigma") && c.lognormal_sigma <= 0)
    o.fail(o.at("lognormal_sigma"),
           "expected a number > 0 (the sigma of the log of the time between faults)");
  if (c.lognormal_sigma > 0 && c.weibull_shape != 1)
    o.fail(o.at("lognormal_sigma"),
           "not with weibull_shape != 1 (one distribution of the time between faults)");
  std::string scope = o.choice("scope", "machine", {"machine", "rack", "job"});
  c.scope = scope == "machine" ? FaultScope::kMachine
            : scope == "rack"  ? FaultScope::kRack
                               : FaultScope::kJob;
  std::string sym = o.choice("symptom", "crash", {"crash", "hang", "slowdown", "nan", "manual"});
  c.symptom = sym == "crash"      ? Symptom::kCrash
              : sym == "hang"     ? Symptom::kHang
              : sym == "slowdown" ? Symptom::kSlowdown
              : sym == "nan"      ? Symptom::kNan
                                  : Symptom::kManual;
  c.persistent = o.boolean("persistent", false);
  c.repair_h = o.number("repair_h", 24, 0, 1e5);
  c.observe_after_s = o.number("observe_after_s", 0, 0, 1e6);
  c.exits = o.boolean("exits", true);
  if (o.has("exits") && c.symptom != Symptom::kNan)
    o.fail(o.at("exits"),
           "only with \"symptom\": \"nan\" (a crash always exits; a hang or slowdown never does)");
  c.non_urgent = o.number("non_urgent", 0, 0, 1);
  c.slowdown_factor = o.number("slowdown_factor", 1.5, 1, 100);
  c.duration_s = o.number("duration_s", 0, 0, 1e9);
  c.link_only = o.boolean("link_only", false);
  if (c.link_only && c.symptom != Symptom::kSlowdown)
    o.fail(o.at("link_only"),
           "only with \"symptom\": \"slowdown\" (a link that fails outright is a crash or a hang)");
  if (c.link_only && c.scope != FaultScope::kMachine)
    o.fail(o.at("link_only"), "expected scope \"machine\" (the link of one machine)");
  c.signature = o.string("signature", "");
  c.exit_code = static_cast<int>(o.integer("exit_code", 1, 0, 255));
  c.alert = o.choice("alert", "", {"", "gpu", "nic", "host", "switch", "storage"});
  c.alert_coverage = o.number("alert_coverage", 1, 0, 1);
  if (o.has("alert_coverage") && c.alert.empty())
    o.fail(o.at("alert_coverage"),
           "only with \"alert\" (the inspection kind that can see the fault)");
  c.code_bug = o.boolean("code_bug", false);
  c.data_bug = o.boolean("data_bug", false);
  c.fix_h = o.number("fix_h", 4, 0, 1e5);
  c.attribution = o.number("attribution", 1, 0, 1);
  c.misattribute_random = o.choice("misattribution", "pipeline_neighbour",
                                   {"pipeline_neighbour", "random"}) == "random";
  if (o.has("misattribution") && !o.has("attribution"))
    o.fail(o.at("misattribution"),
           "only with attribution (the share of crash logs that name the culprit)");
  if (const json* rj = o.get("recall")) {
    Obj r(*rj, path + ".recall", file, fields());
    std::vector<std::string> tests{"replay"};
    for (int k = 0; k < kProbeKinds; ++k) tests.push_back(probe_key(static_cast<ProbeKind>(k)));
    for (const auto& t : tests)
      if (r.has(t)) c.recall[t] = r.number(t, 0, 0, 1);
    r.finish();
  }
  if (const json* wj = o.get("warning")) {
    // Failure prediction (WarningSpec): a warning names the machine a fault will strike.
    Obj w(*wj, path + ".warning", file, fields());
    c.warning.enabled = true;
    c.warning.lead_time_s = w.number("lead_time_s", 0, 0, 1e7);
    c.warning.probability = w.number("probability", 0, 0, 1);
    c.warning.false_per_machine_day = w.number("false_per_machine_day", 0, 0, 1e6);
    w.finish();
    if (c.scope != FaultScope::kMachine)
      o.fail(o.at("warning"), "only with scope \"machine\" (a warning names one machine)");
  }
  // A rank's failure that its replica group can lose alone (replica groups): a crash or a
  // hang of one machine's hardware. Not a fault of the code or the data (every replica runs
  // them), a job-wide one, a NaN (the all-reduce carries it to every replica) or a slowdown.
  const bool confinable = c.scope == FaultScope::kMachine && !c.job_bug() &&
                          (c.symptom == Symptom::kCrash || c.symptom == Symptom::kHang);
  c.replica_confined = o.boolean("replica_confined", confinable);
  if (c.replica_confined && !confinable)
    o.fail(o.at("replica_confined"),
           "only for a crash or a hang of scope \"machine\" that is neither a code nor a data "
           "bug (anything else reaches every replica)");
  check_category(o, c);
  if (c.signature.empty()) c.signature = c.name;
  o.finish();
  return c;
}

// faults.trace: reads the trace and its mapping now, so a bad file fails at load time.
void parse_trace(const json& j, const std::string& file, Scenario& sc,
                 std::set<std::string>& names) {
  Obj t(j, "$.faults.trace", file, fields());
  TraceSource ts;
  const std::filesystem::path dir = std::filesystem::path(file).parent_path();
  auto resolve = [&](const std::string& p) {
    if (p.empty()) return p;
    const std::filesystem::path q(p);
    return (q.is_absolute() ? q : dir / q).lexically_normal().string();
  };
  ts.file = t.string("file", "", true);
  if (ts.file.empty()) t.fail(t.at("file"), "expected a non-empty path");
  ts.file = resolve(ts.file);
  ts.format = t.choice("format", "auto",
                       {"auto", "jsonl", "csv", "infinitehbd", "oobleck", "columns", "fta"});
  ts.columns = resolve(t.string("columns", ""));
  if (ts.format == "columns" && ts.columns.empty())
    t.fail(t.at("columns"), "required for \"format\": \"columns\" (a column-map file)");
  if (!ts.columns.empty() && ts.format != "columns")
    t.fail(t.at("columns"), "only with \"format\": \"columns\"");
  ts.mapping = resolve(t.string("mapping", ""));
  ts.mode = t.choice("mode", "bootstrap", {"replay", "bootstrap"});
  ts.node_order = t.choice("node_order", "in_order", {"in_order", "random"});
  if (t.has("node_order") && ts.mode != "replay")
    t.fail(t.at("node_order"), "only with \"mode\": \"replay\" (bootstrap draws nodes at random)");
  if (t.get("extra_slots")) {  // (get: a known key even when absent)
    ts.extra_slots = t.choice("extra_slots", "", {"bootstrap", "fault_free"});
    if (ts.mode != "replay")
      t.fail(t.at("extra_slots"),
             "only with \"mode\": \"replay\" (bootstrap draws a node for every slot)");
  }
  ts.time_scale = t.number("time_scale", 1, 1e-6, 1e6);
  ts.start_day = t.number("start_day", 0, -1e6, 1e6);
  if (t.has("start_day") && ts.mode != "replay")
    t.fail(t.at("start_day"), "only with \"mode\": \"replay\"");
  ts.fleet_nodes = static_cast<int>(t.integer("fleet_nodes", 0, 1, 100'000'000));
  ts.strict = t.boolean("strict", true);
  t.finish();
  traces::SimTraceSpec spec;
  spec.file = ts.file;
  traces::parse_format(ts.format, &spec.format);
  spec.columns = ts.columns;
  spec.mapping = ts.mapping;
  spec.fleet_nodes = ts.fleet_nodes;
  spec.strict = ts.strict;
  traces::SimTrace st;
  try {
    st = traces::load_sim_trace(spec);
  } catch (const traces::SimTraceError& e) {
    t.fail(t.at(e.field()), e.what());
  }
  // Replay onto more machines than the fleet has nodes: the slots no node drives would
  // see no trace fault at all. The scenario says what they get, or the load refuses.
  const auto fleet = static_cast<long long>(st.timelines.nodes.size());
  if (ts.mode == "replay" && fleet < sc.cluster.machines && ts.extra_slots.empty())
    t.fail(t.at("mode"), "replay of " + std::filesystem::path(ts.file).filename().string() +
                             "'s fleet of " + std::to_string(fleet) + " nodes onto " +
                             std::to_string(sc.cluster.machines) + " machines would leave " +
                             std::to_string(sc.cluster.machines - fleet) +
                             " slots without a trace fault; set \"extra_slots\": \"bootstrap\" "
                             "(each extra slot replays a "
                             "randomly drawn node's history) or \"fault_free\" (leave them so), or "
                             "use \"mode\": \"bootstrap\"");
  ts.first_category = static_cast<int>(sc.faults.size());
  for (std::size_t i = 0; i < st.map.categories.size(); ++i) {
    json c = st.map.categories[i];
    c["rate_per_machine_day"] = 0;  // arrivals come from the trace
    FaultCategory fc = parse_category(c, "$.categories[" + std::to_string(i) + "]",
                                      ts.mapping.empty() ? file : ts.mapping);
    if (!names.insert(fc.name).second)
      t.fail(t.at("mapping"),
             "category \"" + fc.name + "\" of the mapping is also in $.faults.categories");
    sc.faults.push_back(std::move(fc));
  }
  ts.timelines = std::make_shared<const traces::FleetTimelines>(std::move(st.timelines));
  sc.trace = std::move(ts);
}

}  // namespace

// $.faults: rate scale, clock, the categories (a per-job rate becomes per machine) and the
// trace, whose mapping's categories follow them. REQUIRES the cluster read.
void parse_faults(const json& fj, const std::string& file, Scenario& sc) {
  Obj f(fj, "$.faults", file, fields());
  const double scale = f.number("rate_scale", 1, 0, 1e6);
  sc.compute_clock = f.choice("clock", "wall", {"wall", "compute"}) == "compute";
  record("$.faults.categories", "array", "", false);
  const json* cats = f.get("categories");
  const json* trace = f.get("trace");
  if (cats ? !cats->is_array() : !trace)
    f.fail("$.faults.categories", "expected an array of fault categories");
  std::set<std::string> names;
  for (size_t i = 0; cats && i < cats->size(); ++i) {
    std::string p = "$.faults.categories[" + std::to_string(i) + "]";
    FaultCategory c = parse_category((*cats)[i], p, file);
    if (c.rate_per_machine_day < 0)
      c.rate_per_machine_day = (-c.rate_per_machine_day - 1) / sc.cluster.machines;
    c.rate_per_machine_day *= scale;
    if (!names.insert(c.name).second)
      f.fail(p + ".name", "duplicate category name \"" + c.name + "\"");
    sc.faults.push_back(std::move(c));
  }
  if (trace) parse_trace(*trace, file, sc, names);
  f.finish();
}

// $.diagnosis: how long stop-time tests, capture and replay take, and false positives.
void parse_diagnosis(const json& dj, const std::string& file, DiagnosisSpec& g) {
  Obj d(dj, "$.diagnosis", file, fields());
  g.gpu_diag_s = d.number("gpu_diag_s", g.gpu_diag_s, 0, 1e6);
  g.intra_all_to_all_s = d.number("intra_all_to_all_s", g.intra_all_to_all_s, 0, 1e6);
  g.inter_all_gather_bytes = d.number("inter_all_gather_bytes", g.inter_all_gather_bytes, 0, 1e15);
  g.group_setup_s = d.number("group_setup_s", g.group_setup_s, 0, 1e6);
  g.bitwise_s = d.number("bitwise_s", g.bitwise_s, 0, 1e6);
  g.stress_s = d.number("stress_s", g.stress_s, 0, 1e7);
  g.capture_s = d.number("capture_s", g.capture_s, 0, 1e5);
  g.replay_s = d.number("replay_s", g.replay_s, 0, 1e6);
  g.rebalance_s = d.number("rebalance_s", g.rebalance_s, 0, 1e6);
  g.reconfigure_s = d.number("reconfigure_s", g.reconfigure_s, 0, 1e6);
  g.false_positive_rate = d.number("false_positive_rate", g.false_positive_rate, 0, 1);
  if (const json* fj = d.get("false_positive")) {
    Obj f(*fj, "$.diagnosis.false_positive", file, fields());
    for (int k = 0; k < kProbeKinds; ++k)
      if (const std::string t = probe_key(static_cast<ProbeKind>(k)); f.has(t))
        g.false_positive[t] = f.number(t, 0, 0, 1);
    f.finish();
  }
  g.standby_wake_s = d.number("standby_wake_s", g.standby_wake_s, 0, 1e5);
  d.finish();
}

}  // namespace internal

double default_recall(const FaultCategory& c, const std::string& test) {
  auto it = c.recall.find(test);
  if (it != c.recall.end()) return it->second;
  if (c.link_only) return 0;  // nothing fails: only the link's own traffic is slow
  if (test == "stress") return 0.95;
  if (test == "replay") return c.symptom == Symptom::kNan ? 0.99 : 0.9;
  if (c.job_bug() || c.scope == FaultScope::kJob) return 0;  // nothing wrong with a machine
  if (c.symptom == Symptom::kNan) return test == "bitwise" ? 0.99 : test == "gpu_diag" ? 0.7 : 0;
  if (c.alert == "gpu")
    return test == "gpu_diag"           ? 0.9
           : test == "intra_all_to_all" ? 0.8
           : test == "inter_all_gather" ? 0.3
                                        : 0.2;
  if (c.alert == "nic" || c.alert == "switch")
    return test == "inter_all_gather" ? 0.95 : test == "intra_all_to_all" ? 0.1 : 0;
  if (c.alert == "host") return test == "gpu_diag" ? 0.2 : 0.1;
  return test == "gpu_diag"           ? 0.5
         : test == "inter_all_gather" ? 0.5
         : test == "intra_all_to_all" ? 0.4
                                      : 0.3;
}

double false_positive(const DiagnosisSpec& d, const std::string& test) {
  auto it = d.false_positive.find(test);
  if (it != d.false_positive.end()) return it->second;
  return test == "bitwise" ? 0 : d.false_positive_rate;
}

const char* symptom_name(Symptom s) {
  switch (s) {
    case Symptom::kCrash:
      return "crash";
    case Symptom::kHang:
      return "hang";
    case Symptom::kSlowdown:
      return "slowdown";
    case Symptom::kNan:
      return "nan";
    case Symptom::kManual:
      return "manual";
  }
  return "?";
}

const char* scope_name(FaultScope s) {
  switch (s) {
    case FaultScope::kMachine:
      return "machine";
    case FaultScope::kRack:
      return "rack";
    case FaultScope::kJob:
      return "job";
  }
  return "?";
}

}  // namespace faultline::scenarios
