// The stages of `faultline sim replay` (sim/replay.h): reading and trimming a live run's
// event log, measuring the environment from it (step times, checkpoint spacing and stall,
// action durations) into scenario fields, turning its faults into fault categories shaped by
// what the live run showed the policy, building the scenario with the faults as a replayed
// trace, running the replicas, and the result document and text report. The helpers in the
// anonymous namespace are the measurements on the log and the pieces of those stages.
#include "sim/replay.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <initializer_list>
#include <iomanip>
#include <iterator>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <type_traits>
#include <utility>
#include <variant>

#include "policies/module.h"
#include "scenarios/stack_fields.h"
#include "sim/metrics.h"
#include "sim/replay_decisions.h"
#include "sim/report.h"
#include "sim/runner.h"
#include "traces/stats.h"

namespace faultline::sim {

namespace {

using nlohmann::json;
using traces::EventLog;
using traces::FaultKind;
using traces::FaultRecord;
using traces::median;
using traces::Timed;

using Durations = std::map<std::string, std::vector<double>>;
// Scenario::replay_durations' entry that is no duration: per in-place StartJob of the live
// run, whether it was taken in place (see replay_scenario).
constexpr const char* kInPlaceTakenKey = "StartJob:in-place-taken";

int first_successful_start(const EventLog& log);

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

// The same, occurrence by occurrence from the first successful start on (the simulated job
// starts there): the k-th action of a key in the replay takes the live run's k-th, so that a
// fault lands in the same phase of a recovery as it did live. NaN: the median.
std::map<std::string, std::vector<double>> occurrence_durations(const EventLog& log) {
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

// What the policy was shown after a fault: its first exit naming the fault's machine (or
// none). An exit that names no machine counts only before `until` (the next fault on any
// machine); one naming the fault's machine also after it, up to `until_own` (the next fault on
// that machine, or the job's next successful start): two kills 0.05 s apart on two machines
// each exit in their own words after both faults. `before_acting`: only exits before the
// policy's next disruptive action (a hang's watchdog exit, not the echo of a stop).
Observed observe(const EventLog& log, const Timed<FaultRecord>& f, double until, double until_own,
                 bool before_acting) {
  const double last = std::max(until, until_own);
  double acted = last;
  if (before_acting)
    for (const auto& a : log.actions)
      if (a.t_s >= f.t_s && a.t_s < acted &&
          (std::holds_alternative<StopJob>(a.value.action) ||
           std::holds_alternative<EvictMachines>(a.value.action) ||
           std::holds_alternative<AcquireMachines>(a.value.action)))
        acted = a.t_s;
  for (const auto& e : log.events) {
    if (e.t_s < f.t_s || e.t_s >= acted) continue;
    const auto names = [&](MachineId m) {
      return m == f.value.machine ? e.t_s < last : m == kNoMachine && e.t_s < until;
    };
    if (auto* x = std::get_if<ProcessExit>(&e.value); x && names(x->machine))
      return {true, e.t_s - f.t_s, x->exit_code, x->signature};
    if (auto* x = std::get_if<StartFailed>(&e.value); x && names(x->machine))
      return {true, e.t_s - f.t_s, 1, x->signature};
  }
  return {};
}

// The end of what fault `i`'s own machine may still show of it (observe's `until_own`): the
// next fault on that machine, or the job's next successful start (an exit after it is the
// new run's), whichever comes first; the horizon at most.
double own_exit_until(const EventLog& log, std::size_t i, double horizon) {
  const auto& f = log.faults[i];
  double until = horizon;
  for (std::size_t k = i + 1; k < log.faults.size(); ++k)
    if (log.faults[k].t_s > f.t_s && log.faults[k].value.machine == f.value.machine) {
      until = log.faults[k].t_s;
      break;
    }
  for (const auto& e : log.events)
    if (e.t_s > f.t_s && e.t_s < until && std::holds_alternative<JobStarted>(e.value)) return e.t_s;
  return until;
}

// When a kill showed the policy nothing of its own and the job was stopped for another
// machine's exit first (two kills a few ms apart: the second machine's exit reached the
// controller first and the stop took the first machine's rank with the rest), the time its
// fault is replayed at: that stop's, so that it strikes a job already down, as it did live;
// otherwise its own time. `until_own` as observe's.
double covered_kill_time(const EventLog& log, const Timed<FaultRecord>& f, const Observed& seen,
                         double until_own) {
  if (seen.found || f.value.fault != FaultKind::kKill) return f.t_s;
  double stop = -1;
  for (const auto& a : log.actions)
    if (a.t_s > f.t_s && a.t_s < until_own && std::holds_alternative<StopJob>(a.value.action)) {
      stop = a.t_s;
      break;
    }
  if (stop < 0) return f.t_s;
  for (const auto& e : log.events) {
    if (e.t_s <= f.t_s || e.t_s > stop) continue;
    const auto* x = std::get_if<ProcessExit>(&e.value);
    if (x && x->machine != f.value.machine && x->machine != kNoMachine) return stop;
  }
  return f.t_s;
}

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

std::string fmt(double v, int prec) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(prec) << v;
  return o.str();
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

// ------------------------------------------------------------ faults

// How a replayed fault shows itself to the policy.
struct Shape {
  std::string symptom = "crash", cls = "explicit", alert, sig;
  bool machine_down_lag = false;  // placed after the host inspection that sees it
  int code = 1;
};

// Whether the live run trained in replica groups (an EnableReplicaGroups it carried out).
bool ran_replica_groups(const EventLog& log) {
  std::set<ActionId> enabled;
  for (const auto& a : log.actions)
    if (std::holds_alternative<EnableReplicaGroups>(a.value.action)) enabled.insert(a.value.id);
  return std::any_of(log.outcomes.begin(), log.outcomes.end(),
                     [&](const auto& o) { return o.value.ok && enabled.count(o.value.id); });
}

// The shape of fault `f` from its kind and what the live run saw after it; sets the
// kind's own fields of category `c` (persistence, exits, slowdown, scope). `replicas`: the run
// trained in replica groups.
Shape shape_of(const FaultRecord& f, const Observed& seen, bool replicas, json& c) {
  Shape s;
  s.sig = seen.signature;
  s.code = seen.found ? seen.exit_code : 1;
  switch (f.fault) {
    case FaultKind::kKill:
      if (!seen.found) s.code = 137;
      break;
    case FaultKind::kMachineDown:
      // Live mode sees a lost machine at once as its agent's connection dropping (a host
      // alert); the peers' exits come after. The simulator polls host inspection every
      // inspect_host_s, so the exit is placed just after that for the alert to come
      // first, as it did live; a stack without inspection sees the crash.
      s.alert = "host";
      if (!seen.found)
        s.sig = "agent lost: " + (f.detail.empty() ? std::string("machine down") : f.detail);
      s.machine_down_lag = true;
      break;
    case FaultKind::kCrash:
      if (!seen.found) s.sig = f.detail;
      break;
    case FaultKind::kHang:
    case FaultKind::kStop:
      // A rank hung in a collective stays hung until its processes are killed, like a
      // frozen one: stack aggregation finds it either way. In replica groups the quorum's
      // timeout drops the replica and its killed process is relaunched: the one-shot hang (or
      // the stopped process) is gone, and the rejoin on the same machine works.
      s.symptom = "hang";
      s.cls = "implicit";
      c["persistent"] = !replicas;
      break;
    case FaultKind::kNan:
    case FaultKind::kSdc:
      // Seen as an exit (a job with a NaN check), or only in the step samples: a job
      // that reports its loss and trains on until the policy stops it, as the reference
      // job does. Then the simulated job does not exit either; replayed as an exit at
      // once, the stack took the crash path (stop-time tests, reattempts on the
      // corrupt machine) instead of the NaN path the run took (bit-wise test, replay).
      s.symptom = "nan";
      s.cls = "implicit";
      if (!seen.found) c["exits"] = false;
      break;
    case FaultKind::kSlow:
      s.symptom = "slowdown";
      s.cls = "implicit";
      c["slowdown_factor"] = std::strtod(f.detail.c_str(), nullptr);
      break;
    case FaultKind::kNicDown:
      s.alert = "nic";
      if (!seen.found) s.symptom = "hang";  // nothing exited: the job stalled on the network
      break;
    case FaultKind::kWarn:
      // A warning, and no failure behind it (an operator's drill of a predictor): replayed
      // as a warned fault announced at the record's time with the recorded lead, whose strike
      // changes nothing (a slowdown by a factor of 1), wherever its machine is by then.
      s.symptom = "slowdown";
      s.cls = "implicit";
      c["slowdown_factor"] = 1.0;
      c["warning"] = {{"lead_time_s", std::strtod(f.detail.c_str(), nullptr)},
                      {"probability", 1.0},
                      {"false_per_machine_day", 0.0}};
      break;
    case FaultKind::kUpdate:
      s.symptom = "manual";
      s.cls = "manual";
      c["scope"] = "job";
      c["persistent"] = false;
      break;
  }
  return s;
}

// The steps of the live run's bit-wise alignment probe: job.bitwise_steps of the config the
// header names; live mode's default, 1, when the config is unreadable or does not set it.
int bitwise_probe_steps(const traces::EventLogHeader& h) {
  if (h.config_file.empty()) return 1;
  std::ifstream in(h.config_file);
  const json cfg = in ? json::parse(in, nullptr, false) : json();
  const json* job = cfg.is_object() && cfg.contains("job") ? &cfg["job"] : nullptr;
  if (job == nullptr || !job->is_object() || !job->contains("bitwise_steps")) return 1;
  const json& steps = (*job)["bitwise_steps"];
  return steps.is_number_integer() && steps.get<std::int64_t>() >= 1 &&
                 steps.get<std::int64_t>() <= 1000000
             ? static_cast<int>(steps.get<std::int64_t>())
             : 1;
}

// Stop-time tests find what the live run's tests could find: a transient fault leaves a
// healthy machine (nothing to find); silent corruption from a process's (N+1)-th step
// (`sdc after=N`, N = 0 without a detail) is reproduced by replay, and shows in the
// bit-wise test of `bitwise_steps` steps (the stress test: 10 times as many), which apply
// the machine's persistent faults, only when N is below its steps: after=0 fails the
// one-step bit-wise test, after=3 escapes it.
json recall_of(const FaultRecord& f, int bitwise_steps) {
  json recall = json::object();
  const bool sdc = f.fault == FaultKind::kSdc;
  for (int k = 0; k < kProbeKinds; ++k)
    recall[probe_key(static_cast<ProbeKind>(k))] =
        f.fault == FaultKind::kNicDown && static_cast<ProbeKind>(k) == ProbeKind::kInterAllGather
            ? 1.0
            : 0.0;
  recall["replay"] = sdc || f.persistent ? 1.0 : 0.0;
  if (sdc) {
    const std::string& d = f.detail;
    const double after = d.rfind("after=", 0) == 0 ? std::strtod(d.c_str() + 6, nullptr) : 0;
    recall[probe_key(ProbeKind::kBitwise)] = after < bitwise_steps ? 1.0 : 0.0;
    recall[probe_key(ProbeKind::kStress)] = after < 10.0 * bitwise_steps ? 1.0 : 0.0;
  }
  return recall;
}

// The fault category of replayed fault number `k` (0-based). `*empty_signature`: it exits
// with no log line (the parsed scenario's default signature is then cleared).
json fault_category(const ReplayedFault& r, std::size_t k, const traces::EventLogHeader& h,
                    bool replicas, int bitwise_steps, bool* empty_signature) {
  const auto& f = r.record.value;
  const Observed& seen = r.seen;
  json c;
  c["name"] = std::string(traces::fault_kind_name(f.fault)) + "#" + std::to_string(k + 1) +
              "@line" + std::to_string(r.record.line);
  c["rate_per_machine_day"] = 0;
  c["scope"] = "machine";
  c["persistent"] = f.persistent;
  const Shape s = shape_of(f, seen, replicas, c);
  c["symptom"] = s.symptom;
  c["class"] = s.cls;
  c["recall"] = recall_of(f, bitwise_steps);
  if (!s.alert.empty()) c["alert"] = s.alert;
  const bool exits = s.symptom == "crash" || (s.symptom == "nan" && seen.found);
  if (exits) {
    c["exit_code"] = std::clamp(s.code, 0, 255);
    double lag = seen.found ? seen.lag_s : 0.0;
    if (s.machine_down_lag) {
      auto it = h.params.find("inspect_host_s");
      lag = std::max(lag, (it != h.params.end() ? it->second : 2.0) + 0.5);
    }
    c["observe_after_s"] = lag;
    if (!s.sig.empty()) c["signature"] = s.sig;
  }
  *empty_signature = exits && s.sig.empty();
  return c;
}

// Why fault `f` is not replayed, or nothing.
std::optional<std::string> skip_reason(const Timed<FaultRecord>& f, int machines,
                                       double horizon_s) {
  const bool job_wide = f.value.fault == FaultKind::kUpdate;
  if (!job_wide && (f.value.slot < 0 || f.value.slot >= machines))
    return "slot " + std::to_string(f.value.slot) + " is not a job slot";
  if (f.t_s >= horizon_s) return "after the end of the run";
  return std::nullopt;
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

// The header records every resolved parameter, and a calibrated one may not apply either
// (an interval under an every-step plan): those the replayed stack will not read with its
// module choices are left out of `params` and `cal`, as setting them would change nothing
// (and is refused). Returns whether the stack sizes its own standby pool.
bool prune_params(const PolicyInfo& info, json& params, std::map<std::string, Calibrated>& cal) {
  std::map<std::string, double> chosen;
  for (const auto& [k, v] : params.items())
    if (v.is_number() && info.find_param(k)) chosen[k] = v.get<double>();
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
  std::map<std::string, double> chosen;
  for (const auto& [k, v] : stack.params.items())
    if (v.is_number()) chosen[k] = v.get<double>();
  if (Params values; !Params::resolve(stack.info->params, chosen, &values))
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

ReplayedFaults replayed_faults(const LiveRun& run, Calibration& cal) {
  const EventLog& log = run.log;
  ReplayedFaults r;
  for (std::size_t line : run.after_summary)
    r.skipped.push_back(
        {{"line", line}, {"reason", "after the summary record (the run had ended)"}});
  for (std::size_t i = 0; i < log.faults.size(); ++i) {
    const auto& f = log.faults[i];
    if (auto why = skip_reason(f, log.header.machines, cal.horizon_s)) {
      r.skipped.push_back({{"line", f.line}, {"reason", *why}});
      continue;
    }
    const double until_end = cal.horizon_s;
    double until = until_end;
    for (std::size_t k = i + 1; k < log.faults.size(); ++k)
      if (log.faults[k].t_s > f.t_s) {
        until = log.faults[k].t_s;
        break;
      }
    const bool hangs = f.value.fault == FaultKind::kHang || f.value.fault == FaultKind::kStop;
    const bool job_wide = f.value.fault == FaultKind::kUpdate;
    const double until_own = own_exit_until(log, i, until_end);
    Observed seen = job_wide ? Observed{} : observe(log, f, until, until_own, hangs);
    if (hangs && seen.found) r.hang_lags.push_back(seen.lag_s);
    Timed<FaultRecord> at = f;
    at.t_s = covered_kill_time(log, f, seen, until_own);
    r.faults.push_back({at, seen});
    ++r.by_kind[traces::fault_kind_name(f.value.fault)];
  }
  const auto& lags = r.hang_lags;
  cal.values["job.collective_timeout_s"] =
      lags.empty() ? Calibrated{600, "default (no hang reached its watchdog in this run)", 0}
                   : Calibrated{median(lags),
                                "hang to watchdog exit, median of " + std::to_string(lags.size()),
                                static_cast<int>(lags.size())};
  const bool replicas = ran_replica_groups(log);
  const int bitwise_steps = bitwise_probe_steps(log.header);
  for (std::size_t k = 0; k < r.faults.size(); ++k) {
    bool empty_signature = false;
    r.categories.push_back(
        fault_category(r.faults[k], k, log.header, replicas, bitwise_steps, &empty_signature));
    r.empty_signature.push_back(empty_signature);
    r.scopes.push_back(r.faults[k].record.value.fault == FaultKind::kUpdate ? traces::Scope::kJob
                                                                            : traces::Scope::kNode);
  }
  return r;
}

ReplayStack replay_stack(const LiveRun& run, const std::string& stack, const PolicyInfo& info,
                         Calibration& cal) {
  const auto& h = run.log.header;
  ReplayStack s;
  s.name = stack;
  s.info = &info;
  if (stack == h.stack) {
    for (const auto& [k, v] : h.params) s.params[k] = v;
    for (const auto& [k, name] : h.choices) {  // by name: the index is the live process's
      const ParamSpec* spec = info.find_param(k);
      const int i = spec ? spec->choice_index(name) : -1;
      if (i < 0)
        throw ReplayError(run.path + ": policy.params." + k + ": the live run chose module '" +
                              name +
                              "', which is not registered here (load its plugin: --plugin FILE)",
                          2);
      s.params[k] = i;
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
