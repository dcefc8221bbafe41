// IncidentLedger: LiveWorld's incidents (status, metrics, the account of lost time): the run's
// start-up, each stop of the job from its last step report to every rank running again, and
// each replica's drop from the quorum to its training again; with the counts and latencies
// the metrics expose beyond the latest kKept incidents. No clock, no I/O: unit-tested in
// tests/realexec/agent/live_world_parts_test.cc.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "policies/api/time.h"
#include "realexec/controller/metrics.h"

namespace faultline::live {

// From the job's stop (or a replica's drop) to every rank running again.
struct Incident {
  Instant began;  // rank 0's last step report before the stop (or the stop itself)
  std::optional<Instant> resolved;
  std::string cause;
  std::string category;
  Instant detected;                      // when the controller knew the job had stopped
  std::optional<Instant> restart_began;  // the first start launched after it
  Duration waited{};                     // AcquireMachines waited for machines in it
  std::int64_t replica = -1;             // a replica's drop (replica_groups.cc); -1: a stop
};

class IncidentLedger {
 public:
  static constexpr std::size_t kKept = 1000;  // incidents kept (the latest)

  // What the metrics count beyond the incidents kept.
  struct Stats {
    std::map<std::string, std::uint64_t> opened;  // category -> count
    // (category, resolution) -> count; resolution: recovered, or run_ended (still open
    // when the summary was written).
    std::map<std::pair<std::string, std::string>, std::uint64_t> closed;
    Histogram detection{latency_bounds()}, recovery{latency_bounds()};
    static std::vector<double> latency_bounds();
  };

  // An incident opens: kept (the oldest dropped past kKept), counted, its detection latency
  // observed.
  void open(Incident in);
  // `in` (one of these) resolved at `t` with `resolution` (recovered, ...): counted, its
  // recovery latency observed.
  void resolve(Incident& in, Instant t, const std::string& resolution);
  // The run's summary: every incident still open counts as closed by the run's end.
  void close_run();
  // An incident continued from a journal (neither counted nor observed again).
  void resume(Incident in) { incidents_.push_back(std::move(in)); }

  // The run's start-up, from its start to every rank first running (a stop period too).
  void begin_startup(Incident in) { startup_ = std::move(in); }
  // The start-up ends: the one open, if any.
  std::optional<Incident> end_startup() { return std::exchange(startup_, std::nullopt); }

  // The stop period open now: the start-up, or the latest stop of the job while unresolved.
  const Incident* open_stop() const;
  Incident* open_stop() { return const_cast<Incident*>(std::as_const(*this).open_stop()); }
  // The latest stop of the job (no replica's drop) while unresolved (stops do not overlap).
  const Incident* open_job_stop() const;
  Incident* open_job_stop() { return const_cast<Incident*>(std::as_const(*this).open_job_stop()); }
  // Replica r's drop while open.
  Incident* open_replica(std::int64_t r);
  const Incident* open_replica(std::int64_t r) const {
    return const_cast<IncidentLedger*>(this)->open_replica(r);
  }
  // The replicas out of the quorum (their incident open).
  std::set<std::int64_t> replicas_out() const;

  const std::vector<Incident>& incidents() const { return incidents_; }
  const Stats& stats() const { return stats_; }
  Stats& stats() { return stats_; }  // restored from a journal
  // Every incident opened in the run (incidents() keeps only the latest kKept).
  std::uint64_t opened_total() const;

 private:
  std::vector<Incident> incidents_;
  std::optional<Incident> startup_;
  Stats stats_;
};

}  // namespace faultline::live
