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
  r.warnings = 201;
  r.warnings_false = 202;
  r.migrations = 203;
  r.migrations_needless = 204;
  std::int64_t at = 300;
  Attributed& a = r.attributed;
  for (std::int64_t* x : {&a.init, &a.inplace_init, &a.requeue, &a.reschedule, &a.standby_wake,
                          &a.on_call, &a.replay, &a.mfu_checkpoint})
    *x = ++at;
  for (auto& x : a.probe) x = ++at;

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
  EXPECT_EQ(d.warnings, 201);
  EXPECT_EQ(d.warnings_false, 202);
  EXPECT_EQ(d.migrations, 203);
  EXPECT_EQ(d.migrations_needless, 204);
  at = 300;
  const Attributed& b = d.attributed;
  for (const std::int64_t* x : {&b.init, &b.inplace_init, &b.requeue, &b.reschedule,
                                &b.standby_wake, &b.on_call, &b.replay, &b.mfu_checkpoint})
    EXPECT_EQ(*x, ++at);
  for (auto x : b.probe) EXPECT_EQ(x, ++at);
  EXPECT_EQ(d.incidents[0].machines, std::vector<int>{8});
  EXPECT_EQ(d.incidents[0].resolution, 2);
  EXPECT_EQ(d.dominant.category, 2);
  // Bit for bit: the same result encodes to the same bytes, and back to them.
  EXPECT_EQ(encode(d), encode(r));
}

// Bytes it did not write (a sweep store's chunk cut short, or of another build) are an
// error, never a read past their end: every prefix, one byte more, a count too large.
TEST(ReplicaResultCodec, BytesItDidNotWriteAreRefused) {
  ReplicaResult r;
  r.categories.resize(2);
  r.timeline.resize(3);
  r.incidents = {{5.5, 1, 6.5, 7.5, {3, 4}, 2, {8}, {9}}};
  r.decisions = {"a decision"};
  r.resolved_by = {1, 2};
  const std::vector<std::uint8_t> bytes = encode(r);
  for (std::size_t n = 0; n < bytes.size(); ++n)
    EXPECT_THROW(decode({bytes.begin(), bytes.begin() + n}), std::runtime_error) << n;
  std::vector<std::uint8_t> longer = bytes;
  longer.push_back(0);
  EXPECT_THROW(decode(longer), std::runtime_error);
  // The decisions' count (8 bytes before the last string's length and text and the
  // resolved_by vector) set to 2^62: refused before anything is allocated for it.
  std::vector<std::uint8_t> huge = bytes;
  const std::size_t tail = 8 + 8 + 10 + 8 + 2 * 8;
  huge[huge.size() - tail + 7] = 0x40;
  EXPECT_THROW(decode(huge), std::runtime_error);
}

}  // namespace
}  // namespace faultline::sim
