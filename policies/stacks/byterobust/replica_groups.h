// The byterobust stack's side of replica groups (EnableReplicaGroups, FT-HSDP / torchft),
// when its recovery module runs them (Recovery::replica_groups). A replica that dropped out
// of the quorum while the job trains rejoins at once on its own machines (RejoinReplica),
// the reattempt of ByteRobust's ladder: a transient failure is gone, and a machine still
// broken fails the rejoin, which drops the replica again naming it. A machine named by two
// drops of its replica in a row, and one the stack evicts on evidence (an inspection alert,
// a slow machine's group), leaves without stopping the job: its slot is refilled through
// the recovery module and the replica rejoins once the refill is ready. A stop-the-world
// restart waits for refills under way, whose slots it would otherwise find empty.
#pragma once

#include <map>

#include "policies/api/policy.h"
#include "policies/module.h"

namespace faultline::policies {

class DroppedReplicas {
 public:
  explicit DroppedReplicas(const Recovery& recovery) : recovery_(recovery) {}
  // At the stack's start: asks for replica groups when the module runs them.
  void start(World& w);
  bool on() const { return on_; }
  // A replica dropped out while the job trains (`running`): evict the machine named and
  // refill its slot; a replica whose slots are all filled rejoins at once.
  void dropped(const ReplicaDropped& d, World& w, bool running);
  // True when `r` answers a refill of ours; the replica then rejoins if the job trains.
  bool ready(const MachinesReady& r, World& w, bool running);
  void rejoined(const ReplicaRejoined& r, World& w);
  // True when `f` answers an action of ours (noted; the replica stays out until the next
  // start brings every replica back).
  bool failed(const ActionFailed& f, World& w);
  // Whether `action` is a refill of ours under way.
  bool refills(ActionId action) const { return refills_.count(action) > 0; }
  // Refills under way and a slot of the job empty: a restart now would be refused.
  bool refilling(const ClusterView& view) const;
  // The stack requeued the whole job: the requeue refills every slot, the refills under way
  // are given up.
  void requeued() { refills_.clear(); }
  // The stack is about to evict `slots` from the running job: the replica whose machines
  // they all hold, when evicting them drops it and the quorum keeps at least its minimum;
  // -1 when the job must stop instead. A backend applies the same rule (EvictMachines).
  int drops(const std::vector<SlotId>& slots, const ClusterView& view) const;
  // After drops() answered `replica` and the stack evicted: refill the slots (the eviction's
  // drop, reported by a ReplicaDropped, is this one) and rejoin once they are ready.
  void refill(int replica, const std::vector<SlotId>& slots, const std::string& why, World& w);
  // The job (re)started: every replica trains.
  void restarted(const ClusterView& view);

 private:
  void rejoin(int replica, World& w);
  const Recovery& recovery_;
  bool on_ = false;
  ActionId enable_ = 0;
  int min_ = 1;
  int live_ = 0;                     // replicas in the quorum, as the last event said
  std::map<int, bool> out_;          // replicas out of the quorum: true once its drop was reported
  std::map<ActionId, int> refills_;  // AcquireMachines -> replica
  std::map<ActionId, int> rejoins_;  // RejoinReplica -> replica
  std::map<int, MachineId> named_;   // by replica: the machine its last drop named
};

}  // namespace faultline::policies
