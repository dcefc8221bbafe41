#include <algorithm>

#include "policies/localization/localizers.h"

namespace faultline::policies {

namespace {

class Stress final : public Localizer {
 public:
  explicit Stress(Duration deadline) : deadline_(deadline) {}
  const ModuleInfo& info() const override { return stress_info(); }

  LocalizationStep begin(const std::string& why, const ClusterView& view) override {
    MachineSet all;
    for (SlotId s = 0; s < view.slots(); ++s)
      if (view.machine_in(s) != kNoMachine) all.push_back(view.machine_in(s));
    return LocalizationTest{
        RunProbe{ProbeKind::kStress, all, deadline_, "full-cluster stress test: " + why}};
  }

  LocalizationStep answer(const Event& outcome, const ClusterView& view) override {
    const auto* r = std::get_if<ProbeResult>(&outcome);
    if (!r || r->failed.empty())
      return Located{{},
                     false,
                     Mechanism::kStopTimeEviction,
                     "stop-time tests found nothing (previous test passed)"};
    std::vector<SlotId> slots;
    for (MachineId m : r->failed)
      if (m >= 0 && m < view.machine_count() && view.slot_of(m) >= 0)
        slots.push_back(view.slot_of(m));
    std::sort(slots.begin(), slots.end());
    return Located{slots, false, Mechanism::kStopTimeEviction,
                   std::string("failed ") + probe_name(ProbeKind::kStress)};
  }

 private:
  Duration deadline_;
};

}  // namespace

const ModuleInfo& stress_info() {
  static const ModuleInfo info{
      ModuleKind::kLocalization, "stress", "1",
      "the full-cluster stress-test baseline: stress every machine, evict what fails"};
  return info;
}

std::unique_ptr<Localizer> make_stress(const Params& p) {
  return std::make_unique<Stress>(Duration::seconds(p.get("stress_deadline_s")));
}

}  // namespace faultline::policies
