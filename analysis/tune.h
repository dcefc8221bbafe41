// The search behind `faultline sim tune`: a coarse grid over one numeric parameter,
// then finer grids around the best value, every candidate evaluated on the same
// replicas (same seeds, so differences are paired and free of between-point noise).
//
// Pure code: the caller evaluates candidates (by simulating them) and hands back one
// objective value per replica; this decides which candidates to try next and how to
// read the results. Nothing here throws except on a contract violation noted below.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace faultline::analysis {

struct MeanCi {
  double mean = 0, lo = 0, hi = 0;  // 95% interval (Student t for n <= 30)
};
// Mean and 95% confidence interval of xs (lo = hi = mean when xs.size() < 2).
MeanCi mean_ci95(const std::vector<double>& xs);
// Mean and CI of a[i] - b[i]; requires a.size() == b.size().
MeanCi paired_difference(const std::vector<double>& a, const std::vector<double>& b);

struct TuneRange {
  double lo = 0, hi = 0;
  bool integer = false;  // candidates are whole numbers
  bool log = false;      // values spread evenly in log(x) (requires lo > 0)
};

// `points` values evenly spread over [lo, hi] (in log(x) on a log scale), ends included,
// de-duplicated (integers rounded). Requires points >= 2 and lo <= hi.
std::vector<double> coarse_grid(const TuneRange& r, int points);

// `points` values evenly spread over the open interval (a, b) between two evaluated
// neighbours (in log(x) on a log scale), skipping those in `known`; empty when the
// interval holds no new value (or, for integers, no whole number).
std::vector<double> fill_between(const TuneRange& r, double a, double b, int points,
                                 const std::vector<double>& known);

struct Candidate {
  double x = 0;
  std::vector<double> per_replica;  // objective per replica, same replicas for every x
  MeanCi ci() const { return mean_ci95(per_replica); }
  double mean() const;
};

// Index of the best candidate (largest mean when maximize, else smallest); ties go to
// the smaller x. Requires a non-empty list.
std::size_t best_index(const std::vector<Candidate>& cs, bool maximize);

// The interval of the next refinement around the best candidate: from its left to its
// right evaluated neighbour (cs sorted by x). nullopt when the best has no room left.
std::optional<std::pair<double, double>> refine_interval(const std::vector<Candidate>& sorted,
                                                         std::size_t best);

// Index of the smallest x whose mean is within `within` (relative, e.g. 0.001) of the
// best mean: >= best (1 - within) when maximizing, <= best (1 + within) otherwise.
// Candidates must be sorted by x.
std::size_t smallest_within(const std::vector<Candidate>& sorted, std::size_t best, bool maximize,
                            double within);

// The search itself. Usage: evaluate every value of first(), add() the candidates, then
// repeatedly evaluate next() until it is empty or the round budget is spent. A round
// fills each gap next to the best value with (points - 1) / 2 new values, and with
// `within` >= 0 also the gap just below the smallest value within `within` of the best,
// so both answers sharpen every round.
class Tuner {
 public:
  Tuner(TuneRange range, int points, bool maximize, double within = -1);
  std::vector<double> first() const;
  void add(Candidate c);
  std::vector<double> next() const;
  // Candidates sorted by x.
  const std::vector<Candidate>& candidates() const { return cs_; }
  std::size_t best() const;             // index into candidates(); requires some
  std::size_t smallest_within() const;  // requires within >= 0

 private:
  TuneRange range_;
  int points_;
  bool maximize_;
  double within_;
  std::vector<Candidate> cs_;
};

}  // namespace faultline::analysis
