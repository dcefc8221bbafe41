// Migrations: live mode's MigrateMachines (recovery=migrate; TrainMover, arXiv 2412.12636) on
// the job library's replica groups (python/faultline/replicas.py, job.replica_groups).
//
// A warned machine's replica moves to a parked standby without a stop, one machine at a time:
// a joiner of the same replica starts on the standby in a quorum that does not contain it, so
// it only says it waits while the old process trains on. Then the standby takes the slot, the
// next quorum admits the joiner with its state from a live peer (the replicas' step-boundary
// switch and state transfer, as for a RejoinReplica), and the old machine's process is
// killed: the machine leaves the job for repair, as an eviction. The joiner's "started"
// report ends it (MachinesReady; the outcome's duration is from the action to that report).
// A faultline.Job (DDP) cannot hand a running rank's state to a new process; a live config
// choosing recovery=migrate for one is refused at its start (live_config.cc,
// policies::live_refusal).
//
// LiveWorld owns the state a migration reads and changes (handed in as Job, with the Quorums
// that form and send the quorums); this keeps the migration under way and its steps
// (migrations.cc). Unit-tested in tests/realexec/agent/replica_parts_test.cc.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "policies/api/action.h"
#include "policies/api/cluster_view.h"
#include "policies/api/event.h"
#include "policies/api/ids.h"
#include "policies/api/time.h"
#include "realexec/controller/agent_requests.h"
#include "realexec/controller/journal.h"
#include "realexec/controller/machine_link.h"
#include "realexec/controller/quorums.h"
#include "realexec/controller/replica_set.h"
#include "realexec/live_config.h"
#include "realexec/net/messages.h"
#include "realexec/net/reactor.h"

namespace faultline::live {

class Migrations {
 public:
  // What a migration reads and acts on, owned by the world.
  struct Job {
    const LiveConfig& config;
    ClusterView& cluster;
    Reactor& reactor;
    MachineLink& link;
    AgentRequests& requests;
    ReplicaSet& replicas;
    Quorums& quorums;         // forms and sends the replicas' quorums
    Journal& journal;         // the generation, version, checkpoint cadence, quorum number
    const MachineSet& avoid;  // standbys handed out last (AvoidMachines)
    std::function<Instant()> now;
    std::function<bool()> running;   // every rank of the current generation started
    std::function<bool()> starting;  // a start waits for its ranks
    std::function<void(std::string_view)> note;
    std::function<void(ActionId, bool ok, const std::string&, Instant started)> outcome;
    std::function<void(ActionId, const std::string& why, Instant t)> refuse;
    std::function<void(Event)> deliver;
    std::function<void()> save;                // saves the journal
    std::function<void(MachineId)> taken_out;  // out of the job: to the repair pipeline
  };

  explicit Migrations(Job job) : j_(std::move(job)) {}

  // MigrateMachines `id` at `t`, after act()'s contract refusals: refused (outcome and
  // ActionFailed) or begun.
  void start(ActionId id, const MigrateMachines& a, Instant t);
  bool under_way() const { return m_.has_value(); }
  // The migration failed (`why`): its outcome and ActionFailed; a standby not yet in the slot
  // has its process killed and goes back to the pool.
  void fail(const std::string& why);
  // Hooks of the world's on_report and on_exit, before their slot check (the standby is in
  // none until the swap): true when the report or exit was the migration's and is consumed.
  bool report(MachineId m, std::int64_t rank, const RankReport& r);
  bool exit(MachineId m, const AgentExit& msg);

 private:
  struct Migration {
    ActionId id = 0;
    std::int64_t replica = -1;
    MachineId from = kNoMachine, to = kNoMachine;
    std::int64_t gen = -1;
    Instant began{};
    std::optional<Instant> swapped;  // the standby took the slot (the quorum admitting it sent)
    std::uint64_t timer = 0;         // job.startup_timeout_s for the joiner to wait
  };
  // The standby a migration takes: a parked, connected one (AvoidMachines' last).
  MachineId standby() const;
  // The current quorum without `replica`: the joiner waits in it until it is admitted.
  Quorum quorum_without(std::int64_t replica) const;
  void swap_in();

  Job j_;
  std::optional<Migration> m_;
};

}  // namespace faultline::live
