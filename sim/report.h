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
nlohmann::json aggregate(const scenarios::Scenario& sc, const std::vector<ReplicaResult>& rs,
                         double wall_s);
// A fixed-width table of the headline figures.
std::string format_table(const nlohmann::json& result);
// Writes result.json, replicas.csv, and (when present) timeline.csv, incidents.csv and
// decisions.log into `dir` (created). Throws std::runtime_error on I/O failure.
void write_out_dir(const std::string& dir, const nlohmann::json& result,
                   const std::vector<ReplicaResult>& rs, const scenarios::Scenario& sc);

}  // namespace faultline::sim
