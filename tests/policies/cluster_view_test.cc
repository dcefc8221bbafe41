#include "policies/api/cluster_view.h"

#include <gtest/gtest.h>

#include <set>

#include "policies/api/rng.h"

namespace faultline {
namespace {

ClusterSpec fig7() {
  // ByteRobust Fig. 7: TP=2, PP=4, DP=4 on 16 machines of 2 GPUs.
  ClusterSpec c;
  c.machines = 16;
  c.gpus_per_machine = 2;
  c.rack_size = 4;
  c.tp = 2;
  c.pp = 4;
  c.dp = 4;
  return c;
}

TEST(ClusterView, PpGroupIsConsecutiveMachinesOfOnePipeline) {
  ClusterView v(fig7());
  EXPECT_EQ(v.pp_group(15), (std::vector<SlotId>{12, 13, 14, 15}));
  EXPECT_EQ(v.pp_group(0), (std::vector<SlotId>{0, 1, 2, 3}));
  EXPECT_EQ(v.pp_group_index(13), 3);
}

TEST(ClusterView, DpGroupHoldsOneStageOfEveryReplica) {
  ClusterView v(fig7());
  EXPECT_EQ(v.dp_group(13), (std::vector<SlotId>{1, 5, 9, 13}));
}

TEST(ClusterView, MachinesHoldingSeveralTensorGroupsSpanStages) {
  // TP=2 on 8-GPU machines: each machine holds 4 consecutive stages of one replica.
  ClusterSpec c;
  c.machines = 4;
  c.gpus_per_machine = 8;
  c.tp = 2;
  c.pp = 8;
  c.dp = 2;
  ClusterView v(c);
  EXPECT_EQ(v.pp_group(0), (std::vector<SlotId>{0, 1}));
  EXPECT_EQ(v.pp_group(3), (std::vector<SlotId>{2, 3}));
  EXPECT_EQ(v.dp_group(0), (std::vector<SlotId>{0, 2}));
}

TEST(ClusterView, TopologyGraphHasOneVertexPerSwitchAndMachine) {
  ClusterSpec c = fig7();
  c.racks_per_pod = 2;
  c.spines = 2;
  c.storage_hosts = 3;
  ClusterView v(c);
  // 16 machines + 4 ToRs + 2 leaves + 2 spines + 3 storage.
  EXPECT_EQ(boost::num_vertices(v.graph()), 27u);
  // 16 NIC edges + 4 ToR uplinks + 2x2 leaf-spine + 3 storage.
  EXPECT_EQ(boost::num_edges(v.graph()), 27u);
  EXPECT_EQ(v.rack_slots(3), (std::vector<SlotId>{12, 13, 14, 15}));
}

TEST(ClusterView, ReplacementTakesTheSlotAndVacateEmptiesIt) {
  ClusterView v(fig7());
  const MachineId m = v.add_machine();
  v.place(m, 5);
  EXPECT_EQ(v.machine_in(5), m);
  EXPECT_EQ(v.slot_of(5), -1);
  EXPECT_EQ(v.slot_of(m), 5);
  v.vacate(5);
  EXPECT_EQ(v.machine_in(5), kNoMachine);
  EXPECT_EQ(v.slot_of(m), -1);
}

// NVLink domains: one NVSwitch vertex per domain, linked to its machines only, at the
// NVLink bandwidth; the job's machines start in their slot's domain, machines added later
// (replacements, standbys) in none until the backend says where they are.
TEST(ClusterView, NvlinkDomainsAreALevelOfTheGraphAndEveryMachineKnowsItsDomain) {
  ClusterSpec c;
  c.machines = 32;
  c.gpus_per_machine = 4;
  c.rack_size = 16;
  c.tp = 8;
  c.pp = 4;
  c.dp = 4;
  c.nvlink_domain = 16;
  c.nvlink_gbps = 28800;
  ClusterView v(c);
  EXPECT_EQ(v.nvlink_domains(), 2);
  EXPECT_EQ(v.tp_span(), 2);
  int switches = 0;
  const auto& g = v.graph();
  for (auto [it, end] = boost::vertices(g); it != end; ++it) {
    if (g[*it].kind != NodeKind::kNvSwitch) continue;
    ++switches;
    std::set<int> members;
    for (auto [e, eend] = boost::out_edges(*it, g); e != eend; ++e) {
      const auto other = boost::target(*e, g);
      ASSERT_EQ(g[other].kind, NodeKind::kMachine);
      members.insert(g[other].index);
      EXPECT_DOUBLE_EQ(g[*e].bandwidth_bps, 28800e9 / 8);
    }
    EXPECT_EQ(members.size(), 16u);
    for (int m : members) EXPECT_EQ(m / 16, g[*it].index);
  }
  EXPECT_EQ(switches, 2);
  for (SlotId s = 0; s < 32; ++s) {
    EXPECT_EQ(v.domain_of(v.machine_in(s)), s / 16);
    EXPECT_TRUE(v.in_own_domain(s));
  }
  const MachineId spare = v.add_machine();
  EXPECT_EQ(v.domain_of(spare), -1);
  v.place(spare, 3);
  EXPECT_FALSE(v.in_own_domain(3)) << "a machine from outside the domain";
  v.set_domain(spare, 0);
  EXPECT_TRUE(v.in_own_domain(3));
  v.vacate(3);
  EXPECT_FALSE(v.in_own_domain(3)) << "an empty slot is in no domain";
  // Without NVLink domains (HGX): no NVSwitch level.
  ClusterView h(fig7());
  for (auto [it, end] = boost::vertices(h.graph()); it != end; ++it)
    EXPECT_NE(h.graph()[*it].kind, NodeKind::kNvSwitch);
}

}  // namespace
}  // namespace faultline

namespace faultline {
namespace {

// The count of empty slots is kept as machines move (the simulator asks it on every start,
// where a scan of 25,000 slots took a fifth of the time); it always equals a scan.
TEST(ClusterView, EmptySlotCountFollowsEveryPlaceAndVacate) {
  ClusterSpec spec;
  spec.machines = 12;
  spec.standby_machines = 3;
  ClusterView v(spec);
  auto scan = [&] {
    int n = 0;
    for (SlotId s = 0; s < v.slots(); ++s) n += v.machine_in(s) == kNoMachine;
    return n;
  };
  EXPECT_EQ(v.empty_slot_count(), 0);
  Rng rng(7);
  for (int step = 0; step < 2000; ++step) {
    const SlotId s = static_cast<SlotId>(rng.below(static_cast<std::uint64_t>(v.slots())));
    if (rng.uniform() < 0.4)
      v.vacate(s);
    else
      v.place(static_cast<MachineId>(rng.below(static_cast<std::uint64_t>(v.machine_count()))),
              s);  // may move a placed one
    ASSERT_EQ(v.empty_slot_count(), scan()) << "step " << step;
  }
}

// The group queries against their definition from ranks (rank = t + TP*(p + PP*d), GPUs
// per machine consecutive ranks per slot), for layouts with TP equal to, below and above
// the GPUs per machine (a TP group across the machines of an NVLink domain, as on GB200
// NVL72 trays of 4 GPUs): the fast paths and the general one must agree with it.
TEST(ClusterView, GroupsMatchTheirDefinitionFromRanks) {
  struct Layout {
    int machines, gpm, tp, pp, dp, domain = 1;
  };
  for (const Layout l :
       {Layout{24, 8, 8, 4, 6}, Layout{16, 2, 2, 4, 4}, Layout{12, 8, 4, 2, 12},
        Layout{16, 4, 1, 8, 8}, Layout{12, 8, 2, 3, 16}, Layout{8, 8, 8, 1, 8},
        Layout{16, 4, 8, 2, 4, 4}, Layout{32, 4, 16, 2, 4, 16}, Layout{12, 2, 6, 2, 2, 6}}) {
    ClusterSpec c;
    c.machines = l.machines;
    c.gpus_per_machine = l.gpm;
    c.tp = l.tp;
    c.pp = l.pp;
    c.dp = l.dp;
    c.nvlink_domain = l.domain;
    ASSERT_EQ(static_cast<long>(l.tp) * l.pp * l.dp, static_cast<long>(l.machines) * l.gpm);
    ClusterView v(c);
    const long ranks = static_cast<long>(l.machines) * l.gpm;
    for (SlotId s = 0; s < l.machines; ++s) {
      std::set<long> ds, ps;
      for (long r = s * l.gpm; r < (s + 1) * l.gpm; ++r) {
        ps.insert((r / l.tp) % l.pp);
        ds.insert(r / (static_cast<long>(l.tp) * l.pp));
      }
      std::set<SlotId> pp_want, dp_want, tp_want;
      std::set<long> tps;  // the TP groups (rank / tp) of the slot's ranks
      for (long r = s * l.gpm; r < (s + 1) * l.gpm; ++r) tps.insert(r / l.tp);
      for (long r = 0; r < ranks; ++r) {
        if (ds.count(r / (static_cast<long>(l.tp) * l.pp)))
          pp_want.insert(static_cast<SlotId>(r / l.gpm));
        if (ps.count((r / l.tp) % l.pp)) dp_want.insert(static_cast<SlotId>(r / l.gpm));
        if (tps.count(r / l.tp)) tp_want.insert(static_cast<SlotId>(r / l.gpm));
      }
      EXPECT_EQ(v.tp_group(s), std::vector<SlotId>(tp_want.begin(), tp_want.end()))
          << "slot " << s << " of layout tp=" << l.tp << " gpm=" << l.gpm;
      for (SlotId x : tp_want)
        EXPECT_EQ(v.domain_of_slot(x), v.domain_of_slot(s)) << "a TP group in one domain";
      EXPECT_EQ(v.pp_group(s), std::vector<SlotId>(pp_want.begin(), pp_want.end()))
          << "slot " << s << " of layout tp=" << l.tp << " gpm=" << l.gpm;
      EXPECT_EQ(v.dp_group(s), std::vector<SlotId>(dp_want.begin(), dp_want.end()))
          << "slot " << s << " of layout tp=" << l.tp << " gpm=" << l.gpm;
    }
  }
}

}  // namespace
}  // namespace faultline
