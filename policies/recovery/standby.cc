#include "policies/recovery/standby.h"

#include <cmath>

namespace faultline::policies {

double binomial_pmf(long n, double p, long k) {
  if (k < 0 || k > n) return 0;
  if (p <= 0) return k == 0 ? 1 : 0;
  if (p >= 1) return k == n ? 1 : 0;
  const double lg = std::lgamma(n + 1.0) - std::lgamma(k + 1.0) - std::lgamma(n - k + 1.0);
  return std::exp(lg + k * std::log(p) + (n - k) * std::log1p(-p));
}

int binomial_quantile(long n, double p, double q) {
  double cdf = 0;
  for (long k = 0; k <= n; ++k) {
    cdf += binomial_pmf(n, p, k);
    if (cdf >= q) return static_cast<int>(k);
  }
  return static_cast<int>(n);
}

}  // namespace faultline::policies
