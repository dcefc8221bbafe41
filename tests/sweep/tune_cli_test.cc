// `faultline sim tune`, `analyze check` and `analyze localize` end to end: each simulation runs
// in a child process (one SimGrid engine per process).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tests/support/cli.h"
#include "tests/sweep/sweep_cli_support.h"

namespace faultline::testing {
namespace {

using namespace sweep_cli;

// analyze check: Daly's closed form agrees with the simulation under its assumptions,
// and Meta's approximation's error is reported.
TEST(AnalyzeCheck, DalyAgreesWithTheSimulation) {
  CliResult r =
      run_cli({"analyze", "check", kDaly, "--replicas", "600", "--jobs", "2", "--format", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_NEAR(j["daly"]["ettr"].get<double>(), 0.770912459055713, 1e-12);
  EXPECT_LT(std::fabs(j["daly"]["z"].get<double>()), 4.0) << r.out;
  EXPECT_NEAR(j["meta"]["ettr"].get<double>(), (1 - (600 + 1800) / 14400.0) / (1 + 300 / 3600.0),
              1e-12);
  EXPECT_LT(std::fabs(j["meta"]["relative_error"].get<double>()), 0.02);
  EXPECT_EQ(j["inputs"]["mtbf_s"].get<double>(), 14400);
  CliResult table = run_cli({"analyze", "check", kDaly, "--replicas", "50", "--jobs", "2"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("Daly closed form"), std::string::npos);
  EXPECT_NE(table.out.find("Meta approximation"), std::string::npos);
  // Outside the model's assumptions: refused, naming what is off.
  CliResult bad = run_cli({"analyze", "check", kDense});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("job.image_bytes must be 0"), std::string::npos) << bad.err;
}

// analyze localize runs every localization module's own code. One faulty machine:
// dual-phase replay in exactly two phases with no healthy machine evicted, and
// bisection's mean rounds over every position equal the halving tree's mean leaf depth,
// d + 2 (N - 2^d) / N with d = floor(log2 N). Two faulty: the healthy machines replay
// evicts match an enumeration of every pair from Alg. 1's definition (groups x / m and
// x mod n, a candidate where a failing pair of groups meets).
TEST(AnalyzeLocalize, ReplayAndBisectionRoundsMatchIndependentCounts) {
  for (auto [machines, pp] : {std::pair{1200, 8}, std::pair{24, 4}}) {
    CliResult r =
        run_cli({"analyze", "localize", "--machines", std::to_string(machines), "--pp",
                 std::to_string(pp), "--faulty", "1,2", "--trials", "4000", "--format", "json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const json j = json::parse(r.out);
    const int m = j["replay"]["m"], n = j["replay"]["n"];
    ASSERT_EQ(m * n, machines);
    ASSERT_LE(m, n);
    const auto& one = j["cases"][0];
    EXPECT_EQ(one["sets"].get<int>(), machines);
    EXPECT_EQ(one["replay"]["rounds_max"].get<double>(), 2);
    EXPECT_EQ(one["replay"]["found_all_share"].get<double>(), 1);
    EXPECT_EQ(one["replay"]["healthy_evicted_max"].get<double>(), 0);
    const int d = static_cast<int>(std::floor(std::log2(machines)));
    const double mean_depth = d + 2.0 * (machines - (1 << d)) / machines;
    EXPECT_NEAR(one["bisection"]["rounds_mean"].get<double>(), mean_depth, 1e-9);
    EXPECT_EQ(one["bisection"]["found_all_share"].get<double>(), 1);
    EXPECT_NEAR(one["bisection"]["hours_mean"].get<double>(), mean_depth, 1e-9);  // 3600 s rounds
    // Two faulty: expected extra candidates over all pairs.
    std::vector<std::vector<char>> meet(machines / m, std::vector<char>(n, 0));
    for (int x = 0; x < machines; ++x) meet[x / m][x % n] = 1;
    double extra = 0, pairs = 0;
    for (int a = 0; a < machines; ++a)
      for (int b = a + 1; b < machines; ++b) {
        std::vector<int> hs{a / m}, vs{a % n};
        if (b / m != a / m) hs.push_back(b / m);
        if (b % n != a % n) vs.push_back(b % n);
        int c = 0;
        for (int h : hs)
          for (int v : vs) c += meet[h][v];
        extra += c - 2;
        ++pairs;
      }
    const auto& two = j["cases"][1];
    EXPECT_EQ(two["replay"]["found_all_share"].get<double>(), 1);
    EXPECT_EQ(two["bisection"]["found_all_share"].get<double>(), 1);
    // 4,000 random pairs; the extra count is 0 or 2: standard error <= 1 / sqrt(4000).
    EXPECT_NEAR(two["replay"]["healthy_evicted_mean"].get<double>(), extra / pairs,
                4 / std::sqrt(4000.0))
        << machines;
    EXPECT_LE(two["replay"]["healthy_evicted_max"].get<double>(), 2);
    EXPECT_LE(two["bisection"]["rounds_max"].get<double>(), d + 1);
    // The stress baseline: one round, a test per machine, exact.
    EXPECT_EQ(j["localizers"], json::array({"replay", "bisection", "stress", "pairwise"}));
    // Pairwise: two rounds; each suspect gets a partner of its own in round 2, so no
    // healthy machine is evicted, even when both faulty ones share a round-1 pair.
    EXPECT_EQ(two["pairwise"]["found_all_share"].get<double>(), 1);
    EXPECT_EQ(two["pairwise"]["rounds_max"].get<double>(), 2);
    EXPECT_EQ(two["pairwise"]["healthy_evicted_max"].get<double>(), 0);
    EXPECT_EQ(two["stress"]["rounds_max"].get<double>(), 1);
    EXPECT_EQ(two["stress"]["group_tests_mean"].get<double>(), machines);
    EXPECT_EQ(two["stress"]["healthy_evicted_max"].get<double>(), 0);
  }
  CliResult bad = run_cli({"analyze", "localize", "--machines", "1200", "--pp", "7"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--pp: expected an integer dividing --machines (1200)"), std::string::npos)
      << bad.err;
}

// sim tune finds Daly's optimum on the Daly scenario and the smallest value within X.
TEST(SimTune, FindsTheBestCheckpointIntervalAndTheSmallestWithin) {
  TempDir dir("tune");
  CliResult r = run_cli({"sim",
                         "tune",
                         kDaly,
                         "--param",
                         "policy.params.checkpoint_interval_s=600:6000",
                         "--replicas",
                         "120",
                         "--jobs",
                         "2",
                         "--points",
                         "5",
                         "--rounds",
                         "2",
                         "--within",
                         "0.01",
                         "--set",
                         "job.horizon_days=120",
                         "--format",
                         "json",
                         "--quiet",
                         "--out",
                         dir.str()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  const double best = j["best"]["value"];
  // Daly's optimum is 2743 s and the curve is flat around it.
  EXPECT_NEAR(best, 2743, 700) << r.out;
  EXPECT_LE(j["indistinguishable_range"][0].get<double>(), best);
  EXPECT_GE(j["indistinguishable_range"][1].get<double>(), best);
  const double bound = j["best"]["mean"].get<double>() * 0.99;
  const double w = j["within"]["value"];
  EXPECT_LT(w, best);
  EXPECT_GE(j["within"]["mean"].get<double>(), bound);
  for (const auto& c : j["candidates"])
    if (c["value"].get<double>() < w) {
      EXPECT_LT(c["mean"].get<double>(), bound) << c.dump();
    }
  EXPECT_GE(j["candidates"].size(), 7u);
  // --out also keeps the tuning trace: every candidate with its round, the best per round.
  const json t = json::parse(slurp(dir.path() / "tune.json"));
  EXPECT_EQ(t["candidates"], j["candidates"]);
  ASSERT_EQ(t["rounds"].size(), 3u) << t.dump();
  EXPECT_EQ(t["rounds"][0]["values"].size(), 5u);
  size_t first_round = 0;
  for (const auto& c : t["candidates"]) first_round += c["round"].get<int>() == 0;
  EXPECT_EQ(first_round, 5u);
  EXPECT_EQ(t["rounds"].back()["best"]["value"], j["best"]["value"]);
}

// The paired 95% CI of a[i] - b[i] holds 0 (Student t; the tests below run 12 replicas).
bool paired_ci_holds_zero(const std::vector<double>& a, const std::vector<double>& b) {
  const double n = static_cast<double>(a.size());
  double mean = 0, ss = 0;
  for (size_t i = 0; i < a.size(); ++i) mean += (a[i] - b[i]) / n;
  for (size_t i = 0; i < a.size(); ++i) ss += std::pow(a[i] - b[i] - mean, 2);
  EXPECT_EQ(a.size(), 12u);
  const double half = 2.201 * std::sqrt(ss / (n - 1)) / std::sqrt(n);  // t(0.975, 11)
  return mean - half <= 0 && mean + half >= 0;
}

// A parameter value as a --grid or --zip writes it: a whole number without a fraction.
std::string value_text(const json& v) {
  if (v.is_number_float() && v.get<double>() == std::floor(v.get<double>()))
    return std::to_string(static_cast<long long>(v.get<double>()));
  return v.dump();
}

// Per-replica ETTR and cost of every point of a sweep.json, by "standby_pool/interval".
std::map<std::string, std::pair<std::vector<double>, std::vector<double>>> sweep_points(
    const fs::path& dir) {
  std::map<std::string, std::pair<std::vector<double>, std::vector<double>>> out;
  const json sweep = json::parse(slurp(dir / "sweep.json"));
  for (const auto& p : sweep["points"]) {
    const json r = json::parse(slurp(dir / p["result"].get<std::string>()));
    const std::string key = value_text(p["params"]["policy.params.standby_pool"]) + "/" +
                            value_text(p["params"]["policy.params.checkpoint_interval_s"]);
    out[key] = {r["per_replica"]["ettr"].get<std::vector<double>>(),
                r["per_replica"]["cost"].get<std::vector<double>>()};
  }
  return out;
}

double mean_of(const std::vector<double>& xs) {
  double s = 0;
  for (double x : xs) s += x;
  return s / static_cast<double>(xs.size());
}

// Issue 53's done-when, small: standbys x checkpoint interval on the dense job for ETTR and
// cost. Every point of an exhaustive grid, simulated by sim sweep on the same seeds, is
// covered by a point of the front tune returns: on each objective the front point is better
// by mean, or their paired difference is not significant. With the coarse grid alone
// (--rounds 0) some grid point is not (the refinement is what finds the front).
TEST(SimTune, TheParetoFrontCoversAnExhaustiveGridOnTheSameSeeds) {
  TempDir dir("tune-pareto");
  const std::vector<std::string> common{"--replicas",
                                        "12",
                                        "--jobs",
                                        "2",
                                        "--quiet",
                                        "--out",
                                        dir.str(),
                                        "--set",
                                        "policy.params.checkpoint=memory",
                                        "--set",
                                        "costs.gpu_hour=2",
                                        "--set",
                                        "costs.spare_machine_hour=16",
                                        "--set",
                                        "job.horizon_days=30"};
  auto tune = [&](const std::string& rounds, const std::vector<std::string>& more = {}) {
    std::vector<std::string> a{"sim",
                               "tune",
                               kDense,
                               "--param",
                               "policy.params.standby_pool=0:16",
                               "--param",
                               "policy.params.checkpoint_interval_s=300:4800:log",
                               "--objective",
                               "ettr,cost",
                               "--points",
                               "5",
                               "--rounds",
                               rounds,
                               "--format",
                               "json"};
    a.insert(a.end(), common.begin(), common.end());
    a.insert(a.end(), more.begin(), more.end());
    CliResult r = run_cli(a);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0 ? json::parse(r.out) : json::object();
  };
  const json full = tune("3"), coarse = tune("0");
  ASSERT_TRUE(full.contains("front")) << full.dump();
  ASSERT_FALSE(full["front"].empty());
  EXPECT_EQ(full["objectives"][1]["goal"], "min");
  EXPECT_EQ(coarse["search"]["evaluations"], 25);
  // A budget cuts the refinement (the points come from the store: same inputs, same ids).
  const json cut = tune("3", {"--budget", "30"});
  EXPECT_EQ(cut["search"]["evaluations"], 30);
  EXPECT_EQ(cut["search"]["stopped_by"], "budget");
  // One objective over two parameters: the best point (the largest mean), no front.
  const json one = tune("0", {"--objective", "ettr"});
  EXPECT_FALSE(one.contains("front"));
  double best = 0;
  for (const auto& c : one["candidates"])
    best = std::max(best, c["objectives"]["ettr"]["mean"].get<double>());
  EXPECT_EQ(one["best"]["objectives"]["ettr"]["mean"].get<double>(), best);
  // The exhaustive grid, and the front points (a --zip sweep), from sim sweep.
  std::string standbys, intervals;
  for (int k = 0; k <= 16; ++k) standbys += (k ? "," : "") + std::to_string(k);
  std::vector<std::string> a{"sim",
                             "sweep",
                             kDense,
                             "--grid",
                             "policy.params.standby_pool=" + standbys,
                             "--grid",
                             "policy.params.checkpoint_interval_s=300,1200,4800"};
  a.insert(a.end(), common.begin(), common.end());
  CliResult grid = run_cli(a);
  ASSERT_EQ(grid.exit_code, 0) << grid.err;
  const auto grid_points = sweep_points(dir.path());
  ASSERT_EQ(grid_points.size(), 17u * 3);
  auto front_of = [&](const json& t) {
    std::string s_list, i_list;
    for (const auto& f : t["front"]) {
      s_list += (s_list.empty() ? "" : ",") + value_text(f["params"]["policy.params.standby_pool"]);
      i_list += (i_list.empty() ? "" : ",") +
                value_text(f["params"]["policy.params.checkpoint_interval_s"]);
    }
    std::vector<std::string> z{"sim",
                               "sweep",
                               kDense,
                               "--zip",
                               "policy.params.standby_pool=" + s_list,
                               "--zip",
                               "policy.params.checkpoint_interval_s=" + i_list};
    z.insert(z.end(), common.begin(), common.end());
    CliResult r = run_cli(z);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return sweep_points(dir.path());
  };
  auto uncovered = [&](const json& t) {
    const auto front = front_of(t);
    EXPECT_EQ(front.size(), t["front"].size());
    // The front's own figures are those of sim sweep on the same points.
    for (const auto& f : t["front"]) {
      const std::string key = value_text(f["params"]["policy.params.standby_pool"]) + "/" +
                              value_text(f["params"]["policy.params.checkpoint_interval_s"]);
      EXPECT_NEAR(f["objectives"]["ettr"]["mean"].get<double>(), mean_of(front.at(key).first),
                  1e-12);
      EXPECT_NEAR(f["objectives"]["cost"]["mean"].get<double>(), mean_of(front.at(key).second),
                  1e-6);
    }
    std::vector<std::string> out;
    for (const auto& [gk, g] : grid_points) {
      bool covered = false;
      for (const auto& [fk, f] : front) {
        const bool ettr =
            mean_of(f.first) >= mean_of(g.first) || paired_ci_holds_zero(f.first, g.first);
        const bool cost =
            mean_of(f.second) <= mean_of(g.second) || paired_ci_holds_zero(f.second, g.second);
        covered = covered || (ettr && cost);
      }
      if (!covered) out.push_back(gk);
    }
    return out;
  };
  const auto missed = uncovered(full);
  EXPECT_TRUE(missed.empty()) << missed.size() << " grid points not covered, the first "
                              << (missed.empty() ? "" : missed[0]);
  EXPECT_FALSE(uncovered(coarse).empty()) << "the coarse grid alone covers the exhaustive grid";
}

// Bad input to sim tune is one line naming the flag and what it expects, exit 2.
TEST(SimTune, BadInputIsOneLine) {
  const std::string p = "policy.params.standby_pool";
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases{
      {{"--param", p}, "--param: expected KEY=LO:HI[:log]"},
      {{"--param", p + "=16:0"}, "expected numbers LO < HI"},
      {{"--param", "policy.params.checkpoint_interval_s=0:3600:log"}, "a log scale needs LO > 0"},
      {{"--param", p + "=0:16:ln"}, "expected KEY=LO:HI or KEY=LO:HI:log"},
      {{"--param", p + "=0:16", "--param", p + "=0:8"}, "is given twice"},
      {{"--param", p + "=0:16", "--objective", "ettr,costs"}, "unknown metric 'costs'"},
      {{"--param", p + "=0:16", "--objective", "ettr,cost,incidents"}, "at most two objectives"},
      {{"--param", p + "=0:16", "--objective", "ettr,cost", "--goal", "max"},
       "--goal: expected 2 goal(s)"},
      {{"--param", p + "=0:16", "--param", "policy.params.mfu_rounds=1:9", "--within", "0.01"},
       "--within: only with one --param and one --objective"},
      {{"--param", p + "=0:16", "--param", "policy.params.mfu_rounds=1:9", "--budget", "10"},
       "--budget 10: the coarse grid alone has 25 candidates"},
      {{"--param", p + "=0:16", "--objective", "ettr,cost"}, "has no costs"},
      // A module choice takes names: an index range would tune the registration order.
      {{"--param", "policy.params.recovery=0:2"},
       "--param policy.params.recovery: expected a numeric parameter, got a module choice"},
  };
  for (const auto& [extra, want] : cases) {
    std::vector<std::string> a{"sim", "tune", kDense, "--quiet"};
    a.insert(a.end(), extra.begin(), extra.end());
    CliResult r = run_cli(a);
    EXPECT_EQ(r.exit_code, 2) << want;
    EXPECT_NE(r.err.find(want), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

}  // namespace
}  // namespace faultline::testing
