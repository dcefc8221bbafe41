// ReplicaGroups: the quorum of the job's data-parallel replicas under fault-tolerant data
// parallelism (EnableReplicaGroups, RejoinReplica; FT-HSDP and torchft). Which replicas
// are live, dropped or rejoining, how many are out, the rejoins under way and the confined
// hang the quorum waits on. SimWorld decides when a fault drops a replica (it needs the
// job, the fault and the cluster view); this object keeps the quorum and its arithmetic.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "policies/api/ids.h"

namespace faultline::sim {

class ReplicaGroups {
 public:
  enum State : std::uint8_t { kLive, kDropped, kRejoining };
  struct Rejoin {
    int replica = 0;
    std::int64_t epoch = 0;  // the job's run epoch when it began
  };

  // EnableReplicaGroups over `replicas` replicas: all live.
  void enable(int replicas, int min_replicas, std::int64_t quorum_change_ns,
              std::int64_t timeout_ns);
  // Whether losing one more live replica keeps at least min_replicas.
  bool can_lose_one() const { return replicas() - out - 1 >= min; }
  // Replica r leaves the quorum (its rejoin, if any, is moot).
  void drop(int r);
  // Replica r is back in the quorum (its rejoin ended).
  void back(int r);
  // A (re)start brings every replica back; rejoins under way are moot.
  void all_back();
  // The progress factor with `out` replicas out: 1 with all live, else
  // partial_rate x live / replicas.
  double factor(double partial_rate) const;
  int replicas() const { return static_cast<int>(state.size()); }
  int live() const { return replicas() - out; }

  bool on = false;  // EnableReplicaGroups
  int min = 1;
  std::int64_t quorum_change = 0, timeout = 0;
  std::vector<std::uint8_t> state;     // by replica (data-parallel index)
  int out = 0;                         // replicas not live
  std::map<ActionId, Rejoin> rejoins;  // under way
  std::optional<FaultId> hung;         // a confined hang the quorum waits on (the job is stuck)
};

}  // namespace faultline::sim
