#include "policies/controller.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "policies/builtin.h"
#include "policies/byterobust/held_update.h"
#include "policies/byterobust/incidents.h"
#include "policies/byterobust/replica_groups.h"
#include "policies/byterobust/slowdowns.h"
#include "policies/diagnosis/stop_time.h"
#include "policies/localization/localization.h"
#include "policies/module.h"

namespace faultline::policies {

namespace {

// The ladder (controller.h): what each failure calls for, in the order ByteRobust asks.
// What the questions need lives beside it: incident identity (Incidents), the MFU decline
// and the straggler (Slowdowns), a held code update (HeldUpdate); the answers come from
// the modules (policies/module.h).
class ByteRobust final : public Policy {
 public:
  explicit ByteRobust(const Params& p)
      : p_(p),
        detector_(modules().make_detector(chosen(byterobust_info(), p, "detection"), p)),
        localizer_(modules().make_localizer(chosen(byterobust_info(), p, "localization"), p)),
        checkpoint_(modules().make_checkpoint(chosen(byterobust_info(), p, "checkpoint"), p)),
        recovery_(modules().make_recovery(chosen(byterobust_info(), p, "recovery"), p)),
        verdict_(modules().make_verdict(chosen(byterobust_info(), p, "verdict"), p)),
        slowdowns_(modules().make_failslow(chosen(byterobust_info(), p, "failslow"), p), p,
                   [this](World& w, SlotId slot, const std::string& why) {
                     evict_and_replace(w, over_eviction_set(w.cluster(), {slot}),
                                       Mechanism::kOverEviction, why);
                   }),
        incidents_(Duration::seconds(p.get("recrash_window_s"))),
        tests_(Duration::seconds(p.get("probe_deadline_s"))) {}
  const PolicyInfo& info() const override { return byterobust_info(); }

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
    if (state_ == State::kEnded) return;  // EndRun: nothing is done any more
    std::visit([&](const auto& x) { handle(x, w); }, e);
  }

 private:
  enum class State { kStarting, kRunning, kDiagnosing, kAcquiring, kEnded };
  bool running() const { return state_ == State::kRunning; }

  // ------------------------------------------------------------ the ladder's steps
  // `after_failure`: a restart of the job that ran, on the machines it ran on but those
  // replaced (a reattempt, replacements ready). The recovery module may ask for it in place
  // (FlashRecovery), except where the survivors' state cannot be trusted or is gone: after a
  // requeue every process is killed and the job rescheduled; after a metric anomaly (NaN,
  // loss jump) the in-memory state is what went wrong, so the job goes back to its
  // checkpoint. New code restarts every rank: a held update merged into this restart, a
  // rollback and a hot update (RollBack, HotUpdate) are never in place; nor is the first start.
  void start_job(World& w, std::string why, Mechanism m, bool after_failure = false) {
    state_ = State::kStarting;
    if (replicas_.refilling(w.cluster())) {  // a dropped replica's slot is empty: start once filled
      deferred_start_ = DeferredStart{std::move(why), m, after_failure};
      return;
    }
    std::string version = update_.restart();  // a held update: new code on every rank
    const bool in_place = after_failure && recovery_->restarts_in_place() && !requeued_ &&
                          !state_suspect_ && version.empty();
    pending_.start = w.act(StartJob{std::move(why), m, std::move(version), in_place});
  }
  // Every acquisition goes through here, so that the restart after it knows whether the
  // whole job was requeued.
  ActionId acquire(World& w, AcquireMachines a) {
    requeued_ = a.mode == AcquireMode::kRequeue;
    if (requeued_) replicas_.requeued();  // the requeue refills every slot
    return w.act(std::move(a));
  }
  // Back to the last good code version.
  void roll_back(World& w, std::string why) {
    state_ = State::kStarting;
    update_.roll_back();
    pending_.start = w.act(RollBack{std::move(why)});
  }
  void stop_if_running(World& w, std::string why) {
    if (running()) w.act(StopJob{std::move(why)});
    end_run(w);
  }
  // The job runs (perhaps stuck, while the stack diagnoses it): stop it and count the run
  // as interrupted.
  void stop_now(World& w, std::string why) {
    w.act(StopJob{std::move(why)});
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
    // Replica groups: machines of one replica leave a job that trains on without it.
    const int drop = running() ? replicas_.drops(slots, w.cluster()) : -1;
    if (drop < 0) stop_if_running(w, why);
    if (!machines.empty()) w.act(EvictMachines{std::move(machines), why, m});
    if (!lemons.empty())
      w.act(EvictMachines{std::move(lemons), why + "; retired: evicted on evidence again (lemon)",
                          m, true});
    if (avoid_more)
      w.act(AvoidMachines{recovery_->avoided(), "evicted on evidence of their own faults (" +
                                                    recovery_->info().name + ")"});
    if (drop >= 0) return replicas_.refill(drop, slots, why, w);
    state_ = State::kAcquiring;
    pending_.acquire = acquire(w, recovery_->replace(slots, why, m));
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
    state_ = State::kAcquiring;
    pending_.acquire = acquire(
        w,
        AcquireMachines{
            AcquireMode::kRequeue, {}, "fruitless rounds exhausted: " + why, Mechanism::kRequeue});
    return true;
  }
  void reattempt(World& w, const std::string& why) {
    stop_if_running(w, why);
    start_job(w, "reattempt: " + why, Mechanism::kReattempt, true);
  }

  // ------------------------------------------------------------ outcomes of our actions
  void handle(const MachinesReady& r, World& w) {
    if (replicas_.ready(r, w, running())) {
      if (deferred_start_ && !replicas_.refilling(w.cluster())) {
        DeferredStart d = *std::exchange(deferred_start_, std::nullopt);
        if (d.version.empty()) return start_job(w, std::move(d.why), d.mechanism, d.after_failure);
        StartJob start{std::move(d.why), d.mechanism, std::move(d.version)};
        pending_.start = w.act(std::move(start));  // the hot update, on the refilled slots
      }
      return;
    }
    if (r.action == pending_.acquire) start_job(w, "replacements ready", Mechanism::kNone, true);
  }
  void handle(const JobStarted& s, World& w) {
    if (s.action != pending_.start) return;
    state_ = State::kRunning;
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
  }
  void handle(const ActionFailed& f, World& w) {
    w.note("action failed: " + f.reason);
    if (replicas_.failed(f, w)) return;
    if (f.action == pending_.start && replicas_.refilling(w.cluster())) {
      // A restart (a rollback's) found a dropped replica's slot still empty: start once filled.
      deferred_start_ = DeferredStart{"after the refills: " + f.reason, Mechanism::kNone, false};
      return;
    }
    if (slowdowns_.refused(f, w, running())) return;
    if (f.action == pending_.acquire || f.action == pending_.start) {
      // Fall back to requeueing the whole job.
      state_ = State::kAcquiring;
      pending_.acquire = acquire(
          w,
          AcquireMachines{AcquireMode::kRequeue, {}, "fallback: " + f.reason, Mechanism::kRequeue});
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
    if (ActionId capture = slowdowns_.timer(t, w, running())) pending_.capture = capture;
    if (t.tag != timer_tags::kDeferredUpdate) return;
    if (auto version = update_.window_ended(running()))
      apply_update(w, *version, "forced after the deferral window");
  }

  // ------------------------------------------------------------ explicit failures
  void handle(const InspectionAlert& a, World& w) {
    if (a.machine < 0 || a.machine >= w.cluster().machine_count() ||
        w.cluster().slot_of(a.machine) < 0)
      return;
    if (!detector_->alert(a, w.now())) return;
    if (state_ == State::kAcquiring) return;  // already replacing machines
    evict_and_replace(w, {w.cluster().slot_of(a.machine)}, Mechanism::kRealtimeEviction,
                      "real-time " + a.kind + " alert: " + a.detail);
  }
  // Replica groups: a replica dropped out or rejoined while the job trains.
  void handle(const ReplicaDropped& d, World& w) { replicas_.dropped(d, w, running()); }
  void handle(const ReplicaRejoined& r, World& w) { replicas_.rejoined(r, w); }
  void handle(const ProcessExit& x, World& w) {
    on_crash(w, x.machine, x.exit_code, x.signature, false, x.step);
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
    if (x.action != pending_.start && x.action != pending_.acquire) return;
    on_crash(w, x.machine, 1, x.signature, true, x.step);
  }
  void on_crash(World& w, MachineId m, int code, const std::string& sig, bool at_start,
                std::int64_t step) {
    if (m != kNoMachine && (m >= w.cluster().machine_count() || w.cluster().slot_of(m) < 0))
      return;  // already evicted
    if ((state_ == State::kAcquiring || state_ == State::kDiagnosing) && !at_start)
      return;  // recovery under way; this exit is its echo
    const CrashKind kind = classify_(sig, code);
    const SlotId slot = m == kNoMachine ? -1 : w.cluster().slot_of(m);
    const CrashRecurrence r = incidents_.crash(w.now(), m, slot, sig, step);
    if (!r.again) fruitless_ = 0;
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
      state_ = State::kDiagnosing;
      tests_.begin(kind, named_and_neighbours(w.cluster(), slot));
      escalation_ = Escalation{r.turns, r.streak,
                               "the same crash at step " + std::to_string(step) + ", on " +
                                   std::to_string(r.turns) + " machines in turn (" + sig + "),",
                               "crash: " + sig};
      next_test(w, sig);
      return;
    }
    stop_if_running(w, "crash: " + sig);
    state_ = State::kDiagnosing;
    if (kind == CrashKind::kUserCode) return roll_back(w, "code error in the log: " + sig);
    // Evidence the tests missed: the log keeps naming the same machine although its tests
    // passed and a reattempt did not help. ByteRobust evicts on explicit, attributed
    // errors (§4: high-confidence machine-specific events are evicted at once).
    const int evict_after = static_cast<int>(p_.get("attributed_evict_after"));
    const bool attributable =
        kind == CrashKind::kMachine || kind == CrashKind::kNetwork || kind == CrashKind::kUnknown;
    if (r.again && attributable && evict_after > 0 && r.named >= evict_after) {
      incidents_.named_machine_evicted();
      fruitless_ = 0;
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
    tests_.begin(kind, m != kNoMachine ? named_and_neighbours(w.cluster(), slot)
                                       : w.cluster().placed_machines());
    next_test(w, sig);
  }

  // ------------------------------------------------------------ stop verdict
  // Acts on a stop verdict's ruling (Incidents), if any: ends the run (EndRun, verdict
  // code_or_data: do not requeue) or rolls the code back. True when it acted.
  bool act_on(World& w, const std::optional<Ruling>& r, const std::string& why) {
    if (!r) return false;
    stop_if_running(w, why);
    if (r->verdict == Verdict::kStop) {
      state_ = State::kEnded;
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
    if (auto probe = tests_.next(why)) {
      pending_.probe = w.act(*probe);
      return;
    }
    if (escalation_) {  // the tests before an escalation passed: the crash follows its rank
      const Escalation e = *std::exchange(escalation_, std::nullopt);
      if (act_on(w, Incidents::judge_identical(*verdict_, e.turns, e.times, e.what), e.why)) return;
    }
    fruitless(w, "stop-time tests found nothing (" + why + ")");
    reattempt(w, "stop-time tests found nothing (" + why + ")");
  }
  void handle(const ProbeResult& r, World& w) {
    if (r.action != pending_.probe) return;
    if (localizing_) return localization_step(localizer_->answer(r, w.cluster()), w);
    if (!r.failed.empty()) {
      escalation_.reset();  // a machine, not the rank
      if (r.test == ProbeKind::kBitwise) tests_.end_nan();
      fruitless_ = 0;
      return evict_and_replace(w, w.cluster().slots_of(r.failed), Mechanism::kStopTimeEviction,
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
    if (level == 0) fruitless_ = 0;
    if (judge_progress(w, st.last_step, "progress stalled")) return;
    if (level == 0 && gave_up(w, "progress stalled")) return;
    state_ = State::kDiagnosing;  // still running (stuck); capture before stopping
    slowdowns_.cancel_rounds();
    pending_.capture = w.act(CaptureStacks{"no progress for the stall window"});
  }
  void handle(const StepTimeHigh& s, World& w) {
    if (!running()) return;
    if (ActionId capture = slowdowns_.slow(s.ratio, w)) pending_.capture = capture;
  }
  void handle(const StacksCaptured& c, World& w) {
    if (c.action != pending_.capture) return;
    const StackVerdict v = aggregate_stacks(c.stacks);
    if (slowdowns_.in_rounds()) {
      if (!slowdowns_.stacks(v, w, localizer_->places_slowdowns())) return;
      slowdowns_.search_began();
      start_replay(w, "MFU decline that stack aggregation cannot place");
      if (!localizing_) slowdowns_.search_abandoned();  // it gave up before searching
      return;
    }
    if (v.dominant.empty()) {
      // The processes died before their stacks could be read: diagnose as a crash.
      state_ = State::kRunning;
      return on_crash(w, kNoMachine, 1, "stalled job exited before stack capture", false, -1);
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
    evict_and_replace(w, over_eviction_set(w.cluster(), v.outliers), Mechanism::kOverEviction,
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
    fruitless_ = 0;
    stop_if_running(w, "metric anomaly: " + a.metric);
    state_ = State::kDiagnosing;
    escalation_.reset();
    pending_.probe = w.act(tests_.begin_nan(w.cluster().placed_machines()));
  }

  // ------------------------------------------------------------ localization module
  // The failure is not placed by any stop-time test: hand it to the localization module
  // (dual-phase replay, bisection, stress: `localization`) and act on its verdict.
  void start_replay(World& w, const std::string& why) {
    if (gave_up(w, why)) return;
    stop_if_running(w, why);
    state_ = State::kDiagnosing;
    tests_.clear();
    escalation_.reset();
    localizing_ = true;
    localization_step(localizer_->begin(why, w.cluster()), w);
  }
  void localization_step(LocalizationStep step, World& w) {
    if (auto* test = std::get_if<LocalizationTest>(&step)) {
      if (auto* probe = std::get_if<RunProbe>(test)) pending_.probe = w.act(*probe);
      if (auto* replay = std::get_if<RunReplay>(test)) pending_.replay = w.act(*replay);
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
    evict_and_replace(w, slots, l.credit, l.reason);
  }
  void handle(const ReplayResult& r, World& w) {
    if (r.action != pending_.replay || !localizing_) return;
    localization_step(localizer_->answer(r, w.cluster()), w);
  }

  // ------------------------------------------------------------ code updates
  void handle(const CodeUpdateRequested& c, World& w) {
    const HeldUpdate::Answer a =
        update_.requested(c.version, c.urgent, p_.get("defer_non_urgent") != 0, !running());
    if (a == HeldUpdate::Answer::kHoldForWindow)
      w.set_timer(Duration::hours(p_.get("deferral_window_h")), timer_tags::kDeferredUpdate);
    if (a == HeldUpdate::Answer::kApplyNow)
      apply_update(w, c.version,
                   c.urgent ? "urgent update" : "update applied now (defer_non_urgent=0)");
  }
  void apply_update(World& w, std::string version, std::string why) {
    update_.applying(version);
    stop_now(w, "code update " + version);
    state_ = State::kStarting;
    if (replicas_.refilling(w.cluster())) {  // the new code starts once the slots are filled
      deferred_start_ =
          DeferredStart{std::move(why), Mechanism::kHotUpdate, false, std::move(version)};
      return;
    }
    pending_.start = w.act(HotUpdate{std::move(version), std::move(why)});
  }

  template <class T>
  void handle(const T&, World&) {}

  // An escalation waiting on the stop-time tests under way (they pass: it acts).
  struct Escalation {
    int turns, times;
    std::string what, why;
  };

  const Params p_;
  const std::unique_ptr<Detector> detector_;
  ModuleTimer detect_timer_{timer_tags::kDetect};
  const std::unique_ptr<Localizer> localizer_;
  bool localizing_ = false;  // the localizer's conversation is under way
  const std::unique_ptr<CheckpointPlanner> checkpoint_;
  const std::unique_ptr<Recovery> recovery_;
  const std::unique_ptr<StopVerdict> verdict_;
  DroppedReplicas replicas_{*recovery_};
  struct DeferredStart {
    std::string why;
    Mechanism mechanism;
    bool after_failure;
    std::string version = {};  // a hot update's
  };
  std::optional<DeferredStart> deferred_start_;  // waits for the refills of dropped replicas
  Slowdowns slowdowns_;
  Incidents incidents_;
  HeldUpdate update_;
  CrashClassifier classify_;
  State state_ = State::kStarting;
  // The last acquisition requeued the whole job.
  bool requeued_ = false;
  // A metric anomaly since the job last started: its state in memory is suspect.
  bool state_suspect_ = false;
  int fruitless_ = 0;  // diagnosis rounds in a row that found nothing for this failure
  struct {
    ActionId start = 0, acquire = 0, probe = 0, capture = 0, replay = 0;
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

std::unique_ptr<Policy> make_byterobust(const Params& p) { return std::make_unique<ByteRobust>(p); }

}  // namespace faultline::policies
