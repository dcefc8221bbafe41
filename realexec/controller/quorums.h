// Quorums: the replica groups' quorums (job.replica_groups, python/faultline/replicas.py) as
// the live controller forms and sends them. A quorum is the latest members of ReplicaSet,
// numbered by the journal (a restarted controller continues the numbers), with the members
// joining from a live peer; it forms on the TCPStore of its lowest member not joining
// (job.master_port + 1 + its id), and the agents write it to each member's quorum file.
// ReplicaGroups (replica_groups.h) and Migrations decide when; this forms and sends them.
// Unit-tested in tests/realexec/agent/replica_parts_test.cc.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string_view>
#include <vector>

#include "policies/api/cluster_view.h"
#include "realexec/controller/agent_requests.h"
#include "realexec/controller/journal.h"
#include "realexec/controller/machine_link.h"
#include "realexec/controller/replica_set.h"
#include "realexec/live_config.h"
#include "realexec/net/messages.h"

namespace faultline::live {

class Quorums {
 public:
  // What forming and sending a quorum reads and acts on, owned by the world.
  struct Job {
    const LiveConfig& config;
    const ClusterView& cluster;
    ReplicaSet& replicas;  // the members; a quorum sent marks a change
    Journal& journal;      // the latest quorum's number, the generation
    AgentRequests& requests;
    MachineLink& link;
    std::function<void(std::string_view)> note;
    std::function<void()> save;  // saves the journal
  };

  explicit Quorums(Job job) : j_(std::move(job)) {}

  // Quorum `number` of the members, `join` taking their state from a peer; its store is the
  // one of the lowest member not joining.
  Quorum of(std::int64_t number, std::vector<std::int64_t> join) const;
  Quorum current() const { return of(j_.journal.state().replica_quorum, {}); }
  // The next quorum (its number journaled when the world saves).
  Quorum next(std::vector<std::int64_t> join);
  // Noted, the journal saved, and sent to every member's agent but `except`'s.
  void send(const Quorum& q, std::int64_t except = -1);
  // A launch's "replicas" field (count, timeout, the quorum to start in).
  nlohmann::json launch_field(const Quorum& q) const;
  // The agent's launch of `replica`'s one rank in the current generation (a rejoin, a
  // migration), starting in `q`.
  nlohmann::json launch_one(std::int64_t replica, const Quorum& q) const;

 private:
  Job j_;
};

}  // namespace faultline::live
