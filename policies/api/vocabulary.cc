#include <iterator>
#include <mutex>
#include <ostream>
#include <set>
#include <sstream>
#include <string>

#include "policies/api/action.h"
#include "policies/api/event.h"
#include "policies/api/policy.h"

namespace faultline {

namespace {
template <class... Ts>
struct Overloaded : Ts... {
  using Ts::operator()...;
};
template <class... Ts>
Overloaded(Ts...) -> Overloaded<Ts...>;

std::string join(const MachineSet& ms) {
  std::ostringstream o;
  o << '[';
  for (size_t i = 0; i < ms.size(); ++i) o << (i ? "," : "") << ms[i];
  o << ']';
  return o.str();
}
}  // namespace

const char* mode_name(AcquireMode m) {
  switch (m) {
    case AcquireMode::kRequeue:
      return "requeue";
    case AcquireMode::kReschedule:
      return "reschedule";
    case AcquireMode::kStandby:
      return "standby";
    case AcquireMode::kOracle:
      return "oracle";
  }
  return "?";
}

const char* tier_name(CheckpointTier t) {
  switch (t) {
    case CheckpointTier::kRemote:
      return "remote";
    case CheckpointTier::kMemory:
      return "memory";
    case CheckpointTier::kMemoryWithPeer:
      return "memory+peer";
  }
  return "?";
}

Mechanism Mechanism::named(std::string_view name) {
  // Interned for the process's life: an action copies its credit as a pointer. Names are
  // few (the built-ins, the modules'), so the set never grows past a handful.
  static std::mutex mu;
  static std::set<std::string, std::less<>> names;
  const std::lock_guard<std::mutex> lock(mu);
  auto it = names.find(name);
  if (it == names.end()) it = names.emplace(name).first;
  Mechanism m;
  m.name_ = it->c_str();
  m.hash_ = hash_of(m.name_);
  return m;
}

std::ostream& operator<<(std::ostream& o, Mechanism m) { return o << m.name(); }

const char* probe_key(ProbeKind k) {
  switch (k) {
    case ProbeKind::kGpuDiag:
      return "gpu_diag";
    case ProbeKind::kIntraAllToAll:
      return "intra_all_to_all";
    case ProbeKind::kInterAllGather:
      return "inter_all_gather";
    case ProbeKind::kBitwise:
      return "bitwise";
    case ProbeKind::kStress:
      return "stress";
  }
  return "?";
}

const char* probe_name(ProbeKind k) {
  switch (k) {
    case ProbeKind::kGpuDiag:
      return "gpu-diag";
    case ProbeKind::kIntraAllToAll:
      return "intra-all-to-all";
    case ProbeKind::kInterAllGather:
      return "inter-all-gather";
    case ProbeKind::kBitwise:
      return "bitwise";
    case ProbeKind::kStress:
      return "stress";
  }
  return "?";
}

const char* mitigation_name(Mitigation m) {
  switch (m) {
    case Mitigation::kRebalance:
      return "rebalance";
    case Mitigation::kReconfigure:
      return "reconfigure";
  }
  return "?";
}

std::string describe(const Action& a) {
  return std::visit(
      Overloaded{
          [](const StopJob& x) { return "stop job (" + x.reason + ")"; },
          [](const StartJob& x) {
            return "start job" + (x.version.empty() ? "" : " on code version " + x.version) +
                   (x.in_place ? " in place" : "") + " (" + x.reason + ")";
          },
          [](const EvictMachines& x) {
            return (x.retire ? "evict and retire " : "evict ") + join(x.machines) + " (" +
                   x.reason + ")";
          },
          [](const AcquireMachines& x) {
            return std::string("acquire machines: ") + mode_name(x.mode) +
                   (x.same_domain ? " in-domain " : " ") + std::to_string(x.slots.size()) +
                   " slots (" + x.reason + ")";
          },
          [](const SetCheckpointPlan& x) {
            std::ostringstream o;
            o << "checkpoint every " << x.interval.to_seconds() << " s, blocking "
              << x.blocking.to_seconds() << " s, " << tier_name(x.tier) << " (" << x.reason << ")";
            return o.str();
          },
          [](const WatchSteps& x) {
            std::ostringstream o;
            o << "watch steps: a sample every " << x.every.to_seconds() << " s (" << x.reason
              << ")";
            return o.str();
          },
          [](const EnableOracle& x) { return "enable oracle (" + x.reason + ")"; },
          [](const Note& x) { return "note: " + x.text; },
          [](const EnableInspection& x) {
            std::ostringstream o;
            o << "inspect " << x.kind << " every " << x.interval.to_seconds() << " s";
            return o.str();
          },
          [](const RunProbe& x) {
            return std::string("probe ") + probe_name(x.test) + " on " + join(x.machines) +
                   (x.groups.empty() ? "" : " in " + std::to_string(x.groups.size()) + " groups") +
                   " (" + x.reason + ")";
          },
          [](const CaptureStacks& x) { return "capture stacks (" + x.reason + ")"; },
          [](const RunReplay& x) {
            return "replay on " + std::to_string(x.groups.size()) + " groups (" + x.reason + ")";
          },
          [](const HotUpdate& x) { return "hot update to " + x.version + " (" + x.reason + ")"; },
          [](const RollBack& x) { return "roll back (" + x.reason + ")"; },
          [](const SetStandbyPool& x) {
            return "standby pool of " + std::to_string(x.size) + " (" + x.reason + ")";
          },
          [](const EndRun& x) { return "end the run: " + x.verdict + " (" + x.reason + ")"; },
          [](const MitigateSlowdown& x) {
            return std::string(mitigation_name(x.how)) + " around slot " + std::to_string(x.slot) +
                   " (" + x.reason + ")";
          },
          [](const AvoidMachines& x) {
            return "hand out " + join(x.machines) + " last (" + x.reason + ")";
          },
          [](const EnableReplicaGroups& x) {
            std::ostringstream o;
            o << "replica groups: at least " << x.min_replicas << " replicas, quorum change "
              << x.quorum_change.to_seconds() << " s, timeout " << x.timeout.to_seconds() << " s ("
              << x.reason << ")";
            return o.str();
          },
          [](const RejoinReplica& x) {
            return "rejoin replica " + std::to_string(x.replica) + " (" + x.reason + ")";
          },
          [](const MigrateMachines& x) {
            std::ostringstream o;
            o << "migrate " << join(x.machines) << " to warm standbys, pause "
              << x.pause.to_seconds() << " s (" << x.reason << ")";
            return o.str();
          },
      },
      a);
}

std::string describe(const Event& e) {
  return std::visit(
      Overloaded{
          [](const ProcessExit& x) {
            return "process exit on " + std::to_string(x.machine) + " code " +
                   std::to_string(x.exit_code) + ": " + x.signature;
          },
          [](const StartFailed& x) { return "start failed: " + x.signature; },
          [](const InspectionAlert& x) {
            return "inspection alert " + x.kind + " on " + std::to_string(x.machine) + ": " +
                   x.detail;
          },
          [](const StepSample& x) {
            std::ostringstream o;
            o << "step sample " << x.step << ": " << x.step_time_s << " s/step";
            if (x.loss) o << ", loss " << *x.loss;
            if (x.grad_norm) o << ", grad norm " << *x.grad_norm;
            if (x.nan) o << ", NaN";
            if (x.steady) o << " (steady)";
            return o.str();
          },
          [](const JobStarted& x) { return "job started from step " + std::to_string(x.step); },
          [](const JobStopped&) { return std::string("job stopped"); },
          [](const MachinesReady& x) { return "machines ready " + join(x.machines); },
          [](const CodeUpdateRequested& x) {
            return "code update requested " + x.version + (x.urgent ? " (urgent)" : "");
          },
          [](const TimerFired& x) { return "timer " + std::to_string(x.timer) + " fired"; },
          [](const ActionFailed& x) {
            return "action " + std::to_string(x.action) + " failed: " + x.reason;
          },
          [](const OracleFault& x) {
            std::ostringstream o;
            o << "oracle fault " << x.category << " on " << join(x.machines);
            if (x.lead > Duration::zero()) o << ", strikes in " << x.lead.to_seconds() << " s";
            if (x.slowdown) o << ", slows the job";
            if (x.replica >= 0) o << ", replica " << x.replica << " out of the quorum";
            return o.str();
          },
          [](const ProbeResult& x) {
            std::string s = std::string("probe ") + probe_name(x.test) + " failed " +
                            join(x.failed) + (x.timed_out ? " (deadline)" : "");
            for (std::size_t i = 0; i < x.group_seconds.size(); ++i) {
              std::ostringstream o;
              o << (i == 0 ? "; groups" : "") << " " << x.group_seconds[i] << "s"
                << (i < x.group_failed.size() && x.group_failed[i] ? "F" : "");
              s += o.str();
            }
            return s;
          },
          [](const StacksCaptured& x) {
            return "stacks of " + std::to_string(x.stacks.size()) + " slots";
          },
          [](const ReplayResult& x) {
            std::string s = "replay result";
            for (bool b : x.group_failed) s += b ? " F" : " .";
            return s;
          },
          [](const ReplicaDropped& x) {
            return "replica " + std::to_string(x.replica) + " dropped (" + std::to_string(x.live) +
                   " live), exit on " + std::to_string(x.machine) + " code " +
                   std::to_string(x.exit_code) + ": " + x.signature;
          },
          [](const ReplicaRejoined& x) {
            return "replica " + std::to_string(x.replica) + " rejoined (" + std::to_string(x.live) +
                   " live)";
          },
          [](const FailureWarning& x) {
            std::ostringstream o;
            o << "failure warning " << x.kind << " on " << x.machine << " in "
              << x.lead.to_seconds() << " s: " << x.detail;
            return o.str();
          },
      },
      e);
}

namespace {

struct FacilityWords {
  const char* name;
  const char* summary;
};
// In Facility's order.
// lint: table
constexpr FacilityWords kFacilityWords[kFacilities] = {
    {"requeue", "whole-job requeues (AcquireMachines requeue)"},
    {"reschedule", "cold machines from the scheduler (AcquireMachines reschedule)"},
    {"standby", "the warm standby pool (AcquireMachines standby, SetStandbyPool, MigrateMachines)"},
    {"inspections", "real-time inspections (EnableInspection)"},
    {"probe_gpu_diag", "the gpu_diag stop-time test (RunProbe gpu-diag)"},
    {"probe_intra_all_to_all", "the intra_all_to_all stop-time test (RunProbe intra-all-to-all)"},
    {"probe_inter_all_gather", "the inter_all_gather stop-time test (RunProbe inter-all-gather)"},
    {"probe_groups", "grouped inter_all_gather tests (RunProbe with groups: the pairwise check)"},
    {"probe_bitwise", "the bitwise stop-time test (RunProbe bitwise)"},
    {"probe_stress", "the stress test (RunProbe stress)"},
    {"capture_stacks", "stack captures (CaptureStacks)"},
    {"replay", "replays (RunReplay)"},
    {"mitigation", "slowdown workarounds (MitigateSlowdown)"},
    {"replica_groups", "replica groups (EnableReplicaGroups)"},
    {"in_place_restart", "in-place restarts (StartJob in_place)"},
    {"migration", "migration on a failure warning (FailureWarning, MigrateMachines)"},
    {"end_run", "ending the run for the on-call (EndRun)"},
    {"peer_checkpoint",
     "every-step in-memory checkpoints with a peer copy (SetCheckpointPlan "
     "memory+peer)"},
    {"crash_culprit", "the machine a crash log names (ProcessExit, StartFailed)"},
};

}  // namespace

const char* facility_name(Facility f) {
  const auto i = static_cast<std::size_t>(f);
  return i < std::size(kFacilityWords) ? kFacilityWords[i].name : "?";
}

const char* facility_summary(Facility f) {
  const auto i = static_cast<std::size_t>(f);
  return i < std::size(kFacilityWords) ? kFacilityWords[i].summary : "?";
}

}  // namespace faultline
