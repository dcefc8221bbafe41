// Live mode end to end with its launchers: agents started over ssh on namespace hosts, and as
// Slurm job steps with spare nodes as standbys.
#include "tests/realexec/live/live_cluster.h"
#include "tests/realexec/live/replay_check.h"

namespace {

using namespace faultline::live_e2e;

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

}  // namespace
