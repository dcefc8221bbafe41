// What a run costs (the scenario's `costs`, scenarios::CostSpec), in one currency unit:
// each replica's cost and the ratios built on it, the result's `cost` object and its table
// line. Nothing here runs unless the scenario has `costs`; the simulator itself only keeps
// the standby pool's machine-time (ReplicaResult::standby_machine_s), at pool changes.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "scenarios/scenario.h"
#include "sim/metrics.h"

namespace faultline::sim {

// One replica. total = gpu + standby + delay:
//   gpu      costs.gpu_hour x the job's GPUs x the run's length in hours (the horizon, or a
//            job of fixed work's time to train; the cap when it did not finish)
//   standby  costs.spare_machine_hour x the machine-hours warm standbys sat in the pool
//   delay    costs.delay_day x the days the job did not train (the run's length less its
//            productive time: (1 - ETTR) x horizon, or the time to train beyond the work)
// per_trained_day = total / productive days (infinite when the replica trained nothing);
// goodput_per_cost = productive GPU-hours / total.
struct ReplicaCost {
  double gpu = 0, standby = 0, delay = 0, total = 0;
  double standby_machine_h = 0;
  double per_trained_day = 0;
  double goodput_per_cost = 0;
};
ReplicaCost replica_cost(const scenarios::CostSpec& costs, const scenarios::Scenario& sc,
                         const ReplicaResult& r);

// The cost metrics of sweeps and sim tune (only for a scenario with costs), in order:
// cost, cost_per_trained_day, goodput_per_cost; and a replica's values of them.
const std::vector<std::string>& cost_metric_names();
std::vector<double> cost_metrics(const ReplicaCost& c);

// The result's `cost` object (the prices, then the mean, 95% CI, min, max and standard
// deviation over replicas of the cost per replica, per trained day and goodput per unit
// cost, and the mean of each part). Requires sc.costs.
nlohmann::json cost_json(const scenarios::Scenario& sc, const std::vector<ReplicaResult>& rs);
// The table's line for it ("" when the result has no `cost`).
std::string cost_table_line(const nlohmann::json& result);

}  // namespace faultline::sim
