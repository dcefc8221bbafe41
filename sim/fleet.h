// Fleet: the simulator's machines beyond what the job's slots show, and the acquisitions
// that fill the slots. Per machine (index = MachineId): whether it is bad (drawn from its
// own stream the first time it is asked, cured by a repair, turned bad by ageing), the
// persistent fault it carries, what named it, how often faults struck it and it was
// repaired. For the fleet: the free pool the scheduler draws from (never-used spares, per
// NVLink domain too, and machines back from repair), a finite fleet's waits, preemptions
// and repairs under way, and the warm standby pool's target and refills.
//
// SimWorld drives it (the scheduler's draws, repairs and joins change the cluster view and
// the result as well); the fleet keeps the state and the decisions that need nothing else.
// Its fields are plain state, read and written by SimWorld's fleet code (sim_fleet.cc).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "policies/api/action.h"
#include "scenarios/scenario.h"

namespace faultline::sim {

class Fleet {
 public:
  // An acquisition under way (AcquireMachines).
  struct Acquire {
    ActionId id = 0;
    AcquireMode mode;
    std::vector<SlotId> slots;      // to be filled by the scheduler
    std::vector<SlotId> from_pool;  // to be filled by waking standbys
    // same_domain: machines of each slot's own NVLink domain, taken now, placed when woken.
    std::vector<std::pair<SlotId, MachineId>> reserved;
    int waiting = 0;      // parts not done yet
    bool waking = false;  // of those, standbys waking (the others are the scheduler's)
  };
  // Finite fleet: a slot of acquisition `acq` (or, with slot -1, a standby refill) that no
  // free machine could serve waits for the next machine to come free, in order.
  struct Want {
    ActionId acq = 0;
    SlotId slot = -1;
  };

  // The fleet of a job of `machines` machines in `domains` NVLink domains (`sc` outlives
  // it); the job's machines 0..machines-1 are tracked.
  Fleet(const scenarios::Scenario& sc, std::uint64_t replica, int machines, int domains);

  // Per-machine state for a new id (ids come in order: m == the count tracked so far).
  // `may_be_bad`: it can be drawn bad and age (a preempted machine's replacement cannot).
  void track(MachineId m, bool may_be_bad);
  // Whether machine m is bad at `now`, drawn from its own stream the first time it is
  // asked (the job's first machines are the same in every stack); false for an unknown id.
  bool is_bad(MachineId m, std::int64_t now);
  // A successful repair cured machine m at `now`: good again, and it may age again.
  void cure(MachineId m, std::int64_t now);
  // A slot of the job waits for a machine to come free.
  bool waiting_for_machines() const;
  // Machine m was asked to be handed out last (AvoidMachines).
  bool avoided(MachineId m) const { return static_cast<std::size_t>(m) < avoid.size() && avoid[m]; }

  // Per machine (index = MachineId).
  std::vector<FaultId> broken;    // active persistent fault id + 1, 0 = healthy
  std::vector<std::uint8_t> bad;  // fails bad_rate_factor x as often: 0 no, 1 yes, 2 not drawn yet
  std::vector<bool> evidence;     // an alert, a failed test or a crash log named it since it joined
  std::vector<bool> fp_failed;    // a test failed it while it was healthy
  std::vector<std::uint32_t> health_checks_of;  // the scheduler's checks of it: its stream's key
  std::vector<int> failures;                    // persistent faults that landed on it (retirement)
  std::vector<int> hits;                   // faults of any kind that landed on it (host selection)
  std::vector<std::int64_t> turns_bad_at;  // a good machine turns bad then (-1: not drawn)
  std::vector<std::uint32_t> cures_of;     // times it was cured (its ageing stream's key)
  std::vector<std::uint32_t> repairs_of;
  std::vector<bool> avoid;  // handed out last (AvoidMachines)

  // The fleet.
  std::vector<Acquire> acquiring;
  std::vector<Want> wants;
  int preemptible_left = 0;
  int preempting = 0;
  int in_repair = 0;                 // machines in the repair pipeline (coming back)
  std::vector<MachineId> free_pool;  // repaired machines the scheduler can hand out
  int spares_left = 0;               // never-used spare machines still in the free pool
  std::vector<int> domain_free;      // of those, per NVLink domain (cluster.nvlink_spares)
  std::uint64_t draws = 0;           // scheduler draws from the free pool
  int pool_target = -1;              // -1: the scenario's standby_machines
  int refills = 0;                   // pool refills under way
  std::int64_t standby_counted = 0;  // the pool's machine-time is counted up to here

 private:
  // When good machine m, good since `from` (its spell `spell` of being good), turns bad.
  std::int64_t turn_bad_time(MachineId m, std::uint32_t spell, std::int64_t from) const;

  const scenarios::Scenario& sc_;
  std::uint64_t replica_;
};

}  // namespace faultline::sim
