// The account of lost time (docs/metrics.md, "Lost time"): lost_time_account.h.
#include "realexec/controller/lost_time_account.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "traces/time_phases.h"

namespace faultline::live {
namespace {

// Pending step measures reach the journal (and the metrics) at most this often.
constexpr double kFlushEveryS = 1;

const std::string& phase_key(TimePhase p) {
  static const std::vector<std::string> kKeys(kTimePhaseNames.begin(), kTimePhaseNames.end());
  return kKeys[static_cast<std::size_t>(p)];
}

double sum_of(const std::map<std::string, double>& m) {
  double t = 0;
  for (const auto& [k, v] : m) t += v;
  return t;
}

}  // namespace

std::map<std::string, double> LostTimeAccount::stop_phases(const Incident& in,
                                                           Instant until) const {
  // Each boundary clamped to `until`, so an open period's phases grow with time and sum to
  // its duration so far.
  const auto at_most = [&](Instant t) { return t < until ? t : until; };
  const Instant detected = at_most(in.detected);
  const Instant restart = at_most(in.restart_began.value_or(until));
  double diagnosis = (restart - detected).to_seconds();
  double failover = (until - restart).to_seconds();
  // Waiting for machines (an AcquireMachines short of standbys) comes out of the stopped
  // time after detection, out of the diagnosis first.
  Duration waited = in.waited;
  if (&in == s_.incidents.open_stop()) {
    if (const std::optional<Instant> since = s_.waiting_since()) {
      const Instant from = std::max(*since, detected);
      if (from < until) waited += until - from;
    }
  }
  const double waiting = std::clamp(waited.to_seconds(), 0.0, diagnosis + failover);
  const double from_diagnosis = std::min(waiting, diagnosis);
  diagnosis -= from_diagnosis;
  failover -= waiting - from_diagnosis;
  double detection = (detected - at_most(in.began)).to_seconds();
  // An open incident's detection is assigned at its close, when it is known how far the
  // stopped generation got (see step and closed): until then it may shrink.
  if (!in.resolved && !closed_at_) detection = 0;
  return {{phase_key(TimePhase::kDetection), detection},
          {phase_key(TimePhase::kDiagnosis), diagnosis},
          {phase_key(TimePhase::kFailover), failover},
          {phase_key(TimePhase::kWaitingForMachines), waiting}};
}

std::map<std::string, double> LostTimeAccount::lost_at(Instant until) const {
  std::map<std::string, double> lost;
  for (std::size_t i = 1; i < kTimePhaseCount; ++i) lost[kTimePhaseNames[i]] = 0;
  for (const auto& [k, v] : s_.journal.state().lost_s) lost[k] += v;
  if (const Incident* in = s_.incidents.open_stop())
    for (const auto& [k, v] : stop_phases(*in, until)) lost[k] += v;
  return lost;
}

void LostTimeAccount::step(std::int64_t step, double step_time_s,
                           std::optional<std::int64_t> checkpoint_step) {
  const Instant t = s_.now();
  const Accounting before = at(t);  // the last step is still the previous report's
  const double m = before.step_time_s;
  const std::int64_t now_last = std::max(before.first, step);
  if (step <= before.last) {
    // The job went back to a checkpoint: the steps since it, productive until now, are
    // recomputed (the simulator moves them out of productive likewise, at the loss).
    const std::int64_t base = std::max(before.first, step - 1);
    pending_[phase_key(TimePhase::kRecompute)] += static_cast<double>(before.last - base) * m;
  }
  if (!s_.running() && step > before.last) {
    // A step of the stopped generation, in flight at the stop, reported after it: it was
    // trained (productive), so the incident began no earlier than it (its detection is not
    // shown yet, see stop_phases; otherwise its time would be counted twice).
    Incident* in = s_.incidents.open_stop();
    if (in && !in->restart_began) {
      in->began = std::min(std::max(in->began, t), in->detected);
      s_.save();
    }
  }
  if (!s_.running()) return;  // a start or an adoption under way: its time is not settled yet
  // Replica groups: a step trained by `live` of the dp replicas is that share of a step
  // (a linear partial replica rate, as the simulator's default); the rest is missing_replicas.
  // That share is taken out of the steps' productive time; the pauses of quorum changes (below)
  // were never in it.
  const int dp = s_.cluster.pp_groups();
  const int live = s_.replicas.live();
  if (s_.replicas.enabled() && step > before.last && live < dp) {
    const double share = static_cast<double>(step - std::max(before.last, before.first)) * m *
                         static_cast<double>(dp - live) / dp;
    pending_[phase_key(TimePhase::kMissingReplicas)] += share;
    s_.replicas.add_share(share);
  }
  // The time since the last report not yet assigned beyond its steps. Steps faster than the
  // nominal one make it negative: then nothing is added (a counter never goes back) and
  // later time fills the gap first.
  const double productive = static_cast<double>(now_last - before.first) * m - replica_share_s();
  double rest = before.elapsed_s - productive - sum_of(lost_at(t)) - sum_of(pending_);
  // Of it, the step's time over the nominal one: warm-up for an incarnation's first two steps
  // (the ones the nominal step time leaves out), checkpoint for a step that saved one. At
  // most what is unassigned: a first step began before the last rank's "started" reached
  // the controller, and that part is failover already.
  double excess = std::isfinite(step_time_s) && step_time_s > m ? step_time_s - m : 0;
  excess = std::min(excess, std::max(0.0, rest));
  if (s_.progress.steps_since_start() < 2)
    pending_[phase_key(TimePhase::kWarmup)] += excess;
  else if (checkpoint_step && *checkpoint_step == step)
    pending_[phase_key(TimePhase::kCheckpoint)] += excess;
  else
    excess = 0;
  // The rest is degraded (slow steps, gaps between steps), or the pause of a quorum change.
  rest -= excess;
  const TimePhase gap =
      s_.replicas.take_changed() ? TimePhase::kMissingReplicas : TimePhase::kDegraded;
  if (rest > 0) pending_[phase_key(gap)] += rest;
  if ((t - flushed_at_).to_seconds() >= kFlushEveryS) flush();
}

void LostTimeAccount::flush() {
  auto& lost = s_.journal.state().lost_s;
  for (const auto& [k, v] : pending_) lost[k] += v;
  pending_.clear();
  s_.journal.state().replica_share_s += s_.replicas.take_share();
  flushed_at_ = s_.now();
  s_.save();
}

void LostTimeAccount::restart_began(Instant t) {
  Incident* in = s_.incidents.open_stop();
  if (!in || in->restart_began) return;
  in->restart_began = t;
  s_.save();  // the failover phase must continue across a controller restart
}

void LostTimeAccount::waited(Instant since) {
  Incident* in = s_.incidents.open_stop();
  if (!in) return;
  const Instant from = std::max(since, in->detected);
  if (from < s_.now()) in->waited += s_.now() - from;
  s_.save();
}

void LostTimeAccount::closed(const Incident& in, std::int64_t start_step) {
  // The job restarted from a step beyond the step rank's last report: the stopped generation
  // trained steps no report told of (their checkpoint was restored). They are productive, so
  // the incident began no earlier than their training.
  Incident c = in;
  const Accounting acc = at(*in.resolved);
  if (start_step > acc.last)
    c.began = std::min(
        c.detected,
        c.began + Duration::seconds(static_cast<double>(start_step - acc.last) * acc.step_time_s));
  auto& lost = s_.journal.state().lost_s;
  for (const auto& [k, v] : stop_phases(c, *c.resolved)) lost[k] += v;
  flush();
  write();
}

void LostTimeAccount::running() {
  std::optional<Incident> startup = s_.incidents.end_startup();
  if (!startup) return;
  Incident& in = *startup;
  in.resolved = s_.now();
  auto& lost = s_.journal.state().lost_s;
  for (const auto& [k, v] : stop_phases(in, *in.resolved)) lost[k] += v;
  // Not saved here: the caller saves the journal once it records the first step too (a
  // journal with neither would start the start-up over).
}

LostTimeAccount::Accounting LostTimeAccount::close() {
  closed_at_ = s_.now();
  s_.incidents.close_run();
  const Accounting acc = accounting();
  // The final account: the time since the step rank's last report while the job ran is
  // assigned so that the phases sum to elapsed - productive; then it goes to the log just
  // before the summary. A silence of more than two steps is a stop nothing had noticed yet (a
  // hang before its detection): detection, as the simulator counts a fault not yet acted on,
  // beyond the step under way. A shorter one is a step under way: degraded.
  if (!s_.incidents.open_stop()) {
    double assigned = 0;
    for (const auto& [k, v] : lost_at(*closed_at_)) assigned += v;
    for (const auto& [k, v] : pending_) assigned += v;
    double rest = acc.elapsed_s - acc.productive_s - assigned;
    const double silent = (*closed_at_ - s_.progress.last_progress_at()).to_seconds();
    if (rest > 0 && acc.step_time_s > 0 && silent > 2 * acc.step_time_s) {
      const double undetected = std::min(rest, silent - acc.step_time_s);
      pending_[phase_key(TimePhase::kDetection)] += undetected;
      rest -= undetected;
    }
    if (rest > 0) pending_[phase_key(TimePhase::kDegraded)] += rest;
  }
  flush();
  write();
  return acc;
}

void LostTimeAccount::resume() {
  resume_stop();
  flushed_at_ = s_.now();
}

void LostTimeAccount::resume_stop() {
  const auto& s = s_.journal.state();
  if (!s_.journal.resumed() || (!s.stop && s.first_step < 0)) {
    // The run's start-up: from its start to every rank first running, a stop period
    // detected at once (the simulator's start is failover too).
    s_.incidents.begin_startup(
        Incident{Instant{}, std::nullopt, "start-up", "startup", Instant{}, std::nullopt, {}});
    return;
  }
  if (!s.stop) return;
  const JournalState::Stop& p = *s.stop;
  Incident in{
      Instant{p.began_ns},
      std::nullopt,
      p.cause,
      p.category,
      Instant{p.detected_ns},
      p.restart_began_ns >= 0 ? std::optional<Instant>(Instant{p.restart_began_ns}) : std::nullopt,
      Duration{p.waited_ns}};
  // A wait for machines under way when the previous controller died went on until now (its
  // policy's wait ended with it): counted as waited, so the counter does not go back.
  if (p.waiting_since_ns >= 0 && Instant{p.waiting_since_ns} < s_.now())
    in.waited += s_.now() - Instant{p.waiting_since_ns};
  if (p.category == "startup")
    s_.incidents.begin_startup(std::move(in));
  else
    s_.incidents.resume(std::move(in));
}

std::optional<JournalState::Stop> LostTimeAccount::journal_stop() const {
  const Incident* in = s_.incidents.open_stop();
  if (!in) return std::nullopt;
  JournalState::Stop p;
  p.category = in->category;
  p.cause = in->cause;
  p.began_ns = in->began.ns;
  p.detected_ns = in->detected.ns;
  p.restart_began_ns = in->restart_began ? in->restart_began->ns : -1;
  p.waited_ns = in->waited.ns;
  if (const std::optional<Instant> since = s_.waiting_since())
    p.waiting_since_ns = std::max(*since, in->detected).ns;
  return p;
}

LostTimeAccount::Accounting LostTimeAccount::at(Instant at) const {
  const auto& s = s_.journal.state();
  Accounting a;
  a.step_time_s = s_.progress.step_time_s(s_.nominal_step_time_s);
  a.first = std::max<std::int64_t>(0, s.first_step);
  a.last = std::max<std::int64_t>(a.first, s_.progress.last_step());
  a.elapsed_s = at.to_seconds();
  // Steps trained with replicas missing count for their share (replica_groups.cc).
  a.productive_s =
      std::max(0.0, static_cast<double>(a.last - a.first) * a.step_time_s - replica_share_s());
  a.ettr = a.elapsed_s > 0 ? a.productive_s / a.elapsed_s : 0;
  return a;
}

double LostTimeAccount::replica_share_s() const {
  return s_.journal.state().replica_share_s + s_.replicas.share_pending();
}

nlohmann::json LostTimeAccount::to_json(Instant until) const {
  const Accounting acc = at(until);
  nlohmann::json lost = nlohmann::json::object();
  for (const auto& [k, v] : lost_at(until)) lost[k] = v;
  return {{"elapsed_s", acc.elapsed_s},
          {"productive_s", acc.productive_s},
          {"ettr", acc.ettr},
          {"lost_s", std::move(lost)}};
}

}  // namespace faultline::live
