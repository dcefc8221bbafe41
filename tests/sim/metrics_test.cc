// The replica result's codec (a forked replica's or an MPI rank's result to its parent):
// every field comes back as it went, each scalar set to a value of its own so that two
// swapped fields show.
#include "sim/metrics.h"

#include <gtest/gtest.h>

namespace faultline::sim {
namespace {

TEST(ReplicaResultCodec, EveryFieldComesBackUnderItsOwnName) {
  ReplicaResult r;
  r.replica = 7;
  r.ettr = 0.5;
  std::int64_t n = 100;
  for (std::int64_t* x : {&r.evictions_true,
                          &r.evictions_false,
                          &r.evictions_false_positive,
                          &r.false_failures,
                          &r.health_check_drains,
                          &r.repairs,
                          &r.retired,
                          &r.runs_ended,
                          &r.incident_count,
                          &r.faults_injected,
                          &r.checkpoints,
                          &r.events,
                          &r.flow_batches_real,
                          &r.flow_batches_cached,
                          &r.steps,
                          &r.standby_exhaustions,
                          &r.remote_fallbacks,
                          &r.machines_beyond_fleet,
                          &r.machines_used,
                          &r.preemptions})
    *x = ++n;
  r.max_fruitless_rounds = 3;
  r.elapsed_s = 11.5;
  r.exposure_s = 12.5;
  r.cpu_s = 13.5;
  r.finished = true;
  r.depleted = true;
  std::int64_t ns = 1000;
  for (const auto& k : kBuckets) r.breakdown.*k.field = ++ns;
  CategoryStats c{1, 2, 3.5, 4.5, 5.5, 6, 7, {}};
  for (int o = 0; o < kOutcomes; ++o) c.outcomes[o] = 20 + o;
  r.categories = {c};
  r.dominant = {2, 30.5, 40.5};
  r.timeline = {{1, 0.9, 0.8, 0.1}};
  r.incidents = {{5.5, 1, 6.5, 7.5, {3, 4}, 2, {8}, {9}}};
  r.decisions = {"a", "b"};
  r.resolved_by = {1, 0, 2};

  const ReplicaResult d = decode(encode(r));
  EXPECT_EQ(d.replica, 7u);
  EXPECT_EQ(d.ettr, 0.5);
  n = 100;
  for (const std::int64_t* x : {&d.evictions_true,
                                &d.evictions_false,
                                &d.evictions_false_positive,
                                &d.false_failures,
                                &d.health_check_drains,
                                &d.repairs,
                                &d.retired,
                                &d.runs_ended,
                                &d.incident_count,
                                &d.faults_injected,
                                &d.checkpoints,
                                &d.events,
                                &d.flow_batches_real,
                                &d.flow_batches_cached,
                                &d.steps,
                                &d.standby_exhaustions,
                                &d.remote_fallbacks,
                                &d.machines_beyond_fleet,
                                &d.machines_used,
                                &d.preemptions})
    EXPECT_EQ(*x, ++n);
  EXPECT_EQ(d.max_fruitless_rounds, 3);
  EXPECT_EQ(d.elapsed_s, 11.5);
  EXPECT_EQ(d.exposure_s, 12.5);
  EXPECT_EQ(d.cpu_s, 13.5);
  EXPECT_TRUE(d.finished);
  EXPECT_TRUE(d.depleted);
  ns = 1000;
  for (const auto& k : kBuckets) EXPECT_EQ(d.breakdown.*k.field, ++ns) << k.name;
  ASSERT_EQ(d.categories.size(), 1u);
  EXPECT_EQ(d.categories[0].resolution_max_s, 4.5);
  EXPECT_EQ(d.categories[0].recurred, 7);
  EXPECT_EQ(d.categories[0].outcomes[kOutcomes - 1], 20 + kOutcomes - 1);
  EXPECT_EQ(d.dominant.at_s, 30.5);
  ASSERT_EQ(d.timeline.size(), 1u);
  EXPECT_EQ(d.timeline[0].waiting_h, 0.1);
  ASSERT_EQ(d.incidents.size(), 1u);
  EXPECT_EQ(d.incidents[0].slots, (std::vector<int>{3, 4}));
  EXPECT_EQ(d.incidents[0].evicted, std::vector<int>{9});
  EXPECT_EQ(d.decisions, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(d.resolved_by, (std::vector<std::int64_t>{1, 0, 2}));
}

}  // namespace
}  // namespace faultline::sim
