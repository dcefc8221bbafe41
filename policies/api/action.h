// What a policy may ask a backend to do.
//
// A closed variant of small plain structs, so actions log, replay and compare as
// values. Every action carries a human-readable reason. The outcome arrives later as
// an Event (MachinesReady, JobStarted, ActionFailed, ...) tagged with the ActionId that
// World::act returned, never during act(). A backend that cannot do an action answers
// ActionFailed. What each action yields, and every ActionFailed case, is written beside
// it and pinned on SimWorld and LiveWorld by tests/conformance. The cases every World
// shares are decided, and worded, in one place: refusal() in policies/api/refusals.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iosfwd>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "policies/api/ids.h"
#include "policies/api/time.h"

namespace faultline {

// What resolved an incident, for metrics (resolved_by, incidents.csv's `resolution`): a
// name, set on the action that resolves it. The built-in stacks credit the names below, as
// constants (a typo is a compile error); a module that resolves incidents its own way
// credits its own name (Mechanism::named(info().name)), with no list to add it to. kNone
// ("none") credits nothing. Cheap to copy: a pointer to a name that lives as long as the
// process (a literal, or a name interned by named()) and a hash of it; compared by the
// name's text, which two different names rarely need (their hashes differ): the stacks
// compare credits on every start and eviction.
class Mechanism {
 public:
  constexpr Mechanism() = default;  // kNone
  // A name that is a literal (or another array of static storage).
  template <std::size_t N>
  constexpr explicit Mechanism(const char (&name)[N]) : name_(name), hash_(hash_of(name)) {}
  // Any name (a module's, one read from an event log): interned, once per distinct name.
  static Mechanism named(std::string_view name);

  constexpr const char* c_str() const { return name_; }
  std::string_view name() const { return name_; }
  friend bool operator==(Mechanism a, Mechanism b) {
    return a.name_ == b.name_ || (a.hash_ == b.hash_ && std::strcmp(a.name_, b.name_) == 0);
  }

  static const Mechanism kNone;
  static const Mechanism kRealtimeEviction;  // eviction on a real-time inspection alert
  static const Mechanism kStopTimeEviction;  // eviction after stop-time tests
  static const Mechanism kReattempt;         // restart as is (transient fault)
  static const Mechanism kRollback;          // code rolled back
  static const Mechanism kReplay;            // eviction after dual-phase replay or bisection
  static const Mechanism kOverEviction;      // analyzer: whole parallel group evicted
  static const Mechanism kHotUpdate;         // code change applied in place
  static const Mechanism kRequeue;           // whole job requeued
  static const Mechanism kReschedule;        // evicted machines replaced cold
  static const Mechanism kOracle;            // perfect knowledge (baseline)
  // Eviction of the machine that crash logs named again and again.
  static const Mechanism kAttributedEviction;
  // Its replica dropped out and rejoined while the others trained.
  static const Mechanism kReplicaDrop;

 private:
  // FNV-1a (32 bits) of the name's text (up to its terminating NUL).
  static constexpr std::uint32_t hash_of(const char* name) {
    std::uint32_t h = 2166136261u;
    for (; *name != '\0'; ++name) h = (h ^ static_cast<unsigned char>(*name)) * 16777619u;
    return h;
  }

  const char* name_ = "none";
  std::uint32_t hash_ = hash_of("none");
};
inline constexpr Mechanism Mechanism::kNone{};
inline constexpr Mechanism Mechanism::kRealtimeEviction{"realtime_eviction"};
inline constexpr Mechanism Mechanism::kStopTimeEviction{"stop_time_eviction"};
inline constexpr Mechanism Mechanism::kReattempt{"reattempt"};
inline constexpr Mechanism Mechanism::kRollback{"rollback"};
inline constexpr Mechanism Mechanism::kReplay{"replay"};
inline constexpr Mechanism Mechanism::kOverEviction{"analyzer_over_eviction"};
inline constexpr Mechanism Mechanism::kHotUpdate{"hot_update"};
inline constexpr Mechanism Mechanism::kRequeue{"requeue"};
inline constexpr Mechanism Mechanism::kReschedule{"reschedule"};
inline constexpr Mechanism Mechanism::kOracle{"oracle"};
inline constexpr Mechanism Mechanism::kAttributedEviction{"attributed_eviction"};
inline constexpr Mechanism Mechanism::kReplicaDrop{"replica_drop"};
// The built-in stacks' credits (not kNone), in the order `sim compare` lists them.
inline constexpr Mechanism kBuiltinMechanisms[] = {Mechanism::kRealtimeEviction,
                                                   Mechanism::kStopTimeEviction,
                                                   Mechanism::kReattempt,
                                                   Mechanism::kRollback,
                                                   Mechanism::kReplay,
                                                   Mechanism::kOverEviction,
                                                   Mechanism::kHotUpdate,
                                                   Mechanism::kRequeue,
                                                   Mechanism::kReschedule,
                                                   Mechanism::kOracle,
                                                   Mechanism::kAttributedEviction,
                                                   Mechanism::kReplicaDrop};
inline const char* mechanism_name(Mechanism m) { return m.c_str(); }
std::ostream& operator<<(std::ostream& o, Mechanism m);
// One of the built-in stacks' credits, or kNone (else a module's own name).
inline bool is_builtin(Mechanism m) {
  if (m == Mechanism::kNone) return true;
  for (Mechanism b : kBuiltinMechanisms)
    if (m == b) return true;
  return false;
}

// Stops the job (kills every rank); JobStopped follows, also when nothing was running.
struct StopJob {
  std::string reason;
};
// Starts the job on the machines now placed in its slots, restoring the newest
// complete checkpoint; JobStarted follows once restore and init are done (StartFailed
// if it fails). ActionFailed: after an EndRun, the job is running ("job already
// running": stop it first; a start already under way is replaced), or a slot has no
// machine; in live mode, a `version` not in the config.
struct StartJob {
  std::string reason;
  Mechanism mechanism = Mechanism::kNone;
  // The code version to start (a held non-urgent update merged into a recovery's
  // restart); empty: the version that ran last. The credit stays `mechanism`'s. (Its
  // initialiser keeps StartJob{"why"} free of -Wmissing-field-initializers.)
  std::string version = {};
  // An in-place restart (FlashRecovery, arXiv 2509.03047): only the ranks of machines that
  // joined since the job last ran (or, with none, the failed rank's) re-initialise and fetch
  // their state from a data-parallel peer's memory; the survivors keep their processes,
  // their state at the last completed step and their communicators, so at most the step in
  // flight is lost. A backend that cannot (no peer holds a replaced rank's state, the
  // processes are gone after a requeue) starts the job as usual and notes why; live mode
  // always does (LiveWorld).
  bool in_place = false;
};
// Removes machines from the job (they go to repair); their slots become empty and the
// job, if running, is broken. Machines not in a slot (standbys, evicted ones) are left
// as they are. With `retire`, they leave the fleet for good instead of going to repair
// (lemon retirement: the simulator never hands them out again; live mode lists them as
// retired, which only an operator undoes). No event follows.
struct EvictMachines {
  MachineSet machines;
  std::string reason;
  Mechanism mechanism = Mechanism::kNone;
  bool retire = false;
};
enum class AcquireMode : std::uint8_t {
  kRequeue,     // kill everything, reschedule the whole job (every slot refilled)
  kReschedule,  // cold machines from the scheduler for the empty slots only
  kStandby,     // warm standbys from the pool for the empty slots (shortfall: as kReschedule)
  kOracle,      // unlimited ready spares, no delay (upper-bound baseline only)
};
// Fills the given slots (empty ones if the list is empty) with machines;
// MachinesReady follows when they are placed and their environment is ready, listing
// the machines newly placed (empty when no slot needed filling). A standby shortfall is
// filled as kReschedule fills slots: cold machines from the scheduler in the simulator;
// live mode waits, as in a scheduler's queue, until enough machines are parked.
// ActionFailed: kOracle anywhere but the simulator.
// same_domain (kStandby): each slot's machine comes from the slot's own NVLink domain when
// one is free there (a standby parked in it, else a spare tray of its rack, woken like a
// standby), so a tensor-parallel group wider than a machine stays on NVLink; the others as
// kStandby fills them.
struct AcquireMachines {
  AcquireMode mode = AcquireMode::kReschedule;
  std::vector<SlotId> slots;
  std::string reason;
  Mechanism mechanism = Mechanism::kNone;
  bool same_domain = false;
};
enum class CheckpointTier : std::uint8_t { kRemote, kMemory, kMemoryWithPeer };
// How the job checkpoints from now on: every `interval` of training (zero: every step),
// blocking training for `blocking`. No event follows. The simulator uses the interval as
// given; live mode rounds it up to whole steps of the job's nominal step time (at least
// one), from the next launch. kMemoryWithPeer keeps the newest copy in host memory and a backup on
// a peer outside the machine's TP, PP and DP groups, with a remote copy every `remote_interval` as
// the last resort.
struct SetCheckpointPlan {
  Duration interval;
  Duration blocking;
  CheckpointTier tier = CheckpointTier::kRemote;
  std::string reason;
  Duration remote_interval = Duration::hours(1);
};
// Asks for StepSample events while the job runs: at most one per `every` (zero: one per
// step), plus one at once for a NaN. A backend whose samples are promises (the simulator's
// steady samples) sends fewer: one at every start, then one per change of step rate.
struct WatchSteps {
  Duration every = Duration::zero();
  std::string reason;
};
// Requests perfect fault knowledge (OracleFault events: every fault as it strikes, every
// true failure warning as it is given) and the upper bound's ready spares: from then on a
// MigrateMachines takes fresh machines at once instead of parked standbys, and a replica
// drop's ReplicaDropped comes at the drop, not when its log shows. Only the simulator grants
// it (no event), and only for the oracle upper bound; live mode answers ActionFailed.
struct EnableOracle {
  std::string reason;
};
struct Note {
  std::string text;
  // > 0: this note reports the n-th diagnostic round in a row that found nothing for
  // the same failure (a stack declares its maximum; backends keep the worst run for
  // metrics). 0: an ordinary note.
  int fruitless_round = 0;
};
// Real-time inspections: the backend reports InspectionAlert for problems of `kind`
// ("gpu", "nic", "host", "switch", "storage") it finds, checking every `interval`.
// ActionFailed: an interval that is not positive.
struct EnableInspection {
  std::string kind;
  Duration interval;
  std::string reason;
};
enum class ProbeKind : std::uint8_t {
  kGpuDiag,         // EUD/DCGM-like GPU diagnostics on each machine
  kIntraAllToAll,   // all-to-all bandwidth among the GPUs of each machine
  kInterAllGather,  // all-gather with neighbouring machines over the network
  kBitwise,         // one step of a small reference model, compared bit for bit
  kStress,          // full stress test (baseline localisation)
};
inline constexpr int kProbeKinds = 5;
// Runs a stop-time test on machines; ProbeResult lists those that failed it.
// With `groups` (kInterAllGather only: DLRover's pairwise node check), the all-gather runs
// within each group, all groups at once, instead of across `machines`; ProbeResult then
// also says, per group, whether its collective failed and how long it took, and lists in
// `failed` the machines of the failed groups. ActionFailed: groups for another test, a
// group of fewer than two machines, a machine not in the fleet or in two groups; in the
// simulator, a machine outside the job; in live mode, a group master port above 65535
// (too many groups led from one host).
struct RunProbe {
  ProbeKind test = ProbeKind::kGpuDiag;
  MachineSet machines;
  Duration deadline = Duration::minutes(10);
  std::string reason;
  std::vector<MachineSet> groups = {};
};
// Captures the stacks of every training process; StacksCaptured follows.
struct CaptureStacks {
  std::string reason;
};
// Replays a shortened job on each group of machines concurrently; ReplayResult says
// which groups reproduced the fault.
struct RunReplay {
  std::vector<MachineSet> groups;
  std::string reason;
};
// Restarts the job's processes in place with another code version (no rescheduling;
// a running job is stopped first); JobStarted follows. ActionFailed: after an EndRun, a
// slot has no machine; in live mode, a version not in the config.
struct HotUpdate {
  std::string version;
  std::string reason;
};
// Hot update back to the last code version that ran cleanly (the rollback target: in
// the simulator the newest version that ran without a code fault, in live mode the
// newest that ran 20 steps; the first version if none has). ActionFailed after an EndRun;
// with a slot that has no machine the code is rolled back all the same and only the
// restart is refused (ActionFailed): the code at fault goes whatever the machines.
struct RollBack {
  std::string reason;
};
// Keeps `size` warm standby machines initialised and parked; refills asynchronously.
struct SetStandbyPool {
  int size = 0;
  std::string reason;
};

// Ends the run: the job is stopped and is not started again, whatever comes next
// (StartJob, HotUpdate, RollBack and AcquireMachines then answer ActionFailed). For what
// no restart, eviction or requeue can fix. `verdict` is a stable word for scripts and
// schedulers: "code_or_data" (the same incident recurs wherever the job runs: do not
// requeue). Live mode's controller exits with status 3 after it (kExitEndedRun); the
// simulator counts the replica's run as ended and accounts its remaining time as lost.
struct EndRun {
  std::string verdict;
  std::string reason;
};

// Works around a slow machine without a restart (Greyhound/FALCON's levels 2 and 3):
// kRebalance moves micro-batches from the data-parallel replica that holds `slot` to the
// others; kReconfigure also moves layers from that slot's pipeline stage to the other
// stages of its pipeline (and rebalances). Both last until the job next stops. The job
// pauses while its layout changes (the simulator's diagnosis.rebalance_s and
// reconfigure_s), then runs at the rate straggler_rate() gives (policies/api/cluster_view.h).
// No event follows: the next StepSample shows the new rate. ActionFailed: the job is not
// running, or the slot has no machine; in live mode always (it cannot re-lay a running job).
enum class Mitigation : std::uint8_t { kRebalance, kReconfigure };
struct MitigateSlowdown {
  SlotId slot = 0;
  Mitigation how = Mitigation::kRebalance;
  std::string reason;
};

// Host scoring (AIReSim): from now on the scheduler hands out `machines` last, after every
// other machine it has (replacements and standby refills alike); the list replaces the
// previous one. A preference, not a ban: with nothing else left they are handed out. No
// event follows. Live mode takes standbys for a slot in the same order.
struct AvoidMachines {
  MachineSet machines;
  std::string reason;
};

// Fault-tolerant data parallelism (FT-HSDP, arXiv 2602.00277; torchft): from now on the job
// runs its data-parallel replicas (ClusterView::pp_group_slots) as groups that fail apart. A
// rank's failure drops its replica out of the quorum while the other replicas train on with
// a smaller global batch; every quorum change pauses the job for `quorum_change`. A hung rank
// drops its replica once the quorum's collectives time out (`timeout`). ReplicaDropped
// follows each drop. A failure that would leave fewer than `min_replicas` replicas, and a
// fault that is not confined to one replica (the job's code or data, a job-wide fault, a NaN
// the all-reduce spreads), stops the job as without it; a (re)start brings every replica
// back. No event follows. ActionFailed: min_replicas below 1 or above the data-parallel
// degree; in live mode, until its job library's replica groups are wired to the controller.
struct EnableReplicaGroups {
  int min_replicas = 1;
  Duration quorum_change;
  Duration timeout = Duration::seconds(60);
  std::string reason = {};
};
// Brings a dropped replica back while the job trains (the rejoin at a step boundary): every
// machine of the replica fetches the model and optimizer state from the machine at the same
// place of a live replica (a transfer of job.checkpoint_bytes_per_machine), then the job
// pauses for a quorum change and trains with it again. ReplicaRejoined follows; a replica
// that fails again while rejoining is dropped again (ReplicaDropped). ActionFailed: replica
// groups not enabled, the job not running, the replica not dropped or already rejoining, a
// slot of the replica without a machine.
struct RejoinReplica {
  int replica = 0;
  std::string reason;
};
// Moves machines' work off them while the job trains (TrainMover, arXiv 2412.12636: migration
// before a predicted failure): each machine in `machines` gets a warm standby from the pool;
// its state (job.checkpoint_bytes_per_machine) is copied from the old machine to the standby
// while the job keeps training, then the job pauses for `pause` to swap them (the new machine
// joins the old one's slot, no restart), and the old machine leaves the job for repair as an
// eviction. MachinesReady follows, listing the machines that joined. If the job stops before
// the swap, the migration is abandoned: the standbys go back to the pool, the old machines
// stay, and ActionFailed follows ("job stopped during the migration"). `mechanism` credits an
// incident the move resolves (a slowdown on the machine). ActionFailed at once: the job is not
// running, no machines, a machine not in the job, fewer warm standbys parked than machines
// (nothing is migrated: the policy may evict and replace instead); in live mode always (live
// migration is not implemented).
struct MigrateMachines {
  MachineSet machines;
  std::string reason;
  Mechanism mechanism = Mechanism::kNone;
  Duration pause = Duration::seconds(10);
};

using Action =
    std::variant<StopJob, StartJob, EvictMachines, AcquireMachines, SetCheckpointPlan, WatchSteps,
                 EnableOracle, Note, EnableInspection, RunProbe, CaptureStacks, RunReplay,
                 HotUpdate, RollBack, SetStandbyPool, EndRun, MitigateSlowdown, AvoidMachines,
                 EnableReplicaGroups, RejoinReplica, MigrateMachines>;

// One line for logs, e.g. "evict [12,13] (pp group of 12 holds all outliers)".
std::string describe(const Action& a);
const char* mode_name(AcquireMode m);
const char* tier_name(CheckpointTier t);
const char* probe_name(ProbeKind k);        // for logs: "gpu-diag"
const char* mitigation_name(Mitigation m);  // "rebalance", "reconfigure"
// The snake_case key of a probe kind in scenarios (recall, false_positive), the agent
// protocol and configs: "gpu_diag", "intra_all_to_all", ...
const char* probe_key(ProbeKind k);

}  // namespace faultline
