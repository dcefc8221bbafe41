// In-place restarts (StartJob::in_place, recovery=flash: FlashRecovery, arXiv 2509.03047)
// against the standard restart, through the CLI: the restart cost each pays, in closed
// form on one scripted crash, and how it grows with the job's size under Poisson faults.
#include <gtest/gtest.h>

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

// The restart costs of both tests: a whole-job start pays kInit + kPerMachine x machines,
// an in-place one kInPlace + kPerMachine x its restarted machines.
constexpr double kInit = 100, kPerMachine = 10, kInPlace = 20, kWake = 45;

// A job of `machines` machines (TP 8 inside each, DP across them, steps of 1 s) under the
// byterobust stack with `recovery`; a crash is seen by the GPU inspection first (its log
// names the culprit, 10 minutes later), which evicts its machine and takes the standby.
json gpu_crash_job(int machines, const std::string& recovery) {
  return {
      {"description", "in-place restart test"},
      {"seed", 11},
      {"cluster",
       {{"machines", machines},
        {"gpus_per_machine", 8},
        {"rack_size", std::min(machines, 16)},
        {"storage_hosts", 1},
        {"nic_gbps", 400}}},
      {"job",
       {{"tp", 8},
        {"pp", 1},
        {"dp", machines},
        {"step_time_s", 1},
        {"checkpoint_bytes_per_machine", 0},
        {"image_bytes", 0},
        {"init_s", kInit},
        {"init_per_machine_s", kPerMachine},
        {"inplace_init_s", kInPlace},
        {"horizon_days", 0.1}}},
      {"faults",
       {{"categories", json::array({{{"name", "gpu_crash"},
                                     {"class", "explicit"},
                                     {"rate_per_job_day", 1},
                                     {"scope", "machine"},
                                     {"symptom", "crash"},
                                     {"persistent", true},
                                     {"alert", "gpu"},
                                     {"attribution", 1},
                                     {"observe_after_s", 600}}})}}},
      {"diagnosis", {{"standby_wake_s", kWake}}},
      {"policy",
       {{"stack", "byterobust"},
        {"compared_with", json::array({"byterobust+recovery=flash"})},  // inplace_init_s is flash's
        {"params",
         {{"recovery", recovery},
          {"standby_pool", 1},
          {"checkpoint", "remote"},
          {"checkpoint_interval_s", 3600},
          {"remote_checkpoint_write_s", 0}}}}}};
}

// One crash of machine n0 at t = 1000.5 s, replayed from a trace.
json one_crash(const std::filesystem::path& dir, int machines, const std::string& recovery) {
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "crash.jsonl")
      << "{\"time_s\":1000.5,\"node\":\"n0\",\"event\":\"fault_start\",\"class\":\"Xid\"}\n";
  std::ofstream(dir / "map.json") << R"({"description": "every trace fault is a GPU crash",
    "categories": [{"name": "gpu_crash", "class": "explicit", "scope": "machine",
                    "symptom": "crash", "persistent": true, "alert": "gpu", "attribution": 1,
                    "observe_after_s": 600}],
    "rules": [], "default": "gpu_crash"})";
  json doc = gpu_crash_job(machines, recovery);
  doc["faults"] = {{"categories", json::array()},
                   {"trace",
                    {{"file", "crash.jsonl"},
                     {"mapping", "map.json"},
                     {"mode", "replay"},
                     {"extra_slots", "fault_free"}}}};
  const std::filesystem::path scen = dir / (recovery + ".json");
  std::ofstream(scen) << doc.dump(2);
  return sim_run_json({scen.string(), "--replicas", "1"});
}

// The first start initialises all 4 machines (100 + 4 x 10 s: training from t = 140 s, no
// checkpoint to restore); the crash at t = 1000.5 s has trained 860.5 s since, with no
// checkpoint yet (hourly). standby restarts the whole job: 140 s of init again after the
// 45 s wake, and the 860.5 s go back to the start. flash restarts the replaced machine
// alone, in place: 20 + 1 x 10 s, and loses only the half step in flight.
TEST(InPlaceRestart, OneCrashCostsTheClosedFormRestartOfEachKind) {
  const std::filesystem::path dir = scratch_dir("inplace");
  std::filesystem::remove_all(dir);
  const json standby = one_crash(dir, 4, "standby");
  const json flash = one_crash(dir, 4, "flash");
  for (const json* r : {&standby, &flash})
    ASSERT_EQ((*r)["incidents"]["per_replica"].get<double>(), 1.0) << r->dump();
  const double first = kInit + 4 * kPerMachine;
  EXPECT_NEAR(standby["breakdown_s"]["failover"].get<double>(),
              first + kWake + kInit + 4 * kPerMachine, 1e-6);
  EXPECT_NEAR(flash["breakdown_s"]["failover"].get<double>(),
              first + kWake + kInPlace + kPerMachine, 1e-6);
  EXPECT_NEAR(standby["breakdown_s"]["recompute"].get<double>(), 1000.5 - first, 1e-6);
  EXPECT_NEAR(flash["breakdown_s"]["recompute"].get<double>(), 0.5, 1e-6);
  EXPECT_NEAR(standby["breakdown_s"]["restore"].get<double>(), 0, 1e-9);
  EXPECT_NEAR(flash["breakdown_s"]["restore"].get<double>(), 0, 1e-9);
  // With state to restore: standby reloads every machine's checkpoint from remote storage
  // at both starts (the same batch twice); flash's restart fetches one machine's state
  // from its data-parallel peer, one NIC's transfer: 50 GB at 400 Gb/s, its links loaded
  // 1.05 x by SimGrid's CM02 model (0.05 for the way back, sim/network.cc): 1.05 s.
  const double bytes = 50e9;
  auto with_state = [&](const std::string& recovery) {
    json doc = json::parse(std::ifstream(dir / (recovery + ".json")));
    doc["job"]["checkpoint_bytes_per_machine"] = bytes;
    std::ofstream(dir / (recovery + "-state.json")) << doc.dump(2);
    return sim_run_json({(dir / (recovery + "-state.json")).string(), "--replicas", "1"});
  };
  const double remote = with_state("standby")["breakdown_s"]["restore"].get<double>() / 2;
  const double peer = with_state("flash")["breakdown_s"]["restore"].get<double>() - remote;
  EXPECT_GT(remote, 0);
  EXPECT_NEAR(peer, 1.05 * bytes * 8 / 400e9, 1e-3);
  std::filesystem::remove_all(dir);
}

// The restart cost per incident at 8 and 64 machines under Poisson GPU crashes (the same
// count per job-day at both sizes): standby's grows by init_per_machine_s x 56 machines,
// flash's stays flat (the replaced machine alone restarts). Per incident: failover,
// restore and recompute, less the first start's init.
TEST(InPlaceRestart, FlashRecoveryTimeDoesNotGrowWithTheJobWhereStandbysDoes) {
  auto per_incident = [](int machines, const std::string& recovery) {
    json doc = gpu_crash_job(machines, recovery);
    doc["job"]["horizon_days"] = 10;
    doc["faults"]["categories"][0]["rate_per_job_day"] = 2;
    doc["policy"]["params"]["standby_pool"] = 4;
    doc["policy"]["params"].erase("checkpoint");  // every step in memory: no recompute to speak of
    doc["policy"]["params"].erase("checkpoint_interval_s");
    doc["policy"]["params"].erase("remote_checkpoint_write_s");
    const std::filesystem::path scen =
        std::filesystem::temp_directory_path() /
        ("faultline-inplace-" + recovery + "-" + std::to_string(machines) + ".json");
    std::ofstream(scen) << doc.dump(2);
    const json r = sim_run_json({scen.string(), "--replicas", "10", "--jobs", "2"});
    std::filesystem::remove(scen);
    const json& b = r["breakdown_s"];
    const double incidents = r["incidents"]["per_replica"].get<double>();
    EXPECT_GT(incidents, 10) << recovery << " " << machines;
    return (b["failover"].get<double>() + b["restore"].get<double>() +
            b["recompute"].get<double>() - (kInit + kPerMachine * machines)) /
           incidents;
  };
  const double s8 = per_incident(8, "standby"), s64 = per_incident(64, "standby");
  const double f8 = per_incident(8, "flash"), f64 = per_incident(64, "flash");
  const double growth = kPerMachine * (64 - 8);  // 560 s
  EXPECT_NEAR(s64 - s8, growth, 0.05 * growth);
  EXPECT_NEAR(f64 - f8, 0, 0.05 * growth);
  // And each at its size, against the closed form of one restart after the wake.
  EXPECT_NEAR(s64, kWake + kInit + kPerMachine * 64, 0.05 * growth);
  EXPECT_NEAR(f64, kWake + kInPlace + kPerMachine, 0.05 * growth);
}

// Bad input: a negative restart cost is refused in one line naming the field (exit 2).
TEST(InPlaceRestart, NegativeRestartCostsAreRefusedNamingTheField) {
  const std::filesystem::path scen = scratch_dir("inplace-bad.json");
  std::ofstream(scen) << gpu_crash_job(4, "flash").dump(2);
  for (const char* field : {"init_per_machine_s", "inplace_init_s"}) {
    CliResult r =
        run_cli({"sim", "run", scen.string(), "--set", std::string("job.") + field + "=-1"});
    EXPECT_EQ(r.exit_code, 2) << field;
    EXPECT_NE(r.err.find(std::string("$.job.") + field + ": expected a number in [0, "),
              std::string::npos)
        << r.err;
  }
  std::filesystem::remove(scen);
}

}  // namespace
}  // namespace faultline::testing
