// The fakes LiveWorld's parts are tested with (live_world_parts_test.cc,
// replica_parts_test.cc).
#pragma once

#include <nlohmann/json.hpp>
#include <set>
#include <utility>
#include <vector>

#include "policies/api/ids.h"
#include "policies/api/time.h"
#include "realexec/controller/machine_link.h"

namespace faultline::live {

inline Instant at_s(double s) { return Instant{0} + Duration::seconds(s); }

// A link that records what it sends; machines in `down` are not connected.
struct FakeLink final : MachineLink {
  std::vector<std::pair<MachineId, nlohmann::json>> sent;
  std::set<MachineId> down;
  bool send(MachineId m, const nlohmann::json& msg) override {
    if (down.count(m)) return false;
    sent.emplace_back(m, msg);
    return true;
  }
  bool connected(MachineId m) const override { return !down.count(m); }
};

}  // namespace faultline::live
