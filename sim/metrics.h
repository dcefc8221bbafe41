// What one replica measured, and the aggregate over replicas.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "policies/api/action.h"
#include "sim/progress.h"

namespace faultline::sim {

// The fault ledger: what became of each fault (index into CategoryStats::outcomes).
enum FaultOutcome : int {
  kOutcomeInterrupted,  // struck the job: an incident
  kOutcomeCaught,  // its machine left the job on evidence (alert, failed test, crash log) before it
                   // struck
  kOutcomeLeft,    // its machine left the job for another reason before it struck
  kOutcomeAbsorbed,  // nothing it could hit: a transient fault while the job was down, an empty
                     // slot, or it ended (transient slowdown over, code fixed or rolled back) first
  kOutcomeHorizon,   // still waiting to strike when the horizon came
  kOutcomes
};
inline constexpr const char* kOutcomeNames[kOutcomes] = {"interrupted", "caught_before_strike",
                                                         "left_job", "absorbed", "horizon"};

struct CategoryStats {
  std::int64_t incidents = 0;
  std::int64_t injected = 0;  // ground-truth arrivals, including those that hit no running job
  double resolution_sum_s = 0;
  double resolution_max_s = 0;
  double detection_sum_s = 0;
  std::int64_t detected = 0;
  std::int64_t recurred = 0;  // faults that came back with a machine whose repair failed
  std::int64_t outcomes[kOutcomes] = {};  // sums to injected + recurred
};

// The incident that cost a replica most (longest from fault to resolution).
struct DominantIncident {
  int category = -1;
  double at_s = 0;
  double resolution_s = 0;
};

struct TimelinePoint {
  double t_h = 0;
  double cumulative = 0;  // ETTR from the start to t
  double window_1h = 0;   // ETTR over the hour ending at t
  double waiting_h = 0;   // hours spent waiting for machines (finite fleet) from the start to t
};

// How an incident ended (incidents.csv's `resolution`): the Mechanism the start that
// brought the job back credited (as resolved_by counts it; kNone when that start named
// none), or one of these.
inline constexpr Mechanism kResolutionOpen{"open_at_horizon"};  // still open at the horizon
// Ended while the job ran, no restart (a transient slowdown ran its course).
inline constexpr Mechanism kResolutionWhileRunning{"ended_while_running"};

// Incidents resolved, by the name of the mechanism credited (action.h): the built-ins' and
// any module's own, in the names' order.
using ResolvedBy = std::map<std::string, std::int64_t, std::less<>>;
// Counts one incident resolved by `m`: found by its name's text, copied into the map only the
// first time (a start or a replica's drop credits one on every incident it closes).
inline void credit(ResolvedBy& r, Mechanism m) {
  auto it = r.find(m.name());
  if (it == r.end()) it = r.emplace(std::string(m.name()), 0).first;
  ++it->second;
}

struct IncidentRecord {
  double at_s = 0;
  int category = 0;
  double detected_s = -1;  // -1 = never acted on
  double resolved_s = -1;  // -1 = open at the horizon
  std::vector<int> slots;
  Mechanism resolution = kResolutionOpen;
  std::vector<int> machines;  // the machines in `slots` when the fault struck (decisions.log's ids)
  std::vector<int> evicted;   // machines the policy evicted while the incident was open
};

// Parts of the unproductive time that one scenario input (or a few, always together) alone
// sets, in nanoseconds: the breakdown's buckets mix several, and the result's dominant
// assumptions are computed from these and from the buckets one input fills whole
// (warmup, restore). Each part lies inside the bucket named beside it.
struct Attributed {
  std::int64_t init = 0;  // failover: a start's process init (job.init_s, init_per_machine_s)
  std::int64_t inplace_init = 0;  // failover: an in-place restart's init (job.inplace_init_s)
  // failover, machines under way: a requeue's scheduling and image pulls (its scheduler
  // timings), cold machines' (reschedule timings; a standby shortfall too), standbys waking
  // (diagnosis.standby_wake_s). Time with several under way goes to the first of these
  // still waiting, in this order.
  std::int64_t requeue = 0;
  std::int64_t reschedule = 0;
  std::int64_t standby_wake = 0;
  std::int64_t on_call = 0;  // diagnosis: an ended run waiting for the on-call (job.on_call_fix_h)
  std::int64_t replay = 0;   // diagnosis: a replay under way (diagnosis.replay_s)
  // diagnosis: a stop-time test under way, by ProbeKind (its diagnosis timing; with several
  // at once, the earliest asked for).
  std::int64_t probe[kProbeKinds] = {};
  // checkpoint: saves whose blocking job.checkpoint_mfu_loss set (above the plan's own).
  std::int64_t mfu_checkpoint = 0;
};

struct ReplicaResult {
  std::uint64_t replica = 0;
  double ettr = 0;
  Breakdown breakdown;
  Attributed attributed;
  std::vector<CategoryStats> categories;
  std::int64_t evictions_true = 0;
  std::int64_t evictions_false = 0;           // healthy machines evicted, for any reason
  std::int64_t evictions_false_positive = 0;  // of those, ones a test had falsely failed
  std::int64_t false_failures = 0;            // tests that failed a healthy machine
  int max_fruitless_rounds = 0;          // longest run of fruitless diagnosis the stack reported
  std::int64_t health_check_drains = 0;  // broken machines the scheduler's check drained
  std::int64_t repairs = 0;              // machines repaired and back in the free pool
  std::int64_t retired = 0;              // machines retired after repeated failures
  std::int64_t runs_ended = 0;           // 1 when the policy ended the run (EndRun)
  DominantIncident dominant;
  std::int64_t incident_count = 0;  // incidents of every category (replicas.csv's `incidents`)
  std::int64_t faults_injected = 0;
  std::int64_t checkpoints = 0;
  std::int64_t events = 0;
  std::int64_t flow_batches_real = 0;
  std::int64_t flow_batches_cached = 0;
  std::int64_t steps = 0;
  ResolvedBy resolved_by;                // incidents per mechanism's name (kNone not counted)
  std::int64_t standby_exhaustions = 0;  // standby requests the pool could not fully serve
  std::int64_t remote_fallbacks = 0;     // restores that lost both in-memory copies
  // Failure prediction (scenario `warning`) and migration (MigrateMachines): warnings sent
  // (true and false), of those false ones, machines migrated, and of those healthy ones (a
  // false warning's: each also counts in evictions_false; the others in evictions_true).
  std::int64_t warnings = 0;
  std::int64_t warnings_false = 0;
  std::int64_t migrations = 0;
  std::int64_t migrations_needless = 0;
  // How long the run lasted: the horizon, or for a job of fixed work (job.work_days) the
  // time its work was done (its time to train) or the cap when it was not (censored).
  double elapsed_s = 0;
  bool finished = false;  // job.work_days: the work was done before the cap
  double exposure_s = 0;  // time on the fault clock: elapsed (wall), or running (compute)
  std::int64_t machines_beyond_fleet =
      0;                           // endless fleet: fresh machines the wider cluster supplied
  std::int64_t machines_used = 0;  // distinct machines the run used (job, standbys, replacements)
  double standby_machine_s = 0;    // machine-time warm standbys sat in the pool (costs)
  std::int64_t preemptions = 0;    // finite fleet: preemptible machines taken
  bool depleted = false;  // finite fleet: waiting at the end for machines that will never come
  std::vector<TimelinePoint> timeline;
  std::vector<IncidentRecord> incidents;
  std::vector<std::string> decisions;  // only with --decisions
  // CPU seconds the replica took in the process that ran it (its thread's clock, SimGrid
  // included). A measurement, not a result: it varies run to run and is written only to
  // `sim run --replica-cpu`, never to result.json or replicas.csv.
  double cpu_s = 0;
};

// Per-category ledger sums and per-mechanism resolution counts over replicas, added in
// replica order: the sums aggregate() reports, bit for bit. A run of many replicas folds
// each result in as it arrives and drops its per-category vectors (about 1 KB a replica
// at the default scenario's 12 categories) instead of keeping them all to the end.
struct CategoryTotals {
  struct Sums {
    double incidents = 0, injected = 0, resolution_sum_s = 0, resolution_max_s = 0,
           detection_sum_s = 0, detected = 0, recurred = 0;
    double outcomes[kOutcomes] = {};
  };
  std::vector<Sums> categories;
  std::map<std::string, double, std::less<>> resolved_by;  // per mechanism's name
  // Adds r's categories and resolved_by.
  void add(const ReplicaResult& r);
};
// Frees r's categories and resolved_by (once a CategoryTotals holds them).
void release_categories(ReplicaResult& r);

// A replica's result as bytes and back, bit for bit (a forked replica's to its parent, a
// sweep store's chunks): the fields in a fixed order, not a file format across builds.
// decode throws std::runtime_error on bytes it cannot have written.
std::vector<std::uint8_t> encode(const ReplicaResult& r);
ReplicaResult decode(const std::vector<std::uint8_t>& bytes);

struct Summary {
  double mean = 0, lo = 0, hi = 0, min = 0, max = 0, stddev = 0;
};
// Mean with a 95% confidence interval (Student t for small n, normal beyond 30).
Summary summarize(const std::vector<double>& xs);

// Percentile-bootstrap 95% confidence intervals over replicas (Efron's percentile method):
// `resamples` resamples of the n values, each n draws with replacement from an Rng seeded
// by (seed, a fixed key), so the same values and seed give the same interval bit for bit;
// each resample gives the statistic, and the interval is the 2.5% and 97.5% quantiles of
// those (linear interpolation, type 7). An end is +inf where values of +inf (censored: longer
// than any) reach it; NaN ends for no values.
struct Interval {
  double lo = 0, hi = 0;
};
// The q-quantile (type 7, as numpy's default) of every resample, for each q of `qs`.
// `sorted`: ascending, +inf last.
std::vector<Interval> bootstrap_quantile_ci95(const std::vector<double>& sorted,
                                              const std::vector<double>& qs, int resamples,
                                              std::uint64_t seed);
// The mean of every resample (finite values).
Interval bootstrap_mean_ci95(const std::vector<double>& xs, int resamples, std::uint64_t seed);
// The q-quantile (type 7) of sorted values; +inf when it falls on or next to a +inf, NaN for
// none.
double quantile_type7(const std::vector<double>& sorted, double q);

}  // namespace faultline::sim
