// Heartbeats and timeouts against a host that is merely slow (docs/running-live.md,
// "Heartbeats and timeouts"): a machine's whole host (its agent and its ranks) stopped with
// SIGSTOP while the job saves a checkpoint, as a save that freezes the host for tens of
// seconds does. With the documented settings for saves of up to 30 s the machine is not
// evicted; stopped beyond stalled_agent_timeout_s it is, within a heartbeat of the timeout.
#include <dirent.h>
#include <signal.h>

#include <fstream>
#include <set>
#include <sstream>

#include "tests/realexec/live/live_cluster.h"

namespace {

using namespace faultline::live_e2e;

// `root` and every process descended from it, from /proc (the ranks and any probe the agent
// runs: what a frozen host stops).
std::vector<pid_t> process_tree(pid_t root) {
  std::map<pid_t, std::vector<pid_t>> children;
  if (DIR* d = ::opendir("/proc")) {
    while (const dirent* e = ::readdir(d)) {
      const pid_t pid = static_cast<pid_t>(std::atol(e->d_name));
      if (pid <= 0) continue;
      std::ifstream in("/proc/" + std::string(e->d_name) + "/stat");
      std::string stat;
      std::getline(in, stat);
      const auto close = stat.rfind(')');
      if (close == std::string::npos) continue;
      std::istringstream rest(stat.substr(close + 2));
      char state = 0;
      pid_t ppid = 0;
      rest >> state >> ppid;
      children[ppid].push_back(pid);
    }
    ::closedir(d);
  }
  std::vector<pid_t> out{root};
  for (std::size_t i = 0; i < out.size(); ++i)
    for (pid_t c : children[out[i]]) out.push_back(c);
  return out;
}

// Stops a machine's host: its agent first (nothing of the freeze reaches the controller),
// then its ranks. Returns what was stopped, for resume().
std::vector<pid_t> freeze_host(const LiveCluster& c, const std::string& machine) {
  const pid_t agent = c.agent_pid(machine);
  EXPECT_GT(agent, 0);
  if (agent <= 0) return {};
  ::kill(agent, SIGSTOP);
  const std::vector<pid_t> tree = process_tree(agent);
  for (pid_t p : tree) ::kill(p, SIGSTOP);
  return tree;
}

void resume(const std::vector<pid_t>& tree) {
  for (auto it = tree.rbegin(); it != tree.rend(); ++it) ::kill(*it, SIGCONT);
}

bool lost_note(const json& r, const std::string& machine) {
  return LiveCluster::is_note(r, "agent of " + machine + " lost");
}

// The settings docs/running-live.md gives for a job whose checkpoint saves can freeze a
// host for up to 30 s: stalled_agent_timeout_s 45 (the longest freeze and a margin), the
// stall window 60 s (a freeze stops every rank's progress), heartbeat_timeout_s as it was
// (a host that is down or cut off is still reported after 3 s).
TEST(LiveHeartbeat, AHostFrozen30sDuringACheckpointSaveIsKeptOneFrozenBeyondTheTimeoutIsEvicted) {
  LiveCluster c("frozen-host", json{{"stall_window_s", 60}});
  c.edit_config([](json& cfg) { cfg["stalled_agent_timeout_s"] = 45; });
  c.start_controller();
  c.start_agents();
  // Step 20: the reference job saves its checkpoint every 10 steps; the freeze begins as
  // the save does.
  const json saving = c.wait_step(20, 60);
  ASSERT_FALSE(saving.is_null()) << "training did not reach step 20";
  const double t_freeze = saving["t_s"].get<double>();
  std::vector<pid_t> frozen = freeze_host(c, "m1");
  std::this_thread::sleep_for(std::chrono::seconds(30));
  resume(frozen);
  ASSERT_FALSE(c.wait_step(saving["step"].get<long>() + 20, 60).is_null())
      << "training did not go on after the freeze";
  bool waited = false, heard = false;
  for (const json& r : c.records()) {
    if (r.value("t_s", 0.0) < t_freeze) continue;
    EXPECT_FALSE(lost_note(r, "m1")) << "a host frozen for 30 s was reported lost: " << r.dump();
    EXPECT_FALSE(LiveCluster::is_action(r, "EvictMachines")) << r.dump();
    EXPECT_FALSE(LiveCluster::is_action(r, "StopJob")) << "a false alarm: " << r.dump();
    waited |= LiveCluster::is_note(r, "the agent of m1 is silent for");
    heard |= LiveCluster::is_note(r, "the agent of m1 is heard again after");
  }
  EXPECT_TRUE(waited) << "the controller did not say it waits for a host that answers";
  EXPECT_TRUE(heard) << "the controller did not say the agent was heard again";

  // Beyond the timeout: m2's host frozen for good is reported 45 s into its silence (its
  // last heartbeat, half a second at most before the freeze) and evicted.
  const json before = c.wait_step(c.last_step() + 1, 10);
  ASSERT_FALSE(before.is_null());
  const double t_second = before["t_s"].get<double>();
  frozen = freeze_host(c, "m2");
  const json lost =
      c.wait_for([&](const json& r) { return lost_note(r, "m2") && r["t_s"] >= t_second; }, 70);
  resume(frozen);
  ASSERT_FALSE(lost.is_null()) << "a host frozen beyond stalled_agent_timeout_s was kept";
  const double after = lost["t_s"].get<double>() - t_second;
  EXPECT_GE(after, 44.0) << lost.dump();
  EXPECT_LE(after, 47.0) << lost.dump();
  EXPECT_NE(lost.value("text", "").find("its host answers"), std::string::npos) << lost.dump();
  const json evict = c.wait_for(
      [&](const json& r) {
        return LiveCluster::is_action(r, "EvictMachines") && r["t_s"] >= t_second &&
               r["action"]["machines"] == json::array({2});
      },
      30);
  EXPECT_FALSE(evict.is_null()) << "m2 was not evicted";
  std::cout << "[frozen-host] 30 s freeze kept; the second reported lost after " << after
            << " s, evicted after "
            << (evict.is_null() ? -1.0 : evict["t_s"].get<double>() - t_second) << " s\n";
  c.stop_run();
}

}  // namespace
