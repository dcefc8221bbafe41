#include "traces/fit.h"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <numeric>

#include "traces/fit_clean.h"
#include "traces/model.h"
#include "traces/stats.h"

namespace faultline::traces {

using nlohmann::json;

namespace fit_internal {

Clean clean(const Sample& s) {
  Clean c;
  c.obs.reserve(s.observed.size());
  c.cen.reserve(s.censored.size());
  c.iv.reserve(s.intervals.size());
  for (const auto& [lo, hi] : s.intervals) {
    if (!(std::isfinite(lo) && lo >= 0) || std::isnan(hi) || hi < lo) {
      ++c.dropped;
    } else if (hi == lo) {
      if (lo > 0)
        c.obs.push_back(lo);
      else
        ++c.dropped;
    } else if (std::isinf(hi)) {
      if (lo > 0)
        c.cen.push_back(lo);
      else
        ++c.dropped;  // known only to be positive: no information
    } else {
      c.iv.emplace_back(lo, hi);
    }
  }
  for (double x : s.observed) {
    if (std::isfinite(x) && x > 0)
      c.obs.push_back(x);
    else
      ++c.dropped;
  }
  for (double x : s.censored) {
    if (std::isfinite(x) && x > 0)
      c.cen.push_back(x);
    else
      ++c.dropped;
  }
  return c;
}

}  // namespace fit_internal

namespace {

using fit_internal::Clean;
using fit_internal::clean;

constexpr double kLogSqrt2Pi = 0.91893853320467274178;  // log(sqrt(2 pi))

// log Q(z), Q = 1 - Phi, accurate far into the upper tail.
double log_q(double z) {
  if (z < 30) return std::log(0.5 * std::erfc(z / std::sqrt(2.0)));
  // Asymptotic series of Mills' ratio.
  const double z2 = z * z;
  return -0.5 * z2 - std::log(z) - kLogSqrt2Pi + std::log1p(-1 / z2 + 3 / (z2 * z2));
}

// phi(z) / Q(z).
double hazard(double z) { return std::exp(-0.5 * z * z - kLogSqrt2Pi - log_q(z)); }

Eigen::ArrayXd to_array(const std::vector<double>& v) {
  return Eigen::Map<const Eigen::ArrayXd>(v.data(), static_cast<Eigen::Index>(v.size()));
}

// Each interval replaced by its midpoint, as an observed value: the starting point of
// the interval-censored fits.
Clean midpoints(const Clean& c) {
  Clean m = c;
  m.iv.clear();
  for (const auto& [lo, hi] : c.iv) m.obs.push_back(0.5 * (lo + hi));
  return m;
}

// Working parameters: the log of a positive parameter, mu as is (header comment).
Eigen::VectorXd to_work(const Dist& d) {
  Eigen::VectorXd w(d.parameters());
  w(0) = d.family == Family::kLognormal ? d.a : std::log(d.a);
  if (w.size() > 1) w(1) = std::log(d.b);
  return w;
}

Dist from_work(Family f, const Eigen::VectorXd& w) {
  Dist d;
  d.family = f;
  d.a = f == Family::kLognormal ? w(0) : std::exp(w(0));
  if (w.size() > 1) d.b = std::exp(w(1));
  return d;
}

// Log-likelihood at working parameters; -inf outside the range where it is defined.
double work_loglik(Family f, const Eigen::VectorXd& w, const Sample& s) {
  if (!(w.cwiseAbs().maxCoeff() <= 50)) return -INFINITY;
  const double ll = log_likelihood(from_work(f, w), s);
  return std::isnan(ll) ? -INFINITY : ll;
}

// Central-difference gradient and Hessian of the log-likelihood at w, step h.
void derivatives(Family f, const Eigen::VectorXd& w, const Sample& s, double fw, double h,
                 Eigen::VectorXd* g, Eigen::MatrixXd* H) {
  const Eigen::Index k = w.size();
  g->resize(k);
  H->resize(k, k);
  auto at = [&](Eigen::Index i, double di, Eigen::Index j, double dj) {
    Eigen::VectorXd x = w;
    x(i) += di;
    x(j) += dj;
    return work_loglik(f, x, s);
  };
  for (Eigen::Index i = 0; i < k; ++i) {
    const double up = at(i, h, i, 0), down = at(i, -h, i, 0);
    (*g)(i) = (up - down) / (2 * h);
    (*H)(i, i) = (up - 2 * fw + down) / (h * h);
    for (Eigen::Index j = 0; j < i; ++j) {
      const double v =
          (at(i, h, j, h) - at(i, h, j, -h) - at(i, -h, j, h) + at(i, -h, j, -h)) / (4 * h * h);
      (*H)(i, j) = (*H)(j, i) = v;
    }
  }
}

// Climbs the full likelihood from r.dist by damped Newton steps on numerical
// derivatives. Returns the iterations taken.
int climb(FitResult& r, const Sample& s) {
  const Family f = r.dist.family;
  Eigen::VectorXd w = to_work(r.dist);
  double fw = work_loglik(f, w, s);
  if (!std::isfinite(fw)) return 0;
  Eigen::VectorXd g;
  Eigen::MatrixXd H;
  int it = 0;
  for (; it < 100; ++it) {
    derivatives(f, w, s, fw, 1e-4, &g, &H);
    Eigen::VectorXd step;
    Eigen::LLT<Eigen::MatrixXd> llt(-H);
    if (llt.info() == Eigen::Success) {
      step = llt.solve(g);
    } else {
      step = g / (H.diagonal().cwiseAbs().maxCoeff() + 1);
    }
    double alpha = 1, fc = -INFINITY;
    Eigen::VectorXd cand = w;
    for (int b = 0; b < 50; ++b, alpha /= 2) {
      cand = w + alpha * step;
      fc = work_loglik(f, cand, s);
      if (fc >= fw) break;
    }
    if (!(fc >= fw)) break;
    const bool tiny =
        (cand - w).cwiseAbs().maxCoeff() < 1e-10 || fc - fw <= 1e-13 * (1 + std::fabs(fw));
    w = cand;
    fw = fc;
    if (tiny) break;
  }
  r.dist = from_work(f, w);
  return it + 1;
}

// 95% Wald intervals from the observed information at the optimum.
void add_ci(FitResult& r, const Sample& s) {
  const Eigen::VectorXd w = to_work(r.dist);
  const double fw = work_loglik(r.dist.family, w, s);
  Eigen::VectorXd g;
  Eigen::MatrixXd H;
  derivatives(r.dist.family, w, s, fw, 1e-4, &g, &H);
  Eigen::LLT<Eigen::MatrixXd> llt(-H);
  if (!H.allFinite() || llt.info() != Eigen::Success) {
    r.note = "observed information not positive definite: no confidence intervals";
    return;
  }
  const Eigen::MatrixXd cov = llt.solve(Eigen::MatrixXd::Identity(w.size(), w.size()));
  constexpr double z = 1.959963984540054;  // two-sided 95% normal quantile
  for (Eigen::Index i = 0; i < w.size(); ++i) {
    ParamCi& ci = i == 0 ? r.ci_a : r.ci_b;
    ci.se = std::sqrt(cov(i, i));
    const bool positive = !(i == 0 && r.dist.family == Family::kLognormal);
    const double lo = w(i) - z * ci.se, hi = w(i) + z * ci.se;
    ci.lo = positive ? std::exp(lo) : lo;
    ci.hi = positive ? std::exp(hi) : hi;
  }
}

void finish(FitResult& r, const Clean& c) {
  if (!r.ok) return;
  const Sample s = c.sample();
  r.loglik = log_likelihood(r.dist, s);
  r.aic = 2.0 * r.dist.parameters() - 2.0 * r.loglik;
  // Kaplan-Meier does not hold intervals: no KS distance then (the LR test holds).
  r.ks = c.iv.empty() ? ks_statistic(r.dist, s) : NAN;
  if (!std::isfinite(r.loglik)) {
    r.ok = false;
    r.note = "log-likelihood is not finite";
    return;
  }
  add_ci(r, s);
}

// The fit of an interval-censored sample: the fit `core` gives with midpoints, then
// the full likelihood climbed from there.
template <typename Core>
FitResult fit_with_intervals(const Clean& c, Core core) {
  if (c.iv.empty()) {
    FitResult r = core(c);
    finish(r, c);
    return r;
  }
  FitResult r = core(midpoints(c));
  if (!r.ok) return r;
  r.iterations += climb(r, c.sample());
  r.ok = std::isfinite(r.dist.a) && (r.dist.parameters() == 1 || std::isfinite(r.dist.b));
  if (!r.ok) r.note = "did not converge";
  finish(r, c);
  return r;
}

}  // namespace

const char* family_name(Family f) {
  switch (f) {
    case Family::kExponential:
      return "exponential";
    case Family::kWeibull:
      return "weibull";
    case Family::kLognormal:
      return "lognormal";
  }
  return "?";
}

double Dist::cdf(double x) const {
  if (!(x > 0)) return 0;
  switch (family) {
    case Family::kExponential:
      return -std::expm1(-a * x);
    case Family::kWeibull:
      return -std::expm1(-std::pow(x / b, a));
    case Family::kLognormal:
      return 0.5 * std::erfc(-(std::log(x) - a) / (b * std::sqrt(2.0)));
  }
  return NAN;
}

double Dist::log_pdf(double x) const {
  if (!(x > 0)) return -INFINITY;
  switch (family) {
    case Family::kExponential:
      return std::log(a) - a * x;
    case Family::kWeibull: {
      const double lz = std::log(x / b);
      return std::log(a / b) + (a - 1) * lz - std::exp(a * lz);
    }
    case Family::kLognormal: {
      const double z = (std::log(x) - a) / b;
      return -std::log(x) - std::log(b) - kLogSqrt2Pi - 0.5 * z * z;
    }
  }
  return NAN;
}

double Dist::log_survival(double x) const {
  if (!(x > 0)) return 0;
  switch (family) {
    case Family::kExponential:
      return -a * x;
    case Family::kWeibull:
      return -std::pow(x / b, a);
    case Family::kLognormal:
      return log_q((std::log(x) - a) / b);
  }
  return NAN;
}

double Dist::log_cdf(double x) const {
  if (!(x > 0)) return -INFINITY;
  switch (family) {
    case Family::kExponential:
      return std::log(-std::expm1(-a * x));
    case Family::kWeibull:
      return std::log(-std::expm1(-std::pow(x / b, a)));
    case Family::kLognormal:
      return log_q(-(std::log(x) - a) / b);
  }
  return NAN;
}

double Dist::log_interval(double lo, double hi) const {
  if (!(hi > lo)) return -INFINITY;
  if (!(lo > 0)) return log_cdf(hi);
  if (std::isinf(hi)) return log_survival(lo);
  // log(e^u - e^v) = u + log(1 - e^(v - u)) for v <= u, on whichever of S or F is the
  // smaller at the interval (so the difference does not cancel in the far tail).
  const double sl = log_survival(lo);
  if (sl < -0.6931471805599453) {  // S(lo) < 1/2: upper tail, S(lo) - S(hi)
    const double sh = log_survival(hi);
    return sl + std::log(-std::expm1(sh - sl));
  }
  const double fh = log_cdf(hi), fl = log_cdf(lo);
  return fh + std::log(-std::expm1(fl - fh));
}

double Dist::mean() const {
  switch (family) {
    case Family::kExponential:
      return 1 / a;
    case Family::kWeibull:
      return b * std::tgamma(1 + 1 / a);
    case Family::kLognormal:
      return std::exp(a + 0.5 * b * b);
  }
  return NAN;
}

double Dist::median() const {
  switch (family) {
    case Family::kExponential:
      return std::log(2.0) / a;
    case Family::kWeibull:
      return b * std::pow(std::log(2.0), 1 / a);
    case Family::kLognormal:
      return std::exp(a);
  }
  return NAN;
}

double Dist::sample(Rng& rng) const {
  switch (family) {
    case Family::kExponential:
      return rng.exponential(1 / a);
    case Family::kWeibull:
      return rng.weibull(a, b);
    case Family::kLognormal:
      return rng.lognormal(a, b);
  }
  return NAN;
}

double log_likelihood(const Dist& d, const Sample& s) {
  double ll = 0;
  for (double x : s.observed) ll += d.log_pdf(x);
  for (double x : s.censored) ll += d.log_survival(x);
  for (const auto& [lo, hi] : s.intervals) ll += d.log_interval(lo, hi);
  return ll;
}

double chi2_1_sf(double x) { return x > 0 ? std::erfc(std::sqrt(0.5 * x)) : 1.0; }

LrTest lr_test(const FitResult& e, const FitResult& w, const FitResult& l) {
  LrTest t;
  if (e.ok && !w.ok) {
    // No test, and no evidence against the one-parameter family: still one line, so that
    // the report says what a fault model takes.
    t.recommendation =
        "no likelihood-ratio test (Weibull: " + w.note + "): use the exponential, one parameter";
    return t;
  }
  if (!e.ok || !w.ok) return t;
  t.ok = true;
  // Nested models: ln L_W >= ln L_E up to the optimizers' tolerance.
  t.statistic = std::max(0.0, 2 * (w.loglik - e.loglik));
  t.p_value = chi2_1_sf(t.statistic);
  t.exponential_rejected = t.p_value < kLrLevel;
  char buf[256];
  if (!t.exponential_rejected) {
    t.recommended = Family::kExponential;
    std::snprintf(buf, sizeof buf,
                  "exponential not rejected against Weibull (LR p = %.2g): use the exponential, "
                  "one parameter",
                  t.p_value);
  } else if (l.ok && l.aic < w.aic) {
    t.recommended = Family::kLognormal;
    std::snprintf(buf, sizeof buf,
                  "exponential rejected against Weibull (LR p = %.2g): use the lognormal, sigma "
                  "%.3g [%.3g, %.3g], AIC %.1f below the Weibull's",
                  t.p_value, l.dist.b, l.ci_b.lo, l.ci_b.hi, w.aic - l.aic);
  } else {
    t.recommended = Family::kWeibull;
    std::snprintf(buf, sizeof buf,
                  "exponential rejected against Weibull (LR p = %.2g): use the Weibull, shape "
                  "%.3g [%.3g, %.3g]",
                  t.p_value, w.dist.a, w.ci_a.lo, w.ci_a.hi);
    if (l.ok) {
      const std::size_t n = std::strlen(buf);
      std::snprintf(buf + n, sizeof buf - n, ", AIC %.1f below the lognormal's", l.aic - w.aic);
    }
  }
  t.recommendation = buf;
  return t;
}

double ks_statistic(const Dist& d, const Sample& s) {
  struct Item {
    double t;
    bool observed;
  };
  std::vector<Item> items;
  items.reserve(s.observed.size() + s.censored.size());
  for (double x : s.observed) items.push_back({x, true});
  for (double x : s.censored) items.push_back({x, false});
  std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
    return a.t != b.t ? a.t < b.t : (a.observed && !b.observed);
  });
  double at_risk = static_cast<double>(items.size());
  double surv = 1, dmax = 0;
  std::size_t i = 0;
  while (i < items.size()) {
    const double t = items[i].t;
    std::size_t j = i, deaths = 0;
    while (j < items.size() && items[j].t == t) {
      deaths += items[j].observed;
      ++j;
    }
    if (deaths > 0 && at_risk > 0) {
      const double before = 1 - surv;
      surv *= 1 - static_cast<double>(deaths) / at_risk;
      const double after = 1 - surv;
      const double fm = d.cdf(t);
      dmax = std::max({dmax, std::fabs(fm - before), std::fabs(fm - after)});
    }
    at_risk -= static_cast<double>(j - i);
    i = j;
  }
  return dmax;
}

namespace {

FitResult exponential_core(const Clean& c) {
  FitResult r;
  r.dist.family = Family::kExponential;
  if (c.obs.empty()) {
    r.note = "no observed values";
    return r;
  }
  const double total = std::accumulate(c.obs.begin(), c.obs.end(), 0.0) +
                       std::accumulate(c.cen.begin(), c.cen.end(), 0.0);
  r.dist.a = static_cast<double>(c.obs.size()) / total;  // closed form: events / exposure
  r.ok = std::isfinite(r.dist.a) && r.dist.a > 0;
  if (!r.ok) r.note = "degenerate sample";
  return r;
}

FitResult weibull_core(const Clean& c) {
  FitResult r;
  r.dist.family = Family::kWeibull;
  const double d = static_cast<double>(c.obs.size());
  if (c.obs.size() < 2) {
    r.note = "needs at least 2 observed values";
    return r;
  }
  Eigen::ArrayXd x(static_cast<Eigen::Index>(c.obs.size() + c.cen.size()));
  Eigen::Index n = 0;
  for (double v : c.obs) x(n++) = v;
  for (double v : c.cen) x(n++) = v;
  // Work on x / max(x) <= 1 so that x^k neither overflows nor loses the largest term.
  const double scale = x.maxCoeff();
  const Eigen::ArrayXd logx = (x / scale).log();
  const double lobs = logx.head(static_cast<Eigen::Index>(c.obs.size())).sum();
  double sum_w = 0;
  // Profile score g(k) = d/k + sum_obs log x - d A/S and its derivative (< 0: concave).
  auto score = [&](double k, double* g, double* h) {
    const Eigen::ArrayXd w = (k * logx).exp();
    const double S = w.sum(), A = (w * logx).sum(), B = (w * logx.square()).sum();
    sum_w = S;
    *g = d / k + lobs - d * A / S;
    *h = -d / (k * k) - d * (B * S - A * A) / (S * S);
  };
  double lo = 1e-3, hi = 1e3, g = 0, h = 0;
  score(lo, &g, &h);
  while (g <= 0 && lo > 1e-9) {
    lo /= 10;
    score(lo, &g, &h);
  }
  score(hi, &g, &h);
  if (g >= 0) {
    r.note = "shape beyond 1000 (values nearly equal)";
    return r;
  }
  // Start from the log-scale spread: sd(log X) = pi / (k sqrt 6) for a Weibull.
  const Eigen::ArrayXd lo_obs = logx.head(static_cast<Eigen::Index>(c.obs.size()));
  const double sd = std::sqrt(std::max(1e-300, (lo_obs - lo_obs.mean()).square().mean()));
  double k = std::clamp(1.2825 / sd, lo * 2, hi / 2);
  int it = 0;
  for (; it < 200; ++it) {
    score(k, &g, &h);
    if (g > 0)
      lo = k;
    else
      hi = k;
    double next = h < 0 ? k - g / h : NAN;
    if (!(next > lo && next < hi)) next = std::sqrt(lo * hi);
    if (std::fabs(next - k) <= 1e-12 * k || hi / lo < 1 + 1e-13) {
      k = next;
      break;
    }
    k = next;
  }
  score(k, &g, &h);
  r.iterations = it + 1;
  r.dist.a = k;
  r.dist.b = scale * std::pow(sum_w / d, 1 / k);
  r.ok = std::isfinite(r.dist.a) && std::isfinite(r.dist.b) && r.dist.b > 0;
  if (!r.ok) r.note = "did not converge";
  return r;
}

FitResult lognormal_core(const Clean& c) {
  FitResult r;
  r.dist.family = Family::kLognormal;
  if (c.obs.size() < 2) {
    r.note = "needs at least 2 observed values";
    return r;
  }
  const Eigen::ArrayXd y = to_array(c.obs).log();
  // Censored values repeat (every fault-free node is censored at the same window):
  // keep each distinct value once with its count.
  std::vector<double> cen = c.cen;
  std::sort(cen.begin(), cen.end());
  std::vector<double> cen_value, cen_count;
  for (double v : cen) {
    if (!cen_value.empty() && cen_value.back() == v) {
      cen_count.back() += 1;
    } else {
      cen_value.push_back(v);
      cen_count.push_back(1);
    }
  }
  const Eigen::ArrayXd yc = to_array(cen_value).log();
  const Eigen::ArrayXd wc = to_array(cen_count);
  double mu = y.mean();
  double sigma = std::sqrt((y - mu).square().mean());
  if (!(sigma > 1e-12)) {
    r.note = "all observed values equal";
    return r;
  }
  if (c.cen.empty()) {
    // Closed form.
    r.dist.a = mu;
    r.dist.b = sigma;
    r.ok = true;
    r.iterations = 0;
    return r;
  }
  // Censored: damped Newton ascent in theta = (mu, tau = log sigma).
  const double d = static_cast<double>(c.obs.size());
  auto objective = [&](const Eigen::Vector2d& th) {
    const double sg = std::exp(th(1));
    double ll = -d * th(1) - 0.5 * ((y - th(0)) / sg).square().sum();
    for (Eigen::Index j = 0; j < yc.size(); ++j) ll += wc(j) * log_q((yc(j) - th(0)) / sg);
    return ll;
  };
  auto gradient = [&](const Eigen::Vector2d& th) {
    const double sg = std::exp(th(1));
    const Eigen::ArrayXd z = (y - th(0)) / sg;
    Eigen::Vector2d g(z.sum() / sg, -d + z.square().sum());
    for (Eigen::Index j = 0; j < yc.size(); ++j) {
      const double zc = (yc(j) - th(0)) / sg;
      const double hz = wc(j) * hazard(zc);
      g(0) += hz / sg;
      g(1) += hz * zc;
    }
    return g;
  };
  Eigen::Vector2d th(mu, std::log(sigma));
  double f = objective(th);
  int it = 0;
  for (; it < 200; ++it) {
    const Eigen::Vector2d g = gradient(th);
    if (g.norm() < 1e-9 * (1 + d)) break;
    Eigen::Matrix2d H;
    const double eps = 1e-6;
    for (int k = 0; k < 2; ++k) {
      Eigen::Vector2d e = Eigen::Vector2d::Zero();
      e(k) = eps;
      H.col(k) = (gradient(th + e) - gradient(th - e)) / (2 * eps);
    }
    H = 0.5 * (H + H.transpose()).eval();
    Eigen::Vector2d step;
    Eigen::LDLT<Eigen::Matrix2d> ldlt(-H);
    if (ldlt.info() == Eigen::Success && ldlt.isPositive() && (-H).determinant() > 0) {
      step = ldlt.solve(g);
    } else {
      step = g / (H.diagonal().cwiseAbs().maxCoeff() + 1);
    }
    double alpha = 1;
    Eigen::Vector2d cand = th + step;
    double fc = objective(cand);
    for (int b = 0; b < 40 && !(fc >= f); ++b) {
      alpha /= 2;
      cand = th + alpha * step;
      fc = objective(cand);
    }
    if (!(fc >= f)) break;
    const bool tiny = (cand - th).norm() < 1e-12 || fc - f <= 1e-13 * std::fabs(f);
    th = cand;
    f = fc;
    if (tiny) break;
  }
  r.iterations = it + 1;
  r.dist.a = th(0);
  r.dist.b = std::exp(th(1));
  r.ok = std::isfinite(r.dist.a) && std::isfinite(r.dist.b) && r.dist.b > 0;
  if (!r.ok) r.note = "did not converge";
  return r;
}

}  // namespace

FitResult fit_exponential(const Sample& s) {
  return fit_with_intervals(clean(s), exponential_core);
}

FitResult fit_weibull(const Sample& s) { return fit_with_intervals(clean(s), weibull_core); }

FitResult fit_lognormal(const Sample& s) { return fit_with_intervals(clean(s), lognormal_core); }

const FitResult* FitSet::recommended() const {
  if (lr.recommendation.empty()) return nullptr;
  switch (lr.recommended) {
    case Family::kExponential:
      return &exponential;
    case Family::kWeibull:
      return &weibull;
    case Family::kLognormal:
      return &lognormal;
  }
  return nullptr;
}

const FitResult* FitSet::best() const {
  const FitResult* b = nullptr;
  for (const FitResult* r : {&exponential, &weibull, &lognormal})
    if (r->ok && (!b || r->aic < b->aic)) b = r;
  return b;
}

FitSet fit_all(const Sample& s) {
  FitSet f;
  const Clean c = clean(s);
  f.observed = c.obs.size();
  f.censored = c.cen.size();
  f.intervals = c.iv.size();
  f.dropped = c.dropped;
  f.exponential = fit_with_intervals(c, exponential_core);
  f.weibull = fit_with_intervals(c, weibull_core);
  f.lognormal = fit_with_intervals(c, lognormal_core);
  f.lr = lr_test(f.exponential, f.weibull, f.lognormal);
  return f;
}

}  // namespace faultline::traces
