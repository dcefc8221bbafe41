#include "tests/support/storm_world.h"

#include <sstream>

namespace faultline::testing {

namespace {
std::int64_t ns(double s) { return static_cast<std::int64_t>(std::llround(s * 1e9)); }
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kCollectiveTimeoutS = 1800;

const char* signature(StormKind k) {
  switch (k) {
    case StormKind::kGpu:
      return "RuntimeError: CUDA error: an illegal memory access was encountered";
    case StormKind::kNic:
      return "NCCL WARN NET/IB : Got completion with error 12";
    case StormKind::kTransient:
      return "RuntimeError: CUDA error: unspecified launch failure";
    case StormKind::kJobCrash:
      return "OSError: [Errno 5] Input/output error";
    default:
      return "watchdog: collective operation timeout";
  }
}
}  // namespace

const char* storm_kind_name(StormKind k) {
  switch (k) {
    case StormKind::kGpu:
      return "gpu";
    case StormKind::kNic:
      return "nic";
    case StormKind::kTransient:
      return "transient";
    case StormKind::kSdc:
      return "sdc";
    case StormKind::kHang:
      return "hang";
    case StormKind::kJobCrash:
      return "job-crash";
    case StormKind::kUpdate:
      return "update";
  }
  return "?";
}

StormWorld::StormWorld(const StormOptions& o)
    : o_(o), view_(o.spec), rng_({o.seed, 1}), policy_rng_({o.seed, 2}) {
  fault_of_.assign(static_cast<std::size_t>(view_.machine_count()), -1);
  groups_.out.assign(static_cast<std::size_t>(view_.pp_groups()), 0);
}

void StormWorld::push(std::int64_t at, std::function<void()> f) {
  queue_.emplace(std::make_pair(std::max(at, now_), seq_++), std::move(f));
}

std::int64_t StormWorld::later(double lo_s, double hi_s) { return now_ + ns(draw(lo_s, hi_s)); }

void StormWorld::log(const std::string& line) {
  if (!result_.violation.empty()) return;
  std::ostringstream s;
  s << "t=" << static_cast<double>(now_) * 1e-9 << " " << line;
  result_.log.push_back(s.str());
}

void StormWorld::fail(const std::string& why) {
  if (!result_.violation.empty()) return;
  log("VIOLATION " + why);
  result_.violation = why;
}

TimerId StormWorld::set_timer(Duration after, std::uint64_t tag) {
  const TimerId id = next_timer_++;
  push(now_ + after.ns, [this, id, tag] {
    if (cancelled_.count(id)) return;
    deliver(TimerFired{id, tag});
  });
  return id;
}

// ------------------------------------------------------------------ running a case

StormResult StormWorld::run(Policy& p) {
  policy_ = &p;
  double last = 0;
  for (std::size_t i = 0; i < o_.arrivals.size(); ++i) {
    faults_.push_back(Fault{o_.arrivals[i]});
    last = std::max(last, o_.arrivals[i].at_s);
    push(ns(o_.arrivals[i].at_s), [this, i] { arrive(i); });
  }
  end_ = ns(last + o_.quiet_s);
  in_decision_ = true;
  p.start(*this);
  in_decision_ = false;
  while (!queue_.empty() && result_.violation.empty()) {
    auto it = queue_.begin();
    if (it->first.first > end_) break;
    now_ = it->first.first;
    std::function<void()> f = std::move(it->second);
    queue_.erase(it);
    f();
  }
  if (result_.violation.empty()) {
    now_ = end_;
    check_end();
  }
  return result_;
}

void StormWorld::deliver(const Event& e) {
  if (!result_.violation.empty()) return;
  log("event " + describe(e));
  // What the checker holds the decision to: the machines of the job this event names as
  // broken (a failed stop-time test, an alert that evicts at once).
  std::vector<MachineId> named;
  if (auto* r = std::get_if<ProbeResult>(&e); r && r->group_failed.empty())
    for (MachineId m : r->failed)
      if (m >= 0 && m < view_.machine_count() && view_.slot_of(m) >= 0) named.push_back(m);
  if (auto* a = std::get_if<InspectionAlert>(&e); a && (a->kind == "gpu" || a->kind == "host"))
    if (view_.slot_of(a->machine) >= 0) named.push_back(a->machine);
  ++result_.decisions;
  in_decision_ = true;
  policy_->on_event(e, *this);
  in_decision_ = false;
  check_decision(e, named);
}

// ------------------------------------------------------------------ ground truth

int StormWorld::fault_on(MachineId m) const {
  if (m < 0 || m >= static_cast<MachineId>(fault_of_.size())) return -1;
  const int f = fault_of_[m];
  return f >= 0 && faults_[f].active ? f : -1;
}

void StormWorld::arrive(std::size_t i) {
  Fault& f = faults_[i];
  const StormArrival& a = f.a;
  if (a.kind == StormKind::kUpdate) {
    f.outcome = Outcome::kAbsorbed;
    const bool urgent = a.alert;
    return deliver(CodeUpdateRequested{"v" + std::to_string(++update_version_), urgent});
  }
  if (a.kind == StormKind::kJobCrash) {
    f.active = true;
    if (job_ == Job::kDown && !acquiring_.empty()) {
      // A job-wide fault while machines are acquired for a restart fails that restart,
      // and every acquisition under way is dropped (policies/api/event.h, StartFailed).
      const ActionId first = *acquiring_.begin();
      acquiring_.clear();
      f.active = false;
      f.outcome = Outcome::kPassed;
      ++result_.faults_struck;
      return deliver(StartFailed{first, kNoMachine, signature(a.kind), -1});
    }
    return arm(i);
  }
  const MachineId m = view_.machine_in(a.slot % view_.slots());
  if (m == kNoMachine || fault_of_[m] >= 0) {
    f.outcome = Outcome::kAbsorbed;  // an empty slot, or a machine already broken
    return;
  }
  f.machine = m;
  fault_of_[m] = static_cast<int>(i);
  if (a.warned) {
    deliver(FailureWarning{m, "gpu", Duration::seconds(600), "ECC errors rising"});
    push(now_ + ns(600), [this, i] { activate(i); });
    return;
  }
  activate(i);
}

void StormWorld::activate(std::size_t i) {
  Fault& f = faults_[i];
  if (f.outcome != Outcome::kOpen) return;
  if (f.machine != kNoMachine && view_.slot_of(f.machine) < 0) {
    f.outcome = Outcome::kLeft;  // migrated away before it struck
    fault_of_[f.machine] = -1;
    return;
  }
  f.active = true;
  const StormArrival& a = f.a;
  const MachineId m = f.machine;
  if (a.alert) {
    const std::string kind = a.kind == StormKind::kNic ? "nic" : "gpu";
    const int alerts = a.kind == StormKind::kNic ? 2 : 1;
    for (int k = 0; k < alerts; ++k)
      push(now_ + ns(a.alert_after_s + 30.0 * k), [this, i, m, kind] {
        if (fault_on(m) != static_cast<int>(i) || view_.slot_of(m) < 0) return;
        if (!inspections_.count(kind)) return;
        deliver(InspectionAlert{m, kind, kind == "gpu" ? "Xid 79" : "port down"});
      });
  }
  arm(i);
}

void StormWorld::arm(std::size_t i) {
  const Fault& f = faults_[i];
  if (job_ == Job::kDown || !f.active) return;
  if (f.machine != kNoMachine && view_.slot_of(f.machine) < 0) return;
  const std::int64_t epoch = epoch_;
  push(now_ + ns(f.a.strike_after_s), [this, i, epoch] { strike(i, epoch); });
}

std::int64_t StormWorld::steps() const {
  return steps_ + (job_ == Job::kRunning && !stuck_ ? (now_ - run_since_) / 1'000'000'000 : 0);
}

void StormWorld::strike(std::size_t i, std::int64_t epoch) {
  Fault& f = faults_[i];
  if (epoch != epoch_ || job_ == Job::kDown || !f.active || ended_) return;
  if (f.machine != kNoMachine && view_.slot_of(f.machine) < 0) return;
  if (f.machine != kNoMachine && groups_.on && job_ == Job::kRunning &&
      groups_.out[static_cast<std::size_t>(view_.pp_group_index(view_.slot_of(f.machine)))])
    return;  // its replica is out of the quorum: nothing of it trains
  const StormArrival& a = f.a;
  if ((a.kind == StormKind::kSdc || a.kind == StormKind::kHang) && job_ == Job::kStarting) {
    // Training has not begun: it shows once the job runs.
    push(now_ + ns(a.strike_after_s), [this, i, epoch] { strike(i, epoch); });
    return;
  }
  ++result_.faults_struck;
  switch (a.kind) {
    case StormKind::kSdc:
      if (job_ != Job::kRunning || !watch_) return;  // nothing else shows silent corruption
      return deliver(StepSample{steps(), 1.0, std::nullopt, std::nullopt, true, true});
    case StormKind::kHang:
      if (job_ != Job::kRunning) return;
      if (groups_.on) {
        // The quorum's collectives time out and drop the hung replica.
        push(now_ + ns(60), [this, i, epoch] {
          if (epoch != epoch_ || job_ != Job::kRunning || !faults_[i].active) return;
          crash(i, faults_[i].machine, "replica timed out in a collective", true);
        });
      }
      steps_ = steps();
      stuck_ = true;
      // The job's NCCL watchdog aborts it after the collective timeout.
      push(now_ + ns(kCollectiveTimeoutS), [this, epoch] {
        if (epoch != epoch_ || job_ != Job::kRunning || !stuck_) return;
        const std::int64_t step = steps();
        job_down();
        deliver(ProcessExit{kNoMachine, 134, "Watchdog caught collective operation timeout", step});
      });
      if (!watch_) return;
      return deliver(StepSample{steps_, kInf, std::nullopt, std::nullopt, false, true});
    default:
      break;
  }
  MachineId named = f.machine;
  if (a.misattributed && named != kNoMachine) {
    const std::vector<SlotId> g = view_.pp_group(view_.slot_of(named));
    const auto at = std::find(g.begin(), g.end(), view_.slot_of(named));
    if (g.size() > 1) named = view_.machine_in(g[((at - g.begin()) + 1) % g.size()]);
  }
  crash(i, named, signature(a.kind), false);
  if (a.kind == StormKind::kTransient || a.kind == StormKind::kJobCrash) {
    f.active = false;
    f.outcome = Outcome::kPassed;
    if (f.machine != kNoMachine) fault_of_[f.machine] = -1;
  }
}

void StormWorld::crash(std::size_t i, MachineId named, const std::string& sig, bool hang) {
  const Fault& f = faults_[i];
  if (job_ == Job::kStarting) {
    const ActionId id = start_action_;
    job_down();
    return deliver(StartFailed{id, named, sig, -1});
  }
  // Replica groups: a machine's failure drops its replica while the others train on.
  if (groups_.on && f.machine != kNoMachine) {
    const int r = view_.pp_group_index(view_.slot_of(f.machine));
    int live = 0;
    for (std::uint8_t s : groups_.out) live += s == 0;
    if (live - 1 >= groups_.min) {
      if (hang) stuck_ = false;
      return drop_replica(r, named, sig);
    }
  }
  // The job is dead now; its log shows it a little later, and by then the stack may have
  // stopped and restarted the job for something else (a stale exit, as in the simulator).
  const std::int64_t step = steps();
  job_down();
  push(later(0, 60), [this, named, sig, step] { deliver(ProcessExit{named, 1, sig, step}); });
}

void StormWorld::drop_replica(int r, MachineId named, const std::string& sig) {
  groups_.out[static_cast<std::size_t>(r)] = 1;
  int live = 0;
  for (std::uint8_t s : groups_.out) live += s == 0;
  deliver(ReplicaDropped{r, named, 1, sig, steps(), live});
  unstick();
}

void StormWorld::unstick() {
  if (!stuck_ || job_ != Job::kRunning) return;
  for (SlotId s = 0; s < view_.slots(); ++s) {
    const int f = fault_on(view_.machine_in(s));
    const bool live =
        !groups_.on || groups_.out[static_cast<std::size_t>(view_.pp_group_index(s))] == 0;
    if (f >= 0 && faults_[f].a.kind == StormKind::kHang && live) return;  // still hung
  }
  // The hung rank left (evicted, or its replica dropped): the others train again.
  stuck_ = false;
  run_since_ = now_;
  const std::int64_t epoch = epoch_;
  push(now_, [this, epoch] {
    if (epoch == epoch_ && job_ == Job::kRunning && !stuck_ && watch_)
      deliver(StepSample{steps(), 1.0, std::nullopt, std::nullopt, false, true});
  });
}

void StormWorld::job_down() {
  if (job_ == Job::kRunning) steps_ = steps();
  job_ = Job::kDown;
  stuck_ = false;
  ++epoch_;
}

void StormWorld::leave(MachineId m) {
  const SlotId s = view_.slot_of(m);
  if (s < 0) return;
  view_.vacate(s);
  open_alert_.erase(m);
  failed_test_.erase(m);
  const int f = fault_of_[m];
  if (f >= 0) {
    Fault& x = faults_[f];
    if (x.outcome == Outcome::kOpen) x.outcome = x.active ? Outcome::kEvicted : Outcome::kLeft;
    x.active = false;
    fault_of_[m] = -1;
  }
}

void StormWorld::place_new(SlotId s) {
  const MachineId m = view_.add_machine();
  fault_of_.push_back(-1);
  view_.place(m, s);
}

double StormWorld::detects(const Fault& f, ProbeKind k) const {
  switch (f.a.kind) {
    case StormKind::kGpu:
      return k == ProbeKind::kGpuDiag || k == ProbeKind::kIntraAllToAll || k == ProbeKind::kStress;
    case StormKind::kNic:
      return k == ProbeKind::kInterAllGather || k == ProbeKind::kStress;
    case StormKind::kSdc:
      return k == ProbeKind::kBitwise || k == ProbeKind::kStress;
    case StormKind::kHang:  // a hung GPU fails its diagnostics half the time, as the
                            // simulator's default recall for a category without an alert
      return k == ProbeKind::kStress ? 1 : k == ProbeKind::kGpuDiag ? 0.5 : 0;
    default:
      return 0;
  }
}

// ------------------------------------------------------------------ actions

ActionId StormWorld::act(Action a) {
  const ActionId id = next_action_++;
  log("act " + describe(a));
  check_action(a);
  if (auto why = refusal(a, {.cluster = view_,
                             .job_running = job_ == Job::kRunning,
                             .ended = ended_,
                             .verdict = ended_ ? "code_or_data" : ""})) {
    push(now_, [this, id, why = *why] { deliver(ActionFailed{id, why}); });
    return id;
  }
  apply(id, a);
  return id;
}

void StormWorld::apply(ActionId id, const Action& a) {
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, StopJob>) {
          job_down();
          push(now_, [this, id] { deliver(JobStopped{id}); });
        } else if constexpr (std::is_same_v<T, StartJob>) {
          start(id, x.in_place && x.version.empty());
        } else if constexpr (std::is_same_v<T, HotUpdate>) {
          start(id, false);
        } else if constexpr (std::is_same_v<T, RollBack>) {
          if (job_ == Job::kRunning) job_down();
          if (auto why = empty_slot_refusal(view_)) {
            push(now_, [this, id, w = *why] { deliver(ActionFailed{id, w}); });
            return;
          }
          start(id, false);
        } else if constexpr (std::is_same_v<T, EvictMachines>) {
          evict(x);
        } else if constexpr (std::is_same_v<T, AcquireMachines>) {
          acquire(id, x);
        } else if constexpr (std::is_same_v<T, WatchSteps>) {
          watch_ = true;
        } else if constexpr (std::is_same_v<T, EnableInspection>) {
          inspections_.insert(x.kind);
        } else if constexpr (std::is_same_v<T, RunProbe>) {
          probe(id, x);
        } else if constexpr (std::is_same_v<T, RunReplay>) {
          replay(id, x);
        } else if constexpr (std::is_same_v<T, CaptureStacks>) {
          capture(id);
        } else if constexpr (std::is_same_v<T, EndRun>) {
          job_down();
          ended_ = true;
        } else if constexpr (std::is_same_v<T, EnableReplicaGroups>) {
          groups_.on = true;
          groups_.min = x.min_replicas;
        } else if constexpr (std::is_same_v<T, RejoinReplica>) {
          rejoin(id, x);
        } else if constexpr (std::is_same_v<T, MigrateMachines>) {
          migrate(id, x);
        } else if constexpr (std::is_same_v<T, Note>) {
          log("note " + x.text);
        }
        // SetCheckpointPlan, SetStandbyPool, AvoidMachines, EnableOracle and
        // MitigateSlowdown change nothing this model tracks.
      },
      a);
}

void StormWorld::start(ActionId id, bool in_place) {
  job_down();  // a start under way is replaced
  job_ = Job::kStarting;
  start_action_ = id;
  std::fill(groups_.out.begin(), groups_.out.end(), 0);
  const std::int64_t epoch = epoch_;
  for (std::size_t i = 0; i < faults_.size(); ++i) arm(i);  // a broken machine fails the start
  push(later(in_place ? 5 : 30, in_place ? 20 : 120), [this, id, epoch] {
    if (epoch != epoch_ || job_ != Job::kStarting) return;
    job_ = Job::kRunning;
    run_since_ = now_;
    deliver(JobStarted{id, steps_});
    if (job_ == Job::kRunning && epoch == epoch_)
      deliver(StepSample{steps_, 1.0, std::nullopt, std::nullopt, false, true});
  });
}

void StormWorld::evict(const EvictMachines& e) {
  for (MachineId m : e.machines) {
    if (m < 0 || m >= view_.machine_count() || view_.slot_of(m) < 0) continue;
    const SlotId s = view_.slot_of(m);
    const int r = view_.pp_group_index(s);
    leave(m);
    unstick();
    if (job_ == Job::kDown) continue;
    if (groups_.on && job_ == Job::kRunning) {
      int live = 0;
      for (std::uint8_t x : groups_.out) live += x == 0;
      if (groups_.out[static_cast<std::size_t>(r)]) continue;  // out already
      if (live - 1 >= groups_.min) {
        push(now_, [this, r, m, why = e.reason] {
          if (job_ == Job::kRunning) drop_replica(r, m, "evicted: " + why);
        });
        groups_.out[static_cast<std::size_t>(r)] = 1;
        continue;
      }
    }
    job_down();  // the job loses a rank
  }
}

void StormWorld::acquire(ActionId id, const AcquireMachines& q) {
  std::vector<SlotId> slots = q.slots;
  double lo = 20, hi = 90;
  if (q.mode == AcquireMode::kRequeue) {
    job_down();
    // The scheduler's node health check drains what is broken.
    for (SlotId s = 0; s < view_.slots(); ++s)
      if (fault_on(view_.machine_in(s)) >= 0) leave(view_.machine_in(s));
    slots.clear();
    for (SlotId s = 0; s < view_.slots(); ++s) slots.push_back(s);
    lo = 200, hi = 400;
  } else if (slots.empty()) {
    for (SlotId s = 0; s < view_.slots(); ++s)
      if (view_.machine_in(s) == kNoMachine) slots.push_back(s);
  }
  if (q.mode == AcquireMode::kReschedule) lo = 100, hi = 300;
  if (q.mode == AcquireMode::kRequeue) acquiring_.clear();  // a requeue replaces them all
  acquiring_.insert(id);
  push(later(lo, hi), [this, id, slots] {
    if (!acquiring_.erase(id)) return;  // dropped
    MachineSet placed;
    for (SlotId s : slots)
      if (s >= 0 && s < view_.slots() && view_.machine_in(s) == kNoMachine) {
        place_new(s);
        placed.push_back(view_.machine_in(s));
      }
    deliver(MachinesReady{id, placed});
  });
}

void StormWorld::probe(ActionId id, const RunProbe& p) {
  ProbeResult r{id, p.test, {}, false, {}, {}};
  auto found = [&](MachineId m) {
    const int f = fault_on(m);
    return f >= 0 && rng_.bernoulli(detects(faults_[f], p.test) * o_.recall);
  };
  if (p.groups.empty()) {
    for (MachineId m : p.machines)
      if (found(m)) r.failed.push_back(m);
  } else {
    for (const MachineSet& g : p.groups) {
      bool bad = false;
      for (MachineId m : g) bad = found(m) || bad;
      r.group_failed.push_back(bad);
      r.group_seconds.push_back(bad ? 0.5 * p.deadline.to_seconds() : 10.0);
      if (bad) r.failed.insert(r.failed.end(), g.begin(), g.end());
    }
  }
  const double d = p.test == ProbeKind::kBitwise || p.test == ProbeKind::kStress ? 300 : 60;
  push(later(0.5 * d, 1.5 * d), [this, r] { deliver(r); });
}

void StormWorld::replay(ActionId id, const RunReplay& rp) {
  ReplayResult r{id, {}};
  for (const MachineSet& g : rp.groups) {
    bool bad = false;
    for (MachineId m : g) {
      const int f = fault_on(m);
      bad = (f >= 0 && faults_[f].a.kind != StormKind::kTransient && rng_.bernoulli(o_.recall)) ||
            bad;
    }
    r.group_failed.push_back(bad);
  }
  push(later(300, 900), [this, r] { deliver(r); });
}

void StormWorld::capture(ActionId id) {
  const std::int64_t epoch = epoch_;
  push(later(10, 20), [this, id, epoch] {
    StacksCaptured c{id, {}};
    if (job_ == Job::kRunning && epoch == epoch_) {
      std::vector<std::string> by_slot(static_cast<std::size_t>(view_.slots()),
                                       "allreduce (optimizer)");
      for (SlotId s = 0; s < view_.slots(); ++s) {
        const int f = fault_on(view_.machine_in(s));
        if (f < 0 || faults_[f].a.kind != StormKind::kHang || !stuck_) continue;
        for (SlotId g : view_.pp_group(s)) by_slot[g] = "irecv (pipeline)";
        by_slot[s] = "all_gather (stuck)";
      }
      c.stacks = StackSignatures(by_slot);
    }
    deliver(c);
  });
}

void StormWorld::rejoin(ActionId id, const RejoinReplica& r) {
  auto refuse = [&](const std::string& why) {
    push(now_, [this, id, why] { deliver(ActionFailed{id, why}); });
  };
  if (!groups_.on) return refuse("replica groups not enabled");
  if (job_ != Job::kRunning) return refuse("job not running");
  if (r.replica < 0 || r.replica >= view_.pp_groups() ||
      groups_.out[static_cast<std::size_t>(r.replica)] != 1)
    return refuse("replica not dropped or already rejoining");
  for (SlotId s : view_.pp_group_slots(r.replica))
    if (view_.machine_in(s) == kNoMachine) return refuse("a slot of the replica has no machine");
  groups_.out[static_cast<std::size_t>(r.replica)] = 2;
  const std::int64_t epoch = epoch_;
  push(later(10, 40), [this, id, r, epoch] {
    if (epoch != epoch_ || job_ != Job::kRunning) return;
    for (SlotId s : view_.pp_group_slots(r.replica)) {
      const MachineId m = view_.machine_in(s);
      const int f = fault_on(m);
      if (f >= 0 && faults_[f].a.kind != StormKind::kSdc)
        return drop_replica(r.replica, m, signature(faults_[f].a.kind));
    }
    groups_.out[static_cast<std::size_t>(r.replica)] = 0;
    for (SlotId s : view_.pp_group_slots(r.replica))  // its faults strike it again
      if (const int f = fault_on(view_.machine_in(s)); f >= 0) arm(static_cast<std::size_t>(f));
    int live = 0;
    for (std::uint8_t x : groups_.out) live += x == 0;
    deliver(ReplicaRejoined{id, r.replica, live});
  });
}

void StormWorld::migrate(ActionId id, const MigrateMachines& mm) {
  auto refuse = [&](const std::string& why) {
    push(now_, [this, id, why] { deliver(ActionFailed{id, why}); });
  };
  if (job_ != Job::kRunning) return refuse("job not running");
  if (mm.machines.empty()) return refuse("no machines");
  for (MachineId m : mm.machines)
    if (m < 0 || m >= view_.machine_count() || view_.slot_of(m) < 0)
      return refuse("machine " + std::to_string(m) + " is not in the job");
  const std::int64_t epoch = epoch_;
  push(later(30, 90), [this, id, mm, epoch] {
    if (epoch != epoch_ || job_ != Job::kRunning) {
      deliver(ActionFailed{id, "job stopped during the migration"});
      return;
    }
    MachineSet joined;
    for (MachineId m : mm.machines) {
      const SlotId s = view_.slot_of(m);
      if (s < 0) continue;
      leave(m);
      place_new(s);
      joined.push_back(view_.machine_in(s));
    }
    deliver(MachinesReady{id, joined});
  });
}

// ------------------------------------------------------------------ the checker

void StormWorld::check_action(const Action& a) {
  const bool starts = std::holds_alternative<StartJob>(a) || std::holds_alternative<HotUpdate>(a) ||
                      std::holds_alternative<RollBack>(a);
  if (starts) {
    for (SlotId s = 0; s < view_.slots(); ++s)
      if (view_.machine_in(s) == kNoMachine)
        return fail("restart with slot " + std::to_string(s) + " empty: " + describe(a));
    for (MachineId m : open_alert_)
      return fail("restart on machine " + std::to_string(m) + " with an open alert");
    for (MachineId m : failed_test_)
      return fail("restart on machine " + std::to_string(m) + " that failed a stop-time test");
  }
  auto outside = [&](MachineId m) {
    return m < 0 || m >= view_.machine_count() || view_.slot_of(m) < 0;
  };
  if (auto* p = std::get_if<RunProbe>(&a)) {
    for (MachineId m : p->machines)
      if (outside(m)) return fail("test on machine " + std::to_string(m) + " outside the job");
    for (const MachineSet& g : p->groups)
      for (MachineId m : g)
        if (outside(m)) return fail("test on machine " + std::to_string(m) + " outside the job");
  }
  const bool tests = std::holds_alternative<RunProbe>(a) || std::holds_alternative<RunReplay>(a);
  if (tests && job_ == Job::kStarting)
    return fail("a test while a start is under way: " + describe(a));
  if (auto* r = std::get_if<RunReplay>(&a))
    for (const MachineSet& g : r->groups)
      for (MachineId m : g)
        if (outside(m)) return fail("replay on machine " + std::to_string(m) + " outside the job");
  if (auto* q = std::get_if<AcquireMachines>(&a);
      q && q->mode == AcquireMode::kRequeue && q->reason.rfind("fallback", 0) == 0)
    return fail("whole-job requeue as a fallback while a standby could take the slot: " +
                q->reason);
}

void StormWorld::check_decision(const Event& e, const std::vector<MachineId>& named) {
  if (ended_) return;
  for (MachineId m : named) {
    if (view_.slot_of(m) < 0) continue;  // evicted in this decision
    const bool alert = std::holds_alternative<InspectionAlert>(e);
    fail(std::string(alert ? "an alert" : "a stop-time test") + " named machine " +
         std::to_string(m) + " and the decision did not evict it");
    (alert ? open_alert_ : failed_test_).insert(m);
  }
}

void StormWorld::check_end() {
  if (ended_) return fail("the run was ended (no fault here is the code's or the data's)");
  if (job_ != Job::kRunning)
    return fail("the job does not train at the end, after a quiet spell of " +
                std::to_string(static_cast<int>(o_.quiet_s)) + " s");
  if (stuck_) return fail("the job is stuck at the end");
  for (std::size_t i = 0; i < faults_.size(); ++i) {
    const Fault& f = faults_[i];
    if (f.outcome != Outcome::kOpen) continue;
    if (f.a.kind == StormKind::kJobCrash && !f.active) continue;
    if (f.a.kind == StormKind::kSdc && !watch_) continue;  // the stack cannot see it
    return fail("fault " + std::to_string(i) + " (" + storm_kind_name(f.a.kind) + " on machine " +
                std::to_string(f.machine) + ") is still in the job at the end");
  }
}

}  // namespace faultline::testing
