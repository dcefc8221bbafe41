// LiveWorld's and the live Controller's parts (realexec/controller/): each a class with its own
// state, tested alone.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "realexec/controller/acquisitions.h"
#include "realexec/controller/agent_requests.h"
#include "realexec/controller/incident_ledger.h"
#include "realexec/controller/job_start.h"
#include "realexec/controller/journal.h"
#include "realexec/controller/lost_time_account.h"
#include "realexec/controller/one_shot_timer.h"
#include "realexec/controller/probe_relays.h"
#include "realexec/controller/rank_generation.h"
#include "realexec/controller/repair_pipeline.h"
#include "realexec/controller/repair_queue.h"
#include "realexec/controller/replica_set.h"
#include "realexec/controller/session_table.h"
#include "realexec/controller/state_dir_lock.h"
#include "realexec/controller/step_progress.h"
#include "realexec/controller/stop_tests.h"
#include "realexec/net/reactor.h"
#include "tests/realexec/agent/live_world_parts_fakes.h"

namespace faultline::live {
namespace {

TEST(AgentRequests, AReplyReachesItsHandlerOnceAndOnlyFromItsMachine) {
  Reactor reactor{ManualClock{}};
  FakeLink link;
  AgentRequests requests(reactor, link);
  std::vector<std::string> heard;
  const auto req = requests.send(2, {{"type", "kill"}}, Duration::seconds(5),
                                 [&](const AgentReply& r) { heard.push_back(r.detail); });
  ASSERT_EQ(link.sent.size(), 1u);
  EXPECT_EQ(link.sent[0].second["req"], req);
  EXPECT_TRUE(requests.waits(req, 2));
  EXPECT_FALSE(requests.waits(req, 3));
  AgentReply reply;
  reply.req = req;
  reply.ok = true;
  reply.detail = "killed";
  requests.answer(3, reply);  // another machine's word: ignored
  EXPECT_TRUE(heard.empty());
  requests.answer(2, reply);
  requests.answer(2, reply);  // answered already: ignored
  EXPECT_EQ(heard, std::vector<std::string>{"killed"});
  reactor.advance_to(at_s(10));  // its timeout was cancelled
  EXPECT_EQ(heard.size(), 1u);
}

TEST(AgentRequests, NotConnectedTimedOutAndLostAgentsFailTheRequest) {
  Reactor reactor{ManualClock{}};
  FakeLink link;
  link.down = {4};
  AgentRequests requests(reactor, link);
  std::vector<AgentReply> heard;
  auto keep = [&](const AgentReply& r) { heard.push_back(r); };
  const auto a = requests.send(4, {{"type", "kill"}}, Duration::seconds(5), keep);
  const auto b = requests.send(1, {{"type", "kill"}}, Duration::seconds(5), keep);
  const auto c = requests.send(2, {{"type", "kill"}}, Duration::seconds(20), keep);
  EXPECT_EQ(b, a + 1);
  EXPECT_FALSE(requests.waits(a, 4));
  EXPECT_TRUE(heard.empty());  // deferred: heard from the reactor
  reactor.advance_to(at_s(6));
  ASSERT_EQ(heard.size(), 2u);
  EXPECT_EQ(heard[0].detail, "agent not connected");
  EXPECT_EQ(heard[1].detail, "agent did not answer in time");
  EXPECT_TRUE(heard[1].timed_out);
  requests.fail_all_of(2, "agent lost: eof");
  ASSERT_EQ(heard.size(), 3u);
  EXPECT_FALSE(heard[2].ok);
  EXPECT_EQ(heard[2].detail, "agent lost: eof");
  EXPECT_FALSE(heard[2].timed_out);
  EXPECT_FALSE(requests.waits(c, 2));
  reactor.advance_to(at_s(30));
  EXPECT_EQ(heard.size(), 3u);
}

TEST(RankGeneration, ALaunchForgetsThePreviousGenerationsWord) {
  RankGeneration g;
  g.started(3);
  g.set_start_step(40);
  g.record_step(3, 45, at_s(1));
  g.clean_exit(2);
  g.mark_exit_reported();
  EXPECT_TRUE(g.hold_victim({1, 4, 1, "collective: timed out"}));
  EXPECT_EQ(g.rank_step(3), 45);
  EXPECT_EQ(g.rank_step(5), 40);  // a rank that never reported: the start step
  g.launch(at_s(2));
  EXPECT_FALSE(g.has_started(3));
  EXPECT_EQ(g.start_step(), 0);
  EXPECT_EQ(g.rank_step(3), 0);
  EXPECT_FALSE(g.reported_at(3).has_value());
  EXPECT_FALSE(g.exited_cleanly(2));
  EXPECT_FALSE(g.exit_reported());
  EXPECT_FALSE(g.holds_victim());
}

TEST(RankGeneration, TheFirstVictimSpeaksForThemAll) {
  RankGeneration g;
  EXPECT_TRUE(g.hold_victim({1, 4, 1, "first"}));
  EXPECT_FALSE(g.hold_victim({2, 9, 1, "second"}));
  const auto v = g.take_victim();
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->rank, 4);
  EXPECT_EQ(v->signature, "first");
  EXPECT_FALSE(g.take_victim().has_value());
}

TEST(RankGeneration, TheLaggardIsTheSlotWhoseRanksAreAllBehindEveryOtherRank) {
  RankGeneration g;  // 3 slots of 2 ranks
  for (std::int64_t r : {0, 1, 4, 5}) g.record_step(r, 100, at_s(1));
  g.record_step(2, 97, at_s(1));
  g.record_step(3, 98, at_s(1));
  RankGeneration::Laggard lag = g.laggard(3, 2);
  EXPECT_EQ(lag.slot, 1);
  EXPECT_EQ(lag.behind, 98);
  EXPECT_EQ(lag.others, 100);
  g.record_step(3, 100, at_s(2));  // slot 1 no longer all behind
  EXPECT_EQ(g.laggard(3, 2).slot, -1);
  EXPECT_EQ(g.laggard(1, 2).slot, -1);  // one slot names none
}

TEST(RankGeneration, DroppedExitNotesComeInABurstThenOneASecond) {
  RankGeneration g;
  g.launch(at_s(0));
  for (int i = 0; i < RankGeneration::kDroppedExitBurst; ++i)
    EXPECT_TRUE(g.admit_dropped_note(at_s(0)));
  EXPECT_FALSE(g.admit_dropped_note(at_s(0)));
  EXPECT_FALSE(g.admit_dropped_note(at_s(0.5)));
  EXPECT_TRUE(g.admit_dropped_note(at_s(1.5)));
  EXPECT_EQ(g.take_unnoted(), 2);
  EXPECT_EQ(g.take_unnoted(), 0);
  for (int i = 0; i < RankGeneration::kHoldingNotes; ++i) EXPECT_TRUE(g.admit_holding_note());
  EXPECT_FALSE(g.admit_holding_note());
  g.launch(at_s(2));
  EXPECT_TRUE(g.admit_holding_note());
}

TEST(StepProgress, HealthyStepTimesSkipTheFirstStepsAndTheSlowOnes) {
  StepProgress p;
  EXPECT_DOUBLE_EQ(p.step_time_s(2.0), 2.0);  // none yet: the nominal one
  p.started(at_s(0));
  for (int i = 1; i <= 5; ++i) {
    p.advance(i, at_s(i));
    p.add_step_time(i == 4 ? 10.0 : 1.0);  // steps 1 and 2 not counted, step 4 too slow
  }
  EXPECT_EQ(p.healthy_step_times(), (std::vector<double>{1.0, 1.0}));
  EXPECT_EQ(p.last_step(), 5);
  EXPECT_EQ(p.steps_since_start(), 5);
  EXPECT_EQ(p.last_progress_at(), at_s(5));
  EXPECT_DOUBLE_EQ(p.step_time_s(2.0), 1.0);
}

TEST(StepProgress, ABelievableStepGrowsWithTheTimeSinceTheLastProgress) {
  StepProgress p;
  p.advance(100, at_s(10));
  StepProgress::Bound b = p.believable(50, 1.0, at_s(10));
  EXPECT_EQ(b.base, 100);
  EXPECT_DOUBLE_EQ(b.most, 100 + StepProgress::kStepSlack);
  b = p.believable(200, 1.0, at_s(12));  // the rank's own step is the base; 2 s at 10x
  EXPECT_EQ(b.base, 200);
  EXPECT_DOUBLE_EQ(b.most, 200 + StepProgress::kStepSlack + 20);
  EXPECT_EQ(p.refuse(), 1u);
  EXPECT_EQ(p.refuse(), 2u);
}

TEST(StepProgress, SamplesComeAtTheWatchedCadenceOrAtOnceOnANaN) {
  StepProgress p;
  EXPECT_FALSE(p.sample(1, 1.0, 2.0, 0.5, false, at_s(1)).has_value());  // not watching
  p.watch(WatchSteps{Duration::seconds(10)});
  p.started(at_s(0));
  EXPECT_FALSE(p.sample(1, 1.0, 2.0, std::nullopt, false, at_s(1)).has_value());
  auto s = p.sample(2, 3.0, std::nullopt, 0.5, false, at_s(10));
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->step, 2);
  EXPECT_DOUBLE_EQ(s->step_time_s, 2.0);
  EXPECT_EQ(s->loss, 2.0);  // the latest finite one
  EXPECT_EQ(s->grad_norm, 0.5);
  EXPECT_FALSE(s->nan);
  s = p.sample(3, 1.0, std::nullopt, std::nullopt, true, at_s(11));
  ASSERT_TRUE(s.has_value());
  EXPECT_TRUE(s->nan);
  EXPECT_FALSE(s->loss.has_value());
}

TEST(JobStart, EndingAStartCancelsItsTimer) {
  Reactor reactor{ManualClock{}};
  JobStart start(reactor);
  EXPECT_FALSE(start.pending());
  start.begin(7, at_s(1));
  EXPECT_EQ(start.id(), 7u);
  EXPECT_EQ(start.began(), at_s(1));
  EXPECT_FALSE(start.launched_gen(3));
  start.launched(3);
  EXPECT_TRUE(start.launched_gen(3));
  int fired = 0;
  start.timer().arm(Duration::seconds(5), [&] { ++fired; });
  EXPECT_TRUE(start.timer().armed());
  EXPECT_EQ(start.end(), 7u);
  EXPECT_FALSE(start.pending());
  EXPECT_FALSE(start.timer().armed());
  reactor.advance_to(at_s(10));
  EXPECT_EQ(fired, 0);
}

TEST(OneShotTimer, FiringDisarmsItBeforeItsCallback) {
  Reactor reactor{ManualClock{}};
  OneShotTimer timer(reactor);
  bool armed_in_callback = true;
  timer.arm(Duration::seconds(1), [&] { armed_in_callback = timer.armed(); });
  reactor.advance_to(at_s(2));
  EXPECT_FALSE(armed_in_callback);
  EXPECT_FALSE(timer.armed());
  timer.cancel();  // not armed: nothing
}

TEST(RepairQueue, ACheckRunsOnItsTimerAndFailsUntilMaxChecks) {
  Reactor reactor{ManualClock{}};
  RepairQueue q(reactor);
  int checks = 0;
  q.take_out(3, at_s(1));
  ASSERT_NE(q.find(3), nullptr);
  EXPECT_TRUE(q.agent_back(3, at_s(1)));  // waits for nothing: its check is due
  q.schedule(3, Duration::seconds(5), [&] { ++checks; });
  EXPECT_FALSE(q.agent_back(3, at_s(2)));  // scheduled already
  reactor.advance_to(at_s(10));
  EXPECT_EQ(checks, 1);
  EXPECT_EQ(q.find(3)->timer, 0u);
  EXPECT_TRUE(q.begin_check(3));
  EXPECT_FALSE(q.begin_check(3));  // one runs
  EXPECT_TRUE(q.check_failed(3, 2, at_s(11)));
  EXPECT_EQ(q.find(3)->since, at_s(11));
  EXPECT_TRUE(q.begin_check(3));
  EXPECT_FALSE(q.check_failed(3, 2, at_s(12)));  // 2 of 2: left to an operator
  EXPECT_TRUE(q.find(3)->given_up);
  EXPECT_FALSE(q.agent_back(3, at_s(13)));
  q.forget(3);
  EXPECT_EQ(q.find(3), nullptr);
  EXPECT_FALSE(q.begin_check(3));
}

TEST(RepairQueue, AnAlertFailsOnlyTheRepairItCameIn) {
  Reactor reactor{ManualClock{}};
  RepairQueue q(reactor);
  q.alert(2, at_s(1));
  q.take_out(2, at_s(2));
  EXPECT_FALSE(q.alerted_since_taken_out(2));  // before it was taken out
  q.alert(2, at_s(3));
  EXPECT_TRUE(q.alerted_since_taken_out(2));
  EXPECT_FALSE(q.alerted_since_taken_out(5));  // not in the queue
  int checks = 0;
  q.schedule(2, Duration::seconds(1), [&] { ++checks; });
  q.forget(2);  // cancels its check
  reactor.advance_to(at_s(10));
  EXPECT_EQ(checks, 0);
}

// RepairPipeline over 2 job machines and a standby (machine 2), its probes answered by the test.
struct RepairRig {
  Reactor reactor{ManualClock{}};
  FakeLink link;
  AgentRequests requests{reactor, link};
  Journal journal{"/nonexistent/journal.json"};
  LiveConfig config = [] {
    LiveConfig c = config_of({"m0", "m1", "s0"});
    c.repair.check_after_s = 10;
    c.repair.retry_after_s = 60;
    c.repair.max_checks = 2;
    c.repair.retire_after = 3;
    return c;
  }();
  ClusterView cluster{dp_job(2, 1)};
  std::vector<std::string> notes;
  std::vector<std::pair<ProbeKind, RepairPipeline::ProbeDone>> probes;
  int back_in_pool = 0;
  RepairPipeline pipeline{
      {config, cluster, reactor, journal, requests, link, [this] { return reactor.now(); },
       [this](std::string_view t) { notes.emplace_back(t); }, [] {},
       [this](ProbeKind k, const MachineSet&, Duration, RepairPipeline::ProbeDone done) {
         probes.emplace_back(k, std::move(done));
       },
       [this] { ++back_in_pool; }}};
  // Takes machine m out of its slot and hands it to the pipeline.
  void evict(MachineId m) {
    cluster.vacate(cluster.slot_of(m));
    cluster.set_health(m, Health::kEvicted);
    pipeline.take_out(m);
  }
  // Answers the latest request to m (the kill before a check).
  void answer_last(MachineId m, bool ok) {
    AgentReply reply;
    reply.req = link.sent.back().second["req"];
    reply.ok = ok;
    requests.answer(m, reply);
  }
};

TEST(RepairPipeline, AMachineTakenOutIsKilledProbedAndReturnedToThePool) {
  RepairRig r;
  using State = RepairPipeline::MachineState;
  EXPECT_EQ(r.pipeline.state(0), State::kJob);
  EXPECT_EQ(r.pipeline.state(2), State::kStandby);
  r.evict(1);
  EXPECT_EQ(r.journal.state().strikes.at(1), 1);
  EXPECT_EQ(r.pipeline.state(1), State::kAwaitingRepair);
  r.reactor.advance_to(at_s(11));  // repair.check_after_s: the check kills first
  EXPECT_EQ(r.pipeline.state(1), State::kRepairCheck);
  ASSERT_EQ(r.link.sent.size(), 1u);
  EXPECT_EQ(r.link.sent[0].second["type"], "kill");
  r.answer_last(1, true);
  ASSERT_EQ(r.probes.size(), 1u);
  EXPECT_EQ(r.probes[0].first, ProbeKind::kGpuDiag);
  r.probes[0].second({}, false, "");
  ASSERT_EQ(r.probes.size(), 2u);
  EXPECT_EQ(r.probes[1].first, ProbeKind::kBitwise);
  r.probes[1].second({}, false, "");
  EXPECT_EQ(r.pipeline.state(1), State::kStandby);
  EXPECT_EQ(r.cluster.health(1), Health::kHealthy);
  EXPECT_EQ(r.back_in_pool, 1);
  EXPECT_EQ(r.notes.back(),
            "m1 passed its repair check (gpu_diag, bit-wise); back in the standby pool");
}

TEST(RepairPipeline, FailedChecksLeaveItToAnOperatorAndStrikesRetireIt) {
  RepairRig r;
  using State = RepairPipeline::MachineState;
  r.evict(1);
  r.reactor.advance_to(at_s(11));
  r.answer_last(1, false);  // its old ranks were not killed: check 1 of 2 failed
  EXPECT_EQ(r.pipeline.state(1), State::kAwaitingRepair);
  EXPECT_EQ(r.notes.back(),
            "m1 failed its repair check (its old ranks were not killed ()); next check in 60.0 s");
  r.reactor.advance_to(at_s(72));
  r.answer_last(1, true);
  ASSERT_EQ(r.probes.size(), 1u);
  r.probes[0].second({1}, false, "; m1: no gpu");
  EXPECT_EQ(r.pipeline.state(1), State::kLeftToOperator);
  r.pipeline.alert(1, at_s(80));
  r.pipeline.agent_back(1);  // given up on: no check
  EXPECT_EQ(r.link.sent.size(), 2u);
  r.pipeline.forget(1);  // an operator repaired it
  EXPECT_EQ(r.pipeline.state(1), State::kOut);
  r.pipeline.take_out(1);
  r.pipeline.take_out(1);  // the third strike: retired
  EXPECT_TRUE(r.pipeline.is_retired(1));
  EXPECT_EQ(r.pipeline.state(1), State::kRetired);
  EXPECT_EQ(r.notes.back(),
            "m1 retired: taken out of the job 3 times (repair.retire_after = 3); only an "
            "operator's repair returns it");
}

TEST(IncidentLedger, StopsAndDropsOpenAndResolveWithTheirLatencies) {
  IncidentLedger l;
  l.begin_startup(Incident{at_s(0), std::nullopt, "start-up", "startup", at_s(0)});
  ASSERT_NE(l.open_stop(), nullptr);
  EXPECT_EQ(l.open_stop()->category, "startup");
  EXPECT_TRUE(l.end_startup().has_value());
  EXPECT_EQ(l.open_stop(), nullptr);
  l.open(Incident{at_s(10), std::nullopt, "rank 0 exited", "rank_exit", at_s(12)});
  Incident drop{at_s(20), std::nullopt, "replica 1 dropped out", "replica_drop", at_s(21)};
  drop.replica = 1;
  l.open(drop);
  ASSERT_NE(l.open_job_stop(), nullptr);
  EXPECT_EQ(l.open_job_stop()->category, "rank_exit");
  EXPECT_EQ(l.replicas_out(), (std::set<std::int64_t>{1}));
  l.resolve(*l.open_job_stop(), at_s(30), "recovered");
  EXPECT_EQ(l.open_stop(), nullptr);
  EXPECT_NE(l.open_replica(1), nullptr);
  EXPECT_EQ(l.opened_total(), 2u);
  EXPECT_EQ(l.stats().detection.count(), 2u);
  EXPECT_DOUBLE_EQ(l.stats().detection.sum(), 3.0);
  EXPECT_DOUBLE_EQ(l.stats().recovery.sum(), 18.0);
  l.close_run();
  EXPECT_EQ(l.stats().closed.at({"rank_exit", "recovered"}), 1u);
  EXPECT_EQ(l.stats().closed.at({"replica_drop", "run_ended"}), 1u);
}

TEST(IncidentLedger, KeepsTheLatestIncidentsAndCountsThemAll) {
  IncidentLedger l;
  for (std::size_t i = 0; i < IncidentLedger::kKept + 5; ++i) {
    l.open(Incident{at_s(1), std::nullopt, "x", "policy_stop", at_s(1)});
    l.resolve(*l.open_job_stop(), at_s(2), "recovered");
  }
  EXPECT_EQ(l.incidents().size(), IncidentLedger::kKept);
  EXPECT_EQ(l.opened_total(), IncidentLedger::kKept + 5);
}

// A LostTimeAccount over parts of its own: the clock, the job's running and the wait for
// machines in the test's hands; saves and "account" records counted.
struct AccountRig {
  Reactor reactor{ManualClock{}};
  Journal journal{"/nonexistent/journal.json"};  // never saved: `save` only counts
  IncidentLedger incidents;
  StepProgress progress;
  ReplicaSet replicas{reactor};
  ClusterView cluster{ClusterSpec{}};
  Instant t{};
  bool running = false;
  std::optional<Instant> waiting;
  int saves = 0;
  std::vector<nlohmann::json> records;
  LostTimeAccount account{{journal, incidents, progress, replicas, cluster, 2.0,
                           [this] { return t; }, [this] { return running; }, [this] { ++saves; },
                           [this](nlohmann::json r) { records.push_back(std::move(r)); },
                           [this] { return waiting; }}};
  double lost(const std::string& phase) const {
    const auto& l = journal.state().lost_s;
    return l.count(phase) ? l.at(phase) : 0;
  }
};

TEST(LostTimeAccount, TheStartUpIsFailoverUntilEveryRankRuns) {
  AccountRig r;
  r.account.resume();
  ASSERT_NE(r.incidents.open_stop(), nullptr);
  r.account.restart_began(r.t);  // the first start launched
  EXPECT_EQ(r.saves, 1);
  r.t = at_s(10);
  EXPECT_DOUBLE_EQ(r.account.lost_at(r.t).at("failover"), 10);
  EXPECT_EQ(r.account.lost_at(r.t).at("detection"), 0);
  ASSERT_TRUE(r.account.journal_stop().has_value());
  EXPECT_EQ(r.account.journal_stop()->category, "startup");
  r.account.running();
  EXPECT_EQ(r.incidents.open_stop(), nullptr);
  EXPECT_FALSE(r.account.journal_stop().has_value());
  EXPECT_DOUBLE_EQ(r.lost("failover"), 10);
  EXPECT_EQ(r.saves, 1);  // the caller saves, with the first step
}

TEST(LostTimeAccount, AWaitForMachinesComesOutOfTheDiagnosisFirst) {
  AccountRig r;
  r.account.resume();
  r.account.running();
  r.running = true;
  r.incidents.open(
      Incident{at_s(9), std::nullopt, "exit", "rank_exit", at_s(10), std::nullopt, {}});
  r.running = false;
  r.waiting = at_s(12);
  r.t = at_s(20);
  auto lost = r.account.lost_at(r.t);
  EXPECT_EQ(lost.at("detection"), 0);  // assigned at the close
  EXPECT_DOUBLE_EQ(lost.at("waiting_for_machines"), 8);
  EXPECT_DOUBLE_EQ(lost.at("diagnosis"), 2);
  EXPECT_EQ(r.account.journal_stop()->waiting_since_ns, at_s(12).ns);
  r.account.waited(*r.waiting);  // the machines came
  r.waiting.reset();
  r.account.restart_began(r.t);
  EXPECT_EQ(r.saves, 2);
  r.t = at_s(25);
  Incident* open = r.incidents.open_job_stop();
  r.incidents.resolve(*open, r.t, "recovered");
  r.account.closed(*open, 0);
  EXPECT_DOUBLE_EQ(r.lost("detection"), 1);
  EXPECT_DOUBLE_EQ(r.lost("diagnosis"), 2);
  EXPECT_DOUBLE_EQ(r.lost("waiting_for_machines"), 8);
  EXPECT_DOUBLE_EQ(r.lost("failover"), 5);
  ASSERT_EQ(r.records.size(), 1u);  // the "account" record
  EXPECT_DOUBLE_EQ(r.records[0]["lost_s"]["failover"].get<double>(), 5);
}

TEST(LostTimeAccount, SlowFirstStepsAreWarmUpAndAStepBackIsRecompute) {
  AccountRig r;
  r.account.resume();
  r.account.running();
  r.running = true;
  r.journal.state().first_step = 0;
  r.progress.started(r.t);
  r.t = at_s(5);
  r.account.step(1, 5.0, std::nullopt);  // 2 s nominal, 3 s over: warm-up
  r.progress.advance(1, r.t);
  EXPECT_DOUBLE_EQ(r.lost("warmup"), 3);
  EXPECT_EQ(r.saves, 1);  // flushed: a second since the last
  r.t = at_s(5.5);
  r.account.step(0, 2.0, std::nullopt);  // back to step 0: step 1 is recomputed
  r.progress.advance(0, r.t);
  EXPECT_EQ(r.lost("recompute"), 0);  // pending: flushed at most once a second
  r.t = at_s(7);
  r.account.step(1, 2.0, std::nullopt);
  EXPECT_DOUBLE_EQ(r.lost("recompute"), 2);
  EXPECT_EQ(r.saves, 2);
}

TEST(LostTimeAccount, TheSummaryAssignsALongSilenceToDetectionAndStopsTheClock) {
  AccountRig r;
  r.account.resume();
  r.account.running();
  r.running = true;
  r.journal.state().first_step = 0;
  r.t = at_s(100);  // no step since 0: a hang nothing noticed
  const LostTimeAccount::Accounting acc = r.account.close();
  EXPECT_DOUBLE_EQ(acc.elapsed_s, 100);
  EXPECT_DOUBLE_EQ(r.lost("detection"), 98);  // beyond the step under way
  EXPECT_DOUBLE_EQ(r.lost("degraded"), 2);
  EXPECT_TRUE(r.account.ended());
  ASSERT_EQ(r.records.size(), 1u);
  r.t = at_s(200);
  EXPECT_EQ(r.account.as_of(), at_s(100));
  EXPECT_DOUBLE_EQ(r.account.accounting().elapsed_s, 100);
}

TEST(ProbeRelays, GroupsAreKeyedByRankZerosRequestUntilTheProbeEnds) {
  ProbeRelays relays;
  auto g = ProbeRelays::make(4);
  EXPECT_EQ(g->root, 4);
  relays.add(17, g);
  ASSERT_NE(relays.find(17), nullptr);
  EXPECT_EQ(relays.find(17)->root, 4);
  EXPECT_EQ(relays.find(18), nullptr);
  relays.remove(17);
  EXPECT_EQ(relays.find(17), nullptr);
  relays.inspect("gpu", 30);
  relays.inspect("gpu", 10);
  EXPECT_EQ(relays.inspections(), (std::map<std::string, double>{{"gpu", 10}}));
}

TEST(ProbeRelays, TheMachinesThatDidNotJoinAreTheFailedOnes) {
  const auto name = [](MachineId m) { return "m" + std::to_string(m); };
  ProbeRelays::Group g;
  g.root = 0;
  g.published = true;
  MachineSet failed{0, 1, 2};
  std::string details;
  ProbeRelays::attribute(g, {0, 1, 2}, {{0, "ok"}, {1, "timed_out"}, {2, "ok"}}, failed, details,
                         name);
  EXPECT_EQ(failed, (MachineSet{1}));
  EXPECT_EQ(details, "; rendezvous: m1 did not join; the others waited for it");
  g.published = false;  // rank 0's id never came: rank 0 is the one missing
  failed = {1, 2};
  details.clear();
  ProbeRelays::attribute(g, {0, 1, 2}, {{1, "timed_out"}, {2, "timed_out"}}, failed, details, name);
  EXPECT_EQ(failed, (MachineSet{0}));
  failed.clear();
  details.clear();
  g.published = true;
  ProbeRelays::attribute(g, {0, 1}, {{0, "ok"}, {1, "ok"}}, failed, details, name);
  EXPECT_TRUE(failed.empty());
  EXPECT_EQ(details, "; rendezvous relayed by the controller: every machine joined (m0, m1)");
}

// StopTests over 2 job machines (m0, m1): the world's turns recorded.
struct StopTestsRig {
  Reactor reactor{ManualClock{}};
  FakeLink link;
  AgentRequests requests{reactor, link};
  LiveConfig config = [] {
    LiveConfig c;
    for (const char* name : {"m0", "m1"}) {
      LiveMachine m;
      m.name = name;
      m.addr = std::string("host-") + name;
      c.machines.push_back(m);
    }
    c.job.master_port = 29500;
    return c;
  }();
  ClusterView cluster{[] {
    ClusterSpec s;
    s.machines = 2;
    s.dp = 2;
    return s;
  }()};
  std::vector<std::string> notes, outcomes, refused;
  std::vector<Event> delivered;
  StopTests tests{{config, cluster, reactor, link, requests, [this] { return reactor.now(); },
                   [] {
                     return MachineSet{0, 1};
                   },
                   [this](std::string_view t) { notes.emplace_back(t); },
                   [this](ActionId id, bool ok, const std::string& d, Instant) {
                     outcomes.push_back(std::to_string(id) + (ok ? " ok: " : " failed: ") + d);
                   },
                   [this](ActionId id, const std::string& why, Instant) {
                     refused.push_back(std::to_string(id) + ": " + why);
                   },
                   [this](Event e) { delivered.push_back(std::move(e)); }}};
  // Answers the request sent i-th.
  void answer(std::size_t i, bool ok, const std::string& detail = "") {
    AgentReply reply;
    reply.req = link.sent.at(i).second["req"];
    reply.ok = ok;
    reply.detail = detail;
    requests.answer(link.sent.at(i).first, reply);
  }
};

TEST(StopTests, AProbeFailsTheMachinesWhoseAgentSaidItFailed) {
  StopTestsRig r;
  RunProbe a;
  a.machines = {0, 1, 7};  // 7: outside the fleet, left out
  r.tests.probe(3, a);
  ASSERT_EQ(r.link.sent.size(), 2u);
  EXPECT_EQ(r.link.sent[1].second["type"], "probe");
  EXPECT_EQ(r.link.sent[1].second["test"], "gpu_diag");
  EXPECT_EQ(r.link.sent[1].second["rank"], 1);
  r.answer(0, true);
  EXPECT_TRUE(r.outcomes.empty());
  r.answer(1, false, "xid 79");
  ASSERT_EQ(r.outcomes.size(), 1u);
  EXPECT_EQ(r.outcomes[0], "3 ok: gpu_diag: failed on m1; m1: xid 79");
  ASSERT_EQ(r.delivered.size(), 1u);
  EXPECT_EQ(std::get<ProbeResult>(r.delivered[0]).failed, (MachineSet{1}));
}

TEST(StopTests, InspectionsGoToEveryAgentAndAStrangersRendezvousIsRefused) {
  StopTestsRig r;
  EnableInspection a;
  a.kind = "host";
  a.interval = Duration::seconds(5);
  r.tests.inspect(a);
  EXPECT_EQ(r.tests.inspections().at("host"), 5);
  ASSERT_EQ(r.link.sent.size(), 2u);
  EXPECT_EQ(r.link.sent[0].second["kinds"]["host"], 5);
  AgentRendezvous rdv;
  rdv.probe_req = 99;
  EXPECT_THROW(r.tests.rendezvous(0, rdv), BadMessage);
  EXPECT_EQ(r.link.sent.size(), 2u);  // nothing relayed
}

// Acquisitions over 2 job machines and 2 standbys (machines 2 and 3): the world's turns recorded.
struct AcquisitionRig {
  Reactor reactor{ManualClock{}};
  FakeLink link;
  LiveConfig config = config_of({"m0", "m1", "s0", "s1"});
  ClusterView cluster{dp_job(2, 2)};
  std::vector<std::string> notes, outcomes, refused;
  std::vector<Event> delivered;
  MachineSet taken_out;
  std::vector<Instant> waited;
  Acquisitions acquisitions{{config, cluster, link, [this] { return reactor.now(); },
                             [this](std::string_view t) { notes.emplace_back(t); },
                             [this](ActionId id, bool ok, const std::string& d, Instant) {
                               outcomes.push_back(std::to_string(id) +
                                                  (ok ? " ok: " : " failed: ") + d);
                             },
                             [this](ActionId id, const std::string& why, Instant) {
                               refused.push_back(std::to_string(id) + ": " + why);
                             },
                             [this](Event e) { delivered.push_back(std::move(e)); }, [] {},
                             [this](MachineId m) { taken_out.push_back(m); },
                             [this](Instant since) { waited.push_back(since); }}};
  void empty_slot(SlotId s) {
    const MachineId m = cluster.machine_in(s);
    cluster.vacate(s);
    cluster.set_health(m, Health::kEvicted);
  }
};

TEST(Acquisitions, AvoidedStandbysJoinLastAndAShortfallWaitsForMachines) {
  AcquisitionRig r;
  r.acquisitions.avoid({2});
  r.empty_slot(1);
  AcquireMachines a;
  a.mode = AcquireMode::kStandby;
  r.acquisitions.acquire(4, a);           // the empty slots: slot 1
  EXPECT_EQ(r.cluster.machine_in(1), 3);  // s1, s0 being avoided
  ASSERT_EQ(r.outcomes.size(), 1u);
  EXPECT_EQ(r.outcomes[0], "4 ok: standby s1 joined");
  ASSERT_TRUE(std::holds_alternative<MachinesReady>(r.delivered.back()));
  r.link.down.insert(2);
  r.empty_slot(0);
  r.acquisitions.acquire(5, a);  // s0's agent is not connected: it waits
  EXPECT_EQ(r.acquisitions.waiting_since(), r.reactor.now());
  EXPECT_EQ(r.notes.back(),
            "standby waits for machines: 1 slots to fill, 0 standby machines "
            "connected");
  r.acquisitions.retry();
  EXPECT_TRUE(r.acquisitions.waiting_since().has_value());
  r.link.down.clear();
  r.acquisitions.retry();
  EXPECT_FALSE(r.acquisitions.waiting_since().has_value());
  EXPECT_EQ(r.cluster.machine_in(0), 2);
  EXPECT_EQ(r.waited.size(), 1u);
  EXPECT_EQ(r.outcomes.back(), "5 ok: standby s0 joined");
  a.mode = AcquireMode::kOracle;
  r.acquisitions.acquire(6, a);
  EXPECT_EQ(r.refused, (std::vector<std::string>{"6: live mode has no oracle spares"}));
  EXPECT_TRUE(r.taken_out.empty());
}

TEST(SessionTable, TheOldestSilentHandshakeMakesRoom) {
  SessionTable t;
  const std::uint64_t a = t.open(0, at_s(0));
  const std::uint64_t b = t.open(1, at_s(0.5));
  const std::uint64_t c = t.open(2, at_s(1.8));
  EXPECT_EQ(t.unauthenticated(), 3u);
  t.at(a).fd = 10;
  t.at(b).fd = 11;
  t.at(c).fd = 12;
  t.at(a).role = Session::Role::kChallenged;  // said hello: not silent
  const auto silent = [](int fd) { return fd == 11; };
  EXPECT_EQ(t.room_maker(at_s(2), Duration::seconds(1), silent), b);
  const auto none_silent = [](int) { return false; };
  EXPECT_EQ(t.room_maker(at_s(2), Duration::seconds(1), none_silent), a);  // past the grace
  EXPECT_EQ(t.room_maker(at_s(0.5), Duration::seconds(1), none_silent), 0u);
  t.at(a).role = Session::Role::kAgent;  // authenticated: dropped from the queue
  EXPECT_EQ(t.unauthenticated(), 2u);
  t.leave_unauthenticated(b, t.at(b));
  t.erase(c);
  EXPECT_EQ(t.unauthenticated(), 0u);
  EXPECT_EQ(t.evicted(), 1u);
}

TEST(SessionTable, AMachineIsLostOnlyWhenItsOwnSessionCloses) {
  SessionTable t;
  const std::uint64_t old = t.open(0, at_s(0));
  const std::uint64_t fresh = t.open(1, at_s(1));
  t.bind(3, old);
  EXPECT_EQ(t.bound(3), old);
  EXPECT_EQ(t.agent(3), nullptr);  // no open connection
  t.bind(3, fresh);                // a restarted agent replaced it
  EXPECT_FALSE(t.closed_agent(3, old));
  EXPECT_TRUE(t.closed_agent(3, fresh));
  EXPECT_EQ(t.bound(3), 0u);
}

TEST(StateDirLock, ASecondControllerIsRefusedNamingTheFirst) {
  char tmpl[] = "/tmp/faultline-lock-XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  {
    StateDirLock first;
    first.take(dir, false);
    EXPECT_TRUE(first.held());
    StateDirLock second;
    try {
      second.take(dir, true);
      ADD_FAILURE() << "a second lock was taken";
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(std::string(e.what()), dir + ": in use by the controller with pid " +
                                           std::to_string(::getpid()) + " (" + dir +
                                           "/controller.lock); --fresh deletes nothing while it "
                                           "runs: stop it first");
    }
    EXPECT_FALSE(second.held());
    first.release();
    second.take(dir, false);  // released: the next one takes it
    EXPECT_TRUE(second.held());
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace faultline::live
