// Replica groups (EnableReplicaGroups, RejoinReplica): fault-tolerant data parallelism as
// FT-HSDP (arXiv 2602.00277) and torchft run it. The job's data-parallel replicas fail
// apart: a rank's failure confined to its replica (FaultCategory::replica_confined) drops
// that replica from the quorum and the others train on at partial_replica_rate x live / dp
// of full progress, until a RejoinReplica brings it back with the state of a live peer.
// Every quorum change pauses the job (quorum_change, accounted as missing_replicas). A
// failure that would leave fewer than min_replicas replicas, and every fault that reaches
// all replicas, stops the job as without replica groups; a (re)start brings all back.
// Split from sim_world.cc by concern.
#include <algorithm>

#include "sim/sim_world.h"
#include "sim/sim_world_internal.h"

namespace faultline::sim {

using internal::secs;

// The actions (sim_actions.cc): one method each, and the refusal they may answer.
void SimWorld::apply(ActionId, const EnableReplicaGroups& a) {
  // refusal() checked min_replicas against the data-parallel degree.
  replicas_.enable(view_.pp_groups(), a.min_replicas, a.quorum_change.ns, a.timeout.ns);
}

bool SimWorld::replica_out(MachineId m) const {
  if (!replicas_.on || m < 0 || m >= view_.machine_count()) return false;
  const SlotId s = view_.slot_of(m);
  return s >= 0 && replicas_.state[view_.pp_group_index(s)] != ReplicaGroups::kLive;
}

// The progress model's replica factor from the live replicas.
void SimWorld::set_replica_factor() {
  progress_.set_replica_factor(replicas_.factor(sc_.job.partial_replica_rate));
}

// A (re)start brings every replica back; rejoins under way are moot.
void SimWorld::all_replicas_back() {
  if (!replicas_.on) return;
  replicas_.all_back();
  set_replica_factor();
}

void SimWorld::drop_now(int replica, MachineId m, int exit_code, const std::string& signature,
                        std::int64_t observe) {
  replicas_.drop(replica);
  progress_.pause_quorum(replicas_.quorum_change);
  set_replica_factor();
  deliver_at(observe,
             ReplicaDropped{replica, m, exit_code, signature, steps_done(),
                            view_.pp_groups() - replicas_.out},
             false);
}

// What a crash or hang `f` striking now would become (its replica in *replica, unless
// kNotMine), without doing it; drop_replica does it.
SimWorld::Drop SimWorld::quorum_verdict(const Fault& f, int* replica) const {
  const auto& cat = sc_.faults[f.category];
  if (!replicas_.on || !cat.replica_confined || job_.state != JobState::kRunning || job_.stuck ||
      f.machines.empty())
    return Drop::kNotMine;
  const SlotId s = view_.slot_of(f.machines.front());
  if (s < 0) return Drop::kNotMine;
  const int r = view_.pp_group_index(s);
  // The quorum loses a live replica only while enough remain; a rejoining one is not in it.
  if (replicas_.state[r] == ReplicaGroups::kLive && !replicas_.can_lose_one())
    return Drop::kNotMine;
  *replica = r;
  // A dropped replica: none of its ranks trains.
  return replicas_.state[r] == ReplicaGroups::kDropped ? Drop::kIdle : Drop::kDropped;
}

SimWorld::Drop SimWorld::drop_replica(Fault& f, std::int64_t observe, bool hang) {
  int r = -1;
  if (const Drop d = quorum_verdict(f, &r); d != Drop::kDropped) return d;
  const auto& cat = sc_.faults[f.category];
  const bool rejoining = replicas_.state[r] == ReplicaGroups::kRejoining;
  if (settings_.oracle) observe = now_;  // the oracle sees every drop at once, as every fault
  f.detected = observe;                  // the quorum acted on it, without the policy
  if (hang && !rejoining) {
    // Every replica waits in the collective the hung rank never joins, until the quorum's
    // timeout drops it.
    job_.stuck = true;
    replicas_.hung = f.id;
    send_sample(now_, false);  // the step counter stops
    push(now_ + replicas_.timeout, Internal{Internal::kReplicaTimeout, f.id});
    return Drop::kDropped;
  }
  drop_now(r, attributed(f), cat.exit_code, cat.signature, observe);
  return Drop::kDropped;
}

// Machine m of a live replica is evicted from the running job: its replica drops out
// (true), or the job stops when that would leave fewer than min_replicas (true, a
// ProcessExit says so); false without replica groups or a running job.
bool SimWorld::evicted_drops(MachineId m, const std::string& why) {
  if (!replicas_.on || job_.state != JobState::kRunning) return false;
  const int r = view_.pp_group_index(view_.slot_of(m));
  if (!replicas_.can_lose_one()) {
    // The stack counted otherwise (a drop it has not heard of yet): the job stops, as an
    // exit the stack diagnoses.
    const std::int64_t step = steps_done();
    job_down();
    deliver_at(now_, ProcessExit{kNoMachine, 134, "quorum below min_replicas: " + why, step},
               false);
    return true;
  }
  if (job_.stuck && replicas_.hung && !symptoms_.faults()[*replicas_.hung].machines.empty() &&
      view_.pp_group_index(view_.slot_of(symptoms_.faults()[*replicas_.hung].machines.front())) ==
          r) {
    job_.stuck = false;  // the hung replica leaves: the others' collectives complete
    replicas_.hung.reset();
  }
  drop_now(r, m, 137, "evicted: " + why, now_);
  return true;
}

void SimWorld::replica_timed_out(FaultId id) {
  Fault& f = symptoms_.faults()[id];
  if (job_.state != JobState::kRunning || !job_.stuck || replicas_.hung != id || f.machines.empty())
    return;
  const SlotId s = view_.slot_of(f.machines.front());
  if (s < 0) return;
  job_.stuck = false;
  replicas_.hung.reset();
  drop_now(view_.pp_group_index(s), f.machines.front(), 1,
           "quorum timeout: a rank of the replica did not join the collective", now_);
  send_sample(now_, false);  // the survivors' step counter moves again
}

void SimWorld::apply(ActionId id, const RejoinReplica& a) {
  if (!replicas_.on) return refuse(id, "replica groups are not enabled");
  if (replicas_.state[a.replica] != ReplicaGroups::kDropped)
    return refuse(id, "replica " + std::to_string(a.replica) +
                          (replicas_.state[a.replica] == ReplicaGroups::kLive ? " is not dropped"
                                                                              : " is rejoining"));
  // Each machine of the replica fetches its state from the machine at the same place of the
  // next live replica (torchft's recovery from a live peer).
  const int dp = view_.pp_groups();
  int peer = a.replica;
  for (int k = 1; k < dp && peer == a.replica; ++k)
    if (replicas_.state[(a.replica + k) % dp] == ReplicaGroups::kLive) peer = (a.replica + k) % dp;
  const std::vector<SlotId> mine = view_.pp_group_slots(a.replica);
  const std::vector<SlotId> theirs = view_.pp_group_slots(peer);
  std::vector<Transfer> batch;
  const double bytes = sc_.job.checkpoint_bytes_per_machine;
  if (bytes > 0)
    for (std::size_t i = 0; i < mine.size(); ++i)
      batch.push_back({platform_.slot_host(theirs[i]), platform_.slot_host(mine[i]), bytes});
  replicas_.state[a.replica] = ReplicaGroups::kRejoining;
  replicas_.rejoins[id] = {a.replica, job_.epoch};
  run_batch(std::move(batch), Internal{Internal::kRejoined, id});
}

void SimWorld::rejoined(ActionId id) {
  auto it = replicas_.rejoins.find(id);
  if (it == replicas_.rejoins.end() || it->second.epoch != job_.epoch ||
      job_.state != JobState::kRunning)
    return;  // dropped again, or the job stopped: a start brings every replica back
  const int r = it->second.replica;
  replicas_.rejoins.erase(it);
  for (SlotId s : view_.pp_group_slots(r))
    if (view_.machine_in(s) == kNoMachine) {  // evicted while it rejoined
      replicas_.state[r] = ReplicaGroups::kDropped;
      return deliver_at(now_,
                        ActionFailed{id, "slot " + std::to_string(s) + " of replica " +
                                             std::to_string(r) + " has no machine"},
                        false);
    }
  // A machine of the replica broken while it was out fails the rejoin: its rank dies in the
  // first collective.
  for (SlotId s : view_.pp_group_slots(r)) {
    const MachineId m = view_.machine_in(s);
    if (m == kNoMachine || !fleet_.broken[m]) continue;
    Fault& f = symptoms_.faults()[fleet_.broken[m] - 1];
    if (f.outcome == Outcome::kPending) {
      if (!f.incident) {
        f.incident = true;
        symptoms_.open().push_back(f.id);
      }
      symptoms_.settle(f, Outcome::kInterrupted);
      std::erase(symptoms_.pending(), f.id);
    }
    f.detected = now_;
    replicas_.state[r] = ReplicaGroups::kDropped;
    const auto& cat = sc_.faults[f.category];
    return drop_now(r, m, cat.exit_code, cat.signature, now_);
  }
  replicas_.back(r);
  progress_.pause_quorum(replicas_.quorum_change);
  set_replica_factor();
  // The incidents whose machines have left the job are over: credited to the replica drop.
  symptoms_.resolved_now().clear();
  resolve_open(false, &symptoms_.resolved_now());
  for (FaultId f : symptoms_.resolved_now()) {
    symptoms_.faults()[f].resolution = Mechanism::kReplicaDrop;
    credit(result_.resolved_by, Mechanism::kReplicaDrop);
  }
  deliver_at(now_, ReplicaRejoined{id, r, view_.pp_groups() - replicas_.out}, false);
}

}  // namespace faultline::sim
