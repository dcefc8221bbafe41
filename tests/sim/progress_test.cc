// The closed-form progress model against a brute-force reference that walks the job
// one small tick at a time.
#include "sim/progress.h"

#include <gtest/gtest.h>

#include <cmath>

#include "policies/api/rng.h"

namespace faultline::sim {
namespace {

// Reference: explicit state machine stepped in ticks of `tick` ns.
struct Reference {
  std::int64_t interval, blocking;
  double rate;
  double seg = 0, ckpt = 0, committed = 0;
  Breakdown b{};
  bool in_ckpt = false;
  void run(std::int64_t dt, std::int64_t tick) {
    for (std::int64_t t = 0; t < dt; t += tick) {
      const std::int64_t step = std::min(tick, dt - t);
      if (!in_ckpt) {
        seg += step * rate;
        b.productive += static_cast<std::int64_t>(step * rate);
        b.degraded += step - static_cast<std::int64_t>(step * rate);
        if (seg >= interval) {
          in_ckpt = blocking > 0;
          if (!in_ckpt) {
            committed += seg;
            seg = 0;
          }
        }
      } else {
        ckpt += step;
        b.checkpoint += step;
        if (ckpt >= blocking) {
          committed += seg;
          seg = 0;
          ckpt = 0;
          in_ckpt = false;
        }
      }
    }
  }
};

TEST(ProgressModel, MatchesTickByTickReferenceAcrossManyCheckpoints) {
  Rng rng(42);
  for (int trial = 0; trial < 40; ++trial) {
    const std::int64_t tick = 1000;  // 1 us ticks; durations are multiples of the tick
    const std::int64_t interval = (1 + rng.below(50)) * 10 * tick;
    const std::int64_t blocking = rng.below(4) * 7 * tick;
    ProgressModel m;
    m.set_plan(interval, blocking);
    Reference ref{interval, blocking, 1.0};
    Breakdown b;
    std::int64_t at = 0;
    for (int k = 0; k < 5; ++k) {
      const std::int64_t dt = (1 + rng.below(3000)) * tick;
      m.run(at, dt, b);
      ref.run(dt, tick);
      at += dt;
      ASSERT_EQ(b.checkpoint, ref.b.checkpoint) << "trial " << trial;
      ASSERT_EQ(m.committed_ns(), static_cast<std::int64_t>(ref.committed)) << "trial " << trial;
      ASSERT_EQ(m.pending_ns(), static_cast<std::int64_t>(ref.seg)) << "trial " << trial;
    }
    EXPECT_EQ(b.total(), at);
  }
}

// wall_to_gain is run()'s inverse: running for it gains the progress asked (and a couple
// of ns less does not), through warm-ups, pauses, open checkpoint blocks and slowdowns.
TEST(ProgressModel, WallToGainIsTheInverseOfRun) {
  Rng rng({3, 4});
  for (int trial = 0; trial < 2000; ++trial) {
    ProgressModel p;
    const std::int64_t interval =
        trial % 5 == 0 ? 0 : 1 + static_cast<std::int64_t>(rng.below(5'000'000'000));
    p.set_plan(interval, trial % 3 == 0 ? 0 : static_cast<std::int64_t>(rng.below(300'000'000)));
    p.set_rate(trial % 4 == 0 ? 1.0 : 0.2 + 0.8 * rng.uniform());
    Breakdown b;
    p.run(0, static_cast<std::int64_t>(rng.below(20'000'000'000)), b);
    if (trial % 2) p.start_warmup(static_cast<std::int64_t>(rng.below(3'000'000'000)));
    if (trial % 7 == 0) p.pause(static_cast<std::int64_t>(rng.below(1'000'000'000)));
    const std::int64_t need = 1 + static_cast<std::int64_t>(rng.below(50'000'000'000));
    const std::int64_t w = p.wall_to_gain(need);
    ProgressModel q = p, r = p;
    Breakdown bq = b, br = b;
    q.run(0, w, bq);
    EXPECT_GE(bq.productive - b.productive, need) << "trial " << trial;
    // Tight up to rounding: a step of 1/rate ns less falls short.
    r.run(0, w - static_cast<std::int64_t>(std::ceil(2 / p.rate())), br);
    EXPECT_LT(br.productive - b.productive, need) << "trial " << trial;
  }
}

TEST(ProgressModel, LoseMovesUncommittedProgressToRecompute) {
  ProgressModel m;
  m.set_plan(100, 10);
  Breakdown b;
  m.run(0, 250, b);  // 100 train, 10 ckpt, 100 train, 10 ckpt, 30 train
  EXPECT_EQ(m.committed_ns(), 200);
  EXPECT_EQ(m.pending_ns(), 30);
  m.lose(b);
  EXPECT_EQ(b.recompute, 30);
  EXPECT_EQ(b.productive, 200);
  EXPECT_EQ(b.checkpoint, 20);
  EXPECT_EQ(b.total(), 250);
}

TEST(ProgressModel, SlowdownSplitsWallTimeIntoProgressAndDegraded) {
  ProgressModel m;
  m.set_plan(0, 0);  // no checkpoints
  m.set_rate(0.5);
  Breakdown b;
  m.run(0, 1000, b);
  EXPECT_EQ(b.productive, 500);
  EXPECT_EQ(b.degraded, 500);
}

// Replica groups: a slow machine (rate 1/2) and half the replicas missing (factor 1/2): a
// quarter of the wall time is progress; the slowdown takes half of it (degraded), the
// missing replicas half of what is left; a quorum change pauses before either.
TEST(ProgressModel, MissingReplicasTakeTheirShareOfWhatTheSlowdownLeft) {
  ProgressModel m;
  m.set_plan(0, 0);
  m.set_rate(0.5);
  m.set_replica_factor(0.5);
  EXPECT_EQ(m.speed(), 0.25);
  Breakdown b;
  m.run(0, 1000, b);
  EXPECT_EQ(b.productive, 250);
  EXPECT_EQ(b.degraded, 500);
  EXPECT_EQ(b.missing_replicas, 250);
  m.pause_quorum(100);
  m.set_rate(1);
  m.run(1000, 300, b);  // 100 paused, then 200 at 1/2
  EXPECT_EQ(b.missing_replicas, 250 + 100 + 100);
  EXPECT_EQ(b.productive, 350);
  EXPECT_EQ(b.total(), 1300);
  // Across checkpoint cycles, in closed form, the buckets still add up and the missing
  // replicas' share is the same.
  ProgressModel c;
  c.set_plan(1000, 100);
  c.set_replica_factor(0.75);
  Breakdown bc;
  c.run(0, 1'000'000, bc);
  EXPECT_EQ(bc.total(), 1'000'000);
  EXPECT_EQ(bc.degraded, 0);
  EXPECT_NEAR(static_cast<double>(bc.missing_replicas) / bc.productive, 1.0 / 3, 1e-3);
  ProgressModel fresh;  // and wall_to_gain inverts run at the lower speed
  fresh.set_plan(1000, 100);
  fresh.set_replica_factor(0.75);
  EXPECT_EQ(fresh.wall_to_gain(750), 1000);
  EXPECT_EQ(fresh.wall_to_gain(1500), 1334 + 100 + 667);  // each leg rounded up
}

// After a restart the first `warmup` of running makes no progress; the checkpoint
// cycle starts after it; a stop ends it, and the next start begins a new one.
TEST(ProgressModel, WarmupRunsBeforeProgressAndEndsWithAStop) {
  ProgressModel m;
  m.set_plan(100, 10);
  Breakdown b;
  m.start_warmup(70);
  m.run(0, 50, b);  // all warm-up
  EXPECT_EQ(b.warmup, 50);
  EXPECT_EQ(b.productive, 0);
  m.run(50, 150, b);  // 20 warm-up, 100 train, 10 ckpt, 20 train
  EXPECT_EQ(b.warmup, 70);
  EXPECT_EQ(m.committed_ns(), 100);
  EXPECT_EQ(m.pending_ns(), 20);
  EXPECT_EQ(b.checkpoint, 10);
  EXPECT_EQ(b.total(), 200);
  m.start_warmup(40);
  m.run(200, 30, b);  // a fault 30 into the warm-up
  m.lose(b);
  EXPECT_EQ(b.warmup, 100);
  EXPECT_EQ(b.recompute, 20);
  m.run(230, 40, b);  // no warm-up left after the stop: training again
  EXPECT_EQ(b.warmup, 100);
  EXPECT_EQ(m.pending_ns(), 40);
  EXPECT_EQ(b.total(), 270);
}

// A workaround's pause (MitigateSlowdown): no progress, accounted as degraded, after a
// warm-up still under way; then training at the new rate; a stop ends a pause.
TEST(ProgressModel, APauseMakesNoProgressAndCountsAsDegraded) {
  ProgressModel m;
  m.set_plan(100, 10);
  Breakdown b;
  m.start_warmup(20);
  m.pause(30);
  m.set_rate(0.5);
  m.run(0, 40, b);  // 20 warm-up, 20 of the pause
  EXPECT_EQ(b.warmup, 20);
  EXPECT_EQ(b.degraded, 20);
  EXPECT_EQ(m.pending_ns(), 0);
  m.run(40, 50, b);  // 10 more pause, 40 at half speed: 20 trained, 20 degraded
  EXPECT_EQ(b.degraded, 50);
  EXPECT_EQ(m.pending_ns(), 20);
  EXPECT_EQ(b.total(), 90);
  m.pause(100);
  m.run(90, 10, b);
  m.lose(b);
  m.run(100, 10, b);  // the stop ended the pause
  EXPECT_EQ(m.pending_ns(), 5);
  EXPECT_EQ(b.total(), 110);
}

TEST(ProgressModel, FailureDuringCheckpointLosesTheWholeSegment) {
  ProgressModel m;
  m.set_plan(100, 50);
  Breakdown b;
  m.run(0, 120, b);  // 100 trained, 20 of 50 checkpoint
  EXPECT_EQ(m.committed_ns(), 0);
  m.lose(b);
  EXPECT_EQ(b.recompute, 100);
  EXPECT_EQ(b.checkpoint, 20);
}

TEST(ProgressModel, TimelineSegmentsAreTrimmedByLostProgress) {
  ProgressModel m;
  m.set_record_segments(true);
  m.set_plan(100, 0);
  Breakdown b;
  m.run(0, 150, b);
  m.lose(b);  // 50 lost
  ASSERT_EQ(m.segments().size(), 1u);
  EXPECT_EQ(m.segments()[0].end, 100);
}

}  // namespace
}  // namespace faultline::sim
