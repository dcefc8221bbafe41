// LostTimeAccount: live mode's account of lost time by phase (docs/metrics.md, "Lost time")
// and the ETTR so far, which the status, the metrics, the event log's "account" record and
// the summary share (live_metrics.cc; lost_time_account.cc).
//
// Stop periods (the start-up, incidents) are measured by their boundaries, which the journal
// keeps, so that their phases grow with the clock and continue across a controller restart.
// Step measures (recompute, warm-up, checkpoint, degraded) are assigned at the step rank's
// reports, gathered here and moved into the journal's account at most once a second; the
// metrics show only what the journal holds, so a restarted controller never shows less than
// its predecessor did. LiveWorld owns the parts it reads (handed in as Sources) and calls it
// at the job's turns. Unit-tested in tests/realexec/agent/live_world_parts_test.cc.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "policies/api/cluster_view.h"
#include "policies/api/time.h"
#include "realexec/controller/incident_ledger.h"
#include "realexec/controller/journal.h"
#include "realexec/controller/replica_set.h"
#include "realexec/controller/step_progress.h"

namespace faultline::live {

class LostTimeAccount {
 public:
  // What the account reads and how it acts, all owned by the world.
  struct Sources {
    Journal& journal;  // the account so far (lost_s, the open stop, first_step)
    IncidentLedger& incidents;
    const StepProgress& progress;  // the step rank's reports
    ReplicaSet& replicas;          // the missing replicas' share of the steps
    const ClusterView& cluster;    // the replicas' count (pp_groups)
    double nominal_step_time_s;
    std::function<Instant()> now;               // the run's clock
    std::function<bool()> running;              // every rank of the current generation started
    std::function<void()> save;                 // saves the journal (with the world's placement)
    std::function<void(nlohmann::json)> write;  // the event log's "account" record
    // Since when an AcquireMachines short of machines waits, while one does.
    std::function<std::optional<Instant>()> waiting_since;
  };
  // ETTR so far, as the summary computes it.
  struct Accounting {
    double step_time_s = 0, elapsed_s = 0, productive_s = 0, ettr = 0;
    std::int64_t first = 0, last = 0;
  };

  explicit LostTimeAccount(Sources s) : s_(std::move(s)) {}

  // At construction of the world, its clock set: the stop period to continue (the journal's,
  // or the start-up).
  void resume();
  // The step rank reported `step` (before the progress moves to it): recompute when it went
  // back, the step's time over the nominal one as warm-up or checkpoint, and the rest of the
  // time since the last report beyond its step as degraded.
  void step(std::int64_t step, double step_time_s, std::optional<std::int64_t> checkpoint_step);
  void restart_began(Instant t);  // a start was launched
  void waited(Instant since);     // an AcquireMachines waited from `since` to now
  // Adds a stop period's phases for good; `start_step`: the step the restart began from.
  void closed(const Incident& in, std::int64_t start_step);
  void running();  // every rank runs: the start-up ends (the caller saves the journal)
  // The summary: the clock stops, every incident closes and the time not yet assigned is;
  // the "account" record is written. Returns the accounting as of that moment.
  Accounting close();

  // The open stop period as the journal keeps it (none when the job runs).
  std::optional<JournalState::Stop> journal_stop() const;
  // Seconds per lost phase (traces/time_phases.h names) as of `until`: what the journal
  // holds, plus the open stop period's phases.
  std::map<std::string, double> lost_at(Instant until) const;
  Accounting at(Instant at) const;  // one reading of the clock for everything derived from it
  Accounting accounting() const { return at(as_of()); }
  nlohmann::json to_json(Instant until) const;  // status and the "account" record
  // The accounting's "now": the summary's time once it is written.
  Instant as_of() const { return closed_at_ ? *closed_at_ : s_.now(); }
  bool ended() const { return closed_at_.has_value(); }
  // The steps' time the missing replicas did not train, so far (part of missing_replicas).
  double replica_share_s() const;

 private:
  // A stop period's seconds in each phase up to `until`: detection (began to detected),
  // diagnosis (detected to the first restart), failover (to every rank running again),
  // less what it waited for machines (waiting_for_machines).
  std::map<std::string, double> stop_phases(const Incident& in, Instant until) const;
  void resume_stop();  // resume()'s stop period
  void flush();        // the pending step measures into the journal's account, the journal saved
  void write() { s_.write(to_json(as_of())); }

  Sources s_;
  std::map<std::string, double> pending_;  // step measures not yet in the journal
  Instant flushed_at_{};
  std::optional<Instant> closed_at_;  // the summary's time: the accounting's "now" after it
};

}  // namespace faultline::live
