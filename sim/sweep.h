// Parameter sweeps and tuning over a scenario: many points (scenario variants), each
// simulated for the same replicas, stored in a directory so a rerun resumes.
//
// Common random numbers: every point runs replicas 0..N-1 with the scenario's seed, and
// a replica draws its faults only from streams seeded by (seed, replica, category)
// (sim/faults.h), so two points see the same fault arrivals and differ only by what
// their parameters change. A replica of a point is computed exactly as `sim run` does
// it: in a process that built the platform and ran replica 0 first (which fills the
// transfer memo), forked for that replica. So a point's result is byte-identical to
// `sim run` with the same `--set`s, however the replicas are split into work items,
// over processes or over MPI ranks.
//
// One SimGrid engine per process: the functions here that simulate fork, and must be
// called in a process that has not started an engine itself (the CLI's parent).
//
// The store (DIR):
//   sweep.csv, sweep.json           the tidy table of the last sweep (deterministic)
//   points/ID/point.json            what the point is (parameters, scenario, replicas)
//   points/ID/chunk-A-B.bin         replicas [A, B) while the point is incomplete
//   points/ID/result.json           the aggregated result (sim run's JSON plus the
//                                   sweep's metrics and per-replica values) = done
// ID is analysis::point_id: a readable prefix and a hash of everything that decides
// the result, so the same point under the same DIR is never computed twice.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "analysis/sweep_plan.h"
#include "policies/api/registry.h"
#include "scenarios/scenario.h"

namespace faultline::sim {

struct SweepSpec {
  std::string scenario_path;
  analysis::SweepBase base;          // scenario_text is filled by make_plan
  std::vector<analysis::Axis> axes;  // empty: one point, the scenario itself
  // --baseline: the index of the point every other is compared with (paired differences
  // in the table, sweep.csv and sweep.json); -1: none.
  int baseline = -1;
};

struct PlannedPoint {
  analysis::SweepPoint point;
  scenarios::Scenario scenario;  // base sets, then the point's, then seed/replicas
};

// Reads the scenario file and validates every point of the spec (a bad value fails
// here, before anything runs). Throws scenarios::ScenarioError (with the point's
// parameters in the message) or analysis::PlanError.
std::vector<PlannedPoint> make_plan(SweepSpec& spec, const Registry& registry);
// The same for points chosen by the caller (sim tune).
std::vector<PlannedPoint> plan_points(const SweepSpec& spec,
                                      const std::vector<analysis::Assignment>& points,
                                      const Registry& registry);

// Replicas [first, last) of one point.
struct WorkItem {
  int point = 0;
  int first = 0;
  int last = 0;
};

struct ExecOptions {
  int jobs = 1;  // work items in parallel (each one process at a time)
  // Called in this process as replicas finish: (replicas done, replicas to do).
  std::function<void(long long, long long)> on_progress;
  // Called in this process as points finish: (points whose replicas are all computed, those
  // with nothing pending from the start included; points in all).
  std::function<void(long long, long long)> on_points;
};

// Per-replica metrics of the sweep table, in column order (ettr, each breakdown
// bucket in seconds, unproductive_s, incidents, faults_injected, evictions, ...).
const std::vector<std::string>& metric_names();

class SweepStore {
 public:
  // Creates DIR/points if needed. Throws std::runtime_error on I/O failure.
  explicit SweepStore(std::string dir);
  const std::string& dir() const { return dir_; }
  std::string point_dir(const PlannedPoint& p) const;
  // Whether result.json exists for the point.
  bool done(const PlannedPoint& p) const;
  // Replica ranges of the point that no chunk file holds yet (all of them when none).
  std::vector<std::pair<int, int>> pending(const PlannedPoint& p) const;
  // The point's result.json (requires done()).
  nlohmann::json result(const PlannedPoint& p) const;
  // Aggregates the chunks of a point that has all its replicas into result.json and
  // removes the chunks. Throws std::runtime_error when replicas are missing.
  nlohmann::json finish(const PlannedPoint& p) const;
  // Writes point.json (idempotent).
  void describe(const PlannedPoint& p, const std::string& scenario_path) const;

 private:
  std::string dir_;
};

// Work items for the pending replicas of the points not yet done, split so that at
// least `jobs` items exist when there is enough to split.
std::vector<WorkItem> pending_items(const std::vector<PlannedPoint>& points,
                                    const SweepStore& store, int jobs);
// Halves the largest items until there are `jobs` of them (or none can be split).
// Splitting never changes a replica's result; each new item costs one extra replica 0
// (the transfer-memo warm-up).
std::vector<WorkItem> split_items(std::vector<WorkItem> items, int jobs);

// Runs the items in forked children (at most opt.jobs at a time), each writing its
// chunk file into the store. Throws std::runtime_error when a child fails.
void execute(const std::vector<PlannedPoint>& points, const std::vector<WorkItem>& items,
             const Registry& registry, const SweepStore& store, const ExecOptions& opt);

// Runs everything pending for `points` and returns each point's result.json, in order.
std::vector<nlohmann::json> run_points(const std::vector<PlannedPoint>& points,
                                       const Registry& registry, const SweepStore& store,
                                       const ExecOptions& opt);

// The point of `points` that --baseline's KEY=VALUE[+KEY=VALUE...] names (KEY: a swept
// field's path, or its last part when no other swept field ends alike; values compared as
// JSON, so 1800 is 1800.0). Throws analysis::PlanError naming the swept fields when it names
// no point or several.
int find_point(const SweepSpec& spec, const std::vector<PlannedPoint>& points,
               const std::string& text);

// The sweep's tidy table: one row per point, parameters, replicas, then mean, lo, hi of
// every metric; for a job of fixed work the time to train (mean and its CI, p50/p90/p99 and
// their bootstrap CIs, censored replicas); with spec.baseline, every metric's paired
// difference to the baseline point (mean, lo, hi), ETTR's unpaired CI and the shares of
// replicas won, tied and lost (sim compare's vs_baseline). Deterministic text (shortest
// round-trip numbers).
std::string sweep_csv(const SweepSpec& spec, const std::vector<PlannedPoint>& points,
                      const std::vector<nlohmann::json>& results);
nlohmann::ordered_json sweep_json(const SweepSpec& spec, const std::vector<PlannedPoint>& points,
                                  const std::vector<nlohmann::json>& results);
std::string sweep_table(const SweepSpec& spec, const std::vector<PlannedPoint>& points,
                        const std::vector<nlohmann::json>& results);

}  // namespace faultline::sim
