// What LiveWorld believes of what its agents and its journal tell it: run time across
// restarts, reports only from the machine that runs the rank, steps it cannot have reached,
// which exit is an incident's cause.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/conformance/conformance_support.h"

namespace faultline {
namespace {

using namespace conformance;

// Issue 37, item 4: the journal's time origin was a CLOCK_MONOTONIC value, so a controller
// restarted after a reboot or on another host reported negative run time (ETTR 0%, negative
// event times that `sim replay` rejects). The origin is on the wall clock now; run time
// never goes back, even when the new host's wall clock is behind.
TEST(LiveWorldBelief, RunTimeSurvivesARebootAndAFailover) {
  const std::int64_t second = 1000000000;
  {
    RunningLive r;
    Restarted after(r, [&](json& j) {
      // Written on another boot: its origin is on the wall clock (the monotonic origin_ns of
      // format 1 is no key of format 2, and the journal refuses keys it does not write).
      j["origin_unix_ns"] = live::wall_now_ns() - 100 * second;
      j["last_t_ns"] = 0;
    });
    EXPECT_NEAR(after.world->now().to_seconds(), 100, 2);
  }
  {
    RunningLive r;
    Restarted behind(r, [&](json& j) {
      j["origin_unix_ns"] = live::wall_now_ns() - 100 * second;
      j["last_t_ns"] = 1000 * second;  // the host that wrote it was 900 s ahead
    });
    EXPECT_NEAR(behind.world->now().to_seconds(), 1000, 1e-6);
  }
}

// Issue 52: on a host whose wall clock is behind, the first restart continued from the
// journal's run time, but the origin stayed on the clock that was ahead: every later restart
// on that host found the clock behind again and dropped its downtime (ETTR 110%).
TEST(LiveWorldBelief, RestartsOnAClockThatIsBehindKeepTheirDowntime) {
  const std::int64_t second = 1000000000;
  RunningLive r;
  {
    Restarted behind(r, [&](json& j) {
      j["origin_unix_ns"] = live::wall_now_ns() - 100 * second;
      j["last_t_ns"] = 1000 * second;  // the host that wrote it was 900 s ahead
    });
    EXPECT_NEAR(behind.world->now().to_seconds(), 1000, 1e-6);
    behind.world->start();  // saves the journal
  }
  // The controller is down for 50 s on the same host: as if its wall clock moved on 50 s.
  Restarted again(r, [&](json& j) {
    j["origin_unix_ns"] = j["origin_unix_ns"].get<std::int64_t>() - 50 * second;
  });
  EXPECT_NEAR(again.world->now().to_seconds(), 1050, 1);
}

// Issue 37, item 19: swapping two machines' order in the config and restarting gave 15 s of
// refused reports until a stall forced a restart: the journal's ids index the config, and
// the ids then named other machines. The journal keeps the names and ids are mapped back.
TEST(LiveWorldBelief, AReorderedConfigIsMappedBackByName) {
  RunningLive r;
  ASSERT_EQ(r.live.world->cluster().machine_in(1), 1);
  Restarted after(r, [](json& j) {
    // What a journal says after the operator swapped m1 and m2 in the config: slot 1 runs
    // the machine now listed third, slot 2 the one listed second.
    j["machine_names"] = json::array({"m0", "m2", "m1", "m3", "s0"});
  });
  EXPECT_EQ(after.world->cluster().machine_in(0), 0);
  EXPECT_EQ(after.world->cluster().machine_in(1), 2);
  EXPECT_EQ(after.world->cluster().machine_in(2), 1);
  EXPECT_EQ(after.world->cluster().machine_in(3), 3);
}

// Issue 37, item 17: a rank that died while the controller was down left no exit and no
// incident in the log: its exit had nowhere to go, and the restarted controller only said it
// could not adopt. The missing rank is a gap in the log now, said and counted as lost.
TEST(LiveWorldBelief, ARankThatEndedWhileNoControllerRanIsAGapInTheLog) {
  RunningLive r;
  const std::int64_t gen = r.gen;
  ASSERT_TRUE(r.live.journal.state().running);
  Restarted after(r, [](json&) {});
  for (MachineId m = 0; m < 4; ++m) {  // slot m runs rank m; m2's rank died meanwhile
    live::Auth a;
    a.gen = gen;
    if (m != 2) a.alive_ranks = {m};
    after.world->on_agent_connected(m, a);
  }
  after.world->start();
  after.reactor.advance_to(after.reactor.now() + Duration::seconds(30));
  EXPECT_EQ(after.world->lost_before_restart(), 1u);
  EXPECT_TRUE(r.noted("event log gap: rank 2 on m2 (generation " + std::to_string(gen) +
                      ") ended while no controller was running"));
  EXPECT_FALSE(r.noted("event log gap: rank 1"));
  EXPECT_TRUE(r.noted("cannot adopt generation"));
}

// Issue 37, item 18: action ids repeated after controller restarts: the journal held the next
// id as of its last save, and actions taken after it were numbered again. Ids are reserved in
// blocks saved before use.
TEST(LiveWorldBelief, ActionIdsNeverRepeatAcrossRestarts) {
  RunningLive r;
  ActionId last = 0;
  for (int i = 0; i < 3; ++i) last = r.live.world->act(WatchSteps{Duration::zero(), "again"});
  Restarted after(r, [](json&) {});
  const ActionId next = after.world->act(WatchSteps{Duration::zero(), "after the restart"});
  EXPECT_GT(next, last);
}

// The fuzz found it: a standby's agent (or any session) could report an exit or a step of
// a rank it does not run; the exit stopped and restarted the job, a forged step 1000000
// went to the policy as progress. An agent now speaks for its own slot's ranks only.
TEST(LiveWorldBelief, ReportsAndExitsCountOnlyFromTheMachineThatRunsTheRank) {
  RunningLive r;
  ASSERT_EQ(seen<JobStarted>().size(), 1u);
  r.exit(4, 1, 1, 0, "forged by the standby");         // s0 runs no rank
  r.exit(0, 2, 1, 0, "forged by m0 about m2's rank");  // m0 runs rank 0 only
  r.step(4, 0, 1000000);                               // the standby as rank 0
  r.step(0, 0, 777, 3);                                // rank 0's pipe claiming rank 3
  r.step(3, 3, 888);                                   // rank 3's own step: not rank 0's progress
  r.advance(1);
  EXPECT_TRUE(seen<ProcessExit>().empty()) << describe(Event{seen<ProcessExit>().front()});
  for (const auto& smp : seen<StepSample>()) {
    EXPECT_NE(smp.step, 1000000);
    EXPECT_NE(smp.step, 777);
    EXPECT_NE(smp.step, 888);
  }
  EXPECT_TRUE(r.was_refused("exit: rank 2 is not run by m0"));
  EXPECT_TRUE(r.was_refused("report.rank 3 differs from the rank of its pipe, 0"));
  EXPECT_EQ(r.refused.size(), 2u) << "the standby's messages are dropped without a word";
  // What the right machines say still counts.
  r.step(0, 0, 1);
  r.advance(0.1);  // events reach the policy at the reactor's next turn
  ASSERT_FALSE(seen<StepSample>().empty());
  EXPECT_EQ(seen<StepSample>().back().step, 1);
  r.exit(1, 1, 1, 0, "CUDA error: an illegal memory access was encountered");
  r.advance(0.1);
  ASSERT_EQ(seen<ProcessExit>().size(), 1u);
  EXPECT_EQ(seen<ProcessExit>()[0].machine, 1);
}

// Issue 52: a replica reporting step 10^15 was believed: the detector's progress jumped
// there, every true step after it looked like no progress, and the stall restarted a healthy
// job (ETTR 98% -> 29%). A step beyond what the job can have reached is refused and noted.
TEST(LiveWorldBelief, AStepFarBeyondWhatTheJobCanHaveReachedIsRefused) {
  RunningLive r;
  const Instant t0 = r.live.reactor.now();
  const auto at = [&](double s) { r.live.reactor.advance_to(t0 + Duration::seconds(s)); };
  for (std::int64_t step = 1; step <= 5; ++step) {
    at(kStepS * static_cast<double>(step));
    r.step(0, 0, step);
  }
  at(11);
  r.step(0, 0, 1000000000000000);  // 10^15, two seconds after step 5
  for (std::int64_t step = 6; step <= 8; ++step) {
    at(kStepS * static_cast<double>(step));
    r.step(0, 0, step);
  }
  r.advance(0.1);
  std::vector<std::int64_t> steps;
  for (const auto& smp : seen<StepSample>()) steps.push_back(smp.step);
  EXPECT_EQ(steps, (std::vector<std::int64_t>{1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_TRUE(
      r.noted("refused a step report of rank 0 on m0: step 1000000000000000 is beyond "
              "what the job can have reached"))
      << r.notes().back();
  // A step the job can reach (a fast stretch: 500 steps in 2 s of 2 s nominal steps) counts.
  at(18);
  r.step(0, 0, 508);
  r.advance(0.1);
  EXPECT_EQ(seen<StepSample>().back().step, 508);
}

// A new run whose ranks restore an old checkpoint starts from its step: the first start's
// restored step is the base the next reports are checked against, not a step to refuse.
TEST(LiveWorldBelief, ANewRunOnAnOldCheckpointStartsFromItsStep) {
  const Registry reg = registry();
  Live live(reg);
  live.restored_step = 50000;
  Script s;
  s.start = [](World& w) {
    w.act(WatchSteps{Duration::zero(), "samples"});
    w.act(StartJob{"start"});
  };
  live.run(s, 0.5);
  ASSERT_EQ(seen<JobStarted>().size(), 1u);
  EXPECT_EQ(seen<JobStarted>()[0].step, 50000);
  live.world->on_agent_message(
      0, {{"type", "report"},
          {"gen", live.journal.state().gen},
          {"report", {{"type", "step"}, {"rank", 0}, {"step", 50001}, {"step_time_s", kStepS}}}});
  live.advance(0.1);
  ASSERT_EQ(seen<StepSample>().size(), 1u);
  EXPECT_EQ(seen<StepSample>()[0].step, 50001);
}

// Issue 52: one replica's false quorum_failed got its three healthy peers killed: the members
// that did not say the quorum failed were judged hung after the grace, although they went on
// reporting steps in it. A member that trains on is not hung.
TEST(LiveWorldBelief, OneReplicasFalseQuorumFailedKillsNoHealthyPeer) {
  const Registry reg = registry();
  Live live(reg, "conformance-script", json::object(),
            {{"pp", 1}, {"dp", 4}, {"replica_groups", true}});
  Script s;
  s.start = [](World& w) {
    w.act(EnableReplicaGroups{1, Duration::zero(), Duration::seconds(10), "groups"});
    w.act(StartJob{"start"});
  };
  live.run(s, 0.5);
  ASSERT_EQ(seen<JobStarted>().size(), 1u);
  const std::int64_t gen = live.journal.state().gen;
  const std::int64_t q = live.journal.state().replica_quorum;
  const auto report = [&](std::int64_t r, json body) {
    body["rank"] = r;
    live.world->on_agent_message(static_cast<MachineId>(r),
                                 {{"type", "report"}, {"gen", gen}, {"rank", r}, {"report", body}});
  };
  const auto steps = [&](std::int64_t from, std::int64_t to, std::int64_t first_replica) {
    for (std::int64_t step = from; step <= to; ++step)
      for (std::int64_t r = first_replica; r < 4; ++r)
        report(r, {{"type", "step"}, {"step", step}, {"step_time_s", 0.5}});
  };
  steps(1, 3, 0);
  live.link.sent.clear();
  report(0, {{"type", "quorum_failed"}, {"quorum", q}, {"step", 4}, {"detail", "forged"}});
  for (std::int64_t step = 4; step <= 6; ++step) {  // replicas 1 to 3 train on in quorum q
    live.advance(0.5);
    steps(step, step, 1);
  }
  live.advance(3);  // past the controller's grace for the others to say so
  EXPECT_TRUE(seen<ReplicaDropped>().empty()) << describe(Event{seen<ReplicaDropped>().front()});
  EXPECT_TRUE(seen<ProcessExit>().empty());
  std::ifstream in(live.dir / "events.jsonl");
  bool noted = false;
  for (std::string line; std::getline(in, line);)
    noted |= line.find("but replica 1, 2, 3 trained on in it: no replica is judged hung") !=
             std::string::npos;
  EXPECT_TRUE(noted);
}

// Issue 52: with a stall window shorter than stalled_agent_timeout_s, a frozen agent's stall
// was captured before the agent was declared lost: its slot's "<no answer>" was one stack
// among the others, and the waiting partner's stack was the outlier evicted. A capture that an
// agent with late heartbeats does not answer attributes the stall to that agent's machine.
TEST(LiveWorldBelief, AStallCaptureThatAFrozenAgentDoesNotAnswerNamesItsMachine) {
  RunningLive r;
  r.live.link.silent[2] = 1;  // m2's agent frozen (its heartbeats late from now on)
  const ActionId capture = r.live.world->act(CaptureStacks{"stalled"});
  r.live.link.silent[2] = 40;
  r.advance(31);  // past the capture's 30 s
  EXPECT_TRUE(seen<StacksCaptured>().empty())
      << "stacks delivered: " << seen<StacksCaptured>().front().stacks.at(2);
  const auto alerts = seen<InspectionAlert>();
  ASSERT_EQ(alerts.size(), 1u);
  EXPECT_EQ(alerts[0].machine, 2);
  EXPECT_EQ(alerts[0].kind, "host");
  ASSERT_EQ(seen<ActionFailed>().size(), 1u);
  EXPECT_EQ(seen<ActionFailed>()[0].action, capture);
  EXPECT_EQ(seen<ActionFailed>()[0].reason,
            "the agent of m2 is silent: the stall is attributed to it");
  // An agent that answers late but heartbeats (a slow capture) is no silent agent.
  RunningLive slow;
  slow.live.link.silent[1] = 0.5;
  slow.live.world->act(CaptureStacks{"stalled"});
  slow.advance(31);
  EXPECT_TRUE(seen<InspectionAlert>().empty());
  ASSERT_EQ(seen<StacksCaptured>().size(), 1u);
  EXPECT_EQ(seen<StacksCaptured>()[0].stacks.at(1), "<no answer>");
}

constexpr const char* kPeerTimeout = "collective: all_gather: timed out receiving from rank 2";

// A rank that times out waiting for a peer is the victim: the exit of the rank that caused
// it, arriving a little later, is the one reported (it used to be the victim's).
// CI caught it under load: a start's kill phase still counted the outgoing generation's
// "started" reports (late, from the start before it), declared the new start done before
// launching it, and took the old ranks' exits for crashes of the new run. While a start
// kills, only the generation it launches can complete it.
TEST(LiveWorldBelief, AStartIsCompletedOnlyByTheGenerationItLaunches) {
  RunningLive r;
  ASSERT_EQ(seen<JobStarted>().size(), 1u);
  const std::int64_t old_gen = r.gen;
  r.live.world->act(StopJob{"stop"});
  r.advance(0.5);
  ASSERT_EQ(seen<JobStopped>().size(), 1u);
  r.live.world->act(StartJob{"again"});  // kills first: requests queued, not yet answered
  for (MachineId m = 0; m < 4; ++m)
    r.send(m, {{"type", "report"},
               {"gen", old_gen},
               {"rank", m},
               {"report", {{"type", "started"}, {"rank", m}, {"step", 0}}}});
  r.exit(0, 0, 1, 0, "exit code 1");  // an old rank dying of the kill
  // An old rank that crashed in its own words just before the kill (issue 52: the storm's
  // crash on s17): the start under way covers it, and the log says it happened.
  r.exit(1, 1, 1, 0, "fleet fault 7: crash on m1");
  r.live.reactor.advance_to(r.live.reactor.now() +
                            Duration::millis(1));  // deliver; kills unanswered
  EXPECT_EQ(seen<JobStarted>().size(), 1u) << "the new start was completed by the old generation";
  EXPECT_TRUE(seen<ProcessExit>().empty());
  EXPECT_TRUE(r.noted("fleet fault 7: crash on m1"));
  EXPECT_FALSE(r.noted("exit code 1"));
  EXPECT_EQ(r.live.journal.state().gen, old_gen) << "not launched yet";
  r.advance(1);  // the kills are answered; the launch runs and its ranks report
  ASSERT_EQ(seen<JobStarted>().size(), 2u);
  EXPECT_EQ(r.live.journal.state().gen, old_gen + 1);
  EXPECT_TRUE(seen<ProcessExit>().empty());
}

TEST(LiveWorldBelief, AVictimsExitWaitsForTheExitOfItsCause) {
  RunningLive r;
  r.exit(1, 1, 1, 0, kPeerTimeout);
  r.advance(0.3);
  EXPECT_TRUE(seen<ProcessExit>().empty()) << "held for the cause";
  r.exit(2, 2, -1, 9, "");
  r.advance(0.1);  // well inside the grace
  ASSERT_EQ(seen<ProcessExit>().size(), 1u);
  EXPECT_EQ(seen<ProcessExit>()[0].machine, 2);
  EXPECT_EQ(seen<ProcessExit>()[0].exit_code, 128 + 9);
  r.advance(3);
  EXPECT_EQ(seen<ProcessExit>().size(), 1u) << "the victim's exit is not reported as well";
}

// No cause exits: the machine whose ranks stopped reporting steps first is named; when
// every rank reached the same step, none is (as the simulator's watchdog exit).
TEST(LiveWorldBelief, AVictimsExitNamesTheMachineThatStalledFirstOrNone) {
  for (const bool laggard : {true, false}) {
    SCOPED_TRACE(laggard ? "rank 2 behind" : "all at step 10");
    RunningLive r;
    for (std::int64_t rank = 0; rank < 4; ++rank) r.step(rank, rank, laggard && rank == 2 ? 9 : 10);
    r.exit(1, 1, 1, 0, kPeerTimeout);
    r.advance(1);
    EXPECT_TRUE(seen<ProcessExit>().empty()) << "held for the cause";
    r.advance(1);
    ASSERT_EQ(seen<ProcessExit>().size(), 1u);
    const ProcessExit x = seen<ProcessExit>()[0];
    EXPECT_EQ(x.machine, laggard ? 2 : kNoMachine);
    EXPECT_EQ(x.signature, kPeerTimeout);
    EXPECT_EQ(x.step, 10) << "the victim's own last step";
    EXPECT_TRUE(
        r.noted(laggard ? "m2's ranks stalled first, after step 9" : "the exit names no machine"));
  }
}

// Any other exit is reported at once, with the step its rank last reported.
TEST(LiveWorldBelief, AnOrdinaryExitIsReportedAtOnceWithItsRanksStep) {
  RunningLive r;
  r.step(0, 0, 12);
  r.step(3, 3, 11);
  r.exit(3, 3, 1, 0, "CUDA error: an illegal memory access was encountered");
  r.advance(0.1);  // the reactor's next turn, not the victims' grace
  ASSERT_EQ(seen<ProcessExit>().size(), 1u);
  EXPECT_EQ(seen<ProcessExit>()[0].machine, 3);
  EXPECT_EQ(seen<ProcessExit>()[0].step, 11);
}

// Issue 52 (the storm at 2,000 agents): a rank that crashed with its own words while the job
// was already stopping, or after another rank's exit had been reported, left nothing in the
// event log (13 of 50 injected crashes): its exit was dropped as an echo. It is not a new
// incident (the restart under way covers it), but the log records that it happened.
TEST(LiveWorldBelief, ACrashDuringAnotherIncidentIsRecordedNotDropped) {
  RunningLive r;
  r.exit(1, 1, 1, 0, "CUDA error: an illegal memory access was encountered");
  r.advance(0.1);
  ASSERT_EQ(seen<ProcessExit>().size(), 1u);
  r.exit(2, 2, 1, 0, "RuntimeError: a second fault on m2");  // its own words, not a peer's
  r.exit(3, 3, -1, 9, "");                                   // dying of a kill: an echo
  r.exit(0, 0, 1, 0, kPeerTimeout);                          // a victim: an echo
  r.advance(0.1);
  EXPECT_EQ(seen<ProcessExit>().size(), 1u) << "no second incident";
  EXPECT_TRUE(r.noted("RuntimeError: a second fault on m2"));
  EXPECT_FALSE(r.noted(kPeerTimeout));
  EXPECT_FALSE(r.noted("rank 3 on m3"));
  // A crash of a rank whose generation the restart already replaced (the storm at 2,000
  // agents lost two this way): noted too, and still no incident.
  r.gen -= 1;
  r.exit(1, 1, 1, 0, "RuntimeError: a crash of the stopped generation");
  r.advance(0.1);
  EXPECT_TRUE(r.noted("RuntimeError: a crash of the stopped generation"));
  EXPECT_EQ(seen<ProcessExit>().size(), 1u);
}

// The storm at 4,000 agents: a generation that lasted minutes (its start never completed)
// took 50 separate crashes, and the first 16 notes used up a per-generation cap: 34 crashes
// left nothing in the log. A burst at one stop is still bounded (16 at once), but the budget
// comes back at one a second, and what it held back is counted in the next note.
TEST(LiveWorldBelief, CrashesOfALongGenerationAreAllNotedAndABurstIsCounted) {
  RunningLive r;
  r.exit(1, 1, 1, 0, "CUDA error: an illegal memory access was encountered");
  r.advance(0.1);
  ASSERT_EQ(seen<ProcessExit>().size(), 1u);
  auto count = [&](const std::string& part) {
    int n = 0;
    for (const auto& t : r.notes()) n += t.find(part) != std::string::npos;
    return n;
  };
  for (int i = 0; i < 20; ++i) r.exit(2, 2, 1, 0, "RuntimeError: burst " + std::to_string(i));
  r.advance(0.1);
  EXPECT_EQ(count("RuntimeError: burst "), 16) << "a burst is bounded";
  EXPECT_FALSE(r.noted("more ranks exited"));
  // Separate crashes a few seconds apart, for a minute: each one noted.
  for (int i = 0; i < 20; ++i) {
    r.advance(3);
    r.exit(3, 3, 1, 0, "RuntimeError: crash " + std::to_string(i));
  }
  r.advance(0.1);
  EXPECT_EQ(count("RuntimeError: crash "), 20);
  EXPECT_TRUE(r.noted("4 more ranks exited in their own words")) << "the burst's rest counted";
  EXPECT_EQ(seen<ProcessExit>().size(), 1u) << "no new incident";
}

}  // namespace
}  // namespace faultline
