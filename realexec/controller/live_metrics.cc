// LiveWorld's metrics for `GET /metrics` (docs/metrics.md): the same accounting as
// status() and the summary, so that faultline_ettr is the controller's own number; and the
// account of lost time by phase that the metrics, the status and the event log share.
#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "realexec/controller/live_world.h"
#include "traces/time_phases.h"

namespace faultline::live {
namespace {

MetricFamily gauge(std::string name, std::string help, double v) {
  return MetricFamily{std::move(name), std::move(help), MetricType::kGauge, {Sample{{}, v}}, {}};
}

MetricFamily labelled(std::string name, std::string help, MetricType type, const std::string& label,
                      const std::map<std::string, double>& values) {
  MetricFamily f{std::move(name), std::move(help), type, {}, {}};
  for (const auto& [k, v] : values) f.samples.push_back(Sample{{{label, k}}, v});
  return f;
}

MetricFamily histogram(std::string name, std::string help, const Histogram& h) {
  MetricFamily f{std::move(name), std::move(help), MetricType::kHistogram, {}, {}};
  f.histograms.emplace_back(Labels{}, h);
  return f;
}

const char* state_label(int state) {
  // In the order of LiveWorld::MachineState.
  static const char* const kNames[] = {
      "job", "standby", "retired", "repair_check", "awaiting_repair", "left_to_operator", "out"};
  return kNames[state];
}

}  // namespace

std::vector<MetricFamily> LiveWorld::metrics() const {
  const Instant until = account_now();
  const Accounting acc = accounting_at(until);
  std::vector<MetricFamily> out;
  out.push_back(gauge("faultline_ettr",
                      "Effective training time ratio so far: productive / elapsed seconds "
                      "(as faultline live status and the summary).",
                      acc.ettr));
  out.push_back(gauge("faultline_elapsed_seconds",
                      "Seconds since the run began (frozen once it ended).", acc.elapsed_s));
  out.push_back(gauge("faultline_productive_seconds",
                      "Steps trained since the first start times the median healthy step time.",
                      acc.productive_s));
  out.push_back(gauge("faultline_step_time_seconds",
                      "The accounting's step time (median of healthy steps).", acc.step_time_s));

  // Lost seconds by phase, the simulator's phase names; they sum to elapsed - productive
  // up to the step under way (docs/metrics.md, "Lost time"). Journaled: a restarted
  // controller continues them.
  out.push_back(labelled("faultline_lost_seconds_total",
                         "Seconds lost, by phase (the simulator's bucket names; docs/metrics.md "
                         "says how live mode measures each). Survives a controller restart.",
                         MetricType::kCounter, "phase", lost_at(until)));

  std::map<std::string, double> opened;
  for (const auto& [category, n] : incidents_.stats().opened)
    opened[category] = static_cast<double>(n);
  out.push_back(labelled("faultline_incidents_opened_total",
                         "Incidents opened (the job stopped training, or a replica dropped out: "
                         "replica_drop), by category. Survives a controller restart.",
                         MetricType::kCounter, "category", opened));
  MetricFamily closed{
      "faultline_incidents_total",
      "Incidents closed, by category and resolution (recovered: every rank runs again, or the "
      "replica trains again; run_ended: still open when the run ended). Survives a controller "
      "restart.",
      MetricType::kCounter,
      {},
      {}};
  for (const auto& [key, n] : incidents_.stats().closed)
    closed.samples.push_back(
        Sample{{{"category", key.first}, {"resolution", key.second}}, static_cast<double>(n)});
  out.push_back(std::move(closed));
  double open = 0;
  for (const Incident& in : incidents_.incidents()) open += !in.resolved && !closed_at_ ? 1 : 0;
  out.push_back(gauge("faultline_incidents_open",
                      "Incidents open now: the job's stop (0 or 1) and each replica out.", open));
  out.push_back(
      histogram("faultline_detection_latency_seconds",
                "From rank 0's last step report to the controller knowing the job stopped (for "
                "a replica_drop, from the replica's last step report to its drop).",
                incidents_.stats().detection));
  out.push_back(histogram("faultline_recovery_latency_seconds",
                          "From an incident's detection to every rank running again (the "
                          "replica training again).",
                          incidents_.stats().recovery));

  std::map<std::string, double> states;
  for (int s = 0; s <= static_cast<int>(MachineState::kOut); ++s) states[state_label(s)] = 0;
  int connected = 0;
  int repair_queue = 0;
  for (MachineId m = 0; m < cluster_.machine_count(); ++m) {
    const MachineState s = machine_state(m);
    states[state_label(static_cast<int>(s))] += 1;
    if (s == MachineState::kRepairCheck || s == MachineState::kAwaitingRepair) ++repair_queue;
    if (link_.connected(m)) ++connected;
  }
  out.push_back(
      labelled("faultline_machines", "Machines by state.", MetricType::kGauge, "state", states));
  out.push_back(
      gauge("faultline_machines_connected", "Machines whose agent is connected.", connected));
  out.push_back(
      labelled("faultline_standby_pool_machines",
               "Warm standby pool: wanted (the config's standby machines) and actual (parked now).",
               MetricType::kGauge, "pool",
               {{"wanted", static_cast<double>(config_.standby.size())},
                {"actual", static_cast<double>(cluster_.standby().size())}}));
  out.push_back(gauge("faultline_repair_queue_length",
                      "Machines in the repair pipeline (waiting for or running their check).",
                      repair_queue));
  out.push_back(gauge("faultline_step", "Rank 0's latest reported step (-1: none yet).",
                      static_cast<double>(progress_.last_step())));
  out.push_back(gauge("faultline_job_generation", "The job's generation (one per launch).",
                      static_cast<double>(journal_.state().gen)));
  out.push_back(
      gauge("faultline_job_running", "1 while every rank of the job runs.", running_ ? 1 : 0));
  out.push_back(gauge("faultline_run_ended", "1 once the summary is written: the values are final.",
                      closed_at_ ? 1 : 0));
  out.push_back(labelled("faultline_storage_failing",
                         "1 while writing the event log or the journal fails.", MetricType::kGauge,
                         "store",
                         {{"event_log", log_.health().failing ? 1.0 : 0.0},
                          {"journal", journal_.health().failing ? 1.0 : 0.0}}));
  return out;
}

// --- the account of lost time (docs/metrics.md, "Lost time") ----------------------------
//
// Stop periods (the start-up, incidents) are measured by their boundaries, which the journal
// keeps, so that their phases grow with the clock and continue across a controller restart.
// Step measures (recompute, warm-up, checkpoint, degraded) are assigned at rank 0's step
// reports, gathered in lost_pending_ and moved into the journal's account at most once a
// second; the metrics show only what the journal holds, so a restarted controller never
// shows less than its predecessor did.

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

void LiveWorld::incident_stats_to_journal() {
  auto& j = journal_.state().incidents;
  const IncidentLedger::Stats& stats = incidents_.stats();
  j.opened = stats.opened;
  j.closed = stats.closed;
  const auto latency = [](const Histogram& h) {
    return JournalState::Latency{h.bounds(), h.per_bucket(), h.sum()};
  };
  j.detection = latency(stats.detection);
  j.recovery = latency(stats.recovery);
  auto& out = journal_.state().replicas_out;
  out.clear();
  for (const Incident& in : incidents_.incidents())
    if (in.replica >= 0 && !in.resolved)
      out.push_back({in.replica, in.cause, in.began.ns, in.detected.ns});
}

void LiveWorld::incident_stats_from_journal() {
  const auto& s = journal_.state();
  IncidentLedger::Stats& stats = incidents_.stats();
  stats.opened = s.incidents.opened;
  stats.closed = s.incidents.closed;
  // Histograms of other bounds (another release's) restart empty rather than mis-bucketed.
  for (auto [h, j] : {std::pair{&stats.detection, &s.incidents.detection},
                      std::pair{&stats.recovery, &s.incidents.recovery}})
    if (!j->buckets.empty() && !h->restore(j->bounds, j->buckets, j->sum))
      note(
          "the journal's incident latency histogram has other bounds than this release's: it "
          "starts empty");
  for (const auto& r : s.replicas_out) {
    if (!config_.job.replica_groups || r.replica >= cluster_.pp_groups()) {
      note("the journal's replica " + std::to_string(r.replica) +
           " out of the quorum is no replica of this config's job: left out");
      continue;
    }
    Incident in{Instant{r.began_ns},    std::nullopt, r.cause, "replica_drop",
                Instant{r.detected_ns}, std::nullopt, {}};
    in.replica = r.replica;
    incidents_.resume(std::move(in));
  }
}

std::map<std::string, double> LiveWorld::stop_phases(const Incident& in, Instant until) const {
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
  if (&in == incidents_.open_stop() && waiting_acquire_) {
    const Instant from = std::max(waiting_acquire_->started, detected);
    if (from < until) waited += until - from;
  }
  const double waiting = std::clamp(waited.to_seconds(), 0.0, diagnosis + failover);
  const double from_diagnosis = std::min(waiting, diagnosis);
  diagnosis -= from_diagnosis;
  failover -= waiting - from_diagnosis;
  double detection = (detected - at_most(in.began)).to_seconds();
  // An open incident's detection is assigned at its close, when it is known how far the
  // stopped generation got (see account_step and account_closed): until then it may shrink.
  if (!in.resolved && !closed_at_) detection = 0;
  return {{phase_key(TimePhase::kDetection), detection},
          {phase_key(TimePhase::kDiagnosis), diagnosis},
          {phase_key(TimePhase::kFailover), failover},
          {phase_key(TimePhase::kWaitingForMachines), waiting}};
}

std::map<std::string, double> LiveWorld::lost_at(Instant until) const {
  std::map<std::string, double> lost;
  for (std::size_t i = 1; i < kTimePhaseCount; ++i) lost[kTimePhaseNames[i]] = 0;
  for (const auto& [k, v] : journal_.state().lost_s) lost[k] += v;
  if (const Incident* in = incidents_.open_stop())
    for (const auto& [k, v] : stop_phases(*in, until)) lost[k] += v;
  return lost;
}

void LiveWorld::account_step(std::int64_t step, double step_time_s,
                             std::optional<std::int64_t> checkpoint_step) {
  const Instant t = now();
  const Accounting before = accounting_at(t);  // the last step is still the previous report's
  const double m = before.step_time_s;
  const std::int64_t now_last = std::max(before.first, step);
  if (step <= before.last) {
    // The job went back to a checkpoint: the steps since it, productive until now, are
    // recomputed (the simulator moves them out of productive likewise, at the loss).
    const std::int64_t base = std::max(before.first, step - 1);
    lost_pending_[phase_key(TimePhase::kRecompute)] += static_cast<double>(before.last - base) * m;
  }
  if (!running_ && step > before.last) {
    // A step of the stopped generation, in flight at the stop, reported after it: it was
    // trained (productive), so the incident began no earlier than it (its detection is not
    // shown yet, see stop_phases; otherwise its time would be counted twice).
    Incident* in = incidents_.open_stop();
    if (in && !in->restart_began) {
      in->began = std::min(std::max(in->began, t), in->detected);
      save_journal();
    }
  }
  if (!running_) return;  // a start or an adoption under way: its time is not settled yet
  // Replica groups: a step trained by `live` of the dp replicas is that share of a step
  // (a linear partial replica rate, as the simulator's default); the rest is missing_replicas.
  // That share is taken out of the steps' productive time; the pauses of quorum changes (below)
  // were never in it.
  const int dp = cluster_.pp_groups();
  if (replicas_.enabled() && step > before.last && live_replicas() < dp) {
    const double share = static_cast<double>(step - std::max(before.last, before.first)) * m *
                         static_cast<double>(dp - live_replicas()) / dp;
    lost_pending_[phase_key(TimePhase::kMissingReplicas)] += share;
    replicas_.add_share(share);
  }
  // The time since the last report not yet assigned beyond its steps. Steps faster than the
  // nominal one make it negative: then nothing is added (a counter never goes back) and
  // later time fills the gap first.
  const double productive = static_cast<double>(now_last - before.first) * m - replica_share_s();
  double rest = before.elapsed_s - productive - sum_of(lost_at(t)) - sum_of(lost_pending_);
  // Of it, the step's time over the nominal one: warm-up for an incarnation's first two steps
  // (the ones the nominal step time leaves out), checkpoint for a step that saved one. At
  // most what is unassigned: a first step began before the last rank's "started" reached
  // the controller, and that part is failover already.
  double excess = std::isfinite(step_time_s) && step_time_s > m ? step_time_s - m : 0;
  excess = std::min(excess, std::max(0.0, rest));
  if (progress_.steps_since_start() < 2)
    lost_pending_[phase_key(TimePhase::kWarmup)] += excess;
  else if (checkpoint_step && *checkpoint_step == step)
    lost_pending_[phase_key(TimePhase::kCheckpoint)] += excess;
  else
    excess = 0;
  // The rest is degraded (slow steps, gaps between steps), or the pause of a quorum change.
  rest -= excess;
  const TimePhase gap =
      replicas_.take_changed() ? TimePhase::kMissingReplicas : TimePhase::kDegraded;
  if (rest > 0) lost_pending_[phase_key(gap)] += rest;
  if ((t - lost_flushed_at_).to_seconds() >= kFlushEveryS) flush_account();
}

void LiveWorld::flush_account() {
  auto& lost = journal_.state().lost_s;
  for (const auto& [k, v] : lost_pending_) lost[k] += v;
  lost_pending_.clear();
  journal_.state().replica_share_s += replicas_.take_share();
  lost_flushed_at_ = now();
  save_journal();
}

void LiveWorld::account_restart_began(Instant t) {
  Incident* in = incidents_.open_stop();
  if (!in || in->restart_began) return;
  in->restart_began = t;
  save_journal();  // the failover phase must continue across a controller restart
}

void LiveWorld::account_waited(Instant since) {
  Incident* in = incidents_.open_stop();
  if (!in) return;
  const Instant from = std::max(since, in->detected);
  if (from < now()) in->waited += now() - from;
  save_journal();
}

void LiveWorld::account_closed(const Incident& in) {
  // The job restarted from a step beyond rank 0's last report: the stopped generation trained
  // steps no report told of (their checkpoint was restored). They are productive, so the
  // incident began no earlier than their training.
  Incident c = in;
  const Accounting acc = accounting_at(*in.resolved);
  if (ranks_.start_step() > acc.last)
    c.began =
        std::min(c.detected,
                 c.began + Duration::seconds(static_cast<double>(ranks_.start_step() - acc.last) *
                                             acc.step_time_s));
  auto& lost = journal_.state().lost_s;
  for (const auto& [k, v] : stop_phases(c, *c.resolved)) lost[k] += v;
  flush_account();
  write_account();
}

void LiveWorld::account_running() {
  std::optional<Incident> startup = incidents_.end_startup();
  if (!startup) return;
  Incident& in = *startup;
  in.resolved = now();
  auto& lost = journal_.state().lost_s;
  for (const auto& [k, v] : stop_phases(in, *in.resolved)) lost[k] += v;
  // Not saved here: the caller saves the journal once it records the first step too (a
  // journal with neither would start the start-up over).
}

void LiveWorld::resume_account() {
  const auto& s = journal_.state();
  if (!journal_.resumed() || (!s.stop && s.first_step < 0)) {
    // The run's start-up: from its start to every rank first running, a stop period
    // detected at once (the simulator's start is failover too).
    incidents_.begin_startup(
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
  if (p.waiting_since_ns >= 0 && Instant{p.waiting_since_ns} < now())
    in.waited += now() - Instant{p.waiting_since_ns};
  if (p.category == "startup")
    incidents_.begin_startup(std::move(in));
  else
    incidents_.resume(std::move(in));
}

std::optional<JournalState::Stop> LiveWorld::journal_stop() const {
  const Incident* in = incidents_.open_stop();
  if (!in) return std::nullopt;
  JournalState::Stop p;
  p.category = in->category;
  p.cause = in->cause;
  p.began_ns = in->began.ns;
  p.detected_ns = in->detected.ns;
  p.restart_began_ns = in->restart_began ? in->restart_began->ns : -1;
  p.waited_ns = in->waited.ns;
  if (waiting_acquire_) p.waiting_since_ns = std::max(waiting_acquire_->started, in->detected).ns;
  return p;
}

nlohmann::json LiveWorld::account_json(Instant until) const {
  const Accounting acc = accounting_at(until);
  nlohmann::json lost = nlohmann::json::object();
  for (const auto& [k, v] : lost_at(until)) lost[k] = v;
  return {{"elapsed_s", acc.elapsed_s},
          {"productive_s", acc.productive_s},
          {"ettr", acc.ettr},
          {"lost_s", std::move(lost)}};
}

void LiveWorld::write_account() { log("account", account_json(account_now())); }

}  // namespace faultline::live
