// The pure parts of sweeps (axes, expansion, point ids) and of tuning (grids, paired
// statistics, the refinement search on a synthetic objective).
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "analysis/pareto.h"
#include "analysis/sweep_plan.h"
#include "analysis/tune.h"

namespace faultline::analysis {
namespace {

TEST(SweepPlan, AxisValuesSplitOnTopLevelCommasOnly) {
  auto [k, v] = parse_axis_arg(R"(policy.params={"a":1,"b":[2,3]},{},"x,y",7)", "--grid");
  EXPECT_EQ(k, "policy.params");
  ASSERT_EQ(v.size(), 4u);
  EXPECT_EQ(v[0], R"({"a":1,"b":[2,3]})");
  EXPECT_EQ(v[1], "{}");
  EXPECT_EQ(v[2], R"("x,y")");
  EXPECT_EQ(v[3], "7");
  EXPECT_THROW(parse_axis_arg("novalue", "--grid"), PlanError);
  EXPECT_THROW(parse_axis_arg("=1,2", "--grid"), PlanError);
  EXPECT_THROW(parse_axis_arg("k=1,,2", "--grid"), PlanError);
}

TEST(SweepPlan, CartesianProductFirstAxisSlowestAndZipMovesTogether) {
  SweepBase base{"{}", {}, -1, -1};
  std::vector<Axis> axes = {{{"a"}, {{"1"}, {"2"}}},
                            {{"z1", "z2"}, {{"x", "10"}, {"y", "20"}, {"w", "30"}}}};
  const auto pts = expand(base, axes);
  ASSERT_EQ(pts.size(), 6u);
  EXPECT_EQ(pts[0].params, (Assignment{{"a", "1"}, {"z1", "x"}, {"z2", "10"}}));
  EXPECT_EQ(pts[2].params, (Assignment{{"a", "1"}, {"z1", "w"}, {"z2", "30"}}));
  EXPECT_EQ(pts[3].params, (Assignment{{"a", "2"}, {"z1", "x"}, {"z2", "10"}}));
  // No axes: one point, the base scenario.
  EXPECT_EQ(expand(base, {}).size(), 1u);
  EXPECT_THROW(expand(base, {{{"a"}, {{"1"}}}, {{"a"}, {{"2"}}}}), PlanError);
}

TEST(SweepPlan, PointIdDependsOnWhatDecidesTheResultOnly) {
  SweepBase base{"{\"x\":1}", {"job.pp=4"}, -1, 50};
  const std::string id = point_id(base, {{"a", "1"}, {"b", "2"}});
  EXPECT_EQ(id, point_id(base, {{"b", "2"}, {"a", "1"}}));  // axis order does not matter
  EXPECT_NE(id, point_id(base, {{"a", "1"}, {"b", "3"}}));
  SweepBase other = base;
  other.replicas = 51;
  EXPECT_NE(id, point_id(other, {{"a", "1"}, {"b", "2"}}));
  other = base;
  other.scenario_text = "{\"x\":2}";
  EXPECT_NE(id, point_id(other, {{"a", "1"}, {"b", "2"}}));
  // Readable and file-system safe.
  const std::string weird = point_id(base, {{"policy.params", "{\"a\": \"/..\"}"}});
  EXPECT_EQ(weird.find('/'), std::string::npos);
  EXPECT_EQ(weird.find(' '), std::string::npos);
  EXPECT_EQ(id.rfind("a=1_b=2-", 0), 0u) << id;
}

TEST(SweepPlan, CsvFieldsAndNumbers) {
  EXPECT_EQ(csv_field("plain"), "plain");
  EXPECT_EQ(csv_field("a,b"), "\"a,b\"");
  EXPECT_EQ(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(format_double(1800), "1800");
  EXPECT_EQ(format_double(0.1), "0.1");
  EXPECT_EQ(std::stod(format_double(0.9418193955718884)), 0.9418193955718884);
}

TEST(Tune, Grids) {
  EXPECT_EQ(coarse_grid({0, 8, true}, 5), (std::vector<double>{0, 2, 4, 6, 8}));
  EXPECT_EQ(coarse_grid({0, 3, true}, 7), (std::vector<double>{0, 1, 2, 3}));  // de-duplicated
  EXPECT_EQ(fill_between({0, 8, true}, 2, 4, 3, {2, 4}), (std::vector<double>{3}));
  EXPECT_TRUE(fill_between({0, 8, true}, 2, 3, 3, {}).empty());
  EXPECT_EQ(fill_between({0, 1, false}, 0, 1, 3, {}), (std::vector<double>{0.25, 0.5, 0.75}));
}

TEST(Tune, PairedDifferenceRemovesSharedNoise) {
  // Large common noise, small constant difference: the paired CI is tight around it.
  std::vector<double> a, b;
  for (int i = 0; i < 50; ++i) {
    const double common = std::sin(i * 1.7) * 10;
    a.push_back(common + 0.01);
    b.push_back(common);
  }
  const MeanCi d = paired_difference(a, b);
  EXPECT_NEAR(d.mean, 0.01, 1e-12);
  EXPECT_LT(d.hi - d.lo, 1e-9);
  const MeanCi m = mean_ci95({1, 2, 3, 4});
  EXPECT_DOUBLE_EQ(m.mean, 2.5);
  EXPECT_NEAR(m.hi - m.mean, 3.182 * std::sqrt(5.0 / 3.0) / 2, 1e-9);  // t(3) s / sqrt(n)
}

// The search of sim tune on a known objective: a parabola with its peak at 730 plus
// replica noise shared by every candidate (common random numbers).
TEST(Tune, RefinementFindsThePeakAndTheSmallestValueWithin) {
  auto objective = [](double x) {
    Candidate c;
    c.x = x;
    for (int r = 0; r < 40; ++r)
      c.per_replica.push_back(0.95 - 1e-8 * (x - 730) * (x - 730) + 0.01 * std::cos(r));
    return c;
  };
  Tuner tuner({60, 3600, true}, 7, true, 1e-3);
  for (double x : tuner.first()) tuner.add(objective(x));
  EXPECT_EQ(tuner.candidates().size(), 7u);
  for (int round = 0; round < 6; ++round)
    for (double x : tuner.next()) tuner.add(objective(x));
  const auto& cs = tuner.candidates();
  const size_t best = tuner.best();
  EXPECT_NEAR(cs[best].x, 730, 2);
  // Within 1e-3 relative: 1e-8 (x - 730)^2 <= 0.95e-3, so x >= 730 - 308.2 = 421.8.
  const size_t w = tuner.smallest_within();
  EXPECT_GE(cs[w].mean(), cs[best].mean() * (1 - 1e-3));
  EXPECT_GE(cs[w].x, 422);
  EXPECT_LE(cs[w].x, 430);
  ASSERT_GT(w, 0u);
  EXPECT_LT(cs[w - 1].mean(), cs[best].mean() * (1 - 1e-3));
  EXPECT_GE(cs[w - 1].x, 414);
  // Minimising picks the other end.
  EXPECT_NE(best_index(cs, false), best);
  // Nothing left to refine on whole numbers: next() runs dry.
  EXPECT_TRUE(tuner.next().empty() || tuner.candidates().size() > 40);
}

// A log scale spreads values evenly in log(x); integers round, duplicates go.
TEST(Pareto, LogGridsAndTheirProduct) {
  const auto g = coarse_grid({1, 1000, false, true}, 4);
  ASSERT_EQ(g.size(), 4u);
  EXPECT_NEAR(g[1], 10, 1e-9);
  EXPECT_NEAR(g[2], 100, 1e-9);
  EXPECT_EQ(g[3], 1000);
  EXPECT_EQ(coarse_grid({1, 16, true, true}, 5), (std::vector<double>{1, 2, 4, 8, 16}));
  // Between two values of a log axis: their geometric mean.
  EXPECT_NEAR(fill_between({1, 100, false, true}, 1, 100, 1, {})[0], 10, 1e-9);
  const auto pts = grid_points({{"a", {0, 2, true}}, {"b", {1, 100, false, true}}}, 3);
  ASSERT_EQ(pts.size(), 9u);
  EXPECT_EQ(pts[0], (std::vector<double>{0, 1}));
  EXPECT_NEAR(pts[1][1], 10, 1e-9);
  EXPECT_EQ(pts[3][0], 1);  // the first parameter moves slowest
}

Evaluated point(std::vector<double> x, double a, double b, const std::vector<double>& noise) {
  Evaluated e;
  e.x = std::move(x);
  e.per_replica.resize(2);
  for (double n : noise) {
    e.per_replica[0].push_back(a + n);
    e.per_replica[1].push_back(b);
  }
  return e;
}

// The front: what no other candidate beats on both means, best first by the first
// objective; a shared noise cancels in paired differences.
TEST(Pareto, FrontAndIndistinguishablePoints) {
  const std::vector<Objective> objs{{"ettr", true}, {"cost", false}};
  const std::vector<double> noise{-0.2, 0.1, 0.3, -0.1};
  const std::vector<Evaluated> cs{point({0}, 0.90, 10, noise), point({1}, 0.95, 20, noise),
                                  point({2}, 0.94, 30, noise), point({3}, 0.97, 30, noise),
                                  point({4}, 0.97, 30, noise)};
  EXPECT_TRUE(dominates(cs[3], cs[2], objs));
  EXPECT_FALSE(dominates(cs[3], cs[4], objs));  // equal on both: neither dominates
  EXPECT_FALSE(dominates(cs[0], cs[1], objs));
  // 4 ties 3 on both: only the first by x is on the front.
  EXPECT_EQ(pareto_front(cs, objs), (std::vector<std::size_t>{3, 1, 0}));
  EXPECT_TRUE(indistinguishable(cs[3], cs[4]));
  EXPECT_FALSE(indistinguishable(cs[1], cs[2]));  // 0.01 apart on every replica
  // One objective: the best.
  EXPECT_EQ(pareto_front(cs, {{"ettr", true}}), (std::vector<std::size_t>{3}));
}

// The search on a synthetic problem with an exact answer: ETTR rises with standbys x0 and
// peaks at an interval x1 of 1000 (log scale); cost is x0. Every point of an exhaustive
// grid is dominated by, or equal to, a point of the front the search returns, and the
// front holds every standby count (each one is worth its cost here).
TEST(Pareto, RefinementReachesEveryFrontPointOfAnExhaustiveGrid) {
  const std::vector<double> noise{-0.02, 0.01, 0.03, -0.01, 0.0};
  auto eval = [&](const std::vector<double>& x) {
    const double l = std::log(x[1] / 1000);
    return point(x, 1 - 0.5 * std::exp(-x[0] / 3) - 0.01 * l * l, x[0], noise);
  };
  const std::vector<ParamAxis> axes{{"standby", {0, 16, true}},
                                    {"interval", {300, 3600, false, true}}};
  MultiTuner t(axes, {{"ettr", true}, {"cost", false}}, 5);
  int evaluations = 0;
  for (const auto& x : t.first()) t.add(eval(x)), ++evaluations;
  EXPECT_EQ(evaluations, 25);
  for (int round = 0; round < 4; ++round)
    for (const auto& x : t.next()) t.add(eval(x)), ++evaluations;
  std::vector<Evaluated> front;
  for (std::size_t f : t.front()) front.push_back(t.candidates()[f]);
  std::vector<double> standbys;
  for (const auto& f : front) standbys.push_back(f.x[0]);
  std::sort(standbys.begin(), standbys.end());
  std::vector<double> all(17);
  for (int i = 0; i <= 16; ++i) all[i] = i;
  EXPECT_EQ(standbys, all);
  for (const auto& x :
       grid_points({{"standby", {0, 16, true}}, {"interval", {300, 3600, false, true}}}, 17)) {
    const Evaluated g = eval(x);
    bool covered = false;
    for (const auto& f : front)
      covered = covered || (f.mean(0) >= g.mean(0) - 1e-12 && f.mean(1) <= g.mean(1) + 1e-12);
    EXPECT_TRUE(covered) << x[0] << " " << x[1];
  }
  EXPECT_LT(evaluations, 17 * 17);
}

}  // namespace
}  // namespace faultline::analysis
