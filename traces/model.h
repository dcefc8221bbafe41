// Fault models for the simulator, in the scenario's own `faults` format.
//
// - fault_model: a trace, fitted. Each category of a mapping table gets the trace's
//   rate (its faults per fleet node-day), a Weibull shape when the per-node time
//   between its failures fits a Weibull better than an exponential (by AIC), and its
//   mean repair time. The output is {"categories": [...]}: paste it into a scenario
//   as "faults", or pass it with --set "faults=$(cat model.json)".
// - published_mix: a published incident mix (ByteRobust's Table 1) rescaled to a
//   chosen incident rate for a job of a chosen size.
// - generate_trace: synthetic per-node timelines drawn from a trace fit, to check a
//   fit against its source or to make traces of any size.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "traces/category_map.h"
#include "traces/config.h"
#include "traces/fit.h"
#include "traces/trace.h"

namespace faultline::traces {

struct ModelOptions {
  int nodes = 0;                 // fleet size override
  std::size_t min_samples = 10;  // fewer observed gaps: Weibull shape 1
};

// Returns {"categories": [...]} with one entry per mapping category (rate 0 when the
// trace has none of it). Notes say what was assumed.
nlohmann::ordered_json fault_model(const Trace& t, const CategoryMap& map, const ModelOptions& opt,
                                   std::vector<std::string>* notes);

// Built-in published mixes.
std::vector<std::string> mix_names();
std::string mix_description(const std::string& name);
// The mix scaled to `incidents_per_day` for a job of `machines` machines: machine
// categories get rate_per_machine_day = rate x share / machines, job-wide ones
// rate_per_job_day = rate x share. Throws TraceError for an unknown name or a
// non-positive rate or size.
nlohmann::ordered_json published_mix(const std::string& name, double incidents_per_day,
                                     int machines);

struct GenerateOptions {
  int nodes = 0;    // 0 = the fit's fleet
  double days = 0;  // 0 = the fit's window
  std::uint64_t seed = 1;
  std::size_t min_samples = 10;  // class fits with fewer observations fall back to the overall fit
};

// Draws a trace: per node and per class, a renewal process in equilibrium with the
// class's rate (Weibull shape from the class fit, or the overall fit), descriptions in
// the class's proportions, and repair times from the best repair fit. Deterministic
// for a seed. Sorted by time; window [0, days]; fleet_nodes set.
Trace generate_trace(const TraceFit& fit, const GenerateOptions& opt);

}  // namespace faultline::traces
