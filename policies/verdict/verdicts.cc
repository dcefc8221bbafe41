#include "policies/verdict/verdicts.h"

namespace faultline::policies {

Verdict verdict_at(int count, int limit) {
  if (limit > 0 && count >= limit) return Verdict::kStop;
  if (limit > 1 && count == limit - 1) return Verdict::kRollBack;
  return Verdict::kCarryOn;
}

namespace {

// The shared ladder over one of the counts a Recurrence carries.
class CountLadder final : public StopVerdict {
 public:
  CountLadder(const ModuleInfo& info, int limit, int Recurrence::*count)
      : info_(info), limit_(limit), count_(count) {}
  const ModuleInfo& info() const override { return info_; }
  Verdict judge(const Recurrence& r) const override { return verdict_at(r.*count_, limit_); }

 private:
  const ModuleInfo& info_;
  int limit_;
  int Recurrence::*count_;
};

}  // namespace

const ModuleInfo& identical_verdict_info() {
  static const ModuleInfo info{ModuleKind::kVerdict,
                               "identical",
                               "1",
                               "ByteRobust: the same NaN or crash at the same step "
                               "identical_incident_limit times ends the run (rollback "
                               "the time before)",
                               {{"identical_incident_limit",
                                 "the same NaN at the same step this many times in a row, or the "
                                 "same crash (signature, rank) after the "
                                 "same step on this many machines in turn, ends the run with the "
                                 "verdict code_or_data (the time before, "
                                 "the code is rolled back; 0 = never)",
                                 "count", 3, 0, 100}},
                               {{Facility::kEndRun}}};
  return info;
}
std::unique_ptr<StopVerdict> make_identical_verdict(const Params& p) {
  return std::make_unique<CountLadder>(identical_verdict_info(),
                                       static_cast<int>(p.get("identical_incident_limit")),
                                       &Recurrence::identical);
}

const ModuleInfo& no_progress_verdict_info() {
  static const ModuleInfo info{
      ModuleKind::kVerdict,
      "no_progress",
      "1",
      "NVIDIA resiliency extension: no_progress_limit runs in a row that get no further than any "
      "before end "
      "the run (rollback the run before), whatever failed",
      {{"no_progress_limit",
        "this many runs in a row that get no further than the furthest step any run reached end "
        "the run with the "
        "verdict code_or_data (the run before, the code is rolled back; 0 = never)",
        "count", 4, 0, 100}},
      {{Facility::kEndRun}}};
  return info;
}
std::unique_ptr<StopVerdict> make_no_progress_verdict(const Params& p) {
  return std::make_unique<CountLadder>(no_progress_verdict_info(),
                                       static_cast<int>(p.get("no_progress_limit")),
                                       &Recurrence::runs_without_progress);
}

}  // namespace faultline::policies
