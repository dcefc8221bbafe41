// SymptomModel: the arrival thinning of bad machines and the ledger's outcomes.
#include "sim/symptom_model.h"

#include <algorithm>

namespace faultline::sim {

using scenarios::FaultScope;
using scenarios::Symptom;

namespace {
// Bad machines (cluster.repair): in machine-scope hardware categories a bad machine fails
// bad_rate_factor (k) times as often as a good one and the category's rate λ stays the
// population mean, so a good machine fails at λ/(1-f+f·k). Arrivals are drawn at the bad
// machines' rate λ·k/(1-f+f·k) on every slot and thinned by the machine that is there
// (kept with probability 1 for a bad machine, 1/k for a good one).
bool hardware(const scenarios::FaultCategory& c) {
  return c.scope == FaultScope::kMachine && !c.job_bug() && c.symptom != Symptom::kManual &&
         c.rate_per_machine_day > 0;
}
double thin_factor(const scenarios::Scenario& sc, const scenarios::FaultCategory& c) {
  const double f = sc.repair.bad_fraction, k = sc.repair.bad_rate_factor;
  if (!hardware(c) || !sc.repair.bad_model() || k <= 1) return 1;
  return k / (1 - f + f * k);
}
}  // namespace

SymptomModel::SymptomModel(const scenarios::Scenario& sc, std::uint64_t replica)
    : seed_(sc.seed), replica_(replica) {
  for (const auto& c : sc.faults) thin_.push_back(thin_factor(sc, c));
}

std::vector<scenarios::FaultCategory> SymptomModel::arrival_categories(
    const scenarios::Scenario& sc) {
  std::vector<scenarios::FaultCategory> cats = sc.faults;
  for (auto& c : cats) c.rate_per_machine_day *= thin_factor(sc, c);
  return cats;
}

void SymptomModel::settle(Fault& f, Outcome o) {
  if (f.outcome != Outcome::kPending) return;
  f.outcome = o;
  pending_.erase(std::remove(pending_.begin(), pending_.end(), f.id), pending_.end());
}

}  // namespace faultline::sim
