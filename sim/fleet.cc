// Fleet: per-machine state, bad machines and their ageing.
#include "sim/fleet.h"

#include <cmath>
#include <limits>

#include "policies/api/rng.h"

namespace faultline::sim {

namespace {
constexpr std::uint8_t kUndrawn = 2;
constexpr std::int64_t kFleetNever = std::numeric_limits<std::int64_t>::max();
}  // namespace

Fleet::Fleet(const scenarios::Scenario& sc, std::uint64_t replica, int machines, int domains)
    : sc_(sc), replica_(replica) {
  preemptible_left =
      sc.repair.fleet == scenarios::RepairSpec::Fleet::kFinite ? sc.repair.preemptible_machines : 0;
  const std::size_t expect =
      static_cast<std::size_t>(machines) * 5 / 4 + 16;  // replacements come later
  broken.reserve(expect);
  bad.reserve(expect);
  evidence.reserve(expect);
  fp_failed.reserve(expect);
  health_checks_of.reserve(expect);
  failures.reserve(expect);
  hits.reserve(expect);
  repairs_of.reserve(expect);
  for (MachineId m = 0; m < machines; ++m) track(m, true);
  spares_left = sc.repair.spare_machines >= 0
                    ? sc.repair.spare_machines
                    : static_cast<int>(std::lround(0.048 * sc.cluster.machines));
  if (sc.cluster.nvlink_spares > 0) {  // the spares are the trays each domain leaves free
    domain_free.assign(static_cast<std::size_t>(domains), sc.cluster.nvlink_spares);
    spares_left = domains * sc.cluster.nvlink_spares;
  }
}

void Fleet::track(MachineId /*m*/, bool may_be_bad) {
  broken.push_back(0);
  bad.push_back(may_be_bad && sc_.repair.bad_fraction > 0 ? kUndrawn : 0);
  turns_bad_at.push_back(may_be_bad && sc_.repair.turn_bad_per_machine_day > 0 ? -1 : kFleetNever);
  cures_of.push_back(0);
  hits.push_back(0);
  evidence.push_back(false);
  fp_failed.push_back(false);
  health_checks_of.push_back(0);
  failures.push_back(0);
  repairs_of.push_back(0);
}

std::int64_t Fleet::turn_bad_time(MachineId m, std::uint32_t spell, std::int64_t from) const {
  const double mean_ns = 86400e9 / sc_.repair.turn_bad_per_machine_day;
  const double gap = Rng({sc_.seed, replica_, 0xA6Eull, static_cast<std::uint64_t>(m), spell})
                         .exponential(mean_ns);
  return gap >= static_cast<double>(kFleetNever - 1 - from) ? kFleetNever - 1
                                                            : from + static_cast<std::int64_t>(gap);
}

bool Fleet::is_bad(MachineId m, std::int64_t now) {
  if (m < 0 || m >= static_cast<MachineId>(bad.size())) return false;
  if (bad[m] == kUndrawn)
    bad[m] = Rng({sc_.seed, replica_, 0xBADull, static_cast<std::uint64_t>(m)})
                 .bernoulli(sc_.repair.bad_fraction);
  if (bad[m] == 0 && turns_bad_at[m] != kFleetNever) {
    // Ageing: a good machine turns bad after an exponential time from the start, or from
    // its last cure (its own stream, one draw per spell of being good).
    if (turns_bad_at[m] < 0) turns_bad_at[m] = turn_bad_time(m, 0, 0);
    if (now >= turns_bad_at[m]) bad[m] = 1;
  }
  return bad[m] == 1;
}

void Fleet::cure(MachineId m, std::int64_t now) {
  bad[m] = 0;
  ++cures_of[m];
  if (sc_.repair.turn_bad_per_machine_day > 0) turns_bad_at[m] = turn_bad_time(m, cures_of[m], now);
}

bool Fleet::waiting_for_machines() const {
  for (const Want& w : wants)
    if (w.slot >= 0) return true;
  return false;
}

}  // namespace faultline::sim
