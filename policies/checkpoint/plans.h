// The built-in CheckpointPlanner modules (policies/module.h), registered in builtin.cc:
//
// - peer: ByteRobust's over-eviction-aware checkpoint (§6): every step to host memory,
//   backup on a peer outside the rank's TP, PP and DP groups, remote copy every
//   remote_checkpoint_interval_s as the last resort (blocking checkpoint_blocking_s).
// - memory: Gemini-style, in memory with a copy on the next machine, every
//   checkpoint_interval_s (blocking memory_checkpoint_blocking_s; Table 8: 1.84 s).
// - remote: Megatron-style blocking save to remote storage every checkpoint_interval_s
//   (remote_checkpoint_write_s; Table 8: 6.77 s).
#pragma once

#include <memory>

#include "policies/module.h"

namespace faultline::policies {

const ModuleInfo& peer_checkpoint_info();
std::unique_ptr<CheckpointPlanner> make_peer_checkpoint(const Params& p);
const ModuleInfo& memory_checkpoint_info();
std::unique_ptr<CheckpointPlanner> make_memory_checkpoint(const Params& p);
const ModuleInfo& remote_checkpoint_info();
std::unique_ptr<CheckpointPlanner> make_remote_checkpoint(const Params& p);

}  // namespace faultline::policies
