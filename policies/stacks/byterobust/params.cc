// The byterobust stack's parameters: the knobs the stack itself reads, every module choice
// and, through add_module_params, each module's knobs (declared by the modules that read
// them, policies/module.h), with their units, defaults, ranges and sources; and the World
// facilities it may use, its own and, through add_module_uses, its modules'.
// A declarative table, kept apart from the stack's logic (ladder.cc) so that each
// reads on its own; `faultline policies` and docs/scenario-reference.md print it.
#include "policies/module.h"
#include "policies/stacks/byterobust/ladder.h"

namespace faultline::policies {

// lint: table
PolicyInfo byterobust_info(const ModuleRegistry& modules) {
  PolicyInfo info{
      "byterobust",
      "2",
      "ByteRobust (SOSP'25): real-time inspections, stop-time tests, reattempt, rollback, "
      "dual-phase replay, "
      "stack-aggregation over-eviction, warm standbys, hot updates, every-step in-memory "
      "checkpoints",
      {
          {"mfu_rounds", "aggregation rounds for an MFU decline", "count", 5, 1, 100},
          {"mfu_round_s", "time between MFU aggregation rounds", "s", 10, 0.1, 3600},
          {"recrash_window_s",
           "the same crash (signature and machine or rank) within this of a restart escalates", "s",
           1800, 0, 86400},
          {"attributed_evict_after",
           "evict a machine that crash logs name this many times in a row after restarts (0 = "
           "never)",
           "count", 2, 0, 100},
          {"max_fruitless_rounds",
           "diagnosis rounds in a row that may find nothing before the stack gives up (requeues; "
           "MFU: stops "
           "aggregating until the next restart)",
           "count", 3, 1, 100},
          {"probe_deadline_s", "deadline of each stop-time test", "s", 600, 1, 86400},
          // The choices' help lists the registered modules with their summaries
          // (module_choice), so it names plugins' modules too and never drifts.
          module_choice(modules, ModuleKind::kDetection, "detection",
                        "what judges the job's samples and inspections"),
          module_choice(modules, ModuleKind::kLocalization, "localization",
                        "what places a failure no stop-time test placed"),
          module_choice(modules, ModuleKind::kCheckpoint, "checkpoint", "how the job checkpoints"),
          module_choice(modules, ModuleKind::kRecovery, "recovery",
                        "how evicted machines are replaced"),
          module_choice(modules, ModuleKind::kFailSlow, "failslow",
                        "what becomes of a located straggler"),
          module_choice(modules, ModuleKind::kVerdict, "verdict",
                        "when failures follow the code or the data, so the run stops"),
          {"defer_non_urgent",
           "defer non-urgent code updates into the next recovery (1) or apply now (0)", "bool", 1,
           0, 1},
          {"deferral_window_h", "a deferred update is forced after this long", "h", 24, 0, 1e4},
      }};
  add_module_params(modules, info.params);
  // The ladder's own: the stop-time tests a crash's signature calls for (and the bit-wise
  // test after a NaN), the machine its log names, and the requeue it falls back to when
  // a round finds nothing too often or an acquisition fails. The rest is its modules'.
  info.uses = std::vector<FacilityUse>{{Facility::kRequeue},
                                       {Facility::kCrashCulprit},
                                       {Facility::kProbeGpuDiag},
                                       {Facility::kProbeIntraAllToAll},
                                       {Facility::kProbeInterAllGather},
                                       {Facility::kProbeBitwise}};
  add_module_uses(modules, *info.uses);
  return info;
}

}  // namespace faultline::policies
