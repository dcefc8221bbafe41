#include "policies/stacks/byterobust/replica_groups.h"

#include <string>

namespace faultline::policies {

void DroppedReplicas::start(World& w) {
  if (auto groups = recovery_.replica_groups(w.cluster())) {
    on_ = true;
    min_ = groups->min_replicas;
    live_ = w.cluster().pp_groups();
    enable_ = w.act(*groups);
  }
}

void DroppedReplicas::restarted(const ClusterView& view) {
  live_ = view.pp_groups();
  out_.clear();
  rejoins_.clear();  // a start brings every replica back
  refills_.clear();  // and ran on filled slots: a refill still under way is a spare
  named_.clear();
}

bool DroppedReplicas::refilling(const ClusterView& view) const {
  if (refills_.empty()) return false;
  for (SlotId s = 0; s < view.slots(); ++s)
    if (view.machine_in(s) == kNoMachine) return true;
  return false;
}

int DroppedReplicas::drops(const std::vector<SlotId>& slots, const ClusterView& view) const {
  if (!on_ || slots.empty()) return -1;
  const int r = view.pp_group_index(slots.front());
  for (SlotId s : slots)
    if (view.pp_group_index(s) != r) return -1;
  if (out_.count(r)) return r;  // out already: nothing more stops
  return live_ - 1 >= min_ ? r : -1;
}

void DroppedReplicas::refill(int replica, const std::vector<SlotId>& slots, const std::string& why,
                             World& w) {
  if (!out_.count(replica)) --live_;
  out_[replica] = false;  // its ReplicaDropped is on its way (the eviction's echo)
  refills_[w.act(recovery_.replace(slots, why, Mechanism::kReplicaDrop))] = replica;
}

void DroppedReplicas::dropped(const ReplicaDropped& d, World& w, bool running) {
  if (!on_ || !running) return;  // a stopped job brings every replica back at its start
  const ClusterView& view = w.cluster();
  if (d.replica < 0 || d.replica >= view.pp_groups()) return;
  const SlotId named =
      d.machine >= 0 && d.machine < view.machine_count() ? view.slot_of(d.machine) : -1;
  if (!out_.count(d.replica) && d.machine != kNoMachine && named < 0)
    return;  // stale: the machine it names left, its replica rejoined before this arrived
  live_ = d.live;
  const auto was = out_.find(d.replica);
  const bool echo = was != out_.end() && !was->second;
  out_[d.replica] = true;
  bool rejoining = false;
  for (const auto& [action, r] : rejoins_) rejoining = rejoining || r == d.replica;
  std::erase_if(rejoins_, [&](const auto& x) { return x.second == d.replica; });
  if (echo && !rejoining) return;  // the drop of our own eviction: its refill is under way
  const std::string why = "replica " + std::to_string(d.replica) + " dropped (" +
                          std::to_string(d.live) + " of " + std::to_string(view.pp_groups()) +
                          " train on): " + d.signature;
  const SlotId slot = named;
  // A first failure rejoins on the same machines (a transient one is gone; a machine still
  // broken fails the rejoin, which drops the replica again naming it); a machine named by
  // two drops of its replica in a row is evicted and its slot refilled.
  const bool again = named_.count(d.replica) && named_[d.replica] == d.machine;
  if (d.machine != kNoMachine) named_[d.replica] = d.machine;
  if (slot >= 0 && view.pp_group_index(slot) == d.replica && again) {
    named_.erase(d.replica);
    w.act(EvictMachines{{d.machine}, why, Mechanism::kReplicaDrop});
    refills_[w.act(recovery_.replace({slot}, why, Mechanism::kReplicaDrop))] = d.replica;
    return;
  }
  // The machine named has gone already (or is not the replica's): the replica rejoins on
  // the machines it has once its slots are filled.
  for (SlotId s : view.pp_group_slots(d.replica))
    if (view.machine_in(s) == kNoMachine) {
      refills_[w.act(recovery_.replace({s}, why, Mechanism::kReplicaDrop))] = d.replica;
      return;
    }
  rejoin(d.replica, w);
}

bool DroppedReplicas::ready(const MachinesReady& r, World& w, bool running) {
  auto it = refills_.find(r.action);
  if (it == refills_.end()) return false;
  const int replica = it->second;
  refills_.erase(it);
  if (running) rejoin(replica, w);
  return true;
}

void DroppedReplicas::rejoin(int replica, World& w) {
  rejoins_[w.act(RejoinReplica{replica, "its machines are ready"})] = replica;
}

void DroppedReplicas::rejoined(const ReplicaRejoined& r, World&) {
  if (!rejoins_.erase(r.action)) return;
  live_ = r.live;
  out_.erase(r.replica);
}

bool DroppedReplicas::failed(const ActionFailed& f, World& w) {
  if (f.action == enable_) {
    on_ = false;  // the backend runs no replica groups: every failure stops the job
    w.note("replica groups refused (" + f.reason + "): every failure stops the job");
    return true;
  }
  if (refills_.erase(f.action) || rejoins_.erase(f.action)) return true;
  return false;
}

}  // namespace faultline::policies
