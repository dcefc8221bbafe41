// Small strongly-typed identifiers shared by policies and backends.
#pragma once

#include <cstdint>
#include <vector>

namespace faultline {

// A physical machine. Ids are dense: 0..machines-1 are the job's initial machines,
// standby and replacement machines get the following ids.
using MachineId = std::int32_t;
// A position in the job layout (pipeline stage x data-parallel replica). A slot keeps
// its id when the machine in it is replaced.
using SlotId = std::int32_t;
using ActionId = std::uint64_t;
using TimerId = std::uint64_t;
// A fault incident as seen by ground truth; used only by metrics, never by policies.
using FaultId = std::uint64_t;

using MachineSet = std::vector<MachineId>;

inline constexpr MachineId kNoMachine = -1;

}  // namespace faultline
