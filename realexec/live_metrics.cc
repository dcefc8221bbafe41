// LiveWorld's metrics for `GET /metrics` (docs/metrics.md): the same accounting as
// status() and the summary, so that faultline_ettr is the controller's own number.
#include <map>

#include "realexec/live_world.h"

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

  // Unproductive seconds by phase; they sum to elapsed - productive.
  PhaseSeconds p = incident_stats_.closed_phases;
  if (!incidents_.empty() && !incidents_.back().resolved) {
    const PhaseSeconds open = phases(incidents_.back(), until);
    p.detection += open.detection;
    p.diagnosis += open.diagnosis;
    p.restart += open.restart;
  }
  const double startup = first_running_at_ ? first_running_at_->to_seconds() : until.to_seconds();
  const double unproductive = acc.elapsed_s - acc.productive_s;
  out.push_back(
      labelled("faultline_unproductive_seconds",
               "Seconds not training, by phase: startup (to the first start), detection, diagnosis "
               "and restart of incidents, other (slow steps; the remainder).",
               MetricType::kGauge, "phase",
               {{"startup", startup},
                {"detection", p.detection},
                {"diagnosis", p.diagnosis},
                {"restart", p.restart},
                {"other", unproductive - startup - p.detection - p.diagnosis - p.restart}}));

  std::map<std::string, double> opened;
  for (const auto& [category, n] : incident_stats_.opened)
    opened[category] = static_cast<double>(n);
  out.push_back(labelled("faultline_incidents_opened_total",
                         "Incidents opened (the job stopped training), by category.",
                         MetricType::kCounter, "category", opened));
  MetricFamily closed{
      "faultline_incidents_total",
      "Incidents closed, by category and resolution (recovered: every rank runs again; "
      "run_ended: still open when the run ended).",
      MetricType::kCounter,
      {},
      {}};
  for (const auto& [key, n] : incident_stats_.closed)
    closed.samples.push_back(
        Sample{{{"category", key.first}, {"resolution", key.second}}, static_cast<double>(n)});
  out.push_back(std::move(closed));
  out.push_back(gauge("faultline_incidents_open", "Incidents open now (0 or 1).",
                      !incidents_.empty() && !incidents_.back().resolved && !closed_at_ ? 1 : 0));
  out.push_back(
      histogram("faultline_detection_latency_seconds",
                "From rank 0's last step report to the controller knowing the job stopped.",
                incident_stats_.detection));
  out.push_back(histogram("faultline_recovery_latency_seconds",
                          "From an incident's detection to every rank running again.",
                          incident_stats_.recovery));

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
                      static_cast<double>(last_step_)));
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

}  // namespace faultline::live
