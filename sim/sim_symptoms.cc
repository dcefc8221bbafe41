// SimWorld's symptom model: what a fault does to the job and what a policy gets to see of
// it. A fault arrives (from the fault model or a trace), strikes machines, and shows as
// a symptom (a crash, a hang, slow or NaN steps, a code update request), each drawn from
// the fault's own random streams so that a policy's choices never shift another fault's
// draws. Probes, stack captures and replays answer from the same ground truth with the
// scenario's recall and false-positive rates. Split from sim_world.cc by concern.
#include <algorithm>
#include <cmath>
#include <map>

#include "sim/sim_world.h"
#include "sim/sim_world_internal.h"

namespace faultline::sim {

using internal::kNever;
using internal::secs;
using scenarios::FaultScope;
using scenarios::Symptom;

double SimWorld::fault_ratio(const Fault& f) const {
  return sc_.faults[f.category].slowdown_factor;
}

// The machine a crash log names: the culprit with the category's attribution, else
// its pipeline neighbour.
MachineId SimWorld::attributed(Fault& f) {
  const MachineId m = f.machines.empty() ? kNoMachine : f.machines.front();
  const auto& cat = sc_.faults[f.category];
  const double share = cat.attribution;
  if (m == kNoMachine || share >= 1) return m;
  Rng rng = symptoms_.rng(f, SymptomModel::kAttribution);
  if (rng.bernoulli(share)) return m;
  if (cat.misattribute_random) {
    // A random other machine of the job (AIReSim's diagnosis_uncertainty).
    const SlotId s = view_.slot_of(m);
    if (s < 0 || view_.slots() < 2) return m;
    SlotId other = static_cast<SlotId>(rng.below(static_cast<std::uint64_t>(view_.slots() - 1)));
    if (other >= s) ++other;
    const MachineId x = view_.machine_in(other);
    return x == kNoMachine ? m : x;
  }
  // The log names the next stage of the culprit's pipeline: the rank that saw the broken
  // peer first.
  const SlotId s = view_.slot_of(m);
  if (s < 0) return m;
  const std::vector<SlotId> group = view_.pp_group(s);
  SlotId next = (s + 1) % view_.slots();
  for (std::size_t i = 0; i < group.size() && group.size() > 1; ++i)
    if (group[i] == s) next = group[(i + 1) % group.size()];
  const MachineId peer = view_.machine_in(next);
  return peer == kNoMachine ? m : peer;
}

void SimWorld::inject(const FaultArrival& a) {
  const std::uint64_t key = symptoms_.next_key();
  const auto& cat = sc_.faults[a.category];
  if (symptoms_.thin(a.category) > 1) {
    // Bad machines fail more often: keep the arrival with the machine's share of the
    // drawn rate (an empty slot keeps the population's mean share).
    const MachineId here = view_.machine_in(a.slot);
    const double keep = here == kNoMachine          ? 1.0 / symptoms_.thin(a.category)
                        : fleet_.is_bad(here, now_) ? 1.0
                                                    : 1.0 / sc_.repair.bad_rate_factor;
    if (keep < 1 && !Rng({sc_.seed, replica_, 0x7415ull, key}).bernoulli(keep)) return;
  }
  if (cat.warning.enabled && warn(a, key)) return;  // it strikes lead_time_s later
  strike(a, key);
}

// A fault arrival past thinning (`key`: its arrival index) strikes now.
void SimWorld::strike(const FaultArrival& a, std::uint64_t key) {
  const auto& cat = sc_.faults[a.category];
  ++result_.faults_injected;
  ++result_.categories[a.category].injected;
  Fault f;
  f.id = symptoms_.faults().size();
  f.key = key;
  f.category = a.category;
  f.at = now_;
  if (cat.scope == FaultScope::kMachine) f.slots = {a.slot};
  if (cat.scope == FaultScope::kRack) f.slots = view_.rack_slots(a.slot / sc_.cluster.rack_size);
  for (SlotId s : f.slots)
    if (view_.machine_in(s) != kNoMachine) f.machines.push_back(view_.machine_in(s));
  if (cat.scope != FaultScope::kJob && f.machines.empty()) {
    // Hit only empty slots (machines being replaced): nothing there to break.
    f.active = false;
    f.outcome = Outcome::kAbsorbed;
    symptoms_.faults().push_back(std::move(f));
    return;
  }
  for (MachineId m : f.machines) ++fleet_.hits[m];
  if (cat.persistent)
    for (MachineId m : f.machines) {
      fleet_.broken[m] = f.id + 1;
      ++fleet_.failures[m];
    }
  // Whether inspections can see this fault is a property of the fault, drawn once: one
  // that DCGM or dmesg does not show stays invisible when it strikes again on a restart.
  if (!cat.alert.empty() && cat.alert_coverage < 1)
    f.alert_seen = symptoms_.rng(f, SymptomModel::kCoverage).bernoulli(cat.alert_coverage);
  symptoms_.faults().push_back(std::move(f));
  apply_symptom(symptoms_.faults().back(), false);
}

void SimWorld::abort_start(const std::string& signature, MachineId m, std::int64_t observe_at) {
  job_.state = JobState::kDown;
  ++job_.epoch;
  batches_.new_token();
  deliver_at(observe_at, StartFailed{job_.start_action, m, signature}, false);
}

// Real-time inspections see machine-level faults at their next check; network alerts
// repeat (flap) while the fault lasts.
// apply_symptom's parts (sim_symptoms.cc); the strikes say whether the job felt it.
void SimWorld::alert_inspections(Fault& f) {
  const auto& cat = sc_.faults[f.category];
  auto it = settings_.inspections.find(cat.alert);
  if (it != settings_.inspections.end()) {
    const std::int64_t first =
        now_ +
        static_cast<std::int64_t>(symptoms_.rng(f, SymptomModel::kInspectionPhase).uniform() *
                                  it->second.ns) +
        1;
    const bool flaps = cat.alert == "nic" || cat.alert == "switch";
    for (MachineId x : f.machines) {
      deliver_at(first, InspectionAlert{x, cat.alert, cat.signature}, false);
      if (flaps && cat.persistent)
        deliver_at(first + it->second.ns, InspectionAlert{x, cat.alert, cat.signature}, false);
    }
  }
}

// A crash (or a NaN the job's check turns into an exit): the running job dies and its log
// names a machine later; a start under way fails; a job-wide fault during an acquisition
// fails the restart. True when the job felt it.
bool SimWorld::strike_crash(Fault& f, std::int64_t observe) {
  const auto& cat = sc_.faults[f.category];
  bool affects = false;
  if (const Drop d = drop_replica(f, observe, false); d != Drop::kNotMine) {
    return d == Drop::kDropped;  // replica groups: the others train on
  } else if (job_.state == JobState::kRunning) {
    affects = true;
    const std::int64_t step = steps_done();
    job_down();
    job_.broken_unacted = true;
    deliver_at(observe, ProcessExit{attributed(f), cat.exit_code, cat.signature, step}, false);
  } else if (job_.state == JobState::kStarting) {
    affects = true;
    job_.broken_unacted = true;
    abort_start(cat.signature, attributed(f), observe);
  } else if (!fleet_.acquiring.empty() && cat.scope == FaultScope::kJob) {
    // A job-wide fault while machines are being acquired fails the restart.
    affects = true;
    job_.broken_unacted = true;
    batches_.new_token();
    ActionId id = fleet_.acquiring.front().id;
    drop_acquisitions();
    deliver_at(observe, StartFailed{id, kNoMachine, cat.signature}, false);
  }
  return affects;
}

// A hang: the step counter stops, and the NCCL watchdog (if any) aborts every rank after
// its timeout; a start under way fails the same way. True when the job felt it.
bool SimWorld::strike_hang(Fault& f) {
  bool affects = false;
  if (const Drop d = drop_replica(f, now_, true); d != Drop::kNotMine) {
    return d == Drop::kDropped;  // replica groups: the quorum times out and drops it
  } else if (job_.state == JobState::kRunning && !job_.stuck) {
    affects = true;
    job_.stuck = true;
    job_.broken_unacted = true;
    send_sample(now_, false);  // the step counter stops
    if (sc_.job.collective_timeout_s > 0) {
      // The NCCL watchdog aborts every rank; the log names the collective, not the culprit.
      push(now_ + secs(sc_.job.collective_timeout_s),
           Internal{Internal::kWatchdog, static_cast<std::uint64_t>(job_.epoch)});
    }
  } else if (job_.state == JobState::kStarting) {
    affects = true;
    job_.broken_unacted = true;
    abort_start("Watchdog caught collective operation timeout", kNoMachine,
                now_ + secs(sc_.job.collective_timeout_s));
  }
  return affects;
}

// What EnableOracle tells of fault f striking now: its category's ground truth and what
// it does to the job (a slowdown, its replica out of the quorum).
OracleFault SimWorld::oracle_fault(const Fault& f) const {
  const auto& cat = sc_.faults[f.category];
  OracleFault o{f.machines, cat.name, cat.persistent, cat.code_bug, cat.data_bug};
  o.slowdown = cat.symptom == Symptom::kSlowdown;
  int r = -1;
  if (quorum_verdict(f, &r) != Drop::kNotMine) o.replica = r;
  return o;
}

void SimWorld::apply_symptom(Fault& f, bool at_start) {
  const auto& cat = sc_.faults[f.category];
  const MachineId m = f.machines.empty() ? kNoMachine : f.machines.front();
  const std::int64_t observe = now_ + secs(cat.observe_after_s);
  bool affects = false;
  // Told before the strike's own events (a drop's ReplicaDropped), so that the oracle knows
  // what broke before it hears what became of the job.
  if (settings_.oracle && !at_start) deliver_at(now_, oracle_fault(f), false);
  if (!cat.alert.empty() && f.alert_seen && m != kNoMachine) alert_inspections(f);
  // The next step's sample shows the NaN (the job is already down for the accounting,
  // its crash is observed later: the sample may come first).
  if (cat.symptom == Symptom::kNan && job_.state == JobState::kRunning)
    send_sample(now_ + secs(sc_.job.step_time_s), true);
  switch (cat.symptom) {
    case Symptom::kNan:
      if (!cat.exits) {
        // No NaN check: the job trains on, every step wasted from here on (its progress
        // is lost back to the last checkpoint before the NaN), and only the sample above
        // shows it. A NaN during a start shows once the job runs (finish_start).
        if (job_.state == JobState::kRunning) {
          affects = true;
          job_down();
          job_.broken_unacted = true;
        }
        break;
      }
      [[fallthrough]];
    case Symptom::kCrash:
      affects = strike_crash(f, observe);
      break;
    case Symptom::kHang:
      affects = strike_hang(f);
      break;
    case Symptom::kSlowdown:
      if (job_.state == JobState::kRunning || job_.state == JobState::kStarting) {
        affects = true;
        if (!f.incident) {  // open before the rate is recomputed: only open slowdowns slow the job
          f.incident = true;
          symptoms_.open().push_back(f.id);
        }
      }
      if (cat.duration_s > 0 && !at_start)
        push(now_ + secs(cat.duration_s), Internal{Internal::kFaultEnd, f.id});
      update_rate(true);
      break;
    case Symptom::kManual: {
      // A non-urgent update interrupts nothing by itself: the stack may hold it for its next
      // restart, and a restart it takes for it shows in the ETTR, not as an incident.
      const bool urgent = cat.non_urgent == 0 ||
                          !symptoms_.rng(f, SymptomModel::kUrgency).bernoulli(cat.non_urgent);
      affects = urgent;
      deliver_at(now_, CodeUpdateRequested{"v" + std::to_string(++code_version_), urgent}, false);
      break;
    }
  }
  if (affects) {
    if (!f.incident) {
      f.incident = true;
      symptoms_.open().push_back(f.id);
    }
    symptoms_.settle(f, Outcome::kInterrupted);
  }
  if (!cat.persistent && !cat.job_bug() && cat.symptom != Symptom::kSlowdown) f.active = false;
  if (cat.job_bug() && !at_start)
    push(now_ + secs(cat.fix_h * 3600), Internal{Internal::kCodeFixed, f.id});
  if (!affects && f.outcome == Outcome::kPending) {
    // It landed while the job could not feel it (down, restarting elsewhere, already
    // hung). A fault that lasts strikes at the next start on its machine (finish_start);
    // a transient one had nothing to hit.
    if (f.active) {
      if (std::find(symptoms_.pending().begin(), symptoms_.pending().end(), f.id) ==
          symptoms_.pending().end())
        symptoms_.pending().push_back(f.id);
    } else {
      symptoms_.settle(f, Outcome::kAbsorbed);
    }
  }
}

// The fault clock: a fault's arrival time on it, as a wall instant (kNever when the job
// is not computing under faults.clock "compute").
std::int64_t SimWorld::fault_wall_time(std::int64_t arrival) const {
  if (arrival == kNever || !sc_.compute_clock) return arrival;
  if (!computing()) return kNever;
  const std::int64_t left = std::max<std::int64_t>(0, arrival - exposed_);
  return left > horizon_ - now_ ? kNever : now_ + left;
}

// A steady StepSample of the job now, delivered at `at` (when the policy asked for them).
void SimWorld::send_sample(std::int64_t at, bool nan) {
  if (!settings_.watch_steps) return;
  StepSample s;
  s.step = steps_done();
  s.step_time_s =
      job_.stuck ? std::numeric_limits<double>::infinity() : sc_.job.step_time_s / progress_.rate();
  s.nan = nan;
  s.steady = true;
  // A NaN's sample reaches the policy even though the job is already down here; the
  // others belong to this run of the job.
  deliver_at(at, std::move(s), !nan);
}

// Recomputes the progress rate; true when it just turned slow (a report is scheduled).
// Recomputes the step rate from the open slowdowns; with `sample`, a change while the
// job runs is sent as a steady StepSample.
void SimWorld::update_rate(bool sample) {
  // The slowest machine sets the pace (lockstep), as far as the job works around it.
  double rate = 1;
  for (FaultId id : symptoms_.open()) {
    const Fault& f = symptoms_.faults()[id];
    if (!f.active || sc_.faults[f.category].symptom != Symptom::kSlowdown) continue;
    for (MachineId m : f.machines) {
      if (!still_on(f, m)) continue;
      int level = 0;
      for (const auto& [slot, l] : job_.mitigated)
        if (slot == view_.slot_of(m)) level = l;
      rate = std::min(rate, level == 0 ? 1.0 / fault_ratio(f)
                                       : straggler_rate(view_.spec(), fault_ratio(f), level));
    }
  }
  // A TP group with a machine outside its NVLink domain runs its all-reduces over the
  // scale-out network: the whole job (lockstep) runs cross_ times slower.
  if (cross_ > 1)
    for (SlotId s = 0; s < view_.slots(); ++s)
      if (view_.machine_in(s) != kNoMachine && !view_.in_own_domain(s)) {
        rate = std::min(rate, 1.0 / cross_);
        break;
      }
  // A slowdown that landed while the job was stopped slows it only once it strikes at
  // the next start, as an incident (finish_start).
  const double before = progress_.rate();
  progress_.set_rate(rate);
  if (sample && progress_.rate() != before && job_.state == JobState::kRunning && !job_.stuck)
    send_sample(now_, false);
}

// Resolves the open incidents that no longer affect the job; appends their ids to
// `resolved` when given.
void SimWorld::resolve_open(bool at_start, std::vector<FaultId>* resolved) {
  std::size_t still = 0;  // symptoms_.open() compacted in place
  for (FaultId id : symptoms_.open()) {
    Fault& f = symptoms_.faults()[id];
    bool affecting = false;
    if (f.active) {
      if (sc_.faults[f.category].job_bug()) affecting = true;
      for (MachineId m : f.machines)
        if (still_on(f, m)) affecting = true;
    }
    if (affecting) {
      symptoms_.open()[still++] = id;
    } else {
      f.resolved = now_;
      // At a start the caller credits the start's mechanism (finish_start).
      if (!at_start) f.resolution = kResolutionWhileRunning;
      if (resolved) resolved->push_back(id);
    }
  }
  symptoms_.open().resize(still);
}

void SimWorld::mark_acted() {
  job_.broken_unacted = false;
  for (FaultId id : symptoms_.open()) {
    Fault& f = symptoms_.faults()[id];
    if (f.detected < 0) f.detected = now_;
  }
}

// What the internal events do (sim_world.cc, sim_symptoms.cc, sim_fleet.cc).
void SimWorld::fault_ended(FaultId id) {
  Fault& f = symptoms_.faults()[id];
  if (!f.active) return;
  f.active = false;
  symptoms_.settle(f, Outcome::kAbsorbed);  // a transient slowdown over before the job felt it
  for (MachineId m : f.machines)
    if (fleet_.broken[m] == f.id + 1) fleet_.broken[m] = 0;
  update_rate(true);
  if (job_.state == JobState::kRunning) resolve_open(false);
}

void SimWorld::replay_done(ActionId action) {
  auto it = diagnoses_.replays.find(action);
  if (it == diagnoses_.replays.end()) return;
  ReplayResult r{action, {}};
  bool code_fault = false;  // the job's own code (or its data) fails on every group
  for (FaultId id : symptoms_.open())
    if (symptoms_.faults()[id].active && sc_.faults[symptoms_.faults()[id].category].job_bug())
      code_fault = true;
  for (const auto& group : it->second.groups) {
    bool failed = code_fault;
    for (MachineId m : group) {
      if (m < 0 || m >= view_.machine_count() || !fleet_.broken[m]) continue;
      Fault& f = symptoms_.faults()[fleet_.broken[m] - 1];
      if (symptoms_.rng(f, SymptomModel::kReplayDraw)
              .bernoulli(scenarios::default_recall(sc_.faults[f.category], "replay")))
        failed = true;
    }
    r.group_failed.push_back(failed);
  }
  diagnoses_.replays.erase(it);
  deliver_at(now_, std::move(r), false);
}

// A grouped inter_all_gather (the pairwise check): each group's ring all-gather, all
// groups at once, timed by the fluid model with every slow link's cap; seconds per group.
std::vector<double> SimWorld::time_groups(const std::vector<MachineSet>& groups) const {
  // A slow link runs at 1/slowdown_factor of its bandwidth: its machine's NIC, for every
  // active link fault on it (the slowest wins).
  std::map<int, double> degraded;
  for (const auto* list : {&symptoms_.open(), &symptoms_.pending()})
    for (FaultId id : *list) {
      const Fault& f = symptoms_.faults()[id];
      const auto& cat = sc_.faults[f.category];
      if (!f.active || !cat.link_only) continue;
      for (MachineId m : f.machines)
        if (still_on(f, m)) {
          const int nic = flows_.nic_link(platform_.slot_host(view_.slot_of(m)));
          auto [it, fresh] = degraded.emplace(nic, 1.0 / cat.slowdown_factor);
          if (!fresh) it->second = std::min(it->second, 1.0 / cat.slowdown_factor);
        }
    }
  std::vector<Transfer> batch;
  std::vector<std::size_t> group_of;
  const double bytes = sc_.diagnosis.inter_all_gather_bytes;
  for (std::size_t g = 0; g < groups.size(); ++g)
    for (std::size_t i = 0; i < groups[g].size(); ++i) {
      const MachineId a = groups[g][i], b = groups[g][(i + 1) % groups[g].size()];
      batch.push_back(
          {platform_.slot_host(view_.slot_of(a)), platform_.slot_host(view_.slot_of(b)), bytes});
      group_of.push_back(g);
    }
  std::vector<double> out(groups.size(), 0);
  if (bytes <= 0) return out;
  // On an otherwise idle network: the job is stopped for the check (a batch still under way,
  // which none of the shipped scenarios has then, is not seen).
  std::vector<std::int64_t> finish;
  flows_.fluid_duration(batch, FlowNet::Fluid{&degraded, &finish, true});
  for (std::size_t i = 0; i < batch.size(); ++i)
    out[group_of[i]] = std::max(out[group_of[i]], static_cast<double>(finish[i]) * 1e-9);
  return out;
}

void SimWorld::deliver_probe(ActionId id) {
  auto it = diagnoses_.probes.find(id);
  if (it == diagnoses_.probes.end()) return;
  const RunProbe& p = it->second;
  const int kind = static_cast<int>(p.test);
  const std::string test = probe_key(p.test);
  const double fp = scenarios::false_positive(sc_.diagnosis, test);
  ProbeResult r{id, p.test, {}, false};
  auto timed = diagnoses_.group_seconds.find(id);
  // Healthy machines fail a test independently with probability fp. The false failures
  // are found by geometric skips over the healthy machines, from one stream per probe (the
  // replica's n-th test of this kind): the distribution of one draw per machine, in draws
  // per false failure instead of per machine, which made a test of every machine O(N).
  Rng fp_rng = symptoms_.false_failure_rng(kind);
  std::uint64_t skip = fp > 0 ? fp_rng.geometric(fp) : ~std::uint64_t{0};
  // A grouped probe tests the machines of its groups, in order; a group fails with any of
  // them (the collective errors), or when it ran into the deadline.
  std::vector<MachineId> order;
  std::vector<int> group_of;
  if (timed != diagnoses_.group_seconds.end()) {
    for (std::size_t g = 0; g < p.groups.size(); ++g)
      for (MachineId m : p.groups[g]) {
        order.push_back(m);
        group_of.push_back(static_cast<int>(g));
      }
    r.group_seconds = timed->second;
    r.group_failed.assign(p.groups.size(), false);
    for (std::size_t g = 0; g < p.groups.size(); ++g)
      if (r.group_seconds[g] >= p.deadline.to_seconds() - sc_.diagnosis.group_setup_s)
        r.group_failed[g] = r.timed_out = true;
    diagnoses_.group_seconds.erase(timed);
  }
  const MachineSet& tested = order.empty() ? p.machines : order;
  for (std::size_t i = 0; i < tested.size(); ++i) {
    const MachineId m = tested[i];
    if (m < 0 || m >= view_.machine_count()) continue;
    bool fails;
    if (fleet_.broken[m]) {
      Fault& f = symptoms_.faults()[fleet_.broken[m] - 1];
      fails = symptoms_.rng(f, SymptomModel::kProbe0 + kind)
                  .bernoulli(scenarios::default_recall(sc_.faults[f.category], test));
    } else {
      fails = skip == 0;
      skip = fails ? fp_rng.geometric(fp) : skip - 1;
      if (fails) {
        fleet_.fp_failed[m] = true;
        ++result_.false_failures;
      }
    }
    if (fails && !group_of.empty()) {
      r.group_failed[group_of[i]] = true;
    } else if (fails) {
      r.failed.push_back(m);
      fleet_.evidence[m] = true;
    }
  }
  // Which machine of a failed group is at fault, the group cannot say: it lists them all,
  // and none counts as evidence against its machine (the localizer's verdict is).
  if (!group_of.empty()) {
    for (std::size_t g = 0; g < r.group_failed.size(); ++g)
      if (r.group_failed[g])
        r.failed.insert(r.failed.end(), p.groups[g].begin(), p.groups[g].end());
    std::sort(r.failed.begin(), r.failed.end());
  }
  diagnoses_.probes.erase(it);
  deliver_at(now_, std::move(r), false);
}

StackSignatures SimWorld::stack_signatures() const {
  // What py-spy / gdb would show, synthesised from ground truth (Fig. 7): in a hang the
  // faulty machine sits in a collective with a dead peer, its pipeline neighbours in
  // send/recv, everyone else waits in the data-parallel gradient sync; in a slowdown
  // the slow machine is still computing while the rest wait for it.
  StackSignatures sig;
  if (job_.state != JobState::kRunning) {  // nothing left to capture
    sig.assign(view_.slots(), 0);
    return sig;
  }
  MachineId culprit = kNoMachine;
  bool hang = false;
  for (FaultId id : symptoms_.open()) {
    const Fault& f = symptoms_.faults()[id];
    const auto sym = sc_.faults[f.category].symptom;
    // A slow link leaves every rank waiting in the same collective, its own included.
    if (!f.active || f.machines.empty() || sc_.faults[f.category].link_only) continue;
    if ((job_.stuck && sym == Symptom::kHang) || (!job_.stuck && sym == Symptom::kSlowdown)) {
      culprit = f.machines.front();
      hang = sym == Symptom::kHang;
    }
  }
  if (culprit == kNoMachine || view_.slot_of(culprit) < 0) {
    sig.assign(view_.slots(), sig.intern("train_step > forward > transformer_layer > gemm"));
    return sig;
  }
  sig.assign(view_.slots(),
             sig.intern("train_step > optimizer.step > all_reduce(grads) > ncclKernel wait"));
  const SlotId c = view_.slot_of(culprit);
  if (hang) {
    const std::uint32_t stuck =
        sig.intern("train_step > forward > all_gather > ncclKernel (no progress)");
    const std::uint32_t isend = sig.intern("train_step > pipeline > isend");
    const std::uint32_t irecv = sig.intern("train_step > pipeline > irecv");
    int k = 0;
    for (SlotId s : view_.pp_group(c)) sig.set(s, s == c ? stuck : (k++ % 2 ? isend : irecv));
  } else {
    sig.set(c, sig.intern("train_step > forward > transformer_layer > gemm (slow)"));
  }
  return sig;
}

}  // namespace faultline::sim
