// SimWorld: the simulator's World. One instance runs one replica.
//
// It owns the ground truth (faults from FaultStream), the symptom model that turns
// each fault into what a real system would observe and when, the job's state machine
// (running, stuck, down, acquiring machines, starting), closed-form progress, and the
// accounting of every nanosecond into the breakdown buckets. Policies see it only
// through the World interface.
//
// Time: an integer-nanosecond (time, sequence) event queue drives the replica; SimGrid
// supplies the durations that depend on topology and contention (sim/batches.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "policies/api/policy.h"
#include "policies/api/registry.h"
#include "scenarios/scenario.h"
#include "sim/batches.h"
#include "sim/event_queue.h"
#include "sim/faults.h"
#include "sim/fleet.h"
#include "sim/job.h"
#include "sim/metrics.h"
#include "sim/network.h"
#include "sim/progress.h"
#include "sim/replica_groups.h"
#include "sim/run_options.h"
#include "sim/sim_events.h"
#include "sim/symptom_model.h"
#include "sim/warnings.h"
#include "sim/world_requests.h"

namespace faultline::sim {

class SimWorld final : public World {
 public:
  // `platform` and `flows` are shared by replicas of this process; `base` is the
  // job's initial cluster view (copied).
  SimWorld(const scenarios::Scenario& sc, const ClusterView& base, Platform& platform,
           FlowNet& flows, const Registry& registry, std::uint64_t replica, RunOptions opt);
  ~SimWorld() override;

  // Runs the replica to the horizon. Must run inside a SimGrid actor.
  ReplicaResult run();

  // World
  Instant now() const override { return Instant{now_}; }
  const ClusterView& cluster() const override { return view_; }
  ActionId act(Action a) override;
  TimerId set_timer(Duration after, std::uint64_t tag) override;
  void cancel_timer(TimerId id) override;
  Rng& rng() override { return policy_rng_; }
  void note(std::string_view reason) override;
  bool keeps_notes() const override { return opt_.decisions; }

 private:
  using Internal = queued::Internal;
  using Payload = queued::Payload;
  using Queue = EventQueue<Payload>;
  using Item = Queue::Item;

  using Acquire = Fleet::Acquire;
  void drop_acquisitions();
  void acquire_part_done(ActionId id);
  void refill_pool(bool by_scheduler = false);
  void park_standby(MachineId m);
  void unpark_standby(MachineId m);
  void count_standby_time();
  void want_machine(ActionId acq, SlotId slot);
  void machine_free(MachineId m, bool repaired);
  std::int64_t fault_wall_time(std::int64_t arrival) const;
  bool computing() const { return job_.computing(); }
  std::int64_t repair_ns(double mean_h, Rng& rng) const;
  void start_job(ActionId id, Mechanism mech, bool in_place = false);
  double timed(const std::string& key, double modelled);
  SlotId dp_peer(SlotId s) const;
  std::string in_place_blocker() const;
  void deliver_probe(ActionId id);
  StackSignatures stack_signatures() const;
  void note_mechanism(Mechanism m) {
    if (m != Mechanism::kNone) mechanism_ = m;
  }

  void push(std::int64_t at, Payload p);
  void deliver_at(std::int64_t at, Event e, bool epoch_bound);
  void advance_to(std::int64_t t);
  void account(std::int64_t t);
  void attribute_acquiring(std::int64_t dt);
  void attribute_diagnosis(std::int64_t dt);
  void dispatch(Item& item);
  void on_internal(const Internal& in);
  bool run_events();
  void record_outcomes(std::int64_t end);
  void check_ledger() const;
  void record_timeline(std::int64_t end);
  void fault_ended(FaultId id);         // a transient fault's duration is over
  void acquire_scheduled(ActionId id);  // the scheduler placed the acquisition's machines
  void standby_woken(ActionId id);      // its warm standbys (and reserved trays) joined
  void replay_done(ActionId action);    // a RunReplay's groups answer from ground truth
  void on_call_done();                  // the on-call engineers requeue an ended run
  void start_init();                    // a start's restore begins

  void apply(ActionId id, const StopJob& a);
  void apply(ActionId id, const StartJob& a);
  void apply(ActionId id, const EvictMachines& a);
  void apply(ActionId id, const AcquireMachines& a);
  void apply(ActionId id, const SetCheckpointPlan& a);
  void apply(ActionId id, const WatchSteps& a);
  void apply(ActionId id, const EnableOracle& a);
  void apply(ActionId id, const Note& a);
  void apply(ActionId id, const EnableInspection& a);
  void apply(ActionId id, RunProbe& a);  // kept (moved from the action) until it answers
  void apply(ActionId id, const CaptureStacks& a);
  void apply(ActionId id, RunReplay& a);  // kept until it answers
  void apply(ActionId id, const HotUpdate& a);
  void apply(ActionId id, const RollBack& a);
  void apply(ActionId id, const SetStandbyPool& a);
  void apply(ActionId id, const AvoidMachines& a);
  void apply(ActionId id, const MitigateSlowdown& a);
  void apply(ActionId id, const EndRun& a);
  void apply(ActionId id, const EnableReplicaGroups& a);
  void apply(ActionId id, const RejoinReplica& a);
  void apply(ActionId id, const MigrateMachines& a);
  void refuse(ActionId id, std::string why);  // ActionFailed, now
  void stop_job_now();
  void requeue_all(Acquire& acq);
  void acquire_standby(Acquire acq, bool same_domain);
  void reserve_in_domain(Acquire& acq);
  void acquire_oracle(const Acquire& acq);
  void inject(const FaultArrival& a);
  void strike(const FaultArrival& a, std::uint64_t key);
  bool warn(const FaultArrival& a, std::uint64_t key);
  void warned_strike(std::uint64_t token);
  void start_warnings();
  void false_warning(int category);
  void migration_step(ActionId id);
  void abandon_migrations();
  void apply_symptom(Fault& f, bool at_start);
  OracleFault oracle_fault(const Fault& f) const;
  void alert_inspections(Fault& f);
  bool strike_crash(Fault& f, std::int64_t observe);
  bool strike_hang(Fault& f);
  void job_down();
  void abort_start(const std::string& signature, MachineId m, std::int64_t observe_at);
  void update_rate(bool sample);
  void send_sample(std::int64_t at, bool nan);
  std::int64_t steps_done() const;  // the global step counter now (as StepSample::step)
  void resolve_open(bool at_start, std::vector<FaultId>* resolved = nullptr);
  void mark_acted();
  void run_batch(std::vector<Transfer> batch, Internal done);
  std::vector<double> time_groups(const std::vector<MachineSet>& groups) const;
  void run_batch_keyed(const std::vector<Transfer>& batch, const FlowNet::Key& key, Internal done);
  void run_whole_job_batch(int kind, double bytes, Internal done);
  void finish_start();
  std::vector<SlotId> empty_slots() const;
  bool place_new(SlotId s, bool oracle = false);
  double fault_ratio(const Fault& f) const;
  MachineId attributed(Fault& f);
  // Replica groups (sim_replicas.cc). What became of a rank's failure under them: not theirs
  // (they are off, the fault reaches every replica, the quorum would fall below its minimum:
  // the job goes down as without them), its replica dropped, or nothing (its replica was out
  // of the quorum already and no rank of it trains).
  enum class Drop : std::uint8_t { kNotMine, kDropped, kIdle };
  Drop quorum_verdict(const Fault& f, int* replica) const;
  Drop drop_replica(Fault& f, std::int64_t observe, bool hang);
  void drop_now(int replica, MachineId m, int exit_code, const std::string& signature,
                std::int64_t observe);
  void replica_timed_out(FaultId id);
  void rejoined(ActionId id);
  void all_replicas_back();
  void set_replica_factor();
  bool replica_out(MachineId m) const;  // its replica is out of the quorum
  bool evicted_drops(MachineId m, const std::string& why);
  void on_join(MachineId m);
  void on_leave(MachineId m);
  MachineId new_machine(bool may_be_bad);
  MachineId draw_machine();
  MachineId draw_in_domain(int d);
  bool health_check_drains(MachineId m);
  void start_repair(MachineId m);
  void repaired(std::uint64_t token);
  // The fault still affects machine m in the job (a persistent fault until its machine
  // is repaired; a transient one while it lasts).
  bool still_on(const Fault& f, MachineId m) const {
    return view_.slot_of(m) >= 0 &&
           (!sc_.faults[f.category].persistent || fleet_.broken[m] == f.id + 1);
  }

  const scenarios::Scenario& sc_;
  ClusterView view_;
  Platform& platform_;
  FlowNet& flows_;
  const Registry& registry_;  // makes the stack afresh when the on-call requeues an ended run
  std::unique_ptr<Policy> policy_;
  std::uint64_t replica_;
  RunOptions opt_;
  Rng policy_rng_;
  FaultStream faults_;
  SymptomModel symptoms_;  // the fault ledger and its random streams
  Fleet fleet_;            // the machines and the acquisitions
  Batches batches_;        // the network transfers under way

  Queue queue_;
  std::int64_t now_ = 0;
  std::int64_t accounted_ = 0;
  std::int64_t horizon_ = 0;
  std::int64_t exposed_ = 0;  // time the job computed (faults.clock "compute" runs on it)
  std::int64_t work_ = 0;     // job.work_days as productive ns (0: a fixed window)
  Timers timers_;
  ActionId next_action_ = 1;
  std::int64_t events_ = 0;
  int same_instant_ = 0;
  std::string last_event_;

  Job job_;  // the job's state machine
  std::vector<std::pair<std::int64_t, std::int64_t>>
      waits_;         // with a timeline: [start, end) of each wait
  double cross_ = 1;  // step-time multiplier while a TP group leaves its domain
  ProgressModel progress_;
  PolicySettings settings_;  // the policy's standing requests
  int code_version_ = 0;     // the newest code update requested: they count v1, v2, ...

  PendingDiagnoses diagnoses_;  // tests and replays under way
  Mechanism mechanism_ = Mechanism::kNone;

  ReplicaGroups replicas_;  // the quorum under fault-tolerant data parallelism

  // Failure prediction (scenario categories' `warning`) and migration (MigrateMachines).
  Warnings warnings_;
  struct Migration {
    ActionId id = 0;
    std::vector<std::pair<MachineId, MachineId>> moves;  // (old machine, its standby)
    std::int64_t pause = 0;
    int waiting = 0;  // parts not done yet (the standbys' wake, the copy)
    Mechanism mechanism = Mechanism::kNone;
    bool ready_spares = false;  // the oracle's fresh spares, not the pool's standbys
  };
  // A migration's machine that did not join: back to the pool, or the free pool.
  void give_back(const Migration& mg, MachineId standby);
  std::vector<Migration> migrations_;

  ReplicaResult result_;
};

}  // namespace faultline::sim
