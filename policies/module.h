// Policy modules: the inside contract of policies/ (docs/architecture.md §7).
//
// A stack (a Policy, such as byterobust) composes modules, one per concern, chosen by
// name through its choice parameters; a module is one algorithm with a versioned
// identity, in the spirit of leveldb's FilterPolicy. Modules never see a World: they get
// what they need as arguments and answer with values, so they are tested with synthetic
// inputs, without a clock, and run unchanged under every backend.
//
// Six concerns are modules. A Detector turns the step samples a backend delivers
// (observations: step, step time, loss, NaN) into findings (a stall, slow steps, a metric
// anomaly); it is given the time with every call and never reads a clock. A Localizer is
// a search for culprits run as a conversation of tests (begin, then answer after each
// outcome), pure in the torchft sense: no World, no clock, no randomness. A Recovery says
// how evicted machines are replaced; a CheckpointPlanner how the job checkpoints; a
// FailSlowPolicy how a located straggler is handled (tolerated, worked around, evicted); a
// StopVerdict whether failures follow the code or the data, so the run should stop.
#pragma once

#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "policies/api/action.h"
#include "policies/api/cluster_view.h"
#include "policies/api/event.h"
#include "policies/api/policy.h"

namespace faultline::policies {

enum class ModuleKind : std::uint8_t {
  kDetection,
  kLocalization,
  kRecovery,
  kCheckpoint,
  kFailSlow,
  kVerdict
};
inline constexpr ModuleKind kModuleKinds[] = {ModuleKind::kDetection, ModuleKind::kLocalization,
                                              ModuleKind::kRecovery,  ModuleKind::kCheckpoint,
                                              ModuleKind::kFailSlow,  ModuleKind::kVerdict};
const char* module_kind_name(ModuleKind k);
struct ModuleInfo;
// What live mode cannot run of a built-in module (docs/live-mode.md, "Which modules run
// live"), one line for `faultline policies`; empty when it runs live as in the simulator.
// `live_refusal` is why a live config choosing it is refused at its start (nothing when
// it is not): `replica_groups` says the job trains in replica groups (job.replica_groups),
// `in_place` that its ranks re-form their process group in place (job.in_place).
// A table rather than a ModuleInfo field, which would change the plugin ABI.
std::string live_limit(std::string_view kind, std::string_view name);
std::optional<std::string> live_refusal(std::string_view kind, std::string_view name,
                                        bool replica_groups, bool in_place = false);
// "detection realtime v1, localization replay v2, ...": the modules that decide, for a
// stack's decision log, so that a log says what decided.
std::string module_list(std::initializer_list<const ModuleInfo*> modules);

// A policy module that failed at its own job: a Python module that raised, answered the
// wrong type or outlasted its deadline (plugins/python_modules.h). The module is the user's
// input, like a scenario, so the simulator stops with this one line and exit 2, not as a
// crash of its own; the fork pool carries it from a replica's process to the parent.
struct ModuleError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Identity of one algorithm. As with a leveldb FilterPolicy name, `version` changes
// whenever the same inputs can yield different decisions.
struct ModuleInfo {
  ModuleKind kind = ModuleKind::kLocalization;
  std::string name;  // its choice name in a stack's parameters ("replay")
  std::string version;
  std::string summary;  // one line, for `faultline policies`
  // Every parameter it reads, and only those: its factory is handed just these (with the
  // stack's values), and reading any other throws, so that a module is tested and reused
  // without a stack. A stack that composes modules declares them as its own (a name
  // several modules declare is shared, with the same spec), so scenarios set and validate
  // them like any other parameter ("policy.params.my_group_size").
  std::vector<ParamSpec> params = {};
  // The World facilities (policies/api/policy.h) a stack may use for this module: what the
  // module asks for (a Recovery's acquisitions, a Localizer's tests, a planner's checkpoint
  // tier) and what a stack does on what it reports (a Detector's stalls and slow steps are
  // what the stack captures stacks for). A stack that composes modules declares, for each
  // choice, what the module chosen declares (add_module_uses), so that a scenario field
  // only an unused facility reads is refused. nullopt: it declares nothing (a plugin's
  // module, by default) and may use every facility.
  std::optional<std::vector<Facility>> uses = std::nullopt;
};

// ---------------------------------------------------------------- detection

// What a detector concluded from the samples (the stack acts on it).
// No step completed for `stalled_for`; `last_step` is the last step seen.
struct ProgressStalled {
  std::int64_t last_step = 0;
  Duration stalled_for;
};
// Steps took `ratio` x the healthy baseline for the declared time.
struct StepTimeHigh {
  double ratio = 1;
};
// A training-metric anomaly: any NaN, or a jump in loss or gradient norm.
struct MetricAnomaly {
  std::string metric;  // "loss", "grad_norm"
  double ratio = 0;    // value / recent mean (infinity for NaN)
  bool nan = false;
  std::int64_t step = -1;  // the step of the sample that showed it; -1: unknown
};
using Finding = std::variant<ProgressStalled, StepTimeHigh, MetricAnomaly>;
std::string describe(const Finding& f);

// Stall, slow-step, NaN and loss-jump detection, run unchanged under every backend. The
// stack feeds it the job's StepSamples while the job runs and calls check() when the
// time next_check() asked for has come; every call carries the time, so a detector is
// tested with a synthetic sample stream and no clock.
class Detector {
 public:
  virtual ~Detector() = default;
  virtual const ModuleInfo& info() const = 0;
  // The samples it needs (WatchSteps), or nullopt when it needs none: the stack then
  // relies on process exits and the collective timeout alone (no inspections either).
  virtual std::optional<WatchSteps> watch() const = 0;
  // The job (re)started at `now`, restored at `step`: everything about the run before is
  // forgotten except what spans restarts (a step-time baseline).
  virtual void restart(Instant now, std::int64_t step) = 0;
  // A sample arrived at `now`. Returns what it concludes, if anything.
  virtual std::optional<Finding> observe(const StepSample& s, Instant now) = 0;
  // Time passed without samples; called at (or after) next_check().
  virtual std::optional<Finding> check(Instant now) = 0;
  // When check() should next run, or Instant::max() when nothing is due.
  virtual Instant next_check() const = 0;
  // The real-time inspections it runs beside the samples (ByteRobust §4.1), enabled with
  // watch(); none by default.
  virtual std::vector<EnableInspection> inspections() const { return {}; }
  // An inspection alert seen at `now`: true when it calls for evicting its machine (a GPU
  // or host alert at once; a network alert, links flapping, only once it repeats).
  virtual bool alert(const InspectionAlert& a, Instant now) { return false; }
};

// A test a localizer asks the stack to run: a probe on machines, or a replay on groups.
using LocalizationTest = std::variant<RunProbe, RunReplay>;
// What a localizer concluded.
struct Located {
  std::vector<SlotId> evict;   // slots to evict; empty: nothing found (the stack reattempts)
  bool code_at_fault = false;  // e.g. every replay group failed: the stack rolls the code back
  // What an eviction counts as (resolved_by): a built-in's name, or the module's own
  // (Mechanism::named(info().name)), which the stack also takes as evidence against the
  // machines it names (as replay's).
  Mechanism credit = Mechanism::kReplay;
  std::string reason;  // the eviction's, rollback's or reattempt's reason
};
using LocalizationStep = std::variant<LocalizationTest, Located>;

class Localizer {
 public:
  virtual ~Localizer() = default;
  virtual const ModuleInfo& info() const = 0;
  // Starts a search for the machine(s) behind a failure that no stop-time test placed;
  // `why` is the stack's reason, carried into the first test. Returns the first test to
  // run, or at once a verdict. `view` is valid during the call only.
  virtual LocalizationStep begin(const std::string& why, const ClusterView& view) = 0;
  // REQUIRES: the last step was a test and `outcome` is its ProbeResult or ReplayResult.
  // Returns the next test or the verdict.
  virtual LocalizationStep answer(const Event& outcome, const ClusterView& view) = 0;
  // Whether it can place a slow machine as well as a broken one (its tests time what they
  // run): the stack then hands it a slowdown that stack aggregation could not place,
  // instead of giving up on the slowdown until the next restart.
  virtual bool places_slowdowns() const { return false; }
};

// How evicted machines are replaced (warm standbys, cold machines, the whole job).
class Recovery {
 public:
  virtual ~Recovery() = default;
  virtual const ModuleInfo& info() const = 0;
  // What to set up before the job starts (a standby pool), if anything.
  virtual std::optional<SetStandbyPool> start(const ClusterView& view) const {
    return std::nullopt;
  }
  // The request that refills `slots`, credited to `credit`.
  virtual AcquireMachines replace(const std::vector<SlotId>& slots, const std::string& why,
                                  Mechanism credit) const = 0;
  // What becomes of a machine evicted on evidence of its own fault (not as collateral of
  // an over-eviction): the module counts the machine's strikes and answers.
  struct Strike {
    bool retire = false;  // it leaves the fleet for good (EvictMachines::retire), not repaired
    bool avoid = false;   // from now on the scheduler hands it out last (AvoidMachines)
  };
  virtual Strike struck(MachineId m) { return {}; }
  // Every machine it asked to be handed out last so far (AvoidMachines carries them all).
  virtual MachineSet avoided() const { return {}; }
  // Fault-tolerant data parallelism (FT-HSDP, torchft): the replica groups the job runs in
  // (EnableReplicaGroups), so that a failed replica drops out while the others train; the
  // stack refills the dropped replica's evicted slot through replace() and rejoins it.
  // nullopt (the default): every failure stops the job.
  virtual std::optional<EnableReplicaGroups> replica_groups(const ClusterView& view) const {
    return std::nullopt;
  }
  // Whether the stack's restarts after a failure are in place (StartJob::in_place,
  // FlashRecovery): only the replaced ranks re-initialise, the survivors keep their state.
  // The stack still starts afresh where that makes no sense (the first start, after a
  // requeue, after a metric anomaly); false: every restart restarts every rank.
  virtual bool restarts_in_place() const { return false; }
  // A failure predictor warned of machine w.machine, in the job (the stack asks only while
  // the job trains): the migration to run now (TrainMover: move the machine's work to a
  // warm standby before it fails), or nothing to let the failure come. `view` is valid
  // during the call only.
  virtual std::optional<MigrateMachines> migrate(const FailureWarning& w, const ClusterView& view) {
    return std::nullopt;
  }
};

// How the job checkpoints: asked at the start, and told of every interruption (adaptive
// planners re-plan from the interruptions they saw).
class CheckpointPlanner {
 public:
  virtual ~CheckpointPlanner() = default;
  virtual const ModuleInfo& info() const = 0;
  virtual SetCheckpointPlan plan(const ClusterView& view) const = 0;
  // At every interruption (when the stack stops the job, before it restarts it), with
  // what the stack has seen of the job's runs so far: how many ended in an interruption
  // (a crash, a hang, a stop to replace machines or update code) and how long the job ran
  // in all. An adaptive planner may answer a new plan, which applies from the next start
  // on (live mode hands it to the ranks at their next launch); a fixed plan answers nothing.
  virtual std::optional<SetCheckpointPlan> replan(int interruptions, Duration running,
                                                  const ClusterView& view) {
    return std::nullopt;
  }
};

// ---------------------------------------------------------------- fail-slow handling

// How a located straggler is handled, in levels of growing cost and effect (Greyhound /
// FALCON, ATC'25): tolerate it, rebalance micro-batches away from its data-parallel
// replica, reconfigure its pipeline (MitigateSlowdown), evict it (checkpoint-restart).
enum class SlowdownLevel : std::uint8_t { kTolerate, kRebalance, kReconfigure, kEvict };
const char* slowdown_level_name(SlowdownLevel l);  // "tolerate", "rebalance", ...

// The stack tells it of a straggler once its slot is known, then asks again at the time
// it names, and passes on how slow steps are while it tracks one. Pure: the time comes
// with every call.
class FailSlowPolicy {
 public:
  virtual ~FailSlowPolicy() = default;
  virtual const ModuleInfo& info() const = 0;
  // Steps have run `ratio` x their healthy time since `since` (when the detector said so);
  // at `now` the stack located `machine`, in `slot`. Returns the level to apply now
  // (kTolerate: none yet). The same machine located again after stopped() is the same
  // straggler: the ladder resumes at the level it had reached (to be applied again: a
  // restart undid it). `view` is valid during the call only.
  virtual SlowdownLevel located(SlotId slot, MachineId machine, double ratio, Instant since,
                                Instant now, const ClusterView& view) = 0;
  // When to be asked again (check), or Instant::max() when nothing is due.
  virtual Instant next_check() const = 0;
  // At (or after) next_check(): the level to apply now, or nullopt to stay.
  virtual std::optional<SlowdownLevel> check(Instant now) = 0;
  // The job stopped at `now` with a straggler tracked (a restart lays the job out afresh,
  // undoing any workaround): its clock stops until the straggler is located again.
  virtual void stopped(Instant now) {}
  // The backend cannot apply `level`, the one it last answered (live mode has no
  // MitigateSlowdown): the level before stays in force, and from now on, for every
  // straggler, it plans without that level (next_check() and check() then answer another).
  virtual void refused(SlowdownLevel level) {}
  // A step time `ratio` x healthy, seen while it tracks a straggler: true when steps are
  // faster than the level in force allows, so the straggler is gone (it forgets it, and
  // so does the stack).
  virtual bool recovered(double ratio) = 0;
};

// ---------------------------------------------------------------- stop verdict

// What the stack has seen, at an interruption, of how the job keeps failing.
struct Recurrence {
  // Identical incidents in a row, this one included: the same NaN at the same step, or
  // the same crash (signature, rank) after the same step on one machine after another,
  // the tests on the named rank's neighbours passed. 0: the stack does not count this
  // interruption as such a recurrence (it asks about progress alone).
  int identical = 0;
  // Runs in a row, this one included, that got no further than the furthest step any run
  // before them reached (by their step samples and the step their failure reported).
  int runs_without_progress = 0;
};
enum class Verdict : std::uint8_t {
  kCarryOn,   // the stack's own diagnosis goes on
  kRollBack,  // roll the code back (the last resort before stopping)
  kStop,      // EndRun "code_or_data": do not requeue; page people
};
const char* verdict_name(Verdict v);  // "carry_on", "roll_back", "stop"

// "Stop, don't requeue" (NVIDIA's resiliency extension, exit code 93 / its no-progress
// stop; ByteRobust's escalation of identical incidents): when failures follow the code
// or the data, restarting burns the cluster. The stack asks at every interruption, before
// its own diagnosis, and at each identical recurrence it counts. Pure and stateless: the
// stack keeps the counts.
class StopVerdict {
 public:
  virtual ~StopVerdict() = default;
  virtual const ModuleInfo& info() const = 0;
  virtual Verdict judge(const Recurrence& r) const = 0;
};

// Modules by kind and name. Explicit, like Registry: builtin.cc adds one line per module;
// there are no static constructors. Insertion order is kept: a stack's choice list (and
// so its default, the first) follows it.
class ModuleRegistry {
 public:
  // Each builds a module from the values of the parameters its ModuleInfo declares:
  // make_* takes them from the stack's resolved parameters and hands it nothing else (a
  // module is tested and reused without a stack, so it reads no knob it does not declare).
  using DetectorFactory = std::function<std::unique_ptr<Detector>(const Params&)>;
  using LocalizerFactory = std::function<std::unique_ptr<Localizer>(const Params&)>;
  using RecoveryFactory = std::function<std::unique_ptr<Recovery>(const Params&)>;
  using CheckpointFactory = std::function<std::unique_ptr<CheckpointPlanner>(const Params&)>;
  using FailSlowFactory = std::function<std::unique_ptr<FailSlowPolicy>(const Params&)>;
  using VerdictFactory = std::function<std::unique_ptr<StopVerdict>(const Params&)>;

  // Each throws std::invalid_argument when (kind, name) is already registered, or when
  // info.kind does not match the factory.
  void add(ModuleInfo info, DetectorFactory make);
  void add(ModuleInfo info, LocalizerFactory make);
  void add(ModuleInfo info, RecoveryFactory make);
  void add(ModuleInfo info, CheckpointFactory make);
  void add(ModuleInfo info, FailSlowFactory make);
  void add(ModuleInfo info, VerdictFactory make);
  // Adds every module of `other`, in its order; throws std::invalid_argument, adding
  // nothing, when one of them is registered here already.
  void merge(const ModuleRegistry& other);
  // Every module, in registration order.
  std::vector<const ModuleInfo*> all() const;
  // The modules of one kind, in registration order.
  std::vector<const ModuleInfo*> of(ModuleKind kind) const;
  std::vector<std::string> names(ModuleKind kind) const;
  const ModuleInfo* find(ModuleKind kind, std::string_view name) const;
  // Requires a registered module `name` of the kind; throws std::invalid_argument otherwise.
  std::unique_ptr<Detector> make_detector(std::string_view name, const Params& params) const;
  std::unique_ptr<Localizer> make_localizer(std::string_view name, const Params& params) const;
  std::unique_ptr<Recovery> make_recovery(std::string_view name, const Params& params) const;
  std::unique_ptr<CheckpointPlanner> make_checkpoint(std::string_view name,
                                                     const Params& params) const;
  std::unique_ptr<FailSlowPolicy> make_failslow(std::string_view name, const Params& params) const;
  std::unique_ptr<StopVerdict> make_verdict(std::string_view name, const Params& params) const;

 private:
  struct Entry {
    ModuleInfo info;
    std::variant<DetectorFactory, LocalizerFactory, RecoveryFactory, CheckpointFactory,
                 FailSlowFactory, VerdictFactory>
        make;
  };
  void insert(ModuleInfo info, ModuleKind want, decltype(Entry::make) make);
  // Builds module (kind, name) with its factory of type F, handing it only the values of
  // the parameters its ModuleInfo declares; throws std::invalid_argument when there is none.
  template <class F>
  std::invoke_result_t<const F&, const Params&> build(ModuleKind kind, std::string_view name,
                                                      const Params& params) const;
  std::vector<Entry> entries_;
};

// A stack's choice parameter among the registered modules of `kind`, in registration
// order (the first is the default); its help is `help` followed by each module's name and
// summary, generated from the registry (plugins' modules included).
ParamSpec module_choice(const ModuleRegistry& r, ModuleKind kind, std::string name,
                        std::string help);
// Appends to a stack's parameters those its modules declare (ModuleInfo::params) that it
// does not declare itself, in registration order, each read when the choice of its kind
// picks a module that declares it ("recovery=standby"; each condition once). One the
// stack declares with no condition stays always read.
void add_module_params(const ModuleRegistry& r, std::vector<ParamSpec>& params);
// Appends to a stack's facilities those its modules may use (ModuleInfo::uses; every
// facility for a module that declares none), each under the condition that the choice of
// its kind picks that module ("recovery=standby"; each condition once). One the stack
// uses with no condition stays always used.
void add_module_uses(const ModuleRegistry& r, std::vector<FacilityUse>& uses);

}  // namespace faultline::policies
