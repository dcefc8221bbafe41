// What a policy may observe.
//
// Only symptoms a real system would see: an exit code with a log signature, a stalled
// step counter, an inspection alert, the outcome of an action. Injected faults (ground
// truth) never appear here, except OracleFault, which the simulator sends only to the
// oracle baseline after it asked with EnableOracle.
#pragma once

#include <string>
#include <variant>
#include <vector>

#include "policies/api/ids.h"
#include "policies/api/time.h"

namespace faultline {

// Training processes exited. `machine` is where the first failing rank ran, or
// kNoMachine when the backend cannot tell (e.g. the whole job aborted).
struct ProcessExit {
  MachineId machine = kNoMachine;
  int exit_code = 1;
  std::string signature;  // a log line, e.g. "CUDA error: an illegal memory access"
};
// The job failed while starting (restore, init); treated like ProcessExit by most policies.
struct StartFailed {
  ActionId action = 0;
  MachineId machine = kNoMachine;
  std::string signature;
};
struct InspectionAlert {
  MachineId machine = kNoMachine;
  std::string kind;  // "nic", "gpu", "host", "switch"
  std::string detail;
};
struct ProgressStalled {
  std::int64_t last_step = 0;
  Duration stalled_for;
};
struct StepTimeHigh {
  double ratio = 1;
};
struct JobStarted {
  ActionId action = 0;
  std::int64_t step = 0;  // step restored from
};
struct JobStopped {
  ActionId action = 0;
};
struct MachinesReady {
  ActionId action = 0;
  MachineSet machines;  // newly placed
};
struct CodeUpdateRequested {
  std::string version;
  bool urgent = true;
};
struct TimerFired {
  TimerId timer = 0;
  std::uint64_t tag = 0;
};
struct ActionFailed {
  ActionId action = 0;
  std::string reason;
};
// Ground truth for the oracle baseline only (see EnableOracle).
struct OracleFault {
  MachineSet machines;  // empty for job-wide faults
  std::string category;
  bool persistent = false;
  bool code_bug = false;  // caused by the job's code: a rollback fixes it
};

// A training-metric anomaly: any NaN, or a jump in loss or gradient norm.
struct MetricAnomaly {
  std::string metric;  // "loss", "grad_norm"
  double ratio = 0;    // value / recent mean (infinity for NaN)
  bool nan = false;
};
struct ProbeResult {
  ActionId action = 0;
  int test = 0;  // ProbeKind
  MachineSet failed;
  bool timed_out = false;
};
// One stack signature per job slot (the slot's processes aggregated; string-equal
// signatures mean the same place in the code).
struct StacksCaptured {
  ActionId action = 0;
  std::vector<std::string> by_slot;
};
struct ReplayResult {
  ActionId action = 0;
  std::vector<bool> group_failed;
};

using Event = std::variant<ProcessExit, StartFailed, InspectionAlert, ProgressStalled, StepTimeHigh,
                           JobStarted, JobStopped, MachinesReady, CodeUpdateRequested, TimerFired,
                           ActionFailed, OracleFault, MetricAnomaly, ProbeResult, StacksCaptured,
                           ReplayResult>;

std::string describe(const Event& e);

}  // namespace faultline
