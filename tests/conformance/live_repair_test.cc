// Live mode's repair pipeline: evicted machines checked, returned to the pool, retired.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "tests/conformance/conformance_support.h"

namespace faultline {
namespace {

using namespace conformance;

// ---------------------------------------------------------------- live mode's repair pipeline

std::vector<std::string> notes_of(const fs::path& dir) {
  std::vector<std::string> out;
  std::ifstream in(dir / "events.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    const json r = json::parse(line, nullptr, false);
    if (r.is_object() && r.value("kind", "") == "note") out.push_back(r.value("text", ""));
  }
  return out;
}

int count_with(const std::vector<std::string>& notes, const std::string& part) {
  int n = 0;
  for (const auto& t : notes) n += t.find(part) != std::string::npos;
  return n;
}

// Every 15 s the machine in slot 2 is evicted and a standby takes its place. Machines taken
// out pass their repair check 10 s later and rejoin the pool, so m2 and s0 take turns, until
// each has been taken out retire_after = 3 times and is retired.
TEST(LiveRepair, EvictedMachinesRejoinThePoolAfterTheirCheckAndRetireAfterThreeStrikes) {
  Script s;
  s.start = [](World& w) { w.set_timer(Duration::seconds(1), 1); };
  s.on = [](const Event& e, World& w) {
    if (!std::holds_alternative<TimerFired>(e)) return;
    w.act(EvictMachines{{w.cluster().machine_in(2)}, "drill"});
    w.act(AcquireMachines{AcquireMode::kStandby, {2}, "refill"});
    w.set_timer(Duration::seconds(15), 1);
  };
  const Registry reg = registry();
  Live live(reg);
  live.run(s, 100);
  const auto notes = notes_of(live.dir);
  EXPECT_EQ(count_with(notes, "m2 passed its repair check"), 2);
  EXPECT_EQ(count_with(notes, "s0 passed its repair check"), 2);
  EXPECT_EQ(count_with(notes, "m2 retired: taken out of the job 3 times"), 1);
  EXPECT_EQ(count_with(notes, "s0 retired: taken out of the job 3 times"), 1);
  const json st = live.world->status();
  EXPECT_EQ(st["retired"], json::array({"m2", "s0"}));
  EXPECT_TRUE(st["standby"].empty());
  EXPECT_TRUE(st["slots"][2].is_null()) << "no machine left to fill slot 2";
  // An operator's repair returns a retired machine and clears its strikes.
  EXPECT_TRUE(live.world->repaired(2));
  live.advance(1);
  EXPECT_EQ(live.world->status()["retired"], json::array({"s0"}));
  EXPECT_EQ(live.world->cluster().machine_in(2), 2)
      << "the waiting refill took the repaired machine";
}

// A machine the policy retires (EvictMachines::retire, lemon retirement) gets no repair
// check and never rejoins the pool, whatever its strikes; an operator's repair returns it.
TEST(LiveRepair, AMachineThePolicyRetiresIsNotCheckedAndDoesNotRejoin) {
  Script s;
  s.start = [](World& w) {
    w.act(EvictMachines{{1}, "a lemon", Mechanism::kRealtimeEviction, true});
    w.act(EvictMachines{{2}, "an ordinary eviction", Mechanism::kRealtimeEviction});
  };
  const Registry reg = registry();
  Live live(reg);
  live.run(s, 40);
  const auto notes = notes_of(live.dir);
  EXPECT_EQ(count_with(notes, "m1 retired: the policy retired it (a lemon)"), 1);
  EXPECT_EQ(count_with(notes, "m1 passed its repair check"), 0);
  EXPECT_EQ(count_with(notes, "m2 passed its repair check"), 1);
  const json st = live.world->status();
  EXPECT_EQ(st["retired"], json::array({"m1"}));
  EXPECT_EQ(st["standby"], json::array({"s0", "m2"}));
  EXPECT_TRUE(live.world->repaired(1));
  live.advance(1);
  EXPECT_TRUE(live.world->status()["retired"].empty());
}

// A check that keeps failing (the bit-wise probe without a matching hash) is retried
// max_checks times, then the machine is left to an operator, who returns it.
TEST(LiveRepair, AMachineThatKeepsFailingItsCheckIsLeftToAnOperator) {
  Script s;
  s.start = [](World& w) { w.act(EvictMachines{{1}, "suspect"}); };
  const Registry reg = registry();
  Live live(reg);
  live.probe_hash = "";
  live.run(s, 10 + 3 * 61);
  const auto notes = notes_of(live.dir);
  EXPECT_EQ(count_with(notes, "m1 failed its repair check (bit-wise test failed"), 2)
      << "then retried";
  EXPECT_EQ(count_with(notes, "m1 failed its repair check 3 times"), 1);
  EXPECT_EQ(count_with(notes, "left to an operator"), 1);
  const json st = live.world->status();
  ASSERT_EQ(st["repairing"].size(), 1u);
  EXPECT_EQ(st["repairing"][0]["state"], "left to an operator");
  EXPECT_TRUE(live.world->repaired(1));
  EXPECT_TRUE(live.world->status()["repairing"].empty());
  EXPECT_EQ(live.world->status()["standby"], json::array({"s0", "m1"}));
}

// A standby whose agent was lost leaves the pool, and rejoins once its agent is back and
// it passed its check (it never failed the job: no strike).
TEST(LiveRepair, AStandbyWhoseAgentComesBackRejoinsThePool) {
  Script s;
  s.start = [](World&) {};
  const Registry reg = registry();
  Live live(reg);
  live.run(s, 1);
  live.world->on_agent_lost(4, "connection reset");
  EXPECT_TRUE(live.world->status()["standby"].empty());
  live.advance(30);
  EXPECT_TRUE(live.world->status()["standby"].empty()) << "no check while its agent is away";
  live.world->on_agent_connected(4, live::Auth{});
  live.advance(11);
  EXPECT_EQ(live.world->status()["standby"], json::array({"s0"}));
  EXPECT_EQ(count_with(notes_of(live.dir), "s0 passed its repair check"), 1);
  EXPECT_TRUE(live.world->status()["retired"].empty());
}

// A machine out of the job and out of the pool (evicted, its repair check pending) whose
// agent is lost has nothing for the policy to decide, but the loss happened: the event log
// notes it, as it notes a lost standby's (the storm at 2,000 agents: a rack partitioned
// while one of its machines awaited its check left no trace of that machine at all).
TEST(LiveRepair, AnEvictedMachinesLostAgentIsNotedWithoutAnAlert) {
  Script s;
  s.start = [](World& w) { w.act(EvictMachines{{1}, "drill"}); };
  int alerts = 0;
  s.on = [&](const Event& e, World&) { alerts += std::holds_alternative<InspectionAlert>(e); };
  const Registry reg = registry();
  Live live(reg);
  live.run(s, 1);
  live.world->on_agent_lost(1, "peer closed the connection");
  live.advance(1);
  EXPECT_EQ(count_with(notes_of(live.dir),
                       "agent of m1 lost (peer closed the connection); it is out of the job"),
            1);
  EXPECT_EQ(alerts, 0) << "not the job's machine: nothing to decide";
  live.world->on_agent_connected(1, live::Auth{});
  live.advance(11);
  EXPECT_EQ(count_with(notes_of(live.dir), "m1 passed its repair check"), 1);
}

}  // namespace
}  // namespace faultline
