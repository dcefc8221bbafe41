// SimWorld's actions: what each action a policy takes does to the simulated job, one
// method per action (`apply`), and the refusals that answer ActionFailed: first the
// contract's, which every World shares (policies/api/refusals.h), then the simulator's own.
// The World contract each one keeps is written beside the action in policies/api/action.h.
// Split from sim_world.cc by concern.
#include <algorithm>
#include <cmath>

#include "eventlog/event_codec.h"
#include "policies/api/action.h"
#include "policies/api/refusals.h"
#include "sim/sim_world.h"
#include "sim/sim_world_internal.h"

namespace faultline::sim {

using internal::secs;

ActionId SimWorld::act(Action a) {
  const ActionId id = next_action_++;
  if (opt_.decisions)
    result_.decisions.push_back(std::to_string(now_ * 1e-9) + " act " + describe(a));
  if (opt_.action_records)
    result_.decisions.push_back("R " + std::to_string(now_) + " A " + traces::to_json(a).dump());
  const bool acts_on_incident =
      !std::holds_alternative<Note>(a) && !std::holds_alternative<SetCheckpointPlan>(a) &&
      !std::holds_alternative<WatchSteps>(a) && !std::holds_alternative<EnableOracle>(a) &&
      !std::holds_alternative<EnableReplicaGroups>(a);
  if (acts_on_incident) mark_acted();
  if (auto why = refusal(a, {.cluster = view_,
                             .job_running = job_.state == JobState::kRunning,
                             .ended = job_.ended,
                             .verdict = job_.ended_verdict})) {
    refuse(id, std::move(*why));
    return id;
  }
  std::visit([&](auto& x) { apply(id, x); }, a);
  return id;
}

// The job stops, running or starting (a start under way is abandoned with its transfers).
void SimWorld::stop_job_now() {
  if (job_.state == JobState::kRunning) {
    job_down();
  } else if (job_.state == JobState::kStarting) {  // a start under way is abandoned
    job_.state = JobState::kDown;
    ++job_.epoch;
    batches_.new_token();
  }
}

void SimWorld::refuse(ActionId id, std::string why) {
  deliver_at(now_, ActionFailed{id, std::move(why)}, false);
}

void SimWorld::apply(ActionId id, const StopJob&) {
  stop_job_now();
  deliver_at(now_, JobStopped{id}, false);
}

void SimWorld::apply(ActionId id, const StartJob& st) {
  start_job(id, st.mechanism, st.in_place && st.version.empty());
}

void SimWorld::apply(ActionId id, const EvictMachines& e) {
  // A replica drop's machines leave a job that trains on: no restart to credit.
  if (e.mechanism != Mechanism::kReplicaDrop) note_mechanism(e.mechanism);
  for (MachineId m : e.machines) {
    if (m < 0 || m >= view_.machine_count()) continue;
    const SlotId s = view_.slot_of(m);
    if (s < 0) continue;  // not in the job (already evicted, a standby)
    if (opt_.incidents)
      for (FaultId open : symptoms_.open()) symptoms_.faults()[open].evicted.push_back(m);
    if (fleet_.broken[m]) {
      ++result_.evictions_true;
    } else {
      ++result_.evictions_false;
      // A test failed it although healthy, or it went with its group.
      if (fleet_.fp_failed[m]) ++result_.evictions_false_positive;
    }
    // Replica groups: the quorum trains on without its replica.
    if (!replica_out(m) && !evicted_drops(m, e.reason)) stop_job_now();
    view_.vacate(s);
    on_leave(m);
    if (e.retire) {
      view_.set_health(m, Health::kEvicted);
      ++result_.retired;  // never repaired, never drawn again
    } else {
      start_repair(m);
    }
  }
  update_rate(true);
}

void SimWorld::apply(ActionId id, const AcquireMachines& q) {
  if (q.mechanism != Mechanism::kReplicaDrop) note_mechanism(q.mechanism);
  Acquire acq{id, q.mode, q.slots, {}, {}, 0};
  if (q.mode == AcquireMode::kRequeue)
    requeue_all(acq);
  else if (acq.slots.empty())
    acq.slots = empty_slots();
  if (q.mode == AcquireMode::kStandby) return acquire_standby(std::move(acq), q.same_domain);
  if (q.mode == AcquireMode::kOracle) return acquire_oracle(acq);
  const double n = static_cast<double>(acq.slots.size());
  const double delay =
      q.mode == AcquireMode::kRequeue
          ? sc_.scheduler.requeue_base_s + sc_.scheduler.requeue_per_machine_s * n
          : sc_.scheduler.reschedule_base_s + sc_.scheduler.reschedule_per_machine_s * n;
  acq.waiting = 1;
  fleet_.acquiring.push_back(acq);
  push(now_ + secs(timed(std::string("AcquireMachines:") + mode_name(q.mode), delay)),
       Internal{Internal::kAcquireScheduled, id});
}

// The whole job is torn down and rescheduled. Healthy machines come back (the job's
// reservation); machines with an active persistent fault are drained by the scheduler's
// node health check and replaced.
// AcquireMachines by mode: requeue tears the whole job down first; standbys wake (from
// the slot's own NVLink domain first with same_domain); the oracle places fresh machines.
void SimWorld::requeue_all(Acquire& acq) {
  if (job_.state == JobState::kRunning) job_down();
  job_.state = JobState::kDown;
  job_.processes_kept = false;  // every process killed: no in-place restart after it
  batches_.new_token();
  drop_acquisitions();
  acq.slots.clear();
  for (SlotId s = 0; s < view_.slots(); ++s) {
    const MachineId m = view_.machine_in(s);
    if (m != kNoMachine && health_check_drains(m)) {
      view_.vacate(s);
      on_leave(m);
      start_repair(m);
    }
    acq.slots.push_back(s);
  }
  update_rate(true);
}

// Warm standbys join after waking; any shortfall goes to the scheduler.
void SimWorld::acquire_standby(Acquire acq, bool same_domain) {
  const ActionId id = acq.id;
  if (same_domain && view_.spec().nvlink_domain > 1) reserve_in_domain(acq);
  const int from_pool =
      std::min<int>(static_cast<int>(acq.slots.size()), static_cast<int>(view_.standby().size()));
  acq.from_pool.assign(acq.slots.begin(), acq.slots.begin() + from_pool);
  acq.slots.erase(acq.slots.begin(), acq.slots.begin() + from_pool);
  if (!acq.slots.empty()) ++result_.standby_exhaustions;
  if (!acq.from_pool.empty() || !acq.reserved.empty()) {
    ++acq.waiting;
    acq.waking = true;
    push(now_ + secs(timed("AcquireMachines:standby", sc_.diagnosis.standby_wake_s)),
         Internal{Internal::kStandbyWoken, id});
  }
  if (!acq.slots.empty()) {
    ++acq.waiting;
    const double n = static_cast<double>(acq.slots.size());
    push(now_ + secs(sc_.scheduler.reschedule_base_s + sc_.scheduler.reschedule_per_machine_s * n),
         Internal{Internal::kAcquireScheduled, id});
  }
  if (acq.waiting == 0) return deliver_at(now_, MachinesReady{id, {}}, false);
  fleet_.acquiring.push_back(std::move(acq));
}

// Each slot's own NVLink domain first: a standby parked there, else a spare tray of its
// rack; woken like a standby. The rest as any standby request. While the job is stopped
// for it, a slot whose machine sits outside its domain gets a free tray of its domain too,
// if there is one (its machine goes back to the free pool): the scheduler lays the
// segments out again.
void SimWorld::reserve_in_domain(Acquire& acq) {
  auto in_domain = [&](int d) {
    for (MachineId x : view_.standby())
      if (view_.domain_of(x) == d) {
        unpark_standby(x);
        return x;
      }
    return draw_in_domain(d);
  };
  std::vector<SlotId> rest;
  for (SlotId s : acq.slots) {
    if (s < 0 || s >= view_.slots() || view_.machine_in(s) != kNoMachine) continue;
    const MachineId m = in_domain(view_.domain_of_slot(s));
    if (m == kNoMachine)
      rest.push_back(s);
    else
      acq.reserved.emplace_back(s, m);
  }
  acq.slots = std::move(rest);
  for (SlotId s = 0; s < view_.slots(); ++s) {
    if (view_.machine_in(s) == kNoMachine || view_.in_own_domain(s)) continue;
    const MachineId m = in_domain(view_.domain_of_slot(s));
    if (m != kNoMachine) acq.reserved.emplace_back(s, m);
  }
}

// Perfect knowledge: fresh machines in the slots at once.
void SimWorld::acquire_oracle(const Acquire& acq) {
  MachineSet placed;
  for (SlotId s : acq.slots) {
    if (const MachineId old = view_.machine_in(s); old != kNoMachine) {
      view_.vacate(s);
      on_leave(old);
      start_repair(old);
    }
    place_new(s, true);
    placed.push_back(view_.machine_in(s));
  }
  update_rate(true);
  deliver_at(now_, MachinesReady{acq.id, placed}, false);
}

void SimWorld::apply(ActionId id, const SetCheckpointPlan& p) {
  account(now_);
  const std::int64_t interval = p.interval.ns > 0 ? p.interval.ns : secs(sc_.job.step_time_s);
  std::int64_t blocking = p.blocking.ns;
  // Overlapped in-memory saves cost throughput beyond their blocking time (Table 8).
  settings_.mfu_blocking = false;
  if (p.tier == CheckpointTier::kMemoryWithPeer && blocking > 0) {
    const auto mfu = static_cast<std::int64_t>(
        std::llround(sc_.job.checkpoint_mfu_loss * static_cast<double>(interval)));
    settings_.mfu_blocking = mfu > blocking;
    blocking = std::max(blocking, mfu);
  }
  progress_.set_plan(interval, blocking);
  settings_.tier = p.tier;
  settings_.remote_interval = std::max<std::int64_t>(interval, p.remote_interval.ns);
}

void SimWorld::apply(ActionId id, const WatchSteps&) { settings_.watch_steps = true; }

void SimWorld::apply(ActionId id, const EnableOracle&) { settings_.oracle = true; }

void SimWorld::apply(ActionId id, const Note& n) {
  note(n.text);
  result_.max_fruitless_rounds = std::max(result_.max_fruitless_rounds, n.fruitless_round);
}

void SimWorld::apply(ActionId id, const EnableInspection& e) {
  settings_.inspections[e.kind] = e.interval;
}

void SimWorld::apply(ActionId id, RunProbe& in) {
  if (!in.groups.empty()) {
    // act() checked the groups against the contract (policies/api/refusals.h). The
    // simulator times a group over the platform's slot hosts: it tests machines of the job
    // only.
    for (std::size_t g = 0; g < in.groups.size(); ++g)
      for (MachineId m : in.groups[g])
        if (view_.slot_of(m) < 0)
          return refuse(id, "groups[" + std::to_string(g) + "]: machine " + std::to_string(m) +
                                " is not in the job (the simulator tests job machines only)");
    std::vector<double> t = time_groups(in.groups);
    // The groups start together once set up; the deadline cuts the slow ones off.
    const double setup = sc_.diagnosis.group_setup_s;
    const double left = std::max(0.0, in.deadline.to_seconds() - setup);
    double longest = 0;
    for (double& x : t) longest = std::max(longest, x = std::min(x, left));
    const double modelled = std::min(setup, in.deadline.to_seconds()) + longest;
    push(now_ + secs(timed(std::string("RunProbe:") + probe_name(in.test), modelled)),
         Internal{Internal::kProbeDone, id});
    diagnoses_.group_seconds[id] = std::move(t);
    diagnoses_.probes[id] = std::move(in);
    return;
  }
  const RunProbe& p = diagnoses_.probes[id] = std::move(in);  // `a` is ours: move, not copy
  const auto& d = sc_.diagnosis;
  const std::string key = std::string("RunProbe:") + probe_name(p.test);
  if (const double live = timed(key, -1); live >= 0) {  // a replay: the live test's time
    push(now_ + secs(std::min(live, p.deadline.to_seconds())), Internal{Internal::kProbeDone, id});
    return;
  }
  double dur = 0;
  switch (p.test) {
    case ProbeKind::kGpuDiag:
      dur = d.gpu_diag_s;
      break;
    case ProbeKind::kIntraAllToAll:
      dur = d.intra_all_to_all_s;
      break;
    case ProbeKind::kBitwise:
      dur = d.bitwise_s;
      break;
    case ProbeKind::kStress:
      dur = d.stress_s;
      break;
    case ProbeKind::kInterAllGather: {
      // Ring all-gather among the machines: real flows on the platform.
      std::vector<Transfer> ring;
      std::vector<SlotId> slots;
      for (MachineId m : p.machines)
        if (m >= 0 && m < view_.machine_count() && view_.slot_of(m) >= 0)
          slots.push_back(view_.slot_of(m));
      if (slots.size() >= 2 && d.inter_all_gather_bytes > 0)
        for (size_t i = 0; i < slots.size(); ++i)
          ring.push_back({platform_.slot_host(slots[i]),
                          platform_.slot_host(slots[(i + 1) % slots.size()]),
                          d.inter_all_gather_bytes});
      run_batch(std::move(ring), Internal{Internal::kProbeDone, id});
      return;
    }
  }
  push(now_ + secs(std::min(dur, p.deadline.to_seconds())), Internal{Internal::kProbeDone, id});
}

void SimWorld::apply(ActionId id, const CaptureStacks&) {
  push(now_ + secs(timed("CaptureStacks", sc_.diagnosis.capture_s)),
       Internal{Internal::kStacksDone, id});
}

void SimWorld::apply(ActionId id, RunReplay& r) {
  diagnoses_.replays[id] = std::move(r);
  push(now_ + secs(timed("RunReplay", sc_.diagnosis.replay_s)),
       Internal{Internal::kReplayDone, id});
}

void SimWorld::apply(ActionId id, const HotUpdate&) {
  if (job_.state == JobState::kRunning) job_down();
  start_job(id, Mechanism::kHotUpdate);
}

void SimWorld::apply(ActionId id, const RollBack&) {
  if (job_.state == JobState::kRunning) job_down();
  // Code bugs introduced since the last good version go away with it.
  for (FaultId fid : symptoms_.open()) {
    Fault& f = symptoms_.faults()[fid];
    if (sc_.faults[f.category].code_bug) f.active = false;
  }
  for (FaultId fid : std::vector<FaultId>(symptoms_.pending())) {
    Fault& f = symptoms_.faults()[fid];
    if (sc_.faults[f.category].code_bug) {
      f.active = false;
      symptoms_.settle(f, Outcome::kAbsorbed);
    }
  }
  if (auto why = empty_slot_refusal(view_)) return refuse(id, std::move(*why));  // action.h
  start_job(id, Mechanism::kRollback);
}

void SimWorld::apply(ActionId id, const SetStandbyPool& p) {
  fleet_.pool_target = std::max(0, p.size);
  for (int parked = now_ == 0 ? opt_.parked_standbys : 0;
       parked > 0 && static_cast<int>(view_.standby().size()) < fleet_.pool_target; --parked) {
    const MachineId m = draw_machine();
    if (m == kNoMachine) break;
    park_standby(m);
  }
  refill_pool(now_ == 0);  // at the start the scheduler's first host selection fills it
}

void SimWorld::apply(ActionId id, const AvoidMachines& x) {
  fleet_.avoid.assign(fleet_.avoid.size(), false);
  for (MachineId m : x.machines)
    if (m >= 0) {
      if (static_cast<std::size_t>(m) >= fleet_.avoid.size())
        fleet_.avoid.resize(static_cast<std::size_t>(m) + 1, false);
      fleet_.avoid[static_cast<std::size_t>(m)] = true;
    }
}

void SimWorld::apply(ActionId id, const MitigateSlowdown& x) {
  const int level = x.how == Mitigation::kRebalance ? 1 : 2;
  bool known = false;
  for (auto& [slot, l] : job_.mitigated)
    if (slot == x.slot) {
      l = std::max(l, level);
      known = true;
    }
  if (!known) job_.mitigated.emplace_back(x.slot, level);
  const auto& d = sc_.diagnosis;
  progress_.pause(secs(x.how == Mitigation::kRebalance ? d.rebalance_s : d.reconfigure_s));
  update_rate(true);
}

void SimWorld::apply(ActionId id, const EndRun& e) {
  // The job stays down until the on-call engineers, paged, fix the code or the
  // data and requeue it (job.on_call_fix_h); with none, for the rest of the
  // horizon: its time is lost.
  if (!job_.ended && sc_.job.on_call_fix_h > 0)
    push(now_ + secs(sc_.job.on_call_fix_h * 3600), Internal{Internal::kOnCallDone, id});
  stop_job_now();
  if (!job_.ended) ++result_.runs_ended;
  job_.ended = true;
  job_.ended_verdict = e.verdict;
}

}  // namespace faultline::sim
