// Warnings: failure prediction as the scenario's categories configure it (`warning`). A
// warned arrival is announced on its machine and strikes later unless the machine left;
// false warnings of each category come from their own stream. Plain state; the
// announcements, strikes and migrations are SimWorld's (sim_migration.cc).
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "policies/api/ids.h"
#include "policies/api/rng.h"
#include "sim/faults.h"

namespace faultline::sim {

struct Warnings {
  struct Warned {
    FaultArrival arrival;
    std::uint64_t key = 0;  // the arrival index: the fault's streams
    MachineId machine = kNoMachine;
    std::uint32_t repairs = 0;  // the machine's repairs when warned (the same machine after)
  };
  std::vector<Warned> warned;           // by kWarnedStrike token
  std::map<MachineId, int> on_machine;  // warned faults yet to strike, by machine
  std::vector<Rng> false_rng;           // per category: its false warnings' stream
};

}  // namespace faultline::sim
