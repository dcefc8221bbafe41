// Acquisitions (acquisitions.h): AcquireMachines fills empty slots with parked standbys, or
// waits for them; AvoidMachines orders the standbys.
#include "realexec/controller/acquisitions.h"

#include <algorithm>

namespace faultline::live {

std::optional<Instant> Acquisitions::waiting_since() const {
  if (!waiting_) return std::nullopt;
  return waiting_->started;
}

void Acquisitions::acquire(ActionId id, const AcquireMachines& a) {
  const Instant t = j_.now();
  if (a.mode == AcquireMode::kOracle) {
    return j_.refuse(id, "live mode has no oracle spares", t);
  }
  if (a.mode == AcquireMode::kRequeue) {
    // A requeued job gets healthy machines: a slot whose agent is gone is refilled.
    for (SlotId s = 0; s < j_.cluster.slots(); ++s) {
      const MachineId m = j_.cluster.machine_in(s);
      if (m != kNoMachine && !j_.link.connected(m)) {
        j_.cluster.vacate(s);
        j_.cluster.set_health(m, Health::kEvicted);
        j_.note("requeue: " + j_.config.machine(m).name + " is unreachable and is left out");
        j_.taken_out(m);
      }
    }
  }
  std::vector<SlotId> slots = a.slots;
  if (slots.empty() || a.mode == AcquireMode::kRequeue)
    for (SlotId s = 0; s < j_.cluster.slots(); ++s)
      if (j_.cluster.machine_in(s) == kNoMachine &&
          std::find(slots.begin(), slots.end(), s) == slots.end())
        slots.push_back(s);
  std::vector<SlotId> empty;
  for (SlotId s : slots)
    if (s >= 0 && s < j_.cluster.slots() && j_.cluster.machine_in(s) == kNoMachine)
      empty.push_back(s);
  MachineSet ready;
  for (MachineId m : j_.cluster.standby())
    if (j_.link.connected(m) && j_.cluster.health(m) != Health::kEvicted) ready.push_back(m);
  if (ready.size() < empty.size()) {
    const std::string why = std::to_string(empty.size()) + " slots to fill, " +
                            std::to_string(ready.size()) + " standby machines connected";
    // Every mode waits, as a job waits in a scheduler's queue, until enough machines are
    // parked (a standby connects or an operator repairs a machine): a standby shortfall is
    // filled as the scheduler would fill it (action.h), as in the simulator.
    j_.note(std::string(mode_name(a.mode)) + " waits for machines: " + why);
    waiting_ = Waiting{id, empty, t};
    j_.save();  // the wait is journaled: its lost time continues across a restart
    return;
  }
  place_into(id, empty, ready, t);
}

void Acquisitions::place_into(ActionId id, const std::vector<SlotId>& empty, MachineSet ready,
                              Instant t) {
  // Machines the policy asked to be handed out last (AvoidMachines) join after the others.
  std::stable_partition(ready.begin(), ready.end(), [&](MachineId m) {
    return std::find(avoid_.begin(), avoid_.end(), m) == avoid_.end();
  });
  MachineSet placed;
  for (size_t i = 0; i < empty.size(); ++i) {
    j_.cluster.take_standby(ready[i]);
    j_.cluster.place(ready[i], empty[i]);
    placed.push_back(ready[i]);
  }
  j_.save();
  std::string names;
  for (MachineId m : placed) names += (names.empty() ? "" : ", ") + j_.config.machine(m).name;
  j_.outcome(id, true, placed.empty() ? "no empty slot" : "standby " + names + " joined", t);
  j_.deliver(MachinesReady{id, placed});
}

void Acquisitions::retry() {
  if (!waiting_) return;
  MachineSet ready;
  for (MachineId m : j_.cluster.standby())
    if (j_.link.connected(m) && j_.cluster.health(m) != Health::kEvicted) ready.push_back(m);
  std::vector<SlotId> empty;
  for (SlotId s : waiting_->slots)
    if (j_.cluster.machine_in(s) == kNoMachine) empty.push_back(s);
  if (ready.size() < empty.size()) return;
  const Waiting w = *waiting_;
  waiting_.reset();
  j_.waited(w.started);
  place_into(w.id, empty, ready, w.started);
}

}  // namespace faultline::live
