// The first stages of `faultline sim replay` (sim/replay.h): reading and trimming a live run's
// event log, and measuring the environment from it (step times, checkpoint spacing and stall,
// action durations, the standby pool's returns) into scenario fields. The helpers in the
// anonymous namespace are the measurements on the log.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "sim/replay.h"
#include "sim/replay_internal.h"
#include "traces/stats.h"

namespace faultline::sim {

namespace {

using traces::EventLog;
using traces::FaultKind;
using traces::median;

using replay_internal::first_successful_start;
using replay_internal::fmt;

using Durations = std::map<std::string, std::vector<double>>;

// The live run's timed actions in log order: each one's key (its action type, and mode or
// test: "AcquireMachines:requeue", "RunProbe:gpu-diag"; the run's first successful start is
// "StartJob:first", an in-place one, whose outcome begins "in place:", "StartJob:inplace", the
// other starts "StartJob") and its outcome duration, NaN when it did not
// succeed or measured something the simulator models itself: an acquisition that waited for
// machines (the live note "MODE waits for machines: ..." before its outcome: a standby
// shortfall filled by a machine back from repair) measured the wait, not a wake or a
// reschedule (calibrate_pool_returns).
struct TimedAction {
  std::size_t index;  // into log.actions
  std::string key;
  double duration_s;
};

std::vector<TimedAction> timed_actions(const EventLog& log) {
  std::map<ActionId, std::size_t> line_of;
  for (const auto& a : log.actions)
    if (std::holds_alternative<AcquireMachines>(a.value.action)) line_of[a.value.id] = a.line;
  std::vector<std::size_t> waits;
  for (const auto& n : log.notes)
    if (n.value.find(" waits for machines: ") != std::string::npos) waits.push_back(n.line);
  auto waited = [&](ActionId id, std::size_t outcome_line) {
    auto it = line_of.find(id);
    return it != line_of.end() && std::any_of(waits.begin(), waits.end(), [&](std::size_t l) {
             return l > it->second && l < outcome_line;
           });
  };
  std::map<ActionId, double> took;
  std::set<ActionId> in_place;  // starts taken in place (live mode's outcome says so)
  for (const auto& o : log.outcomes) {
    if (o.value.ok && !waited(o.value.id, o.line)) took[o.value.id] = o.value.duration_s;
    if (o.value.detail.rfind("in place:", 0) == 0) in_place.insert(o.value.id);
  }
  const int first = first_successful_start(log);
  std::vector<TimedAction> out;
  for (std::size_t i = 0; i < log.actions.size(); ++i) {
    const auto& a = log.actions[i];
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
    if (key.empty()) continue;
    if (key == "StartJob" && static_cast<int>(i) == first) key = "StartJob:first";
    if (key == "StartJob" && in_place.count(a.value.id)) key = "StartJob:inplace";
    const auto it = took.find(a.value.id);
    out.push_back({i, key, it == took.end() ? std::nan("") : it->second});
  }
  return out;
}

// Outcome durations of the successful actions by key, for the medians.
std::map<std::string, std::vector<double>> outcome_durations(const EventLog& log) {
  std::map<std::string, std::vector<double>> out;
  for (const auto& t : timed_actions(log))
    if (!std::isnan(t.duration_s)) out[t.key].push_back(t.duration_s);
  return out;
}

}  // namespace

// The same, occurrence by occurrence from the first successful start on (the simulated job
// starts there): the k-th action of a key in the replay takes the live run's k-th, so that a
// fault lands in the same phase of a recovery as it did live. NaN: the median.
std::map<std::string, std::vector<double>> replay_internal::occurrence_durations(
    const EventLog& log) {
  const int first = first_successful_start(log);
  std::map<std::string, std::vector<double>> out;
  if (first < 0) return out;
  for (const auto& t : timed_actions(log))
    if (static_cast<int>(t.index) >= first) out[t.key].push_back(t.duration_s);
  return out;
}

// Checkpoint stall per checkpoint, from progress samples one step apart: the excess
// over the healthy step time of the two steps around each checkpoint step (the stall
// shows up in one of them, whichever the job reports it in).
std::optional<Calibrated> replay_internal::checkpoint_stall(const EventLog& log, std::int64_t n,
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

namespace {

// Mean wall time per step while the job trains normally: consecutive samples of one
// incarnation, leaving out the two steps around each checkpoint (the simulator models
// the checkpoint as a stall of its own), steps while a recorded slowdown is active (it
// models that as the fault), and outliers beyond twice the median (pauses the log does
// not explain). Jitter makes this mean longer than the median the live ETTR counts with.
// The outliers' time beyond the median step is `pause_s`: lost to the live ETTR, modelled
// by nothing in the simulator (an overloaded host, a stalled disk), so it is reported: it is
// added to *pauses_only even when no running step is left to average.
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

// ------------------------------------------------------------ calibration

// The median healthy step, which the live ETTR counts with: the summary's, else the progress
// samples', else the header's nominal one.
Calibrated median_step(const EventLog& log) {
  if (log.summary && log.summary->value.step_time_s > 0)
    return {log.summary->value.step_time_s, "summary record (median healthy step)", 1};
  if (auto s = traces::healthy_step_time(log.progress))
    return {*s, "median healthy step of the progress samples",
            static_cast<int>(log.progress.size())};
  return {log.header.nominal_step_time_s, "header nominal_step_time_s (no healthy steps logged)",
          0};
}

// The environment's durations from the median outcome durations of successful actions, into
// `cal` (scenario path -> value); the large-cluster defaults where the run never measured one.
void calibrate_actions(const Durations& durations, std::map<std::string, Calibrated>& cal) {
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
  // Restarts and the first start apart: a fresh launch has nothing to stop or wait for.
  // Each stands in for the other where the run measured only one.
  from("job.init_s", {"StartJob"}, 0, not_measured);
  if (cal["job.init_s"].samples == 0)
    from("job.init_s", {"HotUpdate", "RollBack"}, 0, not_measured);
  from("job.first_init_s", {"StartJob:first"}, cal["job.init_s"].value,
       "job.init_s (the first start was not timed)");
  if (cal["job.init_s"].samples == 0) from("job.init_s", {"StartJob:first"}, 0, not_measured);
  // In-place starts (recovery=flash, job.in_place) apart: only the relaunched ranks start.
  from("job.inplace_init_s", {"StartJob:inplace"}, cal["job.init_s"].value,
       "job.init_s (no in-place start was timed)");
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
}

// A live run that never rescheduled still refilled its standby pool: machines taken out
// come back once they pass their repair check (or an operator repairs them), and a standby
// shortfall waits for them (realexec/controller/live_world.cc). The simulator refills its pool, and
// fills a shortfall, from the scheduler after reschedule_base_s (plus the self-check,
// gpu_diag_s): left at the large-cluster default (120 s), a pool that the run refilled in
// seconds stays empty for minutes. Each return (the live controller's note "NAME ... back in
// the standby pool") is timed from the eviction before it.
void calibrate_pool_returns(const EventLog& log, std::map<std::string, Calibrated>& cal) {
  if (cal["cluster.scheduler.reschedule_base_s"].samples != 0) return;
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

// The inter-machine all-gather is a ring of real flows in the simulator: each NIC carries
// one flow out and one in, so a test of T seconds moves about T x NIC/2 bytes. The
// simulator's network model (CM02) completes such a ring 1.05x slower than the ideal fair
// share (measured; tests/sim/replay_test.cc checks the probe's time).
Calibrated inter_all_gather_bytes(const Durations& durations, double nic_gbps) {
  const double kFlowOverhead = 1.05;
  auto it = durations.find("RunProbe:inter-all-gather");
  if (it != durations.end()) {
    const double t = median(it->second);
    return {t * nic_gbps * 1e9 / 8 / 2 / kFlowOverhead,
            "RunProbe:inter-all-gather median of " + std::to_string(it->second.size()) + " (" +
                fmt(t, 2) + " s at " + fmt(nic_gbps, 0) + " Gb/s NICs, approximate)",
            static_cast<int>(it->second.size())};
  }
  const scenarios::DiagnosisSpec diag;
  return {diag.inter_all_gather_bytes * nic_gbps / 3200, "default (not measured in this run)", 0};
}

}  // namespace

std::string replay_internal::fmt(double v, int prec) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(prec) << v;
  return o.str();
}

LiveRun read_live_run(const std::string& path) {
  LiveRun run;
  run.path = path;
  try {
    run.log = traces::read_event_log(path);
  } catch (const traces::EventLogError& e) {
    throw ReplayError(e.what(), 2);
  }
  EventLog& log = run.log;
  run.faults_in_log = log.faults.size();
  if (!log.summary) return run;
  for (const auto& f : log.faults)
    if (f.line > log.summary->line) run.after_summary.push_back(f.line);
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
  return run;
}

Calibration calibrate(const LiveRun& run) {
  const EventLog& log = run.log;
  Calibration c;
  const double last_t = log.records.empty() ? 0 : log.records.back().t_s;
  c.horizon_s = log.summary ? log.summary->value.elapsed_s : last_t;
  if (!(c.horizon_s > 0))
    throw ReplayError(
        run.path + ": the run has no length: no summary record and no record after t_s 0", 2);
  c.step = median_step(log);
  c.live = log.summary ? log.summary->value
                       : traces::summarize_progress(log.progress, c.horizon_s, c.step.value);
  // The simulator trains at the mean running step; the live ETTR counts steps at the
  // median. Their ratio converts the simulated ETTR to the live definition.
  c.every = checkpoint_every(log, &c.every_step_plan);
  c.mean_step = c.step;
  if (auto m =
          mean_running_step(log, static_cast<std::int64_t>(c.every.value), c.step.value, &c.pauses))
    c.mean_step = {m->mean_s,
                   "mean running step of " + std::to_string(m->count) + " progress samples",
                   m->count};
  else
    c.mean_step.source += " (no running steps to average)";
  c.jitter_factor = c.step.value / c.mean_step.value;
  // The live clock starts before the job does (agents connecting); the simulated job
  // starts at its time zero. Simulate from the first successful StartJob and count the
  // time before it as lost, as the live ETTR does.
  c.first_start = first_successful_start(log);
  if (c.first_start >= 0 && log.actions[c.first_start].t_s < c.horizon_s)
    c.start_offset_s = log.actions[c.first_start].t_s;
  c.sim_horizon_s = c.horizon_s - c.start_offset_s;
  c.offset_factor = c.sim_horizon_s / c.horizon_s;
  c.live_source = log.summary ? "summary record" : "computed from progress samples (no summary)";
  const Durations durations = outcome_durations(log);
  calibrate_actions(durations, c.values);
  calibrate_pool_returns(log, c.values);
  c.values["diagnosis.inter_all_gather_bytes"] = inter_all_gather_bytes(durations, c.nic_gbps);
  return c;
}

}  // namespace faultline::sim
