// Maximum-likelihood fits of fault inter-arrival and repair times.
//
// Three families (exponential, Weibull, lognormal), each fitted to a right-censored
// sample: a node's last fault-free stretch, or a fault still open when the trace
// ends, says only "longer than this". Ignoring that would fit the fault-prone nodes
// and overstate the rate; with it, the exponential fit of per-node time between
// failures is faults / (fleet nodes x window), the figure `trace stats` gives (less
// the simultaneous faults, whose zero gaps no continuous family can hold).
// A sample may also hold interval-censored values: a failure known only to lie in a
// window [L, R] (periodic inspection finds it at R, having seen the node healthy at L).
// Such a value adds log(F(R) - F(L)) to the likelihood, computed as a difference of
// survival (or, in the lower tail, distribution) functions in log space; treating it as
// a failure at L or at R biases the fit (a Weibull shape 0.7 came back as 0.8-0.96).
//
// Each fit reports its log-likelihood, AIC (2k - 2 ln L), 95% confidence intervals for
// its parameters and the Kolmogorov-Smirnov distance between the model and the
// Kaplan-Meier estimate (the plain empirical CDF when nothing is censored; not computed
// when the sample holds intervals, NaN). The confidence intervals are Wald intervals
// from the observed information: the Hessian of the log-likelihood at the optimum,
// numerically differentiated (central differences) in the working parameters (log rate;
// log shape, log scale; mu, log sigma), so the intervals of positive parameters are
// symmetric on the log scale and never cross zero. The goodness of fit that holds under
// every kind of censoring is the likelihood-ratio test of the exponential (a Weibull
// with shape 1) against the Weibull: LR = 2 (ln L_W - ln L_E), chi-squared with one
// degree of freedom under the exponential.
//
// Numerics: without intervals, the Weibull shape solves the profile-likelihood score by
// safeguarded Newton iterations and the censored lognormal is a damped Newton ascent in
// (mu, log sigma), both on Eigen arrays; with intervals every family starts from its
// fit with each interval replaced by its midpoint and climbs the full likelihood by
// damped Newton steps on numerical derivatives.
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

// `observed`: complete durations; `censored`: durations known only to exceed the value;
// `intervals`: durations known only to lie in [L, R] with 0 <= L < R < infinity (L = 0:
// known only to be at most R). An interval with L == R > 0 counts as observed and one
// with R = infinity and L > 0 as censored at L; any other is dropped (counted).
struct Sample {
  std::vector<double> observed;
  std::vector<double> censored;
  std::vector<std::pair<double, double>> intervals = {};
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
  double log_cdf(double x) const;
  // log P(L < X <= R), stable in both tails; -inf when R <= L.
  double log_interval(double lo, double hi) const;
  double mean() const;
  double median() const;
  double sample(Rng& rng) const;
};

// A 95% Wald confidence interval of one parameter (see the header comment); `se` is the
// standard error on the working scale (of log a for a positive parameter, of mu as is).
struct ParamCi {
  double lo = NAN, hi = NAN, se = NAN;
};
inline constexpr double kCiLevel = 0.95;
inline constexpr const char* kCiMethod =
    "wald: observed information (numerical Hessian of the log-likelihood at the optimum), "
    "log scale for positive parameters";

struct FitResult {
  Dist dist;
  bool ok = false;
  std::string note;  // why not ok, or a remark
  double loglik = NAN, aic = NAN, ks = NAN;
  int iterations = 0;
  ParamCi ci_a, ci_b;  // of dist.a and dist.b (ci_b unset for the exponential)
};

// The likelihood-ratio test of the exponential against the Weibull (shape 1 or not), and
// the family it recommends (lr_test).
struct LrTest {
  bool ok = false;  // both fits ok (the exponential alone: no test, the exponential recommended)
  double statistic = NAN, p_value = NAN;
  bool exponential_rejected = false;  // at kLrLevel
  // The family `recommendation` names, and the one `trace fit -o` writes: the report and
  // the model read this one field, so they cannot disagree.
  Family recommended = Family::kExponential;
  std::string recommendation;  // one line, for the table and the JSON
};
inline constexpr double kLrLevel = 0.05;

// Fits of one sample. Non-positive and non-finite values are dropped (counted):
// simultaneous faults give zero gaps, which no continuous family can hold.
struct FitSet {
  std::size_t observed = 0, censored = 0, dropped = 0, intervals = 0;
  FitResult exponential, weibull, lognormal;
  LrTest lr;
  const FitResult* best() const;  // lowest AIC among the ok fits, or null
  // The fit of lr.recommended, or null when nothing is recommended (no fit).
  const FitResult* recommended() const;
};

FitResult fit_exponential(const Sample& s);
FitResult fit_weibull(const Sample& s);
FitResult fit_lognormal(const Sample& s);
FitSet fit_all(const Sample& s);
double log_likelihood(const Dist& d, const Sample& s);
// sup |F_model - F_KaplanMeier| over the observed times (intervals are not read).
double ks_statistic(const Dist& d, const Sample& s);
// The test of `e` (exponential) against `w` (Weibull), fitted to the same sample, and its
// recommendation: the exponential where the test does not reject it (one parameter, and
// a lower AIC elsewhere is no evidence against it); where it does, the Weibull, or the
// lognormal `l` (same sample; not ok or omitted: never) when its AIC is lower. Both have
// two parameters, so the lower AIC is the higher likelihood, and a lognormal above the
// Weibull is further above the exponential than the rejecting Weibull.
LrTest lr_test(const FitResult& e, const FitResult& w, const FitResult& l = {});
// P(chi-squared with one degree of freedom > x).
double chi2_1_sf(double x);

// ---------------------------------------------------------------- fits of a trace

struct FitOptions {
  int nodes = 0;                // fleet size override; 0 = declared, else distinct nodes
  std::size_t min_samples = 5;  // fewer observed values (exact or in intervals): no fit
  // > 0: fault start times are recorded only to this resolution (a log of dates, a daily
  // sweep): a fault recorded at T happened in [T, T + resolution), and the times between
  // failures are interval-censored (tbf_sample_days). 0: the recorded times are exact.
  double time_resolution_s = 0;
  // true: a node's times between failures start at its first fault. The stretch from the
  // window start to the first fault began at an unknown fault before the window (it is
  // a forward recurrence time, not a gap) and a fault-free node says nothing about the
  // gap; read as a gap from the window start it pulls a Weibull shape toward 1 (a
  // stationary fleet with shape 0.7 fits 0.77). Conditional on each node's first fault
  // the gaps are those of the renewal process, however it started; the fit uses fewer
  // values, and the exponential rate is no longer faults / (fleet x window).
  bool after_first_fault = false;
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
  double time_resolution_s = 0;    // FitOptions::time_resolution_s
  bool after_first_fault = false;  // FitOptions::after_first_fault
  GroupFit overall;
  std::vector<GroupFit> by_class;  // most faults first
};

// Per-node time between failures: for every fleet node the stretch from the window
// start to its first fault and between its faults are observed, the stretch after its
// last fault is censored; fault-free nodes (including fleet nodes absent from the
// trace) give one censored window each. `select(fault)` picks the faults of a group.
// With `resolution_days` > 0 a fault recorded at T happened in [T, T + resolution): the
// first gap of a node lies in [T - start, T - start + resolution], a later one of
// recorded length g in [max(0, g - resolution), g + resolution] (each gap bounded on its
// own, the dependence of neighbouring gaps through their shared fault is not modelled),
// so two faults recorded at the same time are a short gap, not a dropped zero; the last
// stretch is censored at its shortest, window end - T - resolution.
// With `after_first_fault` (FitOptions) the stretches before each node's first fault and
// the windows of fault-free nodes are left out.
Sample tbf_sample_days(const Trace& t, const std::vector<FaultSpan>& faults, int fleet_nodes,
                       const std::vector<char>& selected, double resolution_days = 0,
                       bool after_first_fault = false);
// Repair times in hours; faults still open at the window end are censored there.
Sample repair_sample_h(const std::vector<FaultSpan>& faults, double window_end_s,
                       const std::vector<char>& selected);

TraceFit fit_trace(const Trace& t, const FitOptions& opt = {});
nlohmann::json fit_json(const TraceFit& f);
std::string fit_table(const TraceFit& f);
nlohmann::json fitset_json(const FitSet& s);

}  // namespace faultline::traces
