// SimWorld: the simulator's World. One instance runs one replica.
//
// It owns the ground truth (faults from FaultStream), the symptom model that turns
// each fault into what a real system would observe and when, the job's state machine
// (running, stuck, down, acquiring machines, starting), closed-form progress, and the
// accounting of every nanosecond into the breakdown buckets. Policies see it only
// through the World interface.
//
// Time: an integer-nanosecond (time, sequence) event queue drives the replica. SimGrid
// supplies the durations that depend on topology and contention (checkpoint restore,
// image pulls): while no real transfer is under way the clock jumps from event to event
// without entering SimGrid; before a real batch starts the SimGrid clock is brought to
// the replica's time, and until the batch ends the replica waits on SimGrid for
// whichever comes first, its next event or a batch completion.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <string>
#include <variant>
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
#include "sim/symptom_model.h"

namespace faultline::sim {

struct RunOptions {
  bool timeline = false;
  double timeline_step_s = 600;
  bool decisions = false;
  bool incidents = false;
  // Machine-readable lines in ReplicaResult::decisions for `sim replay`'s comparison with
  // the live run (sim/replay_decisions.h): "R <ns> A <action JSON>" per action and
  // "R <ns> J <machine> <slot>" per machine joining a slot. The replay takes them out
  // before anything is written; nothing else changes.
  bool action_records = false;
  // Standby machines already parked when the run begins (`sim replay`: a live run's
  // configured standbys are connected and parked before its job starts): the pool's first
  // fill, at time zero, takes up to this many at once instead of from the scheduler.
  int parked_standbys = 0;
};

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
  struct Deliver {
    Event event;
    std::int64_t epoch = -1;  // dropped if the job's run epoch changed (-1 = always)
  };
  struct TimerItem {
    TimerId id;
    std::uint64_t tag;
  };
  struct Internal {
    enum Kind : std::uint8_t {
      kAcquireScheduled,
      kAcquirePulled,
      kStartInit,
      kStartRestored,
      kFaultEnd,
      kWatchdog,
      kProbeDone,
      kStacksDone,
      kReplayDone,
      kStandbyWoken,
      kPoolRefilled,
      kCodeFixed,
      kRepaired,
      kHoldEnd,
      kOnCallDone,
      kPreempted,
      kReplicaTimeout,  // a hung replica's quorum timed out (token: the fault)
      kRejoined,        // a RejoinReplica's state transfer ended (token: the action)
      kWarnedStrike,    // a warned fault strikes (token: index into warned_)
      kFalseWarning,    // a false warning of a category comes (token: the category)
      kMigrateStep      // a migration's standbys woke or its copy ended (token: the action)
    } kind;
    std::uint64_t token = 0;  // action id or fault id
  };
  using Payload = std::variant<Deliver, TimerItem, Internal>;
  using Queue = EventQueue<Payload>;
  using Item = Queue::Item;

  using Acquire = Fleet::Acquire;
  using Want = Fleet::Want;
  // Drops every acquisition under way; machines taken for them go back to the free pool.
  void drop_acquisitions();
  void acquire_part_done(ActionId id);
  // Schedules cold standbys toward the pool's target. With standby_refill "repaired" only
  // the scheduler's own host selection (`by_scheduler`: the start, a replacement beyond
  // the pool) draws them from the free pool; repaired machines refill it otherwise.
  void refill_pool(bool by_scheduler = false);
  // The warm standby pool changes only through these two: each first adds the pool's
  // machine-time since its last change to ReplicaResult::standby_machine_s.
  void park_standby(MachineId m);
  void unpark_standby(MachineId m);
  void count_standby_time();
  void want_machine(ActionId acq, SlotId slot);
  // A machine comes free (back from repair, or preempted): it serves the oldest want, or
  // refills the standby pool (standby_refill "repaired"), or joins the free pool.
  void machine_free(MachineId m, bool repaired);
  // The fault clock: a fault's arrival time on it, as a wall instant (kNever when the job
  // is not computing under faults.clock "compute").
  std::int64_t fault_wall_time(std::int64_t arrival) const;
  bool computing() const { return job_.computing(); }
  // A repair's duration with mean `mean_h`, as cluster.repair.repair_time draws it.
  std::int64_t repair_ns(double mean_h, Rng& rng) const;
  // `in_place` (StartJob::in_place): only the restarted slots re-initialise and restore,
  // from a data-parallel peer, when in_place_blocker() finds nothing against it.
  void start_job(ActionId id, Mechanism mech, bool in_place = false);
  // The duration of the next action of kind `key`: the live run's for a replay
  // (Scenario::replay_durations), else `modelled`.
  double timed(const std::string& key, double modelled);
  // In-place restarts (FlashRecovery): a slot's nearest data-parallel peer (same pipeline
  // and tensor position in another replica) whose machine is not fresh, or -1; why an
  // in-place restart cannot be done now (empty: it can).
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
  // account()'s share of `dt` of failover with acquisitions under way, and of diagnosis,
  // to the parts of Attributed that one input sets.
  void attribute_acquiring(std::int64_t dt);
  void attribute_diagnosis(std::int64_t dt);
  void dispatch(Item& item);
  void on_internal(const Internal& in);
  // run()'s parts: the event loop (true when the job's work was done), then the result.
  bool run_events();
  void record_outcomes(std::int64_t end);
  void check_ledger() const;
  void record_timeline(std::int64_t end);
  // What the internal events do (sim_world.cc, sim_symptoms.cc, sim_fleet.cc).
  void fault_ended(FaultId id);         // a transient fault's duration is over
  void acquire_scheduled(ActionId id);  // the scheduler placed the acquisition's machines
  void standby_woken(ActionId id);      // its warm standbys (and reserved trays) joined
  void replay_done(ActionId action);    // a RunReplay's groups answer from ground truth
  void on_call_done();                  // the on-call engineers requeue an ended run
  void start_init();                    // a start's restore begins

  // The actions (sim_actions.cc): one method each, and the refusal they may answer.
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
  // The job stops, running or starting (a start under way is abandoned with its transfers).
  void stop_job_now();
  // AcquireMachines by mode: requeue tears the whole job down first; standbys wake (from
  // the slot's own NVLink domain first with same_domain); the oracle places fresh machines.
  void requeue_all(Acquire& acq);
  void acquire_standby(Acquire acq, bool same_domain);
  void reserve_in_domain(Acquire& acq);
  void acquire_oracle(const Acquire& acq);
  void inject(const FaultArrival& a);
  // A fault arrival past thinning (`key`: its arrival index) strikes now.
  void strike(const FaultArrival& a, std::uint64_t key);
  // Failure prediction and migration (sim_migration.cc). warn: a warned category's arrival
  // announced on its machine (true: it strikes later, from warned_strike). start_warnings:
  // the false-warning streams' first arrivals. migration_step: a migration's parts are done
  // one by one; the last swaps the machines. abandon_migrations: the job stopped.
  bool warn(const FaultArrival& a, std::uint64_t key);
  void warned_strike(std::uint64_t token);
  void start_warnings();
  void false_warning(int category);
  void migration_step(ActionId id);
  void abandon_migrations();
  void apply_symptom(Fault& f, bool at_start);
  // What EnableOracle tells of fault f striking now: its category's ground truth and what
  // it does to the job (a slowdown, its replica out of the quorum).
  OracleFault oracle_fault(const Fault& f) const;
  // apply_symptom's parts (sim_symptoms.cc); the strikes say whether the job felt it.
  void alert_inspections(Fault& f);
  bool strike_crash(Fault& f, std::int64_t observe);
  bool strike_hang(Fault& f);
  void job_down();
  void abort_start(const std::string& signature, MachineId m, std::int64_t observe_at);
  // Recomputes the progress rate; true when it just turned slow (a report is scheduled).
  // Recomputes the step rate from the open slowdowns; with `sample`, a change while the
  // job runs is sent as a steady StepSample.
  void update_rate(bool sample);
  // A steady StepSample of the job now, delivered at `at` (when the policy asked for them).
  void send_sample(std::int64_t at, bool nan);
  std::int64_t steps_done() const;  // the global step counter now (as StepSample::step)
  // Resolves the open incidents that no longer affect the job; appends their ids to
  // `resolved` when given.
  void resolve_open(bool at_start, std::vector<FaultId>* resolved = nullptr);
  void mark_acted();
  void run_batch(std::vector<Transfer> batch, Internal done);
  // A grouped inter_all_gather (the pairwise check): each group's ring all-gather, all
  // groups at once, timed by the fluid model with every slow link's cap; seconds per group.
  std::vector<double> time_groups(const std::vector<MachineSet>& groups) const;
  void run_batch_keyed(const std::vector<Transfer>& batch, const FlowNet::Key& key, Internal done);
  // A whole-job batch (every slot from storage), built and hashed once per replica.
  void run_whole_job_batch(int kind, double bytes, Internal done);
  void finish_start();
  std::vector<SlotId> empty_slots() const;
  // False when a finite fleet has no free machine for it.
  bool place_new(SlotId s, bool oracle = false);
  double fault_ratio(const Fault& f) const;
  // The machine a crash log names: the culprit with the category's attribution, else
  // its pipeline neighbour.
  MachineId attributed(Fault& f);
  // Replica groups (sim_replicas.cc). What became of a rank's failure under them: not theirs
  // (they are off, the fault reaches every replica, the quorum would fall below its minimum:
  // the job goes down as without them), its replica dropped, or nothing (its replica was out
  // of the quorum already and no rank of it trains).
  enum class Drop : std::uint8_t { kNotMine, kDropped, kIdle };
  // What a crash or hang `f` striking now would become (its replica in *replica, unless
  // kNotMine), without doing it; drop_replica does it.
  Drop quorum_verdict(const Fault& f, int* replica) const;
  Drop drop_replica(Fault& f, std::int64_t observe, bool hang);
  void drop_now(int replica, MachineId m, int exit_code, const std::string& signature,
                std::int64_t observe);
  void replica_timed_out(FaultId id);
  void rejoined(ActionId id);
  // A (re)start brings every replica back; rejoins under way are moot.
  void all_replicas_back();
  // The progress model's replica factor from the live replicas.
  void set_replica_factor();
  bool replica_out(MachineId m) const;  // its replica is out of the quorum
  // Machine m of a live replica is evicted from the running job: its replica drops out
  // (true), or the job stops when that would leave fewer than min_replicas (true, a
  // ProcessExit says so); false without replica groups or a running job.
  bool evicted_drops(MachineId m, const std::string& why);
  // Machines entering and leaving the job (any slot), and the repair pipeline (the fleet's
  // part in sim_fleet.cc).
  void on_join(MachineId m);
  void on_leave(MachineId m);
  MachineId new_machine(bool may_be_bad);
  // kNoMachine when a finite fleet has no free machine.
  MachineId draw_machine();
  // A free machine of NVLink domain d (a never-used spare tray of its rack, else one back
  // from repair there), health-checked as draw_machine's; kNoMachine when it has none.
  MachineId draw_in_domain(int d);
  // The scheduler's node health check drains machine m (it has an active persistent fault
  // and the check sees it, with health_check_recall).
  bool health_check_drains(MachineId m);
  void start_repair(MachineId m);
  // A repair ends (start_repair's token: the machine, fault cleared, cured): the machine
  // comes free.
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
  // Per machine (index = MachineId).
  std::vector<std::pair<std::int64_t, std::int64_t>>
      waits_;         // with a timeline: [start, end) of each wait
  double cross_ = 1;  // step-time multiplier while a TP group leaves its domain
  ProgressModel progress_;
  CheckpointTier tier_ = CheckpointTier::kRemote;
  // The plan in force blocks for job.checkpoint_mfu_loss x its interval, above its own
  // blocking (Attributed::mfu_checkpoint).
  bool mfu_blocking_ = false;
  bool oracle_ = false;
  int code_version_ = 0;

  std::map<std::string, Duration> inspections_;
  bool watch_steps_ = false;  // the policy asked for StepSamples
  std::map<ActionId, RunProbe> probes_;
  std::map<ActionId, std::vector<double>>
      group_seconds_;  // a grouped probe's timings, until delivered
  std::map<ActionId, RunReplay> replays_;
  Mechanism mechanism_ = Mechanism::kNone;
  int good_version_ = 0;
  std::int64_t remote_interval_ =
      Duration::hours(1).ns;  // newest code version that ran without a code fault

  ReplicaGroups replicas_;  // the quorum under fault-tolerant data parallelism

  // Failure prediction (scenario categories' `warning`) and migration (MigrateMachines).
  struct Warned {
    FaultArrival arrival;
    std::uint64_t key = 0;  // the arrival index: the fault's streams
    MachineId machine = kNoMachine;
    std::uint32_t repairs = 0;  // the machine's repairs when warned (the same machine after)
  };
  std::vector<Warned> warned_;          // by kWarnedStrike token
  std::map<MachineId, int> warned_on_;  // warned faults yet to strike, by machine
  std::vector<Rng> false_rng_;          // per category: its false warnings' stream
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
