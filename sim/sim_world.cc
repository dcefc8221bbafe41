// SimWorld's core: construction, the clock and the event loop (the queue is an EventQueue,
// the transfers are Batches), dispatch, the accounting of lost time by phase, starts and
// restores, timers. The actions a policy takes are in sim_actions.cc, the symptom model
// (ground truth to observation) in sim_symptoms.cc, the fleet in sim_fleet.cc.
#include "sim/sim_world.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "sim/sim_world_internal.h"

namespace faultline::sim {

using scenarios::FaultScope;
using scenarios::Symptom;

using internal::kNever;
using internal::Overloaded;
using internal::secs;

SimWorld::SimWorld(const scenarios::Scenario& sc, const ClusterView& base, Platform& platform,
                   FlowNet& flows, const Registry& registry, std::uint64_t replica, RunOptions opt)
    : sc_(sc),
      view_(base),
      platform_(platform),
      flows_(flows),
      registry_(registry),
      policy_(registry.make(sc.policy, sc.policy_params)),
      replica_(replica),
      opt_(opt),
      policy_rng_({sc.seed, replica, 0x9011C7ull}),
      faults_(SymptomModel::arrival_categories(sc), sc.cluster.machines, sc.cluster.rack_size,
              sc.seed, replica, trace_arrivals(sc, replica)),
      symptoms_(sc, replica),
      fleet_(sc, replica, view_.machine_count(), view_.nvlink_domains()),
      batches_(platform, flows),
      job_(view_.slots()) {
  horizon_ = Duration::days(sc.job.horizon_days).ns;
  if (sc.job.work_days > 0) work_ = Duration::days(sc.job.work_days).ns;
  if (view_.tp_span() > 1) cross_ = sc.job.cross_domain_slowdown;
  progress_.set_record_segments(opt_.timeline);
  result_.replica = replica;
  result_.categories.resize(sc.faults.size());
}

SimWorld::~SimWorld() = default;

// ---------------------------------------------------------------- queue and clock

void SimWorld::push(std::int64_t at, Payload p) { queue_.push(at, std::move(p)); }

void SimWorld::deliver_at(std::int64_t at, Event e, bool epoch_bound) {
  push(at, queued::Deliver{std::move(e), epoch_bound ? job_.epoch : -1});
}

void SimWorld::account(std::int64_t t) {
  if (t <= accounted_) return;
  const std::int64_t dt = t - accounted_;
  Breakdown& b = result_.breakdown;
  Attributed& a = result_.attributed;
  switch (job_.state) {
    case JobState::kRunning:
      if (job_.stuck) {
        b.detection += dt;
      } else {
        const std::int64_t saving = b.checkpoint;
        progress_.run(accounted_, dt, b);
        if (settings_.mfu_blocking) a.mfu_checkpoint += b.checkpoint - saving;
        exposed_ += dt;
      }
      break;
    case JobState::kStarting:
      if (job_.stage == StartStage::kRestore) {
        b.restore += dt;
      } else {
        b.failover += dt;
        (job_.in_place ? a.inplace_init : a.init) += dt;
      }
      break;
    case JobState::kDown:
    case JobState::kIdle:
      if (job_.broken_unacted)
        b.detection += dt;
      else if (fleet_.waiting_for_machines()) {
        b.waiting_for_machines += dt;
        if (opt_.timeline) {
          if (!waits_.empty() && waits_.back().second == accounted_)
            waits_.back().second = t;
          else
            waits_.emplace_back(accounted_, t);
        }
      } else if (!fleet_.acquiring.empty()) {
        b.failover += dt;
        attribute_acquiring(dt);
      } else {
        b.diagnosis += dt;
        attribute_diagnosis(dt);
      }
      break;
  }
  accounted_ = t;
}

// account()'s share of `dt` of failover with acquisitions under way, and of diagnosis,
// to the parts of Attributed that one input sets.
void SimWorld::attribute_acquiring(std::int64_t dt) {
  Attributed& a = result_.attributed;
  bool scheduler = false, waking = false;
  for (const Acquire& q : fleet_.acquiring) {
    if (q.mode == AcquireMode::kRequeue) {
      a.requeue += dt;
      return;
    }
    scheduler |= q.waiting > (q.waking ? 1 : 0);
    waking |= q.waking;
  }
  if (scheduler)
    a.reschedule += dt;
  else if (waking)
    a.standby_wake += dt;
}

void SimWorld::attribute_diagnosis(std::int64_t dt) {
  Attributed& a = result_.attributed;
  if (job_.ended)
    a.on_call += dt;
  else if (!diagnoses_.replays.empty())
    a.replay += dt;
  else if (!diagnoses_.probes.empty())
    a.probe[static_cast<int>(diagnoses_.probes.begin()->second.test)] += dt;
}

void SimWorld::advance_to(std::int64_t t) {
  account(t);
  now_ = t;
}

ReplicaResult SimWorld::run() {
  batches_.begin();
  if (fleet_.pool_target < 0) fleet_.pool_target = sc_.cluster.standby_machines;
  start_warnings();
  policy_->start(*this);
  const bool finished = run_events();
  // Batches still under way at the horizon leave the network with this world (the
  // replicas forked from this one start on an idle network).
  batches_.end();
  // Horizon (or the work done): progress since the last checkpoint is kept.
  progress_.keep(result_.breakdown);
  const std::int64_t end = now_;  // the horizon, or the instant the work was done
  result_.elapsed_s = end * 1e-9;
  count_standby_time();  // the pool's machine-time up to the end
  result_.finished = finished;
  result_.exposure_s = (sc_.compute_clock ? exposed_ : end) * 1e-9;
  result_.machines_used = view_.machine_count();
  // A finite fleet that can no longer field the job: it waits for machines and none is
  // coming (retirements took them; nothing in repair, nothing left to preempt).
  result_.depleted = !finished && fleet_.waiting_for_machines() && fleet_.in_repair == 0 &&
                     fleet_.preempting == 0 && fleet_.preemptible_left == 0;
  result_.ettr = static_cast<double>(result_.breakdown.productive) / static_cast<double>(end);
  result_.checkpoints = progress_.checkpoints();
  result_.steps =
      static_cast<std::int64_t>(result_.breakdown.productive / (sc_.job.step_time_s * 1e9));
  result_.events = events_;
  result_.flow_batches_real = batches_.real_batches();
  result_.flow_batches_cached = batches_.cached_batches();
  record_outcomes(end);
  check_ledger();
  if (opt_.timeline) record_timeline(end);
  return std::move(result_);
}

// The event loop: faults, queued events and SimGrid's transfers in time order until the
// horizon (false) or, for a job of fixed work, until the work is done (true).
// run()'s parts: the event loop (true when the job's work was done), then the result.
bool SimWorld::run_events() {
  while (true) {
    const std::int64_t t_queue = queue_.empty() ? kNever : queue_.next_at();
    const std::int64_t t_fault = fault_wall_time(faults_.peek_time());
    // A job of fixed work ends when its productive time reaches the work.
    const std::int64_t t_done =
        work_ > 0 && computing()
            ? now_ + progress_.wall_to_gain(work_ - result_.breakdown.productive)
            : kNever;
    const std::int64_t t_next = std::min({t_queue, t_fault, horizon_, t_done});
    // Let SimGrid run the transfers until our next event or a batch completion; a batch
    // that finished queued its completion at the current SimGrid time.
    if (batches_.real_under_way() && t_next > now_ && batches_.wait(t_next)) continue;
    if (t_next >= horizon_) {
      advance_to(horizon_);
      return false;
    }
    if (t_done == t_next) {
      advance_to(t_done);
      if (result_.breakdown.productive >= work_) {
        return true;
      }
      continue;  // rounding left a few ns of work: the next turn asks again
    }
    if (t_fault < t_queue || (t_fault == t_queue && t_fault != kNever && false)) {
      advance_to(t_fault);
      inject(faults_.next());
      continue;
    }
    Item item = queue_.pop();
    // A policy that keeps acting without time passing would never end; stop it loudly.
    same_instant_ = item.at == now_ ? same_instant_ + 1 : 0;
    if (same_instant_ > 100000)
      throw std::runtime_error("policy '" + sc_.policy + "' made no progress: 100000 events at t=" +
                               std::to_string(now_ * 1e-9) + " s (last: " + last_event_ + ")");
    advance_to(item.at);
    dispatch(item);
  }
}

// Each fault's outcome and each incident's costs, by category; the costliest incident.
void SimWorld::record_outcomes(std::int64_t end) {
  for (const Fault& f : symptoms_.faults()) {
    auto& c = result_.categories[f.category];
    const int o = f.incident                        ? kOutcomeInterrupted
                  : f.outcome == Outcome::kCaught   ? kOutcomeCaught
                  : f.outcome == Outcome::kLeft     ? kOutcomeLeft
                  : f.outcome == Outcome::kAbsorbed ? kOutcomeAbsorbed
                                                    : kOutcomeHorizon;
    ++c.outcomes[o];
    if (!f.incident) continue;
    ++c.incidents;
    ++result_.incident_count;
    const double res = ((f.resolved >= 0 ? f.resolved : end) - f.at) * 1e-9;
    if (res > result_.dominant.resolution_s) result_.dominant = {f.category, f.at * 1e-9, res};
    c.resolution_sum_s += res;
    c.resolution_max_s = std::max(c.resolution_max_s, res);
    if (f.detected >= 0) {
      c.detection_sum_s += (f.detected - f.at) * 1e-9;
      ++c.detected;
    }
    if (opt_.incidents)
      result_.incidents.push_back(
          {f.at * 1e-9, f.category, f.detected >= 0 ? f.detected * 1e-9 : -1,
           f.resolved >= 0 ? f.resolved * 1e-9 : -1, f.slots, f.resolution,
           std::vector<int>(f.machines.begin(), f.machines.end()), f.evicted});
  }
}

// The ledger must balance: every fault (and every recurrence) has exactly one outcome.
void SimWorld::check_ledger() const {
  for (std::size_t c = 0; c < result_.categories.size(); ++c) {
    const auto& k = result_.categories[c];
    std::int64_t sum = 0;
    for (std::int64_t x : k.outcomes) sum += x;
    if (sum != k.injected + k.recurred)
      throw std::logic_error("fault ledger of category '" + sc_.faults[c].name +
                             "' does not balance: " + std::to_string(sum) + " outcomes for " +
                             std::to_string(k.injected) + " faults and " +
                             std::to_string(k.recurred) + " recurrences");
  }
}

// ETTR over time (--timeline): cumulative and over the last hour, every timeline_step_s,
// from the recorded progress segments; and the time spent waiting for machines.
void SimWorld::record_timeline(std::int64_t end) {
  const auto& segs = progress_.segments();
  const std::int64_t step = secs(opt_.timeline_step_s);
  // Kept progress up to time t, from the recorded segments.
  auto kept_until = [&](std::int64_t t) {
    double p = 0;
    for (const auto& s : segs) {
      if (s.start >= t) break;
      p += (std::min(t, s.end) - s.start) * s.rate;
    }
    return p;
  };
  std::size_t w = 0;
  std::int64_t waited = 0;  // in the waits that ended by t
  for (std::int64_t t = step; t <= end; t += step) {
    const double pt = kept_until(t);
    const std::int64_t w0 = std::max<std::int64_t>(0, t - secs(3600));
    for (; w < waits_.size() && waits_[w].second <= t; ++w)
      waited += waits_[w].second - waits_[w].first;
    const std::int64_t open = w < waits_.size() && waits_[w].first < t ? t - waits_[w].first : 0;
    result_.timeline.push_back({t / 3.6e12, pt / static_cast<double>(t),
                                (pt - kept_until(w0)) / static_cast<double>(t - w0),
                                (waited + open) / 3.6e12});
  }
}

void SimWorld::dispatch(Item& item) {
  std::visit(Overloaded{
                 [&](queued::Deliver& d) {
                   if (d.epoch >= 0 && d.epoch != job_.epoch) return;
                   ++events_;
                   MachineId named = kNoMachine;
                   if (const auto* a = std::get_if<InspectionAlert>(&d.event)) named = a->machine;
                   if (const auto* x = std::get_if<ProcessExit>(&d.event)) named = x->machine;
                   if (const auto* x = std::get_if<StartFailed>(&d.event)) named = x->machine;
                   if (named >= 0 && named < static_cast<MachineId>(fleet_.evidence.size()))
                     fleet_.evidence[named] = true;
                   if (same_instant_ > 99990) last_event_ += " | " + describe(d.event);
                   if (opt_.decisions)
                     result_.decisions.push_back(std::to_string(now_ * 1e-9) + " event " +
                                                 describe(d.event));
                   policy_->on_event(d.event, *this);
                 },
                 [&](queued::TimerItem& t) {
                   if (timers_.cancelled(t.id)) return;
                   ++events_;
                   policy_->on_event(TimerFired{t.id, t.tag}, *this);
                 },
                 [&](Internal& in) {
                   ++events_;
                   on_internal(in);
                 },
             },
             item.payload);
}

// ---------------------------------------------------------------- ground truth

void SimWorld::job_down() {
  job_.lost_in_memory += progress_.pending_ns();  // the survivors still hold it (in-place restarts)
  progress_.lose(result_.breakdown);
  job_.mitigated.clear();  // the next start lays the job out afresh
  if (!migrations_.empty()) abandon_migrations();
  job_.state = JobState::kDown;
  job_.stuck = false;
  ++job_.epoch;
}

std::int64_t SimWorld::steps_done() const {
  return (progress_.committed_ns() + progress_.pending_ns()) / secs(sc_.job.step_time_s);
}

// ---------------------------------------------------------------- transfers

// A whole-job batch (every slot from storage), built and hashed once per replica.
void SimWorld::run_whole_job_batch(int kind, double bytes, Internal done) {
  const auto& [batch, key] = batches_.whole_job(kind, bytes, view_.slots());
  run_batch_keyed(batch, key, done);
}

void SimWorld::run_batch(std::vector<Transfer> batch, Internal done) {
  if (batch.empty()) {
    push(now_, done);
    return;
  }
  const FlowNet::Key key = FlowNet::key_of(batch);
  run_batch_keyed(batch, key, done);
}

void SimWorld::run_batch_keyed(const std::vector<Transfer>& batch, const FlowNet::Key& key,
                               Internal done) {
  std::uint64_t hold = 0;
  const std::int64_t d = batches_.memoised(batch, key, &hold);
  if (d < 0) {
    batches_.start(batch, key, now_,
                   [this, done](std::int64_t sg_ns) { push(std::max(now_, sg_ns), done); });
    return;
  }
  push(now_ + d, Internal{Internal::kHoldEnd, hold});  // releases the hold
  push(now_ + d, done);
}

void SimWorld::on_internal(const Internal& in) {
  switch (in.kind) {
    case Internal::kHoldEnd: {
      // A memoised batch ends (unless it was given up and released already).
      batches_.end_hold(in.token);
      return;
    }
    case Internal::kFaultEnd:
      return fault_ended(in.token);
    case Internal::kWatchdog: {
      if (static_cast<std::int64_t>(in.token) != job_.epoch || job_.state != JobState::kRunning ||
          !job_.stuck)
        return;
      const std::int64_t step = steps_done();
      job_down();
      deliver_at(now_,
                 ProcessExit{kNoMachine, 134, "Watchdog caught collective operation timeout", step},
                 false);
      return;
    }
    case Internal::kAcquireScheduled:
      return acquire_scheduled(in.token);
    case Internal::kAcquirePulled: {
      auto it = std::find_if(fleet_.acquiring.begin(), fleet_.acquiring.end(),
                             [&](const Acquire& a) { return a.id == in.token; });
      if (it == fleet_.acquiring.end()) return;
      acquire_part_done(in.token);
      return;
    }
    case Internal::kStandbyWoken:
      return standby_woken(in.token);
    case Internal::kPoolRefilled: {
      const MachineId m = draw_machine();
      if (m == kNoMachine)
        return want_machine(0, -1);  // still under way, until a machine comes free
      --fleet_.refills;
      park_standby(m);
      return;
    }
    case Internal::kProbeDone:
      deliver_probe(in.token);
      return;
    case Internal::kStacksDone:
      deliver_at(now_, StacksCaptured{in.token, stack_signatures()}, false);
      return;
    case Internal::kReplayDone:
      return replay_done(in.token);
    case Internal::kCodeFixed: {
      Fault& f = symptoms_.faults()[in.token];
      f.active = false;  // a fix shipped by hand; the next restart runs clean
      symptoms_.settle(f, Outcome::kAbsorbed);
      return;
    }
    case Internal::kOnCallDone:
      return on_call_done();
    case Internal::kWarnedStrike:
      return warned_strike(in.token);
    case Internal::kFalseWarning:
      return false_warning(static_cast<int>(in.token));
    case Internal::kMigrateStep:
      return migration_step(in.token);
    case Internal::kRepaired:
      repaired(in.token);
      return;
    case Internal::kReplicaTimeout:
      return replica_timed_out(in.token);
    case Internal::kRejoined:
      return rejoined(in.token);
    case Internal::kPreempted: {
      --fleet_.preempting;
      ++result_.preemptions;
      machine_free(new_machine(true), false);
      return;
    }
    case Internal::kStartInit:
      if (in.token != batches_.token() || job_.state != JobState::kStarting) return;
      return start_init();
    case Internal::kStartRestored: {
      if (in.token != batches_.token() || job_.state != JobState::kStarting) return;
      finish_start();
      return;
    }
  }
}

void SimWorld::on_call_done() {
  // The on-call engineers, paged by EndRun, fixed every code and data bug still in
  // the job (on a wrong verdict there was none: they looked for nothing) and requeue
  // the job. Its stack starts afresh, as a relaunched controller does: nothing of the
  // ended run's state survives, and its timers never fire.
  int fixed = 0;
  for (Fault& f : symptoms_.faults()) {
    if (!f.active || !sc_.faults[f.category].job_bug()) continue;
    f.active = false;
    symptoms_.settle(f, Outcome::kAbsorbed);
    ++fixed;
  }
  job_.ended = false;
  job_.ended_verdict.clear();
  timers_.cancel_all();
  note("the on-call fixed " + std::to_string(fixed) +
       " code or data bug(s) and requeues the job: the stack "
       "starts afresh");
  policy_ = registry_.make(sc_.policy, sc_.policy_params);
  policy_->start(*this);
  if (settings_.oracle) {
    // An oracle is told of every fault at once: the new one, of those that still
    // break machines of the job (the ended one was told and did nothing).
    for (const Fault& f : symptoms_.faults()) {
      if (!f.active || f.machines.empty()) continue;
      bool here = false;
      for (MachineId m : f.machines) here |= view_.slot_of(m) >= 0;
      if (here) deliver_at(now_, oracle_fault(f), false);
    }
  }
}

// The restore of a start: from the remote checkpoint, or from each fresh slot's in-memory
// backup on its peer (the whole job falls back to the remote one when a backup is lost).
void SimWorld::start_init() {
  job_.stage = StartStage::kRestore;
  std::vector<Transfer> restore;
  const double bytes = sc_.job.checkpoint_bytes_per_machine;
  const Internal restored{Internal::kStartRestored, batches_.token()};
  if (job_.in_place) {  // each restarted slot's state from its data-parallel peer's memory
    for (SlotId s : job_.restarted_slots())
      if (bytes > 0)
        restore.push_back({platform_.slot_host(dp_peer(s)), platform_.slot_host(s), bytes});
    run_batch(std::move(restore), restored);
    return;
  }
  if (bytes > 0 && settings_.tier == CheckpointTier::kRemote) {
    run_whole_job_batch(1, bytes, restored);
    return;
  }
  bool peer_lost = false;
  // Only the slots that got a machine (in slot order, as the transfer list's key needs).
  std::sort(job_.fresh_slots.begin(), job_.fresh_slots.end());
  for (SlotId s : job_.fresh_slots) {
    // kMemoryWithPeer: the backup copy lives on a peer that shares none of the slot's
    // TP, PP or DP groups (the next pipeline, next stage), so evicting a whole group
    // keeps it. kMemory (Gemini-style): on the next machine, the next stage of the same
    // pipeline, so over-evicting that pipeline loses both copies.
    // A job of PP + 1 machines has no such peer ((s + PP + 1) mod N is s itself): the
    // backup is on the next machine, as on a job that small every machine shares a group.
    SlotId peer = (s + 1) % view_.slots();
    if (settings_.tier == CheckpointTier::kMemoryWithPeer &&
        (s + sc_.cluster.pp + 1) % view_.slots() != s)
      peer = (s + sc_.cluster.pp + 1) % view_.slots();
    if (job_.fresh[peer] || peer == s) {
      peer_lost = true;
      break;
    }
    if (bytes > 0) restore.push_back({platform_.slot_host(peer), platform_.slot_host(s), bytes});
  }
  if (peer_lost) {
    // Both copies of some shard are gone: back to the last remote checkpoint.
    ++result_.remote_fallbacks;
    const std::int64_t committed = progress_.committed_ns();
    progress_.roll_back_committed(committed - committed % settings_.remote_interval,
                                  result_.breakdown);
    if (bytes > 0) {
      run_whole_job_batch(1, bytes, restored);
      return;
    }
    restore.clear();
  }
  run_batch(std::move(restore), restored);
}

void SimWorld::finish_start() {
  job_.state = JobState::kRunning;
  job_.trained = true;
  job_.stuck = false;
  ++job_.epoch;
  for (SlotId s : job_.fresh_slots) job_.fresh[s] = false;
  job_.fresh_slots.clear();
  if (job_.in_place) {
    // The survivors' state at the last completed step: only the step in flight is lost.
    const std::int64_t step = secs(sc_.job.step_time_s);
    progress_.restore_pending(
        job_.lost_in_memory - (progress_.committed_ns() + job_.lost_in_memory) % step, now_,
        result_.breakdown);
  }
  const std::int64_t resumed_step =
      (job_.in_place ? progress_.committed_ns() + progress_.pending_ns()
                     : progress_.committed_ns()) /
      secs(sc_.job.step_time_s);
  job_.in_place = false;
  job_.lost_in_memory = 0;
  job_.processes_kept = true;
  // Survivors keep warm caches, but the job runs at its slowest rank's pace and the
  // restarted ranks start cold: the warm-up is the same as after a standard restart (our
  // assumption; FlashRecovery publishes none).
  progress_.start_warmup(secs(sc_.job.restart_warmup_s));
  all_replicas_back();
  // Faults that landed while the job was stopped, on machines it now runs on (and code
  // bugs in the code it now runs), strike now. Slowdowns take effect before the rate is
  // set; the others strike below, after JobStarted.
  std::vector<FaultId> fresh;
  std::size_t keep = 0;  // symptoms_.pending() compacted in place
  for (FaultId id : symptoms_.pending()) {
    Fault& f = symptoms_.faults()[id];
    if (!f.active || f.outcome != Outcome::kPending) continue;
    const auto& cat = sc_.faults[f.category];
    bool here = cat.scope == FaultScope::kJob;
    for (MachineId m : f.machines) here |= still_on(f, m);
    if (!here) {
      symptoms_.pending()[keep++] = id;
      continue;
    }
    if (cat.symptom == Symptom::kSlowdown) {
      f.incident = true;
      symptoms_.open().push_back(id);
      f.outcome = Outcome::kInterrupted;
    } else {
      fresh.push_back(id);
    }
  }
  symptoms_.pending().resize(keep);
  update_rate(false);
  deliver_at(now_, JobStarted{job_.start_action, resumed_step}, false);
  send_sample(now_, false);  // every start opens the sample stream with the step rate
  // Persistent faults on machines still in the job, and code bugs still in the code,
  // strike again.
  std::vector<FaultId> rearm;
  for (FaultId id : symptoms_.open()) {
    Fault& f = symptoms_.faults()[id];
    if (!f.active) continue;
    if (sc_.faults[f.category].job_bug()) {
      rearm.push_back(id);
      continue;
    }
    for (MachineId m : f.machines)
      if (view_.slot_of(m) >= 0 && fleet_.broken[m] == f.id + 1) {
        rearm.push_back(id);
        break;
      }
  }
  symptoms_.resolved_now().clear();
  resolve_open(true, &symptoms_.resolved_now());
  for (FaultId id : symptoms_.resolved_now())
    if (std::find(rearm.begin(), rearm.end(), id) == rearm.end()) {
      if (mechanism_ != Mechanism::kNone) credit(result_.resolved_by, mechanism_);
      symptoms_.faults()[id].resolution = mechanism_;
    }
  mechanism_ = Mechanism::kNone;
  rearm.insert(rearm.end(), fresh.begin(), fresh.end());
  for (FaultId id : rearm) {  // still open: resolve_open keeps what still affects the job
    Fault& f = symptoms_.faults()[id];
    if (job_.state != JobState::kRunning) {
      // An earlier one brought the job down again: the rest wait for the next start.
      if (f.outcome == Outcome::kPending && f.active) symptoms_.pending().push_back(id);
      continue;
    }
    if (sc_.faults[f.category].symptom != Symptom::kSlowdown) apply_symptom(f, true);
  }
}

// `in_place` (StartJob::in_place): only the restarted slots re-initialise and restore,
// from a data-parallel peer, when in_place_blocker() finds nothing against it.
void SimWorld::start_job(ActionId id, Mechanism mech, bool in_place) {
  note_mechanism(mech);
  job_.state = JobState::kStarting;
  job_.stage = StartStage::kInit;
  job_.start_action = id;
  ++job_.epoch;
  batches_.new_token();
  job_.in_place = false;
  if (in_place) {
    std::string blocker = in_place_blocker();
    // A replay: the live start was not in place (no rank held its state; sim/replay.cc).
    if (const auto it = sc_.replay_durations.find("StartJob:in-place-taken");
        it != sc_.replay_durations.end()) {
      const std::size_t k = job_.next_timed("StartJob:in-place-taken");
      if (blocker.empty() && k < it->second.size() && it->second[k] == 0)
        blocker = "the live run's start here was not in place";
    }
    job_.in_place = blocker.empty();
    if (!job_.in_place) note("in-place restart not possible (" + blocker + "): a standard restart");
  }
  // A whole-job start initialises every machine; an in-place one its restarted machines.
  const double init = job_.in_place ? sc_.job.inplace_init_s +
                                          sc_.job.init_per_machine_s *
                                              static_cast<double>(job_.restarted_slots().size())
                                    : (job_.trained ? sc_.job.init_s : sc_.job.first_init_s) +
                                          sc_.job.init_per_machine_s * view_.slots();
  const char* key = mech == Mechanism::kHotUpdate  ? "HotUpdate"
                    : mech == Mechanism::kRollback ? "RollBack"
                    : job_.in_place                ? "StartJob:inplace"
                    : job_.trained                 ? "StartJob"
                                                   : "StartJob:first";
  push(now_ + secs(timed(key, init)), Internal{Internal::kStartInit, batches_.token()});
}

// The duration of the next action of kind `key`: the live run's for a replay
// (Scenario::replay_durations), else `modelled`.
double SimWorld::timed(const std::string& key, double modelled) {
  const auto it = sc_.replay_durations.find(key);
  if (it == sc_.replay_durations.end()) return modelled;
  const std::size_t k = job_.next_timed(key);
  return k < it->second.size() && std::isfinite(it->second[k]) ? it->second[k] : modelled;
}

// In-place restarts (FlashRecovery): a slot's nearest data-parallel peer (same pipeline
// and tensor position in another replica) whose machine is not fresh, or -1; why an
// in-place restart cannot be done now (empty: it can).
SlotId SimWorld::dp_peer(SlotId s) const {
  const auto& c = view_.spec();
  const int slots = view_.slots();
  const std::int64_t per_replica = static_cast<std::int64_t>(c.tp) * c.pp;  // ranks
  int stride;  // slots from one replica's copy of s's ranks to the next
  if (per_replica % c.gpus_per_machine == 0)
    stride = static_cast<int>(per_replica / c.gpus_per_machine);
  else if (c.gpus_per_machine % per_replica == 0)
    stride = 1;  // a machine holds whole replicas: every other machine is a peer
  else
    return -1;
  for (int k = 1; static_cast<std::int64_t>(k) * stride < slots; ++k) {
    const SlotId p = static_cast<SlotId>((s + static_cast<std::int64_t>(k) * stride) % slots);
    if (!job_.fresh[p] && view_.machine_in(p) != kNoMachine) return p;
  }
  return -1;
}

std::string SimWorld::in_place_blocker() const {
  if (!job_.processes_kept) return "no processes kept: the first start or a requeue";
  for (FaultId id : symptoms_.open())
    if (sc_.faults[symptoms_.faults()[id].category].symptom == Symptom::kNan)
      return "a NaN: the state in memory is corrupt";
  for (SlotId s : job_.restarted_slots())
    if (dp_peer(s) < 0) return "no data-parallel peer holds slot " + std::to_string(s) + "'s state";
  return {};
}

TimerId SimWorld::set_timer(Duration after, std::uint64_t tag) {
  const TimerId id = timers_.add();
  push(now_ + std::max<std::int64_t>(0, after.ns), queued::TimerItem{id, tag});
  return id;
}

void SimWorld::cancel_timer(TimerId id) { timers_.cancel(id); }

void SimWorld::note(std::string_view reason) {
  if (opt_.decisions)
    result_.decisions.push_back(std::to_string(now_ * 1e-9) + " note " + std::string(reason));
}

}  // namespace faultline::sim
