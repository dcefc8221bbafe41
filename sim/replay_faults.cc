// The fault stage of `faultline sim replay` (sim/replay.h): the live run's faults as fault
// categories of the scenario, each shaped by what the live run showed the policy after it
// (its first exit, the signature, the lag), replayed at its time on its slot. The helpers in
// the anonymous namespace read what the policy was shown and build one category.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "sim/replay.h"
#include "traces/stats.h"

namespace faultline::sim {

namespace {

using nlohmann::json;
using traces::EventLog;
using traces::FaultKind;
using traces::FaultRecord;
using traces::median;
using traces::Timed;

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

}  // namespace

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

}  // namespace faultline::sim
