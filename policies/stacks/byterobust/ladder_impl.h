// The ByteRobust stack as a class (ladder.h builds it): its state and the ladder's steps.
// ladder.cc holds the steps, the outcomes of its actions, the localization module and code
// updates; failures.cc the failures, explicit and implicit, with the stop verdict and the
// stop-time tests. Private to policies/stacks/byterobust/.
#pragma once

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "policies/localization/localization.h"
#include "policies/module.h"
#include "policies/stacks/byterobust/held_update.h"
#include "policies/stacks/byterobust/incidents.h"
#include "policies/stacks/byterobust/replica_groups.h"
#include "policies/stacks/byterobust/rounds.h"
#include "policies/stacks/byterobust/slowdowns.h"
#include "policies/stacks/byterobust/stop_time.h"

namespace faultline::policies {

// The ladder (ladder.h): what each failure calls for, in the order ByteRobust asks.
// What the questions need lives beside it: incident identity (Incidents), the MFU decline
// and the straggler (Slowdowns), a held code update (HeldUpdate); the answers come from
// the modules (policies/module.h).
class ByteRobust final : public Policy {
 public:
  ByteRobust(const ModuleRegistry& m, std::shared_ptr<const PolicyInfo> info, const Params& p);
  const PolicyInfo& info() const override { return *info_; }

  void start(World& w) override;
  void on_event(const Event& e, World& w) override;

 private:
  // The job trains and no diagnosis holds it (a stall's capture runs on a stuck job).
  bool running() const { return up_ && !rounds_.is_open() && !ended_; }

  // ------------------------------------------------------------ the ladder's steps
  void start_job(World& w, std::string why, Mechanism m, bool after_failure = false);
  void restart(World& w, Restart r);
  void try_restart(World& w);
  bool refill_empty(World& w, const char* why, const std::string& detail = {});
  ActionId acquire(World& w, AcquireMachines a);
  void roll_back(World& w, std::string why);
  void stop_if_running(World& w, const std::string& why);
  void stop_now(World& w, const std::string& why);
  void end_run(World& w);
  void evict_and_replace(World& w, const std::vector<SlotId>& slots, Mechanism m,
                         const std::string& why);
  void new_incident();
  void rollback_fruitless(World& w);
  void fruitless(World& w, const std::string& what);
  bool gave_up(World& w, const std::string& why);
  void requeue(World& w, const std::string& why);
  void reattempt(World& w, const std::string& why);

  // ------------------------------------------------------------ outcomes of our actions
  void handle(const MachinesReady& r, World& w);
  void handle(const JobStarted& s, World& w);
  void handle(const ActionFailed& f, World& w);
  void test_refused(const Rounds::Outcome& t, const ActionFailed& f, World& w);
  void handle(const TimerFired& t, World& w);

  // ------------------------------------------------------------ explicit failures
  void handle(const InspectionAlert& a, World& w);
  // Replica groups: a replica dropped out or rejoined while the job trains.
  void handle(const ReplicaDropped& d, World& w) { replicas_.dropped(d, w, running()); }
  void handle(const ReplicaRejoined& r, World& w) { replicas_.rejoined(r, w); }
  void handle(const ProcessExit& x, World& w);
  bool take_queued_crash(World& w);
  void handle(const FailureWarning& x, World& w);
  void handle(const StartFailed& x, World& w);
  void on_crash(World& w, MachineId m, int code, const std::string& sig, std::int64_t step);

  // ------------------------------------------------------------ stop verdict
  bool act_on(World& w, const std::optional<Ruling>& r, const std::string& why);
  bool judge_progress(World& w, std::int64_t step, const std::string& why);

  // ------------------------------------------------------------ stop-time tests
  void next_test(World& w, const std::string& why);
  void handle(const ProbeResult& r, World& w);

  // ------------------------------------------------------------ implicit failures
  void handle(const StepSample& s, World& w);
  void found(const Finding& f, World& w);
  void handle(const ProgressStalled& st, World& w);
  void mfu_capture(ActionId capture);
  void handle(const StepTimeHigh& s, World& w);
  void handle(const StacksCaptured& c, World& w);
  void handle(const MetricAnomaly& a, World& w);

  // ------------------------------------------------------------ localization module
  void start_replay(World& w, const std::string& why);
  void localizer_answer(const Event& outcome, World& w);
  void resume_localizer(World& w);
  void localization_step(LocalizationStep step, World& w);
  void handle(const ReplayResult& r, World& w);
  void open_round();
  void close_round();

  // ------------------------------------------------------------ code updates
  void handle(const CodeUpdateRequested& c, World& w);
  void apply_update(World& w, std::string version, std::string why);

  template <class T>
  void handle(const T&, World&) {}

  // An escalation waiting on the stop-time tests under way (they pass: it acts).
  struct Escalation {
    int turns, times;
    std::string what, why;
  };

  // The parameters the ladder reads as it goes, read once when it is built (not looked up
  // by name on every crash, round and update).
  struct Limits {
    explicit Limits(const Params& p);
    int max_fruitless_rounds, attributed_evict_after;
    bool defer_non_urgent;
    Duration deferral_window;
  };
  const Limits limits_;
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

}  // namespace faultline::policies
