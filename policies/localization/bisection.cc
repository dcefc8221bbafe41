#include "policies/localization/localization.h"
#include "policies/localization/localizers.h"

namespace faultline::policies {

namespace {

class Bisection final : public Localizer {
 public:
  const ModuleInfo& info() const override { return bisection_info(); }

  LocalizationStep begin(const std::string& why, const ClusterView& view) override {
    std::vector<SlotId> all(view.slots());
    for (SlotId s = 0; s < view.slots(); ++s) all[s] = s;
    groups_ = bisection_round({all});
    return LocalizationTest{RunReplay{machines_of_groups(view, groups_), why}};
  }

  LocalizationStep answer(const Event& outcome, const ClusterView& view) override {
    const auto* r = std::get_if<ReplayResult>(&outcome);
    if (!r) return Located{{}, false, Mechanism::kReplay, "replay answered with something else"};
    std::vector<std::vector<SlotId>> failing, done;
    for (std::size_t i = 0; i < r->group_failed.size() && i < groups_.size(); ++i)
      if (r->group_failed[i]) (groups_[i].size() == 1 ? done : failing).push_back(groups_[i]);
    if (failing.empty()) {
      std::vector<SlotId> found;
      for (const auto& g : done) found.push_back(g.front());
      if (found.empty())
        return Located{{}, false, Mechanism::kReplay, "bisection reproduced nothing"};
      return Located{found, false, Mechanism::kReplay, "located by bisection"};
    }
    // Single machines already found are replayed again with the next round's halves.
    for (const auto& g : done) failing.push_back(g);
    groups_ = bisection_round(failing);
    for (const auto& g : failing)
      if (g.size() == 1) groups_.push_back(g);
    return LocalizationTest{RunReplay{machines_of_groups(view, groups_), "bisection round"}};
  }

 private:
  std::vector<std::vector<SlotId>> groups_;
};

}  // namespace

const ModuleInfo& bisection_info() {
  static const ModuleInfo info{
      ModuleKind::kLocalization,
      "bisection",
      "1",
      "adaptive group testing: halve every failing replay group each round",
      {},
      {{Facility::kReplay}}};
  return info;
}

std::unique_ptr<Localizer> make_bisection(const Params&) { return std::make_unique<Bisection>(); }

}  // namespace faultline::policies
