#include "policies/localization/localization.h"

#include <algorithm>
#include <map>
#include <set>

namespace faultline::policies {

StackVerdict aggregate_stacks(const StackSignatures& stacks) {
  // Counted by interned index (one index per distinct signature); the dominant group is
  // the largest, ties going to the signature first in string order. The slots that share
  // the fill index are counted at once: O(slots that differ), not O(slots).
  const auto& sigs = stacks.signatures();
  const auto& others = stacks.others();
  std::vector<std::size_t> count(sigs.size(), 0);
  count[stacks.fill_id()] = stacks.size() - others.size();
  for (const auto& [slot, i] : others) ++count[i];
  std::uint32_t dominant = 0;  // "": nothing captured anywhere
  std::size_t best = 0;
  for (std::uint32_t i = 1; i < sigs.size(); ++i)
    if (count[i] > best || (count[i] == best && best > 0 && sigs[i] < sigs[dominant])) {
      best = count[i];
      dominant = i;
    }
  StackVerdict v;
  v.dominant = sigs[dominant];
  auto outlier = [&](std::uint32_t i) { return i != 0 && i != dominant; };
  if (!outlier(stacks.fill_id())) {
    for (const auto& [slot, i] : others)
      if (outlier(i)) v.outliers.push_back(static_cast<SlotId>(slot));
  } else {  // most slots are outliers (a minority signature fills): walk them all, in order
    for (std::size_t s = 0; s < stacks.size(); ++s)
      if (outlier(stacks.id(s))) v.outliers.push_back(static_cast<SlotId>(s));
  }
  return v;
}

StackVerdict aggregate_stacks(const std::vector<std::string>& by_slot) {
  return aggregate_stacks(StackSignatures(by_slot));
}

std::vector<SlotId> over_eviction_set(const ClusterView& view,
                                      const std::vector<SlotId>& outliers) {
  if (outliers.empty()) return {};
  auto holds_all = [&](const std::vector<SlotId>& group) {
    return std::all_of(outliers.begin(), outliers.end(),
                       [&](SlotId s) { return std::binary_search(group.begin(), group.end(), s); });
  };
  std::vector<SlotId> pp = view.pp_group(outliers.front());
  if (holds_all(pp)) return pp;
  std::vector<SlotId> dp = view.dp_group(outliers.front());
  if (holds_all(dp)) return dp;
  std::set<SlotId> all;
  for (SlotId s : outliers)
    for (SlotId x : view.pp_group(s)) all.insert(x);
  return {all.begin(), all.end()};
}

int choose_replay_k(int pp, int dp) {
  int best = 1;
  for (int k = 1; k <= dp; ++k)
    if (dp % k == 0 && static_cast<long>(k) * pp <= dp / k) best = k;
  return best;
}

ReplayPlan dual_phase_plan_mn(int m, int n) {
  ReplayPlan p;
  p.m = m;
  p.n = n;
  const int total = m * n;
  p.horizontal.assign(total / m, {});
  p.vertical.assign(n, {});
  for (auto& h : p.horizontal) h.reserve(m);
  for (auto& v : p.vertical) v.reserve(total / n);
  for (SlotId x = 0; x < total; ++x) {
    p.horizontal[x / m].push_back(x);
    p.vertical[x % n].push_back(x);
  }
  return p;
}

ReplayPlan dual_phase_plan(int pp, int dp, int k) { return dual_phase_plan_mn(k * pp, dp / k); }

std::optional<SlotId> replay_locate(const ReplayPlan& plan, int h, int v) {
  if (h < 0 || v < 0 || h >= static_cast<int>(plan.horizontal.size()) ||
      v >= static_cast<int>(plan.vertical.size()))
    return std::nullopt;
  std::optional<SlotId> hit;
  for (SlotId x : plan.horizontal[h])
    if (x % plan.n == v) {
      if (hit) return std::nullopt;  // not unique: m > n
      hit = x;
    }
  return hit;
}

std::vector<std::vector<SlotId>> bisection_round(const std::vector<std::vector<SlotId>>& failing) {
  std::vector<std::vector<SlotId>> next;
  for (const auto& g : failing) {
    if (g.size() <= 1) continue;
    const size_t half = g.size() / 2;
    next.emplace_back(g.begin(), g.begin() + half);
    next.emplace_back(g.begin() + half, g.end());
  }
  return next;
}

BisectionResult bisect(int n, const std::function<bool(const std::vector<SlotId>&)>& test) {
  BisectionResult r;
  std::vector<SlotId> all(n);
  for (int i = 0; i < n; ++i) all[i] = i;
  std::vector<std::vector<SlotId>> failing{all};
  while (!failing.empty()) {
    std::vector<std::vector<SlotId>> still;
    for (const auto& g : failing)
      if (g.size() == 1) r.found.push_back(g.front());
    auto groups = bisection_round(failing);
    if (groups.empty()) break;
    ++r.rounds;
    for (const auto& g : groups) {
      ++r.tests;
      if (test(g)) still.push_back(g);
    }
    failing = std::move(still);
  }
  std::sort(r.found.begin(), r.found.end());
  return r;
}

}  // namespace faultline::policies
