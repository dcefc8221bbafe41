// Warm-standby pool sizing (ByteRobust §6): the pool is the q-quantile of the number
// of machines that fail in a day, Binomial(N, p).
#pragma once

namespace faultline::policies {

// Smallest k with P[Binomial(n, p) <= k] >= q. Computed in log space, exact for the
// sizes we meet (n up to millions). Requires n >= 0, 0 <= p <= 1, 0 < q < 1.
int binomial_quantile(long n, double p, double q);
// P[Binomial(n, p) = k].
double binomial_pmf(long n, double p, long k);
// P[Binomial(n, p) <= k]; NaN for invalid n or p.
double binomial_cdf(long k, long n, double p);

}  // namespace faultline::policies
