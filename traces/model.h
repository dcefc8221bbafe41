// Fault models for the simulator, in the scenario's own `faults` format.
//
// - fault_model: a trace, fitted. Each category of a mapping table gets the trace's
//   rate (its faults per fleet node-day), the family the fit report recommends for the
//   per-node time between its failures (lr_test: the exponential unless the
//   likelihood-ratio test rejects it, then a Weibull shape or a lognormal sigma) and its
//   mean repair time. The output is {"categories": [...]}: paste it into a scenario
//   as "faults", or pass it with --set "faults=$(cat model.json)". A value the scenario
//   loader would refuse refuses the model: clipped to the schema's limit it would be a
//   distribution nobody fitted, run without a word.
// - published_mix: a published incident mix (ByteRobust's Table 1, Llama 3 405B's Table 5)
//   at its published rate, where its source gives one, or rescaled to a chosen incident
//   rate, for a job of a chosen size.
// - generate_trace: synthetic per-node timelines drawn from a trace fit, to check a
//   fit against its source or to make traces of any size.
#pragma once

#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "traces/category_map.h"
#include "traces/config.h"
#include "traces/fit.h"
#include "traces/trace.h"

namespace faultline::traces {

// The range the scenario loader accepts for a field a fault model computes (parse_category
// in scenarios/scenario.cc, which traces/ may not include; a test holds them equal).
struct SchemaRange {
  const char* key;
  double lo, hi;
  bool lo_open;  // lognormal_sigma must be > 0: 0 means "not lognormal"
  bool contains(double v) const { return (lo_open ? v > lo : v >= lo) && v <= hi; }
  std::string text() const;  // "[0.05, 20]", "(0, 10]"
};
inline constexpr SchemaRange kRateRange{"rate_per_machine_day", 0, 1e6, false};
inline constexpr SchemaRange kWeibullShapeRange{"weibull_shape", 0.05, 20, false};
inline constexpr SchemaRange kLognormalSigmaRange{"lognormal_sigma", 0, 10, true};
inline constexpr SchemaRange kRepairRange{"repair_h", 0, 1e5, false};

// The field of a fault model that carries a fit of times between failures: weibull_shape
// for a Weibull, lognormal_sigma for a lognormal; none (range null) for the exponential,
// whose rate is the whole model. `written` is the value as the model writes it (3
// significant digits), the one the range is checked on.
struct ModelField {
  const SchemaRange* range = nullptr;
  double fitted = NAN, written = NAN;
  bool within() const { return !range || range->contains(written); }
  // "lognormal_sigma 11.18 is outside the scenario schema's (0, 10]"; empty when within.
  std::string outside() const;
};
ModelField model_field(const Dist& d);

struct ModelOptions {
  int nodes = 0;                 // fleet size override
  std::size_t min_samples = 10;  // fewer observed gaps: the exponential
};

struct FaultModel {
  // {"categories": [...]} with one entry per mapping category (rate 0 when the trace has
  // none of it); null when refused.
  nlohmann::ordered_json model;
  // What was assumed, and for each category with faults the family written and why (the
  // fit report's recommendation for its sample), one line each.
  std::vector<std::string> notes;
  // One line per value outside the scenario schema, naming the category, the field, the
  // fitted value and the range.
  std::vector<std::string> refused;
  bool ok() const { return refused.empty(); }
};

FaultModel fault_model(const Trace& t, const CategoryMap& map, const ModelOptions& opt);

// Built-in published mixes (traces/models/README.md: each row's mapping and its source).
std::vector<std::string> mix_names();
std::string mix_description(const std::string& name);

// A mix's published rate, where its source gives one: `incidents` in `days` on a job of
// `machines` machines of `gpus_per_machine` GPUs.
struct PublishedRate {
  double incidents = 0, days = 0;
  int machines = 0, gpus_per_machine = 0;
  bool published() const { return incidents > 0; }
};
// Throws TraceError for an unknown name.
PublishedRate mix_published_rate(const std::string& name);

// The mix for a job of `machines` machines. With `incidents_per_day` NaN, at its published
// rate: machine categories get the source's count per machine-day (count / (days x
// machines)), job-wide ones its count per day, whatever the job's size. Else scaled to
// `incidents_per_day`: machine categories get rate_per_machine_day = rate x share /
// machines, job-wide ones rate_per_job_day = rate x share. Throws TraceError for an
// unknown name, a mix without a published rate and no rate, or a non-positive rate or size.
nlohmann::ordered_json published_mix(const std::string& name, double incidents_per_day,
                                     int machines);
// The incidents a day a fault model ({"categories": [...]}) gives a job of `machines`
// machines: its machine rates times `machines`, plus its job rates.
double mix_incidents_per_day(const nlohmann::ordered_json& model, int machines);

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
