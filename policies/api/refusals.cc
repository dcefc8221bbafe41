// The ActionFailed rules every World shares (refusals.h), each with its reason.
#include "policies/api/refusals.h"

#include <map>
#include <type_traits>
#include <variant>

namespace faultline {

namespace {

using Why = std::optional<std::string>;

// After an EndRun nothing runs the job again or gives it machines: the run was ended
// because no restart, eviction or requeue can fix it (action.h, EndRun).
Why ended(const RefusalContext& c) {
  if (!c.ended) return std::nullopt;
  return c.verdict.empty() ? std::string("the run was ended")
                           : "the run was ended: " + std::string(c.verdict);
}

// Refuses a grouped all-gather (RunProbe::groups) that cannot run as asked.
Why grouped_probe(const RunProbe& p, const ClusterView& cluster) {
  if (p.groups.empty()) return std::nullopt;
  // The groups are DLRover's pairwise node check: an all-gather among neighbours. Other
  // tests run on each machine alone, where a group means nothing.
  if (p.test != ProbeKind::kInterAllGather) return "groups: only inter_all_gather runs per group";
  std::map<MachineId, std::size_t> taken;  // machine -> its group
  for (std::size_t g = 0; g < p.groups.size(); ++g) {
    const std::string at = "groups[" + std::to_string(g) + "]";
    // A collective of one machine tests no link: it would always pass.
    if (p.groups[g].size() < 2) return at + ": a group needs at least two machines";
    for (MachineId m : p.groups[g]) {
      // An id the fleet does not have names no machine to test.
      if (m < 0 || m >= cluster.machine_count())
        return at + ": machine " + std::to_string(m) + " is not in the fleet";
      // A machine runs one all-gather at a time: in two groups, one of them would fail
      // (or wait) for nothing and blame its other machines.
      if (auto [it, fresh] = taken.emplace(m, g); !fresh)
        return at + ": machine " + std::to_string(m) + " is in groups[" +
               std::to_string(it->second) + "] already (a machine joins one group)";
    }
  }
  return std::nullopt;
}

}  // namespace

// Every rank needs a machine: a job started with a hole would never form its collectives.
Why empty_slot_refusal(const ClusterView& cluster) {
  if (cluster.empty_slot_count() == 0) return std::nullopt;  // kept as slots change: no scan
  std::string empty;
  int n = 0;
  for (SlotId s = 0; s < cluster.slots(); ++s)
    if (cluster.machine_in(s) == kNoMachine) empty += (n++ ? ", " : "") + std::to_string(s);
  if (n == 0) return std::nullopt;
  return n == 1 ? "cannot start: slot " + empty + " has no machine"
                : "cannot start: slots " + empty + " have no machine";
}

Why refusal(const Action& a, const RefusalContext& c) {
  return std::visit(
      [&](const auto& x) -> Why {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, StartJob>) {
          if (auto why = ended(c)) return why;
          // A second start would kill a healthy job without a word: stop it first. (A start
          // still under way is replaced instead: the job does not train yet.)
          if (c.job_running) return "job already running";
          return empty_slot_refusal(c.cluster);
        } else if constexpr (std::is_same_v<T, HotUpdate>) {
          // It restarts the job in place (stopping it first), so it needs what a start needs.
          if (auto why = ended(c)) return why;
          return empty_slot_refusal(c.cluster);
        } else if constexpr (std::is_same_v<T, RollBack>) {
          // The code at fault goes whether or not machines are there to restart it: each
          // World rolls the code back, then refuses the restart of a job with an empty slot
          // (empty_slot_refusal), and the policy's fallback acquires the machines.
          return ended(c);
        } else if constexpr (std::is_same_v<T, AcquireMachines>) {
          return ended(c);
        } else if constexpr (std::is_same_v<T, EnableInspection>) {
          // A check every zero (or negative) seconds would never let anything else run.
          if (x.interval.ns <= 0) return "inspection interval must be positive";
          return std::nullopt;
        } else if constexpr (std::is_same_v<T, RunProbe>) {
          return grouped_probe(x, c.cluster);
        } else if constexpr (std::is_same_v<T, MitigateSlowdown>) {
          // Micro-batches and layers move between ranks of a running job; a stopped job is
          // laid out afresh at its next start anyway.
          if (!c.job_running) return "job not running";
          // The slow machine's share is moved off its slot: there must be one to move.
          if (x.slot < 0 || x.slot >= c.cluster.slots() ||
              c.cluster.machine_in(x.slot) == kNoMachine)
            return "slot " + std::to_string(x.slot) + " has no machine";
          return std::nullopt;
        } else if constexpr (std::is_same_v<T, EnableReplicaGroups>) {
          if (x.min_replicas < 1 || x.min_replicas > c.cluster.pp_groups())
            return "min_replicas " + std::to_string(x.min_replicas) +
                   " is not between 1 and the data-parallel degree " +
                   std::to_string(c.cluster.pp_groups());
          return std::nullopt;
        } else if constexpr (std::is_same_v<T, RejoinReplica>) {
          // A replica joins a quorum that trains; a stopped job brings them all back at its
          // next start.
          if (!c.job_running) return "job not running";
          if (x.replica < 0 || x.replica >= c.cluster.pp_groups())
            return "no replica " + std::to_string(x.replica);
          for (SlotId s : c.cluster.pp_group_slots(x.replica))
            if (c.cluster.machine_in(s) == kNoMachine)
              return "slot " + std::to_string(s) + " of replica " + std::to_string(x.replica) +
                     " has no machine";
          return std::nullopt;
        } else if constexpr (std::is_same_v<T, MigrateMachines>) {
          // A migration copies state off a machine of a training job; a stopped job takes
          // its machines afresh at its next start anyway.
          if (!c.job_running) return "job not running";
          if (x.machines.empty()) return "no machines to migrate";
          for (MachineId m : x.machines)
            if (m < 0 || m >= c.cluster.machine_count() || c.cluster.slot_of(m) < 0)
              return "machine " + std::to_string(m) + " is not in the job";
          return std::nullopt;
        } else {
          return std::nullopt;  // no rule of the contract refuses it
        }
      },
      a);
}

}  // namespace faultline
