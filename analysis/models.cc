#include "analysis/models.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "policies/checkpoint/plans.h"
#include "policies/recovery/standby.h"

namespace faultline::analysis {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kSecondsPerDay = 86400.0;

}  // namespace

double daly_ettr(double mtbf_s, double restart_s, double interval_s, double checkpoint_s) {
  if (!(mtbf_s > 0) || !(interval_s > 0) || !(restart_s >= 0) || !(checkpoint_s >= 0)) return kNaN;
  // expm1 keeps the denominator exact when (tau + delta) << M.
  return interval_s /
         (mtbf_s * std::exp(restart_s / mtbf_s) * std::expm1((interval_s + checkpoint_s) / mtbf_s));
}

Optimum daly_optimal_interval(double mtbf_s, double restart_s, double checkpoint_s) {
  Optimum o;
  if (!(mtbf_s > 0) || !(restart_s >= 0) || !(checkpoint_s >= 0)) return {kNaN, kNaN};
  if (checkpoint_s == 0) return {0.0, std::exp(-restart_s / mtbf_s)};
  // d/dtau [tau / (e^x - 1)], x = (tau + delta) / M, has the sign of
  // g(tau) = 1 - e^(-x) - tau / M: g(0) > 0, g(M) < 0 and g' < 0, so one root in (0, M).
  auto g = [&](double tau) { return -std::expm1(-(tau + checkpoint_s) / mtbf_s) - tau / mtbf_s; };
  double lo = 0, hi = mtbf_s;
  for (int i = 0; i < 200 && hi - lo > 0; ++i) {
    const double mid = 0.5 * (lo + hi);
    if (mid <= lo || mid >= hi) break;
    (g(mid) > 0 ? lo : hi) = mid;
  }
  o.interval_s = 0.5 * (lo + hi);
  o.ettr = daly_ettr(mtbf_s, restart_s, o.interval_s, checkpoint_s);
  return o;
}

double young_interval(double checkpoint_s, double mtbf_s) {
  if (!(checkpoint_s >= 0) || !(mtbf_s > 0)) return kNaN;
  return std::sqrt(2 * checkpoint_s * mtbf_s);
}

double daly_interval_estimate(double checkpoint_s, double mtbf_s) {
  if (!(checkpoint_s >= 0) || !(mtbf_s > 0)) return kNaN;
  return policies::daly_optimum_s(checkpoint_s,
                                  mtbf_s);  // the formula the daly checkpoint module plans with
}

double meta_ettr(double nodes, double rate_per_node_day, double restart_s, double interval_s,
                 double write_s) {
  if (!(nodes > 0) || !(rate_per_node_day >= 0) || !(restart_s >= 0) || !(interval_s > 0) ||
      !(write_s >= 0))
    return kNaN;
  const double failures_per_s = nodes * rate_per_node_day / kSecondsPerDay;
  return (1 - failures_per_s * (restart_s + interval_s / 2)) / (1 + write_s / interval_s);
}

double meta_best_interval(double nodes, double rate_per_node_day, double write_s) {
  if (!(nodes > 0) || !(rate_per_node_day > 0) || !(write_s >= 0)) return kNaN;
  const double failures_per_s = nodes * rate_per_node_day / kSecondsPerDay;
  return std::sqrt(2 * write_s / failures_per_s);
}

double binomial_log_pmf(std::int64_t k, std::int64_t n, double p) {
  if (n < 0 || k < 0 || k > n || !(p >= 0 && p <= 1))
    return -std::numeric_limits<double>::infinity();
  if (p == 0) return k == 0 ? 0.0 : -std::numeric_limits<double>::infinity();
  if (p == 1) return k == n ? 0.0 : -std::numeric_limits<double>::infinity();
  const double nn = static_cast<double>(n), kk = static_cast<double>(k);
  return std::lgamma(nn + 1) - std::lgamma(kk + 1) - std::lgamma(nn - kk + 1) + kk * std::log(p) +
         (nn - kk) * std::log1p(-p);
}

// The same pool sizing the byterobust stack uses (policies/recovery/standby).
double binomial_cdf(std::int64_t k, std::int64_t n, double p) {
  return policies::binomial_cdf(k, n, p);
}

std::int64_t standby_pool_size(std::int64_t machines, double p, double quantile) {
  if (machines < 0 || !(p >= 0 && p <= 1) || !(quantile >= 0 && quantile <= 1)) return -1;
  if (quantile == 0) return 0;
  if (quantile == 1) return machines;
  return policies::binomial_quantile(machines, p, quantile);
}

}  // namespace faultline::analysis
