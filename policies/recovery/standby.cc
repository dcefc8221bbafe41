#include "policies/recovery/standby.h"

#include <algorithm>
#include <cmath>

namespace faultline::policies {

double binomial_pmf(long n, double p, long k) {
  if (k < 0 || k > n) return 0;
  if (p <= 0) return k == 0 ? 1 : 0;
  if (p >= 1) return k == n ? 1 : 0;
  const double lg = std::lgamma(n + 1.0) - std::lgamma(k + 1.0) - std::lgamma(n - k + 1.0);
  return std::exp(lg + k * std::log(p) + (n - k) * std::log1p(-p));
}

namespace {

// Walks the pmf from k = 0 upwards in log space: log P(0) = n log1p(-p), and
// log P(k+1) = log P(k) + log((n-k)/(k+1)) + log(p / (1-p)). Each term costs one log of
// a small ratio, so the error grows like k ulps instead of lgamma's ~n ulps, and no
// term underflows before it is rescaled. `visit(k, log_cdf)` returns true to stop.
template <class Visit>
void walk_cdf(long n, double p, Visit visit) {
  const double log_odds = std::log(p) - std::log1p(-p);
  double lp = static_cast<double>(n) * std::log1p(-p);
  double top = lp, sum = 1;  // sum of exp(log P(i) - top) over i <= k
  for (long k = 0; k < n; ++k) {
    if (visit(k, top + std::log(sum))) return;
    lp += std::log(static_cast<double>(n - k) / static_cast<double>(k + 1)) + log_odds;
    if (lp > top) {
      sum = sum * std::exp(top - lp) + 1;
      top = lp;
    } else {
      sum += std::exp(lp - top);
    }
  }
  visit(n, 0.0);
}

}  // namespace

double binomial_cdf(long k, long n, double p) {
  if (n < 0 || !(p >= 0 && p <= 1)) return std::nan("");
  if (k < 0) return 0;
  if (k >= n || p == 0) return 1;
  if (p == 1) return 0;
  double out = 1;
  walk_cdf(n, p, [&](long i, double log_cdf) {
    if (i < k) return false;
    out = std::min(1.0, std::exp(log_cdf));
    return true;
  });
  return out;
}

int binomial_quantile(long n, double p, double q) {
  if (n <= 0 || p <= 0) return 0;
  if (p >= 1) return static_cast<int>(n);
  const double target = std::log(q);
  long out = n;
  walk_cdf(n, p, [&](long k, double log_cdf) {
    if (log_cdf < target) return false;
    out = k;
    return true;
  });
  return static_cast<int>(out);
}

}  // namespace faultline::policies
