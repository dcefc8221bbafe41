// Maximum-likelihood fits of fault inter-arrival and repair times.
//
// Three families (exponential, Weibull, lognormal), each fitted to a right-censored
// sample: a node's last fault-free stretch, or a fault still open when the trace
// ends, says only "longer than this". Ignoring that would fit the fault-prone nodes
// and overstate the rate; with it, the exponential fit of per-node time between
// failures is faults / (fleet nodes x window), the figure `trace stats` gives (less
// the simultaneous faults, whose zero gaps no continuous family can hold).
// Each fit reports its log-likelihood, AIC (2k - 2 ln L) and the Kolmogorov-Smirnov
// distance between the model and the Kaplan-Meier estimate (the plain empirical CDF
// when nothing is censored).
//
// Numerics: the Weibull shape solves the profile-likelihood score by safeguarded
// Newton iterations; the censored lognormal is a damped Newton ascent in (mu, log
// sigma); both on Eigen arrays.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "policies/api/rng.h"
#include "traces/trace.h"

namespace faultline::traces {

enum class Family : std::uint8_t { kExponential, kWeibull, kLognormal };
const char* family_name(Family f);

// `observed`: complete durations; `censored`: durations known only to exceed the value.
struct Sample {
  std::vector<double> observed;
  std::vector<double> censored;
};

// A fitted distribution. Parameters: exponential a = rate; Weibull a = shape k,
// b = scale lambda; lognormal a = mu, b = sigma (of the log). Units are the sample's.
struct Dist {
  Family family = Family::kExponential;
  double a = NAN, b = NAN;
  int parameters() const { return family == Family::kExponential ? 1 : 2; }
  double cdf(double x) const;
  double log_pdf(double x) const;
  double log_survival(double x) const;
  double mean() const;
  double median() const;
  double sample(Rng& rng) const;
};

struct FitResult {
  Dist dist;
  bool ok = false;
  std::string note;  // why not ok, or a remark
  double loglik = NAN, aic = NAN, ks = NAN;
  int iterations = 0;
};

// Fits of one sample. Non-positive and non-finite values are dropped (counted):
// simultaneous faults give zero gaps, which no continuous family can hold.
struct FitSet {
  std::size_t observed = 0, censored = 0, dropped = 0;
  FitResult exponential, weibull, lognormal;
  const FitResult* best() const;  // lowest AIC among the ok fits, or null
};

FitResult fit_exponential(const Sample& s);
FitResult fit_weibull(const Sample& s);
FitResult fit_lognormal(const Sample& s);
FitSet fit_all(const Sample& s);
double log_likelihood(const Dist& d, const Sample& s);
// sup |F_model - F_KaplanMeier| over the observed times.
double ks_statistic(const Dist& d, const Sample& s);

// ---------------------------------------------------------------- fits of a trace

struct FitOptions {
  int nodes = 0;                // fleet size override; 0 = declared, else distinct nodes
  std::size_t min_samples = 5;  // fewer observed values: no fit
};

struct GroupFit {
  std::string name;  // "all" or the class name
  std::size_t faults = 0;
  double rate_per_node_day = NAN;  // faults / (fleet x window)
  FitSet tbf_days;                 // per-node time between failures
  FitSet repair_h;                 // fault start to end
  // The (level, desc) members of the group and their counts, for generators.
  std::vector<std::pair<Category, std::size_t>> members;
};

struct TraceFit {
  std::string source;
  int fleet_nodes = 0;
  std::string fleet_source;
  double window_start_s = 0, window_days = 0;
  GroupFit overall;
  std::vector<GroupFit> by_class;  // most faults first
};

// Per-node time between failures: for every fleet node the stretch from the window
// start to its first fault and between its faults are observed, the stretch after its
// last fault is censored; fault-free nodes (including fleet nodes absent from the
// trace) give one censored window each. `select(fault)` picks the faults of a group.
Sample tbf_sample_days(const Trace& t, const std::vector<FaultSpan>& faults, int fleet_nodes,
                       const std::vector<char>& selected);
// Repair times in hours; faults still open at the window end are censored there.
Sample repair_sample_h(const std::vector<FaultSpan>& faults, double window_end_s,
                       const std::vector<char>& selected);

TraceFit fit_trace(const Trace& t, const FitOptions& opt = {});
nlohmann::json fit_json(const TraceFit& f);
std::string fit_table(const TraceFit& f);
nlohmann::json fitset_json(const FitSet& s);

}  // namespace faultline::traces
