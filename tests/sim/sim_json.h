// `faultline sim run ARGS --format json` in its own process, parsed. A run that fails is a
// test failure (and yields an empty object).
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/support/cli.h"

namespace faultline::testing {

inline nlohmann::json sim_run_json(std::vector<std::string> args) {
  args.insert(args.begin(), {"sim", "run"});
  args.push_back("--format");
  args.push_back("json");
  CliResult r = run_cli(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.exit_code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json::object();
}

}  // namespace faultline::testing
