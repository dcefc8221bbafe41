#include "policies/controller.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <deque>
#include <map>
#include <optional>
#include <unordered_map>

#include "policies/builtin.h"
#include "policies/diagnosis/stop_time.h"
#include "policies/localization/localization.h"
#include "policies/module.h"

namespace faultline::policies {

namespace {

// The name a choice parameter selects (its choices follow the module registry's order).
std::string choice_name(const Params& p, const std::string& param) {
  const ParamSpec* spec = byterobust_info().find_param(param);
  return spec->choices.at(static_cast<std::size_t>(p.get(param)));
}

constexpr std::uint64_t kTagMfuRound = 1;
constexpr std::uint64_t kTagDeferredUpdate = 2;
constexpr std::uint64_t kTagDetect = 3;
constexpr std::uint64_t kTagFailSlow = 4;
// Stand in for a crash signature when a stall or a NaN escalates like a recurring crash.
constexpr const char* kStallSignature = "(progress stalled)";
constexpr const char* kNanSignature = "(metric anomaly)";

class ByteRobust final : public Policy {
 public:
  explicit ByteRobust(const Params& p)
      : p_(p),
        detector_(modules().make_detector(choice_name(p, "detection"), p)),
        localizer_(modules().make_localizer(choice_name(p, "localization"), p)),
        checkpoint_(modules().make_checkpoint(choice_name(p, "checkpoint"), p)),
        recovery_(modules().make_recovery(choice_name(p, "recovery"), p)),
        failslow_(modules().make_failslow(choice_name(p, "failslow"), p)),
        verdict_(modules().make_verdict(choice_name(p, "verdict"), p)) {}
  const PolicyInfo& info() const override { return byterobust_info(); }

  void start(World& w) override {
    // Name every module and its version in the decision log, so a log says what decided.
    std::string names;
    for (const ModuleInfo* m : {&detector_->info(), &localizer_->info(), &recovery_->info(),
                                &checkpoint_->info(), &failslow_->info(), &verdict_->info()})
      names += (names.empty() ? "" : ", ") + std::string(module_kind_name(m->kind)) + " " +
               m->name + " v" + m->version;
    w.note("modules: " + names);
    w.act(checkpoint_->plan(w.cluster()));
    if (auto watch = detector_->watch()) {
      w.act(*watch);
      for (const char* kind : {"gpu", "nic", "host", "switch"})
        w.act(EnableInspection{kind,
                               Duration::seconds(p_.get(std::string("inspect_") + kind + "_s")),
                               "real-time inspection"});
    }  // timeout: process exits and the NCCL watchdog only
    if (auto pool = recovery_->start(w.cluster())) w.act(*pool);
    start_job(w, "initial start", Mechanism::kNone);
  }

  void on_event(const Event& e, World& w) override {
    if (state_ == State::kEnded) return;  // EndRun: nothing is done any more
    std::visit([&](const auto& x) { handle(x, w); }, e);
  }

 private:
  enum class State { kStarting, kRunning, kDiagnosing, kAcquiring, kEnded };

  // ------------------------------------------------------------ generic steps
  void start_job(World& w, std::string why, Mechanism m) {
    state_ = State::kStarting;
    starting_version_ = held_update_.value_or("");  // a held update rides the restart
    pending_start_ = w.act(StartJob{std::move(why), m, starting_version_});
  }
  // Back to the last good code version; a held update stays held (it may carry the bug).
  void roll_back(World& w, std::string why) {
    state_ = State::kStarting;
    starting_version_.clear();
    pending_start_ = w.act(RollBack{std::move(why)});
  }
  void stop_if_running(World& w, std::string why) {
    if (state_ == State::kRunning) w.act(StopJob{std::move(why)});
    end_run(w);
  }
  // The job runs (perhaps stuck, while the stack diagnoses it): stop it and count the run
  // as interrupted.
  void stop_now(World& w, std::string why) {
    w.act(StopJob{std::move(why)});
    end_run(w);
  }
  // The run that started at last_start_ is over (stopped, or it crashed or hung): count
  // it for the checkpoint planner, once, and let an adaptive planner re-plan now, before
  // the next start, so that the next launch already saves at the new interval (live mode
  // applies a plan from the next launch).
  void end_run(World& w) {
    if (!run_open_) return;
    run_open_ = false;
    ++interruptions_;
    running_ = running_ + (w.now() - last_start_);
    if (straggler_ >= 0) failslow_->stopped(w.now());
    if (auto plan = checkpoint_->replan(interruptions_, running_, w.cluster())) w.act(*plan);
  }
  // Evicts the machines of these slots and refills them from the standby pool. A machine
  // evicted on evidence of its own fault (not as collateral of an over-eviction) counts a
  // strike; the recovery module may retire it for good at the n-th (lemon retirement).
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
      const int strikes = evidence ? ++strikes_[x] : 0;
      (evidence && recovery_->retire(strikes) ? lemons : machines).push_back(x);
      if (evidence && recovery_->avoids(strikes) &&
          std::find(avoided_.begin(), avoided_.end(), x) == avoided_.end()) {
        avoided_.push_back(x);
        avoid_more = true;
      }
    }
    if (machines.empty() && lemons.empty()) return;
    stop_if_running(w, why);
    if (!machines.empty()) w.act(EvictMachines{std::move(machines), why, m});
    if (!lemons.empty())
      w.act(EvictMachines{std::move(lemons), why + "; retired: evicted on evidence again (lemon)",
                          m, true});
    if (avoid_more)
      w.act(AvoidMachines{
          avoided_, "evicted on evidence of their own faults (" + recovery_->info().name + ")"});
    state_ = State::kAcquiring;
    pending_acquire_ = w.act(recovery_->replace(slots, why, m));
    last_recovery_evicted_ = true;
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
    level_ = 0;
    nan_chain_ = false;
    state_ = State::kAcquiring;
    last_recovery_evicted_ = false;
    pending_acquire_ = w.act(AcquireMachines{
        AcquireMode::kRequeue, {}, "fruitless rounds exhausted: " + why, Mechanism::kRequeue});
    return true;
  }
  void reattempt(World& w, const std::string& why) {
    stop_if_running(w, why);
    last_recovery_evicted_ = false;
    start_job(w, "reattempt: " + why, Mechanism::kReattempt);
  }
  std::vector<SlotId> slots_of(World& w, const MachineSet& ms) {
    std::vector<SlotId> out;
    for (MachineId m : ms)
      if (m >= 0 && m < w.cluster().machine_count() && w.cluster().slot_of(m) >= 0)
        out.push_back(w.cluster().slot_of(m));
    std::sort(out.begin(), out.end());
    return out;
  }
  MachineSet all_machines(World& w) {
    const ClusterView& c = w.cluster();
    if (c.empty_slot_count() == 0) return c.machines_by_slot();  // one copy, no scan
    MachineSet out;
    out.reserve(c.slots() - c.empty_slot_count());
    for (SlotId s = 0; s < c.slots(); ++s)
      if (c.machine_in(s) != kNoMachine) out.push_back(c.machine_in(s));
    return out;
  }
  bool busy() const { return state_ != State::kRunning; }

  // ------------------------------------------------------------ fail-slow handling
  // Applies the fail-slow module's level to the straggler in straggler_ (located by the
  // MFU aggregation rounds): tolerate and wait, work around it, or over-evict its group.
  void mitigate(World& w, SlowdownLevel level) {
    const SlotId slot = straggler_;
    const std::string where = "straggler in slot " + std::to_string(slot);
    switch (level) {
      case SlowdownLevel::kTolerate:
        w.note(where + " tolerated (" + failslow_->info().name + ")");
        break;
      case SlowdownLevel::kRebalance:
      case SlowdownLevel::kReconfigure:
        if (refused_[static_cast<int>(level)]) return mitigate(w, SlowdownLevel::kEvict);
        pending_level_ = level;
        pending_mitigation_ = w.act(MitigateSlowdown{
            slot,
            level == SlowdownLevel::kRebalance ? Mitigation::kRebalance : Mitigation::kReconfigure,
            where + ": " + slowdown_level_name(level) + " (" + failslow_->info().name + ")"});
        break;
      case SlowdownLevel::kEvict:
        forget_straggler(w);
        evict_and_replace(w, over_eviction_set(w.cluster(), {slot}), Mechanism::kOverEviction,
                          "MFU decline: slot " + std::to_string(slot) + " flagged most often");
        return;
    }
    schedule_failslow(w);
  }
  void schedule_failslow(World& w) {
    if (failslow_timer_) w.cancel_timer(failslow_timer_);
    failslow_timer_ = 0;
    const Instant at = failslow_->next_check();
    if (at != Instant::max())
      failslow_timer_ = w.set_timer(std::max(Duration::zero(), at - w.now()), kTagFailSlow);
  }
  void forget_straggler(World& w) {
    straggler_ = -1;
    pending_mitigation_ = 0;
    healthy_step_s_ = 0;
    if (failslow_timer_) w.cancel_timer(failslow_timer_);
    failslow_timer_ = 0;
  }

  // ------------------------------------------------------------ outcomes of our actions
  void handle(const MachinesReady& r, World& w) {
    if (r.action != pending_acquire_) return;
    start_job(w, "replacements ready", Mechanism::kNone);
  }
  void handle(const JobStarted& s, World& w) {
    if (s.action != pending_start_) return;
    state_ = State::kRunning;
    escalation_.reset();
    last_start_ = w.now();
    last_start_step_ = s.step;
    run_furthest_step_ = s.step;
    end_run(w);  // a run whose end went unnoticed (none expected) counts now
    run_open_ = true;
    ++starts_;
    mfu_rounds_left_ = 0;  // rounds cut short by a restart start over on the next report
    mfu_fruitless_ = 0;
    mfu_given_up_ = false;
    flagged_.clear();
    forget_straggler(w);  // a restart lays the job out afresh
    if (held_update_ && *held_update_ == starting_version_) held_update_.reset();  // applied
    detector_->restart(w.now(), s.step);
    schedule_detection(w);
    // One that arrived after this restart was asked for, to be applied now: now.
    if (held_update_ && !held_for_window_)
      apply_update(w, *held_update_, "held through the recovery");
  }
  void handle(const ActionFailed& f, World& w) {
    w.note("action failed: " + f.reason);
    if (f.action == pending_mitigation_ && pending_mitigation_ != 0) {
      // The backend cannot work around the straggler (live mode): the module plans without
      // that level from now on (tolerate until eviction breaks even). A module that asks
      // for a refused level again gets the eviction at once.
      pending_mitigation_ = 0;
      refused_[static_cast<int>(pending_level_)] = true;
      failslow_->refused(pending_level_);
      if (straggler_ < 0 || state_ != State::kRunning) return;
      if (auto level = failslow_->check(w.now()))
        mitigate(w, *level);
      else
        schedule_failslow(w);
      return;
    }
    if (f.action == pending_acquire_ || f.action == pending_start_) {
      // Fall back to requeueing the whole job.
      state_ = State::kAcquiring;
      pending_acquire_ = w.act(
          AcquireMachines{AcquireMode::kRequeue, {}, "fallback: " + f.reason, Mechanism::kRequeue});
    }
  }

  // ------------------------------------------------------------ detection
  void handle(const InspectionAlert& a, World& w) {
    if (a.machine < 0 || a.machine >= w.cluster().machine_count() ||
        w.cluster().slot_of(a.machine) < 0)
      return;
    if (a.kind == "nic" || a.kind == "switch") {
      auto& times = alerts_[a.machine];
      times.push_back(w.now());
      while (!times.empty() && w.now() - times.front() > Duration::seconds(p_.get("flap_window_s")))
        times.pop_front();
      if (static_cast<int>(times.size()) < static_cast<int>(p_.get("flap_count"))) return;
      alerts_.erase(a.machine);
    } else if (a.kind != "gpu" && a.kind != "host") {
      return;
    }
    if (state_ == State::kAcquiring) return;  // already replacing machines
    evict_and_replace(w, {w.cluster().slot_of(a.machine)}, Mechanism::kRealtimeEviction,
                      "real-time " + a.kind + " alert: " + a.detail);
  }

  void handle(const ProcessExit& x, World& w) {
    on_crash(w, x.machine, x.exit_code, x.signature, false, x.step);
  }
  void handle(const StartFailed& x, World& w) {
    if (x.action != pending_start_ && x.action != pending_acquire_) return;
    on_crash(w, x.machine, 1, x.signature, true, x.step);
  }

  // ------------------------------------------------------------ stop verdict
  // Whether the verdict module acts on `repeats` identical incidents in a row.
  bool escalation_due(int repeats) const {
    return verdict_->judge({repeats, 0}) != Verdict::kCarryOn;
  }
  // Acts on the verdict module's answer: ends the run (EndRun, verdict code_or_data) on
  // kStop, rolls the code back on kRollBack. True when it acted.
  bool act_on_verdict(World& w, Verdict v, const std::string& stop_reason,
                      const std::string& rollback_reason, const std::string& why) {
    if (v == Verdict::kStop) {
      stop_if_running(w, why);
      state_ = State::kEnded;
      w.act(EndRun{"code_or_data", stop_reason});
      return true;
    }
    if (v == Verdict::kRollBack) {
      stop_if_running(w, why);
      roll_back(w, rollback_reason);
      return true;
    }
    return false;
  }
  // `repeats` identical incidents in a row (`what` recurred `times` times, at least
  // `repeats`): the verdict module may roll the code back or end the run. True when it acted.
  bool escalate_identical(World& w, int repeats, int times, const std::string& what,
                          const std::string& why) {
    return act_on_verdict(
        w, verdict_->judge({repeats, 0}),
        what + " " + std::to_string(times) +
            " times in a row, after diagnosis and a code rollback: the data or the code is at "
            "fault; do not requeue",
        what + " again after a clean diagnosis", why);
  }
  // Every interruption (a crash, a failed start, a NaN or loss jump, a stall) ends a run,
  // which reached `step` (-1: unknown) or the furthest its samples showed. A run that got
  // further than any before it made progress; the verdict module may roll the code back or
  // end the run when runs keep ending without, whatever failed. The stack sees steps, not
  // checkpoint markers: a run that got further but failed before its next save counts as
  // progress (the verdict comes later, never sooner, than on committed checkpoints). True
  // when it acted.
  bool judge_progress(World& w, std::int64_t step, const std::string& why) {
    run_furthest_step_ = std::max(run_furthest_step_, step);
    if (run_furthest_step_ > furthest_step_) {
      furthest_step_ = run_furthest_step_;
      runs_without_progress_ = 0;
      return false;
    }
    const int runs = ++runs_without_progress_;
    const Verdict v = verdict_->judge({0, runs});
    if (v == Verdict::kCarryOn) return false;  // the reasons are built only when they are used
    const std::string what = std::to_string(runs) +
                             " runs in a row that got no further than step " +
                             std::to_string(furthest_step_) + " (last: " + why + ")";
    return act_on_verdict(
        w, v, what + ", after a code rollback: the data or the code is at fault; do not requeue",
        what + ": roll back recent code", why);
  }

  // Whether this crash is "the same failure again", and the incident identity it updates:
  // the streak of identical crashes, the machines they struck in turn, how often the log
  // named the same machine, the escalation level. *struck_another: the same crash after
  // the same step, on another machine than the last.
  bool recurrence(World& w, MachineId m, SlotId slot, const std::string& sig, std::int64_t step,
                  bool* struck_another) {
    // "The same failure again" (DOMAIN §4, stop-time step 3: "if the restart fails, or
    // the job crashes again after an eviction, roll back"): within recrash_window_s of
    // the restart that answered the last crash, with the same log signature, at the same
    // locus: the same machine or the same rank (slot; a replacement that crashes like its
    // predecessor points at the code or the data), or again no machine at all. A crash
    // elsewhere is an independent incident with its own tests: at 10k+ machines the job's
    // MTBF is shorter than the window and unrelated CUDA errors share their signature, so
    // escalating on the signature alone would roll back good code and replay for nothing.
    const bool soon = (w.now() - last_start_) < Duration::seconds(p_.get("recrash_window_s"));
    const bool same_locus = m == kNoMachine
                                ? last_crash_machine_ == kNoMachine && last_crash_slot_ < 0
                                : m == last_crash_machine_ || slot == last_crash_slot_;
    // The same signature after the same step as the last crash is a recurrence however
    // long the job ran in between (slow steps, or a restore from far back).
    const bool same_step =
        step >= 0 && step == last_crash_step_ && sig == last_crash_sig_ && same_locus;
    const bool again = (soon || same_step) && sig == last_crash_sig_ && same_locus;
    // The same crash after the same step at the same rank, run again from a checkpoint,
    // on one machine after another: it follows the rank, not a machine, so the code or the
    // data is at fault. Escalates like the same NaN (handle MetricAnomaly), counting the
    // machines it struck in turn: on the second the code is rolled back (the ladder's own
    // answer to a replacement that crashes like its predecessor), on identical_incident_limit
    // machines the run ends, instead of tests, rollback and replay over and over. On one
    // machine it is the ladder's (tests, then an attributed eviction): a persistent
    // hardware fault recurs at the same step too, the same time after every restart, and
    // a replacement may be broken as well. Unlike a NaN, a crash right after a restore
    // from the step before counts: the exit came after its rank restored and started (a
    // failed restore has no step and never counts), and with a checkpoint every step that
    // is where a deterministic crash recurs.
    *struck_another = same_step && m != kNoMachine && m != last_crash_machine_;
    crash_streak_ = same_step ? crash_streak_ + 1 : 1;
    crash_turns_ = !same_step ? 1 : crash_turns_ + (*struck_another ? 1 : 0);
    last_crash_step_ = step;
    named_ = again && m != kNoMachine && m == last_crash_machine_ ? named_ + 1 : 1;
    level_ = again ? level_ + 1 : 0;
    if (!again) fruitless_ = 0;
    last_crash_sig_ = sig;
    last_crash_machine_ = m;
    last_crash_slot_ = slot;
    return again;
  }
  void on_crash(World& w, MachineId m, int code, const std::string& sig, bool at_start,
                std::int64_t step) {
    if (m != kNoMachine && (m >= w.cluster().machine_count() || w.cluster().slot_of(m) < 0))
      return;  // already evicted
    if (state_ == State::kAcquiring || state_ == State::kDiagnosing) {
      if (!at_start) return;  // recovery under way; this exit is its echo
    }
    const CrashKind kind = crash_kind(sig, code);
    const SlotId slot = m == kNoMachine ? -1 : w.cluster().slot_of(m);
    bool struck_another = false;
    const bool again = recurrence(w, m, slot, sig, step, &struck_another);
    escalation_.reset();
    if (judge_progress(w, step, "crash: " + sig)) return;
    if (struck_another && escalation_due(crash_turns_)) {
      // Before concluding that the crash follows the rank, test the named rank's
      // neighbours again. A log may name the next stage of a broken machine's pipeline
      // (the rank that saw its peer fail first): once the named machine is evicted, its
      // replacement crashes "the same way" because the culprit beside it is still there,
      // missed by one round of tests. Blaming the code then rolls back good code and ends
      // a healthy run. Only when these tests pass again does the crash follow the rank.
      stop_if_running(w, "crash: " + sig);
      state_ = State::kDiagnosing;
      plan_ = test_plan(kind);
      suspects_ = named_and_neighbours(w, slot);
      escalation_ =
          Escalation{crash_turns_, crash_streak_,
                     "the same crash at step " + std::to_string(step) + ", on " +
                         std::to_string(crash_turns_) + " machines in turn (" + sig + "),",
                     "crash: " + sig};
      next_test(w, sig);
      return;
    }
    stop_if_running(w, "crash: " + sig);
    state_ = State::kDiagnosing;
    if (kind == CrashKind::kUserCode) {
      roll_back(w, "code error in the log: " + sig);
      return;
    }
    // Evidence the tests missed: the log keeps naming the same machine although its tests
    // passed and a reattempt did not help. ByteRobust evicts on explicit, attributed
    // errors (§4: high-confidence machine-specific events are evicted at once).
    const int evict_after = static_cast<int>(p_.get("attributed_evict_after"));
    const bool attributable =
        kind == CrashKind::kMachine || kind == CrashKind::kNetwork || kind == CrashKind::kUnknown;
    if (again && attributable && evict_after > 0 && named_ >= evict_after) {
      level_ = 0;
      named_ = 0;
      fruitless_ = 0;
      evict_and_replace(w, {slot}, Mechanism::kAttributedEviction,
                        "crash log named machine " + std::to_string(m) + " " +
                            std::to_string(evict_after) + " times in a row: " + sig);
      return;
    }
    if (level_ == 1) {
      // The same crash again after a restart: roll back recent code changes.
      roll_back(w, "the same crash again after the restart: " + sig);
      return;
    }
    if (level_ >= 2) {
      start_replay(w, "crashes persist after eviction, reattempt and rollback");
      return;
    }
    // Stop-time tests on the named machine and its pipeline neighbours (a log may name
    // the rank that saw the broken peer first), or on everyone.
    if (gave_up(w, sig)) return;
    plan_ = test_plan(kind);
    suspects_.clear();
    suspects_ = m != kNoMachine ? named_and_neighbours(w, slot) : all_machines(w);
    next_test(w, sig);
  }
  // The machines in `slot` and in its pipeline neighbours (the slot after it when it has
  // none).
  static std::vector<MachineId> named_and_neighbours(World& w, SlotId slot) {
    const std::vector<SlotId> group = w.cluster().pp_group(slot);
    const auto at = std::find(group.begin(), group.end(), slot);
    std::array<SlotId, 3> near{slot, slot, slot};
    std::size_t n = 1;
    if (group.size() > 1 && at != group.end()) {
      const std::size_t i = static_cast<std::size_t>(at - group.begin());
      near[n++] = group[(i + group.size() - 1) % group.size()];
      near[n++] = group[(i + 1) % group.size()];
    } else {
      near[n++] = (slot + 1) % w.cluster().slots();
    }
    std::sort(near.begin(), near.begin() + n);
    n = static_cast<std::size_t>(std::unique(near.begin(), near.begin() + n) - near.begin());
    std::vector<MachineId> out;
    out.reserve(n);
    for (std::size_t k = 0; k < n; ++k)
      if (w.cluster().machine_in(near[k]) != kNoMachine)
        out.push_back(w.cluster().machine_in(near[k]));
    return out;
  }

  void next_test(World& w, const std::string& why) {
    if (plan_.empty() && escalation_) {
      // The tests before an escalation passed: the crash follows its rank.
      const Escalation e = *escalation_;
      escalation_.reset();
      if (escalate_identical(w, e.turns, e.times, e.what, e.why)) return;
    }
    if (plan_.empty()) {
      fruitless(w, "stop-time tests found nothing (" + why + ")");
      reattempt(w, "stop-time tests found nothing (" + why + ")");
      return;
    }
    const ProbeKind t = plan_.front();
    plan_.erase(plan_.begin());
    pending_probe_ =
        w.act(RunProbe{t, suspects_, Duration::seconds(p_.get("probe_deadline_s")), why});
  }

  void handle(const ProbeResult& r, World& w) {
    if (r.action != pending_probe_) return;
    if (localizing_) return localization_step(localizer_->answer(r, w.cluster()), w);
    if (!r.failed.empty()) {
      escalation_.reset();  // a machine, not the rank
      if (r.test == ProbeKind::kBitwise && nan_chain_) nan_chain_ = false;
      fruitless_ = 0;
      evict_and_replace(w, slots_of(w, r.failed), Mechanism::kStopTimeEviction,
                        std::string("failed ") + probe_name(r.test));
      return;
    }
    if (nan_chain_) {
      nan_chain_ = false;
      start_replay(w, "bit-wise alignment passed everywhere");
      return;
    }
    next_test(w, "previous test passed");
  }

  // ------------------------------------------------------------ implicit failures
  // The detection module judges the samples; its findings go to the handlers below.
  void handle(const StepSample& s, World& w) {
    if (state_ != State::kRunning) return;
    run_furthest_step_ = std::max(run_furthest_step_, s.step);
    if (std::isfinite(s.step_time_s) && s.step_time_s > 0) {
      last_step_time_s_ = s.step_time_s;
      if (fastest_step_s_ == 0 || s.step_time_s < fastest_step_s_) fastest_step_s_ = s.step_time_s;
      if (straggler_ >= 0 && failslow_->recovered(s.step_time_s / healthy_step_s_)) {
        w.note("straggler in slot " + std::to_string(straggler_) + " gone: steps at " +
               std::to_string(s.step_time_s / healthy_step_s_) + "x healthy");
        forget_straggler(w);
      }
    }
    auto f = detector_->observe(s, w.now());
    schedule_detection(w);
    if (f) found(*f, w);
  }
  void found(const Finding& f, World& w) {
    if (w.keeps_notes()) w.note("detected: " + describe(f));
    std::visit([&](const auto& x) { handle(x, w); }, f);
  }
  // One timer at the detector's next check time.
  void schedule_detection(World& w) {
    const Instant at = detector_->next_check();
    if (at == detect_at_) return;
    if (detect_timer_) w.cancel_timer(detect_timer_);
    detect_timer_ = 0;
    detect_at_ = at;
    if (at != Instant::max())
      detect_timer_ = w.set_timer(std::max(Duration::zero(), at - w.now()), kTagDetect);
  }
  void handle(const ProgressStalled& st, World& w) {
    if (state_ != State::kRunning) return;
    // Stalled again before the restart that answered the last stall got a single step
    // done (within recrash_window_s): that restart (reattempt or over-eviction) did not
    // help, so escalate as for a recurring crash: roll back the code, then replay (DOMAIN
    // §4 stop-time step 3, "if the restart fails, or the job crashes again after an
    // eviction, roll back"). Hangs in the job's own code (Table 2) would otherwise loop
    // through stall, reattempt, stall until a human ships a fix. A stall after progress,
    // or after an unrelated recovery in between, is a new incident with its own
    // aggregation. The stacks are captured first in every case (15 s): a stall whose
    // stacks show outliers is a machine, whatever came before (a machine hang that struck
    // at the restart looks like the code hanging again until its stacks are read).
    const bool soon = (w.now() - last_start_) < Duration::seconds(p_.get("recrash_window_s"));
    const bool again = last_crash_sig_ == kStallSignature && starts_ == stall_answered_by_ &&
                       st.last_step <= last_start_step_;
    level_ = soon && again ? level_ + 1 : 0;
    last_crash_sig_ = kStallSignature;
    last_crash_machine_ = kNoMachine;
    last_crash_slot_ = -1;
    if (level_ == 0) fruitless_ = 0;
    stall_answered_by_ = starts_ + 1;  // whatever restarts the job next answers this stall
    if (judge_progress(w, st.last_step, "progress stalled")) return;
    if (level_ == 0 && gave_up(w, "progress stalled")) return;
    state_ = State::kDiagnosing;  // still running (stuck); capture before stopping
    mfu_rounds_left_ = 0;
    pending_capture_ = w.act(CaptureStacks{"no progress for the stall window"});
  }
  void handle(const StepTimeHigh& s, World& w) {
    if (state_ != State::kRunning || mfu_rounds_left_ > 0 || mfu_given_up_ || straggler_ >= 0)
      return;
    slow_since_ = w.now();
    // How slow, against the fastest steps the job has run: the detector's baseline adapts
    // to the steps it sees, a rebalanced straggler's among them, so its ratio understates a
    // straggler that comes back after a restart. (Its own ratio when the job never ran
    // faster, a straggler there from the first start.)
    slow_ratio_ =
        std::max(s.ratio, fastest_step_s_ > 0 ? last_step_time_s_ / fastest_step_s_ : 1.0);
    healthy_step_s_ = last_step_time_s_ / slow_ratio_;
    mfu_rounds_left_ = static_cast<int>(p_.get("mfu_rounds"));
    flagged_.clear();
    pending_capture_ = w.act(CaptureStacks{"MFU decline"});
  }
  void handle(const TimerFired& t, World& w) {
    if (t.tag == kTagDetect && t.timer == detect_timer_) {
      detect_timer_ = 0;
      detect_at_ = Instant::max();
      if (state_ != State::kRunning) return;
      auto f = detector_->check(w.now());
      schedule_detection(w);
      if (f) found(*f, w);
      return;
    }
    if (t.tag == kTagFailSlow && t.timer == failslow_timer_) {
      failslow_timer_ = 0;
      if (straggler_ < 0 || state_ != State::kRunning) return;
      if (auto level = failslow_->check(w.now()))
        mitigate(w, *level);
      else
        schedule_failslow(w);
      return;
    }
    if (t.tag == kTagMfuRound && mfu_rounds_left_ > 0 && state_ == State::kRunning)
      pending_capture_ = w.act(CaptureStacks{"MFU decline round"});
    if (t.tag == kTagDeferredUpdate && held_update_ && held_for_window_) {
      if (state_ == State::kRunning)
        apply_update(w, *held_update_, "forced after the deferral window");
      else
        held_for_window_ = false;  // a recovery is under way: its restart, or right after it
    }
  }
  void handle(const StacksCaptured& c, World& w) {
    if (c.action != pending_capture_) return;
    StackVerdict v = aggregate_stacks(c.stacks);
    if (mfu_rounds_left_ > 0) {
      for (SlotId s : v.outliers) ++flagged_[s];
      if (--mfu_rounds_left_ > 0) {
        w.set_timer(Duration::seconds(p_.get("mfu_round_s")), kTagMfuRound);
        return;
      }
      if (flagged_.empty() && localizer_->places_slowdowns() &&
          slow_searches_fruitless_ < static_cast<int>(p_.get("max_fruitless_rounds"))) {
        // Nothing stands out in the stacks, but the localizer times what it tests (the
        // pairwise check): stop and let it place the slowdown. Each search that finds
        // nothing counts; after max_fruitless_rounds of them in a row the stack gives up on
        // such searches, as below, until one evicts something.
        slow_search_ = true;
        start_replay(w, "MFU decline that stack aggregation cannot place");
        if (!localizing_) slow_search_ = false;  // it gave up before searching
        return;
      }
      if (flagged_.empty()) {
        // Nothing stands out: a transient, or a slowdown stacks cannot place. After the
        // declared number of such sequences stop aggregating until the next restart
        // instead of capturing every slot's stacks every few minutes for days.
        ++mfu_fruitless_;
        w.act(Note{"fruitless round " + std::to_string(mfu_fruitless_) + "/" +
                       std::to_string(static_cast<int>(p_.get("max_fruitless_rounds"))) +
                       ": MFU aggregation flagged no slot",
                   mfu_fruitless_});
        if (mfu_fruitless_ >= static_cast<int>(p_.get("max_fruitless_rounds"))) {
          mfu_given_up_ = true;
          w.note("giving up on the MFU decline until the next restart: no slot stands out");
        }
        return;
      }
      auto most =
          std::max_element(flagged_.begin(), flagged_.end(),
                           [](const auto& a, const auto& b) { return a.second < b.second; });
      straggler_ = most->first;
      mitigate(w, failslow_->located(straggler_, w.cluster().machine_in(straggler_), slow_ratio_,
                                     slow_since_, w.now(), w.cluster()));
      return;
    }
    if (v.dominant.empty()) {
      // The processes died before their stacks could be read: diagnose as a crash.
      state_ = State::kRunning;
      on_crash(w, kNoMachine, 1, "stalled job exited before stack capture", false, -1);
      return;
    }
    if (v.outliers.empty()) {
      // Every rank waits in the same place: nothing points at a machine. The first time
      // reattempt; stalled again before a step, roll back the code; again, replay.
      if (level_ == 1) {
        stop_now(w, "stalled again after the restart, no outlier stacks");
        roll_back(w, "stalled again soon after the restart: roll back recent code");
        return;
      }
      if (level_ >= 2) {
        start_replay(w, "stalls persist after restart and rollback");
        return;
      }
      // The job is still up, stuck: stop it before restarting in place (otherwise the
      // start is refused and the fallback requeues the whole job).
      fruitless(w, "stalled with no outlier stacks");
      stop_now(w, "stalled with no outlier stacks");
      reattempt(w, "stalled with no outlier stacks");
      return;
    }
    fruitless_ = 0;
    level_ = 0;
    evict_and_replace(w, over_eviction_set(w.cluster(), v.outliers), Mechanism::kOverEviction,
                      "stack aggregation: parallel group holding all " +
                          std::to_string(v.outliers.size()) + " outliers");
  }
  void handle(const MetricAnomaly& a, World& w) {
    if (state_ != State::kRunning) return;
    // The same NaN at the same step again and again: whatever runs the job, the same
    // batch explodes. Nothing on the machines can fix that: the second time rolls the code
    // back, the identical_incident_limit-th time ends the run with the verdict
    // "code_or_data" (do not requeue) instead of looping through diagnosis forever.
    // Identical: the same step as the last NaN, reached again from a checkpoint before it
    // (the steps in between ran clean), so the same batch exploded on whatever machines.
    const bool same_step =
        a.nan && a.step >= 0 && a.step == last_nan_step_ && a.step > last_start_step_;
    nan_repeats_ = same_step ? nan_repeats_ + 1 : 1;
    last_nan_step_ = a.nan ? a.step : -1;
    if (judge_progress(w, a.step, "metric anomaly: " + a.metric)) return;
    if (escalate_identical(w, nan_repeats_, nan_repeats_, "NaN at step " + std::to_string(a.step),
                           "metric anomaly: " + a.metric))
      return;
    // A NaN again soon after the restart that answered the last one: that round's
    // evictions did not remove the cause. Go straight to replay (bounded by
    // max_fruitless_rounds like every round).
    const bool soon = (w.now() - last_start_) < Duration::seconds(p_.get("recrash_window_s"));
    const bool again = soon && last_crash_sig_ == kNanSignature;
    last_crash_sig_ = kNanSignature;
    last_crash_machine_ = kNoMachine;
    last_crash_slot_ = -1;
    if (again) {
      start_replay(w, "NaN again soon after the last round's restart");
      return;
    }
    fruitless_ = 0;
    stop_if_running(w, "metric anomaly: " + a.metric);
    state_ = State::kDiagnosing;
    nan_chain_ = true;
    plan_.clear();
    escalation_.reset();
    suspects_ = all_machines(w);
    pending_probe_ = w.act(RunProbe{ProbeKind::kBitwise, suspects_,
                                    Duration::seconds(p_.get("probe_deadline_s")),
                                    "NaN: bit-wise alignment on every machine"});
  }

  // ------------------------------------------------------------ localization module
  // The failure is not placed by any stop-time test: hand it to the localization module
  // (dual-phase replay, bisection, stress: `localization`) and act on its verdict.
  void start_replay(World& w, const std::string& why) {
    if (gave_up(w, why)) return;
    stop_if_running(w, why);
    state_ = State::kDiagnosing;
    nan_chain_ = false;
    plan_.clear();
    escalation_.reset();
    localizing_ = true;
    localization_step(localizer_->begin(why, w.cluster()), w);
  }
  void localization_step(LocalizationStep step, World& w) {
    if (auto* test = std::get_if<LocalizationTest>(&step)) {
      if (auto* probe = std::get_if<RunProbe>(test)) pending_probe_ = w.act(*probe);
      if (auto* replay = std::get_if<RunReplay>(test)) pending_replay_ = w.act(*replay);
      return;
    }
    localizing_ = false;
    const Located& l = std::get<Located>(step);
    const bool slow = slow_search_;
    if (slow_search_) slow_searches_fruitless_ = l.evict.empty() ? slow_searches_fruitless_ + 1 : 0;
    slow_search_ = false;
    // A slowdown that no machine explains: nothing to roll back (a fruitless round below).
    if (l.code_at_fault && !slow) {
      roll_back(w, l.reason);
      return;
    }
    std::vector<SlotId> slots;
    for (SlotId s : l.evict)
      if (s >= 0 && s < w.cluster().slots() && w.cluster().machine_in(s) != kNoMachine)
        slots.push_back(s);
    if (slots.empty()) {
      fruitless(w, l.reason);
      reattempt(w, l.reason);
      return;
    }
    fruitless_ = 0;
    evict_and_replace(w, slots, l.credit, l.reason);
  }
  void handle(const ReplayResult& r, World& w) {
    if (r.action != pending_replay_ || !localizing_) return;
    localization_step(localizer_->answer(r, w.cluster()), w);
  }

  // ------------------------------------------------------------ code updates
  // A non-urgent update is held (defer_non_urgent) and rides the next restart, whatever
  // starts it, or is forced when the deferral window ends. Any update that arrives while
  // the stack recovers rides that recovery's restart (or, when the restart was already
  // asked for, is applied as soon as the job runs). Versions are successive: the newest
  // held one carries the older ones.
  void handle(const CodeUpdateRequested& c, World& w) {
    if (!c.urgent && p_.get("defer_non_urgent") != 0) {
      held_update_ = c.version;
      held_for_window_ = true;
      w.set_timer(Duration::hours(p_.get("deferral_window_h")), kTagDeferredUpdate);
      return;
    }
    if (busy()) {
      held_update_ = c.version;
      held_for_window_ = false;
      return;
    }
    apply_update(w, c.version,
                 c.urgent ? "urgent update" : "update applied now (defer_non_urgent=0)");
  }
  void apply_update(World& w, std::string version, std::string why) {
    held_update_.reset();
    stop_now(w, "code update " + version);
    state_ = State::kStarting;
    starting_version_ = version;
    pending_start_ = w.act(HotUpdate{std::move(version), std::move(why)});
  }

  template <class T>
  void handle(const T&, World&) {}

  const Params p_;
  const std::unique_ptr<Detector> detector_;
  TimerId detect_timer_ = 0;
  Instant detect_at_ = Instant::max();
  const std::unique_ptr<Localizer> localizer_;
  bool localizing_ = false;          // the localizer's conversation is under way
  bool slow_search_ = false;         // ... on a slowdown (Localizer::places_slowdowns)
  int slow_searches_fruitless_ = 0;  // such searches in a row that found nothing
  const std::unique_ptr<CheckpointPlanner> checkpoint_;
  const std::unique_ptr<Recovery> recovery_;
  const std::unique_ptr<FailSlowPolicy> failslow_;
  const std::unique_ptr<StopVerdict> verdict_;
  SlotId straggler_ = -1;            // the straggler the fail-slow module tracks (-1: none)
  ActionId pending_mitigation_ = 0;  // its last MitigateSlowdown, and the level it applies
  SlowdownLevel pending_level_ = SlowdownLevel::kTolerate;
  std::array<bool, 4> refused_{};  // levels the backend refused (it lacks MitigateSlowdown)
  TimerId failslow_timer_ = 0;
  Instant slow_since_{};         // when the detector reported slow steps
  double slow_ratio_ = 1;        // how slow, then
  double last_step_time_s_ = 0;  // the latest steady sample's step time
  double healthy_step_s_ = 0;    // the step time without the straggler (its ratio's base)
  double fastest_step_s_ = 0;    // the fastest steps of the job so far
  State state_ = State::kStarting;
  ActionId pending_start_ = 0, pending_acquire_ = 0, pending_probe_ = 0, pending_capture_ = 0,
           pending_replay_ = 0;
  Instant last_start_{};
  int level_ = 0;
  int starts_ = 0;                       // job starts so far
  bool run_open_ = false;                // the run since last_start_ has not been counted as ended
  int interruptions_ = 0;                // runs that ended, for the checkpoint planner
  Duration running_ = Duration::zero();  // time the job ran in those runs
  std::int64_t last_start_step_ = 0;     // the step the latest start restored
  int stall_answered_by_ = -1;           // the start that restarted the job after the last stall
  std::string last_crash_sig_;
  // classify_crash's answers by signature (its exit code matters only as zero or not):
  // a handful of signatures recur thousands of times in a run.
  std::array<std::unordered_map<std::string, CrashKind>, 2> crash_kinds_;
  CrashKind crash_kind(const std::string& sig, int code) {
    auto& memo = crash_kinds_[code == 0 ? 1 : 0];
    auto it = memo.find(sig);
    if (it == memo.end()) it = memo.emplace(sig, classify_crash(sig, code)).first;
    return it->second;
  }
  MachineId last_crash_machine_ = kNoMachine;
  SlotId last_crash_slot_ = -1;
  int named_ = 0;      // crashes in a row that named the same machine
  int fruitless_ = 0;  // diagnosis rounds in a row that found nothing for this failure
  std::int64_t last_nan_step_ = -1;      // step of the last NaN incident
  int nan_repeats_ = 0;                  // NaN incidents in a row at that same step
  std::int64_t furthest_step_ = -1;      // the furthest step any run reached
  std::int64_t run_furthest_step_ = -1;  // the furthest step the current run reached
  int runs_without_progress_ = 0;        // runs in a row that got no further than furthest_step_
  // An escalation waiting on the stop-time tests under way (they pass: it acts).
  struct Escalation {
    int turns, times;
    std::string what, why;
  };
  std::optional<Escalation> escalation_;
  std::int64_t last_crash_step_ = -1;  // step the last crash came after (-1: unknown)
  int crash_streak_ = 0;               // identical crashes in a row (same signature, step, rank)
  int crash_turns_ = 0;                // machines they struck in turn (a change of machine counts)
  int mfu_fruitless_ = 0;  // MFU aggregation sequences since the restart that flagged nothing
  bool mfu_given_up_ = false;
  bool last_recovery_evicted_ = false;
  bool nan_chain_ = false;
  std::vector<ProbeKind> plan_;
  MachineSet suspects_;
  std::map<MachineId, std::deque<Instant>> alerts_;
  int mfu_rounds_left_ = 0;
  std::map<SlotId, int> flagged_;
  MachineSet avoided_;  // machines the recovery module asked the scheduler to hand out last
  std::unordered_map<MachineId, int> strikes_;  // evictions on evidence of each machine's own fault
  std::optional<std::string> held_update_;      // a code update waiting for a restart
  bool held_for_window_ = false;  // held by choice (deferral window), not by a recovery
  std::string starting_version_;  // the version the pending start asked for
};

}  // namespace

std::unique_ptr<Policy> make_byterobust(const Params& p) { return std::make_unique<ByteRobust>(p); }

}  // namespace faultline::policies
