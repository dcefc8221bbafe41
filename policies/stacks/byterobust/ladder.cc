#include "policies/stacks/byterobust/ladder.h"

#include <utility>

#include "policies/stacks/byterobust/ladder_impl.h"

namespace faultline::policies {

ByteRobust::Limits::Limits(const Params& p)
    : max_fruitless_rounds(static_cast<int>(p.get("max_fruitless_rounds"))),
      attributed_evict_after(static_cast<int>(p.get("attributed_evict_after"))),
      defer_non_urgent(p.get("defer_non_urgent") != 0),
      deferral_window(Duration::hours(p.get("deferral_window_h"))) {}

ByteRobust::ByteRobust(const ModuleRegistry& m, std::shared_ptr<const PolicyInfo> info,
                       const Params& p)
    : limits_(p),
      info_(std::move(info)),
      detector_(m.make_detector(p.choice("detection"), p)),
      localizer_(m.make_localizer(p.choice("localization"), p)),
      checkpoint_(m.make_checkpoint(p.choice("checkpoint"), p)),
      recovery_(m.make_recovery(p.choice("recovery"), p)),
      verdict_(m.make_verdict(p.choice("verdict"), p)),
      slowdowns_(m.make_failslow(p.choice("failslow"), p), p,
                 [this](World& w, SlotId slot, const std::string& why) {
                   evict_and_replace(w, over_eviction_set(w.cluster(), {slot}),
                                     Mechanism::kOverEviction, why);
                 }),
      incidents_(Duration::seconds(p.get("recrash_window_s"))),
      tests_(Duration::seconds(p.get("probe_deadline_s"))) {}

void ByteRobust::start(World& w) {
  w.note("modules: " +
         module_list({&detector_->info(), &localizer_->info(), &recovery_->info(),
                      &checkpoint_->info(), &slowdowns_.module().info(), &verdict_->info()}));
  w.act(checkpoint_->plan(w.cluster()));
  if (auto watch = detector_->watch()) w.act(*watch);  // none: exits and the NCCL watchdog
  for (const EnableInspection& inspection : detector_->inspections()) w.act(inspection);
  if (auto pool = recovery_->start(w.cluster())) w.act(*pool);
  replicas_.start(w);
  start_job(w, "initial start", Mechanism::kNone);
}

void ByteRobust::on_event(const Event& e, World& w) {
  if (ended_) return;
  std::visit([&](const auto& x) { handle(x, w); }, e);
}

// ------------------------------------------------------------ the ladder's steps
// `after_failure`: a restart of the job that ran, on the machines it ran on but those
// replaced (a reattempt, replacements ready). The recovery module may ask for it in place
// (FlashRecovery), except where the survivors' state cannot be trusted or is gone: after a
// requeue every process is killed and the job rescheduled; after a metric anomaly (NaN,
// loss jump) the in-memory state is what went wrong, so the job goes back to its
// checkpoint. New code restarts every rank: a held update merged into this restart, a
// rollback and a hot update (RollBack, HotUpdate) are never in place; nor is the first start.
void ByteRobust::start_job(World& w, std::string why, Mechanism m, bool after_failure) {
  restart(w, Restart{Restart::Kind::kStart, std::move(why), m, after_failure});
}

// A diagnosis concluded with a restart (or a code update asks for one): it is taken as
// soon as nothing holds it back (try_restart).
void ByteRobust::restart(World& w, Restart r) {
  close_round();
  wanted_ = std::move(r);
  try_restart(w);
}

// Takes the wanted restart unless something holds it back: a diagnosis round under way,
// machines being acquired or a dropped replica's slot refilling (each calls again when it
// ends). A slot that is empty with nothing on its way to fill it is refilled first.
void ByteRobust::try_restart(World& w) {
  if (!wanted_ || ended_ || rounds_.is_open() || !acquiring_.empty() ||
      replicas_.refilling(w.cluster()))
    return;
  if (queued_crash_ && take_queued_crash(w)) return;
  if (refill_empty(w, "empty before the restart: ", wanted_->why)) return;
  Restart r = std::move(*wanted_);
  wanted_.reset();
  // What it takes to take it again (an eviction breaks it): not its words.
  starting_.emplace(r.kind, std::string(), r.mechanism, r.after_failure, r.version);
  if (r.kind == Restart::Kind::kRollBack) {
    pending_.start = w.act(RollBack{std::move(r.why)});
    return;
  }
  if (r.kind == Restart::Kind::kHotUpdate) {
    pending_.start = w.act(HotUpdate{std::move(r.version), std::move(r.why)});
    return;
  }
  std::string version = update_.restart();  // a held update: new code on every rank
  const bool in_place = r.after_failure && recovery_->restarts_in_place() && !requeued_ &&
                        !state_suspect_ && version.empty();
  pending_.start = w.act(StartJob{std::move(r.why), r.mechanism, std::move(version), in_place});
}

// Slots left empty with nothing on its way to fill them (a job-wide fault dropped the
// acquisitions under way) are acquired now. True when some were.
bool ByteRobust::refill_empty(World& w, const char* why, const std::string& detail) {
  if (!acquiring_.empty() || replicas_.refilling(w.cluster())) return false;
  const std::vector<SlotId> empty = empty_slots(w.cluster());
  if (empty.empty()) return false;
  acquiring_.insert(acquire(w, recovery_->replace(empty, why + detail, Mechanism::kNone)));
  return true;
}

// Every acquisition goes through here, so that the restart after it knows whether the
// whole job was requeued.
ActionId ByteRobust::acquire(World& w, AcquireMachines a) {
  requeued_ = a.mode == AcquireMode::kRequeue;
  if (requeued_) {
    drained_ = rounds_.is_open();  // the requeue may drain machines the round still tests
    replicas_.requeued();          // the requeue refills every slot
    acquiring_.clear();            // and drops every acquisition and start under way
    starting_.reset();
    pending_.start = 0;
  }
  return w.act(std::move(a));
}

// Back to the last good code version.
void ByteRobust::roll_back(World& w, std::string why) {
  rolled_back_ = true;
  update_.roll_back();
  restart(w, Restart{Restart::Kind::kRollBack, std::move(why), Mechanism::kNone});
}

// The job is down from here on: stopped now if it trains (a stuck job under diagnosis is
// stopped by stop_now, or by the eviction that follows).
void ByteRobust::stop_if_running(World& w, const std::string& why) {
  if (running()) w.act(StopJob{why});
  up_ = false;
  end_run(w);
}

// The job runs (perhaps stuck, while the stack diagnoses it): stop it and count the run
// as interrupted.
void ByteRobust::stop_now(World& w, const std::string& why) {
  w.act(StopJob{why});
  up_ = false;
  end_run(w);
}

// The run that started last is over (stopped, crashed or hung): count it, once, and let
// an adaptive checkpoint planner re-plan before the next start (live mode applies a
// plan from the next launch).
void ByteRobust::end_run(World& w) {
  if (!runs_.open) return;
  runs_.open = false;
  ++runs_.interrupted;
  runs_.running = runs_.running + (w.now() - runs_.last_start);
  slowdowns_.stopped(w.now());
  if (auto plan = checkpoint_->replan(runs_.interrupted, runs_.running, w.cluster())) w.act(*plan);
}

// Evicts the machines of these slots and refills them through the recovery module. A
// machine evicted on evidence of its own fault (not as collateral of an over-eviction)
// is a strike the module counts: it may retire it for good (lemon retirement) or ask
// the scheduler to hand it out last (host scoring).
void ByteRobust::evict_and_replace(World& w, const std::vector<SlotId>& slots, Mechanism m,
                                   const std::string& why) {
  MachineSet machines, lemons;
  machines.reserve(slots.size());
  const bool evidence = m == Mechanism::kRealtimeEviction || m == Mechanism::kStopTimeEviction ||
                        m == Mechanism::kReplay || m == Mechanism::kAttributedEviction ||
                        !is_builtin(m);  // a localizer's own credit (Located::credit)
  bool avoid_more = false;
  for (SlotId s : slots) {
    const MachineId x = w.cluster().machine_in(s);
    if (x == kNoMachine) continue;
    const Recovery::Strike strike = evidence ? recovery_->struck(x) : Recovery::Strike{};
    (strike.retire ? lemons : machines).push_back(x);
    avoid_more = avoid_more || strike.avoid;
  }
  if (machines.empty() && lemons.empty()) return;
  // Replica groups: machines of one replica leave a job that trains on without it. Else
  // the job stops here, also a stuck one under diagnosis: a backend that runs replica
  // groups would otherwise drop the replica and keep the job up.
  const int drop = up_ ? replicas_.drops(slots, w.cluster()) : -1;
  if (drop < 0 && up_ && !running()) stop_now(w, why);
  if (drop < 0) stop_if_running(w, why);
  if (rounds_.is_open()) {  // the round goes on without them
    left_.insert(left_.end(), machines.begin(), machines.end());
    left_.insert(left_.end(), lemons.begin(), lemons.end());
    tests_.forget(left_);
  }
  if (!machines.empty()) w.act(EvictMachines{std::move(machines), why, m});
  if (!lemons.empty())
    w.act(EvictMachines{std::move(lemons), why + "; retired: evicted on evidence again (lemon)", m,
                        true});
  if (avoid_more)
    w.act(AvoidMachines{recovery_->avoided(), "evicted on evidence of their own faults (" +
                                                  recovery_->info().name + ")"});
  if (drop >= 0) return replicas_.refill(drop, slots, why, w);
  if (starting_) {  // the eviction breaks the start under way: taken again once refilled
    wanted_ = *std::exchange(starting_, std::nullopt);
    wanted_->why = wanted_->kind == Restart::Kind::kStart
                       ? "replacements ready"
                       : "taken again: an eviction broke the restart under way";
    pending_.start = 0;
  }
  acquiring_.insert(acquire(w, recovery_->replace(slots, why, m)));
  // Outside a diagnosis the replacements are all the restart waits for; within one (a
  // second fault joined it) the diagnosis goes on, and its conclusion restarts the job.
  if (!rounds_.is_open() && !wanted_)
    wanted_.emplace(Restart::Kind::kStart, "replacements ready", Mechanism::kNone, true);
}

// A failure that is not the last one again: the fruitless rounds start over.
void ByteRobust::new_incident() {
  fruitless_ = 0;
  rolled_back_ = false;
}

// The same failure came back soon after the ladder rolled the code back for it: that
// rollback was a round that found nothing too. Counted, so that a failure no rollback,
// eviction or search removes (a log that keeps naming the wrong machine, a localizer
// blind to this fault) ends in the requeue of gave_up instead of looping for ever.
void ByteRobust::rollback_fruitless(World& w) {
  if (std::exchange(rolled_back_, false)) fruitless(w, "the rollback did not stop the failure");
}

// A diagnosis round (stop-time tests, stack aggregation, replay) that found nothing
// for the failure under way. Reported with its count, so a backend can check that no
// run of them exceeds max_fruitless_rounds.
void ByteRobust::fruitless(World& w, const std::string& what) {
  ++fruitless_;
  w.act(Note{"fruitless round " + std::to_string(fruitless_) + "/" +
                 std::to_string(limits_.max_fruitless_rounds) + ": " + what,
             fruitless_});
}

// Before another round: true when the declared maximum of fruitless rounds is spent,
// in which case the stack stops localizing and requeues the whole job (the scheduler's
// node health check drains what our tests could not find).
bool ByteRobust::gave_up(World& w, const std::string& why) {
  if (fruitless_ < limits_.max_fruitless_rounds) return false;
  w.note("giving up after " + std::to_string(fruitless_) + " fruitless rounds (" + why +
         "): requeue the whole job instead of another round");
  stop_if_running(w, "gave up localizing");
  fruitless_ = 0;
  incidents_.settle();
  tests_.end_nan();
  requeue(w, "fruitless rounds exhausted: " + why);
  return true;
}

// Requeues the whole job (every acquisition under way is dropped) and restarts it once the
// scheduler has placed it again.
void ByteRobust::requeue(World& w, const std::string& why) {
  close_round();
  acquiring_.insert(
      acquire(w, AcquireMachines{AcquireMode::kRequeue, {}, why, Mechanism::kRequeue}));
  wanted_.emplace(Restart::Kind::kStart, "replacements ready", Mechanism::kNone, true);
}

void ByteRobust::reattempt(World& w, const std::string& why) {
  stop_if_running(w, why);
  start_job(w, "reattempt: " + why, Mechanism::kReattempt, true);
}

// ------------------------------------------------------------ outcomes of our actions
void ByteRobust::handle(const MachinesReady& r, World& w) {
  if (!replicas_.ready(r, w, running()) && !acquiring_.erase(r.action)) return;
  resume_localizer(w);
  try_restart(w);
}

void ByteRobust::handle(const JobStarted& s, World& w) {
  if (s.action != pending_.start || pending_.start == 0) return;
  up_ = true;
  starting_.reset();
  escalation_.reset();
  requeued_ = state_suspect_ = false;  // the state runs again
  incidents_.started(w.now(), s.step);
  replicas_.restarted(w.cluster());
  runs_.last_start = w.now();
  end_run(w);  // a run whose end went unnoticed (none expected) counts now
  runs_.open = true;
  slowdowns_.restarted(w);
  detector_->restart(w.now(), s.step);
  detect_timer_.schedule(w, detector_->next_check());
  // One that arrived after this restart was asked for, to be applied now: now.
  if (auto version = update_.started()) apply_update(w, *version, "held through the recovery");
  deferral_timer_.schedule(w, update_.window_end());  // gone if the update rode this start
}

void ByteRobust::handle(const ActionFailed& f, World& w) {
  w.note("action failed: " + f.reason);
  if (replicas_.failed(f, w)) return try_restart(w);
  if (auto t = rounds_.answered(f.action)) return test_refused(*t, f, w);
  if (slowdowns_.refused(f, w, running())) return;
  if (f.action == pending_.start && pending_.start != 0) {
    pending_.start = 0;
    Restart r = starting_.value_or(Restart{});
    starting_.reset();
    if (w.cluster().empty_slot_count() > 0 || replicas_.refilling(w.cluster())) {
      // A slot the start needs is empty (a dropped replica's refill under way): start
      // again once it is filled. A refused rollback rolled the code back all the same.
      if (r.kind == Restart::Kind::kRollBack) r = Restart{Restart::Kind::kStart, r.why};
      r.why = "after the refills: " + f.reason;
      wanted_ = std::move(r);
      return try_restart(w);
    }
    return requeue(w, "fallback: " + f.reason);  // nothing else starts it
  }
  if (acquiring_.erase(f.action)) requeue(w, "fallback: " + f.reason);
}

// A test of a diagnosis round was refused (action.h lists when): the round goes on
// without it, as if it had found nothing.
void ByteRobust::test_refused(const Rounds::Outcome& t, const ActionFailed& f, World& w) {
  if (!t.current) return;  // its round is over: nothing waits for it
  switch (t.test) {
    case Rounds::Test::kStopTime:
      return next_test(w, "a test was refused: " + f.reason);
    case Rounds::Test::kNan:
      tests_.end_nan();
      return start_replay(w, "the bit-wise test was refused: " + f.reason);
    case Rounds::Test::kLocalizer:
      return localization_step(
          Located{{}, false, Mechanism::kReplay, "a localization test was refused: " + f.reason},
          w);
    case Rounds::Test::kStall:
      fruitless(w, "the stall's stack capture was refused");
      stop_now(w, "stalled; stack capture refused");
      return reattempt(w, "stalled; stack capture refused");
    case Rounds::Test::kMfu:
      return;
  }
}

void ByteRobust::handle(const TimerFired& t, World& w) {
  if (detect_timer_.fired(t)) {
    if (!running()) return;
    auto f = detector_->check(w.now());
    detect_timer_.schedule(w, detector_->next_check());
    if (f) found(*f, w);
    return;
  }
  if (ActionId capture = slowdowns_.timer(t, w, running())) mfu_capture(capture);
  if (!deferral_timer_.fired(t)) return;
  if (auto version = update_.window_ended(running()))
    apply_update(w, *version, "forced after the deferral window");
}

// ------------------------------------------------------------ localization module
// The failure is not placed by any stop-time test: hand it to the localization module
// (dual-phase replay, bisection, stress: `localization`) and act on its verdict.
void ByteRobust::start_replay(World& w, const std::string& why) {
  rollback_fruitless(w);
  if (gave_up(w, why)) return;
  stop_if_running(w, why);
  open_round();
  tests_.clear();
  escalation_.reset();
  localizing_ = true;
  held_ = Held{true, why, std::nullopt};
  resume_localizer(w);
}

// The localizer lays its tests out over the slots: while a slot is empty (a second fault
// evicted its machine during the search) the answer to a replay or a grouped probe,
// which may lead to another such test, waits for the replacement. A probe of machines
// answers at once: its failures are culprits to evict now.
void ByteRobust::localizer_answer(const Event& outcome, World& w) {
  const auto* probe = std::get_if<ProbeResult>(&outcome);
  if (probe && probe->group_failed.empty())
    return localization_step(localizer_->answer(outcome, w.cluster()), w);
  held_ = Held{false, {}, outcome};
  resume_localizer(w);
}

void ByteRobust::resume_localizer(World& w) {
  if (!held_) return;
  if (w.cluster().empty_slot_count() > 0) {
    refill_empty(w, "empty during the search");
    return;
  }
  Held h = *std::exchange(held_, std::nullopt);
  if (h.begin) return localization_step(localizer_->begin(h.why, w.cluster()), w);
  localization_step(localizer_->answer(*h.outcome, w.cluster()), w);
}

void ByteRobust::localization_step(LocalizationStep step, World& w) {
  if (auto* test = std::get_if<LocalizationTest>(&step)) {
    // A search that remembers its suspects may name one that left the job since (a
    // second fault evicted it): no test runs on it, and the search ends there.
    if (const MachineSet gone = departed(*test, left_, drained_ ? &w.cluster() : nullptr);
        !gone.empty())
      return localization_step(Located{{},
                                       false,
                                       Mechanism::kReplay,
                                       "the search's next test names machine(s) " +
                                           machine_list(gone) + " that left the job"},
                               w);
    if (auto* probe = std::get_if<RunProbe>(test))
      rounds_.asked(w.act(*probe), Rounds::Test::kLocalizer);
    if (auto* replay = std::get_if<RunReplay>(test))
      rounds_.asked(w.act(*replay), Rounds::Test::kLocalizer);
    return;
  }
  localizing_ = false;
  const Located& l = std::get<Located>(step);
  const bool slow = slowdowns_.search_ended(!l.evict.empty());
  // A slowdown that no machine explains: nothing to roll back (a fruitless round below).
  if (l.code_at_fault && !slow) return roll_back(w, l.reason);
  const std::vector<SlotId> slots = w.cluster().occupied(l.evict);
  if (slots.empty()) {
    fruitless(w, l.reason);
    return reattempt(w, l.reason);
  }
  fruitless_ = 0;
  close_round();
  evict_and_replace(w, slots, l.credit, l.reason);
}

void ByteRobust::handle(const ReplayResult& r, World& w) {
  const std::optional<Rounds::Outcome> t = rounds_.answered(r.action);
  if (!t) return;
  if (!t->current || !localizing_) return w.note("replay result of a closed round, dropped");
  localizer_answer(r, w);
}

// A diagnosis round begins (the one before, if any, is over).
void ByteRobust::open_round() {
  rounds_.open();
  held_.reset();
  crash_suspects_.clear();
  left_.clear();
  drained_ = false;
}

// The round under way is over; a localizer's step it held is dropped with it.
void ByteRobust::close_round() {
  rounds_.close();
  held_.reset();
  localizing_ = false;
  crash_suspects_.clear();
  left_.clear();
  drained_ = false;
}

// ------------------------------------------------------------ code updates
void ByteRobust::handle(const CodeUpdateRequested& c, World& w) {
  const HeldUpdate::Answer a = update_.requested(c.version, c.urgent, limits_.defer_non_urgent,
                                                 !running(), w.now() + limits_.deferral_window);
  deferral_timer_.schedule(w, update_.window_end());
  if (a == HeldUpdate::Answer::kApplyNow)
    apply_update(w, c.version,
                 c.urgent ? "urgent update" : "update applied now (defer_non_urgent=0)");
}

void ByteRobust::apply_update(World& w, std::string version, std::string why) {
  update_.applying(version);
  deferral_timer_.schedule(w, update_.window_end());
  stop_now(w, "code update " + version);
  // The new code starts once any dropped replica's slot is filled.
  restart(w, Restart{Restart::Kind::kHotUpdate, std::move(why), Mechanism::kHotUpdate, false,
                     std::move(version)});
}

std::unique_ptr<Policy> make_byterobust(const ModuleRegistry& modules,
                                        std::shared_ptr<const PolicyInfo> info, const Params& p) {
  return std::make_unique<ByteRobust>(modules, std::move(info), p);
}

std::unique_ptr<Policy> make_byterobust(const ModuleRegistry& modules, const Params& p) {
  return make_byterobust(modules, std::make_shared<const PolicyInfo>(byterobust_info(modules)), p);
}

}  // namespace faultline::policies
