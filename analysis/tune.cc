#include "analysis/tune.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "traces/stats.h"

namespace faultline::analysis {

MeanCi mean_ci95(const std::vector<double>& xs) {
  MeanCi m;
  if (xs.empty()) return m;
  double sum = 0;
  for (double x : xs) sum += x;
  m.mean = sum / static_cast<double>(xs.size());
  double ss = 0;
  for (double x : xs) ss += (x - m.mean) * (x - m.mean);
  const double n = static_cast<double>(xs.size());
  const double sd = xs.size() > 1 ? std::sqrt(ss / (n - 1)) : 0;
  const double half = xs.size() > 1 ? traces::student_t95(xs.size() - 1) * sd / std::sqrt(n) : 0;
  m.lo = m.mean - half;
  m.hi = m.mean + half;
  return m;
}

MeanCi paired_difference(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) throw std::invalid_argument("paired_difference: sizes differ");
  std::vector<double> d(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) d[i] = a[i] - b[i];
  return mean_ci95(d);
}

double Candidate::mean() const { return mean_ci95(per_replica).mean; }

namespace {

void add_unique(std::vector<double>& xs, double x, const std::vector<double>& known) {
  auto same = [&](double y) { return std::fabs(y - x) <= 1e-12 * std::max(1.0, std::fabs(x)); };
  if (std::any_of(xs.begin(), xs.end(), same) || std::any_of(known.begin(), known.end(), same))
    return;
  xs.push_back(x);
}

// The value i/n of the way from a to b: linearly (computed as it always was, so linear
// grids keep their values to the last bit), or in log(x) on a log scale.
double between(const TuneRange& r, double a, double b, int i, int n) {
  if (r.log && a > 0 && b > 0) {
    // Six significant digits: 600, not 599.9999999999999, on the command line and in ids.
    const double x = std::exp(std::log(a) + (std::log(b) - std::log(a)) * i / n);
    const double e = std::floor(std::log10(x)) - 5;  // 10^|e| is exact in a double
    if (e >= 0) return std::round(x / std::pow(10.0, e)) * std::pow(10.0, e);
    return std::round(x * std::pow(10.0, -e)) / std::pow(10.0, -e);
  }
  return a + (b - a) * i / n;
}

}  // namespace

std::vector<double> coarse_grid(const TuneRange& r, int points) {
  std::vector<double> out;
  if (points < 2 || !(r.lo <= r.hi)) return {r.lo};
  for (int i = 0; i < points; ++i) {
    double x = i == points - 1 ? r.hi : between(r, r.lo, r.hi, i, points - 1);
    if (r.integer) x = std::round(x);
    add_unique(out, x, {});
  }
  return out;
}

std::vector<double> fill_between(const TuneRange& r, double a, double b, int points,
                                 const std::vector<double>& known) {
  std::vector<double> out;
  if (!(a < b) || points < 1) return out;
  for (int i = 1; i <= points; ++i) {
    double x = between(r, a, b, i, points + 1);
    if (r.integer) x = std::round(x);
    if (x <= a || x >= b) continue;
    add_unique(out, x, known);
  }
  return out;
}

std::size_t best_index(const std::vector<Candidate>& cs, bool maximize) {
  std::size_t best = 0;
  for (std::size_t i = 1; i < cs.size(); ++i) {
    const double m = cs[i].mean(), mb = cs[best].mean();
    const bool better = maximize ? m > mb : m < mb;
    if (better || (m == mb && cs[i].x < cs[best].x)) best = i;
  }
  return best;
}

std::optional<std::pair<double, double>> refine_interval(const std::vector<Candidate>& sorted,
                                                         std::size_t best) {
  if (sorted.size() < 2) return std::nullopt;
  const double a = best > 0 ? sorted[best - 1].x : sorted[best].x;
  const double b = best + 1 < sorted.size() ? sorted[best + 1].x : sorted[best].x;
  if (!(a < b)) return std::nullopt;
  return std::make_pair(a, b);
}

std::size_t smallest_within(const std::vector<Candidate>& sorted, std::size_t best, bool maximize,
                            double within) {
  const double mb = sorted[best].mean();
  const double bound = maximize ? mb - std::fabs(mb) * within : mb + std::fabs(mb) * within;
  for (std::size_t i = 0; i < sorted.size(); ++i) {
    const double m = sorted[i].mean();
    if (maximize ? m >= bound : m <= bound) return i;
  }
  return best;
}

Tuner::Tuner(TuneRange range, int points, bool maximize, double within)
    : range_(range), points_(std::max(3, points)), maximize_(maximize), within_(within) {}

std::vector<double> Tuner::first() const { return coarse_grid(range_, points_); }

void Tuner::add(Candidate c) {
  auto it = std::lower_bound(cs_.begin(), cs_.end(), c.x,
                             [](const Candidate& a, double x) { return a.x < x; });
  if (it != cs_.end() && it->x == c.x)
    *it = std::move(c);
  else
    cs_.insert(it, std::move(c));
}

std::size_t Tuner::best() const { return best_index(cs_, maximize_); }

std::size_t Tuner::smallest_within() const {
  return analysis::smallest_within(cs_, best(), maximize_, within_);
}

std::vector<double> Tuner::next() const {
  std::vector<double> out;
  if (cs_.empty()) return out;
  const int half = std::max(1, (points_ - 1) / 2);
  std::vector<double> known;
  for (const auto& c : cs_) known.push_back(c.x);
  auto fill = [&](std::size_t lo, std::size_t hi) {
    for (double x : fill_between(range_, cs_[lo].x, cs_[hi].x, half, known)) {
      known.push_back(x);
      out.push_back(x);
    }
  };
  const std::size_t b = best();
  if (b > 0) fill(b - 1, b);
  if (b + 1 < cs_.size()) fill(b, b + 1);
  if (within_ >= 0) {
    const std::size_t w = smallest_within();
    if (w > 0 && w != b) fill(w - 1, w);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace faultline::analysis
