#include "scenarios/scenario.h"

#include <gtest/gtest.h>

#include "policies/builtin.h"

namespace faultline::scenarios {
namespace {

const char* kMinimal = R"({
  "description": "minimal",
  "cluster": {"machines": 16, "gpus_per_machine": 8},
  "job": {"tp": 8, "pp": 4, "dp": 4, "step_time_s": 5, "horizon_days": 1},
  "faults": {"categories": [{"name": "c", "rate_per_job_day": 32, "symptom": "crash", "scope": "job"}]},
  "policy": {"stack": "requeue", "params": {"checkpoint_interval_s": 900}}
})";

TEST(Scenario, MinimalLoadsWithDefaults) {
  Registry r = policies::builtin_registry();
  Scenario s = parse_scenario(kMinimal, "m.json", {}, r);
  EXPECT_EQ(s.name, "m");
  EXPECT_EQ(s.cluster.machines, 16);
  EXPECT_EQ(s.cluster.rack_size, 16);
  // rate_per_job_day is spread over the machines.
  EXPECT_DOUBLE_EQ(s.faults[0].rate_per_machine_day, 2.0);
  EXPECT_EQ(s.policy_params.get("checkpoint_interval_s"), 900);
  EXPECT_EQ(s.policy_params.get("checkpoint_write_s"), 6.77);
}

TEST(Scenario, SetOverridesByPathIndexAndName) {
  Registry r = policies::builtin_registry();
  Scenario s = parse_scenario(kMinimal, "m.json",
                              {"job.pp=2", "job.dp=8", "faults.categories.c.symptom=hang",
                               "faults.categories[0].rate_per_job_day=16", "policy.params.checkpoint_write_s=1",
                               "description=changed by --set"},
                              r);
  EXPECT_EQ(s.cluster.pp, 2);
  EXPECT_EQ(s.faults[0].symptom, Symptom::kHang);
  EXPECT_DOUBLE_EQ(s.faults[0].rate_per_machine_day, 1.0);
  EXPECT_EQ(s.policy_params.get("checkpoint_write_s"), 1);
  EXPECT_EQ(s.description, "changed by --set");
}

TEST(Scenario, ErrorNamesFilePathAndExpectation) {
  Registry r = policies::builtin_registry();
  try {
    parse_scenario(kMinimal, "m.json", {"job.dp=5"}, r);
    FAIL() << "accepted inconsistent parallelism";
  } catch (const ScenarioError& e) {
    EXPECT_EQ(std::string(e.what()),
              "m.json: $.job: expected tp*pp*dp == cluster.machines*cluster.gpus_per_machine (128), got 8*4*5 = 160");
  }
}

TEST(Scenario, AlertCoverageAndCheckpointMfuLossDefaultToNoEffect) {
  Registry r = policies::builtin_registry();
  Scenario s = parse_scenario(kMinimal, "m.json", {}, r);
  EXPECT_EQ(s.job.checkpoint_mfu_loss, 0);
  EXPECT_EQ(s.faults[0].alert_coverage, 1);
  s = parse_scenario(kMinimal, "m.json",
                     {"job.checkpoint_mfu_loss=0.0071", "faults.categories.c.alert=gpu",
                      "faults.categories.c.alert_coverage=0.71"},
                     r);
  EXPECT_DOUBLE_EQ(s.job.checkpoint_mfu_loss, 0.0071);
  EXPECT_DOUBLE_EQ(s.faults[0].alert_coverage, 0.71);
  EXPECT_THROW(parse_scenario(kMinimal, "m.json", {"faults.categories.c.alert=gpu", "faults.categories.c.alert_coverage=1.5"}, r),
               ScenarioError);
  EXPECT_THROW(parse_scenario(kMinimal, "m.json", {"job.checkpoint_mfu_loss=-0.1"}, r), ScenarioError);
}

TEST(Scenario, ShippedScenariosLoad) {
  Registry r = policies::builtin_registry();
  for (const char* f : {"byterobust-dense-9600.json", "byterobust-moe-9600.json", "daly-check.json", "scale-100k.json",
                        "scale-200k.json", "recovery-16k.json"}) {
    EXPECT_NO_THROW(load_scenario(std::string(FAULTLINE_SOURCE_DIR "/scenarios/") + f, {}, r)) << f;
  }
}

}  // namespace
}  // namespace faultline::scenarios
