#include "scenarios/scenario.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "policies/builtin.h"
#include "policies/module.h"
#include "scenarios/reference.h"
#include "scenarios/stack_fields.h"
#include "tests/support/shared_data.h"

namespace faultline::scenarios {
namespace {

const char* kMinimal = R"({
  "description": "minimal",
  "cluster": {"machines": 16, "gpus_per_machine": 8},
  "job": {"tp": 8, "pp": 4, "dp": 4, "step_time_s": 5, "horizon_days": 1},
  "faults": {"categories": [{"name": "c", "rate_per_job_day": 32, "symptom": "crash", "scope": "job"}]},
  "policy": {"stack": "requeue", "params": {"checkpoint_interval_s": 900}}
})";

// The minimal scenario under byterobust with its default modules, then `more`.
std::vector<std::string> byterobust(std::vector<std::string> more = {}) {
  std::vector<std::string> sets = {"policy.stack=byterobust", "policy.params={}"};
  sets.insert(sets.end(), more.begin(), more.end());
  return sets;
}

// The one-line error the minimal scenario with `sets` gets, or "accepted".
std::string minimal_error(const std::vector<std::string>& sets) {
  try {
    parse_scenario(kMinimal, "m.json", sets, policies::builtin_registry());
  } catch (const ScenarioError& e) {
    return std::string(e.what());
  }
  return std::string("accepted");
}

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
  Scenario s =
      parse_scenario(kMinimal, "m.json",
                     {"job.pp=2", "job.dp=8", "faults.categories.c.symptom=hang",
                      "faults.categories[0].rate_per_job_day=16",
                      "policy.params.checkpoint_write_s=1", "description=changed by --set"},
                     r);
  EXPECT_EQ(s.cluster.pp, 2);
  EXPECT_EQ(s.faults[0].symptom, Symptom::kHang);
  EXPECT_DOUBLE_EQ(s.faults[0].rate_per_machine_day, 1.0);
  EXPECT_EQ(s.policy_params.get("checkpoint_write_s"), 1);
  EXPECT_EQ(s.description, "changed by --set");
}

// The byterobust stack's modules are chosen by name (or index); an unknown name is an
// error that lists the names. restart_warmup_s defaults to none and must be >= 0.
TEST(Scenario, ModulesByNameAndRestartWarmup) {
  Registry r = policies::builtin_registry();
  const std::vector<std::string> br = {"policy.stack=byterobust", "policy.params={}"};
  auto with = [&](std::vector<std::string> more) {
    std::vector<std::string> sets = br;
    sets.insert(sets.end(), more.begin(), more.end());
    return parse_scenario(kMinimal, "m.json", sets, r);
  };
  Scenario s = with({});
  EXPECT_EQ(s.job.restart_warmup_s, 0);
  EXPECT_EQ(s.policy_params.choice("checkpoint"), "peer");  // the first registered
  s = with({"policy.params.checkpoint=remote", "policy.params.localization=stress",
            "policy.params.recovery=requeue", "policy.params.detection=timeout",
            "job.restart_warmup_s=120"});
  EXPECT_EQ(s.policy_params.choice("checkpoint"), "remote");
  EXPECT_EQ(s.policy_params.choice("localization"), "stress");
  EXPECT_EQ(s.policy_params.choice("recovery"), "requeue");
  EXPECT_EQ(s.policy_params.choice("detection"), "timeout");
  EXPECT_EQ(s.job.restart_warmup_s, 120);
  EXPECT_EQ(with({"policy.params.localization=1"}).policy_params.choice("localization"),
            "bisection");  // by index, held as the name
  try {
    with({"policy.params.checkpoint=gemini"});
    FAIL() << "accepted an unknown module";
  } catch (const ScenarioError& e) {
    EXPECT_EQ(std::string(e.what()),
              "m.json: $.policy.params.checkpoint: expected one of peer|memory|remote|daly, got "
              "\"gemini\"");
  }
  try {
    with({"policy.params.recovery=1.5"});
    FAIL() << "accepted a fractional choice";
  } catch (const ScenarioError& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "$.policy.params.recovery: parameter 'recovery' = 1.5 is not a choice"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(with({"policy.params.checkpoint_write_s=\"x\""}), ScenarioError);
  EXPECT_THROW(with({"job.restart_warmup_s=-1"}), ScenarioError);
}

// The restart cost model (FlashRecovery's in-place restarts): by default a start costs
// init_s whatever the job's size, and an in-place one the same; negative costs are refused
// in one line naming the field.
TEST(Scenario, RestartCostsDefaultToTodaysAndRefuseNegatives) {
  Registry r = policies::builtin_registry();
  Scenario s = parse_scenario(kMinimal, "m.json", {"job.init_s=60"}, r);
  EXPECT_EQ(s.job.init_per_machine_s, 0);
  EXPECT_EQ(s.job.inplace_init_s, 60);  // defaults to init_s
  // (inplace_init_s only with in-place restarts: FlashRecovery's.)
  s = parse_scenario(kMinimal, "m.json",
                     byterobust({"policy.params.recovery=flash", "job.init_s=60",
                                 "job.init_per_machine_s=0.02", "job.inplace_init_s=15"}),
                     r);
  EXPECT_EQ(s.job.init_per_machine_s, 0.02);
  EXPECT_EQ(s.job.inplace_init_s, 15);
  EXPECT_EQ(minimal_error({"job.init_per_machine_s=-1"}),
            "m.json: $.job.init_per_machine_s: expected a number in [0, 10000], got -1");
  EXPECT_EQ(minimal_error({"job.inplace_init_s=-0.5"}),
            "m.json: $.job.inplace_init_s: expected a number in [0, 1e+06], got -0.5");
}

// costs: absent by default (nothing is costed); prices read as given; a negative, a
// non-number, an unknown key or no price at all is one line naming the field.
TEST(Scenario, CostsAreOffByDefaultAndRefuseBadPricesNamingTheField) {
  Registry r = policies::builtin_registry();
  EXPECT_FALSE(parse_scenario(kMinimal, "m.json", {}, r).costs.has_value());
  const Scenario s =
      parse_scenario(kMinimal, "m.json", {"costs.gpu_hour=2", "costs.spare_machine_hour=16"}, r);
  ASSERT_TRUE(s.costs.has_value());
  EXPECT_EQ(s.costs->gpu_hour, 2);
  EXPECT_EQ(s.costs->spare_machine_hour, 16);
  EXPECT_EQ(s.costs->delay_day, 0);
  EXPECT_EQ(minimal_error({"costs.gpu_hour=-1"}),
            "m.json: $.costs.gpu_hour: expected a number in [0, 1e+09], got -1");
  EXPECT_EQ(minimal_error({"costs.delay_day=nan"}),
            "m.json: $.costs.delay_day: expected a number, got a string \"nan\"");
  EXPECT_EQ(minimal_error({"costs.gpu_hour=2", "costs.gpu_hours=3"}),
            "m.json: $.costs.gpu_hours: unknown key; expected one of: delay_day, gpu_hour, "
            "spare_machine_hour");
  EXPECT_EQ(minimal_error({"costs={}"}),
            "m.json: $.costs: expected at least one of gpu_hour, spare_machine_hour, delay_day "
            "above 0");
  EXPECT_EQ(minimal_error({"costs=3"}), "m.json: $.costs: expected an object, got an integer");
}

TEST(Scenario, ErrorNamesFilePathAndExpectation) {
  Registry r = policies::builtin_registry();
  try {
    parse_scenario(kMinimal, "m.json", {"job.dp=5"}, r);
    FAIL() << "accepted inconsistent parallelism";
  } catch (const ScenarioError& e) {
    EXPECT_EQ(std::string(e.what()),
              "m.json: $.job: expected tp*pp*dp == cluster.machines*cluster.gpus_per_machine "
              "(128), got 8*4*5 = 160");
  }
}

// NVLink domains (GB200 NVL72): a TP group wider than a machine is accepted only inside a
// domain; the domain fields are refused where they cannot act, each in one line naming the
// field and the expectation.
TEST(Scenario, TensorParallelismAcrossMachinesNeedsAnNvlinkDomainThatHoldsIt) {
  Registry r = policies::builtin_registry();
  const std::vector<std::string> nvl = {"cluster.gpus_per_machine=4", "cluster.machines=32",
                                        "job.tp=8", "job.pp=4", "job.dp=4"};
  auto with = [&](std::vector<std::string> more) {
    std::vector<std::string> sets = nvl;
    sets.insert(sets.end(), more.begin(), more.end());
    return parse_scenario(kMinimal, "m.json", sets, r);
  };
  auto error = [&](std::vector<std::string> more) {
    try {
      with(std::move(more));
    } catch (const ScenarioError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(error({}),
            "m.json: $.job.tp: expected a divisor of cluster.gpus_per_machine (4: tensor "
            "parallelism inside "
            "a machine), or a multiple of it that divides an NVLink domain's GPUs "
            "(cluster.nvlink_domain x "
            "gpus_per_machine = 4), got 8");
  const Scenario s =
      with({"cluster.nvlink_domain=16", "cluster.nvlink_spares=2", "job.cross_domain_slowdown=2"});
  EXPECT_EQ(s.cluster.nvlink_domain, 16);
  EXPECT_EQ(s.cluster.nvlink_spares, 2);
  EXPECT_DOUBLE_EQ(s.cluster.nvlink_gbps, 7200.0 * 4);
  EXPECT_DOUBLE_EQ(s.job.cross_domain_slowdown, 2);
  EXPECT_NE(error({"cluster.nvlink_domain=5"})
                .find("$.cluster.nvlink_domain: expected a divisor of cluster.machines"),
            std::string::npos);
  EXPECT_NE(error({"cluster.nvlink_domain=3", "cluster.machines=33"}).find("$.job"),
            std::string::npos);
  EXPECT_NE(error({"cluster.nvlink_domain=16", "cluster.nvlink_spares=2",
                   "cluster.repair={\"spare_machines\": 5}"})
                .find("$.cluster.repair.spare_machines: not with cluster.nvlink_spares"),
            std::string::npos);
  // Without a TP group across machines there is nothing to slow down; without domains, no
  // spare trays.
  EXPECT_EQ(minimal_error({"job.cross_domain_slowdown=2"}),
            "m.json: $.job.cross_domain_slowdown: only with job.tp wider than a machine (a "
            "tensor-parallel group "
            "across an NVLink domain's machines)");
  EXPECT_NE(minimal_error({"cluster.nvlink_spares=2"})
                .find("$.cluster.nvlink_spares: only with cluster.nvlink_domain > 1"),
            std::string::npos);
}

TEST(Scenario, AlertCoverageAndCheckpointMfuLossDefaultToNoEffect) {
  Registry r = policies::builtin_registry();
  Scenario s = parse_scenario(kMinimal, "m.json", {}, r);
  EXPECT_EQ(s.job.checkpoint_mfu_loss, 0);
  EXPECT_EQ(s.faults[0].alert_coverage, 1);
  // (Read by a stack with inspections and an every-step in-memory checkpoint: byterobust's
  // defaults.)
  s = parse_scenario(kMinimal, "m.json",
                     byterobust({"job.checkpoint_mfu_loss=0.0071", "faults.categories.c.alert=gpu",
                                 "faults.categories.c.alert_coverage=0.71"}),
                     r);
  EXPECT_DOUBLE_EQ(s.job.checkpoint_mfu_loss, 0.0071);
  EXPECT_DOUBLE_EQ(s.faults[0].alert_coverage, 0.71);
  EXPECT_THROW(parse_scenario(
                   kMinimal, "m.json",
                   {"faults.categories.c.alert=gpu", "faults.categories.c.alert_coverage=1.5"}, r),
               ScenarioError);
  EXPECT_THROW(parse_scenario(kMinimal, "m.json", {"job.checkpoint_mfu_loss=-0.1"}, r),
               ScenarioError);
}

// Code updates are urgent unless the category gives a share that is not; the share means
// nothing for the other symptoms and is refused there, in one line naming it.
TEST(Scenario, NonUrgentIsAShareOfTheCodeUpdates) {
  Registry r = policies::builtin_registry();
  EXPECT_EQ(parse_scenario(kMinimal, "m.json", {}, r).faults[0].non_urgent, 0);
  const std::vector<std::string> manual = {"faults.categories.c.symptom=manual",
                                           "faults.categories.c.non_urgent=0.25"};
  EXPECT_EQ(parse_scenario(kMinimal, "m.json", manual, r).faults[0].non_urgent, 0.25);
  EXPECT_EQ(minimal_error({"faults.categories.c.non_urgent=0.25"}),
            "m.json: $.faults.categories[0].non_urgent: only with \"symptom\": \"manual\" (a "
            "share of the code updates)");
  EXPECT_NE(
      minimal_error({"faults.categories.c.symptom=manual", "faults.categories.c.non_urgent=2"})
          .find("$.faults.categories[0].non_urgent"),
      std::string::npos);
}

// A NaN exits (the job's NaN check) unless the category says the job has none; the key
// means nothing for the other symptoms and is refused there.
TEST(Scenario, NanExitsUnlessTheCategorySaysNot) {
  Registry r = policies::builtin_registry();
  EXPECT_TRUE(parse_scenario(kMinimal, "m.json", {}, r).faults[0].exits);
  Scenario s =
      parse_scenario(kMinimal, "m.json",
                     {"faults.categories.c.symptom=nan", "faults.categories.c.exits=false"}, r);
  EXPECT_FALSE(s.faults[0].exits);
  try {
    parse_scenario(kMinimal, "m.json", {"faults.categories.c.exits=false"}, r);
    FAIL() << "accepted exits for a crash";
  } catch (const ScenarioError& e) {
    EXPECT_NE(std::string(e.what()).find("only with \"symptom\": \"nan\""), std::string::npos)
        << e.what();
  }
}

// A slowdown confined to a machine's link: only a slowdown of one machine may be so, and
// no test of one machine (nor a replay) sees it by default; a recall given says otherwise.
TEST(Scenario, ALinkOnlySlowdownIsOneMachinesAndNoSingleMachineTestSeesIt) {
  Registry r = policies::builtin_registry();
  // (Under a stack that runs the stress test, so that its recall is read.)
  const std::vector<std::string> link =
      byterobust({"policy.params.localization=stress", "faults.categories.c.scope=machine",
                  "faults.categories.c.symptom=slowdown", "faults.categories.c.link_only=true",
                  "faults.categories.c.alert=nic"});
  Scenario s = parse_scenario(kMinimal, "m.json", link, r);
  ASSERT_TRUE(s.faults[0].link_only);
  for (const char* t :
       {"gpu_diag", "intra_all_to_all", "inter_all_gather", "bitwise", "stress", "replay"})
    EXPECT_EQ(default_recall(s.faults[0], t), 0) << t;
  std::vector<std::string> given = link;
  given.push_back("faults.categories.c.recall.stress=0.5");
  EXPECT_EQ(default_recall(parse_scenario(kMinimal, "m.json", given, r).faults[0], "stress"), 0.5);
  EXPECT_EQ(
      minimal_error({"faults.categories.c.scope=machine", "faults.categories.c.link_only=true"}),
      "m.json: $.faults.categories[0].link_only: only with \"symptom\": \"slowdown\" (a link that "
      "fails "
      "outright is a crash or a hang)");
  EXPECT_EQ(
      minimal_error({"faults.categories.c.symptom=slowdown", "faults.categories.c.link_only=true"}),
      "m.json: $.faults.categories[0].link_only: expected scope \"machine\" (the link of one "
      "machine)");
}

// Issue 36: every modelling choice refuses what cannot act as written, in one line naming
// the field.
TEST(Scenario, ModellingChoicesRefuseBadInputNamingTheField) {
  auto err = [](std::vector<std::string> sets) { return minimal_error(sets); };
  EXPECT_NE(err({"cluster.repair.bad_fraction=0.1", "cluster.repair.cure_bad=1.5"})
                .find("$.cluster.repair.cure_bad: expected a number in [0, 1]"),
            std::string::npos);
  EXPECT_NE(err({"cluster.repair.cure_bad=0.5"})
                .find("$.cluster.repair.cure_bad: only with bad_fraction > 0"),
            std::string::npos);
  EXPECT_NE(err({"cluster.repair.repair_time=lognormal"})
                .find("$.cluster.repair.repair_time: lognormal needs its repair_sigma"),
            std::string::npos);
  EXPECT_NE(err({"cluster.repair.repair_sigma=1"})
                .find("$.cluster.repair.repair_sigma: only with repair_time \"lognormal\""),
            std::string::npos);
  EXPECT_NE(err({"faults.categories[0].lognormal_sigma=0"})
                .find("$.faults.categories[0].lognormal_sigma: expected a number > 0"),
            std::string::npos);
  EXPECT_NE(
      err({"faults.categories[0].lognormal_sigma=1", "faults.categories[0].weibull_shape=0.7"})
          .find("not with weibull_shape"),
      std::string::npos);
  EXPECT_NE(err({"job.work_days=0"}).find("$.job.work_days: expected a number > 0"),
            std::string::npos);
  EXPECT_NE(err({"job.work_days=-3"}).find("$.job.work_days: expected a number in [0, 36500]"),
            std::string::npos);
  EXPECT_NE(err({"job.work_days=2"}).find("$.job.horizon_days: expected more than job.work_days"),
            std::string::npos);
  EXPECT_NE(err({"cluster.repair.fleet=finite", "cluster.repair.fleet_machines=15"})
                .find("$.cluster.repair.fleet_machines: expected at least the job's 16 machines "
                      "(16), got 15"),
            std::string::npos);
  EXPECT_NE(err({"cluster.repair.fleet_machines=20"}).find("only with fleet \"finite\""),
            std::string::npos);
  EXPECT_NE(err({"cluster.repair.preemptible_machines=2"})
                .find("$.cluster.repair.preemptible_machines: only with fleet"),
            std::string::npos);
  EXPECT_NE(err({"faults.clock=cpu"}).find("$.faults.clock: expected one of wall|compute"),
            std::string::npos);
  EXPECT_NE(
      err({"cluster.scheduler.standby_refill=never"}).find("expected one of free_pool|repaired"),
      std::string::npos);
  EXPECT_NE(err({"faults.categories[0].misattribution=random"}).find("only with attribution"),
            std::string::npos);
  // A job of fixed work needs no horizon; its cap defaults to 20 x the work.
  std::string no_horizon = kMinimal;
  no_horizon.replace(no_horizon.find(", \"horizon_days\": 1"), 19, "");
  Scenario s =
      parse_scenario(no_horizon, "m.json", {"job.work_days=3"}, policies::builtin_registry());
  EXPECT_NE(minimal_error({}).find("accepted"), std::string::npos);
  try {
    parse_scenario(no_horizon, "m.json", {}, policies::builtin_registry());
    ADD_FAILURE() << "a fixed window needs its horizon";
  } catch (const ScenarioError& e) {
    EXPECT_NE(std::string(e.what()).find("$.job.horizon_days: required number is missing"),
              std::string::npos)
        << e.what();
  }
  EXPECT_DOUBLE_EQ(s.job.work_days, 3);
  EXPECT_DOUBLE_EQ(s.job.horizon_days, 60);
  // The shipped defaults: the rate stated is the rate the job sees (no bad machines).
  Scenario d = parse_scenario(kMinimal, "m.json", {}, policies::builtin_registry());
  EXPECT_EQ(d.repair.bad_fraction, 0);
  EXPECT_FALSE(d.compute_clock);
  EXPECT_EQ(d.repair.fleet, RepairSpec::Fleet::kEndless);
}

// Failure prediction (TrainMover): a category's optional warning; absent, no warnings. Bad
// input is refused in one line naming the file and the field.
TEST(Scenario, AWarningAnnouncesAShareOfAMachineCategorysFaults) {
  Registry r = policies::builtin_registry();
  EXPECT_FALSE(parse_scenario(kMinimal, "m.json", {}, r).faults[0].warning.enabled);
  // (Under a stack that migrates on a warning, which reads it.)
  const std::vector<std::string> machine =
      byterobust({"policy.params.recovery=migrate", "faults.categories.c.scope=machine"});
  auto with = [&](std::vector<std::string> sets) {
    sets.insert(sets.begin(), machine.begin(), machine.end());
    return sets;
  };
  Scenario s = parse_scenario(kMinimal, "m.json",
                              with({"faults.categories.c.warning.lead_time_s=600",
                                    "faults.categories.c.warning.probability=0.4",
                                    "faults.categories.c.warning.false_per_machine_day=0.01"}),
                              r);
  ASSERT_TRUE(s.faults[0].warning.enabled);
  EXPECT_EQ(s.faults[0].warning.lead_time_s, 600);
  EXPECT_DOUBLE_EQ(s.faults[0].warning.probability, 0.4);
  EXPECT_DOUBLE_EQ(s.faults[0].warning.false_per_machine_day, 0.01);
  EXPECT_EQ(minimal_error(with({"faults.categories.c.warning.lead_time_s=-1",
                                "faults.categories.c.warning.probability=1"})),
            "m.json: $.faults.categories[0].warning.lead_time_s: expected a number in [0, "
            "1e+07], got -1");
  EXPECT_EQ(minimal_error(with({"faults.categories.c.warning.lead_time_s=60",
                                "faults.categories.c.warning.probability=1.5"})),
            "m.json: $.faults.categories[0].warning.probability: expected a number in [0, 1], "
            "got 1.5");
  EXPECT_EQ(minimal_error(with({"faults.categories.c.warning.lead_time_s=60",
                                "faults.categories.c.warning.probability=0.5",
                                "faults.categories.c.warning.false_per_machine_day=-0.1"})),
            "m.json: $.faults.categories[0].warning.false_per_machine_day: expected a number in "
            "[0, 1e+06], got -0.1");
  EXPECT_NE(minimal_error(with({"faults.categories.c.warning.lead_time_s=60",
                                "faults.categories.c.warning.probability=0.5",
                                "faults.categories.c.warning.lead_s=60"}))
                .find("m.json: $.faults.categories[0].warning.lead_s: unknown key"),
            std::string::npos);
  // Each key defaults to nothing announced: no lead, no share, no false warnings.
  s = parse_scenario(kMinimal, "m.json", with({"faults.categories.c.warning={}"}), r);
  EXPECT_TRUE(s.faults[0].warning.enabled);
  EXPECT_EQ(s.faults[0].warning.lead_time_s, 0);
  EXPECT_EQ(s.faults[0].warning.probability, 0);
  EXPECT_EQ(s.faults[0].warning.false_per_machine_day, 0);
  // A job-wide fault names no machine to warn about.
  EXPECT_EQ(minimal_error({"faults.categories.c.warning.lead_time_s=60",
                           "faults.categories.c.warning.probability=1"}),
            "m.json: $.faults.categories[0].warning: only with scope \"machine\" (a warning "
            "names one machine)");
}

// Every shipped scenario loads under its own stack; a field it sets that this stack never
// reads is one it wrote for a stack it names in policy.compared_with.
TEST(Scenario, ShippedScenariosLoad) {
  Registry r = policies::builtin_registry();
  int files = 0;
  ::faultline::testing::SharedFiles shared;  // a trace a scenario replays (shared_data.h)
  for (const auto& e :
       std::filesystem::directory_iterator(std::string(FAULTLINE_SOURCE_DIR) + "/scenarios")) {
    if (e.path().extension() != ".json") continue;
    ++files;
    const std::string trace = ::faultline::testing::shipped_scenario_trace(e.path().string());
    if (!trace.empty() && !shared.have(trace)) continue;
    try {
      const Scenario s =
          load_scenario(e.path().string(), ::faultline::testing::shipped_trace_sets(trace), r);
      for (const auto& u : s.unread_fields) {
        EXPECT_TRUE(u.kept) << e.path() << ": " << u.path;
        EXPECT_FALSE(s.compared_with.empty()) << e.path() << ": " << u.path;
      }
    } catch (const ScenarioError& x) {
      ADD_FAILURE() << x.what();
    }
  }
  EXPECT_GE(files, 18);
  FAULTLINE_SKIP_IF_MISSING(shared);
}

// Issue 50: a scenario field the stack never reads is refused like an unread parameter, in
// one line naming the field, the stack and what reads it; allow_unused_params keeps it and
// lists it.
TEST(Scenario, StandbyMachinesUnderRequeueIsRefusedNamingTheField) {
  EXPECT_EQ(minimal_error({"cluster.standby_machines=8"}),
            "m.json: $.cluster.standby_machines: stack 'requeue' never reads it: it is read only "
            "with the warm standby pool (AcquireMachines standby, SetStandbyPool, "
            "MigrateMachines), which 'requeue' never uses; set policy.allow_unused_params=true "
            "(--allow-unused) to run anyway");
  const Scenario s = parse_scenario(
      kMinimal, "m.json", {"cluster.standby_machines=8", "policy.allow_unused_params=true"},
      policies::builtin_registry());
  ASSERT_EQ(s.unread_fields.size(), 1u);
  EXPECT_EQ(s.unread_fields[0].path, "$.cluster.standby_machines");
  EXPECT_EQ(s.cluster.standby_machines, 8);
  // A stack that takes machines from the pool without sizing it reads it (failover-bench,
  // which declares nothing: may use everything).
  EXPECT_EQ(minimal_error(
                {"policy.stack=failover-bench", "policy.params={}", "cluster.standby_machines=8"}),
            "accepted");
}

// Each stack-dependent field (scenarios/stack_fields.h) is refused where the stack, with its
// module choices, never reads it, and accepted where it does; the refusal says under which
// choices the stack would read it.
TEST(Scenario, AFieldTheStackNeverReadsIsRefusedAndOneItReadsIsNot) {
  struct Case {
    std::vector<std::string> stack;  // the sets that choose the stack and its modules
    std::string field;               // PATH=VALUE
    std::string refused;             // a part of the refusal; "" = accepted
  };
  const std::vector<std::string> requeue = {},
                                 reschedule = {"policy.stack=reschedule", "policy.params={}"};
  const std::string never = "stack 'requeue' never reads it";
  const std::vector<Case> cases = {
      {requeue, "cluster.scheduler.requeue_base_s=100", ""},
      {reschedule, "cluster.scheduler.requeue_per_machine_s=1", ""},
      {requeue, "cluster.scheduler.reschedule_base_s=100", never},
      {reschedule, "cluster.scheduler.reschedule_per_machine_s=1", ""},
      {requeue, "cluster.scheduler.standby_refill=repaired", never},
      {byterobust(), "cluster.scheduler.standby_refill=repaired", ""},
      {byterobust({"policy.params.recovery=reschedule"}), "cluster.standby_machines=8",
       "stack 'byterobust' does not read it here: it is read only with the warm standby pool "
       "(AcquireMachines standby, SetStandbyPool, MigrateMachines), which it uses only with "
       "recovery=standby|lemon|scored|segment|replica-drop|flash|migrate (this scenario has "
       "recovery=reschedule)"},
      {byterobust({"policy.params.recovery=requeue"}), "diagnosis.standby_wake_s=5",
       "recovery=standby|"},
      {byterobust({"policy.params.recovery=requeue"}), "diagnosis.gpu_diag_s=60", ""},  // tests
      {reschedule, "diagnosis.gpu_diag_s=60", "stack 'reschedule' never reads it"},
      {requeue, "job.inplace_init_s=10", never},
      {byterobust(), "job.inplace_init_s=10",
       "recovery=flash (this scenario has recovery=standby)"},
      {byterobust({"policy.params.recovery=flash"}), "job.inplace_init_s=10", ""},
      {requeue, "job.checkpoint_mfu_loss=0.01", never},
      {byterobust({"policy.params.checkpoint=remote"}), "job.checkpoint_mfu_loss=0.01",
       "checkpoint=peer (this scenario has checkpoint=remote)"},
      {byterobust(), "job.partial_replica_rate=0.5", "recovery=replica-drop"},
      {byterobust({"policy.params.recovery=replica-drop"}), "job.partial_replica_rate=0.5", ""},
      {requeue, "job.on_call_fix_h=4", never},
      {byterobust(), "job.on_call_fix_h=4", ""},
      {requeue, "faults.categories[0].alert=gpu", never},
      {byterobust({"policy.params.detection=timeout"}), "faults.categories[0].alert=gpu", ""},
      {byterobust({"policy.params.detection=timeout", "faults.categories[0].alert=gpu"}),
       "faults.categories[0].alert_coverage=0.5",
       "detection=realtime (this scenario has detection=timeout)"},
      {byterobust({"policy.params.detection=timeout"}), "diagnosis.capture_s=5",
       "detection=realtime"},
      {byterobust(), "diagnosis.capture_s=5", ""},
      {byterobust(), "diagnosis.stress_s=60",
       "it is read only with the stress test (RunProbe stress), which it uses only with "
       "localization=stress (this scenario has localization=replay)"},
      {byterobust({"policy.params.localization=stress"}), "diagnosis.stress_s=60", ""},
      {byterobust({"policy.params.localization=stress"}), "diagnosis.replay_s=60",
       "localization=replay|bisection"},
      {byterobust({"policy.params.localization=stress"}), "faults.categories[0].recall.replay=1",
       "localization=replay|bisection"},
      {requeue, "faults.categories[0].recall.gpu_diag=1", never},
      {byterobust(), "faults.categories[0].recall.stress=1", "localization=stress"},
      {byterobust(), "diagnosis.false_positive.stress=0", "localization=stress"},
      {byterobust(), "diagnosis.false_positive.bitwise=0", ""},
      {requeue, "diagnosis.false_positive_rate=0", never},
      {byterobust(), "diagnosis.group_setup_s=5", "localization=pairwise"},
      {byterobust({"policy.params.localization=pairwise"}), "diagnosis.group_setup_s=5", ""},
      {byterobust(), "diagnosis.rebalance_s=5", "failslow=ski_rental"},
      {byterobust({"policy.params.failslow=ski_rental"}), "diagnosis.reconfigure_s=5", ""},
      {requeue, "diagnosis.intra_all_to_all_s=5", never},
      {requeue, "diagnosis.inter_all_gather_bytes=5", never},
      {requeue, "diagnosis.bitwise_s=5", never},
      {byterobust(), "diagnosis.bitwise_s=5", ""},
      // A machine's fault (attribution and warnings are refused for job-wide ones).
      {{"faults.categories[0].scope=machine"}, "faults.categories[0].attribution=0.5", never},
      {{"policy.stack=reschedule", "policy.params={}", "faults.categories[0].scope=machine"},
       "faults.categories[0].attribution=0.5",
       ""},
      {{"policy.stack=reschedule", "policy.params={}", "faults.categories[0].scope=machine",
        "faults.categories[0].attribution=0.5"},
       "faults.categories[0].misattribution=random",
       ""},
      {byterobust({"faults.categories[0].scope=machine"}),
       "faults.categories[0].warning={\"lead_time_s\":60,\"probability\":1}", "recovery=migrate"},
      {byterobust({"faults.categories[0].scope=machine"}),
       "faults.categories[0].replica_confined=true", "recovery=replica-drop"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> sets = c.stack;
    sets.push_back(c.field);
    const std::string got = minimal_error(sets);
    SCOPED_TRACE(c.field);
    if (c.refused.empty()) {
      EXPECT_EQ(got, "accepted");
      continue;
    }
    // One line: the file, the field's JSON path, the stack, what reads it, the way out.
    const std::string at = "m.json: $." + c.field.substr(0, c.field.find('=')) + ": ";
    EXPECT_EQ(got.rfind(at, 0), 0u) << got;
    EXPECT_NE(got.find(c.refused), std::string::npos) << got;
    EXPECT_NE(got.find("set policy.allow_unused_params=true (--allow-unused) to run anyway"),
              std::string::npos)
        << got;
    EXPECT_EQ(got.find('\n'), std::string::npos) << got;
    sets.push_back("policy.allow_unused_params=true");
    EXPECT_EQ(minimal_error(sets), "accepted");
  }
  // Every line of the table is exercised by at least one case.
  std::set<std::string> covered;
  for (const Case& c : cases) {
    std::string p = c.field.substr(0, c.field.find('='));
    if (auto i = p.find("[0]"); i != std::string::npos) p.replace(i, 3, "[]");
    covered.insert(p);
  }
  for (const StackField& f : stack_fields())
    if (f.path.find(".recall.") == std::string::npos &&
        f.path.find(".false_positive.") == std::string::npos)
      EXPECT_TRUE(covered.count(f.path)) << f.path;
}

// A field the scenario file wrote for its own stack describes the environment: it is kept
// (and listed) when another stack runs the file (--set policy.stack, sim compare); the same
// field set on the command line for a stack that never reads it is refused.
TEST(Scenario, AFieldWrittenForTheFilesOwnStackIsKeptUnderAnother) {
  Registry r = policies::builtin_registry();
  std::string written = kMinimal;
  written.replace(written.find("\"policy\""), 0, "\"diagnosis\": {\"replay_s\": 600},\n  ");
  written.replace(written.find("\"requeue\", \"params\": {\"checkpoint_interval_s\": 900}"),
                  std::string("\"requeue\", \"params\": {\"checkpoint_interval_s\": 900}").size(),
                  "\"byterobust\"");
  EXPECT_TRUE(parse_scenario(written, "w.json", {}, r).unread_fields.empty());
  const Scenario s =
      parse_scenario(written, "w.json", {"policy.stack=requeue", "policy.params={}"}, r);
  ASSERT_EQ(s.unread_fields.size(), 1u);
  EXPECT_EQ(s.unread_fields[0].path, "$.diagnosis.replay_s");
  EXPECT_TRUE(s.unread_fields[0].kept);
  try {
    parse_scenario(written, "w.json",
                   {"policy.stack=requeue", "policy.params={}", "diagnosis.replay_s=60"}, r);
    ADD_FAILURE() << "accepted a replay time set for a stack that never replays";
  } catch (const ScenarioError& e) {
    EXPECT_NE(std::string(e.what()).find("w.json: $.diagnosis.replay_s: stack 'requeue' never"),
              std::string::npos)
        << e.what();
  }
  // Several stacks on one scenario (sim compare, a sweep over policy.stack): refused only
  // when none of them reads it.
  const LoadOptions defer{.refuse_unread_fields = false};
  const Scenario a = parse_scenario(kMinimal, "m.json", {"diagnosis.replay_s=60"}, r, defer);
  const Scenario b =
      parse_scenario(kMinimal, "m.json", byterobust({"diagnosis.replay_s=60"}), r, defer);
  const Scenario c = parse_scenario(
      kMinimal, "m.json", {"policy.stack=reschedule", "policy.params={}", "diagnosis.replay_s=60"},
      r, defer);
  EXPECT_NO_THROW(refuse_unread_by_all({&a, &b, &c}, {"requeue", "byterobust", "reschedule"}));
  try {
    refuse_unread_by_all({&a, &c}, {"requeue", "reschedule"});
    ADD_FAILURE() << "accepted a field no stack of the comparison reads";
  } catch (const ScenarioError& e) {
    EXPECT_EQ(std::string(e.what()),
              "m.json: $.diagnosis.replay_s: none of the runs here (requeue, reschedule) reads "
              "it: it is read only with replays (RunReplay); set "
              "policy.allow_unused_params=true (--allow-unused) to run anyway");
  }
}

// A stack or module that declares nothing (a plugin's, by default) may use every facility:
// no field is refused for it.
TEST(Scenario, AStackOrModuleThatDeclaresNothingMayReadEveryField) {
  Registry r = policies::builtin_registry();
  PolicyInfo plugin{"plugin-stack", "1", "declares no facilities", {}};
  r.add(plugin, [](const Params&) -> std::unique_ptr<Policy> { return nullptr; });
  EXPECT_NO_THROW(parse_scenario(kMinimal, "m.json",
                                 {"policy.stack=plugin-stack", "policy.params={}",
                                  "cluster.standby_machines=8", "diagnosis.replay_s=60"},
                                 r));
  policies::ModuleRegistry m;
  policies::ModuleInfo quiet{policies::ModuleKind::kLocalization, "quiet", "1", "no uses"};
  policies::ModuleInfo replays{
      policies::ModuleKind::kLocalization,     "replays", "1", "replays", {},
      std::vector<Facility>{Facility::kReplay}};
  m.add(quiet, [](const Params&) -> std::unique_ptr<policies::Localizer> { return nullptr; });
  m.add(replays, [](const Params&) -> std::unique_ptr<policies::Localizer> { return nullptr; });
  std::vector<FacilityUse> uses = {{Facility::kRequeue}};
  policies::add_module_uses(m, uses);
  PolicyInfo stack{
      "composed",
      "1",
      "",
      {policies::module_choice(m, policies::ModuleKind::kLocalization, "localization", "")},
      uses};
  Params quiet_chosen, replays_chosen;
  ASSERT_FALSE(Params::resolve(stack.params, {{"localization", 0}}, &quiet_chosen));
  ASSERT_FALSE(Params::resolve(stack.params, {{"localization", 1}}, &replays_chosen));
  for (int f = 0; f < kFacilities; ++f)
    EXPECT_TRUE(may_use(stack, static_cast<Facility>(f), quiet_chosen))
        << facility_name(static_cast<Facility>(f));
  EXPECT_TRUE(may_use(stack, Facility::kReplay, replays_chosen));
  EXPECT_TRUE(may_use(stack, Facility::kRequeue, replays_chosen));  // the stack's own
  EXPECT_FALSE(may_use(stack, Facility::kStandby, replays_chosen));
}

// The checked-in reference is what the parser and the stacks declare today.
TEST(ScenarioReference, TheCheckedInReferenceIsCurrent) {
  const std::string path = std::string(FAULTLINE_SOURCE_DIR) + "/docs/scenario-reference.md";
  std::ifstream in(path);
  ASSERT_TRUE(in) << "missing " << path;
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_TRUE(text.str() == scenario_reference(policies::builtin_registry()))
      << path
      << " is out of date: regenerate it with ./build/bin/faultline sim schema > "
         "docs/scenario-reference.md";
}

std::string normalised(const std::string& path) {
  std::string out;
  for (size_t i = 0; i < path.size(); ++i) {
    if (path[i] == '[') {
      out += "[]";
      i = path.find(']', i);
    } else {
      out += path[i];
    }
  }
  return out;
}

void collect_paths(const nlohmann::json& j, const std::string& at, std::set<std::string>& out) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      const std::string p = at.empty() ? it.key() : at + "." + it.key();
      out.insert(p);
      if (p != "policy.params") collect_paths(*it, p, out);
    }
  } else if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i)
      collect_paths(j[i], at + "[" + std::to_string(i) + "]", out);
  }
}

// An independent check of coverage: every key of every shipped scenario is in the
// reference (the recorded fields come from documents built in code, not from these).
TEST(ScenarioReference, EveryKeyOfEveryShippedScenarioIsDocumented) {
  std::set<std::string> known;
  for (const auto& f : scenario_fields(policies::builtin_registry())) known.insert(f.path);
  int files = 0;
  for (const auto& e :
       std::filesystem::directory_iterator(std::string(FAULTLINE_SOURCE_DIR) + "/scenarios")) {
    if (e.path().extension() != ".json") continue;
    ++files;
    std::ifstream in(e.path());
    std::set<std::string> paths;
    collect_paths(nlohmann::json::parse(in), "", paths);
    for (const auto& p : paths) EXPECT_TRUE(known.count(normalised(p))) << e.path() << ": " << p;
  }
  EXPECT_GE(files, 8);
}

// The ranges and allowed values the reference prints are the ones the parser enforces:
// a value just outside each is refused, naming the field.
TEST(ScenarioReference, EveryPrintedRangeAndChoiceIsEnforced) {
  Registry r = policies::builtin_registry();
  int checked = 0;
  for (const auto& f : scenario_fields(r)) {
    if (f.path.rfind("faults.trace", 0) == 0) continue;  // needs a trace file to get that far
    std::string set_path = f.path;
    if (auto i = set_path.find("[]"); i != std::string::npos) set_path.replace(i, 2, "[0]");
    std::vector<std::string> bad;
    if (!f.choices.empty()) bad.push_back("\"no-such-value\"");
    if (f.has_range && f.max < 1e15) {
      std::ostringstream o;
      o.precision(17);
      o << (f.type == "integer" ? f.max + 1 : f.max * 2 + 1);
      bad.push_back(o.str());
    }
    if (f.has_range && f.min > -1e15 && f.path != "faults.categories[].rate_per_job_day") {
      std::ostringstream o;
      o.precision(17);
      o << (f.type == "integer" ? f.min - 1 : (f.min > 0 ? f.min / 2 : f.min - 1));
      bad.push_back(o.str());
    }
    for (const auto& v : bad) {
      SCOPED_TRACE(f.path + "=" + v);
      std::vector<std::string> sets = {set_path + "=" + v};
      if (f.path.rfind("cluster.repair.", 0) == 0) sets.insert(sets.begin(), "cluster.repair={}");
      if (f.path.rfind("cluster.scheduler.", 0) == 0)
        sets.insert(sets.begin(), "cluster.scheduler={}");
      if (f.path.rfind("diagnosis.", 0) == 0)
        sets.insert(sets.begin(), "diagnosis={\"false_positive\":{}}");
      if (f.path == "faults.categories[].rate_per_machine_day")  // one of the two rates
        sets.insert(sets.begin(),
                    "faults.categories[0]={\"name\":\"c\",\"rate_per_machine_day\":1}");
      if (f.path.rfind("faults.categories[].recall.", 0) == 0)
        sets.insert(sets.begin(), "faults.categories[0].recall={}");
      try {
        parse_scenario(kMinimal, "m.json", sets, r);
        ADD_FAILURE() << "accepted";
      } catch (const ScenarioError& e) {
        EXPECT_NE(std::string(e.what()).find("$." + set_path), std::string::npos) << e.what();
      }
      ++checked;
    }
  }
  EXPECT_GE(checked, 100);
}

}  // namespace
}  // namespace faultline::scenarios
