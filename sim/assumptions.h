// The assumptions that dominate a result: the scenario inputs, with their values, behind
// the biggest parts of the unproductive time, each with its share of it ("warm-up after
// each restart (job.restart_warmup_s 700 s): 76%"). A number such as a warm-up or an init
// time is often our fit or a default rather than a measurement; a result whose lost time is
// mostly one of them says more about that input than about the stack.
//
// Only what the accounting attributes to an input is listed: a bucket one input fills whole
// (warmup: job.restart_warmup_s; restore: job.checkpoint_bytes_per_machine moved at the
// start), or a part of a bucket the simulator counts apart while one input sets its length
// (Attributed: process init, acquisitions by mode, standbys waking, the on-call's wait,
// replays and stop-time tests by kind, the in-memory checkpoint's throughput cost), and
// the stack's checkpoint plan where it reads a parameter of the shipped names
// (checkpoint_interval_s behind recompute, the save's blocking time behind checkpoint).
// Detection, degraded running, missing replicas and waiting for machines depend on the
// faults and the fleet together: none is pinned on one input.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "scenarios/scenario.h"
#include "sim/metrics.h"

namespace faultline::sim {

// Every attributed part with a share of the mean unproductive time above zero, largest
// first: [{"what", "inputs": {path: value}, "lost_s_per_replica", "share_of_unproductive"}].
nlohmann::json dominant_assumptions(const scenarios::Scenario& sc,
                                    const std::vector<ReplicaResult>& rs);

// The table's lines for a result's dominant_assumptions: a heading and the largest parts of
// at least 5% (at most three), or nothing when none reaches it.
std::string assumption_lines(const nlohmann::json& result);

}  // namespace faultline::sim
