#include <algorithm>

#include "policies/localization/localizers.h"

namespace faultline::policies {

namespace {

class Stress final : public Localizer {
 public:
  explicit Stress(Duration deadline) : deadline_(deadline) {}
  const ModuleInfo& info() const override { return stress_info(); }

  LocalizationStep begin(const std::string& why, const ClusterView& view) override {
    return LocalizationTest{RunProbe{ProbeKind::kStress, view.placed_machines(), deadline_,
                                     "full-cluster stress test: " + why}};
  }

  LocalizationStep answer(const Event& outcome, const ClusterView& view) override {
    const auto* r = std::get_if<ProbeResult>(&outcome);
    if (!r || r->failed.empty())
      return Located{{},
                     false,
                     Mechanism::kStopTimeEviction,
                     "stop-time tests found nothing (previous test passed)"};
    return Located{view.slots_of(r->failed), false, Mechanism::kStopTimeEviction,
                   std::string("failed ") + probe_name(ProbeKind::kStress)};
  }

 private:
  Duration deadline_;
};

}  // namespace

const ModuleInfo& stress_info() {
  static const ModuleInfo info{
      ModuleKind::kLocalization,
      "stress",
      "1",
      "the full-cluster stress-test baseline: stress every machine, evict what fails",
      {{"stress_deadline_s", "deadline of the full-cluster stress test (localization=stress)", "s",
        86400, 1, 1e7}},
      {{Facility::kProbeStress}}};
  return info;
}

std::unique_ptr<Localizer> make_stress(const Params& p) {
  return std::make_unique<Stress>(Duration::seconds(p.get("stress_deadline_s")));
}

}  // namespace faultline::policies
