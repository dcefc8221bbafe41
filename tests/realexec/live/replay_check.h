// After a live fault suite: `faultline sim replay` of the run's event log must take the
// live run's decisions (sim/replay_decisions.h): every live action matched by simulated
// replica 0 under the recorded seed, or the mismatch explained by a listed unmodelled
// difference (docs/running-live.md, "Replaying a live incident").
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/realexec/live/live_cluster.h"

namespace faultline::live_e2e {

// Replays DIR/state/events.jsonl (one replica) and expects no unexplained mismatch; prints
// the decisions line. Call it once the run has ended (its summary written).
inline void expect_replay_takes_the_live_decisions(const std::string& dir) {
  const std::string out = dir + "/replay.json", err = dir + "/replay.err";
  const std::string cmd = std::string("'") + kFaultline + "' sim replay '" + dir +
                          "/state/events.jsonl' --replicas 1 --format json > '" + out + "' 2> '" +
                          err + "'";
  const int rc = std::system(cmd.c_str());
  ASSERT_EQ(rc, 0) << "sim replay failed: " << slurp(err);
  const nlohmann::json r = nlohmann::json::parse(slurp(out), nullptr, false);
  ASSERT_TRUE(r.is_object() && r.contains("decisions")) << slurp(out);
  const nlohmann::json& d = r["decisions"];
  std::cout << "decisions: " << d["matched"] << " of " << d["live"]
            << " match the live run (explained " << d["explained"] << ", unexplained "
            << d["unexplained"] << ")\n";
  for (const auto& m : d["mismatches"]) {
    const auto& one = m["live"].is_null() ? m["sim"] : m["live"];
    std::cout << "  " << (m["live"].is_null() ? "sim " : "live") << " t=" << one["t_s"] << " "
              << one["text"].get<std::string>() << ": "
              << (m["explained_by"].is_null() ? "UNEXPLAINED"
                                              : m["explained_by"].get<std::string>())
              << "\n";
  }
  EXPECT_EQ(d["unexplained"].get<int>(), 0)
      << "the replay's decisions differ from the live run's; first unexplained mismatch:\n"
      << d["first_unexplained"].dump(2) << "\nall mismatches:\n"
      << d["mismatches"].dump(2);
}

}  // namespace faultline::live_e2e
