// aggregate() over results whose categories were folded as they arrived, against the
// same results kept whole.
#include "sim/report.h"

#include <gtest/gtest.h>

#include <random>

#include "policies/builtin.h"
#include "scenarios/scenario.h"

namespace faultline::sim {
namespace {

const char* kThreeCategories = R"({
  "description": "three categories",
  "cluster": {"machines": 16, "gpus_per_machine": 8},
  "job": {"tp": 8, "pp": 4, "dp": 4, "step_time_s": 5, "horizon_days": 1},
  "faults": {"categories": [
    {"name": "a", "rate_per_job_day": 3, "symptom": "crash"},
    {"name": "b", "rate_per_job_day": 2, "symptom": "hang"},
    {"name": "c", "rate_per_job_day": 1, "symptom": "slowdown"}]},
  "policy": {"stack": "byterobust", "params": {}}
})";

TEST(Report, FoldedCategoriesAggregateBitForBitLikeKeptOnes) {
  Registry reg = policies::builtin_registry();
  const scenarios::Scenario sc = scenarios::parse_scenario(kThreeCategories, "three.json", {}, reg);
  // Sums of awkward doubles, whose value depends on the order they are added in.
  std::mt19937_64 gen(7);
  std::uniform_real_distribution<double> u(0, 1e4);
  std::vector<ReplicaResult> kept;
  for (std::uint64_t i = 0; i < 200; ++i) {
    ReplicaResult r;
    r.replica = i;
    r.ettr = 0.9 + u(gen) * 1e-5;
    for (int c = 0; c < 3; ++c) {
      CategoryStats k;
      k.incidents = static_cast<std::int64_t>(u(gen)) % 7;
      k.injected = k.incidents + 1;
      k.resolution_sum_s = u(gen) / 3;
      k.resolution_max_s = u(gen) / 7;
      k.detection_sum_s = u(gen) / 11;
      k.detected = k.incidents;
      k.recurred = static_cast<std::int64_t>(i % 2);
      k.outcomes[kOutcomeInterrupted] = k.incidents;
      k.outcomes[kOutcomeAbsorbed] = 1 + k.recurred;
      r.categories.push_back(k);
      r.incident_count += k.incidents;
    }
    const std::size_t builtins = std::size(kBuiltinMechanisms);
    r.resolved_by[kBuiltinMechanisms[i % builtins].c_str()] = static_cast<std::int64_t>(i % 3);
    kept.push_back(r);
  }
  std::vector<ReplicaResult> released = kept;
  CategoryTotals totals;
  for (auto& r : released) {
    totals.add(r);
    release_categories(r);
    ASSERT_TRUE(r.categories.empty());
  }
  const nlohmann::json a = aggregate(sc, kept, 1.5);
  const nlohmann::json b = aggregate(sc, released, 1.5, &totals);
  EXPECT_EQ(a.dump(), b.dump());
  // The fold is not trivially empty: the ledger and the mechanisms are there.
  EXPECT_GT(b["incidents"]["by_category"]["b"]["resolution_mean_s"].get<double>(), 0);
  EXPECT_FALSE(b["resolved_by_per_replica"].empty());
  // Folded in another order, the sums differ in the last bits somewhere (so the equality
  // above says something about the order, not only about the fields).
  CategoryTotals reversed;
  for (auto it = kept.rbegin(); it != kept.rend(); ++it) reversed.add(*it);
  bool differs = false;
  for (int c = 0; c < 3; ++c)
    differs |= reversed.categories[c].resolution_sum_s != totals.categories[c].resolution_sum_s ||
               reversed.categories[c].detection_sum_s != totals.categories[c].detection_sum_s;
  EXPECT_TRUE(differs);
}

}  // namespace
}  // namespace faultline::sim
