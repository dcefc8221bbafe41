#include "realexec/controller/probe_relays.h"

namespace faultline::live {

std::shared_ptr<ProbeRelays::Group> ProbeRelays::make(MachineId root) {
  auto g = std::make_shared<Group>();
  g->root = root;
  return g;
}

ProbeRelays::Group* ProbeRelays::find(std::uint64_t req) {
  const auto it = groups_.find(req);
  return it == groups_.end() ? nullptr : it->second.get();
}

void ProbeRelays::attribute(const Group& g, const MachineSet& machines,
                            const std::map<MachineId, std::string>& joined, MachineSet& failed,
                            std::string& details,
                            const std::function<std::string(MachineId)>& name) {
  auto names = [&name](const MachineSet& ms) {
    std::string s;
    for (MachineId x : ms) s += (s.empty() ? "" : ", ") + name(x);
    return s;
  };
  MachineSet missing;            // machines whose probe did not complete the rendezvous
  bool took_part = g.published;  // else no probe said anything about a rendezvous (older probes)
  for (MachineId x : machines) {
    auto it = joined.find(x);
    const std::string state = it == joined.end() ? "unknown" : it->second;
    took_part |= state == "ok" || state == "timed_out" || state == "failed";
    if (state != "ok" && !state.empty()) missing.push_back(x);
  }
  if (!took_part) return;
  if (missing.empty()) {
    details +=
        "; rendezvous relayed by the controller: every machine joined (" + names(machines) + ")";
    return;
  }
  if (failed.empty()) return;
  // An all-gather needs every rank: the machines that joined and then failed waited for the
  // missing ones. Without rank 0's id nobody could join: rank 0 is the one missing.
  const MachineSet culprits = g.published ? missing : MachineSet{g.root};
  failed = culprits;
  details += "; rendezvous: " + names(culprits) + " did not join" +
             (g.published ? "" : " (rank 0 never published the unique id)") +
             (missing.size() < machines.size() || !g.published ? "; the others waited for it" : "");
}

}  // namespace faultline::live
