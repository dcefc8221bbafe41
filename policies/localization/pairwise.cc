#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "policies/localization/localizers.h"

namespace faultline::policies {

namespace {

// The median of the times of the groups that passed; 0 when none did.
double median_passed(const ProbeResult& r) {
  std::vector<double> t;
  for (std::size_t g = 0; g < r.group_seconds.size(); ++g)
    if (!r.group_failed[g]) t.push_back(r.group_seconds[g]);
  if (t.empty()) return 0;
  std::nth_element(t.begin(), t.begin() + t.size() / 2, t.end());
  return t[t.size() / 2];
}

class Pairwise final : public Localizer {
 public:
  Pairwise(double slow_ratio, Duration deadline) : slow_ratio_(slow_ratio), deadline_(deadline) {}
  const ModuleInfo& info() const override { return pairwise_info(); }
  bool places_slowdowns() const override { return true; }

  LocalizationStep begin(const std::string& why, const ClusterView& view) override {
    const MachineSet all = view.placed_machines();
    if (all.size() < 2)
      return Located{
          {}, false, Mechanism::kStopTimeEviction, "pairwise check: fewer than two machines"};
    // Round 1: neighbours in slot order, so most pairs share a rack; an odd one out joins
    // the last pair.
    groups_.clear();
    for (std::size_t i = 0; i + 1 < all.size(); i += 2) groups_.push_back({all[i], all[i + 1]});
    if (all.size() % 2) groups_.back().push_back(all.back());
    round_ = 1;
    return LocalizationTest{RunProbe{ProbeKind::kInterAllGather, all, deadline_,
                                     "pairwise check round 1: " + why, groups_}};
  }

  LocalizationStep answer(const Event& outcome, const ClusterView& view) override {
    const auto* r = std::get_if<ProbeResult>(&outcome);
    if (!r || r->group_failed.size() != groups_.size() || r->group_seconds.size() != groups_.size())
      return Located{
          {}, false, Mechanism::kStopTimeEviction, "pairwise check answered with something else"};
    if (round_ == 1) return first_round(*r, view);
    // Round 2: a suspect paired with a machine that passed round 1 and fails or lags again
    // is the culprit; one that now keeps pace was the other machine's partner.
    std::vector<SlotId> found;
    for (std::size_t g = 0; g < groups_.size(); ++g)
      if (bad(*r, g)) {
        const SlotId s = view.slot_of(groups_[g].front());
        if (s >= 0) found.push_back(s);
      }
    std::sort(found.begin(), found.end());
    if (found.empty()) return not_the_machines("every suspect kept pace with a second partner");
    std::string where;
    for (SlotId s : found) where += (where.empty() ? "" : ",") + std::to_string(s);
    return Located{found, false, Mechanism::kStopTimeEviction,
                   "pairwise check: slot(s) " + where + " failed or lagged with two partners"};
  }

 private:
  LocalizationStep first_round(const ProbeResult& r, const ClusterView& view) {
    baseline_s_ = median_passed(r);
    MachineSet suspects, good;
    for (std::size_t g = 0; g < groups_.size(); ++g) {
      MachineSet& to = bad(r, g) ? suspects : good;
      to.insert(to.end(), groups_[g].begin(), groups_[g].end());
    }
    if (suspects.empty()) return not_the_machines("every pair kept pace");
    if (good.empty()) return not_the_machines("every pair failed");  // nothing to compare with
    if (suspects.size() > good.size())
      return Located{{},
                     false,
                     Mechanism::kStopTimeEviction,
                     "pairwise check: " + std::to_string(suspects.size()) +
                         " suspects, too few good machines (" + std::to_string(good.size()) +
                         ") to pair them with"};
    // Round 2: each suspect with its own machine that passed, the nearest in slot order, so
    // that its pair crosses the fabric as round 1's did (most often inside one rack) and
    // round 1's pace stays the yardstick.
    groups_.clear();
    std::vector<char> used(good.size(), 0);
    for (MachineId m : suspects) {
      const SlotId at = view.slot_of(m);
      std::size_t best = good.size();
      for (std::size_t i = 0; i < good.size(); ++i)
        if (!used[i] && (best == good.size() || std::abs(view.slot_of(good[i]) - at) <
                                                    std::abs(view.slot_of(good[best]) - at)))
          best = i;
      used[best] = 1;
      groups_.push_back({m, good[best]});
    }
    round_ = 2;
    MachineSet all = suspects;
    for (const auto& g : groups_) all.push_back(g.back());
    std::ostringstream why;
    why << "pairwise check round 2: " << suspects.size()
        << " suspect(s), each with a machine that kept pace";
    return LocalizationTest{
        RunProbe{ProbeKind::kInterAllGather, all, deadline_, why.str(), groups_}};
  }
  // No machine failed or lagged twice: the failure follows the code (a stack rolls it back,
  // as after a replay that fails on every group; on a slowdown it finds nothing).
  static Located not_the_machines(const std::string& what) {
    return Located{
        {}, true, Mechanism::kRollback, "pairwise check: " + what + ": not the machines, the code"};
  }
  // A group that failed, or ran slow_ratio x longer than round 1's passing pairs.
  bool bad(const ProbeResult& r, std::size_t g) const {
    return r.group_failed[g] || (baseline_s_ > 0 && r.group_seconds[g] > slow_ratio_ * baseline_s_);
  }

  const double slow_ratio_;
  const Duration deadline_;
  int round_ = 0;
  double baseline_s_ = 0;
  std::vector<MachineSet> groups_;
};

}  // namespace

const ModuleInfo& pairwise_info() {
  static const ModuleInfo info{
      ModuleKind::kLocalization,
      "pairwise",
      "1",
      "DLRover's node check: time an all-gather in pairs, then pair each suspect with a good "
      "machine; evict "
      "what fails or lags twice",
      {{"pairwise_slow_ratio",
        "a pair is a suspect when its all-gather takes this many times the median passing pair's "
        "(localization=pairwise)",
        "ratio", 1.2, 1.01, 100},
       {"pairwise_deadline_s",
        "each round of the pairwise check fails the pairs not done by then (localization=pairwise)",
        "s", 300, 1, 86400}},
      {{Facility::kProbeInterAllGather, Facility::kProbeGroups}}};
  return info;
}

std::unique_ptr<Localizer> make_pairwise(const Params& p) {
  return std::make_unique<Pairwise>(p.get("pairwise_slow_ratio"),
                                    Duration::seconds(p.get("pairwise_deadline_s")));
}

}  // namespace faultline::policies
