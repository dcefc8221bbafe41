#include "sim/sim_world.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <simgrid/s4u.hpp>

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
      policy_(registry.make(sc.policy, sc.policy_params)),
      replica_(replica),
      opt_(opt),
      policy_rng_({sc.seed, replica, 0x9011C7ull}),
      world_rng_({sc.seed, replica, 0x3071Dull}),
      faults_(sc.faults, sc.cluster.machines, sc.cluster.rack_size, sc.seed, replica,
              trace_arrivals(sc, replica)) {
  horizon_ = Duration::days(sc.job.horizon_days).ns;
  fresh_.assign(view_.slots(), true);
  broken_.assign(view_.machine_count(), 0);
  progress_.set_record_segments(opt_.timeline);
  result_.replica = replica;
  result_.categories.resize(sc.faults.size());
}

SimWorld::~SimWorld() { *alive_ = false; }

// ---------------------------------------------------------------- queue and clock

void SimWorld::push(std::int64_t at, Payload p) { queue_.push(Item{at, seq_++, std::move(p)}); }

void SimWorld::deliver_at(std::int64_t at, Event e, bool epoch_bound) {
  push(at, Deliver{std::move(e), epoch_bound ? epoch_ : -1});
}

void SimWorld::account(std::int64_t t) {
  if (t <= accounted_) return;
  const std::int64_t dt = t - accounted_;
  Breakdown& b = result_.breakdown;
  switch (job_) {
    case JobState::kRunning:
      if (stuck_) b.detection += dt;
      else progress_.run(accounted_, dt, b);
      break;
    case JobState::kStarting:
      (stage_ == StartStage::kRestore ? b.restore : b.failover) += dt;
      break;
    case JobState::kDown:
    case JobState::kIdle:
      if (broken_unacted_) b.detection += dt;
      else if (!acquiring_.empty()) b.failover += dt;
      else b.diagnosis += dt;
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
  policy_->start(*this);
  while (true) {
    const std::int64_t t_queue = queue_.empty() ? kNever : queue_.top().at;
    const std::int64_t t_fault = faults_.peek_time();
    const std::int64_t t_next = std::min({t_queue, t_fault, horizon_});
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
    if (t_fault < t_queue || (t_fault == t_queue && t_fault != kNever && false)) {
      advance_to(t_fault);
      inject(faults_.next());
      continue;
    }
    Item item = queue_.top();
    queue_.pop();
    advance_to(item.at);
    dispatch(item);
  }
  // Memoised batches still "running" at the horizon release the network; real ones
  // finish inside SimGrid after this world is gone and report to no one.
  while (holds_ > 0) {
    flows_.release();
    --holds_;
  }
  *alive_ = false;
  // Horizon: progress since the last checkpoint is kept.
  progress_.keep(result_.breakdown);
  result_.ettr = static_cast<double>(result_.breakdown.productive) / static_cast<double>(horizon_);
  result_.checkpoints = progress_.checkpoints();
  result_.steps = static_cast<std::int64_t>(result_.breakdown.productive / (sc_.job.step_time_s * 1e9));
  result_.events = events_;
  result_.flow_batches_real = flows_.real_batches() - real_at_start_;
  result_.flow_batches_cached = flows_.cached_batches() - cached_at_start_;
  for (const Fault& f : fault_log_) {
    if (!f.incident) continue;
    auto& c = result_.categories[f.category];
    ++c.incidents;
    const std::int64_t end = f.resolved >= 0 ? f.resolved : horizon_;
    const double res = (end - f.at) * 1e-9;
    c.resolution_sum_s += res;
    c.resolution_max_s = std::max(c.resolution_max_s, res);
    if (f.detected >= 0) {
      c.detection_sum_s += (f.detected - f.at) * 1e-9;
      ++c.detected;
    }
    if (opt_.incidents)
      result_.incidents.push_back({f.at * 1e-9, f.category, f.detected >= 0 ? f.detected * 1e-9 : -1,
                                   f.resolved >= 0 ? f.resolved * 1e-9 : -1, f.slots});
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
    for (std::int64_t t = step; t <= horizon_; t += step) {
      const double pt = kept_until(t);
      const std::int64_t w0 = std::max<std::int64_t>(0, t - secs(3600));
      result_.timeline.push_back(
          {t / 3.6e12, pt / static_cast<double>(t), (pt - kept_until(w0)) / static_cast<double>(t - w0)});
    }
  }
  return std::move(result_);
}

void SimWorld::dispatch(Item& item) {
  std::visit(Overloaded{
                 [&](Deliver& d) {
                   if (d.epoch >= 0 && d.epoch != epoch_) return;
                   ++events_;
                   if (opt_.decisions)
                     result_.decisions.push_back(std::to_string(now_ * 1e-9) + " event " + describe(d.event));
                   policy_->on_event(d.event, *this);
                 },
                 [&](TimerItem& t) {
                   if (cancelled_.erase(t.id)) return;
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

double SimWorld::fault_ratio(const Fault& f) const { return sc_.faults[f.category].slowdown_factor; }

void SimWorld::inject(const FaultArrival& a) {
  ++result_.faults_injected;
  ++result_.categories[a.category].injected;
  const auto& cat = sc_.faults[a.category];
  Fault f;
  f.id = fault_log_.size();
  f.category = a.category;
  f.at = now_;
  if (cat.scope == FaultScope::kMachine) f.slots = {a.slot};
  if (cat.scope == FaultScope::kRack) f.slots = view_.rack_slots(a.slot / sc_.cluster.rack_size);
  for (SlotId s : f.slots)
    if (view_.machine_in(s) != kNoMachine) f.machines.push_back(view_.machine_in(s));
  if (cat.scope != FaultScope::kJob && f.machines.empty()) {
    // Hit only empty slots: a machine outside the job; nothing to observe.
    f.active = false;
    fault_log_.push_back(std::move(f));
    return;
  }
  if (cat.persistent)
    for (MachineId m : f.machines) broken_[m] = f.id + 1;
  fault_log_.push_back(std::move(f));
  apply_symptom(fault_log_.back(), false);
}

void SimWorld::job_down() {
  progress_.lose(result_.breakdown);
  job_ = JobState::kDown;
  stuck_ = false;
  ++epoch_;
}

void SimWorld::abort_start(const std::string& signature, MachineId m, std::int64_t observe_at) {
  job_ = JobState::kDown;
  ++epoch_;
  ++batch_token_;
  deliver_at(observe_at, StartFailed{start_action_, m, signature}, false);
}

void SimWorld::apply_symptom(Fault& f, bool at_start) {
  const auto& cat = sc_.faults[f.category];
  const MachineId m = f.machines.empty() ? kNoMachine : f.machines.front();
  const std::int64_t observe = now_ + secs(cat.observe_after_s);
  bool affects = false;
  if (oracle_ && !at_start) {
    deliver_at(now_, OracleFault{f.machines, cat.name, cat.persistent}, false);
  }
  switch (cat.symptom) {
    case Symptom::kCrash:
    case Symptom::kNan:
      if (job_ == JobState::kRunning) {
        affects = true;
        job_down();
        broken_unacted_ = true;
        deliver_at(observe, ProcessExit{m, cat.exit_code, cat.signature}, false);
      } else if (job_ == JobState::kStarting) {
        affects = true;
        broken_unacted_ = true;
        abort_start(cat.signature, m, observe);
      } else if (!acquiring_.empty() && cat.scope == FaultScope::kJob) {
        // A job-wide fault while machines are being acquired fails the restart.
        affects = true;
        broken_unacted_ = true;
        ++batch_token_;
        ActionId id = acquiring_.front().id;
        acquiring_.clear();
        deliver_at(observe, StartFailed{id, kNoMachine, cat.signature}, false);
      }
      break;
    case Symptom::kHang:
      if (job_ == JobState::kRunning && !stuck_) {
        affects = true;
        stuck_ = true;
        broken_unacted_ = true;
        if (!stall_window_.is_infinite())
          deliver_at(now_ + stall_window_.ns,
                     ProgressStalled{progress_.committed_ns() / secs(sc_.job.step_time_s), stall_window_},
                     true);
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
      if (job_ == JobState::kRunning || job_ == JobState::kStarting) affects = true;
      if (cat.duration_s > 0 && !at_start) push(now_ + secs(cat.duration_s), Internal{Internal::kFaultEnd, f.id});
      update_rate();
      break;
    case Symptom::kManual:
      affects = true;
      deliver_at(now_, CodeUpdateRequested{"v" + std::to_string(++code_version_), true}, false);
      break;
  }
  if (affects && !f.incident) {
    f.incident = true;
    open_.push_back(f.id);
  }
  if (!cat.persistent && cat.symptom != Symptom::kSlowdown) f.active = false;
}

void SimWorld::update_rate() {
  double worst = 1;
  for (FaultId id : open_) {
    const Fault& f = fault_log_[id];
    if (!f.active || sc_.faults[f.category].symptom != Symptom::kSlowdown) continue;
    for (MachineId m : f.machines)
      if (view_.slot_of(m) >= 0) worst = std::max(worst, fault_ratio(f));
  }
  // Also slowdowns recorded but not yet open (job idle when they arrived).
  for (const Fault& f : fault_log_) {
    if (f.incident || !f.active || sc_.faults[f.category].symptom != Symptom::kSlowdown) continue;
    for (MachineId m : f.machines)
      if (view_.slot_of(m) >= 0) worst = std::max(worst, fault_ratio(f));
  }
  progress_.set_rate(1.0 / worst);
}

void SimWorld::resolve_open(bool at_start) {
  std::vector<FaultId> still;
  for (FaultId id : open_) {
    Fault& f = fault_log_[id];
    bool affecting = false;
    if (f.active) {
      for (MachineId m : f.machines)
        if (view_.slot_of(m) >= 0) affecting = true;
    }
    if (affecting) still.push_back(id);
    else f.resolved = now_;
  }
  open_ = std::move(still);
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

void SimWorld::place_new(SlotId s) {
  const MachineId m = view_.add_machine();
  broken_.push_back(0);
  view_.place(m, s);
  fresh_[s] = true;
}

void SimWorld::run_whole_job_batch(int kind, double bytes, bool, Internal done) {
  auto it = whole_job_.find({kind, bytes});
  if (it == whole_job_.end()) {
    std::vector<Transfer> batch;
    batch.reserve(view_.slots());
    for (SlotId s = 0; s < view_.slots(); ++s)
      batch.push_back({platform_.storage_host(s % platform_.storage_hosts()), platform_.slot_host(s), bytes});
    FlowNet::Key key = FlowNet::key_of(batch);
    it = whole_job_.emplace(std::make_pair(kind, bytes), std::make_pair(std::move(batch), key)).first;
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

void SimWorld::run_batch_keyed(const std::vector<Transfer>& batch, const FlowNet::Key& key, Internal done) {
  const std::uint64_t token = batch_token_;
  const std::int64_t d = flows_.cached(key);
  if (d >= 0) {
    flows_.count_hit();
    flows_.hold();
    ++holds_;
    push(now_ + d, Internal{Internal::kFaultEnd, ~1ull});  // releases the hold
    push(now_ + d, done);
    return;
  }
  // Bring SimGrid's clock to our time, then run the transfers for real.
  sg4::this_actor::sleep_until(sg_base_ + now_ * 1e-9);
  ++real_in_flight_;
  flows_.start(batch, key, [this, alive = alive_, done, token](std::int64_t) {
    if (!*alive) return;  // the replica ended before this batch did
    --real_in_flight_;
    const std::int64_t at =
        std::max(now_, Duration::round_ns((sg4::Engine::get_clock() - sg_base_) * 1e9));
    if (token == batch_token_) push(at, done);
    sync_->cv->notify_all();
  });
}

ActionId SimWorld::act(Action a) {
  const ActionId id = next_action_++;
  if (opt_.decisions) result_.decisions.push_back(std::to_string(now_ * 1e-9) + " act " + describe(a));
  const bool acts_on_incident = !std::holds_alternative<Note>(a) &&
                                !std::holds_alternative<SetCheckpointPlan>(a) &&
                                !std::holds_alternative<WatchProgress>(a) &&
                                !std::holds_alternative<EnableOracle>(a);
  if (acts_on_incident) mark_acted();
  auto fail = [&](std::string why) { deliver_at(now_, ActionFailed{id, std::move(why)}, false); };

  std::visit(
      Overloaded{
          [&](const StopJob&) {
            if (job_ == JobState::kRunning) job_down();
            else if (job_ == JobState::kStarting) {
              job_ = JobState::kDown;
              ++epoch_;
              ++batch_token_;
            }
            deliver_at(now_, JobStopped{id}, false);
          },
          [&](const StartJob&) {
            if (job_ == JobState::kRunning) return fail("job already running");
            if (!empty_slots().empty())
              return fail(std::to_string(empty_slots().size()) + " slots have no machine");
            job_ = JobState::kStarting;
            stage_ = StartStage::kInit;
            start_action_ = id;
            ++epoch_;
            ++batch_token_;
            push(now_ + secs(sc_.job.init_s), Internal{Internal::kStartInit, batch_token_});
          },
          [&](const EvictMachines& e) {
            for (MachineId m : e.machines) {
              if (m < 0 || m >= view_.machine_count()) continue;
              if (broken_[m]) ++result_.evictions_true;
              else ++result_.evictions_false;
              const SlotId s = view_.slot_of(m);
              if (s >= 0) {
                if (job_ == JobState::kRunning) job_down();
                if (job_ == JobState::kStarting) {
                  job_ = JobState::kDown;
                  ++epoch_;
                  ++batch_token_;
                }
                view_.vacate(s);
              }
              view_.set_health(m, Health::kEvicted);
            }
            update_rate();
          },
          [&](const AcquireMachines& q) {
            Acquire acq{id, q.mode, q.slots};
            if (q.mode == AcquireMode::kRequeue) {
              if (job_ == JobState::kRunning) job_down();
              job_ = JobState::kDown;
              ++batch_token_;
              acquiring_.clear();
              acq.slots.clear();
              // The whole job is torn down and rescheduled. Healthy machines come back
              // (the job's reservation); machines with an active persistent fault are
              // drained by the scheduler's node health check and replaced.
              for (SlotId s = 0; s < view_.slots(); ++s) {
                const MachineId m = view_.machine_in(s);
                if (m != kNoMachine && broken_[m]) view_.vacate(s);
                acq.slots.push_back(s);
              }
              update_rate();
            } else if (acq.slots.empty()) {
              acq.slots = empty_slots();
            }
            if (q.mode == AcquireMode::kStandby) return fail("standby pool not modelled by this backend yet");
            if (q.mode == AcquireMode::kOracle) {
              MachineSet placed;
              for (SlotId s : acq.slots) {
                if (view_.machine_in(s) != kNoMachine) view_.vacate(s);
                place_new(s);
                placed.push_back(view_.machine_in(s));
              }
              update_rate();
              deliver_at(now_, MachinesReady{id, placed}, false);
              return;
            }
            const double n = static_cast<double>(acq.slots.size());
            const double delay = q.mode == AcquireMode::kRequeue
                                     ? sc_.scheduler.requeue_base_s + sc_.scheduler.requeue_per_machine_s * n
                                     : sc_.scheduler.reschedule_base_s + sc_.scheduler.reschedule_per_machine_s * n;
            acquiring_.push_back(acq);
            push(now_ + secs(delay), Internal{Internal::kAcquireScheduled, id});
          },
          [&](const SetCheckpointPlan& p) {
            if (p.tier == CheckpointTier::kMemory)
              return fail("memory tier without a peer copy is not modelled yet; use remote or memory+peer");
            account(now_);
            const std::int64_t interval = p.interval.ns > 0 ? p.interval.ns : secs(sc_.job.step_time_s);
            progress_.set_plan(interval, p.blocking.ns);
            tier_ = p.tier;
          },
          [&](const WatchProgress& w) { stall_window_ = w.stall_window; },
          [&](const EnableOracle&) { oracle_ = true; },
          [&](const Note& n) { note(n.text); },
      },
      a);
  return id;
}

void SimWorld::on_internal(const Internal& in) {
  switch (in.kind) {
    case Internal::kFaultEnd: {
      if (in.token == ~1ull) {
        flows_.release();
        --holds_;
        return;
      }
      Fault& f = fault_log_[in.token];
      if (!f.active) return;
      f.active = false;
      for (MachineId m : f.machines)
        if (broken_[m] == f.id + 1) broken_[m] = 0;
      update_rate();
      if (job_ == JobState::kRunning) resolve_open(false);
      return;
    }
    case Internal::kWatchdog: {
      if (static_cast<std::int64_t>(in.token) != epoch_ || job_ != JobState::kRunning || !stuck_) return;
      job_down();
      deliver_at(now_, ProcessExit{kNoMachine, 134, "Watchdog caught collective operation timeout"}, false);
      return;
    }
    case Internal::kAcquireScheduled: {
      auto it = std::find_if(acquiring_.begin(), acquiring_.end(),
                             [&](const Acquire& a) { return a.id == in.token; });
      if (it == acquiring_.end()) return;
      const Internal pulled{Internal::kAcquirePulled, in.token};
      if (it->mode == AcquireMode::kRequeue) {
        // Every machine of the requeued job pulls the image again.
        for (SlotId s : it->slots)
          if (view_.machine_in(s) == kNoMachine) place_new(s);
        if (sc_.job.image_bytes > 0) run_whole_job_batch(0, sc_.job.image_bytes, true, pulled);
        else push(now_, pulled);
        return;
      }
      std::vector<Transfer> pull;
      for (SlotId s : it->slots) {
        if (view_.machine_in(s) != kNoMachine) continue;  // already there
        place_new(s);
        if (sc_.job.image_bytes > 0)
          pull.push_back({platform_.storage_host(s % platform_.storage_hosts()), platform_.slot_host(s),
                          sc_.job.image_bytes});
      }
      run_batch(std::move(pull), pulled);
      return;
    }
    case Internal::kAcquirePulled: {
      auto it = std::find_if(acquiring_.begin(), acquiring_.end(),
                             [&](const Acquire& a) { return a.id == in.token; });
      if (it == acquiring_.end()) return;
      MachineSet placed;
      for (SlotId s : it->slots)
        if (view_.machine_in(s) != kNoMachine) placed.push_back(view_.machine_in(s));
      acquiring_.erase(it);
      deliver_at(now_, MachinesReady{in.token, placed}, false);
      return;
    }
    case Internal::kStartInit: {
      if (in.token != batch_token_ || job_ != JobState::kStarting) return;
      stage_ = StartStage::kRestore;
      std::vector<Transfer> restore;
      const double bytes = sc_.job.checkpoint_bytes_per_machine;
      const Internal restored{Internal::kStartRestored, batch_token_};
      if (bytes > 0 && tier_ == CheckpointTier::kRemote) {
        run_whole_job_batch(1, bytes, true, restored);
        return;
      }
      if (bytes > 0) {
        for (SlotId s = 0; s < view_.slots(); ++s) {
          if (fresh_[s]) {
            // The backup copy lives on a peer outside the slot's parallel groups (one rack over).
            const SlotId peer = (s + sc_.cluster.rack_size * (sc_.cluster.pp + 1)) % view_.slots();
            restore.push_back({platform_.slot_host(peer == s ? (s + 1) % view_.slots() : peer),
                               platform_.slot_host(s), bytes});
          }
        }
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
  std::fill(fresh_.begin(), fresh_.end(), false);
  update_rate();
  deliver_at(now_, JobStarted{start_action_, progress_.committed_ns() / secs(sc_.job.step_time_s)}, false);
  // Persistent faults on machines still in the job strike again.
  std::vector<FaultId> rearm;
  for (FaultId id : open_) {
    Fault& f = fault_log_[id];
    if (!f.active) continue;
    for (MachineId m : f.machines)
      if (view_.slot_of(m) >= 0 && broken_[m] == f.id + 1) {
        rearm.push_back(id);
        break;
      }
  }
  resolve_open(true);
  for (FaultId id : rearm) {
    Fault& f = fault_log_[id];
    f.resolved = -1;
    open_.push_back(id);
    if (sc_.faults[f.category].symptom != Symptom::kSlowdown) apply_symptom(f, true);
    if (job_ != JobState::kRunning) break;
  }
}

TimerId SimWorld::set_timer(Duration after, std::uint64_t tag) {
  const TimerId id = next_timer_++;
  push(now_ + std::max<std::int64_t>(0, after.ns), TimerItem{id, tag});
  return id;
}

void SimWorld::cancel_timer(TimerId id) { cancelled_.insert(id); }

void SimWorld::note(std::string_view reason) {
  if (opt_.decisions) result_.decisions.push_back(std::to_string(now_ * 1e-9) + " note " + std::string(reason));
}

}  // namespace faultline::sim
