// The pure parts of sweeps (axes, expansion, point ids) and of tuning (grids, paired
// statistics, the refinement search on a synthetic objective).
#include <gtest/gtest.h>

#include <cmath>
#include <map>

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

}  // namespace
}  // namespace faultline::analysis
