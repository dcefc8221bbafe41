// SimWorld's parts on their own: the event queue and timers, the symptom model's ledger and
// streams, the fleet's bad machines, the transfers, the replica groups' quorum and the
// job's fresh slots.
// The golden decision logs check them inside SimWorld; these pin what each promises.
#include <gtest/gtest.h>

#include <cstdlib>
#include <simgrid/s4u.hpp>
#include <string>
#include <vector>

#include "policies/api/cluster_view.h"
#include "sim/batches.h"
#include "sim/event_queue.h"
#include "sim/fleet.h"
#include "sim/job.h"
#include "sim/network.h"
#include "sim/replica_groups.h"
#include "sim/symptom_model.h"

namespace faultline::sim {
namespace {

TEST(EventQueue, PopsByTimeThenByPushOrder) {
  EventQueue<std::string> q;
  q.push(20, "c");
  q.push(10, "a");
  q.push(20, "d");
  q.push(10, "b");
  std::string order;
  std::vector<std::uint64_t> seqs;
  while (!q.empty()) {
    auto item = q.pop();
    order += item.payload;
    seqs.push_back(item.seq);
  }
  EXPECT_EQ(order, "abcd");
  EXPECT_EQ(seqs, (std::vector<std::uint64_t>{1, 3, 0, 2}));
}

TEST(EventQueue, ReusesThePayloadSlotsOfPoppedItems) {
  EventQueue<int> q;
  for (int round = 0; round < 100; ++round) {
    q.push(round, int{round});
    q.push(round, round + 1);
    ASSERT_EQ(q.next_at(), round);
    EXPECT_EQ(q.pop().payload, round);
    EXPECT_EQ(q.pop().payload, round + 1);
  }
  EXPECT_EQ(q.slots(), 2u);
}

TEST(Timers, CountFromOneAndStayCancelled) {
  Timers t;
  const TimerId a = t.add(), b = t.add();
  EXPECT_EQ(a, 1u);
  EXPECT_EQ(b, 2u);
  t.cancel(a);
  t.cancel(99);  // never handed out: nothing
  EXPECT_TRUE(t.cancelled(a));
  EXPECT_FALSE(t.cancelled(b));
  t.cancel_all();
  EXPECT_TRUE(t.cancelled(b));
  EXPECT_FALSE(t.cancelled(t.add()));  // a later timer is live
}

scenarios::Scenario two_categories() {
  scenarios::Scenario sc;
  sc.seed = 7;
  scenarios::FaultCategory hw;
  hw.name = "hw";
  hw.rate_per_machine_day = 0.01;
  hw.scope = scenarios::FaultScope::kMachine;
  scenarios::FaultCategory job = hw;
  job.name = "job";
  job.scope = scenarios::FaultScope::kJob;
  sc.faults = {hw, job};
  sc.repair.bad_fraction = 0.2;
  sc.repair.bad_rate_factor = 5;
  return sc;
}

TEST(SymptomModel, ThinsOnlyMachineScopeHardwareOfABadMachineModel) {
  const scenarios::Scenario sc = two_categories();
  const SymptomModel m(sc, 0);
  const double k = 5 / (1 - 0.2 + 0.2 * 5);
  EXPECT_DOUBLE_EQ(m.thin(0), k);
  EXPECT_DOUBLE_EQ(m.thin(1), 1);
  const auto cats = SymptomModel::arrival_categories(sc);
  EXPECT_DOUBLE_EQ(cats[0].rate_per_machine_day, 0.01 * k);
  EXPECT_DOUBLE_EQ(cats[1].rate_per_machine_day, 0.01);
}

TEST(SymptomModel, EachFaultPurposeAndUseHasItsOwnStream) {
  const scenarios::Scenario sc = two_categories();
  SymptomModel a(sc, 3), b(sc, 3);
  Fault f;
  f.key = a.next_key();
  Fault g = f;
  // The same fault, purpose and use draw the same in two models (common random numbers),
  // whatever else either drew in between.
  const double first = a.rng(f, SymptomModel::kAttribution).uniform();
  (void)b.rng(g, SymptomModel::kCoverage).uniform();
  EXPECT_EQ(b.rng(g, SymptomModel::kAttribution).uniform(), first);
  // The second use of a purpose is another draw.
  EXPECT_NE(a.rng(f, SymptomModel::kAttribution).uniform(), first);
  EXPECT_EQ(f.uses[SymptomModel::kAttribution], 2);
  EXPECT_EQ(a.next_key(), 1u);
}

TEST(SymptomModel, TheFirstOutcomeStaysAndLeavesThePendingList) {
  const scenarios::Scenario sc = two_categories();
  SymptomModel m(sc, 0);
  m.faults().resize(2);
  m.faults()[1].id = 1;
  m.pending() = {0, 1};
  m.settle(m.faults()[1], Outcome::kCaught);
  m.settle(m.faults()[1], Outcome::kLeft);
  EXPECT_EQ(m.faults()[1].outcome, Outcome::kCaught);
  EXPECT_EQ(m.pending(), (std::vector<FaultId>{0}));
}

TEST(Fleet, BadMachinesAreDrawnFromTheirOwnStreamsAndCured) {
  scenarios::Scenario sc = two_categories();
  sc.repair.bad_fraction = 0.5;
  Fleet a(sc, 1, 64, 1), b(sc, 1, 64, 1);
  int bad = 0;
  // Asked in another order, each machine is the same.
  for (MachineId m = 63; m >= 0; --m) bad += b.is_bad(m, 0);
  for (MachineId m = 0; m < 64; ++m) EXPECT_EQ(a.is_bad(m, 0), b.is_bad(m, 0)) << m;
  EXPECT_GT(bad, 10);
  EXPECT_LT(bad, 54);
  EXPECT_FALSE(a.is_bad(64, 0));  // not tracked
  for (MachineId m = 0; m < 64; ++m)
    if (a.is_bad(m, 0)) {
      a.cure(m, 0);
      EXPECT_FALSE(a.is_bad(m, 0));
      EXPECT_EQ(a.cures_of[m], 1u);
      break;
    }
}

TEST(Fleet, SparesComeFromTheNvlinkDomainsWhenTheyLeaveTraysFree) {
  scenarios::Scenario sc;
  sc.cluster.machines = 100;
  Fleet plain(sc, 0, 100, 4);
  EXPECT_EQ(plain.spares_left, 5);  // 4.8% of the job's machines
  sc.cluster.nvlink_spares = 2;
  Fleet trays(sc, 0, 100, 4);
  EXPECT_EQ(trays.spares_left, 8);
  EXPECT_EQ(trays.domain_free, (std::vector<int>{2, 2, 2, 2}));
  EXPECT_EQ(trays.broken.size(), 100u);
  EXPECT_FALSE(trays.waiting_for_machines());
  trays.wants.push_back({0, -1});  // a standby refill: the job does not wait
  EXPECT_FALSE(trays.waiting_for_machines());
  trays.wants.push_back({1, 3});
  EXPECT_TRUE(trays.waiting_for_machines());
}

// On an idle network a batch's time is the closed form and it holds the network; one that
// shares it runs in SimGrid, and the replica's wait ends at its completion.
TEST(Batches, AnIdleNetworkIsMemoisedAndASharedOneRunsInSimGrid) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto body = [] {
    ClusterSpec spec;
    spec.machines = 16;
    spec.rack_size = 8;
    spec.storage_hosts = 2;
    ClusterView view(spec);
    Platform platform(view);
    FlowNet flows(platform);
    const std::vector<Transfer> a{{platform.storage_host(0), platform.slot_host(1), 1e9}};
    const std::vector<Transfer> b{{platform.storage_host(1), platform.slot_host(9), 2e9}};
    bool ok = true;
    simgrid::s4u::Actor::create("replica", platform.control_host(), [&] {
      Batches batches(platform, flows);
      batches.begin();
      std::uint64_t hold = 0;
      const std::int64_t d = batches.run(a, FlowNet::key_of(a), 0, &hold, [](std::int64_t) {});
      ok = ok && d == flows.fluid_duration(a) && hold == 1 && !batches.real_under_way();
      std::int64_t ended = -1;
      std::uint64_t unused = 0;
      const std::int64_t r =
          batches.run(b, FlowNet::key_of(b), 0, &unused, [&](std::int64_t at) { ended = at; });
      ok = ok && r == -1 && batches.real_under_way();
      batches.end_hold(hold);
      ok = ok && batches.wait(1'000'000'000'000) && ended > 0 && !batches.real_under_way();
      ok = ok && batches.real_batches() == 1 && batches.cached_batches() == 1;
      std::fprintf(stderr, "memoised %lld ns, SimGrid ended at %lld ns\n",
                   static_cast<long long>(d), static_cast<long long>(ended));
      batches.end();
    });
    platform.engine().run();
    std::exit(ok ? 0 : 1);
  };
  EXPECT_EXIT(body(), ::testing::ExitedWithCode(0), "SimGrid ended at");
}

TEST(ReplicaGroupsQuorum, KeepTheQuorumAndItsProgressFactor) {
  ReplicaGroups g;
  g.enable(4, 2, -5, 1000);
  EXPECT_EQ(g.quorum_change, 0);  // negative pauses are none
  EXPECT_DOUBLE_EQ(g.factor(0.9), 1.0);
  g.rejoins[7] = {1, 0};
  g.drop(1);
  g.drop(1);  // already out: counted once
  EXPECT_EQ(g.out, 1);
  EXPECT_TRUE(g.rejoins.empty());
  EXPECT_DOUBLE_EQ(g.factor(0.9), 0.9 * 3 / 4);
  EXPECT_TRUE(g.can_lose_one());
  g.drop(2);
  EXPECT_FALSE(g.can_lose_one());  // one more would leave 1 < 2
  g.back(2);
  EXPECT_EQ(g.live(), 3);
  g.hung = 5;
  g.all_back();
  EXPECT_EQ(g.out, 0);
  EXPECT_FALSE(g.hung.has_value());
  EXPECT_EQ(g.state, (std::vector<std::uint8_t>(4, ReplicaGroups::kLive)));
}

TEST(Job, CountsFreshSlotsOnceAndRestartsSlotZeroWithoutThem) {
  Job j(8);
  EXPECT_EQ(j.restarted_slots(), (std::vector<SlotId>{0}));
  j.mark_fresh(5);
  j.mark_fresh(2);
  j.mark_fresh(5);
  EXPECT_EQ(j.fresh_slots, (std::vector<SlotId>{5, 2}));
  EXPECT_EQ(j.restarted_slots(), (std::vector<SlotId>{2, 5}));
  EXPECT_FALSE(j.computing());
  j.state = JobState::kRunning;
  EXPECT_TRUE(j.computing());
  j.stuck = true;
  EXPECT_FALSE(j.computing());
  EXPECT_EQ(j.next_timed("StartJob"), 0u);
  EXPECT_EQ(j.next_timed("StartJob"), 1u);
}

}  // namespace
}  // namespace faultline::sim
