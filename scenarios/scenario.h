// The scenario: one JSON file that says what cluster, what job, what faults and which
// policy stack to simulate, validated at load time.
//
// Every error names the file, the JSON path and what was expected, in one line, e.g.
//   bad.json: $.job.pp: expected an integer >= 1, got -3
// Unknown keys are errors. `--set path=value` overrides apply to the JSON document
// before validation, so they are checked exactly like the file.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "policies/api/cluster_view.h"
#include "policies/api/registry.h"
#include "traces/arrivals.h"

namespace faultline::scenarios {

// Thrown for every invalid input; what() is the one-line message.
class ScenarioError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct JobSpec {
  double step_time_s = 10;
  double checkpoint_bytes_per_machine = 0;  // model + optimizer state held by one machine
  double image_bytes = 0;                   // container image pulled by a fresh machine
  double init_s = 0;                        // process launch and communicator init
  // The same for the run's first start, before the job has ever trained: a fresh launch has
  // no processes to stop and no ports or files to wait for, so it can differ from a restart
  // (live PyTorch jobs: 2.2 s against 3.7 s; `sim replay` calibrates the two apart).
  // Default: init_s.
  double first_init_s = 0;
  // Per machine (re)started, added to init_s at a whole-job start (init_s +
  // init_per_machine_s x machines): rendezvous and communicator setup that grow with the
  // world size (ByteRobust Table 7: a hot update, every rank restarted in place, takes 46 s at
  // 128 machines and 65 s at 1,024, ~0.02 s per machine; docs/domain.md §5). 0: init_s alone.
  double init_per_machine_s = 0;
  // The per-job part of an in-place restart (StartJob::in_place, FlashRecovery): the
  // survivors suspended, the communicators rebuilt incrementally; the restarted machines
  // add init_per_machine_s each. Default: init_s.
  double inplace_init_s = 0;
  double collective_timeout_s = 600;  // NCCL watchdog: a hung job exits after this (0 = never)
  // Share of training throughput an every-step in-memory checkpoint with a peer backup
  // costs while its D2H copy, serialization and peer send overlap with training: more
  // than its blocking time alone (ByteRobust Table 8 leaves 99.11-99.71% of MFU; docs/domain.md
  // §5). Charged as checkpoint time, at least the plan's own blocking; a plan asking for
  // zero blocking (the oracle's idealised save) is taken at its word. 0 = blocking only.
  double checkpoint_mfu_loss = 0;
  // Wall time after every (re)start, counted from training resumed, before the job runs
  // at full speed again: communicators set up on first use, data loaders refilled,
  // allocator and kernel caches warmed. It makes no progress and a fault during it
  // costs it again. The published per-incident times (docs/domain.md §4-5) itemise none of it;
  // the ByteRobust job scenarios fit it (docs/scenarios-and-faults.md, "The dense job's figures").
  // 0 = none.
  double restart_warmup_s = 0;
  // Replica groups (EnableReplicaGroups): the worth of a step that `live` of the job's dp
  // replicas trained, per live replica, relative to a step of all of them. Progress runs at
  // partial_replica_rate x live / dp while replicas are missing: 1 (our default) is linear in
  // live replicas, every sample worth as much in a smaller global batch as in a full one
  // (FT-HSDP, arXiv 2602.00277, reports loss curves unharmed by dropped replicas); below 1 is
  // a convergence penalty for the smaller batch (the batch-size/learning-rate coupling
  // McCandlish et al., arXiv 1812.06162, quantify), a parameter to study, not a published figure.
  double partial_replica_rate = 1;
  // An ended run (EndRun: "stop, don't requeue") pages the on-call engineers: this long
  // after the page they have fixed what follows the code or the data (every code or data
  // bug still active ends) and requeue the job, whose stack starts afresh as a relaunched
  // controller does. A run ended on a wrong verdict waits as long for nothing. Not
  // published: our assumption, stated. 0 = nobody comes: the rest of the horizon is lost.
  double on_call_fix_h = 2;
  // Step-time multiplier while a tensor-parallel group wider than a machine has a machine
  // outside its NVLink domain (its all-reduces cross the scale-out network instead of the
  // NVSwitches). Not published: our assumption, stated per scenario. 1 = no penalty.
  double cross_domain_slowdown = 1;
  // Fixed wall-clock window (work_days == 0): the run lasts horizon_days and ETTR is
  // productive time over it. A job of fixed work (work_days > 0): the run ends when that
  // many days of productive training are done, and reports its time to train; horizon_days
  // is then a cap (a replica it stops first is censored), by default kWorkCapFactor x the work.
  double horizon_days = 90;
  double work_days = 0;
  bool horizon_given = true;  // false: horizon_days is the default cap of a job of fixed work
};
inline constexpr double kWorkCapFactor = 20;  // default cap: ETTR 5% still finishes

// The cluster scheduler's response times (an environment property shared by all stacks).
struct SchedulerSpec {
  double requeue_base_s = 360;  // whole-job requeue
  double requeue_per_machine_s = 0.18;
  double reschedule_base_s = 120;  // cold replacement of a few machines
  double reschedule_per_machine_s = 2;
  // Where the warm standby pool refills from: the free pool, as cold machines through the
  // scheduler (kFreePool, faultline's default), or only from machines coming back from
  // repair, the pool filled from the free pool only by the scheduler's own host selection
  // (the job's start and a replacement beyond the pool: AIReSim's scheduler.py).
  enum class Refill : std::uint8_t { kFreePool, kRepaired } standby_refill = Refill::kFreePool;
  // How the scheduler picks a machine from the free pool: at random (AIReSim's
  // DefaultHostSelection, our default) or the one that failed least often so far
  // (AIReSim's FewestFailuresFirst; ties at random).
  enum class Pick : std::uint8_t { kRandom, kFewestFailures } host_selection = Pick::kRandom;
  // Share of machines with an active persistent fault that the scheduler's node health
  // check drains before handing a machine to the job (a requeue's re-check of the job's
  // own machines, and every draw from the free pool). 1 = all of them; below 1 a requeue
  // or a replacement can land on a broken machine (a repair that failed). Not published:
  // our assumption, stated.
  double health_check_recall = 1;
};

// What happens to machines after they leave the job, and how unequal machines are
// (AIReSim, arXiv 2603.07041, docs/domain.md §9). An evicted machine goes to automatic repair
// (`auto_h`); a broken one is handed on to manual repair with probability `to_manual`
// (taking its fault category's `repair_h`); a repair fails with `auto_fail` or
// `manual_fail` and the machine comes back with its fault still in place. Repaired
// machines join the free pool the scheduler draws replacements from (`spare_machines`
// besides the job and its standbys at the start; the wider cluster supplies a fresh
// machine when the pool is empty). A machine that a fault struck `retire_after` times is
// retired for good. `bad_fraction` of all machines are "bad": in machine-scope hardware
// categories they fail `bad_rate_factor` times as often as the others, the categories'
// rates staying the population mean.
//
// Off by default (bad_fraction 0): a category's rate is then exactly the rate every machine
// of the job sees, as the published in-job counts it is calibrated on are. With bad
// machines, the rates are the fleet's mean at the start (bad and good machines as drawn),
// not the rate the job sees later (bad machines leave it, are retired, cured or appear):
// the result reports each category's realized in-job rate beside its stated one.
struct RepairSpec {
  double auto_h = 2;         // AIReSim: automatic repair 2 h (mean)
  double to_manual = 0.8;    // AIReSim: P(automatic -> manual) 0.8
  double auto_fail = 0.4;    // AIReSim: automatic repair fails 40%
  double manual_fail = 0.2;  // AIReSim: manual repair fails 20%
  int retire_after = 3;      // not published (AIReSim studies thresholds): our default
  double bad_fraction = 0;   // off; AIReSim: 15% of servers are bad
  // AIReSim's config comment says 5x; its code gives random + 5 x random = 6x (server.py).
  double bad_rate_factor = 5;
  // Chance a successful repair cures a bad machine for good (AIReSim: 1, server.py
  // complete_repair; faultline's default 0: "bad" is a property of the machine).
  double cure_bad = 0;
  // What a failed repair leaves: the fault in place (kFault, faultline's default: the
  // scheduler's health check drains the machine again), or the machine as it was before
  // it failed, its fault gone and a bad machine still bad (kBadness: AIReSim).
  enum class Leaves : std::uint8_t { kFault, kBadness } failed_repair_leaves = Leaves::kFault;
  // Good machines turn bad at this rate (hardware ageing). 0: never. AIReSim's optional
  // regeneration converts 10% x bad_fraction of the good servers every 30 days.
  double turn_bad_per_machine_day = 0;
  // Repair durations (auto_h, a category's repair_h) as their mean: fixed (our default),
  // exponential (AIReSim) or lognormal with sigma repair_sigma (of the log).
  enum class Dist : std::uint8_t { kFixed, kExponential, kLognormal } repair_time = Dist::kFixed;
  double repair_sigma = 1;
  int spare_machines = -1;  // -1: 4.8% of the job's machines (AIReSim: 200 for 4,160)
  // kEndless (our default): when the free pool is empty the wider cluster supplies a fresh
  // machine (counted in the result as machines beyond the fleet). kFinite: the fleet is
  // the job, its standbys, spare_machines and preemptible_machines; with no healthy machine
  // free, the job waits for the next repaired one (waiting_for_machines).
  enum class Fleet : std::uint8_t { kEndless, kFinite } fleet = Fleet::kEndless;
  // Finite fleet: machines running preemptible work, taken one at a time when the free pool
  // cannot serve, each preempt_s after it is asked for (AIReSim: 200 servers, 20 minutes).
  int preemptible_machines = 0;
  int fleet_machines =
      0;  // finite fleet: its size, given instead of spare_machines (0 = not given)
  double preempt_s = 1200;
  bool bad_model() const { return bad_fraction > 0 || turn_bad_per_machine_day > 0; }
};

enum class FaultScope : std::uint8_t { kMachine, kRack, kJob };
enum class Symptom : std::uint8_t { kCrash, kHang, kSlowdown, kNan, kManual };

// Failure prediction (TrainMover, arXiv 2412.12636, migrates machines before a predicted
// failure): a share of a category's faults is announced lead_time_s before it strikes, on
// the machine it will strike (FailureWarning), and warnings that announce nothing come at
// false_per_machine_day per machine-day of the job. Absent: no warnings.
struct WarningSpec {
  bool enabled = false;              // the category has a "warning" object
  double lead_time_s = 0;            // a warned fault strikes this long after its warning
  double probability = 0;            // share of the category's faults that are warned
  double false_per_machine_day = 0;  // warnings no fault follows, per machine-day of the job
};

struct FaultCategory {
  std::string name;
  std::string fault_class;          // "explicit", "implicit", "manual"
  double rate_per_machine_day = 0;  // expected events per machine-day of the job (any scope)
  double weibull_shape = 1;         // 1 = Poisson; otherwise per-machine renewal
  // > 0: lognormal times between faults, per-unit renewal with this sigma (of the log) and
  // the mean the rate gives (as trace fit's lognormal fits); not with weibull_shape != 1.
  double lognormal_sigma = 0;
  FaultScope scope = FaultScope::kMachine;
  Symptom symptom = Symptom::kCrash;
  bool persistent = false;     // the machine stays broken until evicted
  double repair_h = 24;        // time to repair an evicted machine
  double observe_after_s = 0;  // exit seen this long after the fault (crash, nan)
  // nan: the job's NaN check ends its processes (the exit is seen observe_after_s after
  // the fault), as Megatron's does. false: the job has no such check and keeps running
  // (a live job that reports its loss, realexec's reference job): only its step samples
  // show the NaN, and a stack that does not read them never sees it.
  bool exits = true;
  // manual: the share of the code updates that are not urgent (CodeUpdateRequested with
  // urgent false: a stack may hold them for its next restart, byterobust's defer_non_urgent),
  // drawn per update from the fault's own stream. 0: every update is urgent.
  double non_urgent = 0;
  double slowdown_factor = 1.5;  // step time multiplier (slowdown)
  // slowdown: confined to the machine's network link (a NIC running at reduced rate, a bad
  // cable or port). Its compute is healthy, so every rank waits in the same collective
  // (stack aggregation sees no outlier) and tests of one machine pass (their default recall
  // is 0); its traffic runs at 1/slowdown_factor of the link, which a test that times the
  // machine's own transfers sees (a grouped inter_all_gather: the pairwise node check).
  bool link_only = false;
  double duration_s = 0;  // how long a transient slowdown lasts (0 = until evicted)
  std::string signature;  // log line observed with the exit
  int exit_code = 1;
  std::string alert;  // inspection kind that can see it ("gpu", "nic", ...) or ""
  // Share of this category's faults that the inspection can see at all (drawn once per
  // fault: a symptom DCGM/dmesg does not show stays invisible on every restart). The
  // rest surface only through the crash log after observe_after_s and go to stop-time
  // tests, as ByteRobust's real-time share says many do (its §4.2; docs/domain.md §2).
  double alert_coverage = 1;
  bool code_bug = false;  // caused by the job's code: recurs until rolled back
  // Caused by the job's data (a corrupt shard, a bad batch): recurs on every run that
  // reaches it, whatever the code version and the machines; a rollback does not help,
  // only a fix by hand (fix_h, or job.on_call_fix_h after an EndRun).
  bool data_bug = false;
  double fix_h = 4;  // code or data bug: humans ship a fix after this long anyway
  bool job_bug() const { return code_bug || data_bug; }  // follows the code or the data
  WarningSpec warning;  // failure prediction (WarningSpec); scope machine only
  // Chance that each stop-time test finds the faulty machine, by test name
  // (gpu_diag, intra_all_to_all, inter_all_gather, bitwise, stress, replay);
  // defaults follow the alert kind (see default_recall).
  std::map<std::string, double> recall;
  // Share of this category's crash logs (and StartFailed reports) that name the culprit
  // machine; the others name its pipeline neighbour, a rank that saw the broken peer
  // first. Not published: 1 (always the culprit) keeps the calibrated scenarios' figures.
  double attribution = 1;
  // Whom the other crash logs name: the culprit's pipeline neighbour (faultline's default)
  // or a random other machine of the job (AIReSim's diagnosis_uncertainty).
  bool misattribute_random = false;
  // Replica groups (EnableReplicaGroups): its failure stays inside the replica of the machine
  // it strikes, which the quorum can drop while the others train. Default: a crash or hang of
  // scope machine that is neither a code nor a data bug; nothing else may set it.
  bool replica_confined = false;
};

// Stop-time tests, stack capture and replay as the environment runs them.
struct DiagnosisSpec {
  double gpu_diag_s = 120;  // EUD / dcgmi diag -r 2
  double intra_all_to_all_s = 60;
  double inter_all_gather_bytes =
      4e9;  // per machine, to and from its ring neighbours (SimGrid flows)
  // A grouped inter_all_gather (the pairwise check) starts a process group per group first:
  // launch, rendezvous, communicator init. Our assumption; the groups' timings exclude it.
  double group_setup_s = 60;
  double bitwise_s = 300;      // one step of the reference model + compare
  double stress_s = 1800;      // full stress test baseline
  double capture_s = 15;       // stacks of every rank (py-spy / gdb)
  double replay_s = 900;       // one replay phase
  double rebalance_s = 30;     // the job's pause to move micro-batches off a slow replica
  double reconfigure_s = 180;  // the job's pause to move layers off a slow stage (and rebalance)
  // Chance that a test fails a healthy machine, per machine per test, by test name
  // (gpu_diag, intra_all_to_all, inter_all_gather, bitwise, stress). A bit-wise
  // comparison of a deterministic reference step has none (docs/domain.md §4): its default is 0;
  // the others default to false_positive_rate.
  double false_positive_rate = 0.001;
  std::map<std::string, double> false_positive;
  double standby_wake_s = 10;  // parked standby to joined
};

// False-positive rate of `test` (probe_name wording).
double false_positive(const DiagnosisSpec& d, const std::string& test);

// Recall of `test` for a category without an explicit value.
double default_recall(const FaultCategory& c, const std::string& test);

// faults.trace: faults replayed or bootstrapped from a real trace (traces/arrivals.h).
// Its categories come from the mapping table and follow those of faults.categories.
struct TraceSource {
  std::string file;                     // resolved against the scenario file's directory
  std::string format = "auto";          // auto|jsonl|csv|infinitehbd|oobleck|columns|fta
  std::string columns;                  // column-map file (format "columns"), resolved
  std::string mapping;                  // category mapping table, resolved; "" = one per class
  std::string mode = "bootstrap";       // replay | bootstrap
  std::string node_order = "in_order";  // replay: in_order | random
  std::string extra_slots;              // replay onto more machines than fleet nodes: bootstrap |
                                        // fault_free; "" = not chosen (the load refuses then)
  double time_scale = 1;                // simulated seconds per trace second
  double start_day = 0;                 // replay: trace day that becomes simulated time zero
  int fleet_nodes = 0;                  // 0 = the trace's declared fleet, else its distinct nodes
  bool strict = true;                   // a bad record or unmapped fault is a load error
  int first_category = 0;               // index in Scenario::faults of the mapping's first category
  std::shared_ptr<const traces::FleetTimelines> timelines;  // loaded at validation
};

// What the run costs, in one currency unit (scenario `costs`; absent: no cost anywhere in
// the results). A replica costs gpu_hour for every GPU of the job for as long as it runs
// (the horizon, or a job of fixed work's time to train), spare_machine_hour for every
// machine-hour a warm standby sits in the pool, and delay_day for every day the job is not
// training (the unproductive time: (1 - ETTR) x horizon, or a fixed work's time to train
// beyond the work).
struct CostSpec {
  double gpu_hour = 0;
  double spare_machine_hour = 0;
  double delay_day = 0;
};

struct Scenario {
  std::string file;  // where it came from, for messages
  std::string name;  // file stem
  std::string description;
  std::uint64_t seed = 1;
  int replicas = 100;
  ClusterSpec cluster;
  SchedulerSpec scheduler;
  RepairSpec repair;
  JobSpec job;
  std::vector<FaultCategory> faults;
  std::optional<TraceSource> trace;  // faults.trace
  // A replay's action durations, occurrence by occurrence (sim/replay.cc, not a file field):
  // the k-th action of a kind ("StartJob", "StartJob:first", "RunProbe:gpu-diag",
  // "AcquireMachines:standby", ...) takes the live run's k-th, where it has one (NaN: the
  // calibrated value), so that a fault lands in the same phase of recovery as it did live.
  std::map<std::string, std::vector<double>> replay_durations;
  // faults.clock: faults arrive in wall time (false, our default: a restart or a wait is as
  // exposed as training) or only while the job trains, recomputes or warms up (true: a
  // stopped, restarting, hung or waiting job is never struck; AIReSim's clock).
  bool compute_clock = false;
  DiagnosisSpec diagnosis;
  std::optional<CostSpec> costs;  // `costs`; none: no cost is computed or reported
  std::string policy;             // registered stack name
  Params policy_params;
  // policy.params set here that the stack will not read with its module choices (kept only
  // with policy.allow_unused_params; refused otherwise).
  std::vector<std::string> unread_params;
  // policy.compared_with: the other stacks the scenario is written for, as sim compare
  // --stacks names them ("byterobust+recovery=migrate"), each with its resolved parameters.
  struct OtherStack {
    std::string spec;  // as written
    std::string stack;
    Params params;
  };
  std::vector<OtherStack> compared_with;
  // Fields set here that the stack, with its module choices, never reads (the table of
  // scenarios/stack_fields.h), in the table's order. Each is refused unless
  // policy.allow_unused_params, or the file wrote it (as it is) for a stack that reads it:
  // the file's own stack when another runs it (--set policy.stack, sim compare), or one of
  // compared_with. A scenario describes an environment several stacks run in; what only
  // some of them read is then listed in the result, not refused.
  struct UnreadField {
    std::string path;   // "$.cluster.standby_machines"
    std::string why;    // the refusal after the path: which facility reads it, and when
    bool kept = false;  // written in the file for a stack that reads it
  };
  std::vector<UnreadField> unread_fields;
  // The table's fields set here that the stack may read, as JSON paths: with several stacks
  // on one scenario (refuse_unread_by_all), a field one of them reads is not ignored.
  std::vector<std::string> read_fields;
  bool allow_unused_params = false;  // policy.allow_unused_params (--allow-unused)
};

// How load_scenario treats the fields the stack never reads (Scenario::unread_fields).
struct LoadOptions {
  // true: refuse the first one not kept (UnreadField::kept), unless
  // policy.allow_unused_params. false: keep them all in unread_fields, for a caller that runs
  // several stacks on one scenario (sim compare, a sweep) and refuses only what none of
  // them reads (refuse_unread_by_all).
  bool refuse_unread_fields = true;
};

// Refuses (ScenarioError, one line) the first field that a scenario of `runs` (one scenario
// under several stacks or settings, loaded with refuse_unread_fields false) sets, does not
// keep, and that no run's stack reads (read_fields), unless they allow unused fields. One
// run: as load_scenario refuses. `labels` name the runs in the message (the stacks or sweep
// points), in the same order.
void refuse_unread_by_all(const std::vector<const Scenario*>& runs,
                          const std::vector<std::string>& labels);

// One field the parser reads, as recorded while it parses (scenario_fields).
struct FieldInfo {
  std::string path;          // "cluster.nic_gbps", "faults.categories[].name"
  std::string type;          // object, array, number, integer, string, boolean
  std::string default_json;  // the default as JSON text; empty for required fields and objects
  bool required = false;
  bool has_range = false;
  double min = 0, max = 0;
  std::vector<std::string> choices;  // allowed values of a string, when it has a fixed set
};

// Every field of a scenario, in the order the parser reads them, recorded from the parser
// itself (so a field added to it appears here). The scenario reference is built from it.
std::vector<FieldInfo> scenario_fields(const Registry& registry);

// Loads, applies `sets` ("json.path=value", value parsed as JSON or else taken as a
// string; "json.path=null" removes the field, so its default applies), and validates
// against the registry. Throws ScenarioError.
Scenario load_scenario(const std::string& path, const std::vector<std::string>& sets,
                       const Registry& registry, const LoadOptions& options = {});
// Same from text; `file` is used in messages.
Scenario parse_scenario(const std::string& text, const std::string& file,
                        const std::vector<std::string>& sets, const Registry& registry,
                        const LoadOptions& options = {});

const char* symptom_name(Symptom s);
const char* scope_name(FaultScope s);

}  // namespace faultline::scenarios
