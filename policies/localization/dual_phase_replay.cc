#include <algorithm>
#include <memory>

#include "policies/localization/localization.h"
#include "policies/localization/localizers.h"

namespace faultline::policies {

std::vector<MachineSet> machines_of_groups(const ClusterView& view,
                                           const std::vector<std::vector<SlotId>>& groups) {
  std::vector<MachineSet> out;
  out.reserve(groups.size());
  for (const auto& g : groups) {
    MachineSet set;
    set.reserve(g.size());
    for (SlotId s : g) set.push_back(view.machine_in(s));
    out.push_back(std::move(set));
  }
  return out;
}

namespace {

class DualPhaseReplay final : public Localizer {
 public:
  const ModuleInfo& info() const override { return dual_phase_replay_info(); }

  LocalizationStep begin(const std::string& why, const ClusterView& view) override {
    const auto& spec = view.spec();
    if (!plan_) plan_ = shared_plan(spec.pp, spec.dp);  // the layout is fixed
    phase_ = 1;
    return LocalizationTest{RunReplay{machines_of_groups(view, plan_->horizontal), why}};
  }

  LocalizationStep answer(const Event& outcome, const ClusterView& view) override {
    const auto* r = std::get_if<ReplayResult>(&outcome);
    if (!r) return Located{{}, false, Mechanism::kReplay, "replay answered with something else"};
    std::vector<int> failing;
    for (std::size_t i = 0; i < r->group_failed.size(); ++i)
      if (r->group_failed[i]) failing.push_back(static_cast<int>(i));
    if (failing.empty()) return Located{{}, false, Mechanism::kReplay, "replay reproduced nothing"};
    if (failing.size() == r->group_failed.size())  // every group fails: not a machine, the code
      return Located{
          {}, true, Mechanism::kRollback, "replay fails on every group: the code is at fault"};
    if (phase_ == 1) {
      horizontal_failing_ = failing;
      phase_ = 2;
      return LocalizationTest{
          RunReplay{machines_of_groups(view, plan_->vertical), "replay phase 2 (vertical)"}};
    }
    // Usually one machine is faulty and the two failing groups meet in it (Alg. 1). With
    // two faulty machines each phase has two failing groups: evict every intersection
    // (at most four machines, both faulty ones among them) rather than guess a pair that
    // may not meet and replay again forever.
    std::vector<SlotId> hits;
    for (int h : horizontal_failing_)
      for (int v : failing)
        if (auto hit = replay_locate(*plan_, h, v)) hits.push_back(*hit);
    if (hits.empty())
      return Located{{}, false, Mechanism::kReplay, "replay groups do not intersect"};
    std::sort(hits.begin(), hits.end());
    std::string where;
    for (SlotId x : hits) where += (where.empty() ? "" : ",") + std::to_string(x);
    return Located{hits, false, Mechanism::kReplay, "dual-phase replay located slot(s) " + where};
  }

 private:
  // Every replica of a simulation (and every round) replays the same layout: the plan is
  // built once per thread and shared.
  static std::shared_ptr<const ReplayPlan> shared_plan(int pp, int dp) {
    thread_local std::shared_ptr<const ReplayPlan> last;
    thread_local int last_pp = 0, last_dp = 0;
    if (!last || last_pp != pp || last_dp != dp) {
      last = std::make_shared<const ReplayPlan>(dual_phase_plan(pp, dp, choose_replay_k(pp, dp)));
      last_pp = pp;
      last_dp = dp;
    }
    return last;
  }
  std::shared_ptr<const ReplayPlan> plan_;
  int phase_ = 0;
  std::vector<int> horizontal_failing_;
};

}  // namespace

const ModuleInfo& dual_phase_replay_info() {
  static const ModuleInfo info{
      ModuleKind::kLocalization,
      "replay",
      "1",
      "dual-phase replay (ByteRobust Alg. 1): horizontal then vertical replay groups, "
      "evict the intersections",
      {},
      {{Facility::kReplay}}};
  return info;
}

std::unique_ptr<Localizer> make_dual_phase_replay(const Params&) {
  return std::make_unique<DualPhaseReplay>();
}

}  // namespace faultline::policies
