// End-to-end tests of live mode on one machine: a controller, four job machines and one
// warm standby, each machine an agent with its ranks in its own network namespace
// (veth pairs on a bridge) where the machine allows it, else on loopback. The job is the
// reference training job; faults are real: SIGKILL, SIGSTOP, a bit flip, a NIC taken
// down, a killed controller. Checks compare with independent references: a fault-free
// single-process run of the same seed, the fault's injection time, the ground truth.
//
// Here the faults themselves and the fault drill; the other tests/realexec/live/live_*_test.cc
// files: launchers (ssh, Slurm), hostile peers, authentication, the state directory,
// verdicts that end a run, Prometheus, probes across machines, the account, heartbeats.
#include "tests/realexec/live/live_cluster.h"
#include "tests/realexec/live/raw_peer.h"
#include "tests/realexec/live/replay_check.h"

namespace {

using namespace faultline::live_e2e;

TEST(LiveE2E, KilledRankIsDetectedReattemptedAndResumesBitExactly) {
  LiveCluster c("kill", json::object());
  c.start_controller();
  c.start_agents();
  ASSERT_FALSE(c.wait_step(20, 60).is_null()) << "training did not reach step 20";
  ASSERT_EQ(c.inject("m1", "kill"), 0);
  const double t_fault = c.fault_time("kill");
  ASSERT_GE(t_fault, 0);
  const json exit = c.wait_for(
      [&](const json& r) { return LiveCluster::is_event(r, "ProcessExit") && r["t_s"] >= t_fault; },
      20);
  ASSERT_FALSE(exit.is_null()) << "no ProcessExit after the kill";
  EXPECT_LT(exit["t_s"].get<double>() - t_fault, 5.0) << "detected within 5 s";
  const json started = c.wait_event_after("JobStarted", t_fault, 40);
  ASSERT_FALSE(started.is_null()) << "training did not resume";
  EXPECT_LT(started["t_s"].get<double>() - t_fault, 30.0) << "resumed within 30 s of the fault";
  // A rank killed without a log line is a transient crash to byterobust: the stop-time
  // tests pass and the job is reattempted on the same machines (the standby path is the
  // next test, where the machine itself is gone).
  const json restart = c.wait_action_after("StartJob", t_fault, 5);
  ASSERT_FALSE(restart.is_null());
  EXPECT_EQ(restart["action"].value("mechanism", ""), "reattempt");
  const long resumed_at = started["event"].value("step", -1L);
  ASSERT_FALSE(c.wait_step(resumed_at + 20, 60).is_null());
  c.stop_run();
  c.expect_bit_identical_to_reference();
}

// Daly (2006) higher-order optimum for a save of `write_s` seconds and a mean time between
// interruptions `mtbi_s`, from the paper (not from the module).
double daly_interval(double write_s, double mtbi_s) {
  if (write_s >= 2 * mtbi_s) return mtbi_s;
  const double r = write_s / (2 * mtbi_s);
  return std::sqrt(2 * write_s * mtbi_s) * (1 + std::sqrt(r) / 3 + r / 9) - write_s;
}

// The adaptive checkpoint planner (checkpoint=daly) in live mode, unchanged: a plan at the
// start from its prior, and at every interruption Daly's optimum for the interruptions and
// the running time it saw, which the ranks use from their next launch. (It re-planned at
// the restart, after the launch, so each plan reached the ranks one restart late.) The prior (0.2
// h, worth 0.01 interruptions) asks for a save every ~26 s (~260 steps); one interruption after a
// few seconds of running brings that to ~3 s (~30 steps), so the rank restores from a
// step the first plan would never have saved. The intervals are checked against the
// formula applied to the event log's own times, and the losses stay bit-identical.
TEST(LiveE2E, TheDalyPlannerReplansAtEveryInterruptionAndTheRanksSaveAtTheNewInterval) {
  const double prior_h = 0.2, weight = 0.01, write_s = 0.5;
  LiveCluster c("daly", json{{"checkpoint", "daly"},
                             {"daly_prior_mtbf_h", prior_h},
                             {"daly_prior_weight", weight},
                             {"remote_checkpoint_write_s", write_s},
                             {"daly_min_interval_s", 0.5}});
  c.start_controller();
  c.start_agents();
  ASSERT_FALSE(c.wait_step(20, 60).is_null()) << "training did not reach step 20";
  // The ranks' interval for a plan: the outcome of its action ("checkpoint every N steps").
  auto every_of = [&](const json& action) {
    const json out = c.wait_for(
        [&](const json& r) { return r.value("kind", "") == "outcome" && r["id"] == action["id"]; },
        10);
    const std::string d = out.value("detail", "");
    const auto at = d.find("checkpoint every ");
    return at == std::string::npos ? -1L : std::stol(d.substr(at + 17));
  };
  auto restart_after = [&](double t) {
    const json plan = c.wait_action_after("SetCheckpointPlan", t, 60);
    const json started = c.wait_event_after("JobStarted", t, 60);
    return std::make_pair(plan, started);
  };
  // Interruption 1.
  const json before1 = c.wait_step(c.last_step() + 1, 10);
  ASSERT_FALSE(before1.is_null());
  ASSERT_EQ(c.inject("m1", "kill"), 0);
  const auto [plan1, started1] = restart_after(before1["t_s"].get<double>());
  ASSERT_FALSE(plan1.is_null()) << "no plan at the restart";
  ASSERT_FALSE(started1.is_null()) << "training did not resume";
  const long every1 = every_of(plan1);
  const long restored1 = started1["event"].value("step", -1L);
  // Interruption 2, two intervals of the new plan later.
  ASSERT_GT(every1, 0);
  ASSERT_FALSE(c.wait_step(restored1 + 2 * every1 + 5, 120).is_null());
  const json before2 = c.wait_step(c.last_step() + 1, 10);
  ASSERT_FALSE(before2.is_null());
  ASSERT_EQ(c.inject("m1", "kill"), 0);
  const auto [plan2, started2] = restart_after(before2["t_s"].get<double>());
  ASSERT_FALSE(started2.is_null()) << "training did not resume";
  const long restored2 = started2["event"].value("step", -1L);
  ASSERT_FALSE(c.wait_step(restored2 + 10, 60).is_null());
  c.stop_run();

  // The first plan: the prior alone; the ranks save every ~260 steps.
  std::vector<json> plans;
  std::vector<double> starts, stops;
  for (const auto& r : c.records()) {
    if (LiveCluster::is_action(r, "SetCheckpointPlan")) plans.push_back(r);
    if (LiveCluster::is_event(r, "JobStarted")) starts.push_back(r["t_s"]);
    if (LiveCluster::is_action(r, "StopJob") && stops.size() < starts.size())
      stops.push_back(r["t_s"]);
  }
  ASSERT_GE(plans.size(), 3u) << "a plan at the start and one at each restart";
  ASSERT_GE(starts.size(), 3u);
  ASSERT_GE(stops.size(), 2u);
  EXPECT_NEAR(plans[0]["action"]["interval_s"].get<double>(),
              daly_interval(write_s, prior_h * 3600), 1e-6);
  EXPECT_EQ(plans[0]["action"].value("tier", ""), "remote");
  const long every0 = every_of(plans[0]);
  EXPECT_GT(every0, 200);
  // At restart k: Daly's optimum for k interruptions in the running time so far.
  double running = 0;
  for (std::size_t k = 1; k <= 2; ++k) {
    running += stops[k - 1] - starts[k - 1];
    const double mtbi = (weight * prior_h * 3600 + running) / (weight + static_cast<double>(k));
    EXPECT_NEAR(plans[k]["action"]["interval_s"].get<double>(), daly_interval(write_s, mtbi), 1e-3)
        << "restart " << k << ": " << plans[k]["action"].value("reason", "");
    EXPECT_GE(plans[k]["t_s"].get<double>(), stops[k - 1]) << "planned at the interruption";
    EXPECT_LE(plans[k]["t_s"].get<double>(), starts[k]) << "planned before the restart";
  }
  EXPECT_LT(every1, every0 / 4);
  // The second run saved at the new interval: it restored from a step that is a multiple
  // of it, at least one interval in, which the first plan would not have saved.
  EXPECT_EQ(restored2 % every1, 0) << "restored from step " << restored2 << ", every " << every1;
  EXPECT_GE(restored2, restored1 + every1);
  EXPECT_LT(restored2, every0);
  c.expect_bit_identical_to_reference();
}

TEST(LiveE2E, KillNineOfAMachineSwapsInTheWarmStandbyAndResumesBitExactly) {
  LiveCluster c("machine-kill", json::object());
  c.start_controller();
  c.start_agents();
  ASSERT_FALSE(c.wait_step(20, 60).is_null());
  // kill -9 of m2's processes (its agent and the rank it runs), from outside.
  const json before = c.wait_step(c.last_step() + 1, 10);
  ASSERT_FALSE(before.is_null());
  c.kill_machine("m2");
  const double t_fault = before["t_s"].get<double>();  // no later than the kill
  const json alert = c.wait_for(
      [&](const json& r) {
        return LiveCluster::is_event(r, "InspectionAlert") && r["t_s"] >= t_fault;
      },
      20);
  ASSERT_FALSE(alert.is_null());
  EXPECT_EQ(alert["event"].value("machine", -9), 2);
  EXPECT_LT(alert["t_s"].get<double>() - t_fault, 5.0) << "detected within 5 s";
  const json ready = c.wait_event_after("MachinesReady", t_fault, 30);
  ASSERT_FALSE(ready.is_null()) << "the standby did not join";
  EXPECT_EQ(ready["event"]["machines"], json::array({4})) << "standby s0 took slot 2";
  const json started = c.wait_event_after("JobStarted", t_fault, 40);
  ASSERT_FALSE(started.is_null());
  EXPECT_LT(started["t_s"].get<double>() - t_fault, 30.0) << "resumed within 30 s";
  // Resumed from the newest complete checkpoint: every step checkpoints, so at most the
  // step in flight is lost.
  EXPECT_GE(started["event"].value("step", 0L), before.value("step", 0L) - 1);
  ASSERT_FALSE(c.wait_step(started["event"].value("step", 0L) + 15, 60).is_null());
  c.stop_run();
  c.expect_bit_identical_to_reference();
}

TEST(LiveE2E, InjectedMachineLossIsRecordedAndReplacedByTheStandby) {
  LiveCluster c("machine-down", json::object());
  c.start_controller();
  c.start_agents();
  ASSERT_FALSE(c.wait_step(20, 60).is_null());
  ASSERT_EQ(c.inject("m1", "machine_down"), 0);
  const double t_fault = c.fault_time("machine_down");
  ASSERT_GE(t_fault, 0) << "the injection is in the event log as ground truth";
  const json evict = c.wait_for(
      [&](const json& r) {
        return LiveCluster::is_action(r, "EvictMachines") && r["t_s"] >= t_fault;
      },
      20);
  ASSERT_FALSE(evict.is_null());
  EXPECT_EQ(evict["action"]["machines"], json::array({1}));
  EXPECT_EQ(evict["action"].value("mechanism", ""), "realtime_eviction");
  const json started = c.wait_event_after("JobStarted", t_fault, 40);
  ASSERT_FALSE(started.is_null());
  c.stop_run();
}

// A host that drops off the network says nothing: no exit, no closed connection. Its agent
// goes silent and must be declared lost within the heartbeat timeout, and the machine
// handled as failed: evicted, the standby in, training on.
TEST(LiveE2E, AnUnreachableHostIsReportedWithinTheHeartbeatTimeoutAndReplaced) {
  if (!netns_usable()) GTEST_SKIP() << "needs root and network namespaces (hosts are namespaces)";
  LiveCluster c("unreachable", json::object());
  c.start_controller();
  c.start_agents();
  ASSERT_FALSE(c.wait_step(20, 60).is_null());
  const json before =
      c.wait_step(c.last_step() + 1, 10);  // a fresh record: the controller's clock now
  ASSERT_FALSE(before.is_null());
  c.cut_links(1);
  const double t_cut = before["t_s"].get<double>();
  const json lost = c.wait_for(
      [&](const json& r) {
        return r.value("kind", "") == "note" && r["t_s"] >= t_cut &&
               r.value("text", "").find("agent of m1 lost") != std::string::npos;
      },
      20);
  ASSERT_FALSE(lost.is_null()) << "m1's silence was never reported";
  const double timeout_s = c.config_json()["heartbeat_timeout_s"].get<double>();
  EXPECT_LE(lost["t_s"].get<double>() - t_cut, timeout_s + 1.0)
      << "reported " << lost["t_s"].get<double>() - t_cut << " s after the cut: " << lost.dump();
  const json evict = c.wait_for(
      [&](const json& r) {
        return LiveCluster::is_action(r, "EvictMachines") && r["t_s"] >= t_cut &&
               r["action"]["machines"] == json::array({1});
      },
      30);
  ASSERT_FALSE(evict.is_null()) << "m1 was not evicted";
  std::cout << "[unreachable] lost after " << lost["t_s"].get<double>() - t_cut
            << " s, evicted after " << evict["t_s"].get<double>() - t_cut << " s ("
            << evict["action"].value("mechanism", "") << ")\n";
  const json started = c.wait_event_after("JobStarted", t_cut, 60);
  ASSERT_FALSE(started.is_null());
  ASSERT_FALSE(c.wait_step(started["event"].value("step", 0L) + 10, 60).is_null())
      << "training did not go on";
  c.stop_run();
}

TEST(LiveE2E, FrozenRankIsFoundByStackAggregationAndEvicted) {
  LiveCluster c("stop", json::object());
  c.start_controller();
  c.start_agents();
  ASSERT_FALSE(c.wait_step(20, 60).is_null());
  ASSERT_EQ(c.inject("m2", "stop"), 0);
  const double t_fault = c.fault_time("stop");
  const json stalled = c.wait_note_after("detected: progress stalled", t_fault, 40);
  ASSERT_FALSE(stalled.is_null()) << "stall not detected";
  EXPECT_LT(stalled["t_s"].get<double>() - t_fault, 8.0 + 10.0)
      << "within the stall window plus 10 s";
  const json evict = c.wait_action_after("EvictMachines", t_fault, 60);
  ASSERT_FALSE(evict.is_null());
  EXPECT_EQ(evict["action"]["machines"], json::array({2}))
      << "the PP group of slot 2 (PP = 1: the machine)";
  EXPECT_EQ(evict["action"].value("mechanism", ""), "analyzer_over_eviction");
  const json started = c.wait_event_after("JobStarted", t_fault, 60);
  ASSERT_FALSE(started.is_null());
  ASSERT_FALSE(c.wait_step(started["event"].value("step", 0L) + 10, 60).is_null());
  c.stop_run();
}

TEST(LiveE2E, SilentBitFlipIsLocatedByReplayAndEvicted) {
  LiveCluster c("sdc", json::object());
  c.start_controller();
  c.start_agents();
  ASSERT_FALSE(c.wait_step(15, 60).is_null());
  ASSERT_EQ(c.inject("m1", "sdc", "after=3"), 0);
  const double t_fault = c.fault_time("sdc");
  const json caught = c.wait_note_after("detected: metric anomaly", t_fault, 60);
  ASSERT_FALSE(caught.is_null()) << "the bit flip was not caught by the metric triggers";
  const json evict = c.wait_action_after("EvictMachines", t_fault, 120);
  ASSERT_FALSE(evict.is_null()) << "nothing evicted";
  EXPECT_EQ(evict["action"]["machines"], json::array({1}));
  EXPECT_EQ(evict["action"].value("mechanism", ""), "replay");
  const json started = c.wait_event_after("JobStarted", evict["t_s"].get<double>(), 60);
  ASSERT_FALSE(started.is_null());
  c.stop_run();
}

TEST(LiveE2E, NicDownRaisesInspectionAlertsAndEvictsPerTheFlapRule) {
  if (!netns_usable())
    GTEST_SKIP() << "network namespaces are not available here (needs root and ip netns)";
  LiveCluster c("nic", json::object());
  c.start_controller();
  c.start_agents();
  ASSERT_FALSE(c.wait_step(15, 60).is_null());
  ASSERT_EQ(c.inject("m3", "nic_down"), 0);
  const double t_fault = c.fault_time("nic_down");
  const json evict = c.wait_action_after("EvictMachines", t_fault, 60);
  ASSERT_FALSE(evict.is_null());
  EXPECT_EQ(evict["action"]["machines"], json::array({3}));
  EXPECT_EQ(evict["action"].value("mechanism", ""), "realtime_eviction");
  int alerts = 0;
  for (const auto& r : c.records())
    if (LiveCluster::is_event(r, "InspectionAlert") && r["event"].value("kind", "") == "nic" &&
        r["t_s"] <= evict["t_s"])
      ++alerts;
  EXPECT_GE(alerts, 2) << "evicted only after the flap count of alerts";
  const json started = c.wait_event_after("JobStarted", evict["t_s"].get<double>(), 60);
  ASSERT_FALSE(started.is_null());
  c.stop_run();
}

// The operator's overnight drill: hang, SIGSTOP and a killed agent (restarted by its
// supervisor), each twice, with a warm pool of 2. After each, without a human, the job
// trains again and the pool is back to 2: the machine taken out passes its repair check
// (gpu_diag, bit-wise) and rejoins, or, for the killed agent, rejoins once its agent is back.
TEST(LiveE2E, FaultDrillThePoolHealsItselfAfterEachFault) {
  LiveCluster c("drill", json{{"standby_pool", 2}, {"stall_window_s", 5}}, 100, 2);
  c.edit_config([](json& cfg) {
    cfg["repair"] = {
        {"check_after_s", 1}, {"retry_after_s", 2}, {"max_checks", 5}, {"retire_after", 3}};
  });
  c.start_controller();
  c.start_agents();
  ASSERT_FALSE(c.wait_step(10, 60).is_null());
  const std::string host = c.controller_host();
  const int port = c.controller_port();
  auto status = [&]() -> json {
    RawPeer p(host, port);
    if (p.authenticate(c.token()).is_null()) return json();
    p.send(json{{"type", "status"}, {"req", 1}});
    const json r = p.receive_type("done");
    return r.is_object() && r.contains("status") ? r["status"] : json();
  };
  // Waits until the fault opened an incident (more than `incidents`) and every incident is
  // resolved, the pool holds 2, every slot is filled and the job has made progress. (Without
  // the incident, a step count behind the controller's let the next fault in before the hang
  // was even detected: two outliers in one capture, the whole group evicted.)
  auto healed = [&](long after_step, int incidents, double timeout_s) -> json {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    while (std::chrono::steady_clock::now() < end) {
      const json st = status();
      if (st.is_object() && st["standby"].size() == 2 && st.value("running", false) &&
          st.value("step", -1L) > after_step + 5 && st.value("incident_count", 0) > incidents) {
        bool full = true;
        for (const auto& s : st["slots"]) full &= s.is_string();
        if (st.contains("incidents"))
          for (const auto& in : st["incidents"]) full &= in.value("phase", "") == "resolved";
        if (full) return st;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }
    return status();
  };
  std::map<std::string, int> struck;
  const std::vector<std::string> drill = {"hang", "stop", "agent", "hang", "stop", "agent"};
  for (size_t i = 0; i < drill.size(); ++i) {
    const json before = status();
    ASSERT_TRUE(before.is_object());
    // The victim: a machine in a slot, struck least so far (none reaches retire_after).
    std::string victim;
    for (const auto& s : before["slots"])
      if (s.is_string() && (victim.empty() || struck[s.get<std::string>()] < struck[victim]))
        victim = s.get<std::string>();
    ++struck[victim];
    SCOPED_TRACE("fault " + std::to_string(i) + ": " + drill[i] + " on " + victim);
    const long step = std::max(c.last_step(), before.value("step", -1L));
    if (drill[i] == "agent") {
      c.kill_machine(victim);
      std::this_thread::sleep_for(std::chrono::seconds(1));
      c.restart_agent(victim);
    } else {
      ASSERT_EQ(c.inject(victim, drill[i]), 0);
    }
    const json after = healed(step, before.value("incident_count", 0), 90);
    ASSERT_TRUE(after.is_object());
    EXPECT_EQ(after["standby"].size(), 2u) << after.dump();
    EXPECT_GT(after.value("step", -1L), step + 5) << "the job did not train again";
    EXPECT_TRUE(after["retired"].empty()) << after.dump();
    if (HasFailure()) break;
  }
  // Every return to the pool is noted, by its repair check or its agent's return.
  int back = 0;
  for (const auto& r : c.records()) {
    if (!LiveCluster::is_note(r, "")) continue;
    const std::string text = r.value("text", "");
    if (text.find("repair") != std::string::npos || text.find("pool") != std::string::npos)
      std::cout << "  t=" << r.value("t_s", 0.0) << " s: " << text << "\n";
    if (text.find("passed its repair check") != std::string::npos) ++back;
  }
  EXPECT_GE(back, 6);
  // The operator's view: a table by default, the same as JSON with --json.
  ASSERT_EQ(c.client_to({"status", c.config()}, c.dir() + "/status.txt"), 0);
  const std::string table = slurp(c.dir() + "/status.txt");
  std::cout << table;
  EXPECT_NE(table.find("ETTR so far"), std::string::npos) << table;
  EXPECT_NE(table.find("standby pool: 2"), std::string::npos) << table;
  EXPECT_NE(table.find("MACHINE"), std::string::npos);
  EXPECT_NE(table.find("resolved"), std::string::npos);
  ASSERT_EQ(c.client_to({"status", c.config(), "--json"}, c.dir() + "/status.json"), 0);
  const json st = json::parse(slurp(c.dir() + "/status.json"), nullptr, false);
  ASSERT_TRUE(st.is_object());
  EXPECT_EQ(st["machines"].size(), 6u);
  EXPECT_GE(st["incident_count"].get<int>(), 6);
  // Six faults in about forty seconds, each with a restart and a repair check: the ETTR
  // depends on the machine's load (0.18 on a busy 2-core machine, 0.2-0.3 idle). What holds
  // anywhere: the account is alive and a fraction; training after each fault is checked above.
  EXPECT_GT(st["ettr_so_far"].get<double>(), 0.05);
  EXPECT_LE(st["ettr_so_far"].get<double>(), 1.0);
  for (const auto& in : st["incidents"]) EXPECT_EQ(in["phase"], "resolved") << in.dump();
  c.stop_run();
  // The killed agents have no fault record (killed outside `live inject`): "unrecorded fault".
  expect_replay_takes_the_live_decisions(c.dir());
}

}  // namespace
