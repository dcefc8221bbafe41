// The search behind `faultline sim tune` with several parameters or two objectives: a
// coarse grid over every parameter (the cartesian product of each range's --points
// values, linear or log), then refinement rounds around the Pareto front (for one
// objective, the best point): for every front point and every parameter, the value
// halfway (geometrically on a log scale) to the nearest value of that parameter tried so
// far on either side, the other parameters held. Every candidate is evaluated on the same
// replicas (same seeds), so two candidates compare pairwise.
//
// Pure code, like analysis/tune.h: the caller evaluates candidates and hands back each
// objective's value per replica.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "analysis/tune.h"

namespace faultline::analysis {

struct ParamAxis {
  std::string key;  // a --set path
  TuneRange range;
};

struct Objective {
  std::string metric;
  bool maximize = true;
};

// One evaluated candidate: x[i] is the value of parameter i, per_replica[k] objective k's
// value on each replica (the same replicas, in the same order, for every candidate).
struct Evaluated {
  std::vector<double> x;
  std::vector<std::vector<double>> per_replica;
  MeanCi ci(std::size_t k) const { return mean_ci95(per_replica[k]); }
  double mean(std::size_t k) const { return ci(k).mean; }
};

// The cartesian product of each axis's coarse_grid, the first parameter slowest.
std::vector<std::vector<double>> grid_points(const std::vector<ParamAxis>& axes, int points);

// a is at least as good as b on every objective (by mean) and better on one.
bool dominates(const Evaluated& a, const Evaluated& b, const std::vector<Objective>& objs);
// The paired difference of a and b has a 95% CI holding 0 on every objective.
bool indistinguishable(const Evaluated& a, const Evaluated& b);
// The candidates no other dominates, best first by the first objective; of candidates
// with equal means on every objective only the first by x (a parameter that changes
// nothing puts one of its values on the front, not all). For one objective: the best
// candidate, the first by x of those with the best mean.
std::vector<std::size_t> pareto_front(const std::vector<Evaluated>& cs,
                                      const std::vector<Objective>& objs);

// Usage: evaluate every point of first(), add() them, then repeatedly evaluate next()
// until it is empty or the rounds or the budget are spent.
class MultiTuner {
 public:
  MultiTuner(std::vector<ParamAxis> axes, std::vector<Objective> objs, int points);
  std::vector<std::vector<double>> first() const { return grid_points(axes_, points_); }
  void add(Evaluated e);  // replaces a candidate with the same x
  // The next round's points, in the front's order (its best first, then by parameter), so
  // that a budget that cuts the round keeps the refinements of the best front points.
  std::vector<std::vector<double>> next() const;
  const std::vector<Evaluated>& candidates() const { return cs_; }  // sorted by x
  std::vector<std::size_t> front() const { return pareto_front(cs_, objs_); }
  const std::vector<ParamAxis>& axes() const { return axes_; }
  const std::vector<Objective>& objectives() const { return objs_; }

 private:
  std::vector<ParamAxis> axes_;
  std::vector<Objective> objs_;
  int points_;
  std::vector<Evaluated> cs_;
};

}  // namespace faultline::analysis
