// What the files that define SimWorld (sim_world.cc, sim_actions.cc, sim_symptoms.cc,
// sim_fleet.cc, sim_migration.cc, sim_replicas.cc) share and nobody else needs: the unit conversion
// of the event queue's integer nanoseconds, its "never", and the overload set std::visit takes.
#pragma once

#include <cstdint>
#include <limits>

#include "policies/api/time.h"

namespace faultline::sim::internal {

inline constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::max();
inline std::int64_t secs(double s) { return Duration::seconds(s).ns; }
template <class... Ts>
struct Overloaded : Ts... {
  using Ts::operator()...;
};
template <class... Ts>
Overloaded(Ts...) -> Overloaded<Ts...>;

}  // namespace faultline::sim::internal
