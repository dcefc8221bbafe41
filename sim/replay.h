// Replay of a live run in the simulator (`faultline sim replay`): re-runs the fault history
// recorded in a live run's event log (eventlog/event_log.h) under the recorded policy stack or
// another one, and sets the measured live ETTR beside the simulated one. The scenario is
// built in memory from the log: the cluster and job layout of the header, the healthy step
// time, the run's length as the horizon, and exactly the recorded faults (no modelled ones:
// every rate is zero), each its own category replayed at its time on its slot through
// Scenario::trace in "replay" mode. The environment's durations (process start, requeue,
// cold replacement, standby wake, stop-time tests, stack capture, replay, checkpoint stall,
// how long an exit takes to be seen) come from the live run's own measurements, not from the
// large-cluster defaults. The simulated ETTR is converted to the live run's definition (steps
// at the median step time, the whole live clock) before the two are compared. Replica 0's
// actions are then set beside the live run's, decision by decision (sim/replay_decisions.h:
// "decisions: K of N match the live run", each mismatch explained or not). The stages
// below are what replay() runs, in order; each is usable alone (tests, tools). One SimGrid
// engine per process: replay() forks its replicas (sim/runner.h) and must be called in a
// process that has not started an engine itself.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "eventlog/event_log.h"
#include "policies/api/registry.h"
#include "scenarios/scenario.h"
#include "traces/trace.h"

namespace faultline::sim {

// What ends a replay early: bad input (exit code 2: a malformed log, an unknown stack, a
// scenario --set refuses) or a failed run (1). The message is the whole diagnosis, without
// the program's name. `usage()`: it is about the command's arguments (a CLI adds its
// pointer to --help).
class ReplayError : public std::runtime_error {
 public:
  ReplayError(const std::string& message, int exit_code, bool usage = false)
      : std::runtime_error(message), exit_code_(exit_code), usage_(usage) {}
  int exit_code() const { return exit_code_; }
  bool usage() const { return usage_; }

 private:
  int exit_code_;
  bool usage_;
};

struct ReplayOptions {
  std::string log_path;
  std::string stack;              // empty: the recorded one (with the header's parameters)
  long long replicas = 20;        // the history is fixed: replicas differ in random draws only
  long long seed = -1;            // -1: the header's
  int jobs = 1;                   // parallel replica processes
  std::vector<std::string> sets;  // scenario overrides PATH=VALUE, applied after calibration
  std::string out_dir;            // non-empty: result.json, replicas.csv, incidents.csv there
  bool decisions = false;         // record the policy's events and actions
  // Told "warning: FILE:LINE: ..." (a torn last line left out) as soon as the log is read,
  // before anything else can fail. May be empty.
  std::function<void(const std::string& message)> warn;
};

// The live run as replayed: its log, with what a shutting-down controller logged after the
// summary record left out (the run ended at its summary).
struct LiveRun {
  std::string path;
  traces::EventLog log;                    // trimmed at the summary; torn_tail/torn_line kept
  std::size_t faults_in_log = 0;           // fault records before trimming
  std::vector<std::size_t> after_summary;  // source lines of the faults trimmed
};

// Reads and trims `path`. Throws ReplayError (exit 2) with the reader's "FILE:LINE:
// $.field: ..." message when the log is malformed.
LiveRun read_live_run(const std::string& path);

// One calibrated value: what it is, where it came from.
struct Calibrated {
  double value = 0;
  std::string source;  // "StartJob median of 3", "default", ...
  int samples = 0;
};

// Mean wall time per step while the job trains normally, and the pauses between steps (beyond
// twice the median step) that no record explains: lost to the live ETTR, modelled by nothing
// in the simulator.
struct RunningSteps {
  double mean_s = 0;
  int count = 0;
  double pause_s = 0;
  int pauses = 0;
};

// What the live run measured, as the simulator's scenario needs it.
struct Calibration {
  double horizon_s = 0;          // the live clock: the summary's elapsed time, else the last record
  Calibrated step;               // the median healthy step, which the live ETTR counts with
  Calibrated mean_step;          // the mean running step: the simulated job's step time
  Calibrated every;              // steps between checkpoints in the live run
  bool every_step_plan = false;  // the policy planned a save every step (interval 0)
  RunningSteps pauses;
  traces::SummaryRecord live;  // the live ETTR and its parts
  std::string live_source;     // where `live` came from
  int first_start = -1;        // index in log.actions of the first successful StartJob, or -1
  double start_offset_s = 0;   // its time: the simulated job starts there
  double sim_horizon_s = 0;    // horizon_s - start_offset_s
  double jitter_factor = 1;    // step / mean_step: simulated ETTR -> live step counting
  double offset_factor = 1;    // sim_horizon_s / horizon_s: -> the whole live clock
  double nic_gbps = 100;       // the simulated cluster's NICs
  // Scenario path ("job.init_s", "diagnosis.gpu_diag_s", "policy.params.NAME") -> value.
  std::map<std::string, Calibrated> values;
};

// Measures the environment from the log: step times, checkpoint spacing, the start offset,
// and the median durations of successful actions (defaults where the run never needed one).
// Throws ReplayError (exit 2) when the run has no length (no summary and no record after
// t_s 0).
Calibration calibrate(const LiveRun& run);

// What the policy was shown after a fault: its first exit naming the fault's machine.
struct Observed {
  bool found = false;
  double lag_s = 0;
  int exit_code = 1;
  std::string signature;
};

struct ReplayedFault {
  traces::Timed<traces::FaultRecord> record;
  Observed seen;  // nothing for a job-wide fault (an update)
};

// The log's faults as fault categories of the scenario, in log order.
struct ReplayedFaults {
  std::vector<ReplayedFault> faults;
  nlohmann::json categories = nlohmann::json::array();  // one per fault, rate 0
  std::vector<traces::Scope> scopes;                    // per category: node, or job (update)
  std::vector<bool> empty_signature;  // per category: it exits with no log line (SIGKILL)
  nlohmann::json skipped = nlohmann::json::array();  // {"line", "reason"} of faults left out
  std::map<std::string, int> by_kind;                // replayed faults by fault_kind_name
  std::vector<double> hang_lags;                     // hang to watchdog exit, per hang seen
};

// Turns the faults before cal.horizon_s on job slots into categories, each shaped by what
// the live run showed the policy (exit code, signature, lag; a NaN no exit followed does not
// exit). Adds the collective timeout (the median hang lag, or the default) to cal.values as
// "job.collective_timeout_s". The result holds copies of the records.
ReplayedFaults replayed_faults(const LiveRun& run, Calibration& cal);

// The policy stack a replay runs under and the parameters its scenario sets.
struct ReplayStack {
  std::string name;
  const PolicyInfo* info = nullptr;  // owned by the registry
  nlohmann::json params = nlohmann::json::object();
  bool sizes_pool = false;  // it reads standby_pool: the scenario leaves the cluster's out
};

// The parameters of `stack` (a registered stack): the recorded stack runs with the header's
// parameters and the calibrated checkpoint stall and interval, another with its defaults.
// Adds those calibrations to cal.values ("policy.params.NAME") and removes, from both, the
// parameters the stack will not read with its module choices (setting them is refused).
ReplayStack replay_stack(const LiveRun& run, const std::string& stack, const PolicyInfo& info,
                         Calibration& cal);

// The scenario of the replay, validated, with the faults as a trace replayed in order
// (timeline i drives job slot i, times relative to the first start). `cal` as calibrate(),
// replayed_faults() and replay_stack() left it; `opt` gives the seed, replicas and --sets.
// Throws ReplayError (exit 2) when the scenario is invalid or the --sets add or remove fault
// categories.
scenarios::Scenario replay_scenario(const LiveRun& run, const Calibration& cal,
                                    const ReplayedFaults& faults, const ReplayStack& stack,
                                    const ReplayOptions& opt, const Registry& registry);

struct ReplayReport {
  // The result document (`--format json`): the log, stacks, faults, calibration, the live
  // run's ETTR and mechanisms, the simulator's result ("sim"), the converted ETTR and the
  // decisions compared ("decisions", sim/replay_decisions.h).
  nlohmann::json out;
  traces::EventLogHeader header;  // the live run's cluster and job layout
};

// Runs every stage above and the replicas. Throws ReplayError: exit 2 for bad input (usage()
// for an unregistered stack), 1 when the run or writing --out fails.
ReplayReport replay(const ReplayOptions& opt, const Registry& registry);

// The human report of a replay: headline, calibration table, the two ETTRs and their
// difference, incidents by resolution mechanism live and simulated.
std::string format_replay_text(const ReplayReport& report);

}  // namespace faultline::sim
