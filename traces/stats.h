// Descriptive statistics of a fault trace: what `faultline trace stats` prints.
//
// Rates are per node-day of the fleet, and the node count matters: a trace lists only
// nodes that failed, but the servers that never failed were observed too. The
// denominator is, in order: --nodes, the trace's declared fleet size (400 for the
// InfiniteHBD release), else the distinct nodes in the trace; the output says which.
// The observation span is first to last event (or the trace's declared window).
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "traces/trace.h"

namespace faultline::traces {

struct Summary {
  std::size_t n = 0;
  double mean = NAN, median = NAN, p90 = NAN, min = NAN, max = NAN, stddev = NAN;
  double cv() const { return mean > 0 ? stddev / mean : NAN; }
};
// Mean, median, 90th percentile (linear interpolation between order statistics),
// extremes and the population standard deviation. Takes a copy to sort.
Summary summarize(std::vector<double> xs);
// The p-quantile (0 <= p <= 1) of sorted data, linear interpolation; NaN when empty.
double quantile_sorted(const std::vector<double>& sorted, double p);
// The median (the mean of the middle two for an even count); NaN when empty.
double median(std::vector<double> xs);
// The two-sided 95% Student t quantile for `dof` degrees of freedom (a table to 30, then
// 1.96 + 2.4/dof); 0 for dof 0. The one t95 of the simulator's, sweeps' and tuning's
// confidence intervals.
double student_t95(std::size_t dof);

struct GroupCount {
  std::string name;
  std::size_t faults = 0;
  std::size_t nodes = 0;  // distinct nodes with such a fault
  Summary repair_h;
};

struct StatsOptions {
  int nodes = 0;  // fleet size override (--nodes); 0 = declared, else distinct
};

struct TraceStats {
  std::string source, format;
  std::size_t events = 0, faults = 0, fault_starts = 0, fault_ends = 0, whole_faults = 0, joins = 0;
  std::size_t unmatched_ends = 0, open_faults = 0;
  std::size_t nodes = 0, nodes_with_faults = 0;
  double first_s = 0, last_s = 0, span_days = 0;
  int fleet_nodes = 0;
  std::string fleet_source;  // "--nodes", "declared by the trace", "distinct nodes in the trace"
  double faults_per_1000_node_days = NAN;
  double fleet_mtbf_h = NAN;     // span / faults: time between faults anywhere in the fleet
  double node_mtbf_days = NAN;   // fleet_nodes * span / faults
  Summary repair_h;              // paired faults
  Summary interarrival_h;        // consecutive fault starts, fleet-wide
  std::size_t simultaneous = 0;  // fleet-wide gaps of zero
  Summary node_tbf_days;         // consecutive faults of the same node
  std::vector<GroupCount> by_level, by_class, by_scope;  // most faults first
};

TraceStats compute_stats(const Trace& t, const StatsOptions& opt = {});
nlohmann::json stats_json(const TraceStats& s);
std::string stats_table(const TraceStats& s);

}  // namespace faultline::traces
