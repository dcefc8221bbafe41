// The built-in Localizer modules (policies/module.h), registered in builtin.cc:
//
// - replay: ByteRobust's dual-phase replay (§4.2, Alg. 1): a horizontal then a vertical
//   phase of concurrent replays; evicts every intersection of failing groups (usually one
//   machine; with two faulty ones, at most four). Every group failing means the code.
// - bisection: adaptive group testing with replays, halving every failing group each
//   round until single machines remain (ceil(log2 N) rounds).
// - stress: the selective-stress-testing baseline (Table 6): one stress test on every
//   machine, evicting what fails.
// - pairwise: DLRover's node check: an all-gather timed in pairs of machines (a grouped
//   inter_all_gather probe); the members of pairs that fail or lag are paired again, each
//   with a machine that kept pace, and those that fail or lag twice are evicted. It places
//   a slow link, which nothing that tests one machine at a time sees.
//
// Each declares the parameters it reads (stress: stress_deadline_s; pairwise:
// pairwise_slow_ratio, pairwise_deadline_s) and is handed only those.
#pragma once

#include <memory>

#include "policies/module.h"

namespace faultline::policies {

// The built-in localizers, one line each, in registration order (the first is the
// stacks' default): X(name) declares name_info() and make_name(), which name.cc defines,
// and builtin.cc registers each. A localizer added to the tree is its file (name.cc, built
// with every .cc of this folder), its test and its line here.
#define FAULTLINE_BUILTIN_LOCALIZERS(X) \
  X(dual_phase_replay)                  \
  X(bisection)                          \
  X(stress)                             \
  X(pairwise)

#define FAULTLINE_DECLARE_LOCALIZER(name) \
  const ModuleInfo& name##_info();        \
  std::unique_ptr<Localizer> make_##name(const Params& p);
FAULTLINE_BUILTIN_LOCALIZERS(FAULTLINE_DECLARE_LOCALIZER)
#undef FAULTLINE_DECLARE_LOCALIZER

// Replay groups of slots as the machines now in them (a slot without one stays kNoMachine).
std::vector<MachineSet> machines_of_groups(const ClusterView& view,
                                           const std::vector<std::vector<SlotId>>& groups);

}  // namespace faultline::policies
