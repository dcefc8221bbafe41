// Probes across machines in LiveWorld (PROTOCOL.md, "Probes across machines"): the rendezvous
// blob relayed from rank 0, grouped probes timed per group, and what is refused.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "tests/conformance/conformance_support.h"

namespace faultline {
namespace {

using namespace conformance;

// inter_all_gather with a probe_bin (PROTOCOL.md, "Probes across machines"): the NCCL id that
// rank 0's agent sends is relayed once, to the other machines of that probe only, each with its
// own probe request; a blob from another machine, for no running probe, or a second one is
// refused and relays nothing. A machine whose probe did not join is the one that fails.
TEST(LiveWorldBelief, ARendezvousBlobIsRelayedOnceFromRankZeroOfARunningProbeOnly) {
  RunningLive r;
  r.live.config.probe_bin = "/nonexistent/faultline-probe";
  auto& sent = r.live.link.sent;
  sent.clear();
  const ActionId id = r.live.world->act(
      RunProbe{ProbeKind::kInterAllGather, {1, 2, 3}, Duration::seconds(30), "t"});
  std::map<MachineId, json> probes;
  for (const auto& [m, msg] : sent)
    if (msg.value("type", "") == "probe") probes[m] = msg;
  sent.clear();
  ASSERT_EQ(probes.size(), 3u);
  for (const auto& [m, msg] : probes) EXPECT_EQ(msg.value("rendezvous", false), true) << m;
  EXPECT_EQ(probes[1]["rank"], 0);
  auto blob = [](const json& req) {
    return json{{"type", "rendezvous"}, {"probe_req", req}, {"blob", "00ff"}};
  };
  r.send(2, blob(probes[2]["req"]));  // rank 1 publishing
  r.send(1, blob(999999));            // no such probe
  r.send(1, blob(probes[2]["req"]));  // another machine's probe
  EXPECT_TRUE(sent.empty()) << sent.front().second.dump();
  EXPECT_EQ(r.refused.size(), 3u);
  EXPECT_TRUE(
      r.was_refused("rendezvous: probe_req: 999999 is not a running inter_all_gather probe of this "
                    "machine as rank 0"));
  r.send(1, blob(probes[1]["req"]));
  ASSERT_EQ(sent.size(), 2u);
  for (const auto& [m, msg] : sent) {
    EXPECT_EQ(msg.value("type", ""), "rendezvous");
    EXPECT_EQ(msg["probe_req"], probes[m]["req"]) << "each agent hears of its own probe";
    EXPECT_EQ(msg["blob"], "00ff");
  }
  EXPECT_EQ(sent[0].first, 2);
  EXPECT_EQ(sent[1].first, 3);
  r.send(1, blob(probes[1]["req"]));
  EXPECT_TRUE(r.was_refused("already published its blob"));
  EXPECT_EQ(sent.size(), 2u);
  // m3's probe never joined (killed at the deadline): it alone fails; m1 and m2 waited for it.
  r.send(1, {{"type", "done"},
             {"req", probes[1]["req"]},
             {"ok", false},
             {"rendezvous", "ok"},
             {"detail", "x"}});
  r.send(2, {{"type", "done"},
             {"req", probes[2]["req"]},
             {"ok", false},
             {"rendezvous", "ok"},
             {"detail", "x"}});
  r.send(3, {{"type", "done"},
             {"req", probes[3]["req"]},
             {"ok", false},
             {"timed_out", true},
             {"rendezvous", "not_reached"},
             {"detail", "killed at the deadline"}});
  r.advance(0.2);
  const auto results = seen<ProbeResult>();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].action, id);
  EXPECT_EQ(results[0].failed, MachineSet({3}));
  // After the probe, its rank 0 can publish nothing more.
  r.send(1, blob(probes[1]["req"]));
  EXPECT_TRUE(
      r.was_refused("rendezvous: probe_req: " + probes[1]["req"].dump() + " is not a running"));
}

// Without rank 0's id nobody can join: its machine is the one that fails, not the ranks that
// timed out waiting for it.
TEST(LiveWorldBelief, WhenRankZeroNeverPublishesItsMachineAloneFailsTheRelayedProbe) {
  RunningLive r;
  r.live.config.probe_bin = "/nonexistent/faultline-probe";
  auto& sent = r.live.link.sent;
  sent.clear();
  r.live.world->act(RunProbe{ProbeKind::kInterAllGather, {1, 2}, Duration::seconds(30), "t"});
  std::map<MachineId, json> probes;
  for (const auto& [m, msg] : sent) probes[m] = msg;
  sent.clear();
  ASSERT_EQ(probes.size(), 2u);
  r.send(1, {{"type", "done"},
             {"req", probes[1]["req"]},
             {"ok", false},
             {"timed_out", true},
             {"rendezvous", "not_reached"},
             {"detail", "killed at the deadline"}});
  r.send(2, {{"type", "done"},
             {"req", probes[2]["req"]},
             {"ok", false},
             {"timed_out", true},
             {"rendezvous", "timed_out"},
             {"detail", "deadline_exceeded"}});
  r.advance(0.2);
  const auto results = seen<ProbeResult>();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].failed, MachineSet({1}));
}

// DLRover's pairwise node check: each group is its own all-gather, all at once, with ranks,
// rank 0 and master port of its own, and its own relay; each is timed from the sending to its
// last reply, and a failed group lists all its machines.
// A group whose machines all report their all-gather's own time (collective_s) is timed by
// the slowest of them, the process start left out, as the simulator times pairs; a group
// where one did not is timed from the sending to its last reply. A collective_s that is not
// a number in [0, 1e6] is refused with its reply.
// Acts a grouped inter_all_gather on {m1, m2} and {m3, s0}, with a probe program so that the
// test answers the probes (not the agents' side of the pump); the probe message each machine
// got, and the action's id.
std::map<MachineId, json> grouped_probe(RunningLive& r, ActionId* id = nullptr) {
  r.live.config.probe_bin = "/nonexistent/faultline-probe";
  auto& sent = r.live.link.sent;
  sent.clear();
  RunProbe probe{ProbeKind::kInterAllGather, {}, Duration::seconds(30), "pairs"};
  probe.groups = {{1, 2}, {3, 4}};  // m1 m2, then m3 and the standby s0
  const ActionId a = r.live.world->act(probe);
  if (id) *id = a;
  std::map<MachineId, json> probes;
  for (const auto& [m, msg] : sent)
    if (msg.value("type", "") == "probe") probes[m] = msg;
  sent.clear();
  return probes;
}

TEST(LiveWorldBelief, AGroupIsTimedByItsCollectiveWhenEveryMachineReportsIt) {
  RunningLive r;
  std::map<MachineId, json> probes = grouped_probe(r);
  ASSERT_EQ(probes.size(), 4u);
  r.advance(1.5);
  r.send(1, {{"type", "done"}, {"req", probes[1]["req"]}, {"ok", true}, {"collective_s", 0.010}});
  r.send(2, {{"type", "done"}, {"req", probes[2]["req"]}, {"ok", true}, {"collective_s", 0.013}});
  r.send(3, {{"type", "done"}, {"req", probes[3]["req"]}, {"ok", true}, {"collective_s", -1}});
  EXPECT_TRUE(r.was_refused("collective_s: expected a number in [0, 1e+06]"));
  r.send(3, {{"type", "done"}, {"req", probes[3]["req"]}, {"ok", true}, {"collective_s", 0.011}});
  r.send(4, {{"type", "done"}, {"req", probes[4]["req"]}, {"ok", true}});
  r.advance(0.2);
  const auto results = seen<ProbeResult>();
  ASSERT_EQ(results.size(), 1u);
  ASSERT_EQ(results[0].group_seconds.size(), 2u);
  EXPECT_DOUBLE_EQ(results[0].group_seconds[0], 0.013);
  EXPECT_NEAR(results[0].group_seconds[1], 1.5, 0.11) << "s0 said nothing of its collective";
  EXPECT_EQ(results[0].group_failed, std::vector<bool>({false, false}));
}

TEST(LiveWorldBelief, AGroupedProbeRunsOneRendezvousPerGroupAndTimesEach) {
  RunningLive r;
  auto& sent = r.live.link.sent;
  ActionId id = 0;
  std::map<MachineId, json> probes = grouped_probe(r, &id);
  ASSERT_EQ(probes.size(), 4u);
  for (const auto& [m, msg] : probes) {
    EXPECT_EQ(msg["test"], "inter_all_gather") << m;
    EXPECT_EQ(msg["world_size"], 2) << m;
    EXPECT_EQ(msg["master_addr"], "127.0.0.1") << m;
    EXPECT_EQ(msg.value("rendezvous", false), true) << m;
  }
  EXPECT_EQ(probes[1]["rank"], 0);
  EXPECT_EQ(probes[2]["rank"], 1);
  EXPECT_EQ(probes[3]["rank"], 0);
  EXPECT_EQ(probes[4]["rank"], 1);
  EXPECT_EQ(probes[1]["master_port"], probes[2]["master_port"]);
  EXPECT_EQ(probes[3]["master_port"], probes[4]["master_port"]);
  EXPECT_NE(probes[1]["master_port"], probes[3]["master_port"])
      << "both rank 0s listen on one host";
  // Group 1's rank 0 publishes to group 1 only.
  r.send(3, {{"type", "rendezvous"}, {"probe_req", probes[3]["req"]}, {"blob", "00ff"}});
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].first, 4);
  EXPECT_EQ(sent[0].second["probe_req"], probes[4]["req"]);
  sent.clear();
  EXPECT_TRUE(r.refused.empty());
  // Group 0 passes at once; group 1 fails two seconds later, s0 never having joined.
  r.send(1, {{"type", "done"}, {"req", probes[1]["req"]}, {"ok", true}});
  r.send(2, {{"type", "done"}, {"req", probes[2]["req"]}, {"ok", true}});
  r.advance(2);
  EXPECT_TRUE(seen<ProbeResult>().empty()) << "one result, once every group is done";
  r.send(3, {{"type", "done"},
             {"req", probes[3]["req"]},
             {"ok", false},
             {"rendezvous", "ok"},
             {"detail", "x"}});
  r.send(4, {{"type", "done"},
             {"req", probes[4]["req"]},
             {"ok", false},
             {"rendezvous", "not_reached"},
             {"detail", "crashed"}});
  r.advance(0.2);
  const auto results = seen<ProbeResult>();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].action, id);
  EXPECT_EQ(results[0].test, ProbeKind::kInterAllGather);
  EXPECT_EQ(results[0].group_failed, std::vector<bool>({false, true}));
  ASSERT_EQ(results[0].group_seconds.size(), 2u);
  EXPECT_NEAR(results[0].group_seconds[0], 0, 1e-9);
  EXPECT_NEAR(results[0].group_seconds[1], 2, 0.11);
  EXPECT_EQ(results[0].failed, MachineSet({3, 4})) << "the whole failed group";
  EXPECT_FALSE(results[0].timed_out);
  EXPECT_TRUE(seen<ActionFailed>().empty());
  // The journal's outcome times each group and keeps what its agents said.
  std::string detail;
  std::ifstream in(r.live.dir / "events.jsonl");
  for (std::string line; std::getline(in, line);) {
    const json e = json::parse(line, nullptr, false);
    if (e.is_object() && e.value("kind", "") == "outcome" && e.value("id", ActionId{0}) == id)
      detail = e.value("detail", "");
  }
  EXPECT_NE(
      detail.find("inter_all_gather per group: g0 0.00s ok, g1 2.00s failed (m3: x; s0: crashed"),
      std::string::npos)
      << detail;
  EXPECT_NE(detail.find("rendezvous: s0 did not join"), std::string::npos) << detail;
}

// Groups only for inter_all_gather, of two machines or more, each machine in one group: else
// ActionFailed, and no agent hears of it.
TEST(LiveWorldBelief, AGroupedProbeIsRefusedForAnotherTestASingleMachineOrAMachineTwice) {
  RunningLive r;
  auto& sent = r.live.link.sent;
  sent.clear();
  const auto refused = [&](ProbeKind test, std::vector<MachineSet> groups, const std::string& why) {
    RunProbe probe{test, {1, 2}, Duration::seconds(30), "t"};
    probe.groups = std::move(groups);
    const ActionId id = r.live.world->act(probe);
    r.advance(0.1);
    std::string reason;
    EXPECT_TRUE(failed(id, &reason)) << why;
    EXPECT_NE(reason.find(why), std::string::npos) << reason;
    EXPECT_TRUE(sent.empty()) << sent.front().second.dump();
  };
  refused(ProbeKind::kGpuDiag, {{1, 2}}, "groups: only inter_all_gather runs per group");
  refused(ProbeKind::kInterAllGather, {{1, 2}, {3}},
          "groups[1]: a group needs at least two machines");
  refused(ProbeKind::kInterAllGather, {{1, 2}, {2, 3}},
          "groups[1]: machine 2 is in groups[0] already");
  refused(ProbeKind::kInterAllGather, {{1, 99}}, "groups[0]: machine 99 is not in the fleet");
  EXPECT_TRUE(seen<ProbeResult>().empty());
}

}  // namespace
}  // namespace faultline
