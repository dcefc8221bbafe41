#include "scenarios/scenario.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "policies/builtin.h"
#include "scenarios/reference.h"

namespace faultline::scenarios {
namespace {

const char* kMinimal = R"({
  "description": "minimal",
  "cluster": {"machines": 16, "gpus_per_machine": 8},
  "job": {"tp": 8, "pp": 4, "dp": 4, "step_time_s": 5, "horizon_days": 1},
  "faults": {"categories": [{"name": "c", "rate_per_job_day": 32, "symptom": "crash", "scope": "job"}]},
  "policy": {"stack": "requeue", "params": {"checkpoint_interval_s": 900}}
})";

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
  EXPECT_EQ(s.policy_params.get("checkpoint"), 0);
  s = with({"policy.params.checkpoint=remote", "policy.params.localization=stress",
            "policy.params.recovery=requeue", "policy.params.detection=timeout",
            "job.restart_warmup_s=120"});
  EXPECT_EQ(s.policy_params.get("checkpoint"), 2);
  EXPECT_EQ(s.policy_params.get("localization"), 2);
  EXPECT_EQ(s.policy_params.get("recovery"), 2);
  EXPECT_EQ(s.policy_params.get("detection"), 1);
  EXPECT_EQ(s.job.restart_warmup_s, 120);
  EXPECT_EQ(with({"policy.params.localization=1"}).policy_params.get("localization"),
            1);  // by index
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
  s = parse_scenario(kMinimal, "m.json",
                     {"job.init_s=60", "job.init_per_machine_s=0.02", "job.inplace_init_s=15"}, r);
  EXPECT_EQ(s.job.init_per_machine_s, 0.02);
  EXPECT_EQ(s.job.inplace_init_s, 15);
  EXPECT_EQ(minimal_error({"job.init_per_machine_s=-1"}),
            "m.json: $.job.init_per_machine_s: expected a number in [0, 10000], got -1");
  EXPECT_EQ(minimal_error({"job.inplace_init_s=-0.5"}),
            "m.json: $.job.inplace_init_s: expected a number in [0, 1e+06], got -0.5");
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
  s = parse_scenario(kMinimal, "m.json",
                     {"job.checkpoint_mfu_loss=0.0071", "faults.categories.c.alert=gpu",
                      "faults.categories.c.alert_coverage=0.71"},
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
  const std::vector<std::string> link = {
      "faults.categories.c.scope=machine", "faults.categories.c.symptom=slowdown",
      "faults.categories.c.link_only=true", "faults.categories.c.alert=nic"};
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
  const std::vector<std::string> machine = {"faults.categories.c.scope=machine"};
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

TEST(Scenario, ShippedScenariosLoad) {
  Registry r = policies::builtin_registry();
  for (const char* f :
       {"byterobust-dense-9600.json", "byterobust-moe-9600.json", "daly-check.json",
        "scale-100k.json", "scale-200k.json", "recovery-16k.json", "linkslow-9600.json"}) {
    EXPECT_NO_THROW(load_scenario(std::string(FAULTLINE_SOURCE_DIR "/scenarios/") + f, {}, r)) << f;
  }
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
