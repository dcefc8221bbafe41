// The published worked examples (ByteRobust Fig. 6 and Fig. 7, §6 pool sizes) and the
// localization algorithms against brute force.
#include "policies/localization/localization.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "policies/api/rng.h"
#include "policies/recovery/standby.h"
#include "tests/support/fake_world.h"

namespace faultline::policies {
namespace {

TEST(DualPhaseReplay, Fig6LocatesMachine13InTwoPhases) {
  // 24 machines, m = 4, n = 6, SDC on machine 13.
  ReplayPlan p = dual_phase_plan_mn(4, 6);
  ASSERT_EQ(p.horizontal.size(), 6u);
  ASSERT_EQ(p.vertical.size(), 6u);
  const SlotId faulty = 13;
  int phases = 0, h = -1, v = -1;
  ++phases;  // phase 1: horizontal groups run concurrently
  for (size_t g = 0; g < p.horizontal.size(); ++g)
    for (SlotId x : p.horizontal[g])
      if (x == faulty) h = static_cast<int>(g);
  ++phases;  // phase 2: vertical groups
  for (size_t g = 0; g < p.vertical.size(); ++g)
    for (SlotId x : p.vertical[g])
      if (x == faulty) v = static_cast<int>(g);
  EXPECT_EQ(h, 3);
  EXPECT_EQ(p.horizontal[3], (std::vector<SlotId>{12, 13, 14, 15}));
  EXPECT_EQ(v, 1);
  EXPECT_EQ(p.vertical[1], (std::vector<SlotId>{1, 7, 13, 19}));
  EXPECT_EQ(replay_locate(p, h, v), std::optional<SlotId>(13));
  EXPECT_EQ(phases, 2);
}

TEST(DualPhaseReplay, LocatesEveryMachineUniquelyWhenMAtMostN) {
  for (auto [pp, dp] : std::vector<std::pair<int, int>>{{8, 150}, {4, 16}, {2, 12}, {1, 7}}) {
    const int k = choose_replay_k(pp, dp);
    ReplayPlan p = dual_phase_plan(pp, dp, k);
    ASSERT_LE(p.m, p.n) << pp << "x" << dp;
    for (SlotId x = 0; x < pp * dp; ++x)
      EXPECT_EQ(replay_locate(p, x / p.m, x % p.n), std::optional<SlotId>(x)) << pp << "x" << dp;
  }
  EXPECT_EQ(choose_replay_k(8, 150), 3);  // m = 24 <= n = 50
}

TEST(DualPhaseReplay, TwoFaultyMachinesLeaveAtMostFourCandidates) {
  // Dual-phase replay assumes one faulty machine; with two, each phase has up to two
  // failing groups and the intersections hold both faulty machines among <= 4 candidates.
  const int pp = 8, dp = 150;
  ReplayPlan p = dual_phase_plan(pp, dp, choose_replay_k(pp, dp));
  Rng rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    const SlotId a = static_cast<SlotId>(rng.below(1200));
    SlotId b = a;
    while (b == a) b = static_cast<SlotId>(rng.below(1200));
    std::set<int> hs{a / p.m, b / p.m}, vs{a % p.n, b % p.n};
    std::set<SlotId> candidates;
    for (int h : hs)
      for (int v : vs)
        if (auto x = replay_locate(p, h, v)) candidates.insert(*x);
    EXPECT_TRUE(candidates.count(a) && candidates.count(b));
    EXPECT_LE(candidates.size(), 4u);
  }
}

TEST(StackAggregation, Fig7OverEvictsPipelineGroupOfMachine15) {
  // TP=2, PP=4, DP=4, 16 machines; 15 stuck in all-gather, 14 in isend, 12-13 in irecv,
  // 0-11 waiting in the optimizer's gradient sync.
  ClusterView view(testing::spec16());
  std::vector<std::string> stacks(16, "optimizer.step > all_reduce");
  stacks[15] = "forward > all_gather";
  stacks[14] = "pipeline > isend";
  stacks[12] = stacks[13] = "pipeline > irecv";
  StackVerdict v = aggregate_stacks(stacks);
  EXPECT_EQ(v.dominant, "optimizer.step > all_reduce");
  EXPECT_EQ(v.outliers, (std::vector<SlotId>{12, 13, 14, 15}));
  EXPECT_EQ(over_eviction_set(view, v.outliers), (std::vector<SlotId>{12, 13, 14, 15}));
  // One straggler: its PP group is evicted whole.
  EXPECT_EQ(over_eviction_set(view, {5}), (std::vector<SlotId>{4, 5, 6, 7}));
  // Outliers in one stage of two pipelines: the DP group holds them.
  EXPECT_EQ(over_eviction_set(view, {1, 9}), (std::vector<SlotId>{1, 5, 9, 13}));
  // Scattered: union of their pipeline groups.
  EXPECT_EQ(over_eviction_set(view, {0, 6}).size(), 8u);
}

// Interned signatures (what the simulator and live mode deliver) against the plain
// definition on strings: group by string equality, the largest group dominant (ties: the
// signature first in string order), empty signatures ignored.
TEST(StackAggregation, InternedSignaturesAgreeWithGroupingStrings) {
  auto by_strings = [](const std::vector<std::string>& by_slot) {
    std::map<std::string, int> count;
    for (const auto& s : by_slot)
      if (!s.empty()) ++count[s];
    StackVerdict v;
    int best = 0;
    for (const auto& [sig, n] : count)
      if (n > best) best = n, v.dominant = sig;
    for (SlotId s = 0; s < static_cast<SlotId>(by_slot.size()); ++s)
      if (!by_slot[s].empty() && by_slot[s] != v.dominant) v.outliers.push_back(s);
    return v;
  };
  const std::vector<std::string> pool = {"", "b > wait", "a > gemm", "c > isend",
                                         "a > gemm (slow)"};
  Rng rng(17);
  int ties = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    const int slots = 1 + static_cast<int>(rng.below(24));
    const int kinds = 1 + static_cast<int>(rng.below(pool.size()));
    std::vector<std::string> by_slot;
    for (int s = 0; s < slots; ++s) by_slot.push_back(pool[rng.below(kinds)]);
    const StackVerdict want = by_strings(by_slot);
    // Stored sparsely: filled with "" and every slot set; filled with any signature (a
    // minority one too, so most slots are outliers) and set in a shuffled order; or built
    // from the strings (the most common fills).
    for (int variant = 0; variant < 3; ++variant) {
      // Interned in a shuffled order, so index order is not string order.
      StackSignatures interned;
      for (int i = static_cast<int>(pool.size()) - 1; i >= 0; --i)
        interned.intern(pool[(i * 3 + trial) % pool.size()]);
      if (variant == 2) {
        interned = StackSignatures(by_slot);
      } else {
        interned.assign(by_slot.size(),
                        variant == 0 ? 0 : interned.intern(pool[rng.below(pool.size())]));
        for (std::size_t k = 0; k < by_slot.size(); ++k) {
          const std::size_t s =
              variant == 0 ? k : (k * 7 + static_cast<std::size_t>(trial)) % by_slot.size();
          if (variant == 1 && by_slot.size() % 7 == 0) {  // 7 divides: fall back to order
            interned.set(k, interned.intern(by_slot[k]));
            continue;
          }
          interned.set(s, interned.intern(by_slot[s]));
        }
      }
      ASSERT_EQ(interned.strings(), by_slot) << "variant " << variant;
      const StackVerdict got = aggregate_stacks(interned);
      ASSERT_EQ(got.dominant, want.dominant) << "trial " << trial << " variant " << variant;
      ASSERT_EQ(got.outliers, want.outliers) << "trial " << trial << " variant " << variant;
      for (std::size_t s = 0; s < by_slot.size(); ++s) ASSERT_EQ(interned.at(s), by_slot[s]);
    }
    std::map<std::string, int> count;
    for (const auto& s : by_slot)
      if (!s.empty()) ++count[s];
    int top = 0, at_top = 0;
    for (const auto& [sig, n] : count) top = std::max(top, n);
    for (const auto& [sig, n] : count) at_top += n == top;
    ties += at_top > 1;
  }
  EXPECT_GT(ties, 50) << "the trials must exercise tie-breaking";
}

TEST(StandbyPool, P99SizesMatchPublishedTwoTwoThreeFour) {
  // ByteRobust §6: 2, 2, 3, 4 standbys for 128, 256, 512, 1,024 machines.
  EXPECT_EQ(binomial_quantile(128, 1.2e-3, 0.99), 2);
  EXPECT_EQ(binomial_quantile(256, 1.2e-3, 0.99), 2);
  EXPECT_EQ(binomial_quantile(512, 1.2e-3, 0.99), 3);
  EXPECT_EQ(binomial_quantile(1024, 1.2e-3, 0.99), 4);
  // Against a direct sum for a small case.
  double cdf = 0;
  int k = 0;
  for (; k <= 10; ++k) {
    cdf += binomial_pmf(10, 0.3, k);
    if (cdf >= 0.9) break;
  }
  EXPECT_EQ(binomial_quantile(10, 0.3, 0.9), k);
  EXPECT_NEAR(binomial_pmf(10, 0.3, 3), 120 * 0.027 * 0.0823543, 1e-12);
}

TEST(Bisection, FindsOneToThreeFaultyAmong1200InAtMostElevenRounds) {
  Rng rng(3);
  for (int faulty_count : {1, 2, 3}) {
    for (int trial = 0; trial < 20; ++trial) {
      std::set<SlotId> bad;
      while (static_cast<int>(bad.size()) < faulty_count)
        bad.insert(static_cast<SlotId>(rng.below(1200)));
      BisectionResult r = bisect(1200, [&](const std::vector<SlotId>& g) {
        for (SlotId s : g)
          if (bad.count(s)) return true;
        return false;
      });
      EXPECT_EQ(std::set<SlotId>(r.found.begin(), r.found.end()), bad);
      // The depth of the leaf in the halving tree: floor or ceil of log2(1200).
      EXPECT_GE(r.rounds, 10);
      EXPECT_LE(r.rounds, 11);
      EXPECT_LE(r.tests, 2 * faulty_count * 11);
    }
  }
}

}  // namespace
}  // namespace faultline::policies
