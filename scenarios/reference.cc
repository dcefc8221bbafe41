// The scenario reference (docs/scenario-reference.md), generated: the fields, types,
// defaults, ranges and allowed values come from the parser as it reads (scenario_fields),
// units and meanings from the table below, and the policy parameters from each registered
// stack's declaration. A field the parser reads without a line here, or a line for a
// field it no longer reads, is an error, so the reference cannot drift from the code.
#include "scenarios/reference.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

#include "scenarios/scenario.h"
#include "scenarios/stack_fields.h"

namespace faultline::scenarios {
namespace {

struct Doc {
  const char* unit;                    // "" for none
  const char* meaning;                 // one or two sentences
  const char* default_text = nullptr;  // when the default is not a constant
};

// clang-format off
// lint: table
const std::map<std::string, Doc>& docs() {
  static const std::map<std::string, Doc> d = {
    {"description", {"", "What the scenario models and where its numbers come from (prose, shown in results)."}},
    {"seed", {"", "Seed of every random stream; replica r draws from (seed, r, stream), so runs repeat exactly."}},
    {"replicas", {"count", "Replicas (independent fault histories) simulated by `sim run` unless `--replicas` says otherwise."}},

    {"cluster", {"", "The machines, their network and the scheduler that hands them out."}},
    {"cluster.machines", {"count", "Machines the job runs on (standbys and spares come on top)."}},
    {"cluster.gpus_per_machine", {"count", "GPUs per machine; `job.tp` divides it, or is a multiple of it inside an NVLink domain."}},
    {"cluster.rack_size", {"count", "Machines per rack (one ToR switch); rack-scope faults strike a whole rack."}},
    {"cluster.racks_per_pod", {"count", "Racks per pod (one leaf layer) in the fat tree."}},
    {"cluster.spines", {"count", "Spine switches above the pods."}},
    {"cluster.standby_machines", {"count", "Warm standbys at time 0, refilled toward this number, for a stack that takes standbys without a standby module (failover-bench, a plugin's). Refused for a stack that sizes its own pool (`policy.params.standby_pool`), and for one that never takes a standby (below)."}},
    {"cluster.nic_gbps", {"Gbit/s", "One machine's network bandwidth (all its NICs together)."}},
    {"cluster.tor_uplink_gbps", {"Gbit/s", "A rack switch's uplink bandwidth.", "`nic_gbps` × `rack_size` (non-blocking)"}},
    {"cluster.leaf_uplink_gbps", {"Gbit/s", "A pod's uplink bandwidth.", "`tor_uplink_gbps` × `racks_per_pod` (non-blocking)"}},
    {"cluster.storage_hosts", {"count", "Hosts serving remote checkpoints and images."}},
    {"cluster.storage_gbps", {"Gbit/s", "Bandwidth of one storage host."}},
    {"cluster.link_latency_us", {"µs", "Latency of every link."}},
    {"cluster.nvlink_domain", {"count", "Machines per NVLink domain (an NVSwitch fabric: a GB200 NVL72 rack's trays) that the job's slots fill; a TP group wider than a machine stays inside one. 1: each machine is its own (HGX)."}},
    {"cluster.nvlink_gbps", {"Gb/s", "A machine's NVLink bandwidth into its domain's NVSwitches (the topology graph's NVSwitch level).", "7200 per GPU (NVLink 5)"}},
    {"cluster.nvlink_spares", {"count", "Trays each domain leaves free (NVL72: 18 - 16 = 2): the never-used spares, in the job's racks (instead of `repair.spare_machines`)."}},
    {"cluster.scheduler", {"", "The cluster scheduler's timings (a whole-job requeue, a cold replacement) and health check."}},
    {"cluster.scheduler.requeue_base_s", {"s", "Fixed time of a whole-job requeue (drain, reschedule, relaunch)."}},
    {"cluster.scheduler.requeue_per_machine_s", {"s", "Time a requeue adds per machine of the job."}},
    {"cluster.scheduler.reschedule_base_s", {"s", "Fixed time to bring cold replacement machines (also a standby refill)."}},
    {"cluster.scheduler.reschedule_per_machine_s", {"s", "Time a reschedule adds per machine brought."}},
    {"cluster.scheduler.standby_refill", {"", "Where the warm standby pool refills from: free_pool = cold machines from the free pool through the scheduler (our default); repaired = only machines back from repair, the free pool filling it only at the scheduler's own host selections (the start, a replacement beyond the pool): AIReSim (scheduler.py)."}},
    {"cluster.scheduler.host_selection", {"", "Which free machine the scheduler hands out: random (AIReSim's default host selection, ours) or fewest_failures (the one struck least often so far, ties at random: AIReSim's FewestFailuresFirst)."}},
    {"cluster.scheduler.health_check_recall", {"ratio", "Share of broken machines the scheduler's health check drains before handing machines out; below 1 a requeue or replacement can land on a broken machine (our assumption, not published)."}},
    {"cluster.repair", {"", "What happens to machines after they leave the job (AIReSim, docs/domain.md §9)."}},
    {"cluster.repair.auto_h", {"h", "Automatic repair time of an evicted machine (the mean, with `repair_time`). AIReSim: 2 h."}},
    {"cluster.repair.to_manual", {"ratio", "Chance a broken machine goes on to manual repair (taking its category's `repair_h`)."}},
    {"cluster.repair.auto_fail", {"ratio", "Chance an automatic repair fails (the machine returns with its fault)."}},
    {"cluster.repair.manual_fail", {"ratio", "Chance a manual repair fails; only with `to_manual` > 0."}},
    {"cluster.repair.retire_after", {"count", "A machine struck this many times is retired for good (0 = never)."}},
    {"cluster.repair.bad_fraction", {"ratio", "Share of machines that are \"bad\" at the start: they fail `bad_rate_factor` times as often in machine-scope hardware categories, the rates being the fleet's mean at the start. Off by default, so that a category's rate is the rate the job sees (published counts are in-job counts); with it, the result's `realized_rate_per_machine_day` says what the job saw. AIReSim: 0.15."}},
    {"cluster.repair.bad_rate_factor", {"ratio", "How much more often a bad machine fails; only with bad machines. 5 follows AIReSim's config comment (\"5x\"); AIReSim's code gives random + 5 x random = 6x (server.py), which `airesim-default.json` uses."}},
    {"cluster.repair.cure_bad", {"ratio", "Chance a successful repair cures a bad machine for good. 0 (our default): bad is a property of the machine; AIReSim: 1 (server.py complete_repair). Only with bad machines."}},
    {"cluster.repair.failed_repair_leaves", {"", "What a failed repair leaves: fault = the machine comes back with its fault in place, and the scheduler's health check drains it again (our default); badness = its fault is gone but a bad machine stays bad (AIReSim: a failed repair changes nothing)."}},
    {"cluster.repair.turn_bad_per_machine_day", {"1/(machine·day)", "Rate at which a good machine turns bad (ageing; 0 = never). AIReSim's optional regeneration (off by default) turns 10% × bad_fraction of the good servers bad every 30 days: 0.0005 per machine-day at 15%."}},
    {"cluster.repair.repair_time", {"", "Distribution of repair durations, each with its stated mean (`auto_h`, a category's `repair_h`): fixed (our default), exponential (AIReSim) or lognormal (sigma `repair_sigma`)."}},
    {"cluster.repair.repair_sigma", {"", "Sigma of the log of a lognormal repair duration; only with repair_time lognormal."}},
    {"cluster.repair.spare_machines", {"count", "Machines in the free pool at the start besides the job and its standbys.", "-1: 4.8% of the job's machines (AIReSim: 200 for 4,160)"}},
    {"cluster.repair.fleet", {"", "endless (our default): when the free pool is empty the wider cluster supplies a fresh machine, counted in the result (`fleet.machines_beyond_fleet_per_replica`); finite: the fleet is the job, its standbys, `spare_machines` and `preemptible_machines`, and with no healthy machine free the job waits for the next repaired one (`waiting_for_machines`)."}},
    {"cluster.repair.fleet_machines", {"count", "Size of a finite fleet (the job, its standbys and the free machines), instead of `spare_machines`; at least the job and its standbys.", "none: `spare_machines` sets the free machines"}},
    {"cluster.repair.preemptible_machines", {"count", "Finite fleet: machines running preemptible work, taken one at a time when the free pool cannot serve (AIReSim's spare pool: 200)."}},
    {"cluster.repair.preempt_s", {"s", "Finite fleet: time from asking for a preemptible machine to having it (AIReSim: 20 min)."}},

    {"job", {"", "The training job: parallelism, step, checkpoint state, horizon."}},
    {"job.tp", {"count", "Tensor parallelism (inside a machine, or across the machines of an NVLink domain). TP × PP × DP = machines × GPUs per machine."}},
    {"job.pp", {"count", "Pipeline parallelism."}},
    {"job.dp", {"count", "Data parallelism."}},
    {"job.step_time_s", {"s", "Time of one healthy training step."}},
    {"job.checkpoint_bytes_per_machine", {"bytes", "Model and optimizer state one machine holds (what a checkpoint saves and a restore loads)."}},
    {"job.image_bytes", {"bytes", "Container image a fresh machine pulls."}},
    {"job.init_s", {"s", "Process launch and communicator initialisation at every start (the first: `first_init_s`)."}},
    {"job.first_init_s", {"s", "Process launch and communicator initialisation at the run's first start, before the job has ever trained (a fresh launch has no processes to stop and no ports to wait for); `sim replay` measures it apart from the restarts' `init_s`.", "`job.init_s`"}},
    {"job.init_per_machine_s", {"s", "Per machine (re)started, added to `init_s` at a whole-job start: rendezvous and communicator setup that grow with the world size (ByteRobust Table 7: a hot update takes 46 s at 128 machines, 65 s at 1,024, ~0.02 s per machine; docs/domain.md §5). An in-place restart (recovery=flash) pays it for its restarted machines only."}},
    {"job.inplace_init_s", {"s", "Per-job part of an in-place restart (StartJob in_place, FlashRecovery: only the replaced ranks re-initialise, the survivors keep their processes and state and rebuild their communicators incrementally); the restarted machines add `init_per_machine_s` each.", "`job.init_s`"}},
    {"job.collective_timeout_s", {"s", "NCCL watchdog: a hung job exits after this (0 = never)."}},
    {"job.checkpoint_mfu_loss", {"ratio", "Throughput an every-step in-memory save costs while it overlaps training (at least its blocking; 0 = blocking only)."}},
    {"job.micro_batches", {"count", "Micro-batches per data-parallel replica per step: the units a slow replica's work moves in when rebalanced."}},
    {"job.layers_per_stage", {"count", "Transformer layers per pipeline stage: the units a slow stage's work moves in when its pipeline is reconfigured."}},
    {"job.restart_warmup_s", {"s", "Time after every restart before full speed: no progress, lost again if a fault strikes during it."}},
    {"job.partial_replica_rate", {"ratio", "Replica groups (recovery=replica-drop): the worth of a step the live replicas trained, per live replica, relative to a step of all of them; progress runs at partial_replica_rate x live / dp while replicas are missing (the rest is the `missing_replicas` phase). 1 (our default) is linear in live replicas, as FT-HSDP (arXiv 2602.00277) reports training unharmed by dropped replicas; below 1 is a convergence penalty for the smaller global batch, a parameter to study, not a published figure."}},
    {"job.on_call_fix_h", {"h", "After an EndRun the on-call fixes the code or data bugs still active and requeues the job, its stack started afresh, this long after the page (0 = never: the rest of the horizon is lost). Our assumption."}},
    {"job.cross_domain_slowdown", {"ratio", "Step-time multiplier while a TP group wider than a machine has a machine outside its NVLink domain (its all-reduces cross the scale-out network). Our assumption; only with such a TP."}},
    {"job.horizon_days", {"days", "The fixed wall-clock window scored (ETTR = productive time over it); with `work_days`, a cap: a replica still training then is reported as censored.", "required without `work_days`; with it, 20 × `work_days`"}},
    {"job.work_days", {"days", "A job of fixed work: the run ends when this much productive training is done and reports `time_to_train` (mean, CI, p50/p90/p99, per replica); 0 = a fixed window (`horizon_days`). AIReSim's job_length: 256."}},

    {"faults", {"", "Where faults come from: categories with rates, or a real trace, or both."}},
    {"faults.rate_scale", {"ratio", "Multiplies every category's rate (what-if: twice as many faults)."}},
    {"faults.clock", {"", "The clock faults arrive on: wall (our default: a restart, a wait or a hung job is as exposed as training) or compute (only while the job trains, recomputes or warms up; never while it is stopped, restarting, hung or waiting: AIReSim). Trace arrivals follow the same clock."}},
    {"faults.categories", {"", "Fault categories, each an arrival process and a symptom. Required unless `trace` is given."}},
    {"faults.categories[]", {"", "One fault category."}},
    {"faults.categories[].name", {"", "Unique name (results and `--set faults.categories.NAME.field=...` use it)."}},
    {"faults.categories[].class", {"", "ByteRobust's class: explicit (the job exits), implicit (hang, slowdown, NaN) or manual (a code change)."}},
    {"faults.categories[].rate_per_machine_day", {"1/(machine·day)", "Expected faults per machine-day of the job (any scope). Exactly one of the two rates.", "none: exactly one of the two rates"}},
    {"faults.categories[].rate_per_job_day", {"1/day", "Expected faults per day of the whole job; converted with `cluster.machines`. Exactly one of the two rates.", "none: exactly one of the two rates"}},
    {"faults.categories[].weibull_shape", {"", "Shape of the inter-arrival time: 1 = Poisson, below 1 = bursty per-machine renewal."}},
    {"faults.categories[].lognormal_sigma", {"", "> 0: lognormal times between faults (per-machine renewal, mean from the rate) with this sigma of the log, as `trace fit` fits and writes it; 0 = not lognormal. Not with `weibull_shape` != 1."}},
    {"faults.categories[].scope", {"", "What one fault strikes: a machine, a rack or the whole job."}},
    {"faults.categories[].symptom", {"", "What the job shows: crash (exits), hang, slowdown, nan or manual (a code update)."}},
    {"faults.categories[].persistent", {"", "The machine stays broken until evicted (not with scope job)."}},
    {"faults.categories[].repair_h", {"h", "Manual repair time of a machine evicted for this fault."}},
    {"faults.categories[].observe_after_s", {"s", "The exit (crash, nan) is seen this long after the fault."}},
    {"faults.categories[].exits", {"", "nan only: the job's NaN check ends its processes; false = only step samples show it."}},
    {"faults.categories[].non_urgent", {"ratio", "manual only: share of the code updates that are not urgent (drawn per update); a stack may hold them for its next restart (byterobust's defer_non_urgent, deferral_window_h). 0: every update is urgent."}},
    {"faults.categories[].slowdown_factor", {"ratio", "Step-time multiplier of a slowdown."}},
    {"faults.categories[].link_only", {"", "A slowdown confined to the machine's network link: stacks show no outlier and tests of one machine pass; its transfers run at 1/slowdown_factor of the link, which only a test timing them sees (the pairwise check)."}},
    {"faults.categories[].duration_s", {"s", "How long a transient slowdown lasts (0 = until evicted)."}},
    {"faults.categories[].signature", {"", "Log line seen with the exit (stack aggregation groups by it).", "the category's name"}},
    {"faults.categories[].exit_code", {"", "Exit code of the crashed rank."}},
    {"faults.categories[].alert", {"", "The real-time inspection that can see the fault (\"\" = none)."}},
    {"faults.categories[].alert_coverage", {"ratio", "Share of the faults that inspection can see (drawn once per fault); only with `alert`."}},
    {"faults.categories[].code_bug", {"", "Caused by the job's code: recurs until rolled back (scope job)."}},
    {"faults.categories[].data_bug", {"", "Caused by the job's data: recurs on every run, whatever the code version; a rollback does not help (scope job)."}},
    {"faults.categories[].fix_h", {"h", "Code or data bug: humans ship a fix after this long anyway."}},
    {"faults.categories[].replica_confined", {"", "Replica groups (recovery=replica-drop): its failure stays inside the data-parallel replica of the machine it strikes, which the quorum drops while the others train. Default: true for a crash or hang of scope machine that is neither a code nor a data bug; nothing else may set it (a NaN reaches every replica through the all-reduce).", "crash or hang of scope machine, not a code or data bug"}},
    {"faults.categories[].misattribution", {"", "Whom the other crash logs name: pipeline_neighbour (the rank that saw the broken peer first; our default) or random (a random other machine of the job: AIReSim's diagnosis_uncertainty). Only with `attribution`."}},
    {"faults.categories[].attribution", {"ratio", "Share of crash logs that name the culprit machine; the rest name its pipeline neighbour (not published; machine or rack scope)."}},
    {"faults.categories[].recall", {"", "Chance that each stop-time test finds the faulty machine, by test.", "by the alert kind and symptom (`default_recall`)"}},
    {"faults.categories[].recall.replay", {"ratio", "Recall of dual-phase replay.", "0.99 for nan, else 0.9; 0 for code bugs and job scope"}},
    {"faults.categories[].recall.gpu_diag", {"ratio", "Recall of the GPU diagnostic (EUD / dcgmi diag).", "by alert kind"}},
    {"faults.categories[].recall.intra_all_to_all", {"ratio", "Recall of the intra-machine all-to-all test.", "by alert kind"}},
    {"faults.categories[].recall.inter_all_gather", {"ratio", "Recall of the inter-machine all-gather test.", "by alert kind"}},
    {"faults.categories[].recall.bitwise", {"ratio", "Recall of the bit-wise comparison of a reference step.", "by alert kind"}},
    {"faults.categories[].recall.stress", {"ratio", "Recall of the full stress test.", "0.95"}},
    {"faults.categories[].warning", {"", "Failure prediction (TrainMover, arXiv 2412.12636): a share of the faults is announced (FailureWarning) on its machine before it strikes, and warnings that announce nothing come at a rate; absent = no warnings. Scope machine only.", "none"}},
    {"faults.categories[].warning.lead_time_s", {"s", "A warned fault strikes this long after its warning (the warning comes at the drawn arrival; a Poisson process shifted by a constant stays Poisson)."}},
    {"faults.categories[].warning.probability", {"ratio", "Share of the category's faults announced by a warning."}},
    {"faults.categories[].warning.false_per_machine_day", {"1/(machine·day)", "Warnings that no fault follows, per machine-day of the job (a Poisson stream on a uniformly drawn machine of the job)."}},
    {"faults.trace", {"", "Faults from a real trace (traces/FORMAT.md): replayed node by node or bootstrapped by machine."}},
    {"faults.trace.file", {"", "The trace, relative to the scenario file."}},
    {"faults.trace.format", {"", "Its format; auto guesses from the name and first line; columns needs `columns`."}},
    {"faults.trace.columns", {"", "Column-map file (format columns), relative to the scenario file."}},
    {"faults.trace.mapping", {"", "Category mapping table (trace event → fault category); \"\" = one category per class."}},
    {"faults.trace.mode", {"", "replay: trace node i's history on job slot i; bootstrap: each machine draws a trace node's history at random."}},
    {"faults.trace.node_order", {"", "replay only: which trace node goes to which slot."}},
    {"faults.trace.extra_slots", {"", "replay only, when the trace has fewer nodes than `cluster.machines`: bootstrap = each extra slot draws a trace node's history at a random phase (its own stream); fault_free = the extra slots get no trace faults (said in the result's `trace_mapping`).", "none: replay onto more machines than trace nodes is refused without it"}},
    {"faults.trace.time_scale", {"ratio", "Simulated seconds per trace second."}},
    {"faults.trace.start_day", {"days", "replay only: the trace day that becomes simulated time zero."}},
    {"faults.trace.fleet_nodes", {"count", "Nodes of the traced fleet (rates are per node of it).", "the trace's declared fleet, else its distinct nodes"}},
    {"faults.trace.strict", {"", "A bad record or an unmapped fault is a load error (false: skipped and counted)."}},

    {"diagnosis", {"", "Stop-time tests, stack capture and replay as the environment runs them."}},
    {"diagnosis.gpu_diag_s", {"s", "GPU diagnostic (EUD / dcgmi diag -r 2)."}},
    {"diagnosis.intra_all_to_all_s", {"s", "Intra-machine all-to-all test."}},
    {"diagnosis.group_setup_s", {"s", "Start of a grouped all-gather (the pairwise check): launch, rendezvous and communicator init, before the timed collective."}},
    {"diagnosis.inter_all_gather_bytes", {"bytes", "Bytes each machine exchanges with its ring neighbours in the inter-machine all-gather test (SimGrid flows)."}},
    {"diagnosis.bitwise_s", {"s", "One step of the reference model and the comparison."}},
    {"diagnosis.stress_s", {"s", "The full stress test."}},
    {"diagnosis.capture_s", {"s", "Capturing every rank's stack (py-spy / gdb)."}},
    {"diagnosis.replay_s", {"s", "One replay phase."}},
    {"diagnosis.rebalance_s", {"s", "The job's pause while micro-batches move off a slow machine's data-parallel replica (MitigateSlowdown rebalance; Greyhound/FALCON: seconds)."}},
    {"diagnosis.reconfigure_s", {"s", "The job's pause while layers move off a slow machine's pipeline stage and micro-batches are rebalanced (MitigateSlowdown reconfigure: parameters and optimizer state migrate)."}},
    {"diagnosis.false_positive_rate", {"ratio", "Chance a test fails a healthy machine, per machine per test, for tests without their own value."}},
    {"diagnosis.false_positive", {"", "False-positive rate by test."}},
    {"diagnosis.false_positive.gpu_diag", {"ratio", "False positives of the GPU diagnostic.", "`false_positive_rate`"}},
    {"diagnosis.false_positive.intra_all_to_all", {"ratio", "False positives of the intra-machine all-to-all.", "`false_positive_rate`"}},
    {"diagnosis.false_positive.inter_all_gather", {"ratio", "False positives of the inter-machine all-gather.", "`false_positive_rate`"}},
    {"diagnosis.false_positive.bitwise", {"ratio", "False positives of the bit-wise comparison (deterministic, docs/domain.md §4).", "0"}},
    {"diagnosis.false_positive.stress", {"ratio", "False positives of the stress test.", "`false_positive_rate`"}},
    {"diagnosis.standby_wake_s", {"s", "A parked standby's time from wake-up to joined."}},

    {"costs", {"", "Prices of the run, in one currency unit (absent: no cost anywhere in the results). With them, `sim run` reports `cost` (per replica, per trained day, goodput per unit cost, each with a 95% CI) and sweeps and `sim tune` the metrics cost, cost_per_trained_day and goodput_per_cost. At least one price is above 0."}},
    {"costs.gpu_hour", {"per GPU-hour", "Every GPU of the job, for as long as the run lasts (the horizon, or a job of fixed work's time to train), productive or not."}},
    {"costs.spare_machine_hour", {"per machine-hour", "A warm standby machine held idle in the pool, for the time it sits there (measured: the pool's size over time; a standby counts until it joins the job, its wake-up included, and a refill from the moment it arrives)."}},
    {"costs.delay_day", {"per day", "Every day the job is not training: (1 - ETTR) × horizon, or for a job of fixed work its time to train beyond the work."}},

    {"policy", {"", "The policy stack and its parameters."}},
    {"policy.stack", {"", "A registered stack (`faultline policies`; below)."}},
    {"policy.params", {"", "The stack's parameters (below), checked against its declaration; one the stack does not read with its module choices is refused."}},
    {"policy.allow_unused_params", {"", "true: run with parameters and fields the stack does not read, listed as `unread_params` and `unread_fields` in the result (`--allow-unused`)."}},
    {"policy.compared_with", {"", "The other stacks the scenario is written for, as `sim compare --stacks` names them (`\"byterobust+recovery=migrate\"`): a field the file sets that only one of them reads is kept under `stack` (listed as `unread_fields` in the result) instead of refused. Each is checked like `--stacks`' entries."}},
  };
  return d;
}
// clang-format on

std::string number_text(double x) {
  if (x == INT64_MAX || x >= 9.2e18) return "2^63−1";
  char b[64];
  std::snprintf(b, sizeof b, "%.10g", x);
  return b;
}

std::string cell(std::string s) {
  std::string o;
  for (char c : s) o += c == '|' ? std::string("\\|") : std::string(1, c);
  return o;
}

// Every field the parser reads has a line in docs(), and every line a field: the
// reference cannot drift from the code.
void check_documented(const std::vector<FieldInfo>& fields, const std::map<std::string, Doc>& d) {
  std::set<std::string> seen;
  for (const auto& f : fields) {
    if (!d.count(f.path))
      throw std::logic_error("scenario reference: the parser reads " + f.path +
                             ", which has no line in scenarios/reference.cc");
    seen.insert(f.path);
  }
  for (const auto& [path, doc] : d)
    if (!seen.count(path))
      throw std::logic_error("scenario reference: scenarios/reference.cc documents " + path +
                             ", which the parser does not read");
}

// One field's row of the reference table.
std::string field_row(const FieldInfo& f, const Doc& doc) {
  std::string type = f.type, allowed, def;
  if (!f.choices.empty()) {
    for (const auto& c : f.choices) allowed += (allowed.empty() ? "" : ", ") + ("`\"" + c + "\"`");
  } else if (f.has_range) {
    allowed = "[" + number_text(f.min) + ", " + number_text(f.max) + "]";
  }
  if (doc.default_text)
    def = doc.default_text;  // a rule says more than "required"
  else if (f.required)
    def = "required";
  else if (!f.default_json.empty() && (f.type == "number" || f.type == "integer"))
    def = "`" + number_text(std::stod(f.default_json)) + "`";
  else if (!f.default_json.empty())
    def = "`" + f.default_json + "`";
  if (f.path == "faults.categories") def = "required without `trace`";
  return "| `" + f.path + "` | " + type + " | " + doc.unit + " | " + cell(def) + " | " +
         cell(allowed) + " | " + cell(doc.meaning) + " |\n";
}

// The fields only some stacks read (stack_fields.h): what reads each, and which registered
// stacks do, with their module choices.
void write_stack_fields(std::ostringstream& o, const Registry& registry) {
  o << "\n## Fields only some stacks read\n\n"
       "The simulator reads these only for a stack that uses what the second column names (a\n"
       "stack declares what it may use beside itself, its modules theirs). A scenario that sets\n"
       "one for a stack that never reads it, with its module choices, is refused, naming the\n"
       "field, as an unread parameter is; `policy.allow_unused_params` (`--allow-unused`) runs\n"
       "it anyway and lists it as `unread_fields` in the result. A field the scenario file wrote\n"
       "for its own stack is kept, and listed, when another stack runs the file (`--set\n"
       "policy.stack`, `sim compare`); `sim compare` and a sweep refuse only a field that no\n"
       "run of theirs reads. A stack that declares nothing (a plugin's, by default) reads them\n"
       "all.\n\n"
       "| field | read only with | read by |\n|---|---|---|\n";
  for (const StackField& f : stack_fields()) {
    std::string what, by;
    for (Facility x : f.read_by)
      what += (what.empty() ? "" : "; or ") + std::string(facility_summary(x));
    for (const auto& name : registry.names()) {
      const PolicyInfo* info = registry.find(name);
      const std::string when = when_used(*info, f.read_by);
      if (when.empty()) continue;
      by += (by.empty() ? "" : "; ") + ("`" + name + "`") +
            (!info->uses        ? " (declares nothing)"
             : when == "always" ? ""
                                : " with `" + when + "`");
    }
    o << "| `" << f.path << "` | " << cell(what) << " | " << cell(by.empty() ? "none" : by)
      << " |\n";
  }
}

// A choice's help less the modules module_choice appends to it (": name (summary); ..."):
// `faultline policies` lists the modules, so that a module added leaves this page as it is.
std::string choice_help(const ParamSpec& p) {
  const auto at = p.help.find(": " + p.choices.front() + " (");
  return at == std::string::npos ? p.help : p.help.substr(0, at);
}

// Every registered stack's parameters, as `faultline policies` lists them.
void write_stacks(std::ostringstream& o, const Registry& registry) {
  o << "\n## Policy stacks and their parameters\n\n"
       "`policy.params` takes these, per stack (from each stack's declaration; `faultline "
       "policies`\n"
       "prints the same). A choice parameter takes the name of a module of its kind\n"
       "(`faultline policies` lists them, plugins' too). \"read when\" lists the module choices\n"
       "under which the stack reads the parameter; setting it otherwise is refused.\n";
  for (const auto& name : registry.names()) {
    const PolicyInfo* info = registry.find(name);
    o << "\n### `" << name << "`\n\n" << info->summary << "\n\n";
    if (info->params.empty()) {
      o << "No parameters.\n";
      continue;
    }
    o << "| parameter | unit | default | allowed | read when | meaning "
         "|\n|---|---|---|---|---|---|\n";
    for (const auto& p : info->params) {
      std::string def, allowed, when;
      if (!p.choices.empty()) {
        def = p.default_choice().empty() ? number_text(p.default_value)
                                         : "`" + p.default_choice() + "`";
        allowed = "a `" + p.name + "` module";
      } else {
        def = number_text(p.default_value);
        allowed = "[" + number_text(p.min) + ", " + number_text(p.max) + "]";
      }
      for (const auto& w : p.read_when) when += (when.empty() ? "" : " or ") + ("`" + w + "`");
      o << "| `" << p.name << "` | " << p.unit << " | " << cell(def) << " | " << cell(allowed)
        << " | " << (when.empty() ? "always" : cell(when)) << " | "
        << cell(p.choices.empty() ? p.help : choice_help(p)) << " |\n";
    }
  }
}

}  // namespace

std::string scenario_reference(const Registry& registry) {
  std::vector<FieldInfo> fields = scenario_fields(registry);
  // Sections in the order the parser meets them; fields read from a second document (the
  // trace) join their section.
  std::vector<std::string> order;
  auto top_of = [](const FieldInfo& f) {
    return f.path.find('.') == std::string::npos && f.type != "object"
               ? std::string()
               : f.path.substr(0, f.path.find('.'));
  };
  for (const auto& f : fields)
    if (std::find(order.begin(), order.end(), top_of(f)) == order.end()) order.push_back(top_of(f));
  std::stable_sort(fields.begin(), fields.end(), [&](const FieldInfo& a, const FieldInfo& b) {
    return std::find(order.begin(), order.end(), top_of(a)) <
           std::find(order.begin(), order.end(), top_of(b));
  });
  const auto& d = docs();
  check_documented(fields, d);
  std::ostringstream o;
  o << "# Scenario reference\n\n"
       "Generated from the parser (`faultline sim schema > docs/scenario-reference.md`); a test\n"
       "fails when this file and the code disagree. Every field is checked at load time: an\n"
       "unknown key is an error, and an error names the file, the JSON path and what was "
       "expected.\n"
       "`--set path=value` edits the document before the checks. Paths below use `[]` for\n"
       "every element of an array.\n";
  std::string section;
  for (const auto& f : fields) {
    const std::string top = top_of(f);
    const std::string sec = top.empty() ? std::string("top level") : top;
    if (sec != section) {
      section = sec;
      o << "\n## " << (sec == "top level" ? sec : "`" + sec + "`") << "\n\n";
      if (sec != "top level") o << d.at(sec).meaning << "\n\n";
      o << "| field | type | unit | default | allowed | meaning |\n|---|---|---|---|---|---|\n";
    }
    if (f.path == sec) continue;  // the section's own line is its heading
    o << field_row(f, d.at(f.path));
  }
  write_stack_fields(o, registry);
  write_stacks(o, registry);
  return o.str();
}

}  // namespace faultline::scenarios
