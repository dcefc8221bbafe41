// ReplicaGroups: the quorum's bookkeeping.
#include "sim/replica_groups.h"

#include <algorithm>

namespace faultline::sim {

void ReplicaGroups::enable(int replicas, int min_replicas, std::int64_t quorum_change_ns,
                           std::int64_t timeout_ns) {
  on = true;
  min = min_replicas;
  quorum_change = std::max<std::int64_t>(0, quorum_change_ns);
  timeout = std::max<std::int64_t>(0, timeout_ns);
  state.assign(static_cast<std::size_t>(replicas), kLive);
  out = 0;
}

void ReplicaGroups::drop(int r) {
  if (state[r] == kLive) ++out;
  state[r] = kDropped;
  std::erase_if(rejoins, [&](const auto& j) { return j.second.replica == r; });
}

void ReplicaGroups::back(int r) {
  state[r] = kLive;
  --out;
}

void ReplicaGroups::all_back() {
  std::fill(state.begin(), state.end(), kLive);
  out = 0;
  rejoins.clear();  // their transfers' ends are ignored
  hung.reset();
}

double ReplicaGroups::factor(double partial_rate) const {
  const int dp = replicas();
  return out == 0 ? 1.0 : partial_rate * static_cast<double>(dp - out) / dp;
}

}  // namespace faultline::sim
