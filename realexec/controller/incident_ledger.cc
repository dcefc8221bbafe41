#include "realexec/controller/incident_ledger.h"

namespace faultline::live {

std::vector<double> IncidentLedger::Stats::latency_bounds() {
  return {0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600, 1800, 3600};
}

void IncidentLedger::open(Incident in) {
  ++stats_.opened[in.category];
  stats_.detection.observe((in.detected - in.began).to_seconds());
  incidents_.push_back(std::move(in));
  if (incidents_.size() > kKept) incidents_.erase(incidents_.begin());
}

void IncidentLedger::resolve(Incident& in, Instant t, const std::string& resolution) {
  in.resolved = t;
  ++stats_.closed[{in.category, resolution}];
  stats_.recovery.observe((t - in.detected).to_seconds());
}

void IncidentLedger::close_run() {
  for (const Incident& in : incidents_)
    if (!in.resolved) ++stats_.closed[{in.category, "run_ended"}];
}

const Incident* IncidentLedger::open_stop() const {
  if (startup_) return &*startup_;
  return open_job_stop();
}

const Incident* IncidentLedger::open_job_stop() const {
  for (auto it = incidents_.rbegin(); it != incidents_.rend(); ++it)
    if (it->replica < 0) return it->resolved ? nullptr : &*it;
  return nullptr;
}

Incident* IncidentLedger::open_replica(std::int64_t r) {
  for (auto it = incidents_.rbegin(); it != incidents_.rend(); ++it)
    if (it->replica == r && !it->resolved) return &*it;
  return nullptr;
}

std::set<std::int64_t> IncidentLedger::replicas_out() const {
  std::set<std::int64_t> out;
  for (const Incident& in : incidents_)
    if (in.replica >= 0 && !in.resolved) out.insert(in.replica);
  return out;
}

std::uint64_t IncidentLedger::opened_total() const {
  std::uint64_t n = 0;
  for (const auto& [category, k] : stats_.opened) n += k;
  return n;
}

}  // namespace faultline::live
