// ProbeRelays: what LiveWorld's tests on agents keep between requests (stop_tests.cc): the
// relayed rendezvous of each inter_all_gather probe under way, and the host inspections the
// policy enabled (kind -> interval), which every agent that connects is given.
//
// With probe_bin, inter_all_gather is faultline-probe's NCCL all-gather across the machines:
// the NCCL unique id that rank 0's probe publishes comes to the controller and is relayed to
// the other machines of the same probe, on the authenticated channel (PROTOCOL.md, "Probes
// across machines"). One group per probe, keyed by the req of rank 0's probe request, from
// the requests' sending to the probe's end. Unit-tested in
// tests/realexec/agent/live_world_parts_test.cc.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "policies/api/ids.h"

namespace faultline::live {

class ProbeRelays {
 public:
  struct Group {
    MachineId root = kNoMachine;                              // rank 0's machine
    std::vector<std::pair<MachineId, std::uint64_t>> others;  // ranks 1.., with their probe req
    bool published = false;                                   // rank 0's blob came and was relayed
  };

  // A relayed probe's group, rank 0 on `root` (not yet keyed: see add).
  static std::shared_ptr<Group> make(MachineId root);
  // The group is keyed by the req of rank 0's probe request until its probe ends (remove).
  void add(std::uint64_t req, std::shared_ptr<Group> g) { groups_[req] = std::move(g); }
  void remove(std::uint64_t req) { groups_.erase(req); }
  // The group whose rank 0's probe request is `req` (none when no such probe runs).
  Group* find(std::uint64_t req);

  // After a relayed probe: when machines did not complete the rendezvous (`joined`: machine
  // -> how far its probe got), only they are the failed ones (rank 0's machine when its id
  // never came), and `details` says so; when every machine joined, `details` says that.
  // `name` names a machine.
  static void attribute(const Group& g, const MachineSet& machines,
                        const std::map<MachineId, std::string>& joined, MachineSet& failed,
                        std::string& details, const std::function<std::string(MachineId)>& name);

  // --- host inspections (EnableInspection)
  void inspect(const std::string& kind, double interval_s) { inspections_[kind] = interval_s; }
  const std::map<std::string, double>& inspections() const { return inspections_; }

 private:
  std::map<std::uint64_t, std::shared_ptr<Group>> groups_;
  std::map<std::string, double> inspections_;
};

}  // namespace faultline::live
