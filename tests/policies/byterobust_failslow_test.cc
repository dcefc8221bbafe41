// The byterobust stack's fail-slow ladder against FakeWorld.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/policies/byterobust_fixtures.h"

namespace faultline {
namespace {

using namespace byterobust_test;

// The fail-slow ladder inside the stack: a straggler the MFU rounds place is tolerated
// until the ski-rental break-even, then worked around; a backend that refuses the
// workaround (live mode) gets the over-eviction instead, and a straggler that recovers
// is forgotten.
void place_straggler(Harness& h, SlotId slot) {
  std::vector<std::string> stacks(
      16, "train_step > optimizer.step > all_reduce(grads) > ncclKernel wait");
  stacks[slot] = "train_step > forward > transformer_layer > gemm";
  for (int round = 0; round < 5; ++round) {
    ASSERT_TRUE(std::holds_alternative<CaptureStacks>(h.w.actions.back()));
    h.p->on_event(StacksCaptured{h.w.last_action_id(), StackSignatures(stacks)}, h.w);
    if (round < 4) h.at(h.w.now().to_seconds() + 10);  // the next round's timer
  }
}

TEST(ByteRobustFailSlow, TheLadderWorksAroundAStragglerAndFallsBackToEvictionWhenRefused) {
  Harness h({{"failslow", 1}});
  h.slowed();  // 1.3x, reported at 300 s
  const double since = h.w.now().to_seconds();
  place_straggler(h, 6);
  EXPECT_TRUE(h.w.all<EvictMachines>().empty());
  EXPECT_TRUE(h.w.all<MitigateSlowdown>().empty());  // tolerated until the break-even
  // 16 micro-batches over 4 replicas: one moves to each of three others, 16/17.
  const double l0 = 1 - 1 / 1.3, l1 = 1 - 16.0 / 17;
  const double t1 = since + 30 / (l0 - l1);
  h.at(t1 - 0.001);
  EXPECT_TRUE(h.w.all<MitigateSlowdown>().empty());
  h.at(t1);
  auto m = h.w.all<MitigateSlowdown>();
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].slot, 6);
  EXPECT_EQ(m[0].how, Mitigation::kRebalance);
  // Refused (live mode): back to tolerating, and the reconfiguration (16/17 here too) is
  // next, at its break-even from the detection; refused as well, eviction is the only move
  // left, at C3 / l0: the two-option ski rental.
  h.p->on_event(ActionFailed{h.w.last_action_id(), "live mode cannot rebalance a running job"},
                h.w);
  EXPECT_TRUE(h.w.all<EvictMachines>().empty());
  h.at(since + 180 / (l0 - l1));
  m = h.w.all<MitigateSlowdown>();
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[1].how, Mitigation::kReconfigure);
  h.p->on_event(ActionFailed{h.w.last_action_id(), "live mode cannot reconfigure a running job"},
                h.w);
  EXPECT_TRUE(h.w.all<EvictMachines>().empty());
  const double t3 = since + 1200 / l0;
  h.at(t3 - 0.001);
  EXPECT_TRUE(h.w.all<EvictMachines>().empty());
  h.at(t3);
  auto ev = h.w.all<EvictMachines>();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].mechanism, Mechanism::kOverEviction);
  EXPECT_EQ(ev[0].machines, (MachineSet{4, 5, 6, 7}));  // slot 6's pipeline
  EXPECT_EQ(h.w.all<MitigateSlowdown>().size(), 2u);
  // The next straggler is offered neither again: tolerated, then evicted at C3 / l0.
  h.p->on_event(MachinesReady{h.w.last_action_id(), {}}, h.w);
  h.started(0);
  h.slowed();
  const double since2 = h.w.now().to_seconds();
  place_straggler(h, 9);
  h.at(since2 + 1200 / l0);
  EXPECT_EQ(h.w.all<MitigateSlowdown>().size(), 2u);
  ASSERT_EQ(h.w.all<EvictMachines>().size(), 2u);
  EXPECT_EQ(h.w.all<EvictMachines>()[1].machines, (MachineSet{8, 9, 10, 11}));
}

TEST(ByteRobustFailSlow, AStragglerThatRecoversIsForgotten) {
  Harness h({{"failslow", 1}});
  h.slowed();
  place_straggler(h, 9);
  sample(h.w, *h.p, 500, 1.0);  // steps back at the healthy 1 s
  h.at(1e5);
  EXPECT_TRUE(h.w.all<MitigateSlowdown>().empty());
  EXPECT_TRUE(h.w.all<EvictMachines>().empty());
  // The default module evicts at once, as before.
  Harness d;
  d.slowed();
  place_straggler(d, 9);
  ASSERT_EQ(d.w.all<EvictMachines>().size(), 1u);
  EXPECT_TRUE(d.w.all<MitigateSlowdown>().empty());
}

// A rebalanced straggler's steps (16/17 of full speed here) are what the detector then
// sees as normal, so after a restart undoes the rebalance its ratio understates the
// straggler (1.3 / 1.0625 = 1.22). Judged against that, the rebalanced steps looked
// healthy and the ladder forgot a straggler that was still there, for good: it must
// measure against the fastest steps the job ran, resume, and evict at the break-even.
TEST(ByteRobustFailSlow, AStragglerBackAfterARestartIsStillJudgedAgainstHealthySteps) {
  Harness h({{"failslow", 1}});
  const double rebalanced = 17.0 / 16;
  h.slowed();
  place_straggler(h, 6);
  h.at(1000);
  ASSERT_EQ(h.w.all<MitigateSlowdown>().size(), 1u);
  for (int i = 0; i < 3; ++i)
    sample(h.w, *h.p, 900 + i, rebalanced);  // the detector's baseline moves
  h.at(5000);
  h.p->on_event(ProcessExit{kNoMachine, 1, "OSError: [Errno 5] Input/output error"}, h.w);
  h.started(1000);  // the restart undoes the rebalance: 1.3 s steps again
  h.slowed();
  place_straggler(h, 6);
  auto m = h.w.all<MitigateSlowdown>();
  ASSERT_EQ(m.size(), 2u);  // resumed at the level reached, applied again at once
  EXPECT_EQ(m[1].how, Mitigation::kRebalance);
  sample(h.w, *h.p, 1500, rebalanced);
  h.at(h.w.now().to_seconds() + 1e5);
  auto ev = h.w.all<EvictMachines>();
  ASSERT_EQ(ev.size(), 1u) << "the straggler was forgotten while still slow";
  EXPECT_EQ(ev[0].mechanism, Mechanism::kOverEviction);
}

}  // namespace
}  // namespace faultline
