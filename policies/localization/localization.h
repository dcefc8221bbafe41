// Localization algorithms: which machines to evict.
//
// - Stack aggregation with over-eviction (ByteRobust §5.1): group per-slot stack
//   signatures by string equality; the dominant group is healthy, the rest are
//   outliers; evict the parallel group that holds all of them.
// - Dual-phase replay (§4.2, Alg. 1): N = PP*DP machines, m = k*PP, n = DP/k with
//   m <= n; phase 1 groups x by floor(x/m), phase 2 by x mod n; the faulty machine is
//   the one machine in both failing groups.
// - Adaptive group testing (bisection): split every failing group in two and test the
//   halves concurrently, one round at a time, until the failing groups are single
//   machines; finds any number of faulty machines in ceil(log2 N) rounds.
// Positions are job slots (0..N-1 in layout order).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "policies/api/cluster_view.h"
#include "policies/api/event.h"

namespace faultline::policies {

struct StackVerdict {
  std::string dominant;
  std::vector<SlotId> outliers;  // slots whose signature is not the dominant one
};
// Empty signatures (nothing captured) are ignored; ties for the dominant group go to the
// signature first in string order.
StackVerdict aggregate_stacks(const StackSignatures& stacks);
StackVerdict aggregate_stacks(const std::vector<std::string>& by_slot);

// The slots to evict for these outliers: the PP group holding all of them, else the
// DP group holding all of them, else the union of the outliers' PP groups.
std::vector<SlotId> over_eviction_set(const ClusterView& view, const std::vector<SlotId>& outliers);

struct ReplayPlan {
  int m = 0, n = 0;
  std::vector<std::vector<SlotId>> horizontal;  // phase 1: n groups of m consecutive slots
  std::vector<std::vector<SlotId>> vertical;    // phase 2: n groups, x mod n
};
// The largest k (dividing DP) with k*PP <= DP/k; 1 when none is larger.
int choose_replay_k(int pp, int dp);
// Plan for m and n directly (requires m*n slots, m <= n).
ReplayPlan dual_phase_plan_mn(int m, int n);
ReplayPlan dual_phase_plan(int pp, int dp, int k);
// The single slot in horizontal group h and vertical group v.
std::optional<SlotId> replay_locate(const ReplayPlan& plan, int h, int v);

struct BisectionResult {
  std::vector<SlotId> found;
  int rounds = 0;
  int tests = 0;
};
// Runs adaptive group testing over slots 0..n-1 with `test(group)` = true when the
// group contains a faulty slot. The whole set is known to fail (the job failed).
BisectionResult bisect(int n, const std::function<bool(const std::vector<SlotId>&)>& test);
// One round of bisection: halves of every failing group (groups of one are done).
std::vector<std::vector<SlotId>> bisection_round(const std::vector<std::vector<SlotId>>& failing);

}  // namespace faultline::policies
