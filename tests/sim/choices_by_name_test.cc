// A stack's module choices travel as names, from the scenario to the stack and into the
// result: a registry that lists the modules in another order than this process's (a
// plugin's localizer registered ahead of the built-ins) builds, and reports, the module the
// scenario names, never the one at the same index of another registry.
#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <vector>

#include "policies/builtin.h"
#include "scenarios/scenario.h"
#include "sim/report.h"

namespace faultline::sim {
namespace {

const char* kScenario = R"({
  "description": "the localizer named by the scenario",
  "cluster": {"machines": 16, "gpus_per_machine": 8},
  "job": {"tp": 8, "pp": 4, "dp": 4, "step_time_s": 5, "horizon_days": 1},
  "faults": {"categories": [{"name": "crash", "rate_per_job_day": 3, "symptom": "crash"}]},
  "policy": {"stack": "byterobust", "params": {"localization": "stress"}}
})";

// This process's modules, with a localizer of a plugin's registered first: every built-in
// localizer sits one place further down its kind's list than in policies::modules().
policies::ModuleRegistry plugin_first() {
  policies::ModuleRegistry m;
  m.add(policies::ModuleInfo{policies::ModuleKind::kLocalization, "plugin-first", "1",
                             "a plugin's, registered ahead of the built-ins"},
        [](const Params&) -> std::unique_ptr<policies::Localizer> {
          throw std::logic_error("built plugin-first, which the scenario did not choose");
        });
  m.merge(policies::modules());
  return m;
}

TEST(ChoicesByName, ARegistryInAnotherOrderBuildsAndReportsTheModuleTheScenarioNames) {
  const policies::ModuleRegistry modules = plugin_first();
  ASSERT_NE(modules.names(policies::ModuleKind::kLocalization),
            policies::modules().names(policies::ModuleKind::kLocalization));
  const Registry reg = policies::builtin_registry(modules);
  const scenarios::Scenario sc = scenarios::parse_scenario(kScenario, "s.json", {}, reg);
  EXPECT_NO_THROW(reg.make(sc.policy, sc.policy_params));
  const nlohmann::json out = aggregate(sc, std::vector<ReplicaResult>(1), 1.0);
  EXPECT_EQ(out["policy_params"]["localization"], "stress") << out["policy_params"].dump();
  EXPECT_EQ(out["policy_modules"]["localization"]["name"], "stress")
      << out["policy_modules"].dump();
  EXPECT_EQ(out["policy_params"]["recovery"], "standby");  // the default, by name too
}

}  // namespace
}  // namespace faultline::sim
