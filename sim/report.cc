#include "sim/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <limits>
#include <sstream>

#include "policies/api/action.h"
#include "sim/assumptions.h"
#include "sim/costs.h"

namespace faultline::sim {

using nlohmann::json;

namespace {

std::string num(double x) {
  std::ostringstream o;
  o << std::setprecision(4) << x;
  return o.str();
}

json summary_json(const Summary& s) {
  return {{"mean", s.mean},
          {"ci95", {s.lo, s.hi}},
          {"min", s.min},
          {"max", s.max},
          {"stddev", s.stddev}};
}

// The q-quantile of xs (sorted, +inf for censored values), linearly interpolated between
// order statistics (Hyndman and Fan's type 7, numpy's default); null when it falls on or
// next to a censored value (then it is only known to exceed the cap).
json quantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return nullptr;
  const double h = (static_cast<double>(sorted.size()) - 1) * q;
  const std::size_t lo = static_cast<std::size_t>(h), hi = std::min(lo + 1, sorted.size() - 1);
  const double x = sorted[lo] + (h - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
  if (!std::isfinite(sorted[lo]) || !std::isfinite(sorted[hi])) return nullptr;
  return x;
}

// Resamples of the time-to-train bootstrap (percentile intervals want at least 1,000).
constexpr int kBootstrapResamples = 2000;

// A job of fixed work: its time to train over the replicas that finished it, the
// quantiles over all of them (a censored replica counts as longer than any), and how many
// the cap stopped first.
json time_to_train(const scenarios::Scenario& sc, const std::vector<ReplicaResult>& rs) {
  std::vector<double> done, all;
  for (const auto& r : rs) {
    all.push_back(r.finished ? r.elapsed_s / 86400 : std::numeric_limits<double>::infinity());
    if (r.finished) done.push_back(r.elapsed_s / 86400);
  }
  std::sort(all.begin(), all.end());
  json t = summary_json(summarize(done));
  if (done.empty())
    t = {{"mean", nullptr},
         {"ci95", nullptr},
         {"min", nullptr},
         {"max", nullptr},
         {"stddev", nullptr}};
  t["unit"] = "days";
  t["work_days"] = sc.job.work_days;
  t["cap_days"] = sc.job.horizon_days;
  t["p50"] = quantile(all, 0.5);
  t["p90"] = quantile(all, 0.9);
  t["p99"] = quantile(all, 0.99);
  // Bootstrap CIs over replicas (sim/metrics.h): the mean's over the replicas that finished,
  // the quantiles' over all (an end a censored replica reaches is null: beyond the cap).
  auto ends = [](const Interval& ci) {
    auto end = [](double x) { return std::isfinite(x) ? json(x) : json(nullptr); };
    return json::array({end(ci.lo), end(ci.hi)});
  };
  const Interval mean_ci = bootstrap_mean_ci95(done, kBootstrapResamples, sc.seed);
  t["mean_ci95_bootstrap"] = done.empty() ? json(nullptr) : ends(mean_ci);
  const std::vector<Interval> qs =
      bootstrap_quantile_ci95(all, {0.5, 0.9, 0.99}, kBootstrapResamples, sc.seed);
  t["p50_ci95"] = ends(qs[0]);
  t["p90_ci95"] = ends(qs[1]);
  t["p99_ci95"] = ends(qs[2]);
  t["bootstrap"] = {
      {"method", "percentile"}, {"resamples", kBootstrapResamples}, {"seed", sc.seed}};
  t["finished"] = done.size();
  t["censored"] = rs.size() - done.size();
  if (done.size() < rs.size())
    t["note"] = std::to_string(rs.size() - done.size()) +
                " replica(s) still training at the cap (job.horizon_days " +
                num(sc.job.horizon_days) +
                "): censored, left out of the mean; a quantile they reach is null";
  return t;
}

// How the scenario's faults.trace maps onto the job (null without a trace): which fleet
// nodes drive which slots, what slots no node drives get, and the rates after time_scale.
json trace_mapping(const scenarios::Scenario& sc) {
  if (!sc.trace || !sc.trace->timelines) return nullptr;
  const scenarios::TraceSource& ts = *sc.trace;
  const traces::FleetTimelines& tl = *ts.timelines;
  const auto fleet = static_cast<long long>(tl.nodes.size());
  const long long machines = sc.cluster.machines;
  const double window_days = (tl.window_end_s - tl.window_start_s) / 86400.0;
  const double per_node_day =
      fleet > 0 && window_days > 0 ? tl.faults / (fleet * window_days) : 0.0;
  const std::string file = std::filesystem::path(ts.file).filename().string();
  json m = {{"file", file},
            {"mode", ts.mode},
            {"fleet_nodes", fleet},
            {"trace_nodes", tl.trace_nodes},
            {"machines", machines},
            {"time_scale", ts.time_scale},
            {"trace_faults_per_node_day", per_node_day},
            {"faults_per_machine_day", per_node_day / ts.time_scale}};
  std::string line = ts.mode + " of " + file + " (fleet of " + std::to_string(fleet) + " nodes, " +
                     std::to_string(tl.trace_nodes) + " in the trace) onto " +
                     std::to_string(machines) + " machines: ";
  if (ts.mode == "replay") {
    const long long driven = std::min(fleet, machines), extra = std::max(0LL, machines - fleet),
                    unused = std::max(0LL, fleet - machines);
    m["node_order"] = ts.node_order;
    m["start_day"] = ts.start_day;
    m["slots_replayed"] = driven;
    m["extra_slots"] = extra;
    m["unused_fleet_nodes"] = unused;
    if (extra > 0) m["extra_slots_rule"] = ts.extra_slots;
    line += ts.node_order == "random"
                ? std::to_string(driven) +
                      " of the fleet nodes, a random assignment per replica, drive " +
                      std::to_string(driven) + " slots"
                : "fleet nodes 1-" + std::to_string(driven) +
                      " (in order of first appearance) drive slots 0-" + std::to_string(driven - 1);
    if (unused > 0) line += "; " + std::to_string(unused) + " fleet nodes unused";
    if (extra > 0)
      line += "; the " + std::to_string(extra) + " slots no node drives are " +
              (ts.extra_slots == "bootstrap"
                   ? "bootstrapped (a random fleet node's history each, uniform phase)"
                   : "fault-free (extra_slots fault_free)");
    line += "; trace day " + num(ts.start_day) + " is time 0, time_scale " + num(ts.time_scale);
  } else {
    m["slots_bootstrapped"] = machines;
    line += "each slot draws a fleet node's history (with replacement, uniform phase): " +
            num(per_node_day) + " faults per node-day / time_scale " + num(ts.time_scale) + " = " +
            num(per_node_day / ts.time_scale) + " per machine-day";
  }
  m["summary"] = line;
  return m;
}

}  // namespace

std::string resolution_name(Mechanism resolution) { return std::string(resolution.name()); }

namespace {

// aggregate's parts. The run: scenario, stack, its parameters and modules, size, clock.
void add_run(json& out, const scenarios::Scenario& sc, const std::vector<ReplicaResult>& rs) {
  out["scenario"] = sc.name;
  out["description"] = sc.description;
  out["policy"] = sc.policy;
  json params = json::object();
  for (const auto& [k, v] : sc.policy_params.values()) params[k] = v;
  for (const auto& [k, name] : sc.policy_params.choices()) params[k] = name;  // a module's name
  out["policy_params"] = params;
  if (!sc.unread_params.empty()) out["unread_params"] = sc.unread_params;  // kept by --allow-unused
  // Fields the stack never reads, kept by --allow-unused, by another stack of a comparison or
  // sweep that reads them, or because the file wrote them for its own stack: never silent.
  if (!sc.unread_fields.empty()) {
    json fields = json::array();
    for (const auto& u : sc.unread_fields) fields.push_back(u.path.substr(2));  // less "$."
    out["unread_fields"] = fields;
  }
  // The modules the choice parameters picked, by name and version: the versions of the
  // registry the scenario was resolved with, the one its stack was built from.
  json mods = json::object();
  for (const auto& [key, name] : sc.policy_params.choices())
    if (const std::string* version = sc.policy_params.version(key))
      mods[key] = {{"name", name}, {"version", *version}};
  if (!mods.empty()) out["policy_modules"] = mods;
  out["replicas"] = rs.size();
  out["seed"] = sc.seed;
  out["machines"] = sc.cluster.machines;
  out["gpus"] = static_cast<std::int64_t>(sc.cluster.machines) * sc.cluster.gpus_per_machine;
  out["horizon_days"] = sc.job.horizon_days;
  out["fault_clock"] = sc.compute_clock ? "compute" : "wall";
  if (sc.job.work_days > 0) out["time_to_train"] = time_to_train(sc, rs);
  if (json tm = trace_mapping(sc); !tm.is_null()) out["trace_mapping"] = tm;
}

// Unproductive (and productive) time by phase: mean, CI, share of the run.
void add_breakdown(json& out, const scenarios::Scenario& sc, const std::vector<ReplicaResult>& rs) {
  const bool work = sc.job.work_days > 0;
  const double n = static_cast<double>(rs.size());
  const double horizon_s = sc.job.horizon_days * 86400.0;
  double elapsed_sum = 0;  // a job of fixed work: its runs' lengths differ
  for (const auto& r : rs) elapsed_sum += r.elapsed_s;
  json bd = json::object(), share = json::object(), ci = json::object();
  for (const auto& k : kBuckets) {
    std::vector<double> xs;
    for (const auto& r : rs) xs.push_back(r.breakdown.*k.field * 1e-9);
    Summary s = summarize(xs);
    bd[k.name] = s.mean;
    ci[k.name] = {s.lo, s.hi};
    share[k.name] = work ? (elapsed_sum > 0 ? s.mean * n / elapsed_sum : 0.0) : s.mean / horizon_s;
  }
  out["breakdown_s"] = bd;
  out["breakdown_ci95_s"] = ci;
  out["breakdown_share"] = share;
}

// One fault category over the replicas: incidents, costs, stated against realized rate,
// and its ledger.
json category_json(const scenarios::FaultCategory& cat, const CategoryTotals::Sums& k, double n,
                   double machine_days) {
  const double inc = k.incidents, inj = k.injected, res_sum = k.resolution_sum_s,
               res_max = k.resolution_max_s, det_sum = k.detection_sum_s, det_n = k.detected,
               rec = k.recurred;
  const double* outcomes = k.outcomes;
  json c = {{"class", cat.fault_class},
            {"symptom", scenarios::symptom_name(cat.symptom)},
            {"incidents_per_replica", inc / n},
            {"injected_per_replica", inj / n},
            {"resolution_mean_s", inc > 0 ? res_sum / inc : 0.0},
            {"resolution_max_s", res_max},
            {"detection_mean_s", det_n > 0 ? det_sum / det_n : 0.0}};
  // The rate stated against the rate the job saw: the faults that landed on its slots per
  // machine-day on the fault clock. A gap beyond 2% and beyond three Poisson standard
  // errors is flagged (bad machines leaving, being cured or appearing, or a trace).
  const double stated = cat.rate_per_machine_day;
  const double realized = machine_days > 0 ? inj / machine_days : 0.0;
  c["rate_per_machine_day"] = stated;
  c["realized_rate_per_machine_day"] = realized;
  const double gap = stated > 0 ? realized / stated - 1 : 0.0;
  c["rate_gap"] = gap;
  c["rate_gap_flagged"] =
      stated > 0 && std::abs(gap) > 0.02 && std::abs(gap) > 3 / std::sqrt(std::max(inj, 1.0));
  // The fault ledger (totals over replicas balance exactly: outcomes = injected + recurred).
  json oc = json::object();
  for (int o = 0; o < kOutcomes; ++o) oc[kOutcomeNames[o]] = outcomes[o] / n;
  c["recurred_per_replica"] = rec / n;
  c["outcomes"] = oc;
  double sum = 0;
  for (int o = 0; o < kOutcomes; ++o) sum += outcomes[o];
  c["ledger_balanced"] = sum == inj + rec;
  return c;
}

// Evictions, repairs, fruitless rounds and ended runs; steps, checkpoints, the engine.
void add_counters(json& out, const std::vector<ReplicaResult>& rs) {
  const double n = static_cast<double>(rs.size());
  double et = 0, ef = 0, efp = 0, ff = 0, ckpt = 0, events = 0, real = 0, cached = 0, steps = 0;
  double drains = 0, repairs = 0, retired = 0, ended = 0;
  int fruitless = 0;
  for (const auto& r : rs) {
    et += r.evictions_true;
    ef += r.evictions_false;
    efp += r.evictions_false_positive;
    ff += r.false_failures;
    drains += r.health_check_drains;
    repairs += r.repairs;
    retired += r.retired;
    ended += r.runs_ended;
    fruitless = std::max(fruitless, r.max_fruitless_rounds);
    ckpt += r.checkpoints;
    events += r.events;
    real += r.flow_batches_real;
    cached += r.flow_batches_cached;
    steps += r.steps;
  }
  // false = every healthy machine evicted; false_positive = those a test had falsely
  // failed; collateral = the rest (deliberate over-eviction, replay intersections).
  out["evictions"] = {{"true_per_replica", et / n},
                      {"false_per_replica", ef / n},
                      {"false_positive_per_replica", efp / n},
                      {"collateral_per_replica", (ef - efp) / n},
                      {"tests_failing_healthy_per_replica", ff / n}};
  out["repair"] = {{"repaired_per_replica", repairs / n},
                   {"retired_per_replica", retired / n},
                   {"health_check_drains_per_replica", drains / n}};
  out["max_fruitless_rounds"] = fruitless;
  // Replicas whose policy ended the run (EndRun: e.g. the same NaN at the same step
  // again and again; code or data at fault).
  out["runs_ended_per_replica"] = ended / n;
  out["steps_per_replica"] = steps / n;
  out["checkpoints_per_replica"] = ckpt / n;
  out["engine"] = {{"events_per_replica", events / n},
                   {"transfer_batches_simulated", real},
                   {"transfer_batches_memoised", cached}};
}

// Outlier replicas, named so a researcher can rerun and read them: the five worst by
// ETTR, with the incident that cost each most.
json outliers_json(const scenarios::Scenario& sc, const std::vector<ReplicaResult>& rs,
                   const std::vector<double>& ettr) {
  std::vector<const ReplicaResult*> order;
  for (const auto& r : rs) order.push_back(&r);
  std::sort(order.begin(), order.end(), [](const ReplicaResult* a, const ReplicaResult* b) {
    return a->ettr != b->ettr ? a->ettr < b->ettr : a->replica < b->replica;
  });
  const Summary es = summarize(ettr);
  json worst = json::array();
  for (std::size_t i = 0; i < order.size() && i < 5; ++i) {
    const ReplicaResult& r = *order[i];
    json w = {{"replica", r.replica},
              {"seed", sc.seed},
              {"ettr", r.ettr},
              {"z", es.stddev > 0 ? (r.ettr - es.mean) / es.stddev : 0.0}};
    if (r.dominant.category >= 0)
      w["dominant_incident"] = {{"category", sc.faults[r.dominant.category].name},
                                {"at_h", r.dominant.at_s / 3600},
                                {"resolution_s", r.dominant.resolution_s}};
    worst.push_back(w);
  }
  return worst;
}

// The fleet the run drew on: what an endless fleet supplied beyond it, never hidden.
json fleet_json(const scenarios::Scenario& sc, const std::vector<ReplicaResult>& rs) {
  const double n = static_cast<double>(rs.size());
  double beyond = 0, preempted = 0;
  std::int64_t used = 0, depleted = 0;
  for (const auto& r : rs) {
    beyond += r.machines_beyond_fleet;
    preempted += r.preemptions;
    used = std::max(used, r.machines_used);
    depleted += r.depleted;
  }
  const bool finite = sc.repair.fleet == scenarios::RepairSpec::Fleet::kFinite;
  return {{"kind", finite ? "finite" : "endless"},
          {"machines_used_max", used},
          {"machines_beyond_fleet_per_replica", beyond / n},
          {"preemptions_per_replica", preempted / n},
          {"depleted_replicas", depleted}};
}

}  // namespace

json aggregate(const scenarios::Scenario& sc, const std::vector<ReplicaResult>& rs, double wall_s,
               const CategoryTotals* folded) {
  json out;
  add_run(out, sc, rs);
  const bool work = sc.job.work_days > 0;
  std::vector<double> ettr;
  for (const auto& r : rs) ettr.push_back(r.ettr);
  out["ettr"] = summary_json(summarize(ettr));
  add_breakdown(out, sc, rs);
  out["dominant_assumptions"] = dominant_assumptions(sc, rs);

  const double n = static_cast<double>(rs.size());
  const double horizon_s = sc.job.horizon_days * 86400.0;
  double exposure_s = 0;  // on the fault clock, over all replicas
  for (const auto& r : rs) exposure_s += r.exposure_s;
  const double machine_days = exposure_s / 86400.0 * sc.cluster.machines;
  CategoryTotals own;
  if (!folded) {
    for (const auto& r : rs) own.add(r);
    folded = &own;
  }
  json cats = json::object();
  double total_incidents = 0, injected = 0;
  for (size_t c = 0; c < sc.faults.size(); ++c) {
    const CategoryTotals::Sums k =
        c < folded->categories.size() ? folded->categories[c] : CategoryTotals::Sums{};
    total_incidents += k.incidents;
    injected += k.injected;
    cats[sc.faults[c].name] = category_json(sc.faults[c], k, n, machine_days);
  }
  out["incidents"] = {{"per_replica", total_incidents / n},
                      {"faults_injected_per_replica", injected / n},
                      {"by_category", cats}};
  add_counters(out, rs);
  out["outliers"] = outliers_json(sc, rs, ettr);
  json mech = json::object();
  double exhaust = 0, fallbacks = 0;
  for (const auto& [name, c] : folded->resolved_by)
    if (c > 0 && name != mechanism_name(Mechanism::kNone)) mech[name] = c / n;
  for (const auto& r : rs) {
    exhaust += r.standby_exhaustions;
    fallbacks += r.remote_fallbacks;
  }
  out["resolved_by_per_replica"] = mech;
  out["standby_exhaustions_per_replica"] = exhaust / n;
  // Failure prediction and migration (scenario `warning`, MigrateMachines): only when a
  // replica saw a warning, so that results without warnings keep their keys.
  double warnings = 0, warnings_false = 0, migrations = 0, needless = 0;
  for (const auto& r : rs) {
    warnings += r.warnings;
    warnings_false += r.warnings_false;
    migrations += r.migrations;
    needless += r.migrations_needless;
  }
  if (warnings > 0 || migrations > 0)
    out["migration"] = {{"warnings_per_replica", warnings / n},
                        {"false_warnings_per_replica", warnings_false / n},
                        {"migrations_per_replica", migrations / n},
                        {"needless_migrations_per_replica", needless / n}};
  out["remote_checkpoint_fallbacks_per_replica"] = fallbacks / n;
  const double gpus = static_cast<double>(sc.cluster.machines) * sc.cluster.gpus_per_machine;
  if (work) {
    double lost_s = 0;
    for (const auto& r : rs) lost_s += r.elapsed_s - r.breakdown.productive * 1e-9;
    out["gpu_hours_lost_per_replica"] = lost_s / n / 3600.0 * gpus;
  } else {
    out["gpu_hours_lost_per_replica"] =
        (1.0 - out["ettr"]["mean"].get<double>()) * horizon_s / 3600.0 * gpus;
  }
  out["fleet"] = fleet_json(sc, rs);
  if (sc.costs) out["cost"] = cost_json(sc, rs);
  out["wall_s"] = wall_s;
  return out;
}

namespace {

// format_table's parts, in order on one stream (each leaves the precision it set).
// The run: scenario, cluster, modules, ETTR, time to train, the fleet.
void table_summary(std::ostringstream& o, const json& r) {
  const auto& e = r["ettr"];
  o << "scenario   " << r["scenario"].get<std::string>() << "  (policy "
    << r["policy"].get<std::string>() << ", " << r["replicas"].get<int>() << " replicas, seed "
    << r["seed"].get<std::uint64_t>() << ")\n";
  o << "cluster    " << r["gpus"].get<std::int64_t>() << " GPUs on " << r["machines"].get<int>()
    << " machines, ";
  if (r.contains("time_to_train"))
    o << std::setprecision(1) << r["time_to_train"]["work_days"].get<double>()
      << " days of work (cap " << r["horizon_days"].get<double>() << " days)\n";
  else
    o << std::setprecision(1) << r["horizon_days"].get<double>() << " days\n";
  if (r.contains("trace_mapping"))
    o << "trace      " << r["trace_mapping"]["summary"].get<std::string>() << "\n";
  if (r.contains("policy_modules")) {
    o << "modules   ";
    for (const auto& [kind, m] : r["policy_modules"].items())
      o << " " << kind << " " << m["name"].get<std::string>() << " v"
        << m["version"].get<std::string>();
    o << "\n";
  }
  if (r.value("fault_clock", "wall") == "compute")
    o << "faults     on the compute clock (only while the job trains)\n";
  o << std::setprecision(2);
  o << "ETTR       " << 100 * e["mean"].get<double>() << "%  (95% CI "
    << 100 * e["ci95"][0].get<double>() << "% .. " << 100 * e["ci95"][1].get<double>() << "%, min "
    << 100 * e["min"].get<double>() << "%, max " << 100 * e["max"].get<double>() << "%)\n";
  if (r.contains("time_to_train")) {
    const auto& t = r["time_to_train"];
    auto days = [&](const json& x) {
      return x.is_null() ? std::string("> cap") : num(x.get<double>());
    };
    o << "time to train " << num(t["work_days"].get<double>()) << " days of work: ";
    // A quantile with its bootstrap CI, " [lo .. hi]" (older results have none).
    auto q = [&](const char* k) {
      std::string x = days(t[k]);
      const std::string ci = std::string(k) + "_ci95";
      if (t.contains(ci) && t[ci].is_array())
        x += " [" + days(t[ci][0]) + " .. " + days(t[ci][1]) + "]";
      return x;
    };
    if (t["mean"].is_null())
      o << "none finished";
    else
      o << "mean " << std::setprecision(1) << t["mean"].get<double>() << " days (95% CI "
        << t["ci95"][0].get<double>() << " .. " << t["ci95"][1].get<double>() << ")";
    o << ", p50 " << q("p50") << ", p90 " << q("p90") << ", p99 " << q("p99");
    if (t["censored"].get<std::int64_t>() > 0)
      o << "; " << t["censored"].get<std::int64_t>() << " censored at the cap of "
        << num(t["cap_days"].get<double>()) << " days";
    o << "\n";
  }
  o << cost_table_line(r);
  if (r.contains("fleet")) {
    const auto& f = r["fleet"];
    if (f["kind"] == "finite")
      o << "fleet      finite, " << f["machines_used_max"].get<std::int64_t>()
        << " machines used at most, " << std::setprecision(1)
        << f["preemptions_per_replica"].get<double>() << " preemptions per replica";
    if (f["kind"] == "finite" && f["depleted_replicas"].get<std::int64_t>() > 0)
      o << "; " << f["depleted_replicas"].get<std::int64_t>()
        << " replica(s) ended depleted: too few machines left to field the job (retirements)";
    if (f["kind"] == "finite")
      o << "\n";
    else if (f["machines_beyond_fleet_per_replica"].get<double>() > 0)
      o << "fleet      endless: " << std::setprecision(1)
        << f["machines_beyond_fleet_per_replica"].get<double>()
        << " machines per replica came from beyond the fleet (cluster.repair.fleet \"finite\" "
           "waits instead)\n";
  }
}

// Where the time went and what became of each fault: the unproductive time by phase, the
// incidents by category, rates that differ from the stated ones, the fault ledger.
void table_costs(std::ostringstream& o, const json& r) {
  o << std::setprecision(2) << "\n";
  o << "unproductive time per replica          hours    share\n";
  for (const auto& b : kBuckets) {
    const char* k = b.name;
    if (std::string(k) == "productive") continue;
    o << "  " << std::left << std::setw(34) << k << std::right << std::setw(9)
      << std::setprecision(2) << r["breakdown_s"][k].get<double>() / 3600.0 << std::setw(8)
      << std::setprecision(2) << 100 * r["breakdown_share"][k].get<double>() << "%\n";
  }
  o << assumption_lines(r);
  o << "\nincidents per replica: " << std::setprecision(1)
    << r["incidents"]["per_replica"].get<double>() << "  (faults injected "
    << r["incidents"]["faults_injected_per_replica"].get<double>() << ")\n";
  o << "  category                     count  detect mean s  resolve mean s  resolve max s\n";
  for (auto it = r["incidents"]["by_category"].begin(); it != r["incidents"]["by_category"].end();
       ++it) {
    const auto& c = it.value();
    o << "  " << std::left << std::setw(26) << it.key() << std::right << std::setw(8)
      << std::setprecision(1) << c["incidents_per_replica"].get<double>() << std::setw(15)
      << std::setprecision(0) << c["detection_mean_s"].get<double>() << std::setw(16)
      << c["resolution_mean_s"].get<double>() << std::setw(15)
      << c["resolution_max_s"].get<double>() << "\n";
  }
  bool gaps = false;
  for (auto it = r["incidents"]["by_category"].begin(); it != r["incidents"]["by_category"].end();
       ++it)
    gaps |= it.value().value("rate_gap_flagged", false);
  if (gaps) {
    o << "\nrates the job saw differ from the stated ones (over 2% and 3 standard errors)\n"
      << "  category                  stated /machine-day   realized      gap\n";
    for (auto it = r["incidents"]["by_category"].begin(); it != r["incidents"]["by_category"].end();
         ++it) {
      const auto& c = it.value();
      if (!c.value("rate_gap_flagged", false)) continue;
      o << "  " << std::left << std::setw(24) << it.key() << std::right << std::setw(22)
        << num(c["rate_per_machine_day"].get<double>()) << std::setw(11)
        << num(c["realized_rate_per_machine_day"].get<double>()) << std::setw(8)
        << std::setprecision(1) << 100 * c["rate_gap"].get<double>() << "%  FLAG\n";
    }
  }
  o << "\nfault ledger per replica (what became of each fault)\n"
    << "  category                  injected  interrupted  caught  left job  absorbed  horizon\n";
  for (auto it = r["incidents"]["by_category"].begin(); it != r["incidents"]["by_category"].end();
       ++it) {
    const auto& c = it.value();
    const auto& oc = c["outcomes"];
    o << "  " << std::left << std::setw(24) << it.key() << std::right << std::setprecision(2)
      << std::setw(10)
      << c["injected_per_replica"].get<double>() + c["recurred_per_replica"].get<double>()
      << std::setw(13) << oc["interrupted"].get<double>() << std::setw(8)
      << oc["caught_before_strike"].get<double>() << std::setw(10) << oc["left_job"].get<double>()
      << std::setw(10) << oc["absorbed"].get<double>() << std::setw(9)
      << oc["horizon"].get<double>() << "\n";
  }
}

// Evictions, fruitless rounds, the worst replicas, GPU-hours lost, wall time.
void table_outcomes(std::ostringstream& o, const json& r) {
  const auto& ev = r["evictions"];
  o << "\nevictions per replica: " << std::setprecision(1) << ev["true_per_replica"].get<double>()
    << " true, " << ev["false_per_replica"].get<double>() << " healthy (" << std::setprecision(2)
    << ev["false_positive_per_replica"].get<double>() << " failed a test falsely, "
    << std::setprecision(1) << ev["collateral_per_replica"].get<double>()
    << " went with their group)\n";
  o << "longest run of fruitless diagnosis rounds: " << r["max_fruitless_rounds"].get<int>()
    << "\n";
  o << "worst replicas:";
  for (const auto& w : r["outliers"]) {
    o << "\n  replica " << w["replica"].get<std::uint64_t>() << " (seed "
      << w["seed"].get<std::uint64_t>() << ")  ETTR " << std::setprecision(2)
      << 100 * w["ettr"].get<double>() << "%";
    if (w.contains("dominant_incident"))
      o << "  costliest incident: " << w["dominant_incident"]["category"].get<std::string>()
        << " at " << std::setprecision(1) << w["dominant_incident"]["at_h"].get<double>()
        << " h, resolved in " << std::setprecision(0)
        << w["dominant_incident"]["resolution_s"].get<double>() << " s";
  }
  o << "\n";
  o << "GPU-hours lost per replica: " << std::setprecision(0)
    << r["gpu_hours_lost_per_replica"].get<double>() << "\nwall time: " << std::setprecision(2)
    << r["wall_s"].get<double>() << " s\n";
}

}  // namespace

std::string format_table(const json& r) {
  std::ostringstream o;
  o << std::fixed;
  table_summary(o, r);
  if (r.contains("unread_fields")) {
    // Kept, not silent: --allow-unused, or the file wrote them for its own stack.
    const auto& u = r["unread_fields"];
    o << "unread     " << u.size() << " field(s) set that policy " << r["policy"].get<std::string>()
      << " never reads:";
    for (std::size_t i = 0; i < u.size() && i < 3; ++i) o << " " << u[i].get<std::string>();
    o << (u.size() > 3 ? " ..." : "") << " (unread_fields in --format json)\n";
  }
  table_costs(o, r);
  table_outcomes(o, r);
  return o.str();
}

void write_out_dir(const std::string& dir, const json& result, const std::vector<ReplicaResult>& rs,
                   const scenarios::Scenario& sc) {
  std::filesystem::create_directories(dir);
  auto open = [&](const std::string& name) {
    std::ofstream f(std::filesystem::path(dir) / name, std::ios::binary | std::ios::trunc);
    if (!f) throw std::runtime_error(dir + "/" + name + ": cannot write");
    return f;
  };
  {
    auto f = open("result.json");
    f << result.dump(2) << "\n";
  }
  {
    auto f = open("replicas.csv");
    f << "replica,ettr";
    for (const auto& k : kBuckets) f << "," << k.name << "_s";
    f << ",incidents,faults_injected,evictions_true,evictions_false,elapsed_days,time_to_train_"
         "days,censored\n";
    f << std::setprecision(17);
    const bool work = sc.job.work_days > 0;
    for (const auto& r : rs) {
      const std::int64_t inc = r.incident_count;
      f << r.replica << "," << r.ettr;
      for (const auto& k : kBuckets) f << "," << r.breakdown.*k.field * 1e-9;
      f << "," << inc << "," << r.faults_injected << "," << r.evictions_true << ","
        << r.evictions_false << "," << r.elapsed_s / 86400 << ",";
      // time_to_train_days: a job of fixed work that finished; empty otherwise (censored = 1
      // when the cap stopped it first).
      if (work && r.finished) f << r.elapsed_s / 86400;
      f << "," << (work && !r.finished ? 1 : 0) << "\n";
    }
  }
  if (!rs.empty() && !rs[0].timeline.empty()) {
    auto f = open("timeline.csv");
    f << "replica,t_h,ettr_cumulative,ettr_window_1h,waiting_for_machines_h\n"
      << std::setprecision(10);
    for (const auto& r : rs)
      for (const auto& p : r.timeline)
        f << r.replica << "," << p.t_h << "," << p.cumulative << "," << p.window_1h << ","
          << p.waiting_h << "\n";
  }
  bool any_inc = false;
  for (const auto& r : rs) any_inc |= !r.incidents.empty();
  if (any_inc) {
    auto f = open("incidents.csv");
    f << "replica,category,at_s,detected_s,resolved_s,resolution,slots,machines,evicted\n"
      << std::setprecision(12);
    auto ids = [&](const std::vector<int>& xs) {
      for (size_t k = 0; k < xs.size(); ++k) f << (k ? " " : "") << xs[k];
    };
    for (const auto& r : rs)
      for (const auto& i : r.incidents) {
        f << r.replica << "," << sc.faults[i.category].name << "," << i.at_s << "," << i.detected_s
          << "," << i.resolved_s << "," << resolution_name(i.resolution) << ",";
        ids(i.slots);
        f << ",";
        ids(i.machines);
        f << ",";
        ids(i.evicted);
        f << "\n";
      }
  }
  bool any_dec = false;
  for (const auto& r : rs) any_dec |= !r.decisions.empty();
  if (any_dec) {
    auto f = open("decisions.log");
    for (const auto& r : rs)
      for (const auto& d : r.decisions) f << "replica " << r.replica << " t=" << d << "\n";
  }
}

}  // namespace faultline::sim
