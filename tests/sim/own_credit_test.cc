// A module that is not built in credits its own name, end to end: a localizer registered
// beside the built-ins (as a plugin registers one) names itself on the incidents it
// resolves, and the simulator counts them under that name, through the replica's metrics
// to result.json's resolved_by_per_replica, with no list of mechanisms to add it to.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <variant>

#include "eventlog/event_codec.h"
#include "policies/builtin.h"
#include "policies/module.h"
#include "scenarios/scenario.h"
#include "sim/report.h"
#include "sim/runner.h"

namespace faultline::sim {
namespace {

const policies::ModuleInfo& own_credit_info() {
  static const policies::ModuleInfo info{
      policies::ModuleKind::kLocalization,
      "own-credit",
      "1",
      "a test's localizer: stresses every machine and credits what fails to its own name",
      {},
      {{Facility::kProbeStress}}};
  return info;
}

// Stresses every machine, as the built-in `stress` does, and credits its own name.
class OwnCredit final : public policies::Localizer {
 public:
  const policies::ModuleInfo& info() const override { return own_credit_info(); }
  policies::LocalizationStep begin(const std::string& why, const ClusterView& view) override {
    return policies::LocalizationTest{
        RunProbe{ProbeKind::kStress, view.placed_machines(), Duration::seconds(600), why}};
  }
  policies::LocalizationStep answer(const Event& outcome, const ClusterView& view) override {
    const auto* r = std::get_if<ProbeResult>(&outcome);
    const Mechanism mine = Mechanism::named(info().name);
    if (!r || r->failed.empty()) return policies::Located{{}, false, mine, "nothing failed"};
    return policies::Located{view.slots_of(r->failed), false, mine, "failed the stress test"};
  }
};

// A silent data corruption that only the stress test finds (the bit-wise test misses it),
// so that every incident goes to the localizer.
const char* kOnlyStressFindsIt = R"({
  "description": "a persistent NaN that only a stress test finds",
  "cluster": {"machines": 16, "gpus_per_machine": 8},
  "job": {"tp": 8, "pp": 4, "dp": 4, "step_time_s": 5, "horizon_days": 3},
  "faults": {"categories": [
    {"name": "sdc", "rate_per_job_day": 2, "symptom": "nan", "exits": false,
     "persistent": true, "recall": {"bitwise": 0, "stress": 1}}]},
  "policy": {"stack": "byterobust", "params": {"localization": "own-credit"}}
})";

TEST(OwnCredit, AModuleOutsideTheTreeIsCreditedByItsOwnNameInResultJson) {
  policies::ModuleRegistry modules;
  policies::register_builtin_modules(modules);
  modules.add(own_credit_info(), [](const Params&) { return std::make_unique<OwnCredit>(); });
  const Registry reg = policies::builtin_registry(modules);
  scenarios::Scenario sc =
      scenarios::parse_scenario(kOnlyStressFindsIt, "own-credit.json", {}, reg);
  sc.replicas = 2;
  RunOptions opt;
  opt.incidents = true;
  const std::vector<ReplicaResult> rs = run_replicas_in_child(sc, 1, opt, reg);
  ASSERT_EQ(rs.size(), 2u);
  std::int64_t mine = 0;
  for (const ReplicaResult& r : rs) {
    const auto it = r.resolved_by.find("own-credit");
    if (it != r.resolved_by.end()) mine += it->second;
    for (const IncidentRecord& i : r.incidents)
      if (i.resolution == Mechanism::named("own-credit")) --mine;
  }
  EXPECT_EQ(mine, 0) << "resolved_by and incidents.csv's resolution count the same incidents";
  const nlohmann::json result = aggregate(sc, rs, 1.0);
  const nlohmann::json& by = result["resolved_by_per_replica"];
  EXPECT_GT(by.value("own-credit", 0.0), 0) << by.dump();
  // The built-in names stay as they were, beside it (the replacements' starts).
  for (const auto& [name, v] : by.items()) EXPECT_FALSE(name.empty());
  // result.json names the module that ran, with its version, from the registry the stack was
  // built from (not this process's registry, which has no "own-credit").
  EXPECT_EQ(result["policy_modules"]["localization"],
            (nlohmann::json{{"name", "own-credit"}, {"version", "1"}}))
      << result["policy_modules"].dump();
  EXPECT_EQ(result["policy_modules"]["detection"]["name"], sc.policy_params.choice("detection"));
}

// The event log writes a module's own credit and reads it back (a replay of a live run whose
// plugin credited itself); an empty name is an error, naming the field.
TEST(OwnCredit, TheEventLogCarriesAModulesOwnCredit) {
  const Action a{EvictMachines{{1}, "failed the stress test", Mechanism::named("own-credit")}};
  const nlohmann::json j = traces::to_json(a);
  EXPECT_EQ(j["mechanism"], "own-credit");
  EXPECT_EQ(std::get<EvictMachines>(traces::action_from_json(j)).mechanism,
            Mechanism::named("own-credit"));
  nlohmann::json empty = j;
  empty["mechanism"] = "";
  try {
    traces::action_from_json(empty);
    ADD_FAILURE() << "an empty mechanism was read";
  } catch (const traces::EventLogError& e) {
    EXPECT_NE(std::string(e.what()).find("$.mechanism: expected a mechanism's name"),
              std::string::npos)
        << e.what();
  }
}

// A credit is its name's text, wherever the text is stored: a built-in constant, a name
// interned by Mechanism::named (as a module or an event log gives it), a copy in another
// array. Names whose hashes collide are still told apart: "costarring" and "liquid" (also
// "declinate" and "macallums") have the same 32-bit FNV-1a hash, which Mechanism compares
// before the text.
TEST(OwnCredit, ACreditIsItsNamesTextWhereverTheTextIsStored) {
  static const char replay_copy[] = {'r', 'e', 'p', 'l', 'a', 'y', '\0'};
  static const char padded[16] = "replay";
  EXPECT_EQ(Mechanism(replay_copy), Mechanism::kReplay);
  EXPECT_EQ(Mechanism(padded), Mechanism::kReplay);
  EXPECT_EQ(Mechanism::named("replay"), Mechanism::kReplay);
  EXPECT_EQ(Mechanism::named(std::string("no") + "ne"), Mechanism::kNone);
  EXPECT_EQ(Mechanism::named("own-credit"), Mechanism::named(std::string("own-") + "credit"));
  EXPECT_NE(Mechanism::named("replay"), Mechanism::kReattempt);
  EXPECT_NE(Mechanism::named("replay-2"), Mechanism::kReplay);
  EXPECT_NE(Mechanism::named("costarring"), Mechanism::named("liquid"));
  EXPECT_NE(Mechanism("costarring"), Mechanism::named("liquid"));
  EXPECT_NE(Mechanism::named("declinate"), Mechanism("macallums"));
  EXPECT_EQ(Mechanism("costarring"), Mechanism::named("costarring"));
}
}  // namespace
}  // namespace faultline::sim
