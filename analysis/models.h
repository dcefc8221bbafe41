// Analytic models of checkpointing and fault tolerance to check the simulator against
// and to size things before simulating (docs/domain.md §5, §7): Daly's exact ETTR for
// Poisson failures, Young's interval, Meta's small-loss ETTR approximation, and the
// binomial sizing of a warm-standby pool.
//
// Units are in the names: seconds (`_s`), per node-day rates. Every function is pure
// and needs only the standard library; none of them throws. Arguments out of their
// domain (a non-positive MTBF, p outside [0, 1], ...) give NaN, or -1 for sizes.
#pragma once

#include <cstdint>

namespace faultline::analysis {

// Daly: failures of the whole job form a Poisson process with mean time `mtbf_s`
// between them; work is cut into segments of `interval_s` followed by a blocking
// checkpoint of `checkpoint_s`; every failure (including one during a checkpoint or a
// restart) costs a restart of `restart_s` and loses the work since the last complete
// checkpoint. Returns the expected ETTR,
//   interval / (M e^(R/M) (e^((interval+checkpoint)/M) - 1)).
// Requires mtbf_s > 0, interval_s > 0, restart_s >= 0, checkpoint_s >= 0.
double daly_ettr(double mtbf_s, double restart_s, double interval_s, double checkpoint_s);

struct Optimum {
  double interval_s = 0;  // the argmax
  double ettr = 0;        // the model's ETTR there
};

// The interval that maximises daly_ettr, found numerically: the ETTR is unimodal in the
// interval and its derivative vanishes where 1 - e^(-(tau+delta)/M) = tau/M, a root in
// (0, M) that bisection finds to machine precision. The restart cost scales the ETTR
// but does not move the argmax. With checkpoint_s == 0 the optimum is tau -> 0
// (interval_s 0, ettr e^(-R/M)).
Optimum daly_optimal_interval(double mtbf_s, double restart_s, double checkpoint_s);

// Young's first-order optimum: sqrt(2 * checkpoint_s * mtbf_s).
double young_interval(double checkpoint_s, double mtbf_s);

// Daly's higher-order closed-form estimate of the optimum (2006):
// sqrt(2 d M) (1 + sqrt(d / 2M) / 3 + d / 18M) - d for d < 2M, else M.
double daly_interval_estimate(double checkpoint_s, double mtbf_s);

// Meta's approximation (Kokolis et al. 2024) for `nodes` nodes failing at
// `rate_per_node_day` each, restart overhead `restart_s`, checkpoint interval
// `interval_s` and write time `write_s`:
//   E[ETTR] ~ (1 - N r (u0 + interval/2)) / (1 + w / interval),
// with N r converted to failures per second. A small-loss approximation: it goes
// negative when failures are frequent, and is returned as computed.
double meta_ettr(double nodes, double rate_per_node_day, double restart_s, double interval_s,
                 double write_s);
// Meta's best interval sqrt(2 w / (N r)), N r in failures per second; in seconds.
double meta_best_interval(double nodes, double rate_per_node_day, double write_s);

// log P(X = k) for X ~ Binomial(n, p), through lgamma: no overflow for any n.
double binomial_log_pmf(std::int64_t k, std::int64_t n, double p);
// P(X <= k), summed in log space (log-sum-exp over a pmf recurrence) so tiny terms
// neither underflow nor cancel; exact 0 and 1 at the ends.
double binomial_cdf(std::int64_t k, std::int64_t n, double p);

// Warm-standby pool size: the smallest k with P(Binomial(machines, p) <= k) >= quantile,
// p being one machine's failure probability over the refill window (a day in
// ByteRobust's sizing). Returns -1 when the arguments are out of range
// (machines < 0, p outside [0, 1], quantile outside [0, 1]).
std::int64_t standby_pool_size(std::int64_t machines, double p, double quantile);

}  // namespace faultline::analysis
