// SimWorld's fleet: the machines beyond the job's slots and what happens to them. Which
// machines are bad (drawn, cured by repair, turned bad by ageing), how the scheduler hands
// out a free machine (random or fewest failures first; a never-used spare, a machine back
// from repair, a fresh one from an endless fleet, or nothing from a finite one), the node
// health check, the repair pipeline (its durations and outcomes), a finite fleet's waits
// and preemptions, and the warm standby pool's refills. Split from sim_world.cc by concern;
// the slots the job holds (who joins and leaves) and the acquisitions that fill them are
// here too.
#include <algorithm>
#include <cmath>
#include <limits>

#include "sim/sim_world.h"
#include "sim/sim_world_internal.h"

namespace faultline::sim {

using internal::kNever;
using internal::secs;
using scenarios::FaultScope;

MachineId SimWorld::new_machine(bool may_be_bad) {
  const MachineId m = view_.add_machine();
  fleet_.track(m, may_be_bad);
  return m;
}

// kNoMachine when a finite fleet has no free machine.
MachineId SimWorld::draw_machine() {
  // The scheduler hands out a machine from the free pool, chosen at random (AIReSim's
  // default host selection): a never-used spare or a machine back from repair. The
  // wider cluster supplies a fresh machine when the pool is empty. Machines the policy
  // asked to be handed out last (AvoidMachines) are drawn only when nothing else is left.
  // Its node health check drains broken machines with health_check_recall.
  auto avoided = [&](MachineId m) { return fleet_.avoided(m); };
  while (true) {
    std::size_t usable =
        fleet_.free_pool.size();  // pool machines not avoided (all of them without a list)
    if (!fleet_.avoid.empty())
      usable =
          static_cast<std::size_t>(std::count_if(fleet_.free_pool.begin(), fleet_.free_pool.end(),
                                                 [&](MachineId m) { return !avoided(m); }));
    const bool last_resort = fleet_.spares_left == 0 && usable == 0;  // only avoided machines left
    if (last_resort) usable = fleet_.free_pool.size();
    std::uint64_t n = static_cast<std::uint64_t>(fleet_.spares_left) + usable;
    // Fewest failures first: only the machines struck least often so far are candidates
    // (never-used spares have none).
    int fewest = -1;
    if (n > 0 && sc_.scheduler.host_selection == scenarios::SchedulerSpec::Pick::kFewestFailures) {
      fewest = fleet_.spares_left > 0 ? 0 : std::numeric_limits<int>::max();
      for (MachineId x : fleet_.free_pool)
        if (last_resort || !avoided(x)) fewest = std::min(fewest, fleet_.hits[x]);
      n = fewest == 0 ? static_cast<std::uint64_t>(fleet_.spares_left) : 0;
      for (MachineId x : fleet_.free_pool)
        if ((last_resort || !avoided(x)) && fleet_.hits[x] == fewest) ++n;
    }
    auto candidate = [&](MachineId x) {
      return (last_resort || !avoided(x)) && (fewest < 0 || fleet_.hits[x] == fewest);
    };
    const std::uint64_t spares = fewest > 0 ? 0 : static_cast<std::uint64_t>(fleet_.spares_left);
    MachineId m;
    if (n == 0) {
      if (sc_.repair.fleet == scenarios::RepairSpec::Fleet::kFinite) return kNoMachine;
      // The wider cluster supplies a fresh machine: beyond the fleet, counted.
      m = new_machine(true);
      ++result_.machines_beyond_fleet;
    } else {
      const std::uint64_t i = Rng({sc_.seed, replica_, 0x5C4Eull, fleet_.draws++}).below(n);
      if (i < spares) {
        --fleet_.spares_left;
        m = new_machine(true);
        // The i-th spare tray, counted domain by domain.
        std::uint64_t k = i;
        for (std::size_t d = 0; d < fleet_.domain_free.size(); ++d) {
          if (k < static_cast<std::uint64_t>(fleet_.domain_free[d])) {
            --fleet_.domain_free[d];
            view_.set_domain(m, static_cast<int>(d));
            break;
          }
          k -= static_cast<std::uint64_t>(fleet_.domain_free[d]);
        }
      } else {
        // The (i - spares)-th candidate of the pool, in pool order.
        std::size_t k = 0;
        for (std::uint64_t skip = i - spares;; ++k)
          if (candidate(fleet_.free_pool[k])) {
            if (skip == 0) break;
            --skip;
          }
        m = fleet_.free_pool[k];
        fleet_.free_pool.erase(fleet_.free_pool.begin() + static_cast<std::ptrdiff_t>(k));
      }
    }
    if (health_check_drains(m)) {
      start_repair(m);
      continue;
    }
    return m;
  }
}

// A free machine of NVLink domain d (a never-used spare tray of its rack, else one back
// from repair there), health-checked as draw_machine's; kNoMachine when it has none.
MachineId SimWorld::draw_in_domain(int d) {
  while (true) {
    MachineId m = kNoMachine;
    if (d >= 0 && static_cast<std::size_t>(d) < fleet_.domain_free.size() &&
        fleet_.domain_free[d] > 0) {
      --fleet_.domain_free[d];
      --fleet_.spares_left;
      m = new_machine(true);
      view_.set_domain(m, d);
    } else {
      auto it = std::find_if(fleet_.free_pool.begin(), fleet_.free_pool.end(), [&](MachineId x) {
        return view_.domain_of(x) == d &&
               !(static_cast<std::size_t>(x) < fleet_.avoid.size() && fleet_.avoid[x]);
      });
      if (it == fleet_.free_pool.end()) return kNoMachine;
      m = *it;
      fleet_.free_pool.erase(it);
    }
    if (health_check_drains(m)) {
      start_repair(m);
      continue;
    }
    return m;
  }
}

// Drops every acquisition under way; machines taken for them go back to the free pool.
void SimWorld::drop_acquisitions() {
  for (const Acquire& a : fleet_.acquiring)
    for (const auto& [slot, m] : a.reserved) fleet_.free_pool.push_back(m);
  fleet_.acquiring.clear();
  std::erase_if(fleet_.wants, [](const Fleet::Want& w) { return w.slot >= 0; });
}

void SimWorld::want_machine(ActionId acq, SlotId slot) {
  fleet_.wants.push_back({acq, slot});
  // A preemptible machine for each want the ones under way do not cover.
  if (fleet_.preemptible_left > 0 && fleet_.preempting < static_cast<int>(fleet_.wants.size())) {
    --fleet_.preemptible_left;
    ++fleet_.preempting;
    push(now_ + secs(sc_.repair.preempt_s), Internal{Internal::kPreempted, 0});
  }
}

// A machine comes free (back from repair, or preempted): it serves the oldest want, or
// refills the standby pool (standby_refill "repaired"), or joins the free pool.
void SimWorld::machine_free(MachineId m, bool repaired) {
  const bool repaired_refill =
      repaired && sc_.scheduler.standby_refill == scenarios::SchedulerSpec::Refill::kRepaired &&
      static_cast<int>(view_.standby().size()) + fleet_.refills < fleet_.pool_target;
  if (fleet_.wants.empty() && !repaired_refill) {
    fleet_.free_pool.push_back(m);  // the scheduler's health check sees it when it is drawn
    return;
  }
  // Handed on at once: the scheduler's node health check sees it now.
  if (health_check_drains(m)) {
    start_repair(m);
    return;
  }
  while (!fleet_.wants.empty()) {
    const Fleet::Want w = fleet_.wants.front();
    fleet_.wants.erase(fleet_.wants.begin());
    if (w.slot < 0) {  // a standby refill that found no machine
      --fleet_.refills;
      park_standby(m);
      return;
    }
    auto it = std::find_if(fleet_.acquiring.begin(), fleet_.acquiring.end(),
                           [&](const Acquire& a) { return a.id == w.acq; });
    if (it == fleet_.acquiring.end() || view_.machine_in(w.slot) != kNoMachine)
      continue;  // given up meanwhile
    view_.place(m, w.slot);
    on_join(m);
    job_.mark_fresh(w.slot);
    update_rate(true);
    const Internal pulled{Internal::kAcquirePulled, w.acq};
    if (sc_.job.image_bytes > 0 && it->mode != AcquireMode::kRequeue)
      run_batch({{platform_.storage_host(w.slot % platform_.storage_hosts()),
                  platform_.slot_host(w.slot), sc_.job.image_bytes}},
                pulled);
    else
      push(now_, pulled);
    return;
  }
  if (repaired_refill)
    park_standby(m);
  else
    fleet_.free_pool.push_back(m);
}

// The scheduler's node health check drains machine m (it has an active persistent fault
// and the check sees it, with health_check_recall).
bool SimWorld::health_check_drains(MachineId m) {
  if (!fleet_.broken[m]) return false;
  const std::uint32_t n = fleet_.health_checks_of[m]++;
  if (!Rng({sc_.seed, replica_, 0x4EA1ull, static_cast<std::uint64_t>(m), n})
           .bernoulli(sc_.scheduler.health_check_recall))
    return false;
  ++result_.health_check_drains;
  return true;
}

void SimWorld::start_repair(MachineId m) {
  view_.set_health(m, Health::kEvicted);
  const auto& rp = sc_.repair;
  Rng rng({sc_.seed, replica_, 0x4E9A1ull, static_cast<std::uint64_t>(m), fleet_.repairs_of[m]++});
  // Token: the machine, whether the repair cleared its fault (bit 0) and cured it (bit 1).
  const std::uint64_t token = static_cast<std::uint64_t>(m) << 2;
  if (!fleet_.broken[m]) {
    // Healthy (a false failure, over-eviction): the automatic check passes it.
    push(now_ + repair_ns(rp.auto_h, rng), Internal{Internal::kRepaired, token | 1});
    ++fleet_.in_repair;
    return;
  }
  if (rp.retire_after > 0 && fleet_.failures[m] >= rp.retire_after) {
    ++result_.retired;
    return;
  }
  const auto& cat = sc_.faults[symptoms_.faults()[fleet_.broken[m] - 1].category];
  const bool manual = rng.bernoulli(rp.to_manual);
  const bool fixed = !rng.bernoulli(manual ? rp.manual_fail : rp.auto_fail);
  // A failed repair leaves the fault (our default), or only the machine's badness (AIReSim).
  const bool clears = fixed || rp.failed_repair_leaves == scenarios::RepairSpec::Leaves::kBadness;
  const bool cures =
      fixed && rp.cure_bad > 0 && fleet_.is_bad(m, now_) && rng.bernoulli(rp.cure_bad);
  std::int64_t took;
  if (rp.repair_time == scenarios::RepairSpec::Dist::kFixed) {
    took = secs((rp.auto_h + (manual ? cat.repair_h : 0)) * 3600);
  } else {
    took = repair_ns(rp.auto_h, rng);
    if (manual) took += repair_ns(cat.repair_h, rng);
  }
  push(now_ + took, Internal{Internal::kRepaired, token | (clears ? 1 : 0) | (cures ? 2 : 0)});
  ++fleet_.in_repair;
}

// A repair ends (start_repair's token: the machine, fault cleared, cured): the machine
// comes free.
void SimWorld::repaired(std::uint64_t token) {
  const MachineId m = static_cast<MachineId>(token >> 2);
  --fleet_.in_repair;
  if (token & 1) {
    if (fleet_.broken[m]) {
      Fault& f = symptoms_.faults()[fleet_.broken[m] - 1];
      fleet_.broken[m] = 0;
      bool any = false;
      for (MachineId x : f.machines) any |= fleet_.broken[x] == f.id + 1;
      if (!any) f.active = false;
    }
    ++result_.repairs;
  }
  if (token & 2) {  // a successful repair cured a bad machine; it may age again
    fleet_.cure(m, now_);
  }
  view_.set_health(m, Health::kHealthy);
  machine_free(m, true);
}

// A repair's duration with mean `mean_h`, as cluster.repair.repair_time draws it.
std::int64_t SimWorld::repair_ns(double mean_h, Rng& rng) const {
  const double mean_s = mean_h * 3600;
  switch (sc_.repair.repair_time) {
    case scenarios::RepairSpec::Dist::kFixed:
      return secs(mean_s);
    case scenarios::RepairSpec::Dist::kExponential:
      return mean_s > 0 ? secs(rng.exponential(mean_s)) : 0;
    case scenarios::RepairSpec::Dist::kLognormal: {
      if (mean_s <= 0) return 0;
      const double sigma = sc_.repair.repair_sigma;
      return secs(rng.lognormal(std::log(mean_s) - sigma * sigma / 2, sigma));
    }
  }
  return secs(mean_s);
}

void SimWorld::count_standby_time() {
  if (now_ <= fleet_.standby_counted) return;
  result_.standby_machine_s += static_cast<double>(view_.standby().size()) *
                               static_cast<double>(now_ - fleet_.standby_counted) * 1e-9;
  fleet_.standby_counted = now_;
}

// The warm standby pool changes only through these two: each first adds the pool's
// machine-time since its last change to ReplicaResult::standby_machine_s.
void SimWorld::park_standby(MachineId m) {
  count_standby_time();
  view_.add_standby(m);
}

void SimWorld::unpark_standby(MachineId m) {
  count_standby_time();
  view_.take_standby(m);
}

// Schedules cold standbys toward the pool's target. With standby_refill "repaired" only
// the scheduler's own host selection (`by_scheduler`: the start, a replacement beyond
// the pool) draws them from the free pool; repaired machines refill it otherwise.
void SimWorld::refill_pool(bool by_scheduler) {
  if (sc_.scheduler.standby_refill == scenarios::SchedulerSpec::Refill::kRepaired && !by_scheduler)
    return;
  // A refill is a cold machine from the scheduler plus its self-check.
  while (static_cast<int>(view_.standby().size()) + fleet_.refills < fleet_.pool_target) {
    ++fleet_.refills;
    push(now_ + secs(sc_.scheduler.reschedule_base_s + sc_.scheduler.reschedule_per_machine_s +
                     sc_.diagnosis.gpu_diag_s),
         Internal{Internal::kPoolRefilled, 0});
  }
}

void SimWorld::on_leave(MachineId m) {
  // Pending faults whose machines have all left the job never strike it: caught when
  // something named the machine (an alert, a failed test, a crash log), else left.
  std::vector<FaultId> gone;
  for (FaultId id : symptoms_.pending()) {
    const Fault& f = symptoms_.faults()[id];
    if (sc_.faults[f.category].scope == FaultScope::kJob ||
        std::find(f.machines.begin(), f.machines.end(), m) == f.machines.end())
      continue;
    bool still = false;
    for (MachineId x : f.machines) still |= view_.slot_of(x) >= 0;
    if (!still) gone.push_back(id);
  }
  for (FaultId id : gone)
    symptoms_.settle(symptoms_.faults()[id],
                     fleet_.evidence[m] ? Outcome::kCaught : Outcome::kLeft);
}

// Machines entering and leaving the job (any slot), and the repair pipeline (the fleet's
// part in sim_fleet.cc).
void SimWorld::on_join(MachineId m) {
  if (opt_.action_records)
    result_.decisions.push_back("R " + std::to_string(now_) + " J " + std::to_string(m) + " " +
                                std::to_string(view_.slot_of(m)));
  fleet_.evidence[m] = false;
  fleet_.fp_failed[m] = false;
  if (!fleet_.broken[m]) return;
  // A machine whose repair failed (or that the health check missed) brings its fault
  // back: a recurrence with its own ledger entry, striking at the next start.
  const Fault& old = symptoms_.faults()[fleet_.broken[m] - 1];
  Fault f;
  f.id = symptoms_.faults().size();
  f.key = (1ull << 62) + f.id;
  f.category = old.category;
  f.at = now_;
  f.slots = {view_.slot_of(m)};
  f.machines = {m};
  f.alert_seen = old.alert_seen;
  fleet_.broken[m] = f.id + 1;
  ++result_.categories[f.category].recurred;
  symptoms_.faults().push_back(std::move(f));
  apply_symptom(symptoms_.faults().back(), false);
}

std::vector<SlotId> SimWorld::empty_slots() const {
  std::vector<SlotId> out;
  for (SlotId s = 0; s < view_.slots(); ++s)
    if (view_.machine_in(s) == kNoMachine) out.push_back(s);
  return out;
}

// False when a finite fleet has no free machine for it.
bool SimWorld::place_new(SlotId s, bool oracle) {
  // The oracle's unlimited ready spares are fresh, good machines; the scheduler's come
  // from the free pool.
  const MachineId m = oracle ? new_machine(false) : draw_machine();
  if (m == kNoMachine) return false;
  if (oracle) view_.set_domain(m, view_.domain_of_slot(s));  // ready spares where they are needed
  view_.place(m, s);
  on_join(m);
  job_.mark_fresh(s);
  return true;
}

void SimWorld::acquire_scheduled(ActionId id) {
  auto it = std::find_if(fleet_.acquiring.begin(), fleet_.acquiring.end(),
                         [&](const Acquire& a) { return a.id == id; });
  if (it == fleet_.acquiring.end()) return;
  const Internal pulled{Internal::kAcquirePulled, id};
  if (it->mode == AcquireMode::kRequeue) {
    // Every machine of the requeued job pulls the image again. A slot a finite fleet
    // cannot fill yet waits for a machine (which then joins without a pull of its own).
    std::vector<SlotId> short_of;
    for (SlotId s : it->slots)
      if (view_.machine_in(s) == kNoMachine && !place_new(s)) short_of.push_back(s);
    it->waiting += static_cast<int>(short_of.size());
    for (SlotId s : short_of) want_machine(id, s);
    if (sc_.job.image_bytes > 0)
      run_whole_job_batch(0, sc_.job.image_bytes, pulled);
    else
      push(now_, pulled);
    return;
  }
  if (sc_.scheduler.standby_refill == scenarios::SchedulerSpec::Refill::kRepaired)
    refill_pool(true);
  std::vector<Transfer> pull;
  std::vector<SlotId> short_of;
  for (SlotId s : it->slots) {
    if (view_.machine_in(s) != kNoMachine) continue;  // already there
    if (!place_new(s)) {
      short_of.push_back(s);
      continue;
    }
    if (sc_.job.image_bytes > 0)
      pull.push_back({platform_.storage_host(s % platform_.storage_hosts()), platform_.slot_host(s),
                      sc_.job.image_bytes});
  }
  it->waiting += static_cast<int>(short_of.size());
  for (SlotId s : short_of) want_machine(id, s);
  run_batch(std::move(pull), pulled);
}

void SimWorld::standby_woken(ActionId id) {
  auto it = std::find_if(fleet_.acquiring.begin(), fleet_.acquiring.end(),
                         [&](const Acquire& a) { return a.id == id; });
  if (it == fleet_.acquiring.end()) return;
  it->waking = false;
  for (const auto& [s, m] : it->reserved) {
    if (const MachineId old = view_.machine_in(s); old != kNoMachine) {
      if (view_.in_own_domain(s)) {  // filled meanwhile
        fleet_.free_pool.push_back(m);
        continue;
      }
      view_.vacate(s);  // a machine outside the slot's domain makes way for one inside
      on_leave(old);
      fleet_.free_pool.push_back(old);
    }
    view_.place(m, s);
    on_join(m);
    job_.mark_fresh(s);
  }
  it->reserved.clear();
  for (SlotId s : it->from_pool) {
    if (view_.machine_in(s) != kNoMachine || view_.standby().empty()) continue;
    const MachineId m = view_.standby().front();
    unpark_standby(m);
    view_.place(m, s);
    on_join(m);
    job_.mark_fresh(s);
  }
  update_rate(true);
  acquire_part_done(id);
  refill_pool();
}

void SimWorld::acquire_part_done(ActionId id) {
  auto it = std::find_if(fleet_.acquiring.begin(), fleet_.acquiring.end(),
                         [&](const Acquire& a) { return a.id == id; });
  if (it == fleet_.acquiring.end() || --it->waiting > 0) return;
  MachineSet placed;
  for (const auto* list : {&it->slots, &it->from_pool})
    for (SlotId s : *list)
      if (view_.machine_in(s) != kNoMachine) placed.push_back(view_.machine_in(s));
  fleet_.acquiring.erase(it);
  deliver_at(now_, MachinesReady{id, placed}, false);
}

}  // namespace faultline::sim
