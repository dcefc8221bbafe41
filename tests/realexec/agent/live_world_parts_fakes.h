// The fakes LiveWorld's parts are tested with (live_world_parts_test.cc,
// replica_parts_test.cc).
#pragma once

#include <initializer_list>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "policies/api/cluster_view.h"
#include "policies/api/ids.h"
#include "policies/api/time.h"
#include "realexec/controller/machine_link.h"
#include "realexec/live_config.h"

namespace faultline::live {

inline Instant at_s(double s) { return Instant{0} + Duration::seconds(s); }

// A config of these machines: a name starting with 's' a standby, the others job machines in
// their order; each at address "host-NAME".
inline LiveConfig config_of(std::initializer_list<const char*> names) {
  LiveConfig c;
  c.file = "live.json";
  for (const char* name : names) {
    LiveMachine m;
    m.name = name;
    m.addr = std::string("host-") + name;
    (name[0] == 's' ? c.standby : c.machines).push_back(m);
  }
  return c;
}

// A data-parallel job on `machines` machines (one slot each) with `standbys` standbys.
inline ClusterSpec dp_job(int machines, int standbys) {
  ClusterSpec s;
  s.machines = machines;
  s.standby_machines = standbys;
  s.dp = machines;
  return s;
}

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
