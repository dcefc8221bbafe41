// Job: the in-place restart's slots.
#include "sim/job.h"

#include <algorithm>

namespace faultline::sim {

std::vector<SlotId> Job::restarted_slots() const {
  std::vector<SlotId> out = fresh_slots;
  std::sort(out.begin(), out.end());  // the transfer list's key needs slot order
  if (out.empty()) out.push_back(0);
  return out;
}

}  // namespace faultline::sim
