// An out-of-tree localization module: single-phase pipeline-group replay.
//
// Where dual-phase replay (the built-in "replay") spends two rounds to pin one machine,
// this spends one: it replays every pipeline-parallel group at once and evicts each group
// that reproduces the fault, whole (over-eviction). Trade: one replay round less per
// silent fault, a pipeline group's worth of healthy machines evicted with the culprit.
// When more groups fail than pp_replay_max_groups, the fault is taken to be the code's.
//
// Build it against an installed faultline (see CMakeLists.txt) and load it with
//   faultline sim compare SCENARIO --plugin ./libmy_localizer.so \
//       --stacks byterobust,byterobust+localization=pp-group-replay
#include <memory>
#include <string>
#include <vector>

#include "policies/localization/localizers.h"  // machines_of_groups
#include "policies/plugin.h"

namespace {

using namespace faultline;
using namespace faultline::policies;

const ModuleInfo& info() {
  static const ModuleInfo i{
      ModuleKind::kLocalization,
      "pp-group-replay",
      "1",
      "one replay round over every pipeline group; evicts each failing group whole",
      {{"pp_replay_max_groups", "more failing pipeline groups than this means the code is at fault",
        "count", 2, 1, 1e6}}};
  return i;
}

class PipelineGroupReplay final : public Localizer {
 public:
  explicit PipelineGroupReplay(const Params& p)
      : max_groups_(static_cast<int>(p.get("pp_replay_max_groups"))) {}
  const ModuleInfo& info() const override { return ::info(); }

  LocalizationStep begin(const std::string& why, const ClusterView& view) override {
    groups_.clear();
    for (int g = 0; g < view.pp_groups(); ++g) groups_.push_back(view.pp_group_slots(g));
    return LocalizationTest{
        RunReplay{machines_of_groups(view, groups_), "pp-group replay: " + why}};
  }

  LocalizationStep answer(const Event& outcome, const ClusterView&) override {
    const auto* r = std::get_if<ReplayResult>(&outcome);
    if (!r) return Located{{}, false, Mechanism::kReplay, "pp-group replay: unexpected answer"};
    std::vector<SlotId> evict;
    int failing = 0;
    for (std::size_t i = 0; i < r->group_failed.size() && i < groups_.size(); ++i)
      if (r->group_failed[i]) {
        ++failing;
        evict.insert(evict.end(), groups_[i].begin(), groups_[i].end());
      }
    if (failing > max_groups_)
      return Located{
          {},
          true,
          Mechanism::kReplay,
          "pp-group replay: " + std::to_string(failing) + " pipeline groups failed: the code"};
    if (evict.empty())
      return Located{{}, false, Mechanism::kReplay, "pp-group replay reproduced nothing"};
    return Located{
        evict, false, Mechanism::kOverEviction,
        "pp-group replay: evict " + std::to_string(failing) + " failing pipeline group(s)"};
  }

 private:
  int max_groups_;
  std::vector<std::vector<SlotId>> groups_;
};

}  // namespace

FAULTLINE_PLUGIN(registry) {
  registry.add(info(), [](const Params& p) { return std::make_unique<PipelineGroupReplay>(p); });
}
