// The last stages of `faultline sim replay` (sim/replay.h): the replayed stack and its
// parameters, the scenario with the faults as a replayed trace, running the replicas, and the
// result document and text report; replay() runs every stage. Reading the log and measuring
// the environment are in replay_calibration.cc, the faults as categories in replay_faults.cc.
#include "sim/replay.h"

#include <algorithm>
#include <chrono>
#include <iomanip>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <utility>
#include <variant>

#include "policies/module.h"
#include "scenarios/stack_fields.h"
#include "sim/metrics.h"
#include "sim/replay_decisions.h"
#include "sim/replay_internal.h"
#include "sim/report.h"
#include "sim/runner.h"

namespace faultline::sim {

namespace {

using nlohmann::json;
using traces::EventLog;
using traces::FaultKind;

using replay_internal::checkpoint_stall;
using replay_internal::fmt;
using replay_internal::occurrence_durations;
// Scenario::replay_durations' entry that is no duration: per in-place StartJob of the live
// run, whether it was taken in place (see replay_scenario).
constexpr const char* kInPlaceTakenKey = "StartJob:in-place-taken";

}  // namespace

// The job's first successful start (StartJob whose outcome is ok, or has none): the
// index into log.actions, or -1. Failed attempts before it (agents still connecting) are
// set-up, not incidents.
int replay_internal::first_successful_start(const EventLog& log) {
  std::map<ActionId, bool> ok;
  for (const auto& o : log.outcomes) ok[o.value.id] = o.value.ok;
  for (std::size_t i = 0; i < log.actions.size(); ++i) {
    if (!std::holds_alternative<StartJob>(log.actions[i].value.action)) continue;
    auto it = ok.find(log.actions[i].value.id);
    if (it == ok.end() || it->second) return static_cast<int>(i);
  }
  return -1;
}

namespace {

// Live incidents by resolution mechanism, attributed as the simulator does: the last
// mechanism named by an eviction, acquisition or start since the previous successful
// start is credited when a start (StartJob, HotUpdate, RollBack) succeeds; a replica's drop
// is credited to replica_drop when its RejoinReplica succeeds (the replica trains again), as
// the simulator's rejoin resolves it.
std::map<std::string, double> live_mechanisms(const EventLog& log, int first_start) {
  std::map<ActionId, bool> ok;
  for (const auto& o : log.outcomes) ok[o.value.id] = o.value.ok;
  std::map<std::string, double> out;
  Mechanism pending = Mechanism::kNone;
  for (std::size_t i = static_cast<std::size_t>(first_start + 1); i < log.actions.size(); ++i) {
    const auto& a = log.actions[i];
    Mechanism m = Mechanism::kNone;
    bool start = false;
    if (auto* x = std::get_if<StartJob>(&a.value.action)) m = x->mechanism, start = true;
    if (auto* x = std::get_if<EvictMachines>(&a.value.action)) m = x->mechanism;
    if (auto* x = std::get_if<AcquireMachines>(&a.value.action)) m = x->mechanism;
    if (std::holds_alternative<HotUpdate>(a.value.action)) m = Mechanism::kHotUpdate, start = true;
    if (std::holds_alternative<RollBack>(a.value.action)) m = Mechanism::kRollback, start = true;
    if (std::holds_alternative<RejoinReplica>(a.value.action)) {
      const auto it = ok.find(a.value.id);
      if (it == ok.end() || !it->second) continue;  // dropped again, or no outcome (older logs)
      out[mechanism_name(Mechanism::kReplicaDrop)] += 1;
      if (pending == Mechanism::kReplicaDrop) pending = Mechanism::kNone;  // its refill's
      continue;
    }
    if (m != Mechanism::kNone) pending = m;
    if (!start) continue;
    auto it = ok.find(a.value.id);
    if (it != ok.end() && !it->second) continue;  // failed start: the incident is still open
    if (pending != Mechanism::kNone) out[mechanism_name(pending)] += 1;
    pending = Mechanism::kNone;
  }
  return out;
}

// ------------------------------------------------------------ the scenario

const PolicyInfo& find_stack(const Registry& registry, const std::string& stack) {
  if (const PolicyInfo* info = registry.find(stack)) return *info;
  std::string all;
  for (const auto& n : registry.names()) all += (all.empty() ? "" : ", ") + n;
  throw ReplayError("--stack: expected a registered stack (" + all + "), got \"" + stack + "\"", 2,
                    /*usage=*/true);
}

// The recorded stack's checkpoint parameters as the live run had them: the stall per
// checkpoint (its checkpoint_write_s or checkpoint_blocking_s) and the interval.
void calibrate_checkpoints(const EventLog& log, const PolicyInfo& info, Calibration& cal) {
  const auto every_steps = static_cast<std::int64_t>(cal.every.value);
  auto ckpt = checkpoint_stall(log, every_steps, cal.mean_step.value);
  std::string ckpt_param;
  for (const char* p : {"checkpoint_write_s", "checkpoint_blocking_s"})
    if (info.find_param(p)) ckpt_param = p;
  if (ckpt && !ckpt_param.empty()) cal.values["policy.params." + ckpt_param] = *ckpt;
  // The interval the run checkpointed at, in training time at the simulated step: a
  // small live run's is often under a second, and is taken as it is. A plan that saved
  // every step (the peer module) read no interval parameter; the replayed stack plans
  // every step again, so there is nothing to calibrate.
  if (every_steps > 0 && !cal.every_step_plan && info.find_param("checkpoint_interval_s"))
    cal.values["policy.params.checkpoint_interval_s"] = {
        static_cast<double>(every_steps) * cal.mean_step.value,
        std::to_string(every_steps) + " steps between checkpoints x running step", 1};
}

// The parameters of `params` (numbers, and module names for a choice) as overrides.
ParamValues param_values(const json& params) {
  ParamValues out;
  for (const auto& [k, v] : params.items()) {
    if (v.is_number()) out[k] = v.get<double>();
    if (v.is_string()) out[k] = v.get<std::string>();
  }
  return out;
}

// The header records every resolved parameter, and a calibrated one may not apply either
// (an interval under an every-step plan): those the replayed stack will not read with its
// module choices are left out of `params` and `cal`, as setting them would change nothing
// (and is refused). Returns whether the stack sizes its own standby pool.
bool prune_params(const PolicyInfo& info, json& params, std::map<std::string, Calibrated>& cal) {
  ParamValues chosen = param_values(params);
  for (auto it = chosen.begin(); it != chosen.end();)
    it = info.find_param(it->first) ? std::next(it) : chosen.erase(it);
  Params values;
  const bool resolved = !Params::resolve(info.params, chosen, &values);
  // A stack with a standby module sizes its own pool (standby_pool): the scenario then
  // leaves cluster.standby_machines out, as a scenario must (one knob per stack).
  const ParamSpec* pool = info.find_param("standby_pool");
  const bool sizes_pool = resolved && pool && param_is_read(info, *pool, values);
  if (resolved)
    for (const auto& [k, v] : chosen) {
      const ParamSpec* spec = info.find_param(k);
      if (param_is_read(info, *spec, values)) continue;
      params.erase(k);
      cal.erase("policy.params." + k);
    }
  return sizes_pool;
}

// The scenario document, before --sets.
json scenario_doc(const LiveRun& run, const Calibration& cal, const ReplayedFaults& faults,
                  const ReplayStack& stack, const ReplayOptions& opt) {
  const auto& h = run.log.header;
  const auto& v = cal.values;
  json doc;
  doc["description"] = "Replay of the live event log " + run.path + " (stack " + h.stack + ", " +
                       std::to_string(run.faults_in_log) + " recorded faults) under " + stack.name +
                       ".";
  doc["seed"] = opt.seed >= 0 ? static_cast<std::int64_t>(opt.seed)
                              : static_cast<std::int64_t>(h.seed & 0x7fffffffffffffffull);
  doc["replicas"] = opt.replicas;
  doc["cluster"] = {{"machines", h.machines},
                    {"gpus_per_machine", h.gpus_per_machine},
                    {"storage_hosts", 1},
                    {"nic_gbps", cal.nic_gbps},
                    {"link_latency_us", 0},
                    {"scheduler",
                     {{"requeue_base_s", v.at("cluster.scheduler.requeue_base_s").value},
                      {"requeue_per_machine_s", 0},
                      {"reschedule_base_s", v.at("cluster.scheduler.reschedule_base_s").value},
                      {"reschedule_per_machine_s", 0}}}};
  if (!stack.sizes_pool) doc["cluster"]["standby_machines"] = h.standby_machines;
  doc["job"] = {{"tp", h.tp},
                {"pp", h.pp},
                {"dp", h.dp},
                {"step_time_s", cal.mean_step.value},
                {"checkpoint_bytes_per_machine", 0},
                {"image_bytes", 0},
                {"init_s", v.at("job.init_s").value},
                {"first_init_s", v.at("job.first_init_s").value},
                {"inplace_init_s", v.at("job.inplace_init_s").value},
                {"collective_timeout_s", v.at("job.collective_timeout_s").value},
                {"horizon_days", cal.sim_horizon_s / 86400.0}};
  doc["faults"] = {{"categories", faults.categories}};
  json d = json::object();
  for (const auto& [k, c] : v)
    if (k.rfind("diagnosis.", 0) == 0) d[k.substr(10)] = c.value;
  doc["diagnosis"] = d;
  doc["policy"] = {{"stack", stack.name}, {"params", stack.params}};
  // The environment as the live run measured it, less what the replayed stack never reads
  // (a scenario that sets those is refused): the calibration still reports them.
  if (Params values; !Params::resolve(stack.info->params, param_values(stack.params), &values))
    scenarios::drop_unread_fields(doc, *stack.info, values);
  return doc;
}

// The recorded faults, as a trace replayed in order: timeline i drives job slot i.
scenarios::TraceSource replay_trace(const std::string& path, const ReplayedFaults& faults,
                                    const Calibration& cal, std::size_t machines) {
  auto tl = std::make_shared<traces::FleetTimelines>();
  tl->nodes.resize(machines);
  tl->category_scope = faults.scopes;
  tl->window_start_s = 0;
  tl->window_end_s = cal.sim_horizon_s;
  tl->trace_nodes = tl->nodes.size();
  for (std::size_t k = 0; k < faults.faults.size(); ++k) {
    const auto& r = faults.faults[k].record;
    const int slot = r.value.fault == FaultKind::kUpdate ? 0 : r.value.slot;
    const double at =
        std::max(0.0, r.t_s - cal.start_offset_s);  // before the job started: at its start
    tl->nodes[static_cast<std::size_t>(slot)].push_back({at, static_cast<std::int32_t>(k)});
    ++tl->faults;
  }
  scenarios::TraceSource ts;
  ts.file = path;
  ts.format = "jsonl";
  ts.mode = "replay";
  ts.node_order = "in_order";
  ts.first_category = 0;
  ts.timelines = std::move(tl);
  return ts;
}

// ------------------------------------------------------------ run and report

struct Ran {
  std::vector<ReplicaResult> results;
  json result;                       // aggregate()'s document
  std::vector<std::string> records;  // replica 0's action records (RunOptions::action_records)
};

// `parked`: the live run's standbys, parked before its job started (RunOptions).
Ran run_scenario(const scenarios::Scenario& sc, const ReplayOptions& opt, const Registry& registry,
                 int parked) {
  RunOptions ro;
  ro.parked_standbys = parked;
  ro.incidents = !opt.out_dir.empty();
  ro.decisions = opt.decisions;
  ro.action_records = true;
  const auto t0 = std::chrono::steady_clock::now();
  Ran ran;
  try {
    RunStats stats;
    ran.results = run_replicas(sc, sc.replicas, opt.jobs, ro, registry, &stats);
  } catch (const policies::ModuleError& e) {
    throw ReplayError(e.what(), 2);  // a module of the user's failed: exit 2, as sim run
  } catch (const std::exception& e) {
    throw ReplayError(opt.log_path + ": " + e.what(), 1);
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ran.records = take_action_records(ran.results);
  ran.result = aggregate(sc, ran.results, wall);
  if (!opt.out_dir.empty()) {
    try {
      write_out_dir(opt.out_dir, ran.result, ran.results, sc);
    } catch (const std::exception& e) {
      throw ReplayError(e.what(), 1);
    }
  }
  return ran;
}

json calibration_json(const Calibration& cal) {
  json calj = json::object();
  calj["live.median_step_time_s"] = {
      {"value", cal.step.value}, {"source", cal.step.source}, {"samples", cal.step.samples}};
  calj["job.step_time_s"] = {{"value", cal.mean_step.value},
                             {"source", cal.mean_step.source},
                             {"samples", cal.mean_step.samples}};
  calj["live.checkpoint_every_steps"] = {
      {"value", cal.every.value}, {"source", cal.every.source}, {"samples", 1}};
  calj["live.start_offset_s"] = {{"value", cal.start_offset_s},
                                 {"source", "first successful StartJob action"},
                                 {"samples", 1}};
  for (const auto& [k, v] : cal.values)
    calj[k] = {{"value", v.value}, {"source", v.source}, {"samples", v.samples}};
  return calj;
}

json live_json(const LiveRun& run, const Calibration& cal) {
  json live_mech = json::object();
  for (const auto& [k, v] : live_mechanisms(run.log, cal.first_start)) live_mech[k] = v;
  const traces::SummaryRecord& live = cal.live;
  return {{"ettr", live.ettr},
          {"elapsed_s", live.elapsed_s},
          {"productive_s", live.productive_s},
          {"first_step", live.first_step},
          {"final_step", live.final_step},
          {"step_time_s", live.step_time_s},
          {"source", cal.live_source},
          {"resolved_by", live_mech}};
}

// The result document: what was replayed, the calibration, both ETTRs. The simulated ETTR
// in the live definition: steps counted at the median step time, over the whole live clock
// (Calibration's jitter_factor and offset_factor).
json replay_result(const LiveRun& run, const Calibration& cal, const ReplayedFaults& faults,
                   const std::string& stack, const scenarios::Scenario& sc, const Ran& ran) {
  json out;
  out["log"] = run.path;
  out["stack"] = stack;
  out["recorded_stack"] = run.log.header.stack;
  out["replicas"] = sc.replicas;
  out["seed"] = sc.seed;
  out["horizon_s"] = cal.horizon_s;
  out["step_time_s"] = sc.job.step_time_s;
  out["torn_tail"] = run.log.torn_tail;
  json kinds = json::object();
  for (const auto& [k, n] : faults.by_kind) kinds[k] = n;
  out["faults"] = {{"in_log", run.faults_in_log},
                   {"replayed", faults.faults.size()},
                   {"by_kind", kinds},
                   {"skipped", faults.skipped}};
  out["calibration"] = calibration_json(cal);
  std::size_t timed = 0;
  for (const auto& [k, xs] : sc.replay_durations)
    if (k != kInPlaceTakenKey)
      timed += static_cast<std::size_t>(
          std::count_if(xs.begin(), xs.end(), [](double x) { return !std::isnan(x); }));
  out["timed_as_live"] = timed;
  out["live"] = live_json(run, cal);
  out["sim"] = ran.result;
  std::vector<double> conv;
  for (const auto& r : ran.results) conv.push_back(r.ettr * cal.jitter_factor * cal.offset_factor);
  const Summary cs = summarize(conv);
  const double sim_ettr = cs.mean, live_ettr = cal.live.ettr;
  out["sim_ettr"] = {{"mean", cs.mean},
                     {"ci95", {cs.lo, cs.hi}},
                     {"raw_mean", ran.result["ettr"]["mean"]},
                     {"jitter_factor", cal.jitter_factor},
                     {"start_offset_factor", cal.offset_factor}};
  out["ettr_diff_pts"] = 100 * (sim_ettr - live_ettr);
  out["ettr_diff_rel"] = live_ettr > 0 ? (sim_ettr - live_ettr) / live_ettr : 0.0;
  const RunningSteps& p = cal.pauses;
  out["unmodelled_pauses"] = {{"seconds", p.pause_s},
                              {"gaps", p.pauses},
                              {"pts", cal.horizon_s > 0 ? 100 * p.pause_s / cal.horizon_s : 0.0}};
  try {  // the live run's decisions beside replica 0's (sim/replay_decisions.h)
    out["decisions"] = compare_with_live(run.log, run.path, ran.records, cal.start_offset_s,
                                         cal.horizon_s, sc.seed);
  } catch (const std::exception& e) {
    throw ReplayError(run.path + ": " + e.what(), 1);
  }
  return out;
}

// ------------------------------------------------------------ the text report

void text_faults(std::ostringstream& o, const json& faults) {
  o << "faults     " << faults.at("in_log").get<std::size_t>() << " in the log, "
    << faults.at("replayed").get<std::size_t>() << " replayed";
  const json& by_kind = faults.at("by_kind");
  if (!by_kind.empty()) {
    o << " (";
    bool first = true;
    for (auto it = by_kind.begin(); it != by_kind.end(); ++it)
      o << (first ? "" : ", ") << it.key() << " " << it.value().get<int>(), first = false;
    o << ")";
  }
  o << "\n";
  for (const auto& s : faults.at("skipped"))
    o << "  skipped line " << s["line"].get<std::size_t>() << ": " << s["reason"].get<std::string>()
      << "\n";
}

void text_calibration(std::ostringstream& o, const json& calj, std::size_t timed_as_live) {
  o << "calibration from the live run (the medians; " << timed_as_live
    << " actions of the recorded stack take their own live durations, the k-th of a kind as "
       "the live run's k-th):\n";
  for (auto it = calj.begin(); it != calj.end(); ++it)
    o << "  " << std::left << std::setw(38) << it.key() << std::right << std::setw(14)
      << fmt(it.value()["value"].get<double>(), it.key().find("bytes") != std::string::npos ? 0 : 3)
      << "  " << it.value()["source"].get<std::string>() << "\n";
}

void text_ettr(std::ostringstream& o, const json& out) {
  const double live = out.at("live").at("ettr").get<double>();
  const json& s = out.at("sim_ettr");
  const double sim = s.at("mean").get<double>();
  const double lo = s.at("ci95")[0].get<double>(), hi = s.at("ci95")[1].get<double>();
  const double horizon_s = out.at("horizon_s").get<double>();
  o << "\nETTR       live " << fmt(100 * live, 2) << "%  ("
    << out.at("live").at("source").get<std::string>() << ")\n";
  o << "           sim  " << fmt(100 * sim, 2) << "%  (95% CI " << fmt(100 * lo, 2) << " .. "
    << fmt(100 * hi, 2) << "%; simulator's own "
    << fmt(100 * out.at("sim").at("ettr").at("mean").get<double>(), 2) << "% x step median/mean "
    << fmt(s.at("jitter_factor").get<double>(), 4) << " x start offset "
    << fmt(s.at("start_offset_factor").get<double>(), 4) << ")\n";
  o << "           difference " << (sim >= live ? "+" : "") << fmt(100 * (sim - live), 2) << " pts";
  if (live > 0) o << " (" << fmt(100 * (sim - live) / live, 1) << "% of live)";
  const json& p = out.at("unmodelled_pauses");
  const double pause_s = p.at("seconds").get<double>();
  const int gaps = p.at("gaps").get<int>();
  if (gaps > 0)
    o << "\n           unmodelled: " << fmt(pause_s, 1) << " s of pauses between steps (" << gaps
      << " gaps over twice the median step; " << fmt(100 * pause_s / horizon_s, 2)
      << " pts of the live clock) that no record explains: a loaded host or a stalled disk; the"
         "\n           simulator models none of them";
}

void text_mechanisms(std::ostringstream& o, const json& live_mech, const json& simr) {
  o << "\n\nincidents resolved by          live   sim/replica\n";
  std::map<std::string, std::pair<double, double>> rows;
  for (auto it = live_mech.begin(); it != live_mech.end(); ++it)
    rows[it.key()].first = it.value().get<double>();
  const json& sim_mech = simr.at("resolved_by_per_replica");
  for (auto it = sim_mech.begin(); it != sim_mech.end(); ++it)
    rows[it.key()].second = it.value().get<double>();
  if (rows.empty()) o << "  (none)\n";
  for (const auto& [k, v] : rows)
    o << "  " << std::left << std::setw(26) << k << std::right << std::setw(8) << fmt(v.first, 0)
      << std::setw(14) << fmt(v.second, 2) << "\n";
  o << "faults injected per replica: "
    << fmt(simr.at("incidents").at("faults_injected_per_replica").get<double>(), 1)
    << ", incidents per replica: " << fmt(simr.at("incidents").at("per_replica").get<double>(), 1)
    << "\n";
}

}  // namespace

ReplayStack replay_stack(const LiveRun& run, const std::string& stack, const PolicyInfo& info,
                         Calibration& cal) {
  const auto& h = run.log.header;
  ReplayStack s;
  s.name = stack;
  s.info = &info;
  if (stack == h.stack) {
    for (const auto& [k, v] : h.params) s.params[k] = v;
    for (const auto& [k, name] : h.choices) {  // by name, as the live run chose them
      const ParamSpec* spec = info.find_param(k);
      if (!spec || spec->choice_index(name) < 0)
        throw ReplayError(run.path + ": policy.params." + k + ": the live run chose module '" +
                              name +
                              "', which is not registered here (load its plugin: --plugin FILE)",
                          2);
      s.params[k] = name;
    }
    calibrate_checkpoints(run.log, info, cal);
  }
  for (const auto& [k, v] : cal.values)
    if (k.rfind("policy.params.", 0) == 0) s.params[k.substr(14)] = v.value;
  s.sizes_pool = prune_params(info, s.params, cal.values);
  return s;
}

scenarios::Scenario replay_scenario(const LiveRun& run, const Calibration& cal,
                                    const ReplayedFaults& faults, const ReplayStack& stack,
                                    const ReplayOptions& opt, const Registry& registry) {
  const json doc = scenario_doc(run, cal, faults, stack, opt);
  scenarios::Scenario sc;
  try {
    sc = scenarios::parse_scenario(doc.dump(), run.path, opt.sets, registry);
  } catch (const scenarios::ScenarioError& e) {
    throw ReplayError(e.what(), 2);
  }
  if (sc.faults.size() != faults.faults.size())
    throw ReplayError(run.path + ": --set may not add or remove fault categories", 2);
  for (std::size_t k = 0; k < sc.faults.size(); ++k)
    if (faults.empty_signature[k]) sc.faults[k].signature.clear();  // e.g. SIGKILL: no log line
  sc.trace = replay_trace(run.path, faults, cal, static_cast<std::size_t>(sc.cluster.machines));
  // The recorded stack takes the recorded decisions' own times; another stack takes other
  // decisions, which the medians time.
  if (stack.name == run.log.header.stack) {
    sc.replay_durations = occurrence_durations(run.log);
    // Whether each start that asked to be in place was taken in place live (1) or not (0:
    // no rank held its state, as after a fault during a re-form), in log order: the backend's
    // choice, not the policy's, which the simulator's own blockers cannot see
    // (SimWorld::start_job reads it under this key).
    std::vector<double> taken;
    std::set<ActionId> in_place;
    for (const auto& o : run.log.outcomes)
      if (o.value.detail.rfind("in place:", 0) == 0) in_place.insert(o.value.id);
    for (const auto& a : run.log.actions)
      if (const auto* x = std::get_if<StartJob>(&a.value.action); x && x->in_place)
        taken.push_back(in_place.count(a.value.id) ? 1 : 0);
    if (!taken.empty()) sc.replay_durations[kInPlaceTakenKey] = std::move(taken);
  }
  return sc;
}

ReplayReport replay(const ReplayOptions& opt, const Registry& registry) {
  const LiveRun run = read_live_run(opt.log_path);
  if (run.log.torn_tail && opt.warn)
    opt.warn("warning: " + run.path + ":" + std::to_string(run.log.torn_line) +
             ": torn last line (a crash mid-write) left out");
  const std::string stack = opt.stack.empty() ? run.log.header.stack : opt.stack;
  const PolicyInfo& info = find_stack(registry, stack);
  Calibration cal = calibrate(run);
  const ReplayedFaults faults = replayed_faults(run, cal);
  const ReplayStack rs = replay_stack(run, stack, info, cal);
  const scenarios::Scenario sc = replay_scenario(run, cal, faults, rs, opt, registry);
  const Ran ran =
      run_scenario(sc, opt, registry, rs.sizes_pool ? run.log.header.standby_machines : 0);
  return {replay_result(run, cal, faults, stack, sc, ran), run.log.header};
}

std::string format_replay_text(const ReplayReport& report) {
  const json& out = report.out;
  const traces::EventLogHeader& h = report.header;
  std::ostringstream o;
  o << "replay     " << out.at("log").get<std::string>() << "  (recorded stack "
    << out.at("recorded_stack").get<std::string>() << ", replayed under "
    << out.at("stack").get<std::string>() << "; " << out.at("replicas").get<int>()
    << " replicas, seed " << out.at("seed").get<std::uint64_t>() << ")\n";
  o << "cluster    " << h.machines << " machines x " << h.gpus_per_machine << " GPUs (tp " << h.tp
    << ", pp " << h.pp << ", dp " << h.dp << "), " << h.standby_machines << " standby; horizon "
    << fmt(out.at("horizon_s").get<double>(), 1) << " s\n";
  text_faults(o, out.at("faults"));
  text_calibration(o, out.at("calibration"), out.value("timed_as_live", std::size_t{0}));
  text_ettr(o, out);
  text_mechanisms(o, out.at("live").at("resolved_by"), out.at("sim"));
  o << format_decisions_text(out.at("decisions"));
  return o.str();
}

}  // namespace faultline::sim