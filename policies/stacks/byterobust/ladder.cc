#include "policies/stacks/byterobust/ladder.h"

#include <algorithm>
#include <optional>
#include <set>
#include <utility>

#include "policies/localization/localization.h"
#include "policies/module.h"
#include "policies/stacks/byterobust/held_update.h"
#include "policies/stacks/byterobust/incidents.h"
#include "policies/stacks/byterobust/replica_groups.h"
#include "policies/stacks/byterobust/rounds.h"
#include "policies/stacks/byterobust/slowdowns.h"
#include "policies/stacks/byterobust/stop_time.h"

namespace faultline::policies {

namespace {

// The ladder (controller.h): what each failure calls for, in the order ByteRobust asks.
// What the questions need lives beside it: incident identity (Incidents), the MFU decline
// and the straggler (Slowdowns), a held code update (HeldUpdate); the answers come from
// the modules (policies/module.h).
class ByteRobust final : public Policy {
 public:
  ByteRobust(const ModuleRegistry& m, std::shared_ptr<const PolicyInfo> info, const Params& p)
      : p_(p),
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
  const PolicyInfo& info() const override { return *info_; }

  void start(World& w) override {
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

  void on_event(const Event& e, World& w) override {
    if (ended_) return;
    std::visit([&](const auto& x) { handle(x, w); }, e);
  }

 private:
  // The job trains and no diagnosis holds it (a stall's capture runs on a stuck job).
  bool running() const { return up_ && !rounds_.is_open() && !ended_; }

  // ------------------------------------------------------------ the ladder's steps
  // `after_failure`: a restart of the job that ran, on the machines it ran on but those
  // replaced (a reattempt, replacements ready). The recovery module may ask for it in place
  // (FlashRecovery), except where the survivors' state cannot be trusted or is gone: after a
  // requeue every process is killed and the job rescheduled; after a metric anomaly (NaN,
  // loss jump) the in-memory state is what went wrong, so the job goes back to its
  // checkpoint. New code restarts every rank: a held update merged into this restart, a
  // rollback and a hot update (RollBack, HotUpdate) are never in place; nor is the first start.
  void start_job(World& w, std::string why, Mechanism m, bool after_failure = false) {
    restart(w, Restart{Restart::Kind::kStart, std::move(why), m, after_failure});
  }
  // A diagnosis concluded with a restart (or a code update asks for one): it is taken as
  // soon as nothing holds it back (try_restart).
  void restart(World& w, Restart r) {
    close_round();
    wanted_ = std::move(r);
    try_restart(w);
  }
  // Takes the wanted restart unless something holds it back: a diagnosis round under way,
  // machines being acquired or a dropped replica's slot refilling (each calls again when it
  // ends). A slot that is empty with nothing on its way to fill it is refilled first.
  void try_restart(World& w) {
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
  bool refill_empty(World& w, const char* why, const std::string& detail = {}) {
    if (!acquiring_.empty() || replicas_.refilling(w.cluster())) return false;
    const std::vector<SlotId> empty = empty_slots(w.cluster());
    if (empty.empty()) return false;
    acquiring_.insert(acquire(w, recovery_->replace(empty, why + detail, Mechanism::kNone)));
    return true;
  }
  // Every acquisition goes through here, so that the restart after it knows whether the
  // whole job was requeued.
  ActionId acquire(World& w, AcquireMachines a) {
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
  void roll_back(World& w, std::string why) {
    rolled_back_ = true;
    update_.roll_back();
    restart(w, Restart{Restart::Kind::kRollBack, std::move(why), Mechanism::kNone});
  }
  // The job is down from here on: stopped now if it trains (a stuck job under diagnosis is
  // stopped by stop_now, or by the eviction that follows).
  void stop_if_running(World& w, const std::string& why) {
    if (running()) w.act(StopJob{why});
    up_ = false;
    end_run(w);
  }
  // The job runs (perhaps stuck, while the stack diagnoses it): stop it and count the run
  // as interrupted.
  void stop_now(World& w, const std::string& why) {
    w.act(StopJob{why});
    up_ = false;
    end_run(w);
  }
  // The run that started last is over (stopped, crashed or hung): count it, once, and let
  // an adaptive checkpoint planner re-plan before the next start (live mode applies a
  // plan from the next launch).
  void end_run(World& w) {
    if (!runs_.open) return;
    runs_.open = false;
    ++runs_.interrupted;
    runs_.running = runs_.running + (w.now() - runs_.last_start);
    slowdowns_.stopped(w.now());
    if (auto plan = checkpoint_->replan(runs_.interrupted, runs_.running, w.cluster()))
      w.act(*plan);
  }
  // Evicts the machines of these slots and refills them through the recovery module. A
  // machine evicted on evidence of its own fault (not as collateral of an over-eviction)
  // is a strike the module counts: it may retire it for good (lemon retirement) or ask
  // the scheduler to hand it out last (host scoring).
  void evict_and_replace(World& w, const std::vector<SlotId>& slots, Mechanism m,
                         const std::string& why) {
    MachineSet machines, lemons;
    machines.reserve(slots.size());
    const bool evidence = m == Mechanism::kRealtimeEviction || m == Mechanism::kStopTimeEviction ||
                          m == Mechanism::kReplay || m == Mechanism::kAttributedEviction;
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
      w.act(EvictMachines{std::move(lemons), why + "; retired: evicted on evidence again (lemon)",
                          m, true});
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
  void new_incident() {
    fruitless_ = 0;
    rolled_back_ = false;
  }
  // The same failure came back soon after the ladder rolled the code back for it: that
  // rollback was a round that found nothing too. Counted, so that a failure no rollback,
  // eviction or search removes (a log that keeps naming the wrong machine, a localizer
  // blind to this fault) ends in the requeue of gave_up instead of looping for ever.
  void rollback_fruitless(World& w) {
    if (std::exchange(rolled_back_, false)) fruitless(w, "the rollback did not stop the failure");
  }
  // A diagnosis round (stop-time tests, stack aggregation, replay) that found nothing
  // for the failure under way. Reported with its count, so a backend can check that no
  // run of them exceeds max_fruitless_rounds.
  void fruitless(World& w, const std::string& what) {
    ++fruitless_;
    w.act(Note{"fruitless round " + std::to_string(fruitless_) + "/" +
                   std::to_string(static_cast<int>(p_.get("max_fruitless_rounds"))) + ": " + what,
               fruitless_});
  }
  // Before another round: true when the declared maximum of fruitless rounds is spent,
  // in which case the stack stops localizing and requeues the whole job (the scheduler's
  // node health check drains what our tests could not find).
  bool gave_up(World& w, const std::string& why) {
    if (fruitless_ < static_cast<int>(p_.get("max_fruitless_rounds"))) return false;
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
  void requeue(World& w, const std::string& why) {
    close_round();
    acquiring_.insert(
        acquire(w, AcquireMachines{AcquireMode::kRequeue, {}, why, Mechanism::kRequeue}));
    wanted_.emplace(Restart::Kind::kStart, "replacements ready", Mechanism::kNone, true);
  }
  void reattempt(World& w, const std::string& why) {
    stop_if_running(w, why);
    start_job(w, "reattempt: " + why, Mechanism::kReattempt, true);
  }

  // ------------------------------------------------------------ outcomes of our actions
  void handle(const MachinesReady& r, World& w) {
    if (!replicas_.ready(r, w, running()) && !acquiring_.erase(r.action)) return;
    resume_localizer(w);
    try_restart(w);
  }
  void handle(const JobStarted& s, World& w) {
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
  void handle(const ActionFailed& f, World& w) {
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
  void test_refused(const Rounds::Outcome& t, const ActionFailed& f, World& w) {
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
  void handle(const TimerFired& t, World& w) {
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

  // ------------------------------------------------------------ explicit failures
  void handle(const InspectionAlert& a, World& w) {
    if (a.machine < 0 || a.machine >= w.cluster().machine_count() ||
        w.cluster().slot_of(a.machine) < 0)
      return;
    if (!detector_->alert(a, w.now())) return;
    // An alert on a suspect of the crash under diagnosis (the machine its log named or a
    // pipeline neighbour) is that crash's culprit, seen with high confidence (ByteRobust
    // evicts on such events at once): the round ends here, and the tests still under way
    // are moot. Otherwise, in every phase: a diagnosis under way goes on without the
    // machine, machines being acquired are joined by its replacement, a start under way is
    // taken again after it.
    if (rounds_.is_open() &&
        std::count(crash_suspects_.begin(), crash_suspects_.end(), a.machine)) {
      escalation_.reset();
      tests_.clear();
      fruitless_ = 0;
      close_round();
    }
    evict_and_replace(w, {w.cluster().slot_of(a.machine)}, Mechanism::kRealtimeEviction,
                      "real-time " + a.kind + " alert: " + a.detail);
  }
  // Replica groups: a replica dropped out or rejoined while the job trains.
  void handle(const ReplicaDropped& d, World& w) { replicas_.dropped(d, w, running()); }
  void handle(const ReplicaRejoined& r, World& w) { replicas_.rejoined(r, w); }
  void handle(const ProcessExit& x, World& w) {
    // The job is down already, or a start is under way (a failure while it starts comes
    // as StartFailed): this exit is the echo of a run the stack stopped.
    if (!up_) return;
    if (rounds_.is_open()) {
      // The job is stuck under a stall's diagnosis: the crash waits for its conclusion and
      // is diagnosed before the restart (take_queued_crash) if its machine is still there.
      if (w.keeps_notes())
        w.note("crash during the stall's diagnosis, queued: " + x.signature + " on machine " +
               std::to_string(x.machine));
      queued_crash_ = x;
      return;
    }
    on_crash(w, x.machine, x.exit_code, x.signature, x.step);
  }
  // Before the restart: a crash that came while a diagnosis was under way and named a machine
  // still in the job is diagnosed now (true: a round began). Only before a plain start: a
  // rollback or an update the stall's diagnosis asked for goes first, and the crash, if
  // its machine is broken, comes back after it.
  bool take_queued_crash(World& w) {
    const ProcessExit x = *std::exchange(queued_crash_, std::nullopt);
    const bool named = x.machine >= 0 && x.machine < w.cluster().machine_count() &&
                       w.cluster().slot_of(x.machine) >= 0;
    if (!named || wanted_->kind != Restart::Kind::kStart) {
      w.note("the crash queued during the diagnosis is dropped: " +
             std::string(named ? "a rollback or an update restarts the job first"
                         : x.machine == kNoMachine
                             ? "it named no machine: the restart is its reattempt"
                             : "the machine it named left the job"));
      return false;
    }
    wanted_.reset();
    on_crash(w, x.machine, x.exit_code, x.signature, x.step);
    return true;
  }
  // A predicted failure: the recovery module may move the machine's work off it while the
  // job trains (TrainMover). Only then: a stopped, starting or diagnosed job replaces
  // machines its own way. The outcome (MachinesReady, ActionFailed) needs nothing more: a
  // failed migration lets the failure come and be handled as any other.
  void handle(const FailureWarning& x, World& w) {
    if (!running() || x.machine < 0 || x.machine >= w.cluster().machine_count() ||
        w.cluster().slot_of(x.machine) < 0)
      return;
    if (auto m = recovery_->migrate(x, w.cluster())) w.act(std::move(*m));
  }
  void handle(const StartFailed& x, World& w) {
    if (x.action != 0 && (acquiring_.count(x.action) || replicas_.refills(x.action))) {
      // A job-wide fault failed the restart the machines were acquired for, and the
      // backend dropped every acquisition (event.h): the slots still empty are acquired
      // again before the next restart (try_restart), or now for a search that waits.
      acquiring_.clear();
      replicas_.requeued();
      if (rounds_.is_open()) {
        // It does not close the diagnosis under way: queued for its conclusion.
        w.note(
            "a job-wide fault failed the acquisitions under way during a diagnosis, "
            "queued: " +
            x.signature);
        queued_crash_ = ProcessExit{x.machine, 1, x.signature, x.step};
        return resume_localizer(w);
      }
    } else if (x.action != pending_.start || pending_.start == 0) {
      return;
    }
    pending_.start = 0;
    starting_.reset();
    on_crash(w, x.machine, 1, x.signature, x.step);
  }
  void on_crash(World& w, MachineId m, int code, const std::string& sig, std::int64_t step) {
    if (m != kNoMachine && (m >= w.cluster().machine_count() || w.cluster().slot_of(m) < 0))
      return;  // already evicted
    const CrashKind kind = classify_(sig, code);
    const SlotId slot = m == kNoMachine ? -1 : w.cluster().slot_of(m);
    const CrashRecurrence r = incidents_.crash(w.now(), m, slot, sig, step);
    if (!r.again)
      new_incident();
    else
      rollback_fruitless(w);
    escalation_.reset();
    if (judge_progress(w, step, "crash: " + sig)) return;
    if (r.struck_another && verdict_->judge({r.turns, 0}) != Verdict::kCarryOn) {
      // Before concluding that the crash follows the rank, test the named rank's
      // neighbours again. A log may name the next stage of a broken machine's pipeline
      // (the rank that saw its peer fail first): once the named machine is evicted, its
      // replacement crashes "the same way" because the culprit beside it is still there,
      // missed by one round of tests. Blaming the code then rolls back good code and ends
      // a healthy run. Only when these tests pass again does the crash follow the rank.
      stop_if_running(w, "crash: " + sig);
      open_round();
      tests_.begin(kind, crash_suspects_ = named_and_neighbours(w.cluster(), slot));
      escalation_ = Escalation{r.turns, r.streak,
                               "the same crash at step " + std::to_string(step) + ", on " +
                                   std::to_string(r.turns) + " machines in turn (" + sig + "),",
                               "crash: " + sig};
      next_test(w, sig);
      return;
    }
    stop_if_running(w, "crash: " + sig);
    open_round();
    if (kind == CrashKind::kUserCode) return roll_back(w, "code error in the log: " + sig);
    // Evidence the tests missed: the log keeps naming the same machine although its tests
    // passed and a reattempt did not help. ByteRobust evicts on explicit, attributed
    // errors (§4: high-confidence machine-specific events are evicted at once).
    const int evict_after = static_cast<int>(p_.get("attributed_evict_after"));
    const bool attributable =
        kind == CrashKind::kMachine || kind == CrashKind::kNetwork || kind == CrashKind::kUnknown;
    if (r.again && gave_up(w, sig)) return;
    if (r.again && attributable && evict_after > 0 && r.named >= evict_after) {
      incidents_.named_machine_evicted();
      close_round();
      return evict_and_replace(w, {slot}, Mechanism::kAttributedEviction,
                               "crash log named machine " + std::to_string(m) + " " +
                                   std::to_string(evict_after) + " times in a row: " + sig);
    }
    // The same crash again after a restart: roll back recent code changes; again, replay.
    if (r.level == 1) return roll_back(w, "the same crash again after the restart: " + sig);
    if (r.level >= 2)
      return start_replay(w, "crashes persist after eviction, reattempt and rollback");
    // Stop-time tests on the named machine and its pipeline neighbours, or on everyone.
    if (gave_up(w, sig)) return;
    if (m != kNoMachine) crash_suspects_ = named_and_neighbours(w.cluster(), slot);
    tests_.begin(kind, m != kNoMachine ? crash_suspects_ : w.cluster().placed_machines());
    next_test(w, sig);
  }

  // ------------------------------------------------------------ stop verdict
  // Acts on a stop verdict's ruling (Incidents), if any: ends the run (EndRun, verdict
  // code_or_data: do not requeue) or rolls the code back. True when it acted.
  bool act_on(World& w, const std::optional<Ruling>& r, const std::string& why) {
    if (!r) return false;
    stop_if_running(w, why);
    if (r->verdict == Verdict::kStop) {
      close_round();
      ended_ = true;
      w.act(EndRun{"code_or_data", r->reasons.stop});
    } else {
      roll_back(w, r->reasons.roll_back);
    }
    return true;
  }
  // Every interruption (a crash, a failed start, a NaN or loss jump, a stall) ends a run:
  // when runs keep ending without progress, whatever failed, the verdict module may roll
  // the code back or end the run.
  bool judge_progress(World& w, std::int64_t step, const std::string& why) {
    return act_on(w, incidents_.judge_progress(*verdict_, step, why), why);
  }

  // ------------------------------------------------------------ stop-time tests
  void next_test(World& w, const std::string& why) {
    if (drained_) tests_.forget_gone(w.cluster());
    if (auto probe = tests_.next(why)) {
      rounds_.asked(w.act(*probe), Rounds::Test::kStopTime);
      return;
    }
    if (escalation_) {  // the tests before an escalation passed: the crash follows its rank
      const Escalation e = *std::exchange(escalation_, std::nullopt);
      if (act_on(w, Incidents::judge_identical(*verdict_, e.turns, e.times, e.what), e.why)) return;
    }
    fruitless(w, "stop-time tests found nothing (" + why + ")");
    reattempt(w, "stop-time tests found nothing (" + why + ")");
  }
  // A test result is matched to the round that asked for it. Machines it names that have
  // left the job since (an alert evicted them) are dropped with a note; a stop-time test
  // that named a culprit still in the job evicts it even when its round is over.
  void handle(const ProbeResult& r, World& w) {
    const std::optional<Rounds::Outcome> t = rounds_.answered(r.action);
    if (!t) return;
    MachineSet failed, gone;
    for (MachineId m : r.failed)
      (m >= 0 && m < w.cluster().machine_count() && w.cluster().slot_of(m) >= 0 ? failed : gone)
          .push_back(m);
    if (!gone.empty() && r.group_failed.empty() && w.keeps_notes())
      w.note(std::string(probe_name(r.test)) + " result names machine(s) that left the job " +
             "already, dropped: " + machine_list(gone));
    // A machine that failed a test of machines (not one of pairs or groups) is broken,
    // whoever asked: a stop-time test's, a NaN's or a localizer's (a stress test).
    const bool culprits = r.group_failed.empty();
    if (!t->current) {
      if (!culprits || failed.empty()) {
        if (w.keeps_notes())
          w.note(std::string(probe_name(r.test)) + " result of a closed round, dropped");
        return;
      }
      return evict_and_replace(
          w, w.cluster().slots_of(failed), Mechanism::kStopTimeEviction,
          std::string("failed ") + probe_name(r.test) + " (its round had closed)");
    }
    if (t->test == Rounds::Test::kLocalizer) return localizer_answer(r, w);
    if (!failed.empty() || !gone.empty()) {
      escalation_.reset();  // a machine, not the rank
      if (t->test == Rounds::Test::kNan) tests_.end_nan();
      tests_.clear();
      fruitless_ = 0;
      close_round();
      // What failed is evicted; what failed and has left the job already was this
      // failure's culprit too: the restart waits for its replacement.
      if (failed.empty())
        return start_job(w, std::string("failed ") + probe_name(r.test) + " on machines gone",
                         Mechanism::kNone, true);
      return evict_and_replace(w, w.cluster().slots_of(failed), Mechanism::kStopTimeEviction,
                               std::string("failed ") + probe_name(r.test));
    }
    if (tests_.end_nan()) return start_replay(w, "bit-wise alignment passed everywhere");
    next_test(w, "previous test passed");
  }

  // ------------------------------------------------------------ implicit failures
  // The detection module judges the samples; its findings go to the handlers below.
  void handle(const StepSample& s, World& w) {
    if (!running()) return;
    incidents_.stepped(s.step);
    slowdowns_.sample(s, w);
    auto f = detector_->observe(s, w.now());
    detect_timer_.schedule(w, detector_->next_check());
    if (f) found(*f, w);
  }
  void found(const Finding& f, World& w) {
    if (w.keeps_notes()) w.note("detected: " + describe(f));
    std::visit([&](const auto& x) { handle(x, w); }, f);
  }
  void handle(const ProgressStalled& st, World& w) {
    if (!running()) return;
    // A stall again (Incidents) escalates like a recurring crash, or hangs in the job's own
    // code (Table 2) loop through stall and reattempt until a human ships a fix. The stacks
    // are captured first in every case (15 s): outliers mean a machine, whatever came
    // before (a machine hang at the restart looks like the code hanging again until then).
    const int level = incidents_.stall(w.now(), st.last_step);
    if (level == 0)
      new_incident();
    else
      rollback_fruitless(w);
    if (judge_progress(w, st.last_step, "progress stalled")) return;
    if (level == 0 && gave_up(w, "progress stalled")) return;
    open_round();  // still running (stuck); capture before stopping
    slowdowns_.cancel_rounds();
    pending_.capture = w.act(CaptureStacks{"no progress for the stall window"});
    rounds_.asked(pending_.capture, Rounds::Test::kStall);
  }
  // An MFU decline's stack capture (the job trains on: it belongs to no round).
  void mfu_capture(ActionId capture) {
    pending_.capture = capture;
    rounds_.asked(capture, Rounds::Test::kMfu);
  }
  void handle(const StepTimeHigh& s, World& w) {
    if (!running()) return;
    if (ActionId capture = slowdowns_.slow(s.ratio, w)) mfu_capture(capture);
  }
  void handle(const StacksCaptured& c, World& w) {
    const std::optional<Rounds::Outcome> t = rounds_.answered(c.action);
    if (!t || c.action != pending_.capture) return;
    if (!t->current) return w.note("stacks captured for a closed round, dropped");
    const StackVerdict v = aggregate_stacks(c.stacks);
    if (t->test == Rounds::Test::kMfu) {
      if (!slowdowns_.in_rounds()) return;
      if (!slowdowns_.stacks(v, w, localizer_->places_slowdowns())) return;
      slowdowns_.search_began();
      start_replay(w, "MFU decline that stack aggregation cannot place");
      if (!localizing_) slowdowns_.search_abandoned();  // it gave up before searching
      return;
    }
    if (v.dominant.empty()) {
      // The processes died before their stacks could be read: diagnose as a crash.
      close_round();
      return on_crash(w, kNoMachine, 1, "stalled job exited before stack capture", -1);
    }
    if (v.outliers.empty()) {
      // Every rank waits in the same place: nothing points at a machine. The first time
      // reattempt; stalled again before a step, roll back the code; again, replay.
      if (incidents_.level() == 1) {
        stop_now(w, "stalled again after the restart, no outlier stacks");
        return roll_back(w, "stalled again soon after the restart: roll back recent code");
      }
      if (incidents_.level() >= 2)
        return start_replay(w, "stalls persist after restart and rollback");
      // The job is still up, stuck: stop it before restarting in place (otherwise the
      // start is refused and the fallback requeues the whole job).
      fruitless(w, "stalled with no outlier stacks");
      stop_now(w, "stalled with no outlier stacks");
      return reattempt(w, "stalled with no outlier stacks");
    }
    fruitless_ = 0;
    incidents_.settle();
    close_round();
    const std::vector<SlotId> group = over_eviction_set(w.cluster(), v.outliers);
    // The eviction breaks the stuck job, unless the group is one replica of a job in
    // replica groups: that replica drops out and the others train on.
    if (replicas_.drops(group, w.cluster()) < 0) up_ = false;
    evict_and_replace(w, group, Mechanism::kOverEviction,
                      "stack aggregation: parallel group holding all " +
                          std::to_string(v.outliers.size()) + " outliers");
  }
  void handle(const MetricAnomaly& a, World& w) {
    if (!running()) return;
    state_suspect_ = true;  // the state in memory is what went wrong: restart from a checkpoint
    // The same NaN at the same step again and again: whatever runs the job, the same batch
    // explodes, which no machine can fix: the verdict module rolls back, then ends the run.
    const int repeats = incidents_.anomaly(a.nan, a.step);
    if (judge_progress(w, a.step, "metric anomaly: " + a.metric)) return;
    if (act_on(w,
               Incidents::judge_identical(*verdict_, repeats, repeats,
                                          "NaN at step " + std::to_string(a.step)),
               "metric anomaly: " + a.metric))
      return;
    // A NaN again soon after the last round's restart: its evictions missed the cause.
    if (incidents_.nan_again(w.now()))
      return start_replay(w, "NaN again soon after the last round's restart");
    new_incident();
    stop_if_running(w, "metric anomaly: " + a.metric);
    open_round();
    escalation_.reset();
    rounds_.asked(w.act(tests_.begin_nan(w.cluster().placed_machines())), Rounds::Test::kNan);
  }

  // ------------------------------------------------------------ localization module
  // The failure is not placed by any stop-time test: hand it to the localization module
  // (dual-phase replay, bisection, stress: `localization`) and act on its verdict.
  void start_replay(World& w, const std::string& why) {
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
  void localizer_answer(const Event& outcome, World& w) {
    const auto* probe = std::get_if<ProbeResult>(&outcome);
    if (probe && probe->group_failed.empty())
      return localization_step(localizer_->answer(outcome, w.cluster()), w);
    held_ = Held{false, {}, outcome};
    resume_localizer(w);
  }
  void resume_localizer(World& w) {
    if (!held_) return;
    if (w.cluster().empty_slot_count() > 0) {
      refill_empty(w, "empty during the search");
      return;
    }
    Held h = *std::exchange(held_, std::nullopt);
    if (h.begin) return localization_step(localizer_->begin(h.why, w.cluster()), w);
    localization_step(localizer_->answer(*h.outcome, w.cluster()), w);
  }
  void localization_step(LocalizationStep step, World& w) {
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
  void handle(const ReplayResult& r, World& w) {
    const std::optional<Rounds::Outcome> t = rounds_.answered(r.action);
    if (!t) return;
    if (!t->current || !localizing_) return w.note("replay result of a closed round, dropped");
    localizer_answer(r, w);
  }
  // A diagnosis round begins (the one before, if any, is over).
  void open_round() {
    rounds_.open();
    held_.reset();
    crash_suspects_.clear();
    left_.clear();
    drained_ = false;
  }
  // The round under way is over; a localizer's step it held is dropped with it.
  void close_round() {
    rounds_.close();
    held_.reset();
    localizing_ = false;
    crash_suspects_.clear();
    left_.clear();
    drained_ = false;
  }

  // ------------------------------------------------------------ code updates
  void handle(const CodeUpdateRequested& c, World& w) {
    const HeldUpdate::Answer a =
        update_.requested(c.version, c.urgent, p_.get("defer_non_urgent") != 0, !running(),
                          w.now() + Duration::hours(p_.get("deferral_window_h")));
    deferral_timer_.schedule(w, update_.window_end());
    if (a == HeldUpdate::Answer::kApplyNow)
      apply_update(w, c.version,
                   c.urgent ? "urgent update" : "update applied now (defer_non_urgent=0)");
  }
  void apply_update(World& w, std::string version, std::string why) {
    update_.applying(version);
    deferral_timer_.schedule(w, update_.window_end());
    stop_now(w, "code update " + version);
    // The new code starts once any dropped replica's slot is filled.
    restart(w, Restart{Restart::Kind::kHotUpdate, std::move(why), Mechanism::kHotUpdate, false,
                       std::move(version)});
  }

  template <class T>
  void handle(const T&, World&) {}

  // An escalation waiting on the stop-time tests under way (they pass: it acts).
  struct Escalation {
    int turns, times;
    std::string what, why;
  };

  const Params p_;
  // byterobust_info() of the modules it was built from, computed once per registration (a
  // replica builds its stack from it without rebuilding every module's parameter list).
  const std::shared_ptr<const PolicyInfo> info_;
  const std::unique_ptr<Detector> detector_;
  ModuleTimer detect_timer_{timer_tags::kDetect};
  ModuleTimer deferral_timer_{timer_tags::kDeferredUpdate};  // at update_.window_end()
  const std::unique_ptr<Localizer> localizer_;
  bool localizing_ = false;  // the localizer's conversation is under way
  const std::unique_ptr<CheckpointPlanner> checkpoint_;
  const std::unique_ptr<Recovery> recovery_;
  const std::unique_ptr<StopVerdict> verdict_;
  DroppedReplicas replicas_{*recovery_};
  Rounds rounds_;  // the diagnosis round under way and the tests each round asked for
  // A localizer's step waiting for an empty slot to be filled: its begin, or its answer.
  struct Held {
    bool begin = false;
    std::string why;
    std::optional<Event> outcome;
  };
  std::optional<Held> held_;
  std::optional<Restart> wanted_;    // the restart to take once nothing holds it back
  std::optional<Restart> starting_;  // the restart under way (pending_.start)
  std::set<ActionId> acquiring_;     // acquisitions under way (not a dropped replica's refill)
  std::optional<ProcessExit> queued_crash_;  // a crash while a stall was diagnosed
  MachineSet crash_suspects_;  // whom the stop-time tests of a crash that named a machine cover
  MachineSet left_;            // machines evicted while the round under way goes on
  bool drained_ = false;       // a requeue during the round: any machine of it may have left
  Slowdowns slowdowns_;
  Incidents incidents_;
  HeldUpdate update_;
  CrashClassifier classify_;
  bool up_ = false;     // the job's processes run (they may be stuck)
  bool ended_ = false;  // EndRun: nothing is done any more
  // The last acquisition requeued the whole job.
  bool requeued_ = false;
  // A metric anomaly since the job last started: its state in memory is suspect.
  bool state_suspect_ = false;
  int fruitless_ = 0;  // diagnosis rounds in a row that found nothing for this failure
  // The ladder rolled the code back for the failure under way (not yet shown fruitless).
  bool rolled_back_ = false;
  struct {
    ActionId start = 0, capture = 0;
  } pending_;  // the actions whose outcome the ladder waits for
  // The job's runs, as the checkpoint planner is told of them.
  struct {
    Instant last_start{};
    bool open = false;  // the run since last_start has not been counted as ended
    int interrupted = 0;
    Duration running = Duration::zero();
  } runs_;
  StopTimeTests tests_;
  std::optional<Escalation> escalation_;  // acts when the stop-time tests under way pass
};

}  // namespace

std::unique_ptr<Policy> make_byterobust(const ModuleRegistry& modules,
                                        std::shared_ptr<const PolicyInfo> info, const Params& p) {
  return std::make_unique<ByteRobust>(modules, std::move(info), p);
}

std::unique_ptr<Policy> make_byterobust(const ModuleRegistry& modules, const Params& p) {
  return make_byterobust(modules, std::make_shared<const PolicyInfo>(byterobust_info(modules)), p);
}

}  // namespace faultline::policies
