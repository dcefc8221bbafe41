// SimWorld's failure prediction and migration (TrainMover, arXiv 2412.12636): warnings that
// announce a fault on its machine before it strikes, warnings that announce nothing, and
// MigrateMachines, which moves a machine's work to a warm standby while the job trains.
//
// A warned fault. The fault model draws its arrival as usual (the same stream, the same
// thinning); for a category with a `warning`, a per-fault stream decides whether this one is
// announced (share `probability`). If it is, FailureWarning goes out at the drawn arrival on
// the machine in the fault's slot, and the fault strikes that machine lead_time_s later:
// shifting every arrival of a Poisson process by a constant keeps it a Poisson process of the
// same rate, so the category's faults come as often as without warnings, only later by the
// lead (a renewal process stays the same renewal process, shifted). If by then the machine
// has left the job (migrated, evicted; or it came back from a repair since), the fault
// hits nothing in the job: its ledger outcome is left_job.
//
// False warnings. Per category, a Poisson stream at false_per_machine_day x the job's slots
// per day, each on a uniformly drawn slot's machine; its own stream per (seed, replica,
// category), so the warnings are the same whatever the policy does (the machine in the slot
// is whoever holds it then).
//
// The oracle (EnableOracle) is told at a true warning what it announces (OracleFault with a
// lead), and its migrations take fresh, ready spares instead of the pool's standbys.
//
// A migration. Each machine gets a parked warm standby (refused when the pool has fewer);
// its state (job.checkpoint_bytes_per_machine) is copied as a SimGrid transfer from the
// machine's slot host to a storage host, which stands in for the standby (the platform has
// hosts for the job's slots and for storage only), while the standbys wake
// (diagnosis.standby_wake_s). The job keeps training meanwhile. When both are done the job
// pauses for the action's `pause` (accounted as degraded, as a MitigateSlowdown's pause) and
// the machines swap: the standby joins the slot (no restart), the old machine goes to repair
// as an eviction: a true one when a warned fault was on its way to it (or it was broken), a
// false one (and a needless migration) otherwise. If the job stops first, the migration is
// abandoned: the standbys go back to the pool, the old machines stay, ActionFailed follows.
#include <algorithm>

#include "sim/sim_world.h"
#include "sim/sim_world_internal.h"

namespace faultline::sim {

using internal::kNever;
using internal::secs;
using scenarios::Symptom;

namespace {
// What a warning says it watched: the inspection kind that sees the category, else "machine".
std::string warning_kind(const scenarios::FaultCategory& cat) {
  return cat.alert.empty() ? std::string("machine") : cat.alert;
}
}  // namespace

// Failure prediction and migration (sim_migration.cc). warn: a warned category's arrival
// announced on its machine (true: it strikes later, from warned_strike). start_warnings:
// the false-warning streams' first arrivals. migration_step: a migration's parts are done
// one by one; the last swaps the machines. abandon_migrations: the job stopped.
bool SimWorld::warn(const FaultArrival& a, std::uint64_t key) {
  const auto& cat = sc_.faults[a.category];
  const MachineId m = view_.machine_in(a.slot);
  // The predictor watches machines: an empty slot (a machine being replaced) has none.
  if (m == kNoMachine || cat.warning.probability <= 0) return false;
  if (!Rng({sc_.seed, replica_, 0x3A27ull, key}).bernoulli(cat.warning.probability)) return false;
  ++result_.warnings;
  ++warnings_.on_machine[m];
  const std::uint64_t token = warnings_.warned.size();
  warnings_.warned.push_back({a, key, m, fleet_.repairs_of[m]});
  const Duration lead = Duration::seconds(cat.warning.lead_time_s);
  deliver_at(now_, FailureWarning{m, warning_kind(cat), lead, "predicted: " + cat.name}, false);
  if (settings_.oracle) {
    // The oracle knows which warnings are true: this one, and what it announces.
    OracleFault o{{m}, cat.name, cat.persistent, cat.code_bug, cat.data_bug, lead};
    o.slowdown = cat.symptom == Symptom::kSlowdown;
    deliver_at(now_, std::move(o), false);
  }
  push(now_ + lead.ns, Internal{Internal::kWarnedStrike, token});
  return true;
}

void SimWorld::warned_strike(std::uint64_t token) {
  const Warnings::Warned w = warnings_.warned[token];
  if (auto it = warnings_.on_machine.find(w.machine);
      it != warnings_.on_machine.end() && --it->second == 0)
    warnings_.on_machine.erase(it);
  const SlotId s = view_.slot_of(w.machine);
  if (s >= 0 && fleet_.repairs_of[w.machine] == w.repairs) {
    FaultArrival a = w.arrival;
    a.slot = s;
    return strike(a, w.key);
  }
  // Its machine left the job before the fault came: nothing in the job to hit.
  ++result_.faults_injected;
  ++result_.categories[w.arrival.category].injected;
  Fault f;
  f.id = symptoms_.faults().size();
  f.key = w.key;
  f.category = w.arrival.category;
  f.at = now_;
  f.machines = {w.machine};
  f.active = false;
  f.outcome = Outcome::kLeft;
  symptoms_.faults().push_back(std::move(f));
}

void SimWorld::start_warnings() {
  warnings_.false_rng.clear();
  for (std::size_t c = 0; c < sc_.faults.size(); ++c) {
    warnings_.false_rng.emplace_back(
        std::initializer_list<std::uint64_t>{sc_.seed, replica_, 0xFA15Eull, c});
    const auto& w = sc_.faults[c].warning;
    if (w.enabled && w.false_per_machine_day > 0 && view_.slots() > 0) {
      const double mean_ns = 86400e9 / (w.false_per_machine_day * view_.slots());
      const double gap = warnings_.false_rng[c].exponential(mean_ns);
      if (gap < static_cast<double>(horizon_ - now_))
        push(now_ + static_cast<std::int64_t>(gap), Internal{Internal::kFalseWarning, c});
    }
  }
}

void SimWorld::false_warning(int category) {
  const auto& cat = sc_.faults[category];
  Rng& rng = warnings_.false_rng[category];
  const SlotId s = static_cast<SlotId>(rng.below(static_cast<std::uint64_t>(view_.slots())));
  const double gap = rng.exponential(86400e9 / (cat.warning.false_per_machine_day * view_.slots()));
  if (gap < static_cast<double>(horizon_ - now_))
    push(now_ + static_cast<std::int64_t>(gap),
         Internal{Internal::kFalseWarning, static_cast<std::uint64_t>(category)});
  const MachineId m = view_.machine_in(s);
  if (m == kNoMachine) return;  // a slot being refilled: no machine to warn about
  ++result_.warnings;
  ++result_.warnings_false;
  deliver_at(now_,
             FailureWarning{m, warning_kind(cat), Duration::seconds(cat.warning.lead_time_s),
                            "predicted: " + cat.name},
             false);
}

void SimWorld::apply(ActionId id, const MigrateMachines& a) {
  // act() applied the contract's refusals: the job trains and every machine is in it.
  MachineSet machines;
  for (MachineId m : a.machines)
    if (std::find(machines.begin(), machines.end(), m) == machines.end()) machines.push_back(m);
  // The oracle's spares are unlimited and ready (as AcquireMode::kOracle's): no pool, no wake.
  if (!settings_.oracle && view_.standby().size() < machines.size())
    return refuse(id, "the standby pool has " + std::to_string(view_.standby().size()) +
                          " warm standbys for " + std::to_string(machines.size()) + " machines");
  Migration mg{id, {}, a.pause.ns, settings_.oracle ? 1 : 2, a.mechanism, settings_.oracle};
  std::vector<Transfer> copy;
  const double bytes = sc_.job.checkpoint_bytes_per_machine;
  for (MachineId m : machines) {
    MachineId standby;
    if (settings_.oracle) {
      standby = new_machine(false);
      view_.set_domain(standby, view_.domain_of_slot(view_.slot_of(m)));
    } else {
      standby = view_.standby().front();
      unpark_standby(standby);
    }
    mg.moves.emplace_back(m, standby);
    const SlotId s = view_.slot_of(m);
    if (bytes > 0)
      copy.push_back(
          {platform_.slot_host(s), platform_.storage_host(s % platform_.storage_hosts()), bytes});
  }
  const bool wake = !mg.ready_spares;
  migrations_.push_back(std::move(mg));
  if (wake) push(now_ + secs(sc_.diagnosis.standby_wake_s), Internal{Internal::kMigrateStep, id});
  run_batch(std::move(copy), Internal{Internal::kMigrateStep, id});
}

void SimWorld::migration_step(ActionId id) {
  auto it = std::find_if(migrations_.begin(), migrations_.end(),
                         [&](const Migration& m) { return m.id == id; });
  if (it == migrations_.end() || --it->waiting > 0) return;  // abandoned, or a part to go
  const Migration mg = std::move(*it);
  migrations_.erase(it);
  note_mechanism(mg.mechanism);
  progress_.pause(mg.pause);
  MachineSet joined;
  for (const auto& [old, standby] : mg.moves) {
    const SlotId s = view_.slot_of(old);
    if (s < 0) {  // it left meanwhile (the job ran on): its standby goes back
      give_back(mg, standby);
      continue;
    }
    view_.vacate(s);
    on_leave(old);
    view_.place(standby, s);
    on_join(standby);
    joined.push_back(standby);
    ++result_.migrations;
    if (fleet_.broken[old] || warnings_.on_machine.count(old)) {
      ++result_.evictions_true;
    } else {
      ++result_.evictions_false;  // healthy: the warning announced nothing
      ++result_.migrations_needless;
    }
    start_repair(old);
  }
  update_rate(true);
  refill_pool();
  deliver_at(now_, MachinesReady{id, std::move(joined)}, false);
}

void SimWorld::give_back(const Migration& mg, MachineId standby) {
  if (mg.ready_spares)
    machine_free(standby, false);  // an oracle spare not used: the free pool has it
  else
    park_standby(standby);
}

void SimWorld::abandon_migrations() {
  for (const Migration& mg : migrations_) {
    for (const auto& [old, standby] : mg.moves) give_back(mg, standby);
    deliver_at(now_, ActionFailed{mg.id, "job stopped during the migration"}, false);
  }
  migrations_.clear();
}

}  // namespace faultline::sim
