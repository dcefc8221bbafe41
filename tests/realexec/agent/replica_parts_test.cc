// The replica groups' parts of LiveWorld (realexec/controller/): ReplicaSet, Quorums,
// Migrations and ReplicaGroups, each tested alone.
#include <gtest/gtest.h>

#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "realexec/controller/agent_requests.h"
#include "realexec/controller/incident_ledger.h"
#include "realexec/controller/journal.h"
#include "realexec/controller/migrations.h"
#include "realexec/controller/quorums.h"
#include "realexec/controller/rank_generation.h"
#include "realexec/controller/replica_groups.h"
#include "realexec/controller/replica_set.h"
#include "realexec/net/reactor.h"
#include "tests/realexec/agent/live_world_parts_fakes.h"

namespace faultline::live {
namespace {

// Migrations over a 2-replica job (machines 0 and 1) and one parked standby (machine 2): the
// world's turns recorded.
struct MigrationRig {
  Reactor reactor{ManualClock{}};
  FakeLink link;
  AgentRequests requests{reactor, link};
  ReplicaSet replicas{reactor};
  Journal journal{"/nonexistent/journal.json"};
  LiveConfig config = [] {
    LiveConfig c = config_of({"m0", "m1", "s0"});
    c.job.replica_groups = true;
    c.job.master_port = 29500;
    return c;
  }();
  ClusterView cluster{dp_job(2, 1)};
  MachineSet avoid;
  bool running = true;
  std::vector<std::string> notes, refused, outcomes;
  std::vector<Event> delivered;
  MachineSet taken_out;
  Quorums quorums{{config, cluster, replicas, journal, requests, link,
                   [this](std::string_view t) { notes.emplace_back(t); }, [] {}}};
  Migrations migrations{
      {config, cluster, reactor, link, requests, replicas, quorums, journal, avoid,
       [this] { return reactor.now(); }, [this] { return running; }, [] { return false; },
       [this](std::string_view t) { notes.emplace_back(t); },
       [this](ActionId id, bool ok, const std::string& d, Instant) {
         outcomes.push_back(std::to_string(id) + (ok ? " ok: " : " failed: ") + d);
       },
       [this](ActionId id, const std::string& why, Instant) {
         refused.push_back(std::to_string(id) + ": " + why);
       },
       [this](Event e) { delivered.push_back(std::move(e)); }, [] {},
       [this](MachineId m) { taken_out.push_back(m); }}};
  MigrationRig() { replicas.launch_all(2); }
};

TEST(Quorums, AQuorumFormsOnTheLowestMemberNotJoiningAndGoesToEveryOtherMember) {
  MigrationRig r;
  const Quorum q = r.quorums.of(4, {0});
  EXPECT_EQ(q.members, (std::vector<std::int64_t>{0, 1}));
  EXPECT_EQ(q.store, "host-m1:29502");  // replica 1's machine, master_port + 1 + 1
  EXPECT_EQ(r.quorums.next({}).number, 1);
  EXPECT_EQ(r.journal.state().replica_quorum, 1);
  EXPECT_EQ(r.quorums.current().number, 1);
  r.link.down.insert(1);
  r.quorums.send(q, 0);  // neither the one excepted nor a machine not connected
  EXPECT_TRUE(r.link.sent.empty());
  r.link.down.clear();
  r.quorums.send(q);
  ASSERT_EQ(r.link.sent.size(), 2u);
  EXPECT_EQ(r.link.sent[0].second["quorum"]["store"], "host-m1:29502");
  EXPECT_EQ(r.notes.size(), 2u);  // each sending noted
  EXPECT_EQ(r.quorums.launch_field(q)["count"], 2);
}

TEST(Quorums, ALaunchOfOneReplicaIsItsRankInTheCurrentGenerationStartingInTheQuorumGiven) {
  MigrationRig r;
  r.journal.state().gen = 3;
  r.journal.state().version = "v2";
  r.journal.state().ckpt_every = 5;
  const Quorum q = r.quorums.of(4, {});
  const nlohmann::json launch = r.quorums.launch_one(1, q);
  EXPECT_EQ(launch["type"], "launch");
  EXPECT_EQ(launch["gen"], 3);
  EXPECT_EQ(launch["version"], "v2");
  EXPECT_EQ(launch["ranks"], nlohmann::json::parse(R"([{"rank": 1, "local_rank": 0}])"));
  EXPECT_EQ(launch["world_size"], 2);
  EXPECT_EQ(launch["master_addr"], "host-m0");  // slot 0's machine
  EXPECT_EQ(launch["master_port"], 29500);
  EXPECT_EQ(launch["ckpt_every"], 5);
  EXPECT_EQ(launch["replicas"], r.quorums.launch_field(q));
}

MigrateMachines migrate(MachineId m) {
  MigrateMachines a;
  a.machines = {m};
  a.reason = "warned";
  return a;
}

TEST(Migrations, AJoinerOnTheStandbyTakesTheSlotOnceItWaitsAndEndsAtItsStart) {
  MigrationRig r;
  r.migrations.start(7, migrate(1), at_s(0));
  ASSERT_TRUE(r.migrations.under_way());
  ASSERT_EQ(r.link.sent.size(), 1u);
  EXPECT_EQ(r.link.sent[0].first, 2);  // the parked standby
  const nlohmann::json& launch = r.link.sent[0].second;
  EXPECT_EQ(launch["type"], "launch");
  EXPECT_EQ(launch["ranks"][0]["rank"], 1);
  EXPECT_EQ(launch["replicas"]["quorum"]["members"], nlohmann::json::array({0}));  // without it
  EXPECT_TRUE(r.cluster.standby().empty());
  r.migrations.start(8, migrate(0), at_s(0));
  ASSERT_EQ(r.refused.size(), 1u);
  EXPECT_EQ(r.refused[0], "8: a migration is under way");
  RankReport waiting;
  waiting.type = "waiting";
  EXPECT_TRUE(r.migrations.report(2, 1, waiting));  // the swap
  EXPECT_EQ(r.cluster.machine_in(1), 2);
  EXPECT_EQ(r.cluster.health(1), Health::kEvicted);
  const auto& quorum = r.link.sent[r.link.sent.size() - 2];  // to the joiner, now replica 1
  EXPECT_EQ(quorum.first, 2);
  EXPECT_EQ(quorum.second["type"], "quorum");
  EXPECT_EQ(quorum.second["quorum"]["join"], nlohmann::json::array({1}));
  EXPECT_EQ(quorum.second["quorum"]["quorum"], 1);
  EXPECT_EQ(r.taken_out, (MachineSet{1}));
  EXPECT_EQ(r.link.sent.back().first, 1);  // the old process killed
  EXPECT_EQ(r.link.sent.back().second["type"], "kill");
  RankReport step;
  step.type = "step";
  EXPECT_FALSE(r.migrations.report(2, 1, step));  // its steps are the replica's
  RankReport started;
  started.type = "started";
  started.step = 5;
  EXPECT_TRUE(r.migrations.report(2, 1, started));
  EXPECT_FALSE(r.migrations.under_way());
  ASSERT_EQ(r.outcomes.size(), 1u);
  EXPECT_EQ(r.outcomes[0].rfind("7 ok: replica 1 moved from m1 to s0 at step 5", 0), 0u)
      << r.outcomes[0];
  ASSERT_EQ(r.delivered.size(), 1u);
  EXPECT_TRUE(std::holds_alternative<MachinesReady>(r.delivered[0]));
}

TEST(Migrations, AJoinerThatExitsBeforeTheSwapFailsItAndTheStandbyReturns) {
  MigrationRig r;
  r.migrations.start(7, migrate(1), at_s(0));
  AgentExit exit;
  exit.rank = 1;
  exit.gen = r.journal.state().gen;
  exit.code = 3;
  EXPECT_TRUE(r.migrations.exit(2, exit));
  EXPECT_FALSE(r.migrations.under_way());
  EXPECT_EQ(r.cluster.standby(), (MachineSet{2}));
  ASSERT_EQ(r.refused.size(), 1u);
  EXPECT_EQ(r.refused[0], "7: migration of replica 1: the joiner on s0 exited (code 3)");
}

TEST(ReplicaSet, ALaunchFormsAQuorumOfEveryReplica) {
  Reactor reactor{ManualClock{}};
  ReplicaSet rs(reactor);
  EXPECT_FALSE(rs.enabled().has_value());
  rs.launch_all(4);
  EXPECT_EQ(rs.members(), (std::set<std::int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(rs.live(), 4);
  EXPECT_EQ(rs.step_rank(), 0);
  EXPECT_TRUE(rs.drop(0));
  EXPECT_FALSE(rs.drop(0));
  EXPECT_EQ(rs.step_rank(), 1);
  rs.rejoin(0, 9, at_s(5));
  EXPECT_TRUE(rs.joining(0));
  EXPECT_EQ(rs.joiner(0), 9u);
  EXPECT_FALSE(rs.was_launched(0));
  rs.launched(0);
  rs.admit(0);              // it waits: the next quorum admits it
  EXPECT_EQ(rs.live(), 3);  // a joiner does not train yet
  EXPECT_EQ(rs.step_rank(), 1);
  EXPECT_EQ(rs.joined(0), 9u);
  EXPECT_EQ(rs.live(), 4);
  EXPECT_EQ(rs.take_rejoin(9), at_s(5));
  EXPECT_FALSE(rs.take_rejoin(9).has_value());  // its outcome is given once
}

TEST(ReplicaSet, AFailedQuorumNotesEachMembersStepOnTheFirstSaying) {
  Reactor reactor{ManualClock{}};
  ReplicaSet rs(reactor);
  rs.launch_all(3);
  const auto step_of = [](std::int64_t r) { return 100 + r; };
  EXPECT_TRUE(rs.say_failed(5, 1, step_of));
  EXPECT_FALSE(rs.say_failed(5, 1, step_of));  // said again
  EXPECT_FALSE(rs.say_failed(5, 2, step_of));  // not the first
  EXPECT_EQ(rs.step_when_failed(0), 100);
  EXPECT_EQ(rs.step_when_failed(2), 102);
  EXPECT_TRUE(rs.say_failed(4, 0, step_of));
  EXPECT_EQ(rs.take_said(5), (std::set<std::int64_t>{1, 2}));
  EXPECT_TRUE(rs.take_said(4).empty());  // earlier quorums are forgotten with it
  EXPECT_FALSE(rs.take_changed());
  rs.quorum_changed();
  EXPECT_TRUE(rs.take_changed());
  EXPECT_FALSE(rs.take_changed());
  rs.add_share(1.5);
  rs.add_share(0.5);
  EXPECT_DOUBLE_EQ(rs.share_pending(), 2.0);
  EXPECT_DOUBLE_EQ(rs.take_share(), 2.0);
  EXPECT_DOUBLE_EQ(rs.share_pending(), 0.0);
  EXPECT_EQ(rs.disbelieve(), 1u);
}

// ReplicaGroups over a 2-replica job (machines 0 and 1, no standby): the world's turns recorded.
struct ReplicaGroupsRig {
  Reactor reactor{ManualClock{}};
  FakeLink link;
  AgentRequests requests{reactor, link};
  Journal journal{"/nonexistent/journal.json"};
  LiveConfig config = [] {
    LiveConfig c = config_of({"m0", "m1"});
    c.job.replica_groups = true;
    c.job.master_port = 29500;
    return c;
  }();
  ClusterView cluster{dp_job(2, 0)};
  RankGeneration ranks;
  IncidentLedger incidents;
  bool running = true;
  int saves = 0;
  std::vector<std::string> notes, refused, outcomes, stopped;
  std::vector<Event> delivered;
  ReplicaGroups groups{{config, cluster, reactor, link, requests, journal, ranks, incidents,
                        [this] { return reactor.now(); }, [this] { return running; },
                        [] { return false; }, [this](std::string_view t) { notes.emplace_back(t); },
                        [this](ActionId id, bool ok, const std::string& d, Instant) {
                          outcomes.push_back(std::to_string(id) + (ok ? " ok: " : " failed: ") + d);
                        },
                        [this](ActionId id, const std::string& why, Instant) {
                          refused.push_back(std::to_string(id) + ": " + why);
                        },
                        [this](Event e) { delivered.push_back(std::move(e)); }, [this] { ++saves; },
                        [this](MachineId m, std::int64_t rank, int code, const std::string& why) {
                          stopped.push_back(std::to_string(m) + "/" + std::to_string(rank) + "/" +
                                            std::to_string(code) + ": " + why);
                        }}};
  void enable(int min_replicas) {
    EnableReplicaGroups a;
    a.min_replicas = min_replicas;
    groups.enable(1, a, at_s(0));
  }
};

RankReport report(const char* type, std::optional<std::int64_t> quorum = std::nullopt) {
  RankReport r;
  r.type = type;
  r.quorum = quorum;
  return r;
}

TEST(ReplicaGroups, AnExitDropsAReplicaAndARejoinBringsItBackOnceItStarts) {
  ReplicaGroupsRig r;
  EXPECT_FALSE(r.groups.exit(1, 1, 3, "boom"));  // not enabled: the job stops
  r.enable(1);
  EXPECT_EQ(r.outcomes.back(), "1 ok: 2 replicas, the job stops below 1");
  EXPECT_EQ(r.groups.launch_all().number, 1);
  EXPECT_EQ(r.groups.set().members(), (std::set<std::int64_t>{0, 1}));
  EXPECT_TRUE(r.groups.exit(1, 1, 3, "boom"));
  EXPECT_EQ(r.groups.set().members(), (std::set<std::int64_t>{0}));
  ASSERT_EQ(r.delivered.size(), 1u);
  ASSERT_TRUE(std::holds_alternative<ReplicaDropped>(r.delivered[0]));
  EXPECT_EQ(std::get<ReplicaDropped>(r.delivered[0]).live, 1);
  ASSERT_NE(r.incidents.open_replica(1), nullptr);
  EXPECT_EQ(r.incidents.open_replica(1)->cause, "replica 1 on m1 dropped out: boom");
  EXPECT_EQ(r.journal.state().replica_quorum, 2);
  ASSERT_FALSE(r.link.sent.empty());
  EXPECT_EQ(r.link.sent.back().first, 0);  // the quorum without it, to the member left
  EXPECT_EQ(r.link.sent.back().second["quorum"]["members"], nlohmann::json::array({0}));
  EXPECT_TRUE(r.groups.exit(1, 1, 137, "echo"));  // out already: the echo of its drop
  EXPECT_EQ(r.delivered.size(), 1u);

  RejoinReplica rejoin;
  rejoin.replica = 1;
  rejoin.reason = "retry";
  r.groups.rejoin(9, rejoin, at_s(1));
  EXPECT_EQ(r.link.sent.back().first, 1);
  EXPECT_EQ(r.link.sent.back().second["type"], "launch");
  EXPECT_TRUE(r.groups.report(1, 1, report("waiting", 2)));  // the next quorum admits it
  EXPECT_EQ(r.journal.state().replica_quorum, 3);
  EXPECT_EQ(r.link.sent.back().second["quorum"]["join"], nlohmann::json::array({1}));
  EXPECT_TRUE(r.groups.report(1, 1, report("quorum", 9)));  // beyond the latest: refused
  EXPECT_NE(r.notes.back().find("refused a quorum report of replica 1 on m1"), std::string::npos);
  RankReport started = report("started");
  started.step = 5;
  EXPECT_TRUE(r.groups.report(1, 1, started));
  EXPECT_EQ(r.outcomes.back().rfind("9 ok: replica 1 on m1 trains again from step 5", 0), 0u)
      << r.outcomes.back();
  EXPECT_TRUE(std::holds_alternative<ReplicaRejoined>(r.delivered.back()));
  EXPECT_EQ(r.incidents.open_replica(1), nullptr);
  EXPECT_EQ(r.groups.status()["live"], 2);
  EXPECT_TRUE(r.refused.empty());
  EXPECT_TRUE(r.stopped.empty());
}

TEST(ReplicaGroups, ASilentMemberIsJudgedHungAndBelowTheMinimumTheJobStops) {
  ReplicaGroupsRig r;
  r.enable(2);
  r.groups.launch_all();
  EXPECT_FALSE(r.groups.exit(1, 1, 3, "boom"));  // 1 left, below 2: the job stops
  EXPECT_FALSE(r.groups.evict({1}, "lost"));
  EXPECT_TRUE(r.groups.report(0, 0, report("quorum_failed", 1)));
  r.link.sent.clear();
  r.reactor.advance_to(at_s(5));  // the grace passes; replica 1 said nothing and trained on not
  ASSERT_EQ(r.stopped.size(), 1u);
  EXPECT_EQ(r.stopped[0].rfind("1/1/124: hang: no answer in quorum 1's collectives", 0), 0u)
      << r.stopped[0];
  ASSERT_EQ(r.link.sent.size(), 1u);  // its process killed
  EXPECT_EQ(r.link.sent[0].first, 1);
  EXPECT_EQ(r.link.sent[0].second["type"], "kill");
}

}  // namespace
}  // namespace faultline::live
