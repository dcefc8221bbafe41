#include "policies/stacks/byterobust/rounds.h"

#include <algorithm>

namespace faultline::policies {

std::vector<SlotId> empty_slots(const ClusterView& view) {
  std::vector<SlotId> out;
  if (view.empty_slot_count() == 0) return out;
  for (SlotId s = 0; s < view.slots(); ++s)
    if (view.machine_in(s) == kNoMachine) out.push_back(s);
  return out;
}

MachineSet departed(const LocalizationTest& test, const MachineSet& left, const ClusterView* view) {
  MachineSet out;
  if (left.empty() && !view) return out;  // the common case: nothing left during the search
  auto gone = [&](MachineId m) {
    if (view) return m < 0 || m >= view->machine_count() || view->slot_of(m) < 0;
    return m == kNoMachine || std::find(left.begin(), left.end(), m) != left.end();
  };
  auto check = [&](const MachineSet& ms) {
    for (MachineId m : ms)
      if (gone(m)) out.push_back(m);
  };
  if (auto* probe = std::get_if<RunProbe>(&test)) {
    check(probe->machines);
    for (const MachineSet& g : probe->groups) check(g);
  }
  if (auto* replay = std::get_if<RunReplay>(&test))
    for (const MachineSet& g : replay->groups) check(g);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::string machine_list(const MachineSet& machines) {
  std::string out = "[";
  for (std::size_t i = 0; i < machines.size(); ++i)
    out += (i ? "," : "") + std::to_string(machines[i]);
  return out + "]";
}

}  // namespace faultline::policies
