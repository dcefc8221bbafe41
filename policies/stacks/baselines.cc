#include "policies/stacks/baselines.h"

#include <algorithm>
#include <map>

namespace faultline::policies {

namespace {

// Shared restart cycle: stop (if running) -> acquire machines -> start. A fault that
// arrives while a cycle is under way starts a new cycle once the current step answers.
// `in_place` asks the start to restart in place (StartJob::in_place): the backend does
// when it can, else starts as usual.
class RestartCycle {
 public:
  enum class State { kRunning, kAcquiring, kStarting };

  void begin(World& w, AcquireMode mode, std::vector<SlotId> slots, const std::string& why,
             bool in_place = false) {
    if (state_ == State::kRunning) w.act(StopJob{why});
    in_place_ = in_place;
    const Mechanism mech = mode == AcquireMode::kRequeue ? Mechanism::kRequeue : Mechanism::kOracle;
    if (mode == AcquireMode::kOracle && slots.empty()) {
      start(w, why, mech);
      return;
    }
    state_ = State::kAcquiring;
    acquire_ = w.act(AcquireMachines{mode, std::move(slots), why, mech});
  }
  // Stops a running job ahead of begin() (which then stops nothing): evictions that must
  // find it stopped go between the two.
  void stop(World& w, const std::string& why) {
    if (state_ != State::kRunning) return;
    w.act(StopJob{why});
    state_ = State::kStarting;
  }
  void start(World& w, const std::string& why, Mechanism mech = Mechanism::kNone) {
    state_ = State::kStarting;
    StartJob s{why, mech};
    s.in_place = in_place_;
    start_ = w.act(std::move(s));
  }
  void roll_back(World& w, const std::string& why) {
    state_ = State::kStarting;
    in_place_ = false;
    start_ = w.act(RollBack{why});
  }
  // Returns true when the event belonged to the cycle.
  bool on_event(const Event& e, World& w) {
    if (auto* r = std::get_if<MachinesReady>(&e); r && r->action == acquire_) {
      start(w, "machines ready");
      return true;
    }
    if (auto* s = std::get_if<JobStarted>(&e); s && s->action == start_) {
      state_ = State::kRunning;
      return true;
    }
    return false;
  }
  State state() const { return state_; }

 private:
  State state_ = State::kStarting;
  bool in_place_ = false;
  ActionId acquire_ = 0;
  ActionId start_ = 0;
};

class Requeue final : public Policy {
 public:
  explicit Requeue(const Params& p)
      : interval_(Duration::seconds(p.get("checkpoint_interval_s"))),
        write_(Duration::seconds(p.get("checkpoint_write_s"))) {}
  const PolicyInfo& info() const override { return requeue_info(); }
  void start(World& w) override {
    w.act(SetCheckpointPlan{interval_, write_, CheckpointTier::kRemote,
                            "periodic blocking save to remote storage"});
    cycle_.start(w, "initial start");
  }
  void on_event(const Event& e, World& w) override {
    if (cycle_.on_event(e, w)) return;
    std::string why;
    if (auto* x = std::get_if<ProcessExit>(&e))
      why = "processes exited: " + x->signature;
    else if (auto* s = std::get_if<StartFailed>(&e))
      why = "start failed: " + s->signature;
    else if (auto* c = std::get_if<CodeUpdateRequested>(&e))
      why = "code update " + c->version;
    else
      return;  // requeue has no inspections, metrics or stack analysis
    cycle_.begin(w, AcquireMode::kRequeue, {}, "requeue whole job: " + why);
  }

 private:
  Duration interval_, write_;
  RestartCycle cycle_;
};

// The upper bound. Per fault, the best recovery the job allows, with the most favourable
// costs any module could be given (baselines.h lists them and why each bounds a module).
class Oracle final : public Policy {
 public:
  explicit Oracle(const Params& p) : restart_spares_(p.get("evict_on_transient") != 0) {}
  const PolicyInfo& info() const override { return oracle_info(); }
  void start(World& w) override {
    w.act(EnableOracle{"upper bound: perfect detection and localization"});
    // The remote copy every step too: when both in-memory copies of a shard are lost, no
    // checkpoint module could fall back to a newer one.
    w.act(SetCheckpointPlan{Duration::zero(), Duration::zero(), CheckpointTier::kMemoryWithPeer,
                            "every step in memory with a peer copy and remotely, no blocking",
                            Duration::zero()});
    if (w.cluster().pp_groups() > 1) {
      // Replica drop at its cheapest: the quorum trains down to one replica, changes without
      // a pause and drops a hung replica at once (replica-drop's parameters go down to 0 s
      // for the pause; the oracle needs no timeout to know a rank hangs).
      groups_ = true;
      w.act(EnableReplicaGroups{1, Duration::zero(), Duration::zero(),
                                "oracle: a replica's failure drops it, the others train on"});
    }
    cycle_.start(w, "initial start");
  }
  void on_event(const Event& e, World& w) override {
    if (ended_) return;  // EndRun: the on-call has it
    if (cycle_.on_event(e, w)) {
      if (std::holds_alternative<JobStarted>(e)) started(w);
      return;
    }
    if (auto* f = std::get_if<OracleFault>(&e)) return fault(*f, w);
    if (auto* d = std::get_if<ReplicaDropped>(&e)) return dropped(*d, w);
    if (auto* r = std::get_if<MachinesReady>(&e)) return refilled(*r, w);
    if (auto* r = std::get_if<ReplicaRejoined>(&e)) {
      if (rejoins_.erase(r->action)) named_.erase(r->replica);
      return;
    }
    if (auto* a = std::get_if<ActionFailed>(&e)) return failed(*a, w);
    if (auto* c = std::get_if<CodeUpdateRequested>(&e)) {
      restart(w, AcquireMode::kOracle, {}, "code update " + c->version, false);
      return;
    }
    if (std::holds_alternative<ProcessExit>(e) || std::holds_alternative<StartFailed>(e)) {
      // Already handled through OracleFault; a stray exit still gets a restart.
      if (running()) restart(w, AcquireMode::kOracle, {}, "restart after " + describe(e), true);
    }
  }

 private:
  bool running() const { return cycle_.state() == RestartCycle::State::kRunning; }

  void fault(const OracleFault& f, World& w) {
    const std::string why = "oracle: " + f.category;
    if (f.lead > Duration::zero()) {
      // A true warning: the machine's work moves to a ready spare before the fault comes
      // (a false one is never acted on: the oracle knows it announces nothing).
      migrate(f.machines, why + " on its way", w);
      return;
    }
    if (f.data_bug) {
      // Nothing automatic fixes the data: page the on-call at once.
      cycle_.stop(w, why);
      ended_ = true;
      w.act(EndRun{"code_or_data", "oracle knows the data is at fault: " + f.category});
      return;
    }
    if (f.code_bug) {
      cycle_.stop(w, why);
      clear_replicas();
      cycle_.roll_back(w, "oracle knows the code is at fault");
      return;
    }
    const bool replace = f.persistent || restart_spares_;
    if (f.replica >= 0) {
      // The quorum dropped its replica (or drops it, a hang) and the others train on: a
      // broken machine is replaced at once; the replica rejoins when its drop is seen
      // (dropped) or its spare is in (refilled).
      if (replace) refill(f.replica, f.machines, why, w);
      return;
    }
    if (f.slowdown && !f.machines.empty()) {
      // A slow machine's work moves to a ready spare while the job trains (a migration
      // without a pause): nothing is lost, transient or not.
      migrate(f.machines, why + " slows the job", w);
      return;
    }
    std::vector<SlotId> slots;
    if (replace)
      for (MachineId m : f.machines)
        if (w.cluster().slot_of(m) >= 0) slots.push_back(w.cluster().slot_of(m));
    if (!slots.empty()) {
      MachineSet bad;
      for (SlotId s : slots) bad.push_back(w.cluster().machine_in(s));
      // Stopped first: evicted from a training job, a machine would drop its replica.
      cycle_.stop(w, why);
      w.act(EvictMachines{bad, "oracle knows they are broken: " + f.category});
      restart(w, AcquireMode::kOracle, slots, "replace with ready spares", true);
    } else {
      restart(w, AcquireMode::kOracle, {}, "restart without replacing: " + f.category, true);
    }
  }

  // Stop-the-world: the job stops (if it runs) and starts again, every replica back in it;
  // in place after a fault where the job has data-parallel peers to restore from.
  void restart(World& w, AcquireMode mode, std::vector<SlotId> slots, const std::string& why,
               bool after_fault) {
    clear_replicas();
    cycle_.begin(w, mode, std::move(slots), why, after_fault && groups_);
  }
  void clear_replicas() {
    refills_.clear();
    rejoins_.clear();
    named_.clear();
  }

  // The machines of `machines` still in the job leave it for ready spares, the job training
  // on; when it does not train now, once it runs again.
  void migrate(const MachineSet& machines, const std::string& why, World& w) {
    MachineSet here;
    for (MachineId m : machines)
      if (m >= 0 && m < w.cluster().machine_count() && w.cluster().slot_of(m) >= 0)
        here.push_back(m);
    if (here.empty()) return;
    if (!running()) {
      later_.insert(later_.end(), here.begin(), here.end());
      return;
    }
    migrations_[w.act(MigrateMachines{here, why, Mechanism::kOracle, Duration::zero()})] = here;
  }
  void started(World& w) {
    MachineSet later;
    later.swap(later_);
    if (!later.empty()) migrate(later, "oracle: moved off after the restart", w);
  }

  // Replica `replica` loses `machines` (those still in the job) to ready spares.
  void refill(int replica, const MachineSet& machines, const std::string& why, World& w) {
    MachineSet bad;
    std::vector<SlotId> slots;
    for (MachineId m : machines)
      if (m >= 0 && m < w.cluster().machine_count() && w.cluster().slot_of(m) >= 0) {
        bad.push_back(m);
        slots.push_back(w.cluster().slot_of(m));
      }
    if (bad.empty()) return;
    w.act(EvictMachines{bad, why, Mechanism::kReplicaDrop});
    refills_[w.act(AcquireMachines{AcquireMode::kOracle, slots, why, Mechanism::kReplicaDrop})] =
        replica;
  }
  bool refilling(int replica) const {
    for (const auto& [action, r] : refills_)
      if (r == replica) return true;
    return false;
  }
  void dropped(const ReplicaDropped& d, World& w) {
    if (!groups_ || !running()) return;  // a start brings every replica back
    std::erase_if(rejoins_, [&](const auto& x) { return x.second == d.replica; });  // moot now
    if (refilling(d.replica)) return;  // it rejoins once its spares are in
    const auto was = named_.find(d.replica);
    if (was != named_.end() && was->second == d.machine && d.machine != kNoMachine) {
      // Its rejoin failed on the same machine: a fault it was not told of as such.
      named_.erase(was);
      refill(d.replica, {d.machine},
             "oracle: replica " + std::to_string(d.replica) + " fails again on the same machine",
             w);
      if (refilling(d.replica)) return;
    }
    named_[d.replica] = d.machine;
    rejoin(d.replica, w);
  }
  void refilled(const MachinesReady& r, World& w) {
    migrations_.erase(r.action);
    const auto it = refills_.find(r.action);
    if (it == refills_.end()) return;
    const int replica = it->second;
    refills_.erase(it);
    if (!refilling(replica) && running()) rejoin(replica, w);
  }
  void rejoin(int replica, World& w) {
    rejoins_[w.act(RejoinReplica{replica, "oracle: its machines are good"})] = replica;
  }
  void failed(const ActionFailed& a, World& w) {
    if (auto it = migrations_.find(a.action); it != migrations_.end()) {
      // The job stopped before the swap: the machines move once it runs again.
      later_.insert(later_.end(), it->second.begin(), it->second.end());
      migrations_.erase(it);
      return;
    }
    refills_.erase(a.action);
    const auto it = rejoins_.find(a.action);
    if (it == rejoins_.end()) return;
    const int replica = it->second;
    rejoins_.erase(it);
    if (!running()) return;
    // A slot of the replica lost its machine meanwhile: fill it, then rejoin.
    std::vector<SlotId> empty;
    for (SlotId s : w.cluster().pp_group_slots(replica))
      if (w.cluster().machine_in(s) == kNoMachine) empty.push_back(s);
    if (!empty.empty())
      refills_[w.act(AcquireMachines{AcquireMode::kOracle, empty, "oracle: refill replica",
                                     Mechanism::kReplicaDrop})] = replica;
  }

  bool restart_spares_;
  bool ended_ = false;
  bool groups_ = false;
  RestartCycle cycle_;
  std::map<ActionId, int> refills_;            // ready spares for a dropped replica
  std::map<ActionId, int> rejoins_;            // rejoins under way
  std::map<int, MachineId> named_;             // the machine each replica's last drop named
  std::map<ActionId, MachineSet> migrations_;  // under way
  MachineSet later_;                           // to move off once the job runs again
};

class FailoverBench final : public Policy {
 public:
  explicit FailoverBench(const Params& p)
      : k_(static_cast<int>(p.get("k"))),
        mode_(static_cast<int>(p.get("mode"))),
        at_(p.get("at_s")) {}
  const PolicyInfo& info() const override { return failover_bench_info(); }
  void start(World& w) override {
    w.act(SetCheckpointPlan{Duration::zero(), Duration::zero(), CheckpointTier::kMemoryWithPeer,
                            "no loss"});
    start_ = w.act(StartJob{"initial start"});
    w.set_timer(Duration::seconds(at_), 1);
  }
  void on_event(const Event& e, World& w) override {
    if (auto* t = std::get_if<TimerFired>(&e); t && t->tag == 1) {
      std::vector<SlotId> slots;
      MachineSet ms;
      for (SlotId s = 0; s < std::min(k_, w.cluster().slots()); ++s) {
        slots.push_back(s);
        ms.push_back(w.cluster().machine_in(s));
      }
      w.act(StopJob{"benchmark eviction"});
      w.act(EvictMachines{ms, "benchmark eviction"});
      const AcquireMode mode = mode_ == 0   ? AcquireMode::kStandby
                               : mode_ == 1 ? AcquireMode::kReschedule
                                            : AcquireMode::kRequeue;
      acquire_ = w.act(AcquireMachines{mode, slots, "benchmark"});
    }
    if (auto* r = std::get_if<MachinesReady>(&e); r && r->action == acquire_)
      start_ = w.act(StartJob{"ready"});
  }

 private:
  int k_, mode_;
  double at_;
  ActionId start_ = 0, acquire_ = 0;
};

}  // namespace

const PolicyInfo& failover_bench_info() {
  static const PolicyInfo info{
      "failover-bench",
      "1",
      "experiment: evict k machines once and refill them (0 warm standby, 1 reschedule, 2 requeue)",
      {
          {"k", "machines evicted", "count", 1, 1, 1e6},
          {"mode", "0 warm standby, 1 reschedule, 2 requeue", "choice", 0, 0, 2},
          {"at_s", "when the eviction happens", "s", 3600, 0, 1e9},
      }};
  return info;
}

std::unique_ptr<Policy> make_failover_bench(const Params& p) {
  return std::make_unique<FailoverBench>(p);
}

const PolicyInfo& requeue_info() {
  static const PolicyInfo info{
      "requeue",
      "1",
      "common practice: detect at exit or collective timeout, requeue the whole job, restart "
      "from the last periodic remote checkpoint",
      {
          {"checkpoint_interval_s", "training time between periodic checkpoints", "s", 1800, 1e-3,
           1e7},
          {"checkpoint_write_s", "blocking time of one save to remote storage (Megatron-style)",
           "s", 6.77, 0, 1e5},
      },
      std::vector<FacilityUse>{{Facility::kRequeue}}};  // nothing else: exits and requeues
  return info;
}

std::unique_ptr<Policy> make_requeue(const Params& p) { return std::make_unique<Requeue>(p); }

const PolicyInfo& oracle_info() {
  static const PolicyInfo info{
      "oracle",
      "3",
      "upper bound: told every fault at once and which failure warnings are true; per fault "
      "the best recovery the job allows (replica drop where it has data-parallel replicas, "
      "an in-place restart, migration off warned and slow machines), unlimited ready spares, "
      "every-step checkpoint without blocking",
      {
          {"evict_on_transient",
           "also replace the machine for transient machine faults (1) or restart (rejoin) on "
           "it (0)",
           "bool", 0, 0, 1},
      }};
  return info;
}

std::unique_ptr<Policy> make_oracle(const Params& p) { return std::make_unique<Oracle>(p); }

}  // namespace faultline::policies
