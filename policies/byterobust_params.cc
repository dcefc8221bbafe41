// The byterobust stack's parameters: the knobs the stack itself reads, every module choice
// and, through add_module_params, each module's knobs (declared by the modules that read
// them, policies/module.h), with their units, defaults, ranges and sources.
// A declarative table, kept apart from the stack's logic (controller.cc) so that each
// reads on its own; `faultline policies` and docs/scenario-reference.md print it.
#include "policies/builtin.h"
#include "policies/controller.h"
#include "policies/module.h"

namespace faultline::policies {

// lint: table
const PolicyInfo& byterobust_info() {
  static const PolicyInfo info = [] {
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
             "the same crash (signature and machine or rank) within this of a restart escalates",
             "s", 1800, 0, 86400},
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
            module_choice(modules(), ModuleKind::kDetection, "detection",
                          "detection module: realtime (step samples judged for stalls, slow steps, "
                          "NaN and loss "
                          "jumps; real-time inspections) or timeout (process exits and the NCCL "
                          "collective timeout "
                          "only); `faultline policies` lists them, plugins included"),
            module_choice(modules(), ModuleKind::kLocalization, "localization",
                          "silent-fault localization module (replay: dual-phase; bisection: "
                          "adaptive group testing; "
                          "stress: the full-cluster stress test baseline; pairwise: DLRover's node "
                          "check, which also "
                          "places slowdowns; `faultline policies` lists them)"),
            module_choice(
                modules(), ModuleKind::kCheckpoint, "checkpoint",
                "checkpoint module: peer (every step in memory, backup on a peer outside the "
                "rank's "
                "groups), memory (Gemini-style, in memory with a copy on the next machine), remote "
                "(Megatron-style blocking save) or daly (remote saves, the interval re-planned at "
                "every "
                "interruption from those seen so far)"),
            module_choice(
                modules(), ModuleKind::kRecovery, "recovery",
                "replacement of evicted machines: standby (warm pool), reschedule (cold machines), "
                "requeue (the whole job), lemon (the warm pool, and machines evicted on evidence "
                "lemon_strikes times retired for good), scored (the warm pool, and machines "
                "evicted on "
                "evidence scored_strikes times handed out last) or segment (each slot refilled "
                "from its "
                "own NVLink domain's free trays)"),
            module_choice(modules(), ModuleKind::kFailSlow, "failslow",
                          "fail-slow module: evict (over-evict a located straggler's group at "
                          "once) or ski_rental "
                          "(Greyhound/FALCON: tolerate, rebalance, reconfigure, evict, each at the "
                          "ski-rental "
                          "break-even)"),
            module_choice(
                modules(), ModuleKind::kVerdict, "verdict",
                "stop verdict module: identical (ByteRobust: the same NaN or crash at the same "
                "step "
                "identical_incident_limit times ends the run) or no_progress (NVIDIA's resiliency "
                "extension: no_progress_limit runs in a row that get no further than any before "
                "end it)"),
            {"defer_non_urgent",
             "defer non-urgent code updates into the next recovery (1) or apply now (0)", "bool", 1,
             0, 1},
            {"deferral_window_h", "a deferred update is forced after this long", "h", 24, 0, 1e4},
        }};
    add_module_params(modules(), info.params);
    return info;
  }();
  return info;
}

}  // namespace faultline::policies
