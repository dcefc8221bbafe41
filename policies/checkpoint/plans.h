// The built-in CheckpointPlanner modules (policies/module.h), registered in builtin.cc:
//
// - peer: ByteRobust's over-eviction-aware checkpoint (§6): every step to host memory,
//   backup on a peer outside the rank's TP, PP and DP groups, remote copy every
//   remote_checkpoint_interval_s as the last resort (blocking checkpoint_blocking_s).
// - memory: Gemini-style, in memory with a copy on the next machine, every
//   checkpoint_interval_s (blocking memory_checkpoint_blocking_s; Table 8: 1.84 s).
// - remote: Megatron-style blocking save to remote storage every checkpoint_interval_s
//   (remote_checkpoint_write_s; Table 8: 6.77 s).
// - daly: the remote save of `remote`, its interval re-planned at every interruption from the
//   observed mean time between interruptions (Daly 2006's higher-order optimum), starting
//   from a prior (daly_prior_mtbf_h, worth daly_prior_weight interruptions).
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
const ModuleInfo& daly_checkpoint_info();
std::unique_ptr<CheckpointPlanner> make_daly_checkpoint(const Params& p);

// Daly's higher-order estimate of the optimal checkpoint interval for a save that blocks
// `write_s` and interruptions every `mtbi_s` on average (Daly 2006, eq. 37):
// sqrt(2 d M) (1 + sqrt(d / 2M) / 3 + d / 18M) - d for d < 2M, else M.
double daly_optimum_s(double write_s, double mtbi_s);
// The mean time between interruptions estimated from `interruptions` in `running_s` of
// running time and a prior of `prior_mtbi_s` worth `prior_weight` interruptions
// (the posterior mean of a Poisson rate under a Gamma prior, inverted).
double observed_mtbi_s(int interruptions, double running_s, double prior_mtbi_s,
                       double prior_weight);

}  // namespace faultline::policies
