// LiveWorld: the live backend's World. It runs a registered policy stack, unchanged,
// against real training processes on real machines reached through their agents.
//
// Policies see only what the agents observe (process exits with their log line, step
// reports, inspection alerts, probe verdicts, captured stacks, replay hashes) and act
// through the shared Action vocabulary, which LiveWorld turns into agent requests
// (launch, kill, probe, capture, replay). Every event shown and action taken is
// written to the event log; the placement of machines, the code version and the job
// generation are journaled, so a restarted controller adopts the job it was managing.
//
// Machine ids follow the config: job machines 0..M-1 in slot order, then standbys.
// Requests to agents go through AgentRequests over a MachineLink (the controller's
// connections); replies and reports come back through on_agent_message. Events raised while
// an action is being started are queued and delivered after the policy's handler returns.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "eventlog/event_log.h"
#include "policies/api/policy.h"
#include "realexec/controller/acquisitions.h"
#include "realexec/controller/action_burst.h"
#include "realexec/controller/agent_requests.h"
#include "realexec/controller/incident_ledger.h"
#include "realexec/controller/job_start.h"
#include "realexec/controller/journal.h"
#include "realexec/controller/lost_time_account.h"
#include "realexec/controller/machine_link.h"
#include "realexec/controller/metrics.h"
#include "realexec/controller/migrations.h"
#include "realexec/controller/one_shot_timer.h"
#include "realexec/controller/policy_delivery.h"
#include "realexec/controller/policy_timers.h"
#include "realexec/controller/rank_generation.h"
#include "realexec/controller/repair_pipeline.h"
#include "realexec/controller/replica_groups.h"
#include "realexec/controller/step_progress.h"
#include "realexec/controller/stop_tests.h"
#include "realexec/live_config.h"
#include "realexec/net/messages.h"
#include "realexec/net/reactor.h"

namespace faultline::live {

class LiveWorld final : public World {
 public:
  // `journal` holds the state to resume from (journal.resumed() says whether it was
  // loaded from disk). `log` is open for append. Neither is owned.
  LiveWorld(const LiveConfig& config, const Registry& registry, Reactor& reactor, MachineLink& link,
            traces::EventLogWriter& log, Journal& journal);
  ~LiveWorld() override;

  // Builds the policy stack and calls its start(); call once, after the log header.
  void start();

  // --- from the controller ----------------------------------------------------------
  // `auth` says which ranks of which generation the agent still runs (adoption).
  void on_agent_connected(MachineId m, const Auth& auth);
  // Decodes the message first (realexec/net/messages.h): one that does not decode throws
  // BadMessage and changes nothing.
  void on_agent_message(MachineId m, const nlohmann::json& msg);
  void on_agent_lost(MachineId m, const std::string& why);
  // An operator's code update (CodeUpdateRequested for the policy).
  void request_code_update(const std::string& version, bool urgent);
  // Called with a record's run time whenever the event log could not write it at once
  // (it waits in memory): the controller marks the outage where a crash cannot erase it.
  void on_log_pending(std::function<void(double t_s)> f) { on_log_pending_ = std::move(f); }
  // Records a previous controller lost (waiting for a failing disk when it died): counted
  // in the status's event_log.lost.
  void lost_before_restart(std::uint64_t n) { lost_before_restart_ += n; }
  std::uint64_t lost_before_restart() const { return lost_before_restart_; }
  // Records an injected fault (ground truth, never shown to the policy).
  void record_fault(MachineId m, const std::string& kind, const std::string& detail,
                    bool persistent);
  // Sends an operator's fault to machine m's agent and records it as ground truth once the
  // agent says it applied it; a refusal is noted as a refusal, never recorded as a fault.
  // `done(ok, detail)` follows the agent's answer (machine_down, whose agent exits without
  // one, is recorded as it is sent).
  void inject(MachineId m, const std::string& fault, const std::string& detail, bool persistent,
              std::function<void(bool ok, const std::string& detail)> done);
  // An operator's failure warning for machine m (`faultline live inject --fault warn`, as a
  // failure predictor would send it): recorded as ground truth (what is true is that the
  // warning was sent; nothing fails) and shown to the policy as a FailureWarning with this
  // lead (live_migrate.cc).
  void warn(MachineId m, double lead_s);
  // An operator repaired machine m: an evicted machine returns to the standby pool.
  // Returns false (and changes nothing) when m is serving a slot or already parked.
  bool repaired(MachineId m);
  nlohmann::json status() const;
  // Writes the summary record; returns the measured ETTR. From then on the accounting
  // (status, metrics) stays as of this moment: the run's final account.
  double write_summary();
  // The metrics of `GET /metrics` (docs/metrics.md), as of now; defined in live_metrics.cc.
  std::vector<MetricFamily> metrics() const;
  bool finished() const { return finished_; }
  // The verdict of an EndRun ("code_or_data"), empty when the run was not ended.
  const std::string& ended_verdict() const { return journal_.state().ended_verdict; }

  // --- World ---------------------------------------------------------------------------
  Instant now() const override;
  const ClusterView& cluster() const override { return cluster_; }
  ActionId act(Action a) override;
  TimerId set_timer(Duration after, std::uint64_t tag) override;
  void cancel_timer(TimerId id) override;
  Rng& rng() override { return rng_; }
  void note(std::string_view reason) override;

 private:
  void deliver(Event e);
  void log(const std::string& kind, nlohmann::json fields);
  void outcome(ActionId id, bool ok, const std::string& detail, Instant started);
  void save_journal();

  // Refuses `id`: its outcome (not ok, `why`) and ActionFailed{id, why}.
  void refuse(ActionId id, const std::string& why, Instant t);
  // act() logs the action, guards against a livelock and refuses what the contract refuses
  // (policies/api/refusals.h), then hands it to the overload for its kind (live_world.cc),
  // which adds live mode's own refusals; `t` is the time its outcome is measured from.
  void act_on(ActionId id, const StopJob& a, Instant t);            // kills every rank
  void act_on(ActionId id, const EndRun& a, Instant t);             // stops the job for good
  void act_on(ActionId id, const StartJob& a, Instant t);           // on a known version
  void act_on(ActionId id, const EvictMachines& a, Instant t);      // see do_evict
  void act_on(ActionId id, const AcquireMachines& a, Instant t);    // see acquisitions.h
  void act_on(ActionId id, const SetCheckpointPlan& a, Instant t);  // from the next launch
  void act_on(ActionId id, const WatchSteps& a, Instant t);         // StepSample cadence
  void act_on(ActionId id, const EnableOracle& a, Instant t);       // refused: no ground truth
  void act_on(ActionId id, const Note& a, Instant t);               // an event-log note
  void act_on(ActionId id, const EnableInspection& a, Instant t);   // on every agent
  void act_on(ActionId id, const RunProbe& a, Instant t);           // see stop_tests.h
  void act_on(ActionId id, const CaptureStacks& a, Instant t);      // see stop_tests.h
  void act_on(ActionId id, const RunReplay& a, Instant t);          // see stop_tests.h
  void act_on(ActionId id, const HotUpdate& a, Instant t);          // a restart on a known version
  void act_on(ActionId id, const RollBack& a, Instant t);           // a restart on the good version
  void act_on(ActionId id, const SetStandbyPool& a, Instant t);     // only checks the pool
  void act_on(ActionId id, const AvoidMachines& a, Instant t);      // standbys handed out last
  void act_on(ActionId id, const MitigateSlowdown& a, Instant t);   // refused: fixed layout
  void act_on(ActionId id, const EnableReplicaGroups& a, Instant t);  // see replica_groups.h
  void act_on(ActionId id, const RejoinReplica& a, Instant t);        // see replica_groups.h
  void act_on(ActionId id, const MigrateMachines& a, Instant t);      // see migrations.h

  // Action handlers.
  // `spare`: with job.in_place, the ranks that hold in place survive the stop (kill_sparing).
  void do_stop(ActionId id, const StopJob& a, bool spare = true);
  // `in_place`: keep the ranks that hold in place and relaunch the others (job.in_place); with
  // none holding, an ordinary start, noted.
  void do_start(ActionId id, const std::string& why, bool in_place = false);
  void start_in_place(ActionId id, Instant t);  // do_start's in-place part (live_ranks.cc)
  void note_holding(MachineId m, std::int64_t rank, std::int64_t step);
  void do_evict(ActionId id, const EvictMachines& a);
  // The stop-time tests (stop_tests.h): probes, stack captures, replays, inspections.
  StopTests tests_;

  // A resumed journal's ids mapped to this config's order by the names it saved.
  void remap_machines(JournalState& s);
  // The repair pipeline (LiveRepair): machines out of the job come back to the pool.
  RepairPipeline repairs_;

  void kill_all(std::function<void()> then);
  // Ranks by machine that hold in place (a peer died; they keep their process and state).
  using HeldRanks = std::map<MachineId, std::vector<std::int64_t>>;
  // Kills every rank but those holding in place, each agent giving the others kHoldGraceS to
  // hold first; `then` gets the ranks spared.
  void kill_sparing(std::function<void(HeldRanks)> then);
  // `kept`: an in-place start, the ranks kept (the others launched with FAULTLINE_IN_PLACE).
  void launch(ActionId id, Instant started, const HeldRanks* kept = nullptr);
  // `category` (metrics label): rank_exit, eviction, policy_stop or job_finished.
  void job_broken(const std::string& category, const std::string& cause);
  // Every rank of the job runs: ends the start-up phase or resolves the open incident.
  void job_running();
  IncidentLedger incidents_;  // the start-up, the job's stops, the replicas' drops

  // --- the account of lost time (account_, lost_time_account.h; docs/metrics.md)
  // The incidents' counters to and from the journal's (a restarted controller continues them).
  void incident_stats_to_journal();
  void incident_stats_from_journal();
  MachineSet job_machines() const;
  bool runs_rank(MachineId m, std::int64_t rank, const char* what) const;
  void on_report(MachineId m, const AgentReport& msg);
  void on_exit(MachineId m, const AgentExit& msg);
  void report_exit(MachineId m, std::int64_t rank, int code, const std::string& signature);
  // `after`: what the exit came after ("its generation was replaced"); default, the job's state.
  void note_dropped_exit(MachineId m, std::int64_t rank, int code, int sig,
                         const std::string& signature, const char* after = nullptr);
  void attribute_victim_exit();
  void hold_victim(MachineId m, std::int64_t rank, int code, const std::string& signature);
  void fail_start(MachineId m, std::int64_t rank, const std::string& signature);
  // False (and noted) when `step` is beyond what the job can have reached by now.
  bool believable_step(MachineId m, std::int64_t rank, std::int64_t step);

  const LiveConfig& config_;
  Reactor& reactor_;
  MachineLink& link_;
  traces::EventLogWriter& log_;
  Journal& journal_;
  ClusterView cluster_;
  Rng rng_;
  std::unique_ptr<Policy> policy_;
  Instant origin_;
  double clock_behind_s_ = 0;
  bool remapped_ = false;  // the journal's machine ids were mapped to the config's by name
  std::function<void(double)> on_log_pending_;
  std::uint64_t lost_before_restart_ =
      0;  // the wall clock was behind the journal's time at the restart

  ActionId next_action_ = 1;
  AgentRequests requests_;      // requests to agents waiting for their reply
  PolicyTimers policy_timers_;  // the policy's timers on the reactor (policy_timers.h)
  PolicyDelivery delivery_;     // events waiting for the policy (deliver(), policy_delivery.h)
  bool started_ = false;
  bool closed_ = false;  // the summary is written; nothing more is delivered or done

  // Job state (journaled: gen, version, good version, running, placement).
  bool running_ = false;  // every rank of the current generation started
  JobStart start_;        // StartJob / HotUpdate / RollBack waiting for ranks
  RankGeneration ranks_;  // what the current generation's ranks said
  // A victim's exit (see is_peer_symptom) waits kPeerGraceS for its cause's, then is
  // attributed (attribute_victim_exit).
  OneShotTimer victim_timer_;
  void note_unnoted_exits();

  bool finished_ = false;

  // Resume: the journal's generation, adopted when every slot's agent still runs it.
  struct Adoption {
    bool active = false;
    std::map<MachineId, std::set<std::int64_t>> ranks;
    std::map<MachineId, std::int64_t> gen;  // the generation each agent said it runs
    ActionId action = 0;
    std::uint64_t timer = 0;
  };
  Adoption adoption_;

  StepProgress progress_;  // the step rank's reports: the job's progress, step samples
  ActionBurst burst_;      // act()'s livelock guard (action_burst.h)
  // AcquireMachines waiting for standbys, and AvoidMachines' order (acquisitions.h).
  Acquisitions acquisitions_;
  // The replica groups (job.replica_groups): their state, quorums and handlers.
  ReplicaGroups replicas_;
  LostTimeAccount account_;  // lost time by phase, ETTR so far (reads the parts above)
  Migrations migrations_;    // MigrateMachines on replica groups, one at a time
};

}  // namespace faultline::live
