// The failures the ladder answers (ladder_impl.h): explicit ones (alerts, crashes, failed
// starts), with the stop verdict and the stop-time tests, and implicit ones (stalls, MFU
// declines, metric anomalies).
#include <algorithm>
#include <utility>

#include "policies/stacks/byterobust/ladder_impl.h"

namespace faultline::policies {

// ------------------------------------------------------------ explicit failures
void ByteRobust::handle(const InspectionAlert& a, World& w) {
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
  if (rounds_.is_open() && std::count(crash_suspects_.begin(), crash_suspects_.end(), a.machine)) {
    escalation_.reset();
    tests_.clear();
    fruitless_ = 0;
    close_round();
  }
  evict_and_replace(w, {w.cluster().slot_of(a.machine)}, Mechanism::kRealtimeEviction,
                    "real-time " + a.kind + " alert: " + a.detail);
}

void ByteRobust::handle(const ProcessExit& x, World& w) {
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
bool ByteRobust::take_queued_crash(World& w) {
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
void ByteRobust::handle(const FailureWarning& x, World& w) {
  if (!running() || x.machine < 0 || x.machine >= w.cluster().machine_count() ||
      w.cluster().slot_of(x.machine) < 0)
    return;
  if (auto m = recovery_->migrate(x, w.cluster())) w.act(std::move(*m));
}

void ByteRobust::handle(const StartFailed& x, World& w) {
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

void ByteRobust::on_crash(World& w, MachineId m, int code, const std::string& sig,
                          std::int64_t step) {
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
  const int evict_after = limits_.attributed_evict_after;
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
bool ByteRobust::act_on(World& w, const std::optional<Ruling>& r, const std::string& why) {
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
bool ByteRobust::judge_progress(World& w, std::int64_t step, const std::string& why) {
  return act_on(w, incidents_.judge_progress(*verdict_, step, why), why);
}

// ------------------------------------------------------------ stop-time tests
void ByteRobust::next_test(World& w, const std::string& why) {
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
void ByteRobust::handle(const ProbeResult& r, World& w) {
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
void ByteRobust::handle(const StepSample& s, World& w) {
  if (!running()) return;
  incidents_.stepped(s.step);
  slowdowns_.sample(s, w);
  auto f = detector_->observe(s, w.now());
  detect_timer_.schedule(w, detector_->next_check());
  if (f) found(*f, w);
}

void ByteRobust::found(const Finding& f, World& w) {
  if (w.keeps_notes()) w.note("detected: " + describe(f));
  std::visit([&](const auto& x) { handle(x, w); }, f);
}

void ByteRobust::handle(const ProgressStalled& st, World& w) {
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
void ByteRobust::mfu_capture(ActionId capture) {
  pending_.capture = capture;
  rounds_.asked(capture, Rounds::Test::kMfu);
}

void ByteRobust::handle(const StepTimeHigh& s, World& w) {
  if (!running()) return;
  if (ActionId capture = slowdowns_.slow(s.ratio, w)) mfu_capture(capture);
}

void ByteRobust::handle(const StacksCaptured& c, World& w) {
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

void ByteRobust::handle(const MetricAnomaly& a, World& w) {
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

}  // namespace faultline::policies
