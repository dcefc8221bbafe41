// What a policy may observe.
//
// Only what a real system would see: an exit code with a log signature, samples of the
// step counter and training metrics, an inspection alert, the outcome of an action.
// Observations, not conclusions: whether samples mean a stall, slow steps or a NaN is
// decided by the policy's detection module (policies/detection), the same under every
// backend. Injected faults (ground
// truth) never appear here, except OracleFault, which the simulator sends only to the
// oracle baseline after it asked with EnableOracle.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "policies/api/action.h"  // ProbeKind
#include "policies/api/ids.h"
#include "policies/api/time.h"

namespace faultline {

// Training processes exited. `machine` is where the first failing rank ran, or
// kNoMachine when the backend cannot tell (e.g. the whole job aborted).
struct ProcessExit {
  MachineId machine = kNoMachine;
  int exit_code = 1;
  std::string signature;   // a log line, e.g. "CUDA error: an illegal memory access"
  std::int64_t step = -1;  // the last step the job completed before the exit; -1: unknown
};
// The job failed while starting (restore, init); treated like ProcessExit by most policies.
// `action` is the StartJob (HotUpdate, RollBack) under way, or an AcquireMachines: a
// job-wide fault while machines are being acquired for a restart fails that restart, and
// the backend drops every acquisition under way (the simulator; live mode sends none).
struct StartFailed {
  ActionId action = 0;
  MachineId machine = kNoMachine;
  std::string signature;
  std::int64_t step =
      -1;  // the step the failing rank had restored and started from; -1: it had not
};
struct InspectionAlert {
  MachineId machine = kNoMachine;
  std::string kind;  // "nic", "gpu", "host", "switch"
  std::string detail;
};
// A sample of the job's progress and metrics, at the cadence WatchSteps asked for. Live
// mode reports what rank 0 saw since the last sample, from its first step report after a
// start; it never sends one at a start itself. The simulator sends one at every start and
// then only when the step rate changes, each with `steady` set: a promise
// that steps keep taking `step_time_s` until the next sample (a detector extrapolates);
// a hang is a steady sample with an infinite step time.
struct StepSample {
  std::int64_t step = 0;            // steps completed (the global step counter)
  double step_time_s = 0;           // seconds per step since the last sample; 0: unknown
  std::optional<double> loss;       // the latest finite loss, when the backend knows it
  std::optional<double> grad_norm;  // the latest finite gradient norm, when known
  bool nan = false;                 // a NaN or Inf in loss or gradients since the last sample
  bool steady = false;              // see above
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
// Ground truth for the oracle baseline only (see EnableOracle): a fault as it strikes, and
// a warned fault (a true FailureWarning) as it is announced, with what it does to the job.
struct OracleFault {
  MachineSet machines;  // empty for job-wide faults
  std::string category;
  bool persistent = false;
  bool code_bug = false;  // caused by the job's code: a rollback fixes it
  bool data_bug = false;  // caused by the job's data: only people fix it (EndRun pages them)
  // > 0: not struck yet; it strikes `machines` after `lead` if they are still in the job
  // (the warning is true). Zero: it strikes now.
  Duration lead = Duration::zero();
  bool slowdown = false;  // its machines run slow: the job trains on, at their pace
  // Replica groups (EnableReplicaGroups): the data-parallel replica it takes out of the
  // quorum (dropped now, or once the quorum's timeout for a hang ends; or out already)
  // while the other replicas train on. -1: the job feels it as without replica groups.
  int replica = -1;
};
struct ProbeResult {
  ActionId action = 0;
  ProbeKind test = ProbeKind::kGpuDiag;
  MachineSet failed;
  bool timed_out = false;
  // A grouped probe (RunProbe::groups), one entry per group in its order: whether the
  // group's collective failed (an error, a machine that did not join, the deadline), and
  // the seconds it took, measured, not judged: which group is slow is the caller's call.
  // A failed group's time is how long it ran before it failed. Empty for other probes.
  std::vector<bool> group_failed = {};
  std::vector<double> group_seconds = {};
};
// One stack signature per job slot (the slot's processes aggregated; string-equal
// signatures mean the same place in the code), interned: each distinct signature is
// stored once and every slot holds the index of its own, so grouping 10k slots
// compares integers, not strings. Index 0 is always "" (nothing captured). Stored
// sparsely: one index that most slots share (fill_id) and the slots that differ, so a
// capture of 100k slots where a handful stand out costs the handful, not 100k.
class StackSignatures {
 public:
  StackSignatures() = default;
  // Interns one signature per slot, in slot order.
  explicit StackSignatures(const std::vector<std::string>& by_slot);
  // `slots` slots, every one at `signature`.
  StackSignatures(std::size_t slots, std::string_view signature);
  std::size_t size() const { return size_; }
  const std::string& at(std::size_t slot) const { return signatures_[id(slot)]; }
  // The index of slot `slot`'s signature in signatures(); equal signatures, equal index.
  std::uint32_t id(std::size_t slot) const;
  const std::vector<std::string>& signatures() const { return signatures_; }
  // The index of `signature`, added when new (linear: there are a handful).
  std::uint32_t intern(std::string_view signature);
  void set(std::size_t slot, std::uint32_t id);
  void assign(std::size_t slots, std::uint32_t id) {
    size_ = slots;
    fill_ = id;
    others_.clear();
  }
  // The index every slot not in others() holds, and the (slot, index) pairs of the slots
  // that hold another, in slot order.
  std::uint32_t fill_id() const { return fill_; }
  const std::vector<std::pair<std::uint32_t, std::uint32_t>>& others() const { return others_; }
  // Every slot's signature, in slot order (for logs and tests).
  std::vector<std::string> strings() const;
  bool operator==(const StackSignatures& o) const { return strings() == o.strings(); }

 private:
  std::vector<std::string> signatures_{std::string()};
  std::size_t size_ = 0;
  std::uint32_t fill_ = 0;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> others_;
};
struct StacksCaptured {
  ActionId action = 0;
  StackSignatures stacks;
};
struct ReplayResult {
  ActionId action = 0;
  std::vector<bool> group_failed;
};

// Replica groups (EnableReplicaGroups): replica `replica` left the quorum because a rank of
// it failed (an exit, or a hang that outlasted the quorum's timeout) and the other replicas
// train on without it; `live` replicas remain. machine, exit_code, signature and step as in
// ProcessExit.
struct ReplicaDropped {
  int replica = 0;
  MachineId machine = kNoMachine;
  int exit_code = 1;
  std::string signature;
  std::int64_t step = -1;
  int live = 0;
};
// A RejoinReplica completed: the replica trains again; `live` replicas now.
struct ReplicaRejoined {
  ActionId action = 0;
  int replica = 0;
  int live = 0;
};

// A failure predictor (TrainMover, arXiv 2412.12636: GPU ECC and NIC degradation precede
// failures) expects machine `machine` to fail in about `lead`; `kind` is what it watched
// ("gpu", "nic", ...), `detail` its reading. A prediction, not a fault: some announce nothing
// (false warnings), and most faults come unannounced. The simulator sends them for scenario
// categories with a `warning`; live mode has no predictor and sends none.
struct FailureWarning {
  MachineId machine = kNoMachine;
  std::string kind;
  Duration lead;
  std::string detail;
};

using Event = std::variant<ProcessExit, StartFailed, InspectionAlert, StepSample, JobStarted,
                           JobStopped, MachinesReady, CodeUpdateRequested, TimerFired, ActionFailed,
                           OracleFault, ProbeResult, StacksCaptured, ReplayResult, ReplicaDropped,
                           ReplicaRejoined, FailureWarning>;

std::string describe(const Event& e);

}  // namespace faultline
