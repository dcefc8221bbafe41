// Golden decision logs: every shipped scenario, run as shipped for a few replicas and a
// short horizon with --decisions, must produce the decision log stored in tests/golden/,
// byte for byte (after long machine lists are folded, below). They pin what the policy
// stacks decide, so that refactoring them (the module split) can prove it changed
// nothing; a change of behaviour updates the goldens in the same commit, and the commit
// says why. To update:
//   FAULTLINE_UPDATE_GOLDEN=1 ./build/bin/faultline_sim_tests --gtest_filter='Golden*'
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/support/cli.h"
#include "tests/support/shared_data.h"

namespace faultline::testing {
namespace {

struct GoldenCase {
  const char* scenario;  // file stem under scenarios/
  int replicas;
  double horizon_days;
  const char* set =
      nullptr;  // one more --set, when the scenario's point is a module it does not default to
};

// Lists of more than 16 items ("machines ready [0,1,...,24999]") become their first
// eight items, their count and a hash of the whole list: the log stays readable and
// small, and any change inside a list still changes the line.
std::string fold_lists(const std::string& line) {
  std::string out;
  std::size_t i = 0;
  while (i < line.size()) {
    const std::size_t open = line.find('[', i);
    const std::size_t close = open == std::string::npos ? open : line.find(']', open);
    if (close == std::string::npos) {
      out += line.substr(i);
      break;
    }
    const std::string body = line.substr(open + 1, close - open - 1);
    std::size_t items = body.empty() ? 0 : 1, eighth = std::string::npos;
    for (std::size_t k = 0; k < body.size(); ++k)
      if (body[k] == ',' && ++items == 9) eighth = k;
    out += line.substr(i, open - i + 1);
    if (items > 16) {
      std::uint64_t h = 1469598103934665603ull;  // FNV-1a
      for (unsigned char c : body) h = (h ^ c) * 1099511628211ull;
      std::ostringstream o;
      o << body.substr(0, eighth) << ",... (" << items << " items, fnv " << std::hex << h << ")";
      out += o.str();
    } else {
      out += body;
    }
    out += ']';
    i = close + 1;
  }
  return out;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class Golden : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(Golden, DecisionLogIsUnchanged) {
  const GoldenCase c = GetParam();
  const std::string scen = scenarios_dir() + "/" + c.scenario + ".json";
  // A scenario that replays a real trace needs it (shared_data.h).
  const std::string trace = shipped_scenario_trace(scen);
  if (!trace.empty()) FAULTLINE_REQUIRE_SHARED(trace);
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("faultline-golden-" + std::string(c.scenario)))
          .string();
  std::filesystem::remove_all(dir);
  std::ostringstream horizon;
  horizon << "job.horizon_days=" << c.horizon_days;
  std::vector<std::string> args = {
      "sim",    "run", scen,    "--replicas",  std::to_string(c.replicas),
      "--jobs", "2",   "--set", horizon.str(), "--decisions",
      "--out",  dir};
  if (c.set) args.insert(args.end(), {"--set", c.set});
  for (const std::string& s : shipped_trace_sets(trace)) args.insert(args.end(), {"--set", s});
  CliResult r = run_cli(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string folded;
  {
    std::istringstream in(slurp(dir + "/decisions.log"));
    for (std::string line; std::getline(in, line);) folded += fold_lists(line) + "\n";
  }
  std::filesystem::remove_all(dir);
  ASSERT_GT(folded.size(), 0u);
  const std::string golden = tests_dir() + "/golden/" + c.scenario + ".decisions";
  const char* update = std::getenv("FAULTLINE_UPDATE_GOLDEN");
  if (update && *update && std::string(update) != "0") {
    std::ofstream(golden, std::ios::binary | std::ios::trunc) << folded;
    GTEST_SKIP() << "updated " << golden;
  }
  ASSERT_TRUE(std::filesystem::exists(golden))
      << golden << " is missing (FAULTLINE_UPDATE_GOLDEN=1 writes it)";
  const std::string want = slurp(golden);
  if (want == folded) return;
  // Name the first line that differs, with both versions.
  std::istringstream a(want), b(folded);
  std::string la, lb;
  int n = 0;
  while (true) {
    const bool ga = static_cast<bool>(std::getline(a, la)),
               gb = static_cast<bool>(std::getline(b, lb));
    ++n;
    if (!ga || !gb || la != lb) {
      ADD_FAILURE() << golden << ": line " << n << " differs\n  golden: " << (ga ? la : "(end)")
                    << "\n  now:    " << (gb ? lb : "(end)")
                    << "\nA deliberate change updates the goldens in the same commit (see the top "
                       "of this file).";
      break;
    }
  }
}

// A few replicas each; horizons keep the whole set to a few seconds (the 200k-GPU one
// builds its platform for most of it).
INSTANTIATE_TEST_SUITE_P(
    ShippedScenarios, Golden,
    ::testing::Values(GoldenCase{"byterobust-dense-9600", 3, 20},
                      GoldenCase{"byterobust-moe-9600", 3, 10}, GoldenCase{"daly-check", 2, 5},
                      GoldenCase{"infinitehbd-bootstrap-1200", 2, 5},
                      GoldenCase{"recovery-16k", 2, 2}, GoldenCase{"scale-100k", 1, 2},
                      GoldenCase{"scale-200k", 1, 1}, GoldenCase{"persistent-downtime-8", 3, 30},
                      GoldenCase{"adaptive-checkpoint-remote", 2, 20},
                      GoldenCase{"failslow-9600", 2, 10}, GoldenCase{"lemon-1200", 2, 10},
                      GoldenCase{"verdict-baddata-9600", 2, 20}, GoldenCase{"nvl72-8192", 2, 5},
                      GoldenCase{"linkslow-9600", 2, 20, "policy.params.localization=pairwise"},
                      GoldenCase{"airesim-default", 2, 2, "job.work_days=1"},
                      GoldenCase{"flash-restart-16k", 2, 10, "policy.params.recovery=flash"},
                      GoldenCase{"migration-9600", 3, 20, "policy.params.recovery=migrate"},
                      GoldenCase{"replica-drop-100k", 1, 2, "policy.params.recovery=replica-drop"},
                      GoldenCase{"llama3-16k", 2, 10}),
    [](const auto& info) {
      std::string n = info.param.scenario;
      for (char& ch : n)
        if (ch == '-') ch = '_';
      return n;
    });

// Every shipped scenario has a golden case above.
TEST(GoldenFiles, EveryShippedScenarioIsCovered) {
  int scenarios = 0;
  for (const auto& e : std::filesystem::directory_iterator(scenarios_dir()))
    if (e.path().extension() == ".json") {
      ++scenarios;
      EXPECT_TRUE(std::filesystem::exists(tests_dir() + "/golden/" + e.path().stem().string() +
                                          ".decisions"))
          << e.path().filename() << " has no golden decision log";
    }
  EXPECT_EQ(scenarios, 19);
}

}  // namespace
}  // namespace faultline::testing
