// Replica groups (issue 40): the recovery module replica-drop (FT-HSDP / torchft) against
// closed forms, through the real CLI. With one machine per replica, persistent crashes
// confined to it at rate r per machine-day, a refill that takes T (a warm standby's wake),
// an instant rejoin and no quorum pause, each replica alternates exponential up times of
// mean 1/r with down times of T: it is in the quorum a share 1 / (1 + r T) of the time
// (alternating renewal), and the job's ETTR is the expected fraction of live replicas.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/sim/sim_json.h"
#include "tests/support/cli.h"

namespace faultline::testing {
namespace {

using nlohmann::json;

std::string write_groups_scenario(const std::string& name, const json& doc) {
  const std::filesystem::path dir = scratch_dir("replica-groups");
  std::filesystem::create_directories(dir);
  const std::filesystem::path p = dir / (name + ".json");
  std::ofstream(p) << doc.dump(2);
  return p.string();
}

constexpr double kRate = 2;      // persistent crashes per machine-day
constexpr double kWakeS = 3600;  // a warm standby's wake: the refill's time T

// 64 machines of 8 GPUs, TP 8, PP 1: 64 replicas of one machine each. The byterobust stack
// with recovery=replica-drop, every-step checkpoints that block nothing, a pool of standbys
// that never runs dry, no start or warm-up cost.
json job(const json& categories) {
  return {
      {"description", "replica groups test"},
      {"seed", 11},
      {"replicas", 20},
      {"cluster",
       {{"machines", 64},
        {"scheduler", {{"reschedule_base_s", 0}, {"reschedule_per_machine_s", 0}}},
        {"repair", {{"to_manual", 0}, {"auto_fail", 0}, {"retire_after", 0}}}}},
      {"job",
       {{"tp", 8}, {"pp", 1}, {"dp", 64}, {"step_time_s", 1}, {"init_s", 0}, {"horizon_days", 30}}},
      {"diagnosis", {{"standby_wake_s", kWakeS}}},
      {"faults", {{"categories", categories}}},
      {"policy",
       {{"stack", "byterobust"},
        {"params",
         {{"recovery", "replica-drop"},
          {"checkpoint_blocking_s", 0},
          {"standby_pool", 64},
          {"min_replicas", 1},
          {"quorum_change_s", 0}}}}}};
}

json crash(const std::string& name, double rate) {
  return {{"name", name},
          {"rate_per_machine_day", rate},
          {"scope", "machine"},
          {"symptom", "crash"},
          {"persistent", true}};
}

TEST(ReplicaGroups, ETTREqualsTheExpectedShareOfLiveReplicas) {
  const json r =
      sim_run_json({write_groups_scenario("closed-form", job(json::array({crash("crash", kRate)}))),
                    "--jobs", "2"});
  const double rt = kRate * kWakeS / 86400;  // r T, in the same unit
  const double live = 1 / (1 + rt);          // 12/13
  const double ettr = r["ettr"]["mean"].get<double>();
  const double ci = r["ettr"]["ci95"][1].get<double>() - ettr;
  EXPECT_NEAR(ettr, live, std::max(2 * ci, 1e-3)) << "live share " << live;
  std::printf("ETTR %.5f, CI half-width %.5f, closed form 1 / (1 + r T) = %.5f\n", ettr, ci, live);
  // Every incident was a replica drop: nothing stopped the job.
  const json& by = r["resolved_by_per_replica"];
  EXPECT_GT(by.value("replica_drop", 0.0), 0.9 * kRate * 64 * 30 * live);
  for (const char* stop : {"reattempt", "stop_time_eviction", "requeue", "rollback"})
    EXPECT_EQ(by.value(stop, 0.0), 0.0) << stop;
  // What was lost is the missing replicas' share, nothing else.
  const json& lost = r["breakdown_share"];
  EXPECT_NEAR(lost["missing_replicas"].get<double>(), 1 - live, std::max(2 * ci, 1e-3));
}

TEST(ReplicaGroups, FaultsThatReachEveryReplicaStillStopTheWorld) {
  // A code bug crashes every replica at once: the job stops and rolls back as without
  // replica groups, and none of its incidents is a replica drop.
  json code = crash("code", 0.05);
  code["persistent"] = false;
  code["scope"] = "job";
  code["rate_per_job_day"] = 1;
  code.erase("rate_per_machine_day");
  code["code_bug"] = true;
  code["signature"] = "TypeError: user code";
  json doc = job(json::array({code}));
  const json r = sim_run_json({write_groups_scenario("code-bug", doc), "--jobs", "2"});
  EXPECT_EQ(r["resolved_by_per_replica"].value("replica_drop", 0.0), 0.0);
  EXPECT_GT(r["resolved_by_per_replica"].value("rollback", 0.0), 0.0);
  EXPECT_EQ(r["breakdown_s"]["missing_replicas"].get<double>(), 0.0);
}

TEST(ReplicaGroups, AtTheMinimumEveryFailureStopsTheJob) {
  // min_replicas = dp: no replica may leave, so every crash stops and restarts the job.
  json doc = job(json::array({crash("crash", 0.05)}));
  doc["policy"]["params"]["min_replicas"] = 64;
  const json r = sim_run_json({write_groups_scenario("at-minimum", doc), "--jobs", "2"});
  EXPECT_EQ(r["resolved_by_per_replica"].value("replica_drop", 0.0), 0.0);
  EXPECT_EQ(r["breakdown_s"]["missing_replicas"].get<double>(), 0.0);
  EXPECT_GT(r["incidents"]["per_replica"].get<double>(), 0.0);
}

// Regression: a replica whose real SimGrid batches (rejoins while the job trains) overlapped
// crashed at its end: a timed wait's timeout, still armed after a batch's notify had woken
// the replica, fired after the replica had freed the condition variable. Replica 54 of the
// 100k scenario was one such.
TEST(ReplicaGroups, AReplicaWhoseTransfersOverlappedEndsCleanly) {
  const json r = sim_run_json({scenarios_dir() + "/replica-drop-100k.json", "--set",
                               "policy.params.recovery=replica-drop", "--set",
                               "policy.params.min_replicas=625", "--replica", "54"});
  ASSERT_TRUE(r.contains("ettr"));
  EXPECT_GT(r["ettr"]["mean"].get<double>(), 0.9);
}

TEST(ReplicaGroups, BadInputIsAOneLineErrorNamingTheField) {
  struct Case {
    std::string name, expect;
    json doc;
  };
  std::vector<Case> cases;
  json above = job(json::array({crash("crash", 1)}));
  above["policy"]["params"]["min_replicas"] = 65;
  cases.push_back({"min-above-dp", "$.policy.params.min_replicas", above});
  json rate = job(json::array({crash("crash", 1)}));
  rate["job"]["partial_replica_rate"] = 1.5;
  cases.push_back({"rate-above-1", "$.job.partial_replica_rate", rate});
  json below = rate;
  below["job"]["partial_replica_rate"] = -0.1;
  cases.push_back({"rate-below-0", "$.job.partial_replica_rate", below});
  json nan = crash("nan", 1);
  nan["symptom"] = "nan";
  nan["replica_confined"] = true;
  cases.push_back({"nan-confined", "replica_confined", job(json::array({nan}))});
  for (const Case& c : cases) {
    const CliResult r = run_cli({"sim", "run", write_groups_scenario(c.name, c.doc)});
    EXPECT_EQ(r.exit_code, 2) << c.name << ": " << r.err;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << c.name << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << c.name << ": " << r.err;
  }
}

}  // namespace
}  // namespace faultline::testing
