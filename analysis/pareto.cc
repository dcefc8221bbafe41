#include "analysis/pareto.h"

#include <algorithm>
#include <cmath>

namespace faultline::analysis {

namespace {

bool same_value(double a, double b) {
  return std::fabs(a - b) <= 1e-12 * std::max(1.0, std::fabs(a));
}

bool same_point(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (!same_value(a[i], b[i])) return false;
  return true;
}

// Whether a's mean on objective k is better than b's (strictly), or as good.
bool better(double a, double b, const Objective& o) { return o.maximize ? a > b : a < b; }

}  // namespace

std::vector<std::vector<double>> grid_points(const std::vector<ParamAxis>& axes, int points) {
  std::vector<std::vector<double>> values;
  for (const auto& a : axes) values.push_back(coarse_grid(a.range, points));
  std::vector<std::vector<double>> out;
  if (axes.empty()) return out;
  std::vector<std::size_t> idx(axes.size(), 0);
  while (true) {
    std::vector<double> x;
    for (std::size_t a = 0; a < axes.size(); ++a) x.push_back(values[a][idx[a]]);
    out.push_back(std::move(x));
    std::size_t a = axes.size();  // odometer: the last parameter moves fastest
    while (a > 0) {
      --a;
      if (++idx[a] < values[a].size()) break;
      idx[a] = 0;
      if (a == 0) return out;
    }
  }
}

bool dominates(const Evaluated& a, const Evaluated& b, const std::vector<Objective>& objs) {
  bool strictly = false;
  for (std::size_t k = 0; k < objs.size(); ++k) {
    const double ma = a.mean(k), mb = b.mean(k);
    if (better(mb, ma, objs[k])) return false;
    strictly = strictly || better(ma, mb, objs[k]);
  }
  return strictly;
}

bool indistinguishable(const Evaluated& a, const Evaluated& b) {
  for (std::size_t k = 0; k < a.per_replica.size(); ++k) {
    const MeanCi d = paired_difference(a.per_replica[k], b.per_replica[k]);
    if (!(d.lo <= 0 && d.hi >= 0)) return false;
  }
  return true;
}

std::vector<std::size_t> pareto_front(const std::vector<Evaluated>& cs,
                                      const std::vector<Objective>& objs) {
  std::vector<std::size_t> front;
  for (std::size_t i = 0; i < cs.size(); ++i) {
    // Dominated, or a tie on every objective with a candidate earlier by x (a parameter
    // that changes nothing would otherwise put every one of its values on the front).
    bool dominated = false;
    for (std::size_t j = 0; j < cs.size() && !dominated; ++j) {
      bool tie = j < i;
      for (std::size_t k = 0; k < objs.size() && tie; ++k) tie = cs[j].mean(k) == cs[i].mean(k);
      dominated = tie || (j != i && dominates(cs[j], cs[i], objs));
    }
    if (!dominated) front.push_back(i);
  }
  // Best first by the first objective; cs is sorted by x, so a stable sort breaks ties by x.
  std::stable_sort(front.begin(), front.end(), [&](std::size_t a, std::size_t b) {
    return better(cs[a].mean(0), cs[b].mean(0), objs[0]);
  });
  return front;
}

MultiTuner::MultiTuner(std::vector<ParamAxis> axes, std::vector<Objective> objs, int points)
    : axes_(std::move(axes)), objs_(std::move(objs)), points_(std::max(2, points)) {}

void MultiTuner::add(Evaluated e) {
  for (auto& c : cs_)
    if (same_point(c.x, e.x)) {
      c = std::move(e);
      return;
    }
  auto it =
      std::lower_bound(cs_.begin(), cs_.end(), e.x,
                       [](const Evaluated& a, const std::vector<double>& x) { return a.x < x; });
  cs_.insert(it, std::move(e));
}

std::vector<std::vector<double>> MultiTuner::next() const {
  std::vector<std::vector<double>> out;
  auto known = [&](const std::vector<double>& y) {
    for (const auto& c : cs_)
      if (same_point(c.x, y)) return true;
    for (const auto& o : out)
      if (same_point(o, y)) return true;
    return false;
  };
  for (std::size_t f : front()) {
    const std::vector<double>& x = cs_[f].x;
    for (std::size_t p = 0; p < axes_.size(); ++p) {
      // The nearest values of parameter p tried so far, below and above x[p].
      double below = -INFINITY, above = INFINITY;
      for (const auto& c : cs_) {
        const double v = c.x[p];
        if (v < x[p] && !same_value(v, x[p])) below = std::max(below, v);
        if (v > x[p] && !same_value(v, x[p])) above = std::min(above, v);
      }
      for (const auto& [a, b] : {std::pair{below, x[p]}, std::pair{x[p], above}}) {
        if (!std::isfinite(a) || !std::isfinite(b)) continue;
        for (double v : fill_between(axes_[p].range, a, b, 1, {})) {
          std::vector<double> y = x;
          y[p] = v;
          if (!known(y)) out.push_back(std::move(y));
        }
      }
    }
  }
  return out;
}

}  // namespace faultline::analysis
