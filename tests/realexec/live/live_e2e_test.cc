// End-to-end tests of live mode on one machine: a controller, four job machines and one
// warm standby, each machine an agent with its ranks in its own network namespace
// (veth pairs on a bridge) where the machine allows it, else on loopback. The job is the
// reference training job; faults are real: SIGKILL, SIGSTOP, a bit flip, a NIC taken
// down, a killed controller. Checks compare with independent references: a fault-free
// single-process run of the same seed, the fault's injection time, the ground truth.
#include <poll.h>

#include <atomic>

#include "tests/realexec/idle_flood.h"
#include "tests/realexec/live/live_cluster.h"
#include "tests/realexec/live/prometheus_support.h"
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
  const json started = c.wait_for(
      [&](const json& r) { return LiveCluster::is_event(r, "JobStarted") && r["t_s"] > t_fault; },
      40);
  ASSERT_FALSE(started.is_null()) << "training did not resume";
  EXPECT_LT(started["t_s"].get<double>() - t_fault, 30.0) << "resumed within 30 s of the fault";
  // A rank killed without a log line is a transient crash to byterobust: the stop-time
  // tests pass and the job is reattempted on the same machines (the standby path is the
  // next test, where the machine itself is gone).
  const json restart = c.wait_for(
      [&](const json& r) { return LiveCluster::is_action(r, "StartJob") && r["t_s"] > t_fault; },
      5);
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
    const json plan = c.wait_for(
        [&](const json& r) {
          return LiveCluster::is_action(r, "SetCheckpointPlan") && r["t_s"] > t;
        },
        60);
    const json started = c.wait_for(
        [&](const json& r) { return LiveCluster::is_event(r, "JobStarted") && r["t_s"] > t; }, 60);
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
  const json ready = c.wait_for(
      [&](const json& r) {
        return LiveCluster::is_event(r, "MachinesReady") && r["t_s"] > t_fault;
      },
      30);
  ASSERT_FALSE(ready.is_null()) << "the standby did not join";
  EXPECT_EQ(ready["event"]["machines"], json::array({4})) << "standby s0 took slot 2";
  const json started = c.wait_for(
      [&](const json& r) { return LiveCluster::is_event(r, "JobStarted") && r["t_s"] > t_fault; },
      40);
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
  const json started = c.wait_for(
      [&](const json& r) { return LiveCluster::is_event(r, "JobStarted") && r["t_s"] > t_fault; },
      40);
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
  const json started = c.wait_for(
      [&](const json& r) { return LiveCluster::is_event(r, "JobStarted") && r["t_s"] > t_cut; },
      60);
  ASSERT_FALSE(started.is_null());
  ASSERT_FALSE(c.wait_step(started["event"].value("step", 0L) + 10, 60).is_null())
      << "training did not go on";
  c.stop_run();
}

// The fault suite (LiveCluster::run_fault_suite) with every agent started over ssh by
// `faultline live launch --via ssh` on five namespace hosts; the machine_down's agent exits
// and the launcher starts it again; a second controller restart after the eviction.
TEST(LiveSsh, TheFaultSuitePassesWithAgentsLaunchedOverSsh) {
  if (!netns_usable()) GTEST_SKIP() << "needs root and network namespaces (hosts are namespaces)";
  LiveCluster c("ssh", json{{"standby_pool", 1}, {"stall_window_s", 5}});
  c.start_controller();
  c.start_agents_over_ssh();
  ASSERT_FALSE(c.wait_step(15, 60).is_null()) << c.launcher_log();
  c.run_fault_suite();
  if (::testing::Test::HasFatalFailure()) return;
  const std::string log = c.launcher_log();
  const auto down = log.find("m3 (root@" + c.mgmt_addr(3) + "): its agent ended: exit code 137");
  ASSERT_NE(down, std::string::npos) << "the machine_down agent's end was not reported:\n" << log;
  EXPECT_NE(log.substr(down, log.find('\n', down) - down).find("; starting it again in 1 s"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("m3 (root@" + c.mgmt_addr(3) + "): started", down), std::string::npos)
      << "not restarted:\n"
      << log;
  // A restarted controller adopts the job the ssh-launched agents kept running.
  const long before = c.last_step();
  c.kill_controller(SIGTERM);
  c.start_controller(false);
  ASSERT_FALSE(c.wait_step(before + 10, 60).is_null())
      << "no training after the controller restart";
  c.stop_run();
  expect_replay_takes_the_live_decisions(c.dir());
  const int launcher_status = c.stop_launcher();
  EXPECT_EQ(launcher_status, 0) << c.launcher_log();
}

// A host whose sshd does not answer: one line naming the machine, its host and ssh's
// reason, and retries with a backoff; the other machines train.
TEST(LiveSsh, AnUnreachableSshHostIsReportedByNameAndRetried) {
  if (!netns_usable()) GTEST_SKIP() << "needs root and network namespaces (hosts are namespaces)";
  LiveCluster c("ssh-unreachable", json{{"standby_pool", 0}});
  c.start_controller();
  c.start_agents_over_ssh({"s0"});
  ASSERT_FALSE(c.wait_step(10, 60).is_null()) << c.launcher_log();
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < end &&
         c.launcher_log().find("ssh failed") == std::string::npos)
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const std::string log = c.launcher_log();
  std::cout << log;
  const auto failed = log.find("ssh failed");
  ASSERT_NE(failed, std::string::npos) << log;
  const auto begin = log.rfind('\n', failed) + 1;
  const std::string s0 = log.substr(begin, log.find('\n', failed) - begin);
  EXPECT_EQ(s0.rfind("faultline launch: s0 (root@" + c.mgmt_addr(4) +
                         "): ssh failed (exit 255): ssh: connect to host",
                     0),
            0u)
      << s0;
  EXPECT_NE(s0.find("starting it again in"), std::string::npos) << s0;
  c.stop_run();
}

// A real Slurm cluster (one slurmd per namespace host) and `faultline live launch --via
// slurm` in an allocation of all of them, with the config `faultline live slurm-config`
// made of it: s1, named by no machine, is a spare node and becomes the second standby. The
// fault suite: a killed rank, a controller restart (it adopts the job), a hang (m2 evicted,
// s0 swapped in), a NaN and a machine_down (m3 evicted; s1, the spare node, swapped in:
// m2's node is drained and gets no step again), each followed by training. Evicted nodes are
// drained with faultline's reason and get no step again; when the allocation is gone,
// srun's refusal is one line naming the node and only the evicted nodes stay drained.
TEST(LiveSlurm, TheFaultSuitePassesWithAgentsAsJobStepsAndSpareNodesAsStandbys) {
  REQUIRE_SLURM();
  LiveCluster c("slurm", json{{"standby_pool", 2}, {"stall_window_s", 5}}, 100, 2);
  c.edit_config([&](json& cfg) {
    cfg["standby"].erase(1);  // s1: a node of the allocation that the config does not name
    cfg["slurm_standby"] = {{"workdir", c.dir() + "/{node}"}, {"nic", "data0"}};
  });
  const std::string job = c.start_slurm();
  ASSERT_FALSE(job.empty());
  const std::string effective = c.dir() + "/live-slurm.json";
  ASSERT_EQ(c.client_to({"slurm-config", c.config(), "--slurm-job", job, "--out", effective},
                        c.dir() + "/sc.out"),
            0)
      << slurp(c.dir() + "/sc.out");
  EXPECT_EQ(slurp(c.dir() + "/sc.out"),
            "faultline live slurm-config: slurm job " + job +
                ": 4 machines, 2 standbys (1 from spare nodes: s1) in " + effective + "\n");
  const json eff = json::parse(slurp(effective));
  ASSERT_EQ(eff["standby"].size(), 2u) << eff.dump(2);
  EXPECT_EQ(eff["standby"][1], (json{{"name", "s1"},
                                     {"slurm_node", "s1"},
                                     {"addr", c.mgmt_addr(5)},
                                     {"workdir", c.dir() + "/s1"},
                                     {"nic", "data0"}}));
  c.use_config(effective);
  c.start_controller();
  c.launch_over_slurm();
  ASSERT_FALSE(c.wait_step(15, 90).is_null()) << c.launcher_log();
  // Each agent is a step of the allocation, on its own node; no node is left unused.
  const std::string steps =
      c.slurm_cmd({"squeue", "--steps", "--noheader", "--jobs=" + job, "--format=%j %N"});
  for (const char* m : {"m0", "m1", "m2", "m3", "s0", "s1"})
    EXPECT_NE(steps.find(std::string("faultline-agent-") + m + " " + m), std::string::npos)
        << m << "\n"
        << steps;
  EXPECT_EQ(c.launcher_log().find("unused"), std::string::npos) << c.launcher_log();
  // The machines a fault at time t got evicted and the standbys that replaced them.
  auto swapped = [&](double t, const std::string& what, int evicted, int standby) {
    const json evict = c.wait_for(
        [&](const json& r) { return LiveCluster::is_action(r, "EvictMachines") && r["t_s"] >= t; },
        30);
    ASSERT_FALSE(evict.is_null()) << what << " evicted nothing";
    EXPECT_EQ(evict["action"]["machines"], json::array({evicted})) << what;
    const json ready = c.wait_for(
        [&](const json& r) { return LiveCluster::is_event(r, "MachinesReady") && r["t_s"] >= t; },
        30);
    ASSERT_FALSE(ready.is_null()) << what << ": no standby came";
    EXPECT_EQ(ready["event"]["machines"], json::array({standby})) << what;
  };
  c.run_fault_suite([&](const std::string& fault, double t) {
    // A hang is found by stack aggregation and evicts m2 (s0 comes); a machine_down evicts
    // m3, and m2's node being drained for good, the spare node's standby s1 (id 5) comes.
    if (fault == "hang") swapped(t, fault, 2, 4);
    if (fault == "machine_down") swapped(t, fault, 3, 5);
  });
  if (::testing::Test::HasFatalFailure()) return;
  // The launcher drains the evicted machines' nodes with the controller's reason.
  std::this_thread::sleep_for(
      std::chrono::seconds(2));  // a step the launcher might wrongly start again
  for (const std::string m : {"m2", "m3"}) {
    std::string node;
    for (int i = 0; i < 50; ++i, std::this_thread::sleep_for(std::chrono::milliseconds(200))) {
      node = c.slurm_cmd({"scontrol", "show", "node", m});
      if (node.find("DRAIN") != std::string::npos) break;
    }
    EXPECT_NE(node.find("DRAIN"), std::string::npos) << node << c.launcher_log();
    EXPECT_NE(node.find("Reason=faultline: evicted " + m + ": "), std::string::npos) << node;
    // "draining" while the allocation holds it, "drained" after.
    EXPECT_NE(c.slurm_cmd({"sinfo", "--noheader", "--nodes=" + m, "--format=%T"}).find("drain"),
              std::string::npos)
        << c.slurm_cmd({"sinfo", "--noheader", "--nodes=" + m, "--format=%T"});
  }
  std::string log = c.launcher_log();
  std::cout << log;
  for (const std::string m : {"m2", "m3"}) {
    const std::string who = m + " (slurm node " + m + "): ";
    const auto evicted = log.find(who + "evicted by the controller (");
    ASSERT_NE(evicted, std::string::npos) << log;
    EXPECT_NE(log.find(who + "drained slurm node " + m, evicted), std::string::npos) << log;
    EXPECT_EQ(log.find(who + "started", evicted), std::string::npos)
        << "a step on an evicted node:\n"
        << log;
    EXPECT_EQ(c.slurm_cmd({"squeue", "--steps", "--noheader", "--jobs=" + job, "--nodelist=" + m,
                           "--format=%j"}),
              "");
  }
  // The allocation ends under the agents and the launcher ends (exit 1) instead of retrying
  // forever. Whichever comes first ends it: srun's refusal of a restart (one line naming the
  // node and Slurm's reason), or the controller evicting an agent lost with the allocation
  // (the node is not drained: the allocation is over). Each lost agent is an alert the
  // controller acts on, so the eviction often wins the race against the 1 s restart.
  EXPECT_GT(c.last_step(), 0);
  c.slurm_cmd({"scancel", job});
  for (int i = 0; i < 150; ++i, std::this_thread::sleep_for(std::chrono::milliseconds(200))) {
    log = c.launcher_log();
    if (log.find("; ending every session") != std::string::npos) break;
  }
  std::cout << log;
  const auto ended = log.find("faultline launch: slurm job " + job + " is over (squeue: ");
  ASSERT_NE(ended, std::string::npos) << log;
  EXPECT_NE(log.find("; ending every session", ended), std::string::npos) << log;
  const auto srun = log.rfind("): srun failed (exit 1): ", ended);
  const auto evicted_over =
      log.rfind(" not drained: slurm job " + job + " is over (squeue: ", ended);
  ASSERT_TRUE(srun != std::string::npos || evicted_over != std::string::npos)
      << "the launcher ended without saying what showed it the allocation was over:\n"
      << log;
  if (srun != std::string::npos && (evicted_over == std::string::npos || srun > evicted_over)) {
    const auto at = log.rfind('\n', srun) + 1;
    const std::string refused = log.substr(at, log.find('\n', srun) - at);
    EXPECT_NE(refused.find(" (slurm node "), std::string::npos) << refused;
    EXPECT_NE(refused.find("job " + job), std::string::npos) << refused;
    EXPECT_NE(refused.find("; not restarted"), std::string::npos) << refused;
  }
  // Agents lost with the allocation are no fault of their nodes: only m2 and m3 are drained.
  for (const char* m : {"m0", "m1", "s0", "s1"})
    EXPECT_EQ(c.slurm_cmd({"scontrol", "show", "node", m}).find("DRAIN"), std::string::npos)
        << m << "\n"
        << log;
  c.stop_run();
  // The agents lost with the allocation have no fault record: "unrecorded fault".
  expect_replay_takes_the_live_decisions(c.dir());
  EXPECT_EQ(c.stop_launcher(), 1) << log;
}

// A machine whose Slurm node is not in the allocation: one line naming it, nothing started.
TEST(LiveSlurm, ANodeOutsideTheAllocationIsRefusedInOneLine) {
  REQUIRE_SLURM();
  LiveCluster c("slurm-bad", json::object());
  c.edit_config([](json& cfg) { cfg["machines"][1]["slurm_node"] = "gpu-404"; });
  const std::string job = c.start_slurm();
  ASSERT_FALSE(job.empty());
  const int rc = c.client_to({"launch", c.config(), "--via", "slurm", "--slurm-job", job},
                             c.dir() + "/launch.out");
  const std::string out = slurp(c.dir() + "/launch.out");
  EXPECT_EQ(rc, 2) << out;
  EXPECT_EQ(out, "faultline live launch: m1: slurm node \"gpu-404\" is not in allocation " + job +
                     " (its nodes: m0,m1,m2,m3,s0)\n");
  EXPECT_TRUE(!fs::exists(c.dir() + "/state/launch") || fs::is_empty(c.dir() + "/state/launch"))
      << "nothing started";
}

TEST(LiveE2E, FrozenRankIsFoundByStackAggregationAndEvicted) {
  LiveCluster c("stop", json::object());
  c.start_controller();
  c.start_agents();
  ASSERT_FALSE(c.wait_step(20, 60).is_null());
  ASSERT_EQ(c.inject("m2", "stop"), 0);
  const double t_fault = c.fault_time("stop");
  const json stalled = c.wait_for(
      [&](const json& r) {
        return LiveCluster::is_note(r, "detected: progress stalled") && r["t_s"] > t_fault;
      },
      40);
  ASSERT_FALSE(stalled.is_null()) << "stall not detected";
  EXPECT_LT(stalled["t_s"].get<double>() - t_fault, 8.0 + 10.0)
      << "within the stall window plus 10 s";
  const json evict = c.wait_for(
      [&](const json& r) {
        return LiveCluster::is_action(r, "EvictMachines") && r["t_s"] > t_fault;
      },
      60);
  ASSERT_FALSE(evict.is_null());
  EXPECT_EQ(evict["action"]["machines"], json::array({2}))
      << "the PP group of slot 2 (PP = 1: the machine)";
  EXPECT_EQ(evict["action"].value("mechanism", ""), "analyzer_over_eviction");
  const json started = c.wait_for(
      [&](const json& r) { return LiveCluster::is_event(r, "JobStarted") && r["t_s"] > t_fault; },
      60);
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
  const json caught = c.wait_for(
      [&](const json& r) {
        return LiveCluster::is_note(r, "detected: metric anomaly") && r["t_s"] > t_fault;
      },
      60);
  ASSERT_FALSE(caught.is_null()) << "the bit flip was not caught by the metric triggers";
  const json evict = c.wait_for(
      [&](const json& r) {
        return LiveCluster::is_action(r, "EvictMachines") && r["t_s"] > t_fault;
      },
      120);
  ASSERT_FALSE(evict.is_null()) << "nothing evicted";
  EXPECT_EQ(evict["action"]["machines"], json::array({1}));
  EXPECT_EQ(evict["action"].value("mechanism", ""), "replay");
  const json started = c.wait_for(
      [&](const json& r) {
        return LiveCluster::is_event(r, "JobStarted") && r["t_s"] > evict["t_s"];
      },
      60);
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
  const json evict = c.wait_for(
      [&](const json& r) {
        return LiveCluster::is_action(r, "EvictMachines") && r["t_s"] > t_fault;
      },
      60);
  ASSERT_FALSE(evict.is_null());
  EXPECT_EQ(evict["action"]["machines"], json::array({3}));
  EXPECT_EQ(evict["action"].value("mechanism", ""), "realtime_eviction");
  int alerts = 0;
  for (const auto& r : c.records())
    if (LiveCluster::is_event(r, "InspectionAlert") && r["event"].value("kind", "") == "nic" &&
        r["t_s"] <= evict["t_s"])
      ++alerts;
  EXPECT_GE(alerts, 2) << "evicted only after the flap count of alerts";
  const json started = c.wait_for(
      [&](const json& r) {
        return LiveCluster::is_event(r, "JobStarted") && r["t_s"] > evict["t_s"];
      },
      60);
  ASSERT_FALSE(started.is_null());
  c.stop_run();
}

// A peer that speaks the framed protocol raw, blocking, with a receive timeout: what an
// attacker on the network, a buggy client or a confused agent would send.
class RawPeer {
 public:
  RawPeer(const std::string& host, int port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    inet_pton(AF_INET, host.c_str(), &a.sin_addr);
    timeval tv{1, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      close(fd_);
      fd_ = -1;
    }
  }
  // An accepted connection (the rogue controller's side).
  explicit RawPeer(int fd) : fd_(fd) {
    timeval tv{1, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  ~RawPeer() {
    if (fd_ >= 0) close(fd_);
  }
  // The peer's side of the handshake with `key`; returns the welcome (null when refused).
  json authenticate(const std::string& key, const std::string& role = "client",
                    const std::string& name = "") {
    faultline::live::PeerHandshake h(role, name);
    send(h.hello(2));
    const json ch = receive_type("challenge");
    if (ch.is_null()) return json();
    auto answer = h.answer(key, faultline::live::decode_challenge(ch));
    if (!answer) return json();
    send(*answer);
    return receive_type("welcome");
  }
  bool ok() const { return fd_ >= 0; }
  // Bytes as they are, no framing (a partial frame, a bad length).
  bool send_raw(const std::string& bytes) {
    return ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
           static_cast<ssize_t>(bytes.size());
  }
  bool send_text(const std::string& body) {
    const std::string f = frame(body);
    return ::send(fd_, f.data(), f.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(f.size());
  }
  // Invalid UTF-8 in a mutated string goes out as U+FFFD (raw bytes are the fuzz's).
  bool send(const json& m) {
    return send_text(m.dump(-1, ' ', false, json::error_handler_t::replace));
  }
  // The next message, or null when the peer closed or said nothing within a second.
  json receive() {
    std::string len(4, '\0');
    if (!read_exact(len.data(), 4)) return json();
    const std::uint32_t n =
        (std::uint32_t(std::uint8_t(len[0])) << 24) | (std::uint32_t(std::uint8_t(len[1])) << 16) |
        (std::uint32_t(std::uint8_t(len[2])) << 8) | std::uint32_t(std::uint8_t(len[3]));
    if (n > (1u << 20)) return json();
    std::string body(n, '\0');
    if (!read_exact(body.data(), n)) return json();
    return json::parse(body, nullptr, false);
  }
  // Skips other messages (e.g. an inspect request to an agent) until `type`; null when the
  // connection closes or goes quiet first. A refusal ends the wait too, kept in refusal().
  json receive_type(const std::string& type) {
    for (int i = 0; i < 20; ++i) {
      json m = receive();
      if (m.is_null() || m.is_discarded()) return json();
      if (m.value("type", "") == type) return m;
      if (m.value("type", "") == "refused") {
        refusal_ = m.value("reason", "");
        return json();
      }
    }
    return json();
  }
  const std::string& refusal() const { return refusal_; }

 private:
  bool read_exact(char* p, std::size_t n) {
    while (n > 0) {
      const ssize_t r = ::recv(fd_, p, n, 0);
      if (r <= 0) return false;
      p += r;
      n -= static_cast<std::size_t>(r);
    }
    return true;
  }
  int fd_ = -1;
  std::string refusal_;
};

// Each message that killed the controller in the operator's review, then tens of thousands
// of mutated ones, unauthenticated, as an operator client and as an agent: every one is
// refused with a reason, the controller stays up and answers, and the job keeps training.
TEST(LiveE2E, HostileFramesAreRefusedAndTheRunCarriesOn) {
  LiveCluster c("hostile", json::object());
  c.start_controller();
  c.start_agents();
  ASSERT_FALSE(c.wait_step(10, 60).is_null());
  const std::string host = c.controller_host();
  const int port = c.controller_port();
  auto alive = [&](const std::string& after) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ASSERT_TRUE(c.controller_alive()) << "the controller died after " << after;
  };
  // Before authentication: each on a connection of its own, refused with a reason.
  const json hello_ok = faultline::live::PeerHandshake("client", "").hello(2);
  json proto_text = hello_ok, role_number = hello_ok, old_protocol = hello_ok;
  proto_text["proto"] = "1";
  role_number["role"] = 7;
  old_protocol["proto"] = 1;
  old_protocol["token"] = c.token();  // the old clear-text hello
  for (const json& m : {json{{"type", nullptr}}, json{{"type", 5}}, json{{"type", {{"a", 1}}}},
                        proto_text, role_number, old_protocol}) {
    RawPeer p(host, port);
    ASSERT_TRUE(p.ok());
    ASSERT_TRUE(p.send(m));
    p.receive_type("welcome");
    EXPECT_FALSE(p.refusal().empty()) << m.dump() << " was not refused";
    alive(m.dump());
  }
  // An operator client: requests of the wrong shape get a failed reply, the session stays.
  {
    RawPeer p(host, port);
    ASSERT_FALSE(p.authenticate(c.token()).is_null());
    for (const json& m :
         {json{{"type", nullptr}}, json{{"type", "inject"}, {"machine", 3}, {"req", 1}},
          json{{"type", "status"}, {"req", {{"a", 1}}}},
          json{{"type", "update"}, {"version", 2}}}) {
      ASSERT_TRUE(p.send(m));
      const json r = p.receive_type("done");
      ASSERT_FALSE(r.is_null()) << m.dump();
      EXPECT_EQ(r.value("ok", true), false) << m.dump();
      alive(m.dump());
    }
    ASSERT_TRUE(p.send(json{{"type", "status"}, {"req", 2}}));
    EXPECT_EQ(p.receive_type("done").value("ok", false), true) << "the same session still answers";
  }
  // An agent: sessions are bound to their machine, so the name of a live one is refused;
  // the standby's agent is killed first and its name taken. Then a rank report whose NaN
  // flag is a string, for the generation that is running.
  {
    RawPeer p(host, port);
    EXPECT_TRUE(p.authenticate(c.token(), "agent", "m1").is_null());
    EXPECT_NE(p.refusal().find("m1 already has a live session"), std::string::npos) << p.refusal();
  }
  c.kill_machine("s0");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const json journal = json::parse(slurp(c.dir() + "/state/journal.json"), nullptr, false);
  ASSERT_TRUE(journal.is_object() && journal.contains("gen"));
  const json gen = journal["gen"];
  std::mt19937_64 rng(7);
  {
    RawPeer p(host, port);
    ASSERT_FALSE(p.authenticate(c.token(), "agent", "s0").is_null()) << p.refusal();
    ASSERT_TRUE(
        p.send(json{{"type", "report"},
                    {"gen", gen},
                    {"rank", 0},
                    {"report", {{"type", "step"}, {"rank", 0}, {"step", 5}, {"loss_nan", "no"}}}}));
    alive("a report with \"loss_nan\": \"no\"");
    const std::vector<json> seeds = {
        json{{"type", "report"},
             {"gen", gen},
             {"rank", 0},
             {"report",
              {{"type", "step"}, {"rank", 0}, {"step", 5}, {"loss", 1.0}, {"step_time_s", 0.1}}}},
        json{{"type", "exit"},
             {"gen", gen.get<long>() + 1000},
             {"rank", 0},
             {"code", 1},
             {"signal", 0},
             {"signature", "x"}},
        json{{"type", "alert"}, {"kind", "nic"}, {"detail", "d"}},
        json{{"type", "done"}, {"req", 123456789}, {"ok", true}}, json{{"type", "heartbeat"}}};
    for (int i = 0; i < 20000; ++i) {
      json m = mutated(seeds[rng() % seeds.size()], rng);
      // Stale generations only: a well-formed report or exit of the running one would be
      // believed, as it should be from an authenticated agent.
      if (m.contains("gen") && m["gen"] == gen) m["gen"] = gen.get<long>() + 1000;
      if (!p.send(m)) break;
    }
    alive("20000 mutated agent messages");
  }
  // Unauthenticated peers, one mutated hello each.
  for (int i = 0; i < 300; ++i) {
    RawPeer p(host, port);
    if (!p.ok()) continue;
    json m = mutated(hello_ok, rng);
    if (m == hello_ok) continue;
    p.send(m);
  }
  alive("300 mutated hellos");
  // Still in charge: it answers, the job trains, and the refusals are noted, not flooded.
  EXPECT_EQ(c.client({"status", c.config()}), 0);
  ASSERT_FALSE(c.wait_step(c.last_step() + 20, 60).is_null()) << "the job stopped training";
  int refusal_notes = 0;
  for (const auto& r : c.records())
    if (LiveCluster::is_note(r, "refused a message from")) ++refusal_notes;
  EXPECT_GE(refusal_notes, 5);
  EXPECT_LT(refusal_notes, 200) << "one note per refused frame floods the log";
  EXPECT_FALSE(c.wait_for(
                    [](const json& r) {
                      return LiveCluster::is_note(
                          r, "refused a message from agent of s0: report: report.loss_nan:");
                    },
                    5)
                   .is_null());
  c.stop_run();
}

// The controller's resident memory, in KiB (VmRSS), or -1.
long rss_kib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

// CPU seconds (user + system) a process has used, from /proc/PID/stat.
double cpu_seconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::istringstream rest(stat.substr(stat.rfind(')') + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i)
    if (i == 14 || i == 15) ticks += std::stod(field);
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// Issue 37, item 11: at a low fd limit, accept failing with EMFILE on the level-triggered
// listener spun the controller at ~90% CPU (and `live status` took 8.4 s). Accepting pauses
// now, a quarter second at a time, with one note.
TEST(LiveE2E, OutOfFdsTheControllerPausesAcceptingInsteadOfSpinning) {
  LiveCluster c("emfile", json::object());
  c.start_controller(true, {"prlimit", "--nofile=48:48", "--"});
  c.start_agents();
  ASSERT_FALSE(c.wait_step(10, 60).is_null());
  std::vector<std::unique_ptr<RawPeer>> held;
  for (int i = 0; i < 80; ++i)
    held.push_back(std::make_unique<RawPeer>(c.controller_host(), c.controller_port()));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const double cpu0 = cpu_seconds(c.controller_pid());
  std::this_thread::sleep_for(std::chrono::seconds(2));
  const double busy = (cpu_seconds(c.controller_pid()) - cpu0) / 2;
  std::cout << "controller CPU while out of fds: " << 100 * busy << "%\n";
  EXPECT_LT(busy, 0.3) << "the controller spins on accept";
  held.clear();
  std::this_thread::sleep_for(
      std::chrono::seconds(6));  // the held ones' hello deadline frees their fds
  EXPECT_EQ(c.client({"status", c.config()}), 0);
  ASSERT_FALSE(c.wait_step(c.last_step() + 10, 60).is_null());
  c.stop_run();
  EXPECT_FALSE(
      c.wait_for(
           [](const json& r) { return LiveCluster::is_note(r, "cannot accept connections: "); }, 1)
          .is_null());
}

// Issue 37, items 10, 12, 14 and 15: strangers and colleagues on the control port. (10) 200
// unauthenticated connections each holding a partial 1 MiB frame took the controller from 35
// to 269 MiB; before authentication a frame is at most 4 KiB and at most 64 such connections
// are open. (12) Frame-level garbage was logged nowhere; it is noted with its reason.
// (14) Bad-token attempts left no line once 20 refusals of any kind had been noted; they are
// always said (10 a minute one by one, the rest summed up). (15) Read-only sessions never timed
// out and could lock the operator out of `live status`; 16 per access at most, the least
// recently active one making room, and 60 s idle at most.
TEST(LiveE2E, StrangersOnTheControlPortHoldLittleAndLockNobodyOut) {
  LiveCluster c("strangers", json::object());
  const std::string status_token = c.add_status_token();
  c.start_controller();
  c.start_agents();
  ASSERT_FALSE(c.wait_step(10, 60).is_null());
  const std::string host = c.controller_host();
  const int port = c.controller_port();
  const long rss_before = rss_kib(c.controller_pid());
  ASSERT_GT(rss_before, 0);

  // (12) Garbage frames, then (10) the flood of partial frames, held open.
  for (const std::string& junk :
       {frame("", 0), frame("x", 0xffffffffu), std::string("\x00\x00\x00\x05{\xff\xfe}}", 9)}) {
    RawPeer g(host, port);
    ASSERT_TRUE(g.send_raw(junk));
    g.receive();
  }
  std::vector<std::unique_ptr<RawPeer>> held;
  for (int i = 0; i < 100; ++i)
    held.push_back(std::make_unique<RawPeer>(host, port));  // idle: 64 at most stay
  const std::string partial = frame(std::string(64 * 1024, 'a'), 1u << 20).substr(0, 4 + 64 * 1024);
  for (int i = 0; i < 200; ++i) {
    held.push_back(std::make_unique<RawPeer>(host, port));
    if (held.back()->ok()) held.back()->send_raw(partial);
  }
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const long rss_flood = rss_kib(c.controller_pid());
  std::cout << "controller RSS: " << rss_before / 1024.0 << " MiB before the flood, "
            << rss_flood / 1024.0 << " MiB during it\n";
  EXPECT_LT(rss_flood - rss_before, 32 * 1024) << "KiB: " << rss_before << " -> " << rss_flood;
  EXPECT_EQ(c.client_to({"status", c.config()}, c.dir() + "/status-during-flood.txt"), 0)
      << slurp(c.dir() + "/status-during-flood.txt");

  // (14) Bad tokens, after more than 20 other refusals.
  for (int i = 0; i < 30; ++i) {
    RawPeer p(host, port);
    p.send(faultline::live::PeerHandshake("client", "").hello(2));
    ASSERT_FALSE(p.receive_type("challenge").is_null());
    p.send(json{{"type", "auth"}, {"proof", std::string(64, 'f')}});  // a proof without the token
    EXPECT_TRUE(p.receive_type("welcome").is_null());
    EXPECT_EQ(p.refusal(), "bad token");
  }
  // (15) Read-only sessions held open by a colleague's script: the operator still gets in.
  std::vector<std::unique_ptr<RawPeer>> readers;
  for (int i = 0; i < 24; ++i) {
    readers.push_back(std::make_unique<RawPeer>(host, port));
    EXPECT_FALSE(readers.back()->authenticate(status_token, "client-read").is_null()) << i;
  }
  EXPECT_EQ(c.client_to({"status", c.config()}, c.dir() + "/status-readers.txt"), 0)
      << slurp(c.dir() + "/status-readers.txt");
  // Issue 52: a read-only token holder churning sessions, each asking for what it may not
  // (refused) and left open (closed to make room), wrote ~240 KB/s of notes; bounded now.
  for (int i = 0; i < 300; ++i) {
    readers.push_back(std::make_unique<RawPeer>(host, port));
    ASSERT_FALSE(readers.back()->authenticate(status_token, "client-read").is_null()) << i;
    ASSERT_TRUE(readers.back()->send(json{{"type", "stop"}, {"req", 1}}));
    ASSERT_EQ(readers.back()->receive_type("done").value("ok", true), false) << i;
    if (readers.size() > 20) readers.erase(readers.begin());
  }
  held.clear();
  readers.clear();
  ASSERT_FALSE(c.wait_step(c.last_step() + 10, 60).is_null()) << "no training after the flood";
  c.stop_run();

  int garbage = 0, bad_tokens = 0, evicted = 0, readers_closed = 0;
  std::size_t session_bytes = 0;
  for (const auto& r : c.records()) {
    const std::string t = r.value("text", "");
    if (r.value("kind", "") != "note") continue;
    if (t.find("read-only session") != std::string::npos) session_bytes += r.dump().size();
    garbage += t.find("closed before its hello: frame length") != std::string::npos;
    bad_tokens += t.find("): bad token (") != std::string::npos;
    evicted += t.find("closed the unauthenticated connection from") != std::string::npos;
    readers_closed +=
        t.find("closed the least recently active read-only session") != std::string::npos;
  }
  EXPECT_GE(garbage, 2) << "bad lengths are noted with their reason";
  EXPECT_EQ(bad_tokens, 10) << "the first 10 of the minute, one by one";
  EXPECT_GE(evicted, 1);
  EXPECT_GE(readers_closed, 8);
  // 324 read-only sessions, 308 closed to make room, 300 refusals: 10 notes in the minute.
  EXPECT_LT(session_bytes, 4000u) << "bytes of notes about read-only sessions";
}

// Issue 52, broken item 3: 2,000 idle unauthenticated connections held open across a routine
// controller restart kept the agents out: the controller took 64 a second (none was pushed out
// before it was 1 s old), the agents' hellos waited in the listen backlog behind the rest past
// their handshake deadline, and both healthy job machines were evicted and their ranks
// relaunched. A connection still silent 0.1 s after it was accepted makes room now (agents and
// operators send their hello as they connect): the agents get in, the job is adopted, nobody
// is evicted, and the operator's status answers during the flood.
TEST(LiveE2E, IdleConnectionsHeldAcrossAControllerRestartKeepNoAgentOut) {
  LiveCluster c("idle-flood", json::object());
  c.start_controller();
  c.start_agents();
  ASSERT_FALSE(c.wait_step(10, 60).is_null());
  IdleFlood flood(c.controller_host(), c.controller_port(), 2000);
  std::this_thread::sleep_for(std::chrono::seconds(2));
  const long before = c.last_step();
  c.kill_controller(SIGTERM);
  c.start_controller(false);
  ASSERT_FALSE(c.wait_step(before + 20, 60).is_null()) << "no training after the restart";
  EXPECT_EQ(c.client_to({"status", c.config()}, c.dir() + "/status-flood.txt"), 0)
      << slurp(c.dir() + "/status-flood.txt");
  std::cout << "idle connections dialled: " << flood.dials() << "\n";
  EXPECT_GT(flood.dials(), 2000) << "the flood was held across the restart";
  flood.stop();
  c.stop_run();
  int silent_closed = 0;
  for (const auto& r : c.records()) {
    EXPECT_FALSE(LiveCluster::is_action(r, "EvictMachines")) << r.dump();
    EXPECT_FALSE(LiveCluster::is_note(r, "agent of ") &&
                 r.value("text", "").find(" lost") != std::string::npos)
        << r.dump();
    silent_closed += LiveCluster::is_note(r, "closed the unauthenticated connection from") &&
                     r.value("text", "").find("(no hello)") != std::string::npos;
  }
  EXPECT_GE(silent_closed, 1);
}

// Occurrences of `what` in the file at `path`.
int count_in(const std::string& path, const std::string& what) {
  const std::string text = slurp(path);
  int n = 0;
  for (std::size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Issue 52: 2,000 idle connections held open and dialled again as soon as each is closed (a
// stranger's script) on the control port and on /metrics. The operator's status (0 of 5 within
// 2 s, the slowest 8.4 s, when a silent connection had a 0.1 s grace), a restarted agent's
// session (7.7 s), and Prometheus's scrapes (5 of 30 failed) must all get through, each within
// its bound. COST: ~11 s.
TEST(LiveE2E, TwoThousandIdleConnectionsLockOutNeitherTheOperatorNorAnAgentNorPrometheus) {
  if (!raise_nofile(2 * 2 * 2000 + 1000))
    GTEST_SKIP() << "needs a hard RLIMIT_NOFILE of at least 9000 (ulimit -Hn) to hold 2,000 "
                    "idle connections on each of two ports";
  LiveCluster c("idle-hold", json::object());
  const int metrics_port = metrics_e2e::free_port();
  c.edit_config(
      [&](json& cfg) { cfg["metrics_listen"] = "127.0.0.1:" + std::to_string(metrics_port); });
  c.start_controller();
  c.start_agents();
  const std::string s0_log = c.dir() + "/agent-s0.log";
  const auto until = [](const std::function<bool()>& ok, double s) {
    const auto t0 = std::chrono::steady_clock::now();
    while (!ok() && seconds_since(t0) < s)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return ok();
  };
  ASSERT_TRUE(until([&] { return count_in(s0_log, "connected to the controller as s0") == 1; }, 30))
      << slurp(s0_log);
  IdleFlood control(c.controller_host(), c.controller_port(), 2000);
  IdleFlood metrics("127.0.0.1", metrics_port, 2000);
  // Held: every one of the 2,000 was dialled, and the servers have been closing and taking
  // them again (a second round of dials) on both ports.
  ASSERT_TRUE(until([&] { return control.dials() >= 4000 && metrics.dials() >= 4000; }, 20))
      << control.dials() << " and " << metrics.dials() << " dials";
  int status_ok = 0;
  double slowest = 0;
  for (int i = 0; i < 5; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    const bool ok = c.client_to({"status", c.config()}, c.dir() + "/status-held.txt") == 0;
    slowest = std::max(slowest, seconds_since(t0));
    status_ok += ok && seconds_since(t0) < 2;
  }
  EXPECT_EQ(status_ok, 5) << "slowest status " << slowest
                          << " s: " << slurp(c.dir() + "/status-held.txt");
  c.kill_machine("s0");
  c.restart_agent("s0");
  const auto restarted = std::chrono::steady_clock::now();
  EXPECT_TRUE(
      until([&] { return count_in(s0_log, "connected to the controller as s0") == 2; }, 10));
  const double reconnect_s = seconds_since(restarted);
  EXPECT_LT(reconnect_s, 3) << "the restarted agent took " << reconnect_s << " s\n"
                            << slurp(s0_log);
  int scrapes_ok = 0;
  double slowest_scrape = 0;
  for (int i = 0; i < 30; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    const std::string r = metrics_e2e::http(metrics_port, "GET /metrics HTTP/1.0\r\n\r\n");
    slowest_scrape = std::max(slowest_scrape, seconds_since(t0));
    scrapes_ok += r.rfind("HTTP/1.1 200 ", 0) == 0 && seconds_since(t0) < 2;
  }
  EXPECT_EQ(scrapes_ok, 30) << "slowest scrape " << slowest_scrape << " s";
  std::cout << "status: " << status_ok << " of 5, slowest " << slowest << " s; agent back in "
            << reconnect_s << " s; scrapes: " << scrapes_ok << " of 30, slowest " << slowest_scrape
            << " s; dials " << control.dials() << " (control) " << metrics.dials()
            << " (metrics)\n";
}

// Issue 52: at ~8,000 machines with 40-character names the status document passes the
// wire's 1 MiB frame limit, and the controller dropped the reply without a word (`live status`
// said only that the controller did not answer within 10 s). The document now comes in parts
// each under the limit: the text table and --json are whole, and a client that cannot take
// parts (an earlier release's, or a raw peer) is told in one line why it gets no status. The
// controller needs no agents to answer. COST: ~7 s.
TEST(LiveE2E, TheStatusOfEightThousandMachinesWithLongNamesComesWhole) {
  LiveCluster c("status-8000", json::object());
  std::set<std::string> names;
  c.edit_config([&](json& cfg) {
    for (int i = 0; i < 8000; ++i) {
      char name[64];
      std::snprintf(name, sizeof name, "rack%03d-node%04d-gpu-h200-eight-way-%04d", i / 32, i, i);
      names.insert(name);
      cfg["standby"].push_back(
          {{"name", name}, {"addr", "127.0.0.1"}, {"workdir", c.dir() + "/w"}});
    }
  });
  ASSERT_EQ(names.begin()->size(), 40u);
  c.start_controller();
  const auto t0 = std::chrono::steady_clock::now();
  int rc = -1;
  // The controller listens once it has read its config and journal.
  while ((rc = c.client_to({"status", c.config(), "--json"}, c.dir() + "/status.json")) != 0 &&
         seconds_since(t0) < 30)
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ASSERT_EQ(rc, 0) << slurp(c.dir() + "/status.json").substr(0, 2000);
  const std::string text = slurp(c.dir() + "/status.json");
  EXPECT_GT(text.size(), std::size_t{1} << 20) << "the document is larger than one frame";
  const json st = json::parse(text, nullptr, false);
  ASSERT_TRUE(st.is_object()) << text.substr(0, 2000);
  ASSERT_EQ(st["machines"].size(), 8005u);
  std::set<std::string> listed;
  for (const auto& m : st["machines"]) listed.insert(m.value("machine", ""));
  for (const auto& n : names) EXPECT_TRUE(listed.count(n)) << n << " missing";
  EXPECT_TRUE(st.contains("ettr_so_far") && st.contains("account") && st.contains("storage"));
  ASSERT_EQ(c.client_to({"status", c.config()}, c.dir() + "/status.txt"), 0)
      << slurp(c.dir() + "/status.txt").substr(0, 2000);
  const std::string table = slurp(c.dir() + "/status.txt");
  int rows = 0;
  for (const auto& n : names) rows += table.find("\n" + n + " ") != std::string::npos;
  EXPECT_EQ(rows, 8000);
  // A client that does not ask for parts: one line saying why, never silence.
  RawPeer raw(c.controller_host(), c.controller_port());
  ASSERT_FALSE(raw.authenticate(c.token()).is_null()) << raw.refusal();
  raw.send(json{{"type", "status"}, {"req", 5}});
  const json done = raw.receive_type("done");
  ASSERT_FALSE(done.is_null()) << "no answer to a status request without parts";
  EXPECT_EQ(done.value("ok", true), false) << done.dump().substr(0, 300);
  EXPECT_NE(done.value("detail", "").find("frame limit"), std::string::npos) << done.dump();
}

// The handshake against real processes: the read-only credential reads status and nothing
// else; a recorded answer, a wrong one and an old clear-text hello are refused; a rogue
// controller on the port gets hellos without a secret, no answer to its challenge, and
// nothing it can replay; the agents come back to the real controller, which adopts the job.
TEST(LiveE2E, AuthenticationReadOnlyCredentialReplayAndRogueController) {
  LiveCluster c("auth", json::object());
  const std::string status_token = c.add_status_token();
  c.start_controller();
  c.start_agents();
  ASSERT_FALSE(c.wait_step(10, 60).is_null());
  const std::string host = c.controller_host();
  const int port = c.controller_port();
  // Read-only: status answers; stop and inject are refused; the CLI's status uses it.
  {
    RawPeer p(host, port);
    const json w = p.authenticate(status_token, "client-read");
    ASSERT_FALSE(w.is_null()) << p.refusal();
    EXPECT_EQ(w.value("access", ""), "read");
    ASSERT_TRUE(p.send(json{{"type", "status"}, {"req", 1}}));
    EXPECT_EQ(p.receive_type("done").value("ok", false), true);
    for (const json& m :
         {json{{"type", "stop"}, {"req", 2}},
          json{{"type", "inject"}, {"req", 3}, {"machine", "m1"}, {"fault", "kill"}},
          json{{"type", "update"}, {"req", 4}, {"version", "v1"}}}) {
      ASSERT_TRUE(p.send(m));
      const json r = p.receive_type("done");
      EXPECT_EQ(r.value("ok", true), false) << m.dump();
      EXPECT_NE(r.value("detail", "").find("read-only"), std::string::npos) << r.dump();
    }
    // The status credential is no admin credential, nor the other way round.
    RawPeer q(host, port);
    EXPECT_TRUE(q.authenticate(status_token, "client").is_null());
    RawPeer q2(host, port);
    EXPECT_TRUE(q2.authenticate(c.token(), "client-read").is_null());
  }
  EXPECT_EQ(c.client({"status", c.config()}), 0) << "status with the read-only credential";
  {
    // A config whose token_file holds the status credential cannot stop the run.
    json cfg = json::parse(slurp(c.config()));
    cfg["token_file"] = c.write_token("admin-guess", status_token);
    cfg.erase("status_token_file");
    std::ofstream(c.dir() + "/reader.json") << cfg.dump();
    EXPECT_NE(c.client({"stop", c.dir() + "/reader.json"}), 0);
    EXPECT_TRUE(c.controller_alive());
  }
  // A recorded answer replayed on a new connection, with the same hello, is refused.
  {
    faultline::live::PeerHandshake h("client", "");
    const json hello = h.hello(2);
    RawPeer p(host, port);
    p.send(hello);
    const json ch = p.receive_type("challenge");
    ASSERT_FALSE(ch.is_null());
    const auto answer = h.answer(c.token(), faultline::live::decode_challenge(ch));
    ASSERT_TRUE(answer);
    p.send(*answer);
    ASSERT_FALSE(p.receive_type("welcome").is_null());
    RawPeer replay(host, port);
    replay.send(hello);
    ASSERT_FALSE(replay.receive_type("challenge").is_null());
    replay.send(*answer);
    EXPECT_TRUE(replay.receive_type("welcome").is_null());
    EXPECT_EQ(replay.refusal(), "bad token");
    RawPeer wrong(host, port);
    wrong.send(faultline::live::PeerHandshake("agent", "m2").hello(2));
    ASSERT_FALSE(wrong.receive_type("challenge").is_null());
    wrong.send(json{{"type", "auth"}, {"proof", std::string(64, 'f')}});
    EXPECT_TRUE(wrong.receive_type("welcome").is_null());
    EXPECT_EQ(wrong.refusal(), "bad token");
  }
  // A rogue controller takes the port.
  const long before = c.last_step();
  c.kill_controller(SIGKILL);
  const int lfd = socket(AF_INET, SOCK_STREAM, 0);
  const int one = 1;
  setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  inet_pton(AF_INET, host.c_str(), &a.sin_addr);
  ASSERT_EQ(bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0) << strerror(errno);
  ASSERT_EQ(listen(lfd, 64), 0);
  timeval tv{0, 200000};
  setsockopt(lfd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::vector<json> heard;
  std::set<std::string> names;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(8);
  while (std::chrono::steady_clock::now() < until) {
    const int fd = accept(lfd, nullptr, nullptr);
    if (fd < 0) continue;
    RawPeer agent(fd);
    for (int i = 0; i < 4; ++i) {
      const json m = agent.receive();
      if (m.is_null() || m.is_discarded()) break;
      heard.push_back(m);
      if (m.value("type", "") == "hello") {
        names.insert(m.value("name", ""));
        // A challenge with a proof it cannot make; then a welcome and a request for luck.
        agent.send(json{{"type", "challenge"},
                        {"nonce", std::string(64, '1')},
                        {"proof", std::string(64, '2')}});
        agent.send(json{{"type", "welcome"}, {"machine", m.value("name", "")}, {"role", "job"}});
        agent.send(json{{"type", "kill"}, {"req", 1}, {"gen", 1}});
      }
    }
  }
  close(lfd);
  EXPECT_GE(names.size(), 4u) << "the agents redialled the port";
  for (const json& m : heard) {
    EXPECT_EQ(m.value("type", ""), "hello")
        << "an agent said more than hello to a rogue: " << m.dump();
    EXPECT_EQ(m.dump().find(c.token()), std::string::npos) << "the token went on the wire";
    EXPECT_FALSE(m.contains("token"));
  }
  // What the rogue heard gets it nothing from the real controller.
  c.start_controller(false);
  ASSERT_FALSE(
      c.wait_for([](const json& r) { return r.value("kind", "") == "restart"; }, 20).is_null());
  for (const json& m : heard) {
    RawPeer p(host, port);
    if (!p.ok()) continue;
    p.send(m);
    if (p.receive_type("challenge").is_null()) continue;
    for (const json& again : heard) p.send(again);  // all it has for an answer
    EXPECT_TRUE(p.receive_type("welcome").is_null());
    break;
  }
  // The ranks kept running under agents that obeyed no one; the real controller adopts them.
  const json adopted = c.wait_for(
      [](const json& r) {
        return r.value("kind", "") == "outcome" &&
               r.value("detail", "").find("adopted") != std::string::npos;
      },
      40);
  EXPECT_FALSE(adopted.is_null()) << "the ranks did not survive the rogue";
  ASSERT_FALSE(c.wait_step(before + 20, 60).is_null());
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

// The state directory on a 4 MiB tmpfs (root only), unmounted at the end (a copy kept when
// the test failed); ok() is false, with why(), when it cannot be mounted.
class TmpfsState {
 public:
  explicit TmpfsState(const LiveCluster& c)
      : dir_(c.dir() + "/state"), keep_(c.dir() + "/state-kept") {
    if (geteuid() != 0) {
      why_ = "needs root to mount a tmpfs for the state dir";
      return;
    }
    fs::create_directories(dir_);
    if (mount("tmpfs", dir_.c_str(), "tmpfs", 0, "size=4m") != 0) {
      why_ = std::string("cannot mount a tmpfs: ") + std::strerror(errno);
      return;
    }
    mounted_ = true;
  }
  ~TmpfsState() {
    if (!mounted_) return;
    if (::testing::Test::HasFailure()) sh("cp -a " + dir_ + " " + keep_);
    umount2(dir_.c_str(), MNT_DETACH);
  }
  bool ok() const { return mounted_; }
  const std::string& why() const { return why_; }
  const std::string& dir() const { return dir_; }
  void fill() const { sh("dd if=/dev/zero of=" + dir_ + "/filler bs=4k"); }
  void unfill() const { fs::remove(dir_ + "/filler"); }

 private:
  std::string dir_, keep_, why_;
  bool mounted_ = false;
};

// `live status --json`, null when it fails.
json status_of(LiveCluster& c) {
  if (c.client_to({"status", c.config(), "--json"}, c.dir() + "/status.json") != 0) return json();
  return json::parse(slurp(c.dir() + "/status.json"), nullptr, false);
}
// A field of a status by JSON pointer, null when absent (never throws).
json status_at(const json& st, const std::string& ptr) {
  const json::json_pointer p(ptr);
  return st.is_object() && st.contains(p) ? st.at(p) : json();
}
// Polls the status until `pred` holds; returns the last status seen.
json wait_status_of(LiveCluster& c, const std::function<bool(const json&)>& pred,
                    double timeout_s) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  json st;
  while (std::chrono::steady_clock::now() < end) {
    st = status_of(c);
    if (st.is_object() && pred(st)) return st;
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  return st;
}

// Issue 37, item 3: disk full, then the controller killed. The records it held in memory
// were gone with no mark in the log (the injected fault's among them), the restarted status
// said `lost 0`, and the stale journal (saved before the outage: an older generation) made
// it kill healthy ranks ("not every rank is alive"). Now the outage is marked in a file
// allocated in advance, the restarted controller writes the gap into the log and counts it
// as lost, and it adopts the generation every machine runs.
TEST(LiveE2E, RecordsLostToAFullDiskAndACrashAreAGapInTheLogAndTheJobIsAdopted) {
  LiveCluster c("diskcrash", json::object());
  const TmpfsState tmpfs(c);
  if (!tmpfs.ok()) GTEST_SKIP() << tmpfs.why();
  const std::string state = tmpfs.dir();
  const std::string log_path = state + "/events.jsonl";
  auto status = [&] { return status_of(c); };
  auto at = status_at;
  auto wait_status = [&](const std::function<bool(const json&)>& pred, double timeout_s) {
    return wait_status_of(c, pred, timeout_s);
  };
  c.start_controller();
  c.start_agents();
  ASSERT_FALSE(c.wait_step(10, 60).is_null()) << "training did not reach step 10";
  const json journal_before = json::parse(slurp(state + "/journal.json"), nullptr, false);
  sh("dd if=/dev/zero of=" + state + "/filler bs=4k");
  ASSERT_EQ(
      at(wait_status([&](const json& st) { return at(st, "/storage/state") == "failing"; }, 20),
         "/storage/state"),
      "failing");
  // A fault during the outage: the job restarts as a new generation the journal cannot save.
  const long step_full = c.last_step();
  ASSERT_EQ(c.inject("m1", "kill"), 0);
  const json recovered = wait_status(
      [&](const json& st) {
        return st.value("running", false) && st.value("incident_count", 0L) >= 1 &&
               st.value("step", -1L) > step_full + 10;
      },
      45);
  ASSERT_TRUE(recovered.value("running", false)) << recovered.dump();
  const long pending = at(recovered, "/storage/event_log/pending").get<long>();
  ASSERT_GT(pending, 0);
  c.kill_controller(SIGKILL);
  tmpfs.unfill();
  EXPECT_EQ(json::parse(slurp(state + "/journal.json"), nullptr, false).value("gen", -1L),
            journal_before.value("gen", -2L))
      << "the journal on disk is the one from before the outage";

  c.start_controller(false);
  const json gap =
      c.wait_for([](const json& r) { return LiveCluster::is_note(r, "event log gap: "); }, 20);
  ASSERT_FALSE(gap.is_null()) << "no gap in the log";
  const std::string text = gap.value("text", "");
  const long lost = std::stol(text.substr(std::string("event log gap: ").size()));
  EXPECT_GE(lost, pending) << text;  // more may have waited by the time of the kill
  EXPECT_NE(text.find("No space left on device"), std::string::npos) << text;
  const json adopted = c.wait_for(
      [](const json& r) {
        return r.value("kind", "") == "outcome" &&
               r.value("detail", "").find("adopted") != std::string::npos;
      },
      30);
  EXPECT_FALSE(adopted.is_null()) << "the restarted controller relaunched instead of adopting";
  const long before = c.last_step();
  ASSERT_FALSE(c.wait_step(before + 10, 60).is_null()) << "no training after the restart";
  const json st = status();
  EXPECT_EQ(at(st, "/storage/event_log/lost"), lost) << st.dump();
  c.stop_run();
  bool stale = false;
  for (const auto& r : c.records()) {
    EXPECT_FALSE(LiveCluster::is_note(r, "cannot adopt")) << r.dump();
    stale |= LiveCluster::is_note(r, "the journal is stale");
  }
  EXPECT_TRUE(stale);
  EXPECT_NO_THROW(faultline::traces::read_event_log(log_path));
}

// Issue 37, items 2, 5 and 9: an operator's mistakes and a paused controller leave the run
// whole. (2) A second `live run --fresh` on the state directory in use deleted the journal and
// unlinked the event log under the running controller before failing on its port; it is
// refused now, naming the holder's pid, with both files untouched. (9) `live inject --fault
// slow` without a factor said "injected" and the log recorded a fault the agent had refused
// (and `sim replay` then refused the log); a fault is recorded once its agent applied it.
// (5) A controller paused longer than the heartbeat timeout took every agent for lost on
// resume and evicted a healthy machine; their heartbeats are read first now.
TEST(LiveE2E, OperatorMistakesAndAPausedControllerLeaveTheRunWhole) {
  LiveCluster c("mistakes", json::object());
  c.start_controller();
  c.start_agents();
  ASSERT_FALSE(c.wait_step(10, 60).is_null()) << "training did not reach step 10";
  const std::string state = c.dir() + "/state";
  struct stat log_before {
  }, journal_before{};
  ASSERT_EQ(::stat((state + "/events.jsonl").c_str(), &log_before), 0);
  ASSERT_EQ(::stat((state + "/journal.json").c_str(), &journal_before), 0);

  // (2) The second controller.
  const std::string second = c.dir() + "/second-controller.log";
  EXPECT_EQ(run_wait({kFaultline, "live", "run", c.config(), "--fresh"}, second), 2);
  const std::string said = slurp(second);
  EXPECT_NE(said.find(state + ": in use by the controller with pid " +
                      std::to_string(c.controller_pid())),
            std::string::npos)
      << said;
  EXPECT_EQ(std::count(said.begin(), said.end(), '\n'), 1) << said;
  struct stat log_after {
  }, journal_after{};
  ASSERT_EQ(::stat((state + "/events.jsonl").c_str(), &log_after), 0)
      << "the event log was deleted";
  ASSERT_EQ(::stat((state + "/journal.json").c_str(), &journal_after), 0)
      << "the journal was deleted";
  EXPECT_EQ(log_after.st_ino, log_before.st_ino) << "the event log was replaced";
  EXPECT_GE(log_after.st_size, log_before.st_size);
  // The same with the lock file deleted (issue 52): it locked nothing of its own, a second
  // --fresh then took a lock on a new file and wiped the running controller's state.
  ASSERT_EQ(::unlink((state + "/controller.lock").c_str()), 0);
  EXPECT_EQ(run_wait({kFaultline, "live", "run", c.config(), "--fresh"}, second), 2);
  EXPECT_NE(slurp(second).find(state + ": in use by the controller with pid (unknown)"),
            std::string::npos)
      << slurp(second);
  ASSERT_EQ(::stat((state + "/events.jsonl").c_str(), &log_after), 0)
      << "the event log was deleted";
  ASSERT_EQ(::stat((state + "/journal.json").c_str(), &journal_after), 0)
      << "the journal was deleted";
  EXPECT_EQ(log_after.st_ino, log_before.st_ino) << "the event log was replaced";

  // (9) Faults the agents do not apply are refused, and never recorded.
  const std::string out = c.dir() + "/inject.log";
  EXPECT_EQ(c.client_to({"inject", c.config(), "--machine", "m1", "--fault", "slow"}, out), 1);
  EXPECT_NE(slurp(out).find("inject: detail: slow expects a slowdown factor in [1, 100]"),
            std::string::npos)
      << slurp(out);
  EXPECT_EQ(
      c.client_to({"inject", c.config(), "--machine", "m1", "--fault", "slow", "--detail", "0.5"},
                  out),
      1);
  // The agent's own refusal: a standby runs no rank to kill.
  EXPECT_EQ(c.client_to({"inject", c.config(), "--machine", "s0", "--fault", "kill"}, out), 1);
  EXPECT_NE(slurp(out).find("inject: the agent of s0 refused: no local rank 0 running"),
            std::string::npos)
      << slurp(out);

  // (5) The pause: twice the heartbeat timeout (3 s), the agents' heartbeats waiting unread.
  const long before_pause = c.last_step();
  ASSERT_EQ(::kill(c.controller_pid(), SIGSTOP), 0);
  std::this_thread::sleep_for(std::chrono::seconds(7));
  ASSERT_EQ(::kill(c.controller_pid(), SIGCONT), 0);
  ASSERT_FALSE(c.wait_step(before_pause + 30, 60).is_null()) << "no training after the pause";
  c.stop_run();

  int faults = 0, refused = 0;
  for (const auto& r : c.records()) {
    if (r.value("kind", "") == "fault") ++faults;
    if (LiveCluster::is_note(r, "the agent of s0 did not apply the injected kill")) ++refused;
    EXPECT_FALSE(LiveCluster::is_note(r, "agent of ") &&
                 r.value("text", "").find(" lost") != std::string::npos)
        << r.dump();
    EXPECT_FALSE(LiveCluster::is_note(r, "standby s0 lost")) << r.dump();
    EXPECT_FALSE(LiveCluster::is_action(r, "EvictMachines")) << r.dump();
  }
  EXPECT_EQ(faults, 0) << "a refused injection was recorded as ground truth";
  EXPECT_EQ(refused, 1);
  EXPECT_NO_THROW(faultline::traces::read_event_log(state + "/events.jsonl"))
      << "sim replay would refuse the log";
}

// Issue 52, broken item 2: a journal written by the previous release (format 1: its origin a
// CLOCK_MONOTONIC value of the boot that wrote it, no last_t_ns), read after a reboot,
// restarted run time at 0: the log's time went back from 861 s to 1 s, `live status` showed
// ETTR 5,791%, and `sim replay` took the log. Here this run's journal is turned into one of
// format 1 written on a boot that had been up 30 days (longer than this one): the restarted
// controller migrates it from the event log, the log's time goes on, the ETTR stays a
// fraction, and the log reads back.
TEST(LiveE2E, AnEarlierReleasesJournalReadAfterARebootKeepsTheRunsTime) {
  LiveCluster c("journal-v1", json::object());
  c.start_controller();
  c.start_agents();
  ASSERT_FALSE(c.wait_step(20, 60).is_null());
  c.kill_controller(SIGKILL);
  const std::string state = c.dir() + "/state";
  json j = json::parse(slurp(state + "/journal.json"));
  ASSERT_TRUE(j.contains("origin_unix_ns")) << j.dump();
  for (const char* later : {"format", "origin_unix_ns", "last_t_ns", "action_ceiling",
                            "machine_names", "lost_s", "stop", "replica_quorum", "replica_share_s"})
    j.erase(later);
  j["origin_ns"] = std::int64_t{30} * 86400 * 1000000000;
  std::ofstream(state + "/journal.json") << j.dump();
  double t_before = 0;
  for (const auto& r : c.records()) t_before = std::max(t_before, r.value("t_s", 0.0));
  c.start_controller(false);
  ASSERT_FALSE(c.wait_step(c.last_step() + 10, 60).is_null()) << "no training after the restart";
  const json migrated = c.wait_for(
      [](const json& r) {
        return r.value("kind", "") == "note" &&
               r.value("text", "").find("a journal of format 1 (an earlier release) migrated") !=
                   std::string::npos;
      },
      5);
  EXPECT_FALSE(migrated.is_null()) << "the migration is noted";
  ASSERT_EQ(c.client_to({"status", c.config(), "--json"}, c.dir() + "/status.json"), 0);
  const json st = json::parse(slurp(c.dir() + "/status.json"), nullptr, false);
  ASSERT_TRUE(st.is_object());
  EXPECT_GT(st["ettr_so_far"].get<double>(), 0.0);
  EXPECT_LE(st["ettr_so_far"].get<double>(), 1.0) << "ETTR is a fraction";
  c.stop_run();
  double prev = 0;
  int back = 0;
  for (const auto& r : c.records()) {
    const double t = r.value("t_s", 0.0);
    back += t < prev;
    prev = std::max(prev, t);
  }
  EXPECT_EQ(back, 0) << "the log's time went back";
  EXPECT_GT(prev, t_before);
  EXPECT_NO_THROW(faultline::traces::read_event_log(state + "/events.jsonl"))
      << "sim replay would refuse the log";
}

// Issue 15: on a full disk the controller's event log stopped mid-record, silently, and
// 16 s of events were lost. Here the state dir is a 4 MiB tmpfs that a filler file takes
// whole while the job trains (and a rank is killed, so that the journal must be saved):
// the status says so, stderr says so once, the run goes on; once the filler is gone the
// log catches up in order and decodes. A disk still full at the end loses what waited:
// exit status 4, and the last line says so.
TEST(LiveE2E, AFullStateDiskIsReportedOnceTheRunGoesOnAndTheEventLogCatchesUp) {
  LiveCluster c("diskfull", json::object());
  const TmpfsState tmpfs(c);
  if (!tmpfs.ok()) GTEST_SKIP() << tmpfs.why();
  const std::string state = tmpfs.dir();
  const std::string log_path = state + "/events.jsonl";
  auto fill = [&] { tmpfs.fill(); };
  auto status = [&] { return status_of(c); };
  auto at = status_at;
  auto storage = [&](const json& st, const std::string& file, const std::string& key) {
    return at(st, "/storage/" + file + "/" + key);
  };
  auto wait_status = [&](const std::function<bool(const json&)>& pred, double timeout_s) {
    return wait_status_of(c, pred, timeout_s);
  };
  auto count = [](const std::string& text, const std::string& what) {
    int n = 0;
    for (auto p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
    return n;
  };

  c.start_controller();
  c.start_agents();
  ASSERT_FALSE(c.wait_step(10, 60).is_null()) << "training did not reach step 10";
  const json healthy = status();
  ASSERT_TRUE(healthy.is_object());
  EXPECT_EQ(at(healthy, "/storage/state"), "ok") << healthy.dump();

  // The disk fills: the status says the event log is failing, with records pending.
  fill();
  const json full =
      wait_status([&](const json& st) { return at(st, "/storage/state") == "failing"; }, 20);
  EXPECT_EQ(storage(full, "event_log", "failing"), true) << full.dump();
  const json pending = storage(full, "event_log", "pending");
  EXPECT_TRUE(pending.is_number() && pending.get<long>() > 0)
      << "records wait in memory: " << pending;
  EXPECT_EQ(storage(full, "event_log", "lost"), 0);
  EXPECT_EQ(storage(full, "event_log", "last_error"), log_path + ": No space left on device");
  EXPECT_TRUE(storage(full, "event_log", "since").is_string());
  EXPECT_EQ(c.client_to({"status", c.config()}, c.dir() + "/status.txt"), 0);
  const std::string table = slurp(c.dir() + "/status.txt");
  EXPECT_NE(table.find("storage: FAILING since "), std::string::npos) << table;
  EXPECT_NE(table.find("No space left on device"), std::string::npos) << table;
  std::cout << table;

  // A rank dies while the disk is full: the run recovers (the journal cannot be saved,
  // the previous one stays) and trains on; the controller stays up.
  const long step_full = full.value("step", -1L);
  ASSERT_EQ(c.inject("m1", "kill"), 0);
  const json recovered = wait_status(
      [&](const json& st) {
        return st.value("running", false) && st.value("step", -1L) > step_full + 10 &&
               st.value("incident_count", 0L) >= 1 && at(st, "/storage/journal/failing") == true;
      },
      45);
  ASSERT_TRUE(recovered.is_object());
  EXPECT_GT(recovered.value("step", -1L), step_full + 10)
      << "the job did not train on while the disk was full";
  EXPECT_EQ(storage(recovered, "journal", "failing"), true) << recovered.dump();
  EXPECT_EQ(storage(recovered, "event_log", "failing"), true);
  EXPECT_TRUE(c.controller_alive());
  const json journal_before = json::parse(slurp(state + "/journal.json"), nullptr, false);
  EXPECT_TRUE(journal_before.is_object()) << "the previous journal stays whole";

  // Room again: everything that waited is written, in order, and the log decodes.
  fs::remove(state + "/filler");
  const json ok = wait_status([&](const json& st) { return at(st, "/storage/state") == "ok"; }, 10);
  EXPECT_EQ(storage(ok, "event_log", "failing"), false) << ok.dump();
  EXPECT_EQ(storage(ok, "event_log", "pending"), 0);
  EXPECT_EQ(storage(ok, "event_log", "lost"), 0);
  EXPECT_EQ(storage(ok, "journal", "failing"), false);
  EXPECT_GT(json::parse(slurp(state + "/journal.json"), nullptr, false).value("gen", 0L),
            journal_before.value("gen", 0L))
      << "the journal was saved again, with the new generation";
  // The controller reports a recovery on its next storage check (every 0.5 s), which may
  // come after the status already says "ok": wait for both notes before reading the log.
  auto noted = [&](const std::string& what) {
    return !c.wait_for(
                 [&](const json& r) {
                   return r.value("kind", "") == "note" && r.value("text", "").rfind(what, 0) == 0;
                 },
                 10)
                .is_null();
  };
  EXPECT_TRUE(noted("storage: the event log is written again"));
  EXPECT_TRUE(noted("storage: the journal is saved again"));
  faultline::traces::EventLog log;
  ASSERT_NO_THROW(log = faultline::traces::read_event_log(log_path));
  EXPECT_FALSE(log.torn_tail);
  // Every step of rank 0 is in the log, within each incarnation one after the other:
  // nothing of the outage is missing.
  ASSERT_GT(log.progress.size(), 20u);
  for (std::size_t i = 1; i < log.progress.size(); ++i) {
    if (!log.progress[i].value.restart) {
      EXPECT_EQ(log.progress[i].value.step, log.progress[i - 1].value.step + 1)
          << "line " << log.progress[i].line;
    }
  }
  EXPECT_EQ(log.faults.size(), 1u) << "the kill injected during the outage";
  bool caught_up = false;
  for (const auto& n : log.notes)
    caught_up |= n.value.rfind("storage: the event log is written again", 0) == 0 &&
                 n.value.find(", 0 lost") != std::string::npos;
  EXPECT_TRUE(caught_up) << "a note says where the log was written late";
  const std::string out = slurp(c.dir() + "/controller.log");
  std::cout << out;
  EXPECT_EQ(count(out, "storage: writing the event log failed"), 1) << out;
  EXPECT_EQ(count(out, "No space left on device"), 2)
      << "the event log's line and the journal's, once each\n"
      << out;
  EXPECT_EQ(count(out, "storage: the event log is written again"), 1) << out;
  EXPECT_EQ(count(out, "storage: saving the journal failed"), 1) << out;
  EXPECT_EQ(count(out, "storage: the journal is saved again"), 1) << out;

  // Full again at the end: what waits when the controller exits is lost, and it says so. The
  // event log itself must be failing (the journal, larger, can fail first while the log's
  // short records still fit in the filler's last page).
  fill();
  wait_status([&](const json& st) { return at(st, "/storage/event_log/failing") == true; }, 20);
  EXPECT_EQ(c.client({"stop", c.config()}), 0);
  EXPECT_EQ(c.wait_controller_exit(20), 4) << "lost records: exit status 4";
  std::string last = slurp(c.dir() + "/controller.log");
  while (!last.empty() && last.back() == '\n') last.pop_back();
  last = last.substr(last.rfind('\n') + 1);
  EXPECT_NE(last.find("faultline live: the event log " + log_path + " is incomplete: "),
            std::string::npos)
      << last;
  EXPECT_NE(last.find("records lost to write failures"), std::string::npos) << last;
  std::cout << last << "\n";
  fs::remove(state + "/filler");
  EXPECT_NO_THROW(log = faultline::traces::read_event_log(log_path));
  EXPECT_FALSE(log.torn_tail);
}

// Bad data: the batch of step 30 makes every gradient NaN in every run that computes it.
// The review saw this loop stop -> bit-wise -> replay -> reattempt for ever (13 cycles,
// ETTR 16%). Now: the stop verdict module ends it with the verdict code_or_data, after one
// code rollback, and the controller exits 3 (do not requeue). identical (the default):
// diagnosed once, rolled back the second time, ended the third (identical_incident_limit).
// no_progress, unchanged from the simulator: the first NaN's run got further than any
// before; the four after it got no further: the third rolls back, the fourth ends the run.
struct BadBatchCase {
  const char* verdict;
  int incidents;            // NaN incidents until the verdict
  const char* reason_part;  // in the EndRun's reason
};
class BadBatch : public ::testing::TestWithParam<BadBatchCase> {};

TEST_P(BadBatch, ADeterministicNanEndsTheRunWithItsVerdictAndExitStatus) {
  const BadBatchCase& k = GetParam();
  LiveCluster c(std::string("badbatch-") + k.verdict, json{{"verdict", k.verdict}});
  c.edit_config([](json& cfg) {
    auto& argv = cfg["job"]["versions"]["v1"];
    argv.push_back("--bad-batch-at");
    argv.push_back("30");
  });
  c.start_controller();
  c.start_agents();
  const int status = c.wait_controller_exit(150);
  ASSERT_EQ(status, 3) << "the controller did not end the run (exit status 3)";
  int nan_incidents = 0, rollbacks = 0, ends = 0;
  std::string verdict, reason, modules;
  for (const auto& r : c.records()) {
    if (r.value("kind", "") == "note" && r.value("text", "").rfind("modules: ", 0) == 0)
      modules = r["text"];
    if (LiveCluster::is_action(r, "RollBack")) ++rollbacks;
    if (LiveCluster::is_action(r, "EndRun")) {
      ++ends;
      verdict = r["action"].value("verdict", "");
      reason = r["action"].value("reason", "");
    }
    if (r.value("kind", "") == "progress" && r["loss"].is_null() && !r.value("restart", true))
      ++nan_incidents;
  }
  EXPECT_EQ(ends, 1);
  EXPECT_EQ(verdict, "code_or_data");
  EXPECT_NE(reason.find(k.reason_part), std::string::npos) << reason;
  EXPECT_EQ(rollbacks, 1);
  EXPECT_LE(nan_incidents, k.incidents * 4) << "bounded: a few NaN reports per incident";
  EXPECT_GE(nan_incidents, k.incidents);
  const std::string log = slurp(c.dir() + "/controller.log");
  EXPECT_NE(log.find("the policy ended the run: code_or_data"), std::string::npos) << log;
  EXPECT_NE(modules.find(std::string("verdict ") + k.verdict + " v1"), std::string::npos)
      << modules;
}

INSTANTIATE_TEST_SUITE_P(
    LiveE2E, BadBatch,
    ::testing::Values(BadBatchCase{"identical", 3, "NaN at step 30 3 times in a row"},
                      BadBatchCase{"no_progress", 5,
                                   "4 runs in a row that got no further than step 30"}),
    [](const auto& info) { return std::string(info.param.verdict); });

// The crash twin of the bad batch: the last rank dies in step 30 with an illegal memory
// access in every run, on whatever machine runs it (data or code at fault). It looped
// tests -> reattempt -> rollback -> replay -> requeue; now the crash log's machine is
// evicted after two (as a hardware fault's would be), the standby it strikes next gets a
// code rollback and then the same eviction, and when it strikes a third machine the run
// ends with the verdict.
TEST(LiveE2E, ADeterministicCrashEndsTheRunWithItsVerdictAndExitStatus) {
  LiveCluster c("crashat", json{{"standby_pool", 2}}, 100, 2);
  c.edit_config([](json& cfg) {
    auto& argv = cfg["job"]["versions"]["v1"];
    argv.push_back("--crash-at");
    argv.push_back("30");
  });
  c.start_controller();
  c.start_agents();
  const int status = c.wait_controller_exit(240);
  ASSERT_EQ(status, 3) << "the controller did not end the run (exit status 3)";
  int rollbacks = 0, ends = 0, evictions = 0;
  std::string verdict;
  std::vector<int> struck;
  std::set<long> steps;
  for (const auto& r : c.records()) {
    if (LiveCluster::is_action(r, "RollBack")) ++rollbacks;
    if (LiveCluster::is_action(r, "EvictMachines")) ++evictions;
    if (LiveCluster::is_action(r, "EndRun")) {
      ++ends;
      verdict = r["action"].value("verdict", "");
    }
    // The crash comes in the rank's first step after a restart: before or after every
    // rank has reported that it started, as the machine's load has it (CI saw both).
    const bool crash =
        LiveCluster::is_event(r, "ProcessExit") ||
        (LiveCluster::is_event(r, "StartFailed") && r["event"].value("machine", -1) >= 0);
    if (crash) {
      struck.push_back(r["event"].value("machine", -9));
      steps.insert(r["event"].value("step", -9L));
    }
  }
  EXPECT_EQ(ends, 1);
  EXPECT_EQ(verdict, "code_or_data");
  EXPECT_EQ(rollbacks, 1);
  EXPECT_EQ(evictions, 2) << "m3, then the first standby that took its rank";
  ASSERT_EQ(struck.size(), 5u) << "five identical crashes, then the verdict";
  EXPECT_EQ(struck[0], 3);
  EXPECT_EQ(struck[1], 3);
  EXPECT_EQ(struck[2], struck[3]);
  EXPECT_NE(struck[2], 3);
  EXPECT_NE(struck[4], 3);
  EXPECT_NE(struck[4], struck[2]);
  EXPECT_EQ(steps, std::set<long>{29}) << "each exit came after the rank's step 29";
}

// A rank whose peer froze times out in its collective: it is the victim. Its exit used to
// be reported as a crash of its own machine, so the tests and evictions went to a healthy
// machine. Now it names the machine whose ranks stalled first, or none.
TEST(LiveE2E, ACollectiveTimeoutIsNotBlamedOnTheRankThatReportedIt) {
  LiveCluster c("ctimeout", json{{"stall_window_s", 120}});
  c.edit_config([](json& cfg) { cfg["job"]["env"]["FAULTLINE_COLLECTIVE_TIMEOUT_S"] = "2"; });
  c.start_controller();
  c.start_agents();
  ASSERT_FALSE(c.wait_step(20, 60).is_null());
  ASSERT_EQ(c.inject("m2", "stop"), 0);
  const double t_fault = c.fault_time("stop");
  ASSERT_GE(t_fault, 0);
  const json exit = c.wait_for(
      [&](const json& r) { return LiveCluster::is_event(r, "ProcessExit") && r["t_s"] >= t_fault; },
      30);
  ASSERT_FALSE(exit.is_null()) << "no exit after the collective timeout";
  const int named = exit["event"].value("machine", -9);
  EXPECT_TRUE(named == -1 || named == 2) << "blamed a victim: " << exit.dump();
  // The first victim's exit speaks for all (LiveWorld::hold_victim): the rank that timed out
  // receiving from m2's, or, when the load delays that report, a rank whose connection that
  // one closed as it exited. Both are victims; neither may be blamed.
  const std::string sig = exit["event"].value("signature", "");
  EXPECT_TRUE(sig.find("timed out receiving from rank") != std::string::npos ||
              sig.find("lost (closed by peer)") != std::string::npos)
      << exit.dump();
  const json note = c.wait_for(
      [&](const json& r) {
        return r.value("kind", "") == "note" &&
               r.value("text", "").find("because a peer stopped answering") != std::string::npos;
      },
      5);
  EXPECT_FALSE(note.is_null());
  const json started = c.wait_for(
      [&](const json& r) { return LiveCluster::is_event(r, "JobStarted") && r["t_s"] > t_fault; },
      90);
  ASSERT_FALSE(started.is_null()) << "training did not resume";
  for (const auto& r : c.records()) {
    if (!LiveCluster::is_action(r, "EvictMachines") || r["t_s"] <= t_fault) continue;
    for (const auto& m : r["action"]["machines"])
      EXPECT_EQ(m.get<int>(), 2) << "evicted a victim: " << r.dump();
  }
  ASSERT_FALSE(c.wait_step(started["event"].value("step", 0L) + 10, 60).is_null());
  c.stop_run();
}

// A restarted controller starts its policy once every machine the run counts on has
// connected. An evicted machine's agent may never come back (under Slurm its node is
// drained; a host sent for repair): it used to hold the restart for the full 30 s
// startup wait, the job unsupervised meanwhile. Found by the Slurm fault suite.
TEST(LiveE2E, ARestartedControllerDoesNotWaitForTheAgentsOfEvictedMachines) {
  LiveCluster c("restart-evicted", json::object());
  c.start_controller();
  c.start_agents();
  ASSERT_FALSE(c.wait_step(15, 60).is_null());
  ASSERT_EQ(c.inject("m1", "machine_down"), 0);  // its agent exits and stays gone
  const double t_fault = c.fault_time("machine_down");
  ASSERT_FALSE(c.wait_for(
                    [&](const json& r) {
                      return LiveCluster::is_action(r, "EvictMachines") && r["t_s"] >= t_fault;
                    },
                    20)
                   .is_null());
  const json started = c.wait_for(
      [&](const json& r) { return LiveCluster::is_event(r, "JobStarted") && r["t_s"] > t_fault; },
      40);
  ASSERT_FALSE(started.is_null());
  ASSERT_FALSE(c.wait_step(started["event"].value("step", 0L) + 5, 30).is_null());
  c.kill_controller(SIGTERM);
  const auto restarted = std::chrono::steady_clock::now();
  c.start_controller(false);
  const json restart =
      c.wait_for([](const json& r) { return r.value("kind", "") == "restart"; }, 40);
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - restarted).count();
  ASSERT_FALSE(restart.is_null()) << "no restart record";
  EXPECT_LT(waited, 10.0) << "the restarted controller waited for m1's agent";
  const json adopted = c.wait_for(
      [](const json& r) {
        return r.value("kind", "") == "outcome" &&
               r.value("detail", "").find("adopted") != std::string::npos;
      },
      10);
  EXPECT_FALSE(adopted.is_null()) << "the job was not adopted";
  c.stop_run();
}

TEST(LiveE2E, ClientWithoutTokenIsRefusedAndARestartedControllerAdoptsTheJob) {
  LiveCluster c("restart", json::object());
  c.start_controller();
  c.start_agents();
  ASSERT_FALSE(c.wait_step(15, 60).is_null());
  // A client with a wrong token.
  {
    json cfg = json::parse(slurp(c.config()));
    std::ofstream(c.dir() + "/bad-token") << "not-the-right-token-at-all\n";
    chmod((c.dir() + "/bad-token").c_str(), 0600);
    cfg["token_file"] = c.dir() + "/bad-token";
    std::ofstream(c.dir() + "/bad.json") << cfg.dump();
    EXPECT_NE(c.client({"status", c.dir() + "/bad.json"}), 0);
    // The client finds the controller's proof wrong and leaves without answering.
    EXPECT_FALSE(c.wait_for(
                      [](const json& r) {
                        return r.value("kind", "") == "note" &&
                               r.value("text", "").find("did not prove the token") !=
                                   std::string::npos;
                      },
                      10)
                     .is_null())
        << "the failed handshake is logged";
  }
  // Kill the controller mid-run; the job keeps running under its agents.
  const long before = c.last_step();
  c.kill_controller(SIGKILL);
  std::this_thread::sleep_for(std::chrono::seconds(2));
  c.start_controller(false);
  ASSERT_FALSE(
      c.wait_for([](const json& r) { return r.value("kind", "") == "restart"; }, 20).is_null());
  const json adopted = c.wait_for(
      [](const json& r) {
        return r.value("kind", "") == "outcome" &&
               r.value("detail", "").find("adopted") != std::string::npos;
      },
      30);
  EXPECT_FALSE(adopted.is_null()) << "the restarted controller relaunched instead of adopting";
  ASSERT_FALSE(c.wait_step(before + 30, 60).is_null()) << "the job did not continue";
  c.stop_run();
  // Every step's loss still matches the fault-free run: nothing was lost or redone wrong.
  c.expect_bit_identical_to_reference();
}

}  // namespace

// The operator's view through Prometheus equals the controller's own account: a run with one
// killed rank trains a bounded number of steps and finishes, so its ETTR is final; Prometheus
// (Debian's binary, scraping every second with the bearer token) must then hold exactly the
// ETTR that `faultline live status` reports, and the incident counters must count the kill.
TEST(LiveE2E, PrometheusScrapesTheControllersExactEttrAndCountsTheKilledRank) {
  using namespace faultline::live_e2e::metrics_e2e;
  const std::string prometheus = find_prometheus();
  if (prometheus.empty()) {
    // CI installs it (.ci/install-deps): there, a missing binary is a failure, not a skip.
    if (std::getenv("CI")) FAIL() << "prometheus is not installed (apt-get install prometheus)";
    GTEST_SKIP() << "prometheus is not installed (apt-get install prometheus)";
  }
  const auto t0 = std::chrono::steady_clock::now();
  LiveCluster c("metrics", json::object());
  const int metrics_port = free_port();
  const int prom_port = free_port();
  const std::string token = "metrics-e2e-token-" + std::to_string(getpid()) + "-0123456789";
  const std::string token_file = c.write_token("metrics-token", token);
  c.edit_config([&](json& cfg) {
    cfg["metrics_listen"] = "127.0.0.1:" + std::to_string(metrics_port);
    cfg["metrics_token_file"] = token_file;
    cfg["metrics_linger_s"] = 30;
    auto& argv = cfg["job"]["versions"]["v1"];
    argv.push_back("--steps");
    argv.push_back("60");
  });
  std::ofstream(c.dir() + "/prometheus.yml")
      << "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
         "scrape_configs:\n"
         "  - job_name: faultline\n"
         "    scrape_interval: 1s\n"
         "    scrape_timeout: 1s\n"
         "    authorization: {type: Bearer, credentials_file: "
      << token_file
      << "}\n"
         "    static_configs: [{targets: ['127.0.0.1:"
      << metrics_port << "']}]\n";
  Prometheus prom;
  prom.pid = spawn({prometheus, "--config.file=" + c.dir() + "/prometheus.yml",
                    "--storage.tsdb.path=" + c.dir() + "/prometheus-data",
                    "--web.listen-address=127.0.0.1:" + std::to_string(prom_port)},
                   c.dir() + "/prometheus.log");
  ASSERT_GT(prom.pid, 0);
  c.start_controller();
  c.start_agents();

  ASSERT_FALSE(c.wait_step(20, 60).is_null()) << "training did not reach step 20";
  // The endpoint itself (listening by now): without the token, nothing.
  const std::string get = "GET /metrics HTTP/1.1\r\nHost: x\r\n";
  EXPECT_EQ(http(metrics_port, get + "\r\n").rfind("HTTP/1.1 401 ", 0), 0u);
  ASSERT_EQ(c.inject("m1", "kill"), 0);
  const double t_fault = c.fault_time("kill");
  ASSERT_FALSE(c.wait_for(
                    [&](const json& r) {
                      return LiveCluster::is_event(r, "JobStarted") && r["t_s"] > t_fault;
                    },
                    40)
                   .is_null())
      << "training did not resume after the kill";

  // The job trains its 60 steps and finishes; the controller writes its summary and serves
  // the final values for metrics_linger_s. Wait until Prometheus has scraped them.
  json ended;
  for (int i = 0; i < 600 && (ended.empty() || sample_value(ended) != 1); ++i) {
    ended = prom_query(prom_port, "faultline_run_ended");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_FALSE(ended.empty()) << "Prometheus never got a sample; its targets: "
                              << body_of(http(prom_port, "GET /api/v1/targets HTTP/1.0\r\n\r\n"));
  ASSERT_EQ(sample_value(ended), 1) << "the run did not end within 60 s";
  const json ettr = prom_query(prom_port, "faultline_ettr");
  ASSERT_EQ(ettr.size(), 1u);
  const double prom_ettr = sample_value(ettr);

  // The controller's own account, after the run ended (the accounting is final).
  ASSERT_EQ(c.client_to({"status", c.config(), "--json"}, c.dir() + "/status.json"), 0);
  const json status = json::parse(slurp(c.dir() + "/status.json"));
  const double own_ettr = status.at("ettr_so_far").get<double>();
  std::cerr << std::setprecision(17) << "ETTR: Prometheus " << prom_ettr
            << ", faultline live status " << own_ettr << ", difference " << prom_ettr - own_ettr
            << "\n";
  EXPECT_GT(own_ettr, 0);
  EXPECT_NEAR(prom_ettr, own_ettr, 1e-9);
  EXPECT_EQ(prom_ettr, own_ettr)
      << "both print the shortest form that reads back as the same double";
  // And the summary record's ETTR (the event log) is the same number.
  const json summary =
      c.wait_for([](const json& r) { return r.value("kind", "") == "summary"; }, 5);
  ASSERT_FALSE(summary.is_null());
  EXPECT_EQ(summary["ettr"].get<double>(), own_ettr);

  // The kill is one rank_exit incident, recovered; every incident the controller counts
  // (the job's own finish included) is counted as opened.
  const json killed = prom_query(
      prom_port, "faultline_incidents_total{category=\"rank_exit\",resolution=\"recovered\"}");
  ASSERT_EQ(killed.size(), 1u) << prom_query(prom_port, "faultline_incidents_total").dump();
  EXPECT_GE(sample_value(killed), 1);
  std::cerr << "incidents: rank_exit recovered " << sample_value(killed)
            << ", opened (all categories) "
            << prom_query(prom_port, "sum(faultline_incidents_opened_total)").dump()
            << ", status incident_count " << status.at("incident_count") << "\n";
  const json opened = prom_query(prom_port, "sum(faultline_incidents_opened_total)");
  ASSERT_EQ(opened.size(), 1u);
  EXPECT_EQ(sample_value(opened), status.at("incident_count").get<double>());
  const json recovered = prom_query(prom_port, "faultline_recovery_latency_seconds_count");
  ASSERT_EQ(recovered.size(), 1u);
  EXPECT_EQ(sample_value(recovered), sample_value(killed));
  // The same final values come straight from the endpoint.
  const std::string direct =
      body_of(http(metrics_port, get + "Authorization: Bearer " + token + "\r\n\r\n"));
  const std::size_t at = direct.find("\nfaultline_ettr ");
  ASSERT_NE(at, std::string::npos) << direct.substr(0, 600);
  EXPECT_EQ(std::strtod(direct.c_str() + at + 16, nullptr), own_ettr);
  const double took_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cerr << "metrics e2e took " << took_s << " s\n";
  EXPECT_LT(took_s, 90);
}

// --- Probes across machines (PROTOCOL.md): inter_all_gather with probe_bin ------------------

// Starts the run with `probe_bin` (GPUs hidden: namespace hosts would share this host's, and
// NCCL refuses two ranks on one GPU; the GPU run across real machines is the GPU
// validation's), trains, kills a rank on m1, and waits for byterobust's stop-time
// inter_all_gather on m1 and m2: its action in *action, its outcome in *outcome.
static void kill_and_wait_for_relayed_probe(LiveCluster& c, const std::string& probe_bin,
                                            json* action, json* outcome) {
  c.edit_config([&](json& j) {
    j["probe_bin"] = probe_bin;
    j["job"]["env"]["CUDA_VISIBLE_DEVICES"] = "";
  });
  c.start_controller();
  c.start_agents();
  ASSERT_FALSE(c.wait_step(10, 60).is_null()) << "training did not reach step 10";
  ASSERT_EQ(c.inject("m1", "kill"), 0);
  const double t_fault = c.fault_time("kill");
  ASSERT_GE(t_fault, 0);
  *action = c.wait_for(
      [&](const json& r) {
        return LiveCluster::is_action(r, "RunProbe") && r["t_s"] >= t_fault &&
               r["action"].value("test", "") == "inter-all-gather";
      },
      30);
  ASSERT_FALSE(action->is_null()) << "no inter_all_gather after the kill";
  const long id = action->value("id", -1L);
  *outcome = c.wait_for(
      [&](const json& r) { return r.value("kind", "") == "outcome" && r.value("id", -2L) == id; },
      30);
  ASSERT_FALSE(outcome->is_null()) << "the inter_all_gather probe did not end";
}

// The NCCL unique id of faultline-probe's all-gather across machines travels from rank 0's agent
// through the controller to the other agents, over the authenticated channel. This host has no
// GPU: each probe still does its part of the rendezvous (rank 0 publishes random bytes of the id's
// size) and reports no_gpu, and the training job's CPU all-gather tests the data path.
TEST(LiveE2E, ProbesAcrossMachinesGetTheirRendezvousRelayedByTheController) {
  LiveCluster c("rdv", json{{"probe_deadline_s", 8}});
  json action, outcome;
  kill_and_wait_for_relayed_probe(c, PROBE_BIN, &action, &outcome);
  if (::testing::Test::HasFatalFailure()) return;
  EXPECT_EQ(action["action"]["machines"], json::array({1, 2}));
  const std::string detail = outcome.value("detail", "");
  EXPECT_NE(detail.find("inter_all_gather: all passed"), std::string::npos) << detail;
  EXPECT_NE(detail.find("rendezvous relayed by the controller: every machine joined (m1, m2)"),
            std::string::npos)
      << detail;
  const long id = action.value("id", -1L);
  const json result = c.wait_for(
      [&](const json& r) {
        return LiveCluster::is_event(r, "ProbeResult") && r["event"].value("action", -1L) == id;
      },
      5);
  ASSERT_FALSE(result.is_null());
  EXPECT_EQ(result["event"]["failed"], json::array());
  std::cerr << "relayed inter_all_gather took " << outcome.value("duration_s", -1.0)
            << " s: " << detail << "\n";
  // The rendezvous files are the agents' own and gone after the probe.
  for (const char* m : {"m1", "m2"}) {
    std::error_code ec;
    int left = 0;
    for (const auto& e : fs::directory_iterator(c.dir() + "/" + m + "/rendezvous", ec))
      left += e.is_regular_file();
    EXPECT_FALSE(ec) << m << ": " << ec.message();
    EXPECT_EQ(left, 0) << m;
  }
  c.stop_run();
}

// A machine whose probe never joins the rendezvous (a hung process on m2, rank 1) is named alone,
// within the probe's deadline: m1 joined and only waited for it.
TEST(LiveE2E, AProbeThatNeverJoinsTheRendezvousNamesItsMachineWithinTheDeadline) {
  LiveCluster c("rdv-hang", json{{"probe_deadline_s", 5}});
  const std::string wrapper = c.dir() + "/probe-wrapper.sh";
  std::ofstream(wrapper)
      << "#!/bin/sh\n"
      << "if [ \"$FAULTLINE_MACHINE\" = m2 ] && [ \"$1\" = nccl ]; then exec sleep 600; fi\n"
      << "exec " << PROBE_BIN << " \"$@\"\n";
  chmod(wrapper.c_str(), 0755);
  json action, outcome;
  kill_and_wait_for_relayed_probe(c, wrapper, &action, &outcome);
  if (::testing::Test::HasFatalFailure()) return;
  const std::string detail = outcome.value("detail", "");
  EXPECT_NE(detail.find("inter_all_gather: failed on m2;"), std::string::npos) << detail;
  EXPECT_NE(detail.find("rendezvous: m2 did not join"), std::string::npos) << detail;
  const double took = outcome["t_s"].get<double>() - action["t_s"].get<double>();
  EXPECT_GE(took, 4.0) << "the probe's deadline ended it";
  EXPECT_LT(took, 5.0 + 1.5) << "within the deadline (5 s), not the controller's request timeout";
  const long id = action.value("id", -1L);
  const json result = c.wait_for(
      [&](const json& r) {
        return LiveCluster::is_event(r, "ProbeResult") && r["event"].value("action", -1L) == id;
      },
      5);
  ASSERT_FALSE(result.is_null());
  EXPECT_EQ(result["event"]["failed"], json::array({2}));
  EXPECT_TRUE(result["event"].value("timed_out", false));
  // The named machine is the one the policy takes out.
  const json evict = c.wait_for(
      [&](const json& r) {
        return LiveCluster::is_action(r, "EvictMachines") &&
               r["t_s"] >= outcome["t_s"].get<double>();
      },
      10);
  ASSERT_FALSE(evict.is_null());
  EXPECT_EQ(evict["action"]["machines"], json::array({2}));
  std::cerr << "inter_all_gather with m2 missing took " << took << " s: " << detail << "\n";
  c.stop_run();
}
