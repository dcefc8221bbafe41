// Internals shared by LiveWorld's source files (live_world.cc: the core, dispatch and
// the status; live_ranks.cc: the job's ranks; live_fleet.cc: agents and the machine pool)
// and its parts' (stop_tests.cc: stop-time tests; repair_pipeline.cc: repairs;
// replica_groups.cc, quorums.cc, migrations.cc: replica groups). Not part of LiveWorld's
// interface: only what more than one of those files needs lives here, so that a change to
// it is seen by each of them.
#pragma once

namespace faultline::live::world_detail {

// How long a plain agent request (kill, launch, capture, inspect, a relayed rendezvous)
// waits for its reply before it fails as unanswered.
inline constexpr double kRequestTimeoutS = 30;

}  // namespace faultline::live::world_detail
