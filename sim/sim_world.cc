#include "sim/sim_world.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <simgrid/s4u.hpp>
#include <stdexcept>

namespace faultline::sim {

namespace sg4 = simgrid::s4u;
using scenarios::FaultScope;
using scenarios::Symptom;

namespace {
constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::max();
std::int64_t secs(double s) { return Duration::seconds(s).ns; }
template <class... Ts>
struct Overloaded : Ts... {
  using Ts::operator()...;
};
template <class... Ts>
Overloaded(Ts...) -> Overloaded<Ts...>;

// Bad machines (cluster.repair): in machine-scope hardware categories a bad machine fails
// bad_rate_factor (k) times as often as a good one and the category's rate λ stays the
// population mean, so a good machine fails at λ/(1-f+f·k). Arrivals are drawn at the bad
// machines' rate λ·k/(1-f+f·k) on every slot and thinned by the machine that is there
// (kept with probability 1 for a bad machine, 1/k for a good one).
bool hardware(const scenarios::FaultCategory& c) {
  return c.scope == FaultScope::kMachine && !c.job_bug() && c.symptom != Symptom::kManual &&
         c.rate_per_machine_day > 0;
}
double thin_factor(const scenarios::Scenario& sc, const scenarios::FaultCategory& c) {
  const double f = sc.repair.bad_fraction, k = sc.repair.bad_rate_factor;
  if (!hardware(c) || !sc.repair.bad_model() || k <= 1) return 1;
  return k / (1 - f + f * k);
}
std::vector<scenarios::FaultCategory> arrival_categories(const scenarios::Scenario& sc) {
  std::vector<scenarios::FaultCategory> cats = sc.faults;
  for (auto& c : cats) c.rate_per_machine_day *= thin_factor(sc, c);
  return cats;
}
}  // namespace

struct SimWorld::SgSync {
  sg4::MutexPtr mutex = sg4::Mutex::create();
  sg4::ConditionVariablePtr cv = sg4::ConditionVariable::create();
};

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
      faults_(arrival_categories(sc), sc.cluster.machines, sc.cluster.rack_size, sc.seed, replica,
              trace_arrivals(sc, replica)) {
  horizon_ = Duration::days(sc.job.horizon_days).ns;
  if (sc.job.work_days > 0) work_ = Duration::days(sc.job.work_days).ns;
  preemptible_left_ =
      sc.repair.fleet == scenarios::RepairSpec::Fleet::kFinite ? sc.repair.preemptible_machines : 0;
  fresh_.assign(view_.slots(), false);  // the first start loads initial weights, not a checkpoint
  for (const auto& c : sc.faults) thin_.push_back(thin_factor(sc, c));
  const std::size_t expect =
      static_cast<std::size_t>(view_.machine_count()) * 5 / 4 + 16;  // replacements come later
  for (auto* v : {&broken_}) v->reserve(expect);
  bad_.reserve(expect);
  for (auto* v : {&evidence_, &fp_failed_}) v->reserve(expect);
  health_checks_of_.reserve(expect);
  failures_.reserve(expect);
  hits_.reserve(expect);
  repairs_of_.reserve(expect);
  for (MachineId m = 0; m < view_.machine_count(); ++m) track_machine(m, true);
  spares_left_ = sc.repair.spare_machines >= 0
                     ? sc.repair.spare_machines
                     : static_cast<int>(std::lround(0.048 * sc.cluster.machines));
  if (sc.cluster.nvlink_spares > 0) {  // the spares are the trays each domain leaves free
    domain_free_.assign(static_cast<std::size_t>(view_.nvlink_domains()), sc.cluster.nvlink_spares);
    spares_left_ = view_.nvlink_domains() * sc.cluster.nvlink_spares;
  }
  if (view_.tp_span() > 1) cross_ = sc.job.cross_domain_slowdown;
  progress_.set_record_segments(opt_.timeline);
  result_.replica = replica;
  result_.categories.resize(sc.faults.size());
  result_.resolved_by.assign(kMechanisms, 0);
}

SimWorld::~SimWorld() { *alive_ = false; }

// ---------------------------------------------------------------- queue and clock

void SimWorld::push(std::int64_t at, Payload p) {
  std::uint32_t slot;
  if (free_.empty()) {
    slot = static_cast<std::uint32_t>(payloads_.size());
    payloads_.push_back(std::move(p));
  } else {
    slot = free_.back();
    free_.pop_back();
    payloads_[slot] = std::move(p);
  }
  heap_.push_back(Key{at, seq_++, slot});
  std::push_heap(heap_.begin(), heap_.end(), Later{});
}

void SimWorld::deliver_at(std::int64_t at, Event e, bool epoch_bound) {
  push(at, Deliver{std::move(e), epoch_bound ? epoch_ : -1});
}

void SimWorld::account(std::int64_t t) {
  if (t <= accounted_) return;
  const std::int64_t dt = t - accounted_;
  Breakdown& b = result_.breakdown;
  switch (job_) {
    case JobState::kRunning:
      if (stuck_) {
        b.detection += dt;
      } else {
        progress_.run(accounted_, dt, b);
        exposed_ += dt;
      }
      break;
    case JobState::kStarting:
      (stage_ == StartStage::kRestore ? b.restore : b.failover) += dt;
      break;
    case JobState::kDown:
    case JobState::kIdle:
      if (broken_unacted_)
        b.detection += dt;
      else if (waiting_for_machines()) {
        b.waiting_for_machines += dt;
        if (opt_.timeline) {
          if (!waits_.empty() && waits_.back().second == accounted_)
            waits_.back().second = t;
          else
            waits_.emplace_back(accounted_, t);
        }
      } else if (!acquiring_.empty())
        b.failover += dt;
      else
        b.diagnosis += dt;
      break;
  }
  accounted_ = t;
}

void SimWorld::advance_to(std::int64_t t) {
  account(t);
  now_ = t;
}

ReplicaResult SimWorld::run() {
  sync_ = std::make_unique<SgSync>();
  sg_base_ = sg4::Engine::get_clock();
  real_at_start_ = flows_.real_batches();
  cached_at_start_ = flows_.cached_batches();
  if (pool_target_ < 0) pool_target_ = sc_.cluster.standby_machines;
  policy_->start(*this);
  bool finished = false;
  while (true) {
    const std::int64_t t_queue = heap_.empty() ? kNever : heap_.front().at;
    const std::int64_t t_fault = fault_wall_time(faults_.peek_time());
    // A job of fixed work ends when its productive time reaches the work.
    const std::int64_t t_done =
        work_ > 0 && computing()
            ? now_ + progress_.wall_to_gain(work_ - result_.breakdown.productive)
            : kNever;
    const std::int64_t t_next = std::min({t_queue, t_fault, horizon_, t_done});
    if (real_in_flight_ > 0 && t_next > now_) {
      // Let SimGrid run the transfers until our next event or a batch completion.
      std::unique_lock lock(*sync_->mutex);
      const double deadline = sg_base_ + t_next * 1e-9;
      if (sync_->cv->wait_until(lock, deadline) == std::cv_status::no_timeout) {
        // A batch finished and queued its completion at the current SimGrid time.
        continue;
      }
    }
    if (t_next >= horizon_) {
      advance_to(horizon_);
      break;
    }
    if (t_done == t_next) {
      advance_to(t_done);
      if (result_.breakdown.productive >= work_) {
        finished = true;
        break;
      }
      continue;  // rounding left a few ns of work: the next turn asks again
    }
    if (t_fault < t_queue || (t_fault == t_queue && t_fault != kNever && false)) {
      advance_to(t_fault);
      inject(faults_.next());
      continue;
    }
    std::pop_heap(heap_.begin(), heap_.end(), Later{});
    const Key key = heap_.back();
    heap_.pop_back();
    Item item{key.at, key.seq, std::move(payloads_[key.slot])};
    free_.push_back(key.slot);
    // A policy that keeps acting without time passing would never end; stop it loudly.
    same_instant_ = item.at == now_ ? same_instant_ + 1 : 0;
    if (same_instant_ > 100000)
      throw std::runtime_error("policy '" + sc_.policy + "' made no progress: 100000 events at t=" +
                               std::to_string(now_ * 1e-9) + " s (last: " + last_event_ + ")");
    advance_to(item.at);
    dispatch(item);
  }
  // Batches still under way at the horizon leave the network with this world (the
  // replicas forked from this one start on an idle network).
  abandon_batches();
  *alive_ = false;
  // Horizon (or the work done): progress since the last checkpoint is kept.
  progress_.keep(result_.breakdown);
  const std::int64_t end = now_;  // the horizon, or the instant the work was done
  result_.elapsed_s = end * 1e-9;
  result_.finished = finished;
  result_.exposure_s = (sc_.compute_clock ? exposed_ : end) * 1e-9;
  result_.machines_used = view_.machine_count();
  // A finite fleet that can no longer field the job: it waits for machines and none is
  // coming (retirements took them; nothing in repair, nothing left to preempt).
  result_.depleted = !finished && waiting_for_machines() && in_repair_ == 0 && preempting_ == 0 &&
                     preemptible_left_ == 0;
  result_.ettr = static_cast<double>(result_.breakdown.productive) / static_cast<double>(end);
  result_.checkpoints = progress_.checkpoints();
  result_.steps =
      static_cast<std::int64_t>(result_.breakdown.productive / (sc_.job.step_time_s * 1e9));
  result_.events = events_;
  result_.flow_batches_real = flows_.real_batches() - real_at_start_;
  result_.flow_batches_cached = flows_.cached_batches() - cached_at_start_;
  for (const Fault& f : fault_log_) {
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
  // The ledger must balance: every fault (and every recurrence) has exactly one outcome.
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
  if (opt_.timeline) {
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
  return std::move(result_);
}

void SimWorld::dispatch(Item& item) {
  std::visit(Overloaded{
                 [&](Deliver& d) {
                   if (d.epoch >= 0 && d.epoch != epoch_) return;
                   ++events_;
                   MachineId named = kNoMachine;
                   if (const auto* a = std::get_if<InspectionAlert>(&d.event)) named = a->machine;
                   if (const auto* x = std::get_if<ProcessExit>(&d.event)) named = x->machine;
                   if (const auto* x = std::get_if<StartFailed>(&d.event)) named = x->machine;
                   if (named >= 0 && named < static_cast<MachineId>(evidence_.size()))
                     evidence_[named] = true;
                   if (same_instant_ > 99990) last_event_ += " | " + describe(d.event);
                   if (opt_.decisions)
                     result_.decisions.push_back(std::to_string(now_ * 1e-9) + " event " +
                                                 describe(d.event));
                   policy_->on_event(d.event, *this);
                 },
                 [&](TimerItem& t) {
                   if (cancelled_[t.id]) return;
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

double SimWorld::fault_ratio(const Fault& f) const {
  return sc_.faults[f.category].slowdown_factor;
}

Rng SimWorld::fault_rng(Fault& f, int purpose) {
  return Rng({sc_.seed, replica_, 0xFA17ull, f.key, static_cast<std::uint64_t>(purpose),
              f.uses[purpose]++});
}

void SimWorld::settle(Fault& f, Outcome o) {
  if (f.outcome != Outcome::kPending) return;
  f.outcome = o;
  pending_.erase(std::remove(pending_.begin(), pending_.end(), f.id), pending_.end());
}

MachineId SimWorld::attributed(Fault& f) {
  const MachineId m = f.machines.empty() ? kNoMachine : f.machines.front();
  const auto& cat = sc_.faults[f.category];
  const double share = cat.attribution;
  if (m == kNoMachine || share >= 1) return m;
  Rng rng = fault_rng(f, kAttribution);
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
  const std::uint64_t key = arrivals_++;
  const auto& cat = sc_.faults[a.category];
  if (thin_[a.category] > 1) {
    // Bad machines fail more often: keep the arrival with the machine's share of the
    // drawn rate (an empty slot keeps the population's mean share).
    const MachineId here = view_.machine_in(a.slot);
    const double keep = here == kNoMachine ? 1.0 / thin_[a.category]
                        : is_bad(here)     ? 1.0
                                           : 1.0 / sc_.repair.bad_rate_factor;
    if (keep < 1 && !Rng({sc_.seed, replica_, 0x7415ull, key}).bernoulli(keep)) return;
  }
  ++result_.faults_injected;
  ++result_.categories[a.category].injected;
  Fault f;
  f.id = fault_log_.size();
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
    fault_log_.push_back(std::move(f));
    return;
  }
  for (MachineId m : f.machines) ++hits_[m];
  if (cat.persistent)
    for (MachineId m : f.machines) {
      broken_[m] = f.id + 1;
      ++failures_[m];
    }
  // Whether inspections can see this fault is a property of the fault, drawn once: one
  // that DCGM or dmesg does not show stays invisible when it strikes again on a restart.
  if (!cat.alert.empty() && cat.alert_coverage < 1)
    f.alert_seen = fault_rng(f, kCoverage).bernoulli(cat.alert_coverage);
  fault_log_.push_back(std::move(f));
  apply_symptom(fault_log_.back(), false);
}

void SimWorld::job_down() {
  progress_.lose(result_.breakdown);
  mitigated_.clear();  // the next start lays the job out afresh
  job_ = JobState::kDown;
  stuck_ = false;
  ++epoch_;
}

void SimWorld::abort_start(const std::string& signature, MachineId m, std::int64_t observe_at) {
  job_ = JobState::kDown;
  ++epoch_;
  new_batch_token();
  deliver_at(observe_at, StartFailed{start_action_, m, signature}, false);
}

void SimWorld::apply_symptom(Fault& f, bool at_start) {
  const auto& cat = sc_.faults[f.category];
  const MachineId m = f.machines.empty() ? kNoMachine : f.machines.front();
  const bool exits = cat.symptom == Symptom::kCrash || (cat.symptom == Symptom::kNan && cat.exits);
  // The machine the crash log (or the failed start) names, drawn only when one is reported.
  auto named = [&]() { return exits ? attributed(f) : m; };
  const std::int64_t observe = now_ + secs(cat.observe_after_s);
  bool affects = false;
  if (oracle_ && !at_start) {
    deliver_at(now_, OracleFault{f.machines, cat.name, cat.persistent, cat.code_bug, cat.data_bug},
               false);
  }
  // Real-time inspections see machine-level faults at their next check; network
  // alerts repeat (flap) while the fault lasts.
  if (!cat.alert.empty() && f.alert_seen && m != kNoMachine) {
    auto it = inspections_.find(cat.alert);
    if (it != inspections_.end()) {
      const std::int64_t first =
          now_ +
          static_cast<std::int64_t>(fault_rng(f, kInspectionPhase).uniform() * it->second.ns) + 1;
      const bool flaps = cat.alert == "nic" || cat.alert == "switch";
      for (MachineId x : f.machines) {
        deliver_at(first, InspectionAlert{x, cat.alert, cat.signature}, false);
        if (flaps && cat.persistent)
          deliver_at(first + it->second.ns, InspectionAlert{x, cat.alert, cat.signature}, false);
      }
    }
  }
  // The next step's sample shows the NaN (the job is already down for the accounting,
  // its crash is observed later: the sample may come first).
  if (cat.symptom == Symptom::kNan && job_ == JobState::kRunning)
    send_sample(now_ + secs(sc_.job.step_time_s), true);
  switch (cat.symptom) {
    case Symptom::kNan:
      if (!cat.exits) {
        // No NaN check: the job trains on, every step wasted from here on (its progress
        // is lost back to the last checkpoint before the NaN), and only the sample above
        // shows it. A NaN during a start shows once the job runs (finish_start).
        if (job_ == JobState::kRunning) {
          affects = true;
          job_down();
          broken_unacted_ = true;
        }
        break;
      }
      [[fallthrough]];
    case Symptom::kCrash:
      if (job_ == JobState::kRunning) {
        affects = true;
        const std::int64_t step = steps_done();
        job_down();
        broken_unacted_ = true;
        deliver_at(observe, ProcessExit{named(), cat.exit_code, cat.signature, step}, false);
      } else if (job_ == JobState::kStarting) {
        affects = true;
        broken_unacted_ = true;
        abort_start(cat.signature, named(), observe);
      } else if (!acquiring_.empty() && cat.scope == FaultScope::kJob) {
        // A job-wide fault while machines are being acquired fails the restart.
        affects = true;
        broken_unacted_ = true;
        new_batch_token();
        ActionId id = acquiring_.front().id;
        drop_acquisitions();
        deliver_at(observe, StartFailed{id, kNoMachine, cat.signature}, false);
      }
      break;
    case Symptom::kHang:
      if (job_ == JobState::kRunning && !stuck_) {
        affects = true;
        stuck_ = true;
        broken_unacted_ = true;
        send_sample(now_, false);  // the step counter stops
        if (sc_.job.collective_timeout_s > 0) {
          // The NCCL watchdog aborts every rank; the log names the collective, not the culprit.
          push(now_ + secs(sc_.job.collective_timeout_s),
               Internal{Internal::kWatchdog, static_cast<std::uint64_t>(epoch_)});
        }
      } else if (job_ == JobState::kStarting) {
        affects = true;
        broken_unacted_ = true;
        abort_start("Watchdog caught collective operation timeout", kNoMachine,
                    now_ + secs(sc_.job.collective_timeout_s));
      }
      break;
    case Symptom::kSlowdown:
      if (job_ == JobState::kRunning || job_ == JobState::kStarting) {
        affects = true;
        if (!f.incident) {  // open before the rate is recomputed: only open slowdowns slow the job
          f.incident = true;
          open_.push_back(f.id);
        }
      }
      if (cat.duration_s > 0 && !at_start)
        push(now_ + secs(cat.duration_s), Internal{Internal::kFaultEnd, f.id});
      update_rate(true);
      break;
    case Symptom::kManual:
      affects = true;
      deliver_at(now_, CodeUpdateRequested{"v" + std::to_string(++code_version_), true}, false);
      break;
  }
  if (affects) {
    if (!f.incident) {
      f.incident = true;
      open_.push_back(f.id);
    }
    settle(f, Outcome::kInterrupted);
  }
  if (!cat.persistent && !cat.job_bug() && cat.symptom != Symptom::kSlowdown) f.active = false;
  if (cat.job_bug() && !at_start)
    push(now_ + secs(cat.fix_h * 3600), Internal{Internal::kCodeFixed, f.id});
  if (!affects && f.outcome == Outcome::kPending) {
    // It landed while the job could not feel it (down, restarting elsewhere, already
    // hung). A fault that lasts strikes at the next start on its machine (finish_start);
    // a transient one had nothing to hit.
    if (f.active) {
      if (std::find(pending_.begin(), pending_.end(), f.id) == pending_.end())
        pending_.push_back(f.id);
    } else {
      settle(f, Outcome::kAbsorbed);
    }
  }
}

void SimWorld::on_leave(MachineId m) {
  // Pending faults whose machines have all left the job never strike it: caught when
  // something named the machine (an alert, a failed test, a crash log), else left.
  std::vector<FaultId> gone;
  for (FaultId id : pending_) {
    const Fault& f = fault_log_[id];
    if (sc_.faults[f.category].scope == FaultScope::kJob ||
        std::find(f.machines.begin(), f.machines.end(), m) == f.machines.end())
      continue;
    bool still = false;
    for (MachineId x : f.machines) still |= view_.slot_of(x) >= 0;
    if (!still) gone.push_back(id);
  }
  for (FaultId id : gone) settle(fault_log_[id], evidence_[m] ? Outcome::kCaught : Outcome::kLeft);
}

void SimWorld::on_join(MachineId m) {
  evidence_[m] = false;
  fp_failed_[m] = false;
  if (!broken_[m]) return;
  // A machine whose repair failed (or that the health check missed) brings its fault
  // back: a recurrence with its own ledger entry, striking at the next start.
  const Fault& old = fault_log_[broken_[m] - 1];
  Fault f;
  f.id = fault_log_.size();
  f.key = (1ull << 62) + f.id;
  f.category = old.category;
  f.at = now_;
  f.slots = {view_.slot_of(m)};
  f.machines = {m};
  f.alert_seen = old.alert_seen;
  broken_[m] = f.id + 1;
  ++result_.categories[f.category].recurred;
  fault_log_.push_back(std::move(f));
  apply_symptom(fault_log_.back(), false);
}

std::int64_t SimWorld::fault_wall_time(std::int64_t arrival) const {
  if (arrival == kNever || !sc_.compute_clock) return arrival;
  if (!computing()) return kNever;
  const std::int64_t left = std::max<std::int64_t>(0, arrival - exposed_);
  return left > horizon_ - now_ ? kNever : now_ + left;
}

std::int64_t SimWorld::steps_done() const {
  return (progress_.committed_ns() + progress_.pending_ns()) / secs(sc_.job.step_time_s);
}

void SimWorld::send_sample(std::int64_t at, bool nan) {
  if (!watch_steps_) return;
  StepSample s;
  s.step = steps_done();
  s.step_time_s =
      stuck_ ? std::numeric_limits<double>::infinity() : sc_.job.step_time_s / progress_.rate();
  s.nan = nan;
  s.steady = true;
  // A NaN's sample reaches the policy even though the job is already down here; the
  // others belong to this run of the job.
  deliver_at(at, std::move(s), !nan);
}

void SimWorld::update_rate(bool sample) {
  // The slowest machine sets the pace (lockstep), as far as the job works around it.
  double rate = 1;
  for (FaultId id : open_) {
    const Fault& f = fault_log_[id];
    if (!f.active || sc_.faults[f.category].symptom != Symptom::kSlowdown) continue;
    for (MachineId m : f.machines) {
      if (!still_on(f, m)) continue;
      int level = 0;
      for (const auto& [slot, l] : mitigated_)
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
  if (sample && progress_.rate() != before && job_ == JobState::kRunning && !stuck_)
    send_sample(now_, false);
}

void SimWorld::resolve_open(bool at_start, std::vector<FaultId>* resolved) {
  std::size_t still = 0;  // open_ compacted in place
  for (FaultId id : open_) {
    Fault& f = fault_log_[id];
    bool affecting = false;
    if (f.active) {
      if (sc_.faults[f.category].job_bug()) affecting = true;
      for (MachineId m : f.machines)
        if (still_on(f, m)) affecting = true;
    }
    if (affecting) {
      open_[still++] = id;
    } else {
      f.resolved = now_;
      // At a start the caller credits the start's mechanism (finish_start).
      if (!at_start) f.resolution = kResolutionWhileRunning;
      if (resolved) resolved->push_back(id);
    }
  }
  open_.resize(still);
}

void SimWorld::mark_acted() {
  broken_unacted_ = false;
  for (FaultId id : open_) {
    Fault& f = fault_log_[id];
    if (f.detected < 0) f.detected = now_;
  }
}

// ---------------------------------------------------------------- actions

std::vector<SlotId> SimWorld::empty_slots() const {
  std::vector<SlotId> out;
  for (SlotId s = 0; s < view_.slots(); ++s)
    if (view_.machine_in(s) == kNoMachine) out.push_back(s);
  return out;
}

void SimWorld::mark_fresh(SlotId s) {
  if (fresh_[s]) return;
  fresh_[s] = true;
  fresh_slots_.push_back(s);
}

bool SimWorld::place_new(SlotId s, bool oracle) {
  // The oracle's unlimited ready spares are fresh, good machines; the scheduler's come
  // from the free pool.
  const MachineId m = oracle ? new_machine(false) : draw_machine();
  if (m == kNoMachine) return false;
  if (oracle) view_.set_domain(m, view_.domain_of_slot(s));  // ready spares where they are needed
  view_.place(m, s);
  on_join(m);
  mark_fresh(s);
  return true;
}

void SimWorld::run_whole_job_batch(int kind, double bytes, Internal done) {
  auto it = whole_job_.find({kind, bytes});
  if (it == whole_job_.end()) {
    std::vector<Transfer> batch;
    batch.reserve(view_.slots());
    for (SlotId s = 0; s < view_.slots(); ++s)
      batch.push_back(
          {platform_.storage_host(s % platform_.storage_hosts()), platform_.slot_host(s), bytes});
    FlowNet::Key key = FlowNet::key_of(batch);
    it = whole_job_.emplace(std::make_pair(kind, bytes), std::make_pair(std::move(batch), key))
             .first;
  }
  run_batch_keyed(it->second.first, it->second.second, done);
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
  // On an idle network a batch's time is known in closed form (SimGrid's cost for it is
  // quadratic in its transfers); SimGrid runs the batches that share the network.
  std::int64_t d =
      flows_.cached(key);  // one lookup: -1 when unknown or while the network is shared
  if (d < 0 && flows_.in_flight() == 0) {
    d = flows_.fluid_duration(batch);
    flows_.remember(key, d);
  }
  if (d >= 0) {
    flows_.count_hit();
    flows_.hold();
    underway_.push_back({0, ++next_hold_});
    push(now_ + d, Internal{Internal::kHoldEnd, next_hold_});  // releases the hold
    push(now_ + d, done);
    return;
  }
  // Bring SimGrid's clock to our time, then run the transfers for real.
  sg4::this_actor::sleep_until(sg_base_ + now_ * 1e-9);
  ++real_in_flight_;
  auto id = std::make_shared<FlowNet::BatchId>(0);
  *id = flows_.start(batch, key, [this, alive = alive_, done, id](std::int64_t) {
    if (!*alive) return;  // the replica ended before this batch did
    --real_in_flight_;
    std::erase_if(underway_, [&](const Underway& u) { return u.real == *id; });
    const std::int64_t at =
        std::max(now_, Duration::round_ns((sg4::Engine::get_clock() - sg_base_) * 1e9));
    push(at, done);
    sync_->cv->notify_all();
  });
  underway_.push_back({*id, 0});
}

void SimWorld::new_batch_token() {
  ++batch_token_;
  abandon_batches();
}

void SimWorld::abandon_batches() {
  for (const Underway& u : underway_) {
    if (u.real) {
      flows_.cancel(u.real);
      --real_in_flight_;
    } else {
      flows_.release();
    }
  }
  underway_.clear();
}

ActionId SimWorld::act(Action a) {
  const ActionId id = next_action_++;
  if (opt_.decisions)
    result_.decisions.push_back(std::to_string(now_ * 1e-9) + " act " + describe(a));
  const bool acts_on_incident =
      !std::holds_alternative<Note>(a) && !std::holds_alternative<SetCheckpointPlan>(a) &&
      !std::holds_alternative<WatchSteps>(a) && !std::holds_alternative<EnableOracle>(a);
  if (acts_on_incident) mark_acted();
  auto fail = [&](std::string why) { deliver_at(now_, ActionFailed{id, std::move(why)}, false); };

  std::visit(
      Overloaded{
          [&](const StopJob&) {
            if (job_ == JobState::kRunning)
              job_down();
            else if (job_ == JobState::kStarting) {
              job_ = JobState::kDown;
              ++epoch_;
              new_batch_token();
            }
            deliver_at(now_, JobStopped{id}, false);
          },
          [&](const StartJob& st) {
            if (ended_) return fail("the run was ended: " + ended_verdict_);
            if (job_ == JobState::kRunning) return fail("job already running");
            if (view_.empty_slot_count() > 0)
              return fail(std::to_string(view_.empty_slot_count()) + " slots have no machine");
            if (!st.version.empty()) ++code_version_;  // a held update rides this restart
            start_job(id, st.mechanism);
          },
          [&](const EvictMachines& e) {
            note_mechanism(e.mechanism);
            for (MachineId m : e.machines) {
              if (m < 0 || m >= view_.machine_count()) continue;
              const SlotId s = view_.slot_of(m);
              if (s < 0) continue;  // not in the job (already evicted, a standby)
              if (opt_.incidents)
                for (FaultId open : open_) fault_log_[open].evicted.push_back(m);
              if (broken_[m]) {
                ++result_.evictions_true;
              } else {
                ++result_.evictions_false;
                // A test failed it although healthy, or it went with its group.
                if (fp_failed_[m]) ++result_.evictions_false_positive;
              }
              if (job_ == JobState::kRunning) job_down();
              if (job_ == JobState::kStarting) {
                job_ = JobState::kDown;
                ++epoch_;
                new_batch_token();
              }
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
          },
          [&](const AcquireMachines& q) {
            if (ended_) return fail("the run was ended: " + ended_verdict_);
            note_mechanism(q.mechanism);
            Acquire acq{id, q.mode, q.slots, {}, {}, 0};
            if (q.mode == AcquireMode::kRequeue) {
              if (job_ == JobState::kRunning) job_down();
              job_ = JobState::kDown;
              new_batch_token();
              drop_acquisitions();
              acq.slots.clear();
              // The whole job is torn down and rescheduled. Healthy machines come back
              // (the job's reservation); machines with an active persistent fault are
              // drained by the scheduler's node health check and replaced.
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
            } else if (acq.slots.empty()) {
              acq.slots = empty_slots();
            }
            if (q.mode == AcquireMode::kStandby) {
              if (q.same_domain && view_.spec().nvlink_domain > 1) {
                // Each slot's own NVLink domain first: a standby parked there, else a spare
                // tray of its rack; woken like a standby. The rest as below. While the job is
                // stopped for it, a slot whose machine sits outside its domain gets a free
                // tray of its domain too, if there is one (its machine goes back to the free
                // pool): the scheduler lays the segments out again.
                auto in_domain = [&](int d) {
                  for (MachineId x : view_.standby())
                    if (view_.domain_of(x) == d) {
                      view_.take_standby(x);
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
              // Warm standbys join after waking; any shortfall goes to the scheduler.
              const int from_pool = std::min<int>(static_cast<int>(acq.slots.size()),
                                                  static_cast<int>(view_.standby().size()));
              acq.from_pool.assign(acq.slots.begin(), acq.slots.begin() + from_pool);
              acq.slots.erase(acq.slots.begin(), acq.slots.begin() + from_pool);
              if (!acq.slots.empty()) ++result_.standby_exhaustions;
              if (!acq.from_pool.empty() || !acq.reserved.empty()) {
                ++acq.waiting;
                push(now_ + secs(sc_.diagnosis.standby_wake_s),
                     Internal{Internal::kStandbyWoken, id});
              }
              if (!acq.slots.empty()) {
                ++acq.waiting;
                const double n = static_cast<double>(acq.slots.size());
                push(now_ + secs(sc_.scheduler.reschedule_base_s +
                                 sc_.scheduler.reschedule_per_machine_s * n),
                     Internal{Internal::kAcquireScheduled, id});
              }
              if (acq.waiting == 0) return deliver_at(now_, MachinesReady{id, {}}, false);
              acquiring_.push_back(std::move(acq));
              return;
            }
            if (q.mode == AcquireMode::kOracle) {
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
              deliver_at(now_, MachinesReady{id, placed}, false);
              return;
            }
            const double n = static_cast<double>(acq.slots.size());
            const double delay =
                q.mode == AcquireMode::kRequeue
                    ? sc_.scheduler.requeue_base_s + sc_.scheduler.requeue_per_machine_s * n
                    : sc_.scheduler.reschedule_base_s + sc_.scheduler.reschedule_per_machine_s * n;
            acq.waiting = 1;
            acquiring_.push_back(acq);
            push(now_ + secs(delay), Internal{Internal::kAcquireScheduled, id});
          },
          [&](const SetCheckpointPlan& p) {
            account(now_);
            const std::int64_t interval =
                p.interval.ns > 0 ? p.interval.ns : secs(sc_.job.step_time_s);
            std::int64_t blocking = p.blocking.ns;
            // Overlapped in-memory saves cost throughput beyond their blocking time (Table 8).
            if (p.tier == CheckpointTier::kMemoryWithPeer && blocking > 0)
              blocking = std::max(
                  blocking, static_cast<std::int64_t>(std::llround(sc_.job.checkpoint_mfu_loss *
                                                                   static_cast<double>(interval))));
            progress_.set_plan(interval, blocking);
            tier_ = p.tier;
            remote_interval_ = std::max<std::int64_t>(interval, p.remote_interval.ns);
          },
          [&](const WatchSteps&) { watch_steps_ = true; },
          [&](const EnableOracle&) { oracle_ = true; },
          [&](const Note& n) {
            note(n.text);
            result_.max_fruitless_rounds =
                std::max(result_.max_fruitless_rounds, n.fruitless_round);
          },
          [&](const EnableInspection& e) {
            if (e.interval.ns <= 0) return fail("inspection interval must be positive");
            inspections_[e.kind] = e.interval;
          },
          [&](RunProbe& in) {
            if (!in.groups.empty()) {
              if (in.test != ProbeKind::kInterAllGather)
                return fail("groups: only inter_all_gather runs per group");
              std::vector<char> seen(view_.machine_count(), 0);
              for (std::size_t g = 0; g < in.groups.size(); ++g) {
                if (in.groups[g].size() < 2)
                  return fail("groups[" + std::to_string(g) +
                              "]: a group needs at least two machines");
                for (MachineId m : in.groups[g]) {
                  if (m < 0 || m >= view_.machine_count() || view_.slot_of(m) < 0)
                    return fail("groups[" + std::to_string(g) + "]: machine " + std::to_string(m) +
                                " is not in the job");
                  if (seen[m]++)
                    return fail("groups: machine " + std::to_string(m) + " is in two groups");
                }
              }
              std::vector<double> t = time_groups(in.groups);
              // The groups start together once set up; the deadline cuts the slow ones off.
              const double setup = sc_.diagnosis.group_setup_s;
              const double left = std::max(0.0, in.deadline.to_seconds() - setup);
              double longest = 0;
              for (double& x : t) longest = std::max(longest, x = std::min(x, left));
              push(now_ + secs(std::min(setup, in.deadline.to_seconds()) + longest),
                   Internal{Internal::kProbeDone, id});
              group_seconds_[id] = std::move(t);
              probes_[id] = std::move(in);
              return;
            }
            const RunProbe& p = probes_[id] = std::move(in);  // `a` is ours: move, not copy
            const auto& d = sc_.diagnosis;
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
            push(now_ + secs(std::min(dur, p.deadline.to_seconds())),
                 Internal{Internal::kProbeDone, id});
          },
          [&](const CaptureStacks&) {
            push(now_ + secs(sc_.diagnosis.capture_s), Internal{Internal::kStacksDone, id});
          },
          [&](RunReplay& r) {
            replays_[id] = std::move(r);
            push(now_ + secs(sc_.diagnosis.replay_s), Internal{Internal::kReplayDone, id});
          },
          [&](const HotUpdate& h) {
            if (ended_) return fail("the run was ended: " + ended_verdict_);
            if (job_ == JobState::kRunning) job_down();
            if (view_.empty_slot_count() > 0) return fail("slots have no machine");
            ++code_version_;
            start_job(id, Mechanism::kHotUpdate);
          },
          [&](const RollBack&) {
            if (ended_) return fail("the run was ended: " + ended_verdict_);
            if (job_ == JobState::kRunning) job_down();
            // Code bugs introduced since the last good version go away with it.
            for (FaultId fid : open_) {
              Fault& f = fault_log_[fid];
              if (sc_.faults[f.category].code_bug) f.active = false;
            }
            for (FaultId fid : std::vector<FaultId>(pending_)) {
              Fault& f = fault_log_[fid];
              if (sc_.faults[f.category].code_bug) {
                f.active = false;
                settle(f, Outcome::kAbsorbed);
              }
            }
            code_version_ = good_version_;
            if (view_.empty_slot_count() > 0) return fail("slots have no machine");
            start_job(id, Mechanism::kRollback);
          },
          [&](const SetStandbyPool& p) {
            pool_target_ = std::max(0, p.size);
            refill_pool(now_ == 0);  // at the start the scheduler's first host selection fills it
          },
          [&](const AvoidMachines& x) {
            avoid_.assign(avoid_.size(), false);
            for (MachineId m : x.machines)
              if (m >= 0) {
                if (static_cast<std::size_t>(m) >= avoid_.size())
                  avoid_.resize(static_cast<std::size_t>(m) + 1, false);
                avoid_[static_cast<std::size_t>(m)] = true;
              }
          },
          [&](const MitigateSlowdown& x) {
            if (job_ != JobState::kRunning) return fail("job not running");
            if (x.slot < 0 || x.slot >= view_.slots() || view_.machine_in(x.slot) == kNoMachine)
              return fail("slot " + std::to_string(x.slot) + " has no machine");
            const int level = x.how == Mitigation::kRebalance ? 1 : 2;
            bool known = false;
            for (auto& [slot, l] : mitigated_)
              if (slot == x.slot) {
                l = std::max(l, level);
                known = true;
              }
            if (!known) mitigated_.emplace_back(x.slot, level);
            const auto& d = sc_.diagnosis;
            progress_.pause(
                secs(x.how == Mitigation::kRebalance ? d.rebalance_s : d.reconfigure_s));
            update_rate(true);
          },
          [&](const EndRun& e) {
            // The job stays down until the on-call engineers, paged, fix the code or the
            // data and requeue it (job.on_call_fix_h); with none, for the rest of the
            // horizon: its time is lost.
            if (!ended_ && sc_.job.on_call_fix_h > 0)
              push(now_ + secs(sc_.job.on_call_fix_h * 3600), Internal{Internal::kOnCallDone, id});
            if (job_ == JobState::kRunning)
              job_down();
            else if (job_ == JobState::kStarting) {
              job_ = JobState::kDown;
              ++epoch_;
              new_batch_token();
            }
            if (!ended_) ++result_.runs_ended;
            ended_ = true;
            ended_verdict_ = e.verdict;
          },
      },
      a);
  return id;
}

void SimWorld::on_internal(const Internal& in) {
  switch (in.kind) {
    case Internal::kHoldEnd: {
      // A memoised batch ends (unless it was given up and released already).
      const auto n = std::erase_if(
          underway_, [&](const Underway& u) { return u.real == 0 && u.hold == in.token; });
      if (n) flows_.release();
      return;
    }
    case Internal::kFaultEnd: {
      Fault& f = fault_log_[in.token];
      if (!f.active) return;
      f.active = false;
      settle(f, Outcome::kAbsorbed);  // a transient slowdown over before the job felt it
      for (MachineId m : f.machines)
        if (broken_[m] == f.id + 1) broken_[m] = 0;
      update_rate(true);
      if (job_ == JobState::kRunning) resolve_open(false);
      return;
    }
    case Internal::kWatchdog: {
      if (static_cast<std::int64_t>(in.token) != epoch_ || job_ != JobState::kRunning || !stuck_)
        return;
      const std::int64_t step = steps_done();
      job_down();
      deliver_at(now_,
                 ProcessExit{kNoMachine, 134, "Watchdog caught collective operation timeout", step},
                 false);
      return;
    }
    case Internal::kAcquireScheduled: {
      auto it = std::find_if(acquiring_.begin(), acquiring_.end(),
                             [&](const Acquire& a) { return a.id == in.token; });
      if (it == acquiring_.end()) return;
      const Internal pulled{Internal::kAcquirePulled, in.token};
      if (it->mode == AcquireMode::kRequeue) {
        // Every machine of the requeued job pulls the image again. A slot a finite fleet
        // cannot fill yet waits for a machine (which then joins without a pull of its own).
        std::vector<SlotId> short_of;
        for (SlotId s : it->slots)
          if (view_.machine_in(s) == kNoMachine && !place_new(s)) short_of.push_back(s);
        it->waiting += static_cast<int>(short_of.size());
        for (SlotId s : short_of) want_machine(in.token, s);
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
          pull.push_back({platform_.storage_host(s % platform_.storage_hosts()),
                          platform_.slot_host(s), sc_.job.image_bytes});
      }
      it->waiting += static_cast<int>(short_of.size());
      for (SlotId s : short_of) want_machine(in.token, s);
      run_batch(std::move(pull), pulled);
      return;
    }
    case Internal::kAcquirePulled: {
      auto it = std::find_if(acquiring_.begin(), acquiring_.end(),
                             [&](const Acquire& a) { return a.id == in.token; });
      if (it == acquiring_.end()) return;
      acquire_part_done(in.token);
      return;
    }
    case Internal::kStandbyWoken: {
      auto it = std::find_if(acquiring_.begin(), acquiring_.end(),
                             [&](const Acquire& a) { return a.id == in.token; });
      if (it == acquiring_.end()) return;
      for (const auto& [s, m] : it->reserved) {
        if (const MachineId old = view_.machine_in(s); old != kNoMachine) {
          if (view_.in_own_domain(s)) {  // filled meanwhile
            free_pool_.push_back(m);
            continue;
          }
          view_.vacate(s);  // a machine outside the slot's domain makes way for one inside
          on_leave(old);
          free_pool_.push_back(old);
        }
        view_.place(m, s);
        on_join(m);
        mark_fresh(s);
      }
      it->reserved.clear();
      for (SlotId s : it->from_pool) {
        if (view_.machine_in(s) != kNoMachine || view_.standby().empty()) continue;
        const MachineId m = view_.standby().front();
        view_.take_standby(m);
        view_.place(m, s);
        on_join(m);
        mark_fresh(s);
      }
      update_rate(true);
      acquire_part_done(in.token);
      refill_pool();
      return;
    }
    case Internal::kPoolRefilled: {
      const MachineId m = draw_machine();
      if (m == kNoMachine)
        return want_machine(0, -1);  // still under way, until a machine comes free
      --refills_;
      view_.add_standby(m);
      return;
    }
    case Internal::kProbeDone:
      deliver_probe(in.token);
      return;
    case Internal::kStacksDone:
      deliver_at(now_, StacksCaptured{in.token, stack_signatures()}, false);
      return;
    case Internal::kReplayDone: {
      auto it = replays_.find(in.token);
      if (it == replays_.end()) return;
      ReplayResult r{in.token, {}};
      bool code_fault = false;  // the job's own code (or its data) fails on every group
      for (FaultId id : open_)
        if (fault_log_[id].active && sc_.faults[fault_log_[id].category].job_bug())
          code_fault = true;
      for (const auto& group : it->second.groups) {
        bool failed = code_fault;
        for (MachineId m : group) {
          if (m < 0 || m >= view_.machine_count() || !broken_[m]) continue;
          Fault& f = fault_log_[broken_[m] - 1];
          if (fault_rng(f, kReplayDraw)
                  .bernoulli(scenarios::default_recall(sc_.faults[f.category], "replay")))
            failed = true;
        }
        r.group_failed.push_back(failed);
      }
      replays_.erase(it);
      deliver_at(now_, std::move(r), false);
      return;
    }
    case Internal::kCodeFixed: {
      Fault& f = fault_log_[in.token];
      f.active = false;  // a fix shipped by hand; the next restart runs clean
      settle(f, Outcome::kAbsorbed);
      return;
    }
    case Internal::kOnCallDone: {
      // The on-call engineers, paged by EndRun, fixed every code and data bug still in
      // the job (on a wrong verdict there was none: they looked for nothing) and requeue
      // the job. Its stack starts afresh, as a relaunched controller does: nothing of the
      // ended run's state survives, and its timers never fire.
      int fixed = 0;
      for (Fault& f : fault_log_) {
        if (!f.active || !sc_.faults[f.category].job_bug()) continue;
        f.active = false;
        settle(f, Outcome::kAbsorbed);
        ++fixed;
      }
      ended_ = false;
      ended_verdict_.clear();
      cancelled_.assign(next_timer_, true);
      note("the on-call fixed " + std::to_string(fixed) +
           " code or data bug(s) and requeues the job: the stack "
           "starts afresh");
      policy_ = registry_.make(sc_.policy, sc_.policy_params);
      policy_->start(*this);
      if (oracle_) {
        // An oracle is told of every fault at once: the new one, of those that still
        // break machines of the job (the ended one was told and did nothing).
        for (const Fault& f : fault_log_) {
          if (!f.active || f.machines.empty()) continue;
          bool here = false;
          for (MachineId m : f.machines) here |= view_.slot_of(m) >= 0;
          const auto& cat = sc_.faults[f.category];
          if (here)
            deliver_at(
                now_, OracleFault{f.machines, cat.name, cat.persistent, cat.code_bug, cat.data_bug},
                false);
        }
      }
      return;
    }
    case Internal::kRepaired:
      repaired(in.token);
      return;
    case Internal::kPreempted: {
      --preempting_;
      ++result_.preemptions;
      machine_free(new_machine(true), false);
      return;
    }
    case Internal::kStartInit: {
      if (in.token != batch_token_ || job_ != JobState::kStarting) return;
      stage_ = StartStage::kRestore;
      std::vector<Transfer> restore;
      const double bytes = sc_.job.checkpoint_bytes_per_machine;
      const Internal restored{Internal::kStartRestored, batch_token_};
      if (bytes > 0 && tier_ == CheckpointTier::kRemote) {
        run_whole_job_batch(1, bytes, restored);
        return;
      }
      bool peer_lost = false;
      // Only the slots that got a machine (in slot order, as the transfer list's key needs).
      std::sort(fresh_slots_.begin(), fresh_slots_.end());
      for (SlotId s : fresh_slots_) {
        // kMemoryWithPeer: the backup copy lives on a peer that shares none of the slot's
        // TP, PP or DP groups (the next pipeline, next stage), so evicting a whole group
        // keeps it. kMemory (Gemini-style): on the next machine, the next stage of the same
        // pipeline, so over-evicting that pipeline loses both copies.
        // A job of PP + 1 machines has no such peer ((s + PP + 1) mod N is s itself): the
        // backup is on the next machine, as on a job that small every machine shares a group.
        SlotId peer = (s + 1) % view_.slots();
        if (tier_ == CheckpointTier::kMemoryWithPeer &&
            (s + sc_.cluster.pp + 1) % view_.slots() != s)
          peer = (s + sc_.cluster.pp + 1) % view_.slots();
        if (fresh_[peer] || peer == s) {
          peer_lost = true;
          break;
        }
        if (bytes > 0)
          restore.push_back({platform_.slot_host(peer), platform_.slot_host(s), bytes});
      }
      if (peer_lost) {
        // Both copies of some shard are gone: back to the last remote checkpoint.
        ++result_.remote_fallbacks;
        const std::int64_t committed = progress_.committed_ns();
        progress_.roll_back_committed(committed - committed % remote_interval_, result_.breakdown);
        if (bytes > 0) {
          run_whole_job_batch(1, bytes, restored);
          return;
        }
        restore.clear();
      }
      run_batch(std::move(restore), restored);
      return;
    }
    case Internal::kStartRestored: {
      if (in.token != batch_token_ || job_ != JobState::kStarting) return;
      finish_start();
      return;
    }
  }
}

void SimWorld::finish_start() {
  job_ = JobState::kRunning;
  stuck_ = false;
  ++epoch_;
  for (SlotId s : fresh_slots_) fresh_[s] = false;
  fresh_slots_.clear();
  progress_.start_warmup(secs(sc_.job.restart_warmup_s));
  // Faults that landed while the job was stopped, on machines it now runs on (and code
  // bugs in the code it now runs), strike now. Slowdowns take effect before the rate is
  // set; the others strike below, after JobStarted.
  std::vector<FaultId> fresh;
  std::size_t keep = 0;  // pending_ compacted in place
  for (FaultId id : pending_) {
    Fault& f = fault_log_[id];
    if (!f.active || f.outcome != Outcome::kPending) continue;
    const auto& cat = sc_.faults[f.category];
    bool here = cat.scope == FaultScope::kJob;
    for (MachineId m : f.machines) here |= still_on(f, m);
    if (!here) {
      pending_[keep++] = id;
      continue;
    }
    if (cat.symptom == Symptom::kSlowdown) {
      f.incident = true;
      open_.push_back(id);
      f.outcome = Outcome::kInterrupted;
    } else {
      fresh.push_back(id);
    }
  }
  pending_.resize(keep);
  update_rate(false);
  deliver_at(now_, JobStarted{start_action_, progress_.committed_ns() / secs(sc_.job.step_time_s)},
             false);
  send_sample(now_, false);  // every start opens the sample stream with the step rate
  // Persistent faults on machines still in the job, and code bugs still in the code,
  // strike again.
  std::vector<FaultId> rearm;
  bool code_fault = false;
  for (FaultId id : fresh) code_fault |= sc_.faults[fault_log_[id].category].code_bug;
  for (FaultId id : open_) {
    Fault& f = fault_log_[id];
    if (!f.active) continue;
    if (sc_.faults[f.category].job_bug()) {
      rearm.push_back(id);
      continue;
    }
    for (MachineId m : f.machines)
      if (view_.slot_of(m) >= 0 && broken_[m] == f.id + 1) {
        rearm.push_back(id);
        break;
      }
  }
  resolved_now_.clear();
  resolve_open(true, &resolved_now_);
  for (FaultId id : resolved_now_)
    if (std::find(rearm.begin(), rearm.end(), id) == rearm.end()) {
      ++result_.resolved_by[static_cast<int>(mechanism_)];
      fault_log_[id].resolution = static_cast<int>(mechanism_);
    }
  mechanism_ = Mechanism::kNone;
  if (rearm.empty() && !code_fault) good_version_ = code_version_;
  rearm.insert(rearm.end(), fresh.begin(), fresh.end());
  for (FaultId id : rearm) {  // still open: resolve_open keeps what still affects the job
    Fault& f = fault_log_[id];
    if (job_ != JobState::kRunning) {
      // An earlier one brought the job down again: the rest wait for the next start.
      if (f.outcome == Outcome::kPending && f.active) pending_.push_back(id);
      continue;
    }
    if (sc_.faults[f.category].symptom != Symptom::kSlowdown) apply_symptom(f, true);
  }
}

void SimWorld::start_job(ActionId id, Mechanism mech) {
  note_mechanism(mech);
  job_ = JobState::kStarting;
  stage_ = StartStage::kInit;
  start_action_ = id;
  ++epoch_;
  new_batch_token();
  push(now_ + secs(sc_.job.init_s), Internal{Internal::kStartInit, batch_token_});
}

void SimWorld::acquire_part_done(ActionId id) {
  auto it = std::find_if(acquiring_.begin(), acquiring_.end(),
                         [&](const Acquire& a) { return a.id == id; });
  if (it == acquiring_.end() || --it->waiting > 0) return;
  MachineSet placed;
  for (const auto* list : {&it->slots, &it->from_pool})
    for (SlotId s : *list)
      if (view_.machine_in(s) != kNoMachine) placed.push_back(view_.machine_in(s));
  acquiring_.erase(it);
  deliver_at(now_, MachinesReady{id, placed}, false);
}

std::vector<double> SimWorld::time_groups(const std::vector<MachineSet>& groups) const {
  // A slow link runs at 1/slowdown_factor of its bandwidth: its machine's NIC, for every
  // active link fault on it (the slowest wins).
  std::map<int, double> degraded;
  for (const auto* list : {&open_, &pending_})
    for (FaultId id : *list) {
      const Fault& f = fault_log_[id];
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
  auto it = probes_.find(id);
  if (it == probes_.end()) return;
  const RunProbe& p = it->second;
  const int kind = static_cast<int>(p.test);
  const std::string test = probe_key(p.test);
  const double fp = scenarios::false_positive(sc_.diagnosis, test);
  ProbeResult r{id, p.test, {}, false};
  auto timed = group_seconds_.find(id);
  // Healthy machines fail a test independently with probability fp. The false failures
  // are found by geometric skips over the healthy machines, from one stream per probe (the
  // replica's n-th test of this kind): the distribution of one draw per machine, in draws
  // per false failure instead of per machine, which made a test of every machine O(N).
  Rng fp_rng({sc_.seed, replica_, 0xF9ull, static_cast<std::uint64_t>(kind), probes_of_[kind]++});
  std::uint64_t skip = fp > 0 ? fp_rng.geometric(fp) : ~std::uint64_t{0};
  // A grouped probe tests the machines of its groups, in order; a group fails with any of
  // them (the collective errors), or when it ran into the deadline.
  std::vector<MachineId> order;
  std::vector<int> group_of;
  if (timed != group_seconds_.end()) {
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
    group_seconds_.erase(timed);
  }
  const MachineSet& tested = order.empty() ? p.machines : order;
  for (std::size_t i = 0; i < tested.size(); ++i) {
    const MachineId m = tested[i];
    if (m < 0 || m >= view_.machine_count()) continue;
    bool fails;
    if (broken_[m]) {
      Fault& f = fault_log_[broken_[m] - 1];
      fails = fault_rng(f, kProbe0 + kind)
                  .bernoulli(scenarios::default_recall(sc_.faults[f.category], test));
    } else {
      fails = skip == 0;
      skip = fails ? fp_rng.geometric(fp) : skip - 1;
      if (fails) {
        fp_failed_[m] = true;
        ++result_.false_failures;
      }
    }
    if (fails && !group_of.empty()) {
      r.group_failed[group_of[i]] = true;
    } else if (fails) {
      r.failed.push_back(m);
      evidence_[m] = true;
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
  probes_.erase(it);
  deliver_at(now_, std::move(r), false);
}

StackSignatures SimWorld::stack_signatures() const {
  // What py-spy / gdb would show, synthesised from ground truth (Fig. 7): in a hang the
  // faulty machine sits in a collective with a dead peer, its pipeline neighbours in
  // send/recv, everyone else waits in the data-parallel gradient sync; in a slowdown
  // the slow machine is still computing while the rest wait for it.
  StackSignatures sig;
  if (job_ != JobState::kRunning) {  // nothing left to capture
    sig.assign(view_.slots(), 0);
    return sig;
  }
  MachineId culprit = kNoMachine;
  bool hang = false;
  for (FaultId id : open_) {
    const Fault& f = fault_log_[id];
    const auto sym = sc_.faults[f.category].symptom;
    // A slow link leaves every rank waiting in the same collective, its own included.
    if (!f.active || f.machines.empty() || sc_.faults[f.category].link_only) continue;
    if ((stuck_ && sym == Symptom::kHang) || (!stuck_ && sym == Symptom::kSlowdown)) {
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

TimerId SimWorld::set_timer(Duration after, std::uint64_t tag) {
  const TimerId id = next_timer_++;
  cancelled_.resize(next_timer_, false);
  push(now_ + std::max<std::int64_t>(0, after.ns), TimerItem{id, tag});
  return id;
}

void SimWorld::cancel_timer(TimerId id) {
  if (id < cancelled_.size()) cancelled_[id] = true;
}

void SimWorld::note(std::string_view reason) {
  if (opt_.decisions)
    result_.decisions.push_back(std::to_string(now_ * 1e-9) + " note " + std::string(reason));
}

}  // namespace faultline::sim
