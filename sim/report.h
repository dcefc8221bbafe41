// Aggregates replica results into the run's JSON result and its human table, and
// writes the per-replica files of --out.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "scenarios/scenario.h"
#include "sim/metrics.h"

namespace faultline::sim {

// The result document. `wall_s` is the only field that differs between identical runs.
// `folded`: the per-category sums of rs when the run folded them as results arrived (and
// dropped them from rs); null: they are summed from rs here.
nlohmann::json aggregate(const scenarios::Scenario& sc, const std::vector<ReplicaResult>& rs,
                         double wall_s, const CategoryTotals* folded = nullptr);
// A fixed-width table of the headline figures.
std::string format_table(const nlohmann::json& result);
// incidents.csv's `resolution`: the mechanism of the start that resolved the incident
// (mechanism_name, the keys of resolved_by_per_replica, "none" when that start named no
// mechanism), "ended_while_running" (it ended while the job ran, with no restart: a
// transient slowdown that ran its course) or "open_at_horizon" (sim/metrics.h).
std::string resolution_name(Mechanism resolution);
// Writes result.json, replicas.csv, and (when present) timeline.csv, incidents.csv and
// decisions.log into `dir` (created). Throws std::runtime_error on I/O failure.
void write_out_dir(const std::string& dir, const nlohmann::json& result,
                   const std::vector<ReplicaResult>& rs, const scenarios::Scenario& sc);

}  // namespace faultline::sim
