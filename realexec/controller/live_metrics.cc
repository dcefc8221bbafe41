// LiveWorld's metrics for `GET /metrics` (docs/metrics.md): the same accounting as
// status() and the summary (LostTimeAccount, lost_time_account.h), so that faultline_ettr is
// the controller's own number; and the incidents' counters the journal keeps.
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
  // In the order of RepairPipeline::MachineState.
  static const char* const kNames[] = {
      "job", "standby", "retired", "repair_check", "awaiting_repair", "left_to_operator", "out"};
  return kNames[state];
}

}  // namespace

std::vector<MetricFamily> LiveWorld::metrics() const {
  const Instant until = account_.as_of();
  const LostTimeAccount::Accounting acc = account_.at(until);
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
                         MetricType::kCounter, "phase", account_.lost_at(until)));

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
  for (const Incident& in : incidents_.incidents())
    open += !in.resolved && !account_.ended() ? 1 : 0;
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

  using MachineState = RepairPipeline::MachineState;
  std::map<std::string, double> states;
  for (int s = 0; s <= static_cast<int>(MachineState::kOut); ++s) states[state_label(s)] = 0;
  int connected = 0;
  int repair_queue = 0;
  for (MachineId m = 0; m < cluster_.machine_count(); ++m) {
    const MachineState s = repairs_.state(m);
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
                      account_.ended() ? 1 : 0));
  out.push_back(labelled("faultline_storage_failing",
                         "1 while writing the event log or the journal fails.", MetricType::kGauge,
                         "store",
                         {{"event_log", log_.health().failing ? 1.0 : 0.0},
                          {"journal", journal_.health().failing ? 1.0 : 0.0}}));
  return out;
}

// --- the incidents' counters in the journal ---------------------------------------------

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

}  // namespace faultline::live
