// faultline sim replay EVENTLOG --stack NAME: re-runs the fault history recorded by a
// live run (its event log, traces/event_log.h) in the simulator, under the recorded
// policy stack or another one, and sets the measured live ETTR beside the simulated one.
//
// The scenario is built in memory from the log: the cluster and job layout of the
// header, the healthy step time, the run's length as the horizon, and exactly the
// recorded faults (no modelled ones: every rate is zero), each its own category
// replayed at its time on its slot through Scenario::trace in "replay" mode. The
// environment's durations (process start, requeue, cold replacement, standby wake,
// stop-time tests, stack capture, replay, checkpoint stall, how long an exit takes to be
// seen) come from the live run's own measurements, not from the large-cluster defaults.
// The simulated ETTR is converted to the live run's definition (steps at the median step
// time, the whole live clock) before the two are compared.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "policies/builtin.h"
#include "scenarios/scenario.h"
#include "sim/cli/commands.h"
#include "sim/cli/flags.h"
#include "sim/report.h"
#include "sim/runner.h"
#include "traces/event_log.h"
#include "traces/stats.h"

namespace faultline::cli {

namespace {

using nlohmann::json;
using traces::EventLog;
using traces::FaultKind;
using traces::FaultRecord;
using traces::Timed;

constexpr const char* kHelp = R"(usage: faultline sim replay EVENTLOG [options]

Re-runs the fault history of a live run's event log in the simulator and prints the
live run's measured ETTR beside the simulated one (mean and 95% CI over replicas), the
difference in percentage points, and incidents by resolution mechanism, live and
simulated.

The scenario comes from the log: cluster and job layout from its header, the healthy
step time, the run's elapsed time as the horizon, and exactly its recorded faults (no
modelled faults), each at its time on its slot. Durations the simulator would otherwise
take from large-cluster defaults are the live run's own medians: process start
(StartJob), requeue, cold replacement and standby wake (AcquireMachines by mode),
stop-time tests (RunProbe by test), stack capture, replay, the checkpoint stall (from
progress samples), the collective timeout (hang to exit) and, per fault, how long its
exit took to be seen, with its exit code and log line (a NaN or silent corruption that
no exit followed, seen only in the step samples, is replayed as a NaN that does not
exit), and, when the run rescheduled nothing, the standby pool's refill from the
machines that came back to it after an eviction. The values used are printed.

The simulated ETTR is reported in the live definition (steps counted at the median
healthy step time, over the whole live clock): the simulator's own ETTR times the
live run's median/mean running step (step-time jitter) times the share of the run after
its first successful StartJob (the time before it, agents connecting, is lost in the
live run). Records after the summary (a controller shutting down) are left out.

options:
  --stack NAME        policy stack to replay under (default: the recorded one). The
                      recorded stack runs with the header's parameters, another stack
                      with its defaults
  --replicas N        replicas (default 20; the fault history is fixed, so they differ
                      only in the policies' and the symptom model's random draws)
  --seed S            seed (default: the header's)
  --jobs J            parallel replica processes (default 1)
  --set PATH=VALUE    override a field of the generated scenario, repeatable, as in
                      sim run (e.g. diagnosis.gpu_diag_s=30, job.init_s=8,
                      policy.params.checkpoint_interval_s=60); applied after calibration
  --format text|json  output (default text)
  --out DIR           also write result.json, replicas.csv and incidents.csv into DIR
  --decisions         record the policy's events and actions (decisions.log in --out)
  -h, --help          this text

A malformed log is an error "faultline: FILE:LINE: $.field: what was expected" (exit 2);
a torn last line (a crash mid-write) is left out with a warning.
)";

int usage(const std::string& m) { return usage_error(m); }

using traces::median;

// One calibrated environment value: what it is, where it came from.
struct Calibrated {
  double value = 0;
  std::string source;  // "StartJob median of 3", "default", ...
  int samples = 0;
};

// Median outcome durations of successful actions, keyed by action type (and mode or
// test: "AcquireMachines:requeue", "RunProbe:gpu-diag").
std::map<std::string, std::vector<double>> outcome_durations(const EventLog& log) {
  std::map<ActionId, std::string> key_of;
  for (const auto& a : log.actions) {
    std::string key = std::visit(
        [](const auto& x) -> std::string {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, StartJob>) return "StartJob";
          if constexpr (std::is_same_v<T, HotUpdate>) return "HotUpdate";
          if constexpr (std::is_same_v<T, RollBack>) return "RollBack";
          if constexpr (std::is_same_v<T, AcquireMachines>)
            return std::string("AcquireMachines:") + mode_name(x.mode);
          if constexpr (std::is_same_v<T, RunProbe>)
            return std::string("RunProbe:") + probe_name(x.test);
          if constexpr (std::is_same_v<T, CaptureStacks>) return "CaptureStacks";
          if constexpr (std::is_same_v<T, RunReplay>) return "RunReplay";
          return "";
        },
        a.value.action);
    if (!key.empty()) key_of[a.value.id] = key;
  }
  std::map<std::string, std::vector<double>> out;
  for (const auto& o : log.outcomes) {
    auto it = key_of.find(o.value.id);
    if (it != key_of.end() && o.value.ok) out[it->second].push_back(o.value.duration_s);
  }
  return out;
}

// Checkpoint stall per checkpoint, from progress samples one step apart: the excess
// over the healthy step time of the two steps around each checkpoint step (the stall
// shows up in one of them, whichever the job reports it in).
std::optional<Calibrated> checkpoint_stall(const EventLog& log, std::int64_t n,
                                           double step_time_s) {
  if (n <= 0) return std::nullopt;
  if (n == 1) return Calibrated{0, "every step checkpoints: the stall is inside the step time", 0};
  std::map<std::int64_t, double> dt_to;  // step -> time since the previous step (one step apart)
  const auto& p = log.progress;
  for (std::size_t i = 1; i < p.size(); ++i)
    if (!p[i].value.restart && p[i].value.step == p[i - 1].value.step + 1 &&
        p[i].t_s > p[i - 1].t_s)
      dt_to[p[i].value.step] = p[i].t_s - p[i - 1].t_s;
  std::vector<double> stalls;
  for (const auto& [step, dt] : dt_to) {
    if (step % n != 0) continue;
    auto next = dt_to.find(step + 1);
    if (next == dt_to.end()) continue;
    stalls.push_back(std::max(0.0, dt - step_time_s) + std::max(0.0, next->second - step_time_s));
  }
  if (stalls.empty()) return std::nullopt;
  return Calibrated{median(stalls),
                    "progress around " + std::to_string(stalls.size()) + " checkpoints",
                    static_cast<int>(stalls.size())};
}

// Mean wall time per step while the job trains normally: consecutive samples of one
// incarnation, leaving out the two steps around each checkpoint (the simulator models
// the checkpoint as a stall of its own), steps while a recorded slowdown is active (it
// models that as the fault), and outliers beyond twice the median (pauses the log does
// not explain). Jitter makes this mean longer than the median the live ETTR counts with.
// The outliers' time beyond the median step is `pause_s`: lost to the live ETTR, modelled
// by nothing in the simulator (an overloaded host, a stalled disk), so it is reported.
struct RunningSteps {
  double mean_s = 0;
  int count = 0;
  double pause_s = 0;
  int pauses = 0;
};
std::optional<RunningSteps> mean_running_step(const EventLog& log, std::int64_t n, double median_s,
                                              RunningSteps* pauses_only) {
  auto near_checkpoint = [&](std::int64_t a, std::int64_t b) {  // any step in (a, b]
    if (n <= 1) return false;
    if (b - a >= n) return true;
    for (std::int64_t s = a + 1; s <= b; ++s)
      if (s % n == 0 || (s - 1) % n == 0) return true;
    return false;
  };
  std::vector<double> slow_from;
  for (const auto& f : log.faults)
    if (f.value.fault == FaultKind::kSlow) slow_from.push_back(f.t_s);
  const auto& p = log.progress;
  double sum = 0;
  int count = 0;
  std::size_t next_slow = 0;
  bool slow = false;
  std::sort(slow_from.begin(), slow_from.end());
  for (std::size_t i = 0; i < p.size(); ++i) {
    if (p[i].value.restart) slow = false;  // a restart is where a slow machine can have left
    while (next_slow < slow_from.size() && slow_from[next_slow] <= p[i].t_s) {
      slow = true;
      ++next_slow;
    }
    if (i == 0 || slow || p[i].value.restart) continue;
    const auto& a = p[i - 1];
    const auto& b = p[i];
    if (b.value.step <= a.value.step || !(b.t_s > a.t_s) ||
        near_checkpoint(a.value.step, b.value.step))
      continue;
    const double per = (b.t_s - a.t_s) / static_cast<double>(b.value.step - a.value.step);
    if (per > 2 * median_s) {
      pauses_only->pause_s +=
          (b.t_s - a.t_s) - median_s * static_cast<double>(b.value.step - a.value.step);
      ++pauses_only->pauses;
      continue;
    }
    sum += per;
    ++count;
  }
  if (count == 0) return std::nullopt;
  RunningSteps r = *pauses_only;
  r.mean_s = sum / count;
  r.count = count;
  return r;
}

// Steps between checkpoints in the live run. The policy's plan (its SetCheckpointPlan
// before the first start) decides, rounded up to whole steps of the nominal step time as
// the live backend does (action.h); the header's value is the one known before the plan.
// `every_step_plan`: the plan asked for a save every step (interval 0, the peer module),
// which no interval parameter of the stack decided.
Calibrated checkpoint_every(const EventLog& log, bool* every_step_plan) {
  *every_step_plan = false;
  double first_start = std::numeric_limits<double>::infinity();
  for (const auto& a : log.actions)
    if (std::holds_alternative<StartJob>(a.value.action)) {
      first_start = a.t_s;
      break;
    }
  const SetCheckpointPlan* plan = nullptr;
  for (const auto& a : log.actions)
    if (a.t_s <= first_start)
      if (auto* p = std::get_if<SetCheckpointPlan>(&a.value.action)) plan = p;
  if (!plan)
    return {static_cast<double>(log.header.checkpoint_every_steps), "header checkpoint_every_steps",
            1};
  *every_step_plan = plan->interval.ns <= 0;
  // Whole steps, with a tolerance for the rounding of the division (30 s / 1 s is 30).
  const double every = plan->interval.ns <= 0 ? 1
                                              : std::ceil(static_cast<double>(plan->interval.ns) /
                                                              1e9 / log.header.nominal_step_time_s -
                                                          1e-9);
  return {std::max(1.0, every), "SetCheckpointPlan interval / nominal step, rounded up", 1};
}

// What the policy was shown after a fault: its first exit naming the fault's machine (or
// none), before `until`. `before_acting`: only exits before the policy's next
// disruptive action (a hang's watchdog exit, not the echo of a stop).
struct Observed {
  bool found = false;
  double lag_s = 0;
  int exit_code = 1;
  std::string signature;
};

Observed observe(const EventLog& log, const Timed<FaultRecord>& f, double until,
                 bool before_acting) {
  double acted = until;
  if (before_acting)
    for (const auto& a : log.actions)
      if (a.t_s >= f.t_s && a.t_s < acted &&
          (std::holds_alternative<StopJob>(a.value.action) ||
           std::holds_alternative<EvictMachines>(a.value.action) ||
           std::holds_alternative<AcquireMachines>(a.value.action)))
        acted = a.t_s;
  for (const auto& e : log.events) {
    if (e.t_s < f.t_s || e.t_s >= acted) continue;
    if (auto* x = std::get_if<ProcessExit>(&e.value);
        x && (x->machine == f.value.machine || x->machine == kNoMachine))
      return {true, e.t_s - f.t_s, x->exit_code, x->signature};
    if (auto* x = std::get_if<StartFailed>(&e.value);
        x && (x->machine == f.value.machine || x->machine == kNoMachine))
      return {true, e.t_s - f.t_s, 1, x->signature};
  }
  return {};
}

// Live incidents by resolution mechanism, attributed as the simulator does: the last
// mechanism named by an eviction, acquisition or start since the previous successful
// start is credited when a start (StartJob, HotUpdate, RollBack) succeeds.
// The job's first successful start (StartJob whose outcome is ok, or has none): the
// index into log.actions, or -1. Failed attempts before it (agents still connecting) are
// set-up, not incidents.
int first_successful_start(const EventLog& log) {
  std::map<ActionId, bool> ok;
  for (const auto& o : log.outcomes) ok[o.value.id] = o.value.ok;
  for (std::size_t i = 0; i < log.actions.size(); ++i) {
    if (!std::holds_alternative<StartJob>(log.actions[i].value.action)) continue;
    auto it = ok.find(log.actions[i].value.id);
    if (it == ok.end() || it->second) return static_cast<int>(i);
  }
  return -1;
}

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
    if (m != Mechanism::kNone) pending = m;
    if (!start) continue;
    auto it = ok.find(a.value.id);
    if (it != ok.end() && !it->second) continue;  // failed start: the incident is still open
    if (pending != Mechanism::kNone) out[mechanism_name(pending)] += 1;
    pending = Mechanism::kNone;
  }
  return out;
}

std::string fmt(double v, int prec) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(prec) << v;
  return o.str();
}

}  // namespace

int sim_replay(const std::vector<std::string>& args) {
  std::string path, stack;
  SimFlags f;
  f.replicas = 20;
  bool decisions = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (const int r = sim_flag(args, i, f, {"text", "json", "table"})) {
      if (r < 0) return 2;
      continue;
    }
    if (a == "-h" || a == "--help") {
      std::fputs(kHelp, stdout);
      return 0;
    } else if (a == "--stack") {
      if (i + 1 >= args.size() || args[i + 1].empty())
        return usage("--stack: expected a policy stack name");
      stack = args[++i];
    } else if (a == "--decisions") {
      decisions = true;
    } else if (!a.empty() && a[0] == '-') {
      return usage("unknown option " + a);
    } else if (path.empty()) {
      path = a;
    } else {
      return usage("unexpected argument " + a);
    }
  }
  std::vector<std::string> sets = f.sets;
  if (f.allow_unused) sets.push_back("policy.allow_unused_params=true");
  const long long replicas = f.replicas, jobs = f.jobs, seed = f.seed;
  const std::string format = f.format == "table" ? "text" : f.format;
  const std::string& out_dir = f.out_dir;
  if (path.empty()) return usage("sim replay: expected EVENTLOG");

  EventLog log;
  try {
    log = traces::read_event_log(path);
  } catch (const traces::EventLogError& e) {
    std::fprintf(stderr, "faultline: %s\n", e.what());
    return 2;
  }
  const std::size_t faults_in_log = log.faults.size();
  std::vector<std::size_t> after_summary;  // lines of faults logged after the run ended
  if (log.summary) {
    for (const auto& f : log.faults)
      if (f.line > log.summary->line) after_summary.push_back(f.line);
    // The run ended at its summary; what a shutting-down controller logs after it (the
    // policy reacting to the ranks being stopped) is not part of the run.
    const std::size_t end = log.summary->line;
    auto trim = [end](auto& v) {
      v.erase(std::remove_if(v.begin(), v.end(), [end](const auto& r) { return r.line > end; }),
              v.end());
    };
    trim(log.events);
    trim(log.actions);
    trim(log.outcomes);
    trim(log.faults);
    trim(log.progress);
  }
  if (log.torn_tail)
    std::fprintf(stderr,
                 "faultline: warning: %s:%zu: torn last line (a crash mid-write) left out\n",
                 path.c_str(), log.torn_line);
  const auto& h = log.header;
  const std::string recorded = h.stack;
  if (stack.empty()) stack = recorded;
  Registry registry = policies::builtin_registry();
  const PolicyInfo* info = registry.find(stack);
  if (!info) {
    std::string all;
    for (const auto& n : registry.names()) all += (all.empty() ? "" : ", ") + n;
    return usage("--stack: expected a registered stack (" + all + "), got \"" + stack + "\"");
  }

  // ------------------------------------------------------------ what the log measured
  const double last_t = log.records.empty() ? 0 : log.records.back().t_s;
  const double horizon_s = log.summary ? log.summary->value.elapsed_s : last_t;
  if (!(horizon_s > 0)) {
    std::fprintf(
        stderr,
        "faultline: %s: the run has no length: no summary record and no record after t_s 0\n",
        path.c_str());
    return 2;
  }
  std::map<std::string, Calibrated> cal;  // scenario path -> value
  Calibrated step;
  if (log.summary && log.summary->value.step_time_s > 0) {
    step = {log.summary->value.step_time_s, "summary record (median healthy step)", 1};
  } else if (auto s = traces::healthy_step_time(log.progress)) {
    step = {*s, "median healthy step of the progress samples",
            static_cast<int>(log.progress.size())};
  } else {
    step = {h.nominal_step_time_s, "header nominal_step_time_s (no healthy steps logged)", 0};
  }
  traces::SummaryRecord live =
      log.summary ? log.summary->value
                  : traces::summarize_progress(log.progress, horizon_s, step.value);
  // The simulator trains at the mean running step; the live ETTR counts steps at the
  // median. Their ratio converts the simulated ETTR to the live definition.
  bool every_step_plan = false;
  const Calibrated every = checkpoint_every(log, &every_step_plan);
  const auto every_steps = static_cast<std::int64_t>(every.value);
  Calibrated mean_step = step;
  RunningSteps pauses;
  if (auto m = mean_running_step(log, every_steps, step.value, &pauses))
    mean_step = {m->mean_s,
                 "mean running step of " + std::to_string(m->count) + " progress samples",
                 m->count};
  else
    mean_step.source += " (no running steps to average)";
  const double jitter_factor = step.value / mean_step.value;
  // The live clock starts before the job does (agents connecting); the simulated job
  // starts at its time zero. Simulate from the first successful StartJob and count the
  // time before it as lost, as the live ETTR does.
  const int first_start = first_successful_start(log);
  double start_offset_s = 0;
  if (first_start >= 0 && log.actions[first_start].t_s < horizon_s)
    start_offset_s = log.actions[first_start].t_s;
  const double sim_horizon_s = horizon_s - start_offset_s;
  const double offset_factor = sim_horizon_s / horizon_s;
  const std::string live_source =
      log.summary ? "summary record" : "computed from progress samples (no summary)";

  const auto durations = outcome_durations(log);
  auto from = [&](const std::string& target, std::initializer_list<const char*> keys, double def,
                  const std::string& def_note) {
    std::vector<double> xs;
    std::string used;
    for (const char* k : keys) {
      auto it = durations.find(k);
      if (it == durations.end()) continue;
      xs.insert(xs.end(), it->second.begin(), it->second.end());
      used += (used.empty() ? "" : "+") + std::string(k);
    }
    if (xs.empty()) {
      cal[target] = {def, def_note, 0};
    } else {
      cal[target] = {median(xs), used + " median of " + std::to_string(xs.size()),
                     static_cast<int>(xs.size())};
    }
  };
  const std::string not_measured = "default (not measured in this run)";
  const scenarios::SchedulerSpec sched;
  const scenarios::DiagnosisSpec diag;
  from("job.init_s", {"StartJob"}, 0, not_measured);
  if (cal["job.init_s"].samples == 0)
    from("job.init_s", {"HotUpdate", "RollBack"}, 0, not_measured);
  from("cluster.scheduler.requeue_base_s", {"AcquireMachines:requeue"}, sched.requeue_base_s,
       not_measured);
  from("cluster.scheduler.reschedule_base_s", {"AcquireMachines:reschedule"},
       sched.reschedule_base_s, not_measured);
  from("diagnosis.standby_wake_s", {"AcquireMachines:standby"}, diag.standby_wake_s, not_measured);
  // A stop-time test the run never needed takes what the run's other tests took (the
  // same machines and programs), not the big-cluster default.
  std::vector<double> all_probes;
  for (const auto& [k, xs] : durations)
    if (k.rfind("RunProbe:", 0) == 0 && k != "RunProbe:inter-all-gather")
      all_probes.insert(all_probes.end(), xs.begin(), xs.end());
  const bool have_probes = !all_probes.empty();
  const double probe_fallback = have_probes ? median(all_probes) : 0;
  const std::string probe_note = "median of the run's other stop-time tests (this one never ran)";
  auto probe = [&](const std::string& target, const char* key, double def) {
    from(target, {key}, have_probes ? probe_fallback : def,
         have_probes ? probe_note : not_measured);
  };
  probe("diagnosis.gpu_diag_s", "RunProbe:gpu-diag", diag.gpu_diag_s);
  probe("diagnosis.intra_all_to_all_s", "RunProbe:intra-all-to-all", diag.intra_all_to_all_s);
  probe("diagnosis.bitwise_s", "RunProbe:bitwise", diag.bitwise_s);
  probe("diagnosis.stress_s", "RunProbe:stress", diag.stress_s);
  from("diagnosis.capture_s", {"CaptureStacks"}, diag.capture_s, not_measured);
  from("diagnosis.replay_s", {"RunReplay"}, diag.replay_s, not_measured);
  if (cal["cluster.scheduler.reschedule_base_s"].samples == 0) {
    // A live run that never rescheduled still refilled its standby pool: machines taken
    // out come back once they pass their repair check (or an operator repairs them), and
    // a standby shortfall waits for them (realexec/live_world.cc). The simulator refills
    // its pool, and fills a shortfall, from the scheduler after reschedule_base_s (plus
    // the self-check, gpu_diag_s): left at the large-cluster default (120 s), a pool
    // that the run refilled in seconds stays empty for minutes. Each return (the live
    // controller's note "NAME ... back in the standby pool") is timed from the eviction
    // before it.
    std::vector<double> evicted_at, back;
    for (const auto& a : log.actions)
      if (std::holds_alternative<EvictMachines>(a.value.action)) evicted_at.push_back(a.t_s);
    for (const auto& n : log.notes) {
      if (n.value.find("back in the standby pool") == std::string::npos) continue;
      auto it = std::upper_bound(evicted_at.begin(), evicted_at.end(), n.t_s);
      if (it != evicted_at.begin()) back.push_back(n.t_s - *std::prev(it));
    }
    if (!back.empty())
      cal["cluster.scheduler.reschedule_base_s"] = {
          std::max(0.0, median(back) - cal["diagnosis.gpu_diag_s"].value),
          "standby pool returns, median of " + std::to_string(back.size()) +
              " (eviction to \"back in the standby pool\", less gpu_diag_s)",
          static_cast<int>(back.size())};
  }
  // The inter-machine all-gather is a ring of real flows in the simulator: each NIC
  // carries one flow out and one in, so a test of T seconds moves about T x NIC/2 bytes.
  // The simulator's network model (CM02) completes such a ring 1.05x slower than the
  // ideal fair share (measured; tests/sim/replay_test.cc checks the probe's time).
  const double nic_gbps = 100, kFlowOverhead = 1.05;
  {
    auto it = durations.find("RunProbe:inter-all-gather");
    if (it != durations.end()) {
      const double t = median(it->second);
      cal["diagnosis.inter_all_gather_bytes"] = {
          t * nic_gbps * 1e9 / 8 / 2 / kFlowOverhead,
          "RunProbe:inter-all-gather median of " + std::to_string(it->second.size()) + " (" +
              fmt(t, 2) + " s at " + fmt(nic_gbps, 0) + " Gb/s NICs, approximate)",
          static_cast<int>(it->second.size())};
    } else {
      cal["diagnosis.inter_all_gather_bytes"] = {diag.inter_all_gather_bytes * nic_gbps / 3200,
                                                 not_measured, 0};
    }
  }

  // ------------------------------------------------------------ faults
  struct Replayed {
    const Timed<FaultRecord>* rec;
    Observed seen;
  };
  std::vector<Replayed> replayed;
  json skipped = json::array();
  for (std::size_t line : after_summary)
    skipped.push_back({{"line", line}, {"reason", "after the summary record (the run had ended)"}});
  std::vector<double> hang_lags;
  std::map<std::string, int> by_kind;
  for (std::size_t i = 0; i < log.faults.size(); ++i) {
    const auto& f = log.faults[i];
    const bool job_wide = f.value.fault == FaultKind::kUpdate;
    if (!job_wide && (f.value.slot < 0 || f.value.slot >= h.machines)) {
      skipped.push_back(
          {{"line", f.line},
           {"reason", "slot " + std::to_string(f.value.slot) + " is not a job slot"}});
      continue;
    }
    if (f.t_s >= horizon_s) {
      skipped.push_back({{"line", f.line}, {"reason", "after the end of the run"}});
      continue;
    }
    double until = horizon_s;
    for (std::size_t k = i + 1; k < log.faults.size(); ++k)
      if (log.faults[k].t_s > f.t_s) {
        until = log.faults[k].t_s;
        break;
      }
    const bool hangs = f.value.fault == FaultKind::kHang || f.value.fault == FaultKind::kStop;
    Observed seen = job_wide ? Observed{} : observe(log, f, until, hangs);
    if (hangs && seen.found) hang_lags.push_back(seen.lag_s);
    replayed.push_back({&f, seen});
    ++by_kind[traces::fault_kind_name(f.value.fault)];
  }
  if (!hang_lags.empty())
    cal["job.collective_timeout_s"] = {
        median(hang_lags), "hang to watchdog exit, median of " + std::to_string(hang_lags.size()),
        static_cast<int>(hang_lags.size())};
  else
    cal["job.collective_timeout_s"] = {600, "default (no hang reached its watchdog in this run)",
                                       0};

  json categories = json::array();
  std::vector<bool> empty_signature;
  std::vector<traces::Scope> scopes;
  for (std::size_t k = 0; k < replayed.size(); ++k) {
    const auto& f = replayed[k].rec->value;
    const Observed& seen = replayed[k].seen;
    json c;
    c["name"] = std::string(traces::fault_kind_name(f.fault)) + "#" + std::to_string(k + 1) +
                "@line" + std::to_string(replayed[k].rec->line);
    c["rate_per_machine_day"] = 0;
    c["scope"] = "machine";
    c["persistent"] = f.persistent;
    std::string symptom = "crash", cls = "explicit", alert, sig = seen.signature;
    bool machine_down_lag = false;
    int code = seen.found ? seen.exit_code : 1;
    switch (f.fault) {
      case FaultKind::kKill:
        if (!seen.found) code = 137;
        break;
      case FaultKind::kMachineDown:
        // Live mode sees a lost machine at once as its agent's connection dropping (a host
        // alert); the peers' exits come after. The simulator polls host inspection every
        // inspect_host_s, so the exit is placed just after that for the alert to come
        // first, as it did live; a stack without inspection sees the crash.
        alert = "host";
        if (!seen.found)
          sig = "agent lost: " + (f.detail.empty() ? std::string("machine down") : f.detail);
        machine_down_lag = true;
        break;
      case FaultKind::kCrash:
        if (!seen.found) sig = f.detail;
        break;
      case FaultKind::kHang:
      case FaultKind::kStop:
        // A rank hung in a collective stays hung until its processes are killed, like a
        // frozen one: stack aggregation finds it either way.
        symptom = "hang";
        cls = "implicit";
        c["persistent"] = true;
        break;
      case FaultKind::kNan:
      case FaultKind::kSdc:
        // Seen as an exit (a job with a NaN check), or only in the step samples: a job
        // that reports its loss and trains on until the policy stops it, as the reference
        // job does. Then the simulated job does not exit either; replayed as an exit at
        // once, the stack took the crash path (stop-time tests, reattempts on the
        // corrupt machine) instead of the NaN path the run took (bit-wise test, replay).
        symptom = "nan";
        cls = "implicit";
        if (!seen.found) c["exits"] = false;
        break;
      case FaultKind::kSlow:
        symptom = "slowdown";
        cls = "implicit";
        c["slowdown_factor"] = std::strtod(f.detail.c_str(), nullptr);
        break;
      case FaultKind::kNicDown:
        alert = "nic";
        if (!seen.found) symptom = "hang";  // nothing exited: the job stalled on the network
        break;
      case FaultKind::kUpdate:
        symptom = "manual";
        cls = "manual";
        c["scope"] = "job";
        c["persistent"] = false;
        break;
    }
    c["symptom"] = symptom;
    c["class"] = cls;
    // Stop-time tests find what the live run's tests could find: a transient fault leaves a
    // healthy machine (nothing to find); silent corruption after N steps escapes the
    // one-step bit-wise test and is reproduced by replay.
    {
      json recall = json::object();
      const bool sdc = f.fault == FaultKind::kSdc;
      for (int k = 0; k < kProbeKinds; ++k)
        recall[probe_key(static_cast<ProbeKind>(k))] =
            f.fault == FaultKind::kNicDown &&
                    static_cast<ProbeKind>(k) == ProbeKind::kInterAllGather
                ? 1.0
                : 0.0;
      recall["replay"] = sdc || f.persistent ? 1.0 : 0.0;
      c["recall"] = recall;
    }
    if (!alert.empty()) c["alert"] = alert;
    const bool exits = symptom == "crash" || (symptom == "nan" && seen.found);
    if (exits) {
      c["exit_code"] = std::clamp(code, 0, 255);
      double lag = seen.found ? seen.lag_s : 0.0;
      if (machine_down_lag) {
        auto it = h.params.find("inspect_host_s");
        lag = std::max(lag, (it != h.params.end() ? it->second : 2.0) + 0.5);
      }
      c["observe_after_s"] = lag;
      if (!sig.empty()) c["signature"] = sig;
    }
    empty_signature.push_back(exits && sig.empty());
    scopes.push_back(f.fault == FaultKind::kUpdate ? traces::Scope::kJob : traces::Scope::kNode);
    categories.push_back(std::move(c));
  }

  // ------------------------------------------------------------ the scenario
  json params = json::object();
  if (stack == recorded)
    for (const auto& [k, v] : h.params) params[k] = v;
  auto ckpt = checkpoint_stall(log, every_steps, mean_step.value);
  std::string ckpt_param;
  if (stack == recorded) {
    for (const char* p : {"checkpoint_write_s", "checkpoint_blocking_s"})
      if (info->find_param(p)) ckpt_param = p;
    if (ckpt && !ckpt_param.empty()) cal["policy.params." + ckpt_param] = *ckpt;
    // The interval the run checkpointed at, in training time at the simulated step: a
    // small live run's is often under a second, and is taken as it is. A plan that saved
    // every step (the peer module) read no interval parameter; the replayed stack plans
    // every step again, so there is nothing to calibrate.
    if (every_steps > 0 && !every_step_plan && info->find_param("checkpoint_interval_s"))
      cal["policy.params.checkpoint_interval_s"] = {
          static_cast<double>(every_steps) * mean_step.value,
          std::to_string(every_steps) + " steps between checkpoints x running step", 1};
  }
  for (const auto& [k, v] : cal)
    if (k.rfind("policy.params.", 0) == 0) params[k.substr(14)] = v.value;
  // The header records every resolved parameter, and a calibrated one may not apply either
  // (an interval under an every-step plan): those the replayed stack will not read with its
  // module choices are left out, as setting them would change nothing (and is refused).
  bool stack_sizes_pool = false;
  {
    std::map<std::string, double> chosen;
    for (const auto& [k, v] : params.items())
      if (v.is_number() && info->find_param(k)) chosen[k] = v.get<double>();
    Params values;
    const bool resolved = !Params::resolve(info->params, chosen, &values);
    // A stack with a standby module sizes its own pool (standby_pool): the scenario then
    // leaves cluster.standby_machines out, as a scenario must (one knob per stack).
    const ParamSpec* pool = info->find_param("standby_pool");
    stack_sizes_pool = resolved && pool && param_is_read(*info, *pool, values);
    if (resolved)
      for (const auto& [k, v] : chosen) {
        const ParamSpec* spec = info->find_param(k);
        if (param_is_read(*info, *spec, values)) continue;
        params.erase(k);
        cal.erase("policy.params." + k);
      }
  }

  json doc;
  doc["description"] = "Replay of the live event log " + path + " (stack " + recorded + ", " +
                       std::to_string(faults_in_log) + " recorded faults) under " + stack + ".";
  doc["seed"] = seed >= 0 ? static_cast<std::int64_t>(seed)
                          : static_cast<std::int64_t>(h.seed & 0x7fffffffffffffffull);
  doc["replicas"] = replicas;
  doc["cluster"] = {{"machines", h.machines},
                    {"gpus_per_machine", h.gpus_per_machine},
                    {"storage_hosts", 1},
                    {"nic_gbps", nic_gbps},
                    {"link_latency_us", 0},
                    {"scheduler",
                     {{"requeue_base_s", cal["cluster.scheduler.requeue_base_s"].value},
                      {"requeue_per_machine_s", 0},
                      {"reschedule_base_s", cal["cluster.scheduler.reschedule_base_s"].value},
                      {"reschedule_per_machine_s", 0}}}};
  if (!stack_sizes_pool) doc["cluster"]["standby_machines"] = h.standby_machines;
  doc["job"] = {{"tp", h.tp},
                {"pp", h.pp},
                {"dp", h.dp},
                {"step_time_s", mean_step.value},
                {"checkpoint_bytes_per_machine", 0},
                {"image_bytes", 0},
                {"init_s", cal["job.init_s"].value},
                {"collective_timeout_s", cal["job.collective_timeout_s"].value},
                {"horizon_days", sim_horizon_s / 86400.0}};
  doc["faults"] = {{"categories", categories}};
  json d = json::object();
  for (const auto& [k, v] : cal)
    if (k.rfind("diagnosis.", 0) == 0) d[k.substr(10)] = v.value;
  doc["diagnosis"] = d;
  doc["policy"] = {{"stack", stack}, {"params", params}};

  scenarios::Scenario sc;
  try {
    sc = scenarios::parse_scenario(doc.dump(), path, sets, registry);
  } catch (const scenarios::ScenarioError& e) {
    std::fprintf(stderr, "faultline: %s\n", e.what());
    return 2;
  }
  if (sc.faults.size() != replayed.size()) {
    std::fprintf(stderr, "faultline: %s: --set may not add or remove fault categories\n",
                 path.c_str());
    return 2;
  }
  for (std::size_t k = 0; k < sc.faults.size(); ++k)
    if (empty_signature[k]) sc.faults[k].signature.clear();  // e.g. SIGKILL: no log line
  {
    // The recorded faults, as a trace replayed in order: timeline i drives job slot i.
    auto tl = std::make_shared<traces::FleetTimelines>();
    tl->nodes.resize(static_cast<std::size_t>(sc.cluster.machines));
    tl->category_scope = scopes;
    tl->window_start_s = 0;
    tl->window_end_s = sim_horizon_s;
    tl->trace_nodes = tl->nodes.size();
    for (std::size_t k = 0; k < replayed.size(); ++k) {
      const auto& r = *replayed[k].rec;
      const int slot = r.value.fault == FaultKind::kUpdate ? 0 : r.value.slot;
      const double at =
          std::max(0.0, r.t_s - start_offset_s);  // before the job started: at its start
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
    sc.trace = std::move(ts);
  }

  // ------------------------------------------------------------ run
  sim::RunOptions opt;
  opt.incidents = !out_dir.empty();
  opt.decisions = decisions;
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<sim::ReplicaResult> results;
  try {
    sim::RunStats stats;
    results = sim::run_replicas(sc, sc.replicas, static_cast<int>(jobs), opt, registry, &stats);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "faultline: %s: %s\n", path.c_str(), e.what());
    return 1;
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  json simr = sim::aggregate(sc, results, wall);
  if (!out_dir.empty()) {
    try {
      sim::write_out_dir(out_dir, simr, results, sc);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "faultline: %s\n", e.what());
      return 1;
    }
  }

  // ------------------------------------------------------------ report
  json out;
  out["log"] = path;
  out["stack"] = stack;
  out["recorded_stack"] = recorded;
  out["replicas"] = sc.replicas;
  out["seed"] = sc.seed;
  out["horizon_s"] = horizon_s;
  out["step_time_s"] = sc.job.step_time_s;
  out["torn_tail"] = log.torn_tail;
  json kinds = json::object();
  for (const auto& [k, n] : by_kind) kinds[k] = n;
  out["faults"] = {{"in_log", faults_in_log},
                   {"replayed", replayed.size()},
                   {"by_kind", kinds},
                   {"skipped", skipped}};
  json calj = json::object();
  calj["live.median_step_time_s"] = {
      {"value", step.value}, {"source", step.source}, {"samples", step.samples}};
  calj["job.step_time_s"] = {
      {"value", mean_step.value}, {"source", mean_step.source}, {"samples", mean_step.samples}};
  calj["live.checkpoint_every_steps"] = {
      {"value", every.value}, {"source", every.source}, {"samples", 1}};
  calj["live.start_offset_s"] = {
      {"value", start_offset_s}, {"source", "first successful StartJob action"}, {"samples", 1}};
  for (const auto& [k, v] : cal)
    calj[k] = {{"value", v.value}, {"source", v.source}, {"samples", v.samples}};
  out["calibration"] = calj;
  json live_mech = json::object();
  for (const auto& [k, v] : live_mechanisms(log, first_start)) live_mech[k] = v;
  out["live"] = {{"ettr", live.ettr},
                 {"elapsed_s", live.elapsed_s},
                 {"productive_s", live.productive_s},
                 {"first_step", live.first_step},
                 {"final_step", live.final_step},
                 {"step_time_s", live.step_time_s},
                 {"source", live_source},
                 {"resolved_by", live_mech}};
  out["sim"] = simr;
  // The simulated ETTR in the live definition: steps counted at the median step time,
  // over the whole live clock (see jitter_factor and offset_factor above).
  std::vector<double> conv;
  for (const auto& r : results) conv.push_back(r.ettr * jitter_factor * offset_factor);
  const sim::Summary cs = sim::summarize(conv);
  const double sim_ettr = cs.mean;
  out["sim_ettr"] = {{"mean", cs.mean},
                     {"ci95", {cs.lo, cs.hi}},
                     {"raw_mean", simr["ettr"]["mean"]},
                     {"jitter_factor", jitter_factor},
                     {"start_offset_factor", offset_factor}};
  out["ettr_diff_pts"] = 100 * (sim_ettr - live.ettr);
  out["ettr_diff_rel"] = live.ettr > 0 ? (sim_ettr - live.ettr) / live.ettr : 0.0;
  out["unmodelled_pauses"] = {{"seconds", pauses.pause_s},
                              {"gaps", pauses.pauses},
                              {"pts", horizon_s > 0 ? 100 * pauses.pause_s / horizon_s : 0.0}};
  if (format == "json") {
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  std::ostringstream o;
  o << "replay     " << path << "  (recorded stack " << recorded << ", replayed under " << stack
    << "; " << sc.replicas << " replicas, seed " << sc.seed << ")\n";
  o << "cluster    " << h.machines << " machines x " << h.gpus_per_machine << " GPUs (tp " << h.tp
    << ", pp " << h.pp << ", dp " << h.dp << "), " << h.standby_machines << " standby; horizon "
    << fmt(horizon_s, 1) << " s\n";
  o << "faults     " << faults_in_log << " in the log, " << replayed.size() << " replayed";
  if (!by_kind.empty()) {
    o << " (";
    bool first = true;
    for (const auto& [k, n] : by_kind) o << (first ? "" : ", ") << k << " " << n, first = false;
    o << ")";
  }
  o << "\n";
  for (const auto& s : skipped)
    o << "  skipped line " << s["line"].get<std::size_t>() << ": " << s["reason"].get<std::string>()
      << "\n";
  o << "calibration from the live run:\n";
  for (auto it = calj.begin(); it != calj.end(); ++it)
    o << "  " << std::left << std::setw(38) << it.key() << std::right << std::setw(14)
      << fmt(it.value()["value"].get<double>(), it.key().find("bytes") != std::string::npos ? 0 : 3)
      << "  " << it.value()["source"].get<std::string>() << "\n";
  o << "\nETTR       live " << fmt(100 * live.ettr, 2) << "%  (" << live_source << ")\n";
  o << "           sim  " << fmt(100 * sim_ettr, 2) << "%  (95% CI " << fmt(100 * cs.lo, 2)
    << " .. " << fmt(100 * cs.hi, 2) << "%; simulator's own "
    << fmt(100 * simr["ettr"]["mean"].get<double>(), 2) << "% x step median/mean "
    << fmt(jitter_factor, 4) << " x start offset " << fmt(offset_factor, 4) << ")\n";
  o << "           difference " << (sim_ettr >= live.ettr ? "+" : "")
    << fmt(100 * (sim_ettr - live.ettr), 2) << " pts";
  if (live.ettr > 0) o << " (" << fmt(100 * (sim_ettr - live.ettr) / live.ettr, 1) << "% of live)";
  if (pauses.pauses > 0)
    o << "\n           unmodelled: " << fmt(pauses.pause_s, 1) << " s of pauses between steps ("
      << pauses.pauses << " gaps over twice the median step; "
      << fmt(100 * pauses.pause_s / horizon_s, 2)
      << " pts of the live clock) that no record explains: a loaded host or a stalled disk; the"
         "\n           simulator models none of them";
  o << "\n\nincidents resolved by          live   sim/replica\n";
  std::map<std::string, std::pair<double, double>> rows;
  for (auto it = live_mech.begin(); it != live_mech.end(); ++it)
    rows[it.key()].first = it.value().get<double>();
  for (auto it = simr["resolved_by_per_replica"].begin();
       it != simr["resolved_by_per_replica"].end(); ++it)
    rows[it.key()].second = it.value().get<double>();
  if (rows.empty()) o << "  (none)\n";
  for (const auto& [k, v] : rows)
    o << "  " << std::left << std::setw(26) << k << std::right << std::setw(8) << fmt(v.first, 0)
      << std::setw(14) << fmt(v.second, 2) << "\n";
  o << "faults injected per replica: "
    << fmt(simr["incidents"]["faults_injected_per_replica"].get<double>(), 1)
    << ", incidents per replica: " << fmt(simr["incidents"]["per_replica"].get<double>(), 1)
    << "\n";
  std::cout << o.str();
  return 0;
}

}  // namespace faultline::cli
