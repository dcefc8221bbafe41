// ReplicaGroups: replica groups in live mode (EnableReplicaGroups, RejoinReplica; FT-HSDP,
// torchft) on the job library's faultline.replicas (python/faultline/replicas.py,
// job.replica_groups): one process per data-parallel replica, its id its rank and slot. It
// holds the replicas' state (ReplicaSet) and their quorums (Quorums), and decides what a
// replica's exit, report, eviction or silence does (replica_groups.cc).
//
// Every launch of such a job starts quorum 1 of all replicas. With EnableReplicaGroups, a
// failed replica drops out while the others train (ReplicaDropped) and a RejoinReplica
// launches it again, admitted to the quorum once it waits for one (ReplicaRejoined).
//
// LiveWorld owns the state these read and change (handed in as Job) and routes the agents'
// exits and reports here first. Unit-tested in tests/realexec/agent/replica_parts_test.cc.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>

#include "policies/api/action.h"
#include "policies/api/cluster_view.h"
#include "policies/api/event.h"
#include "policies/api/ids.h"
#include "policies/api/time.h"
#include "realexec/controller/agent_requests.h"
#include "realexec/controller/incident_ledger.h"
#include "realexec/controller/journal.h"
#include "realexec/controller/machine_link.h"
#include "realexec/controller/quorums.h"
#include "realexec/controller/rank_generation.h"
#include "realexec/controller/replica_set.h"
#include "realexec/live_config.h"
#include "realexec/net/messages.h"
#include "realexec/net/reactor.h"

namespace faultline::live {

class ReplicaGroups {
 public:
  // What the replica groups read and act on, owned by the world.
  struct Job {
    const LiveConfig& config;
    const ClusterView& cluster;
    Reactor& reactor;
    MachineLink& link;
    AgentRequests& requests;
    Journal& journal;           // the generation, version, checkpoint cadence, quorum number
    RankGeneration& ranks;      // the ranks' steps and clean exits
    IncidentLedger& incidents;  // a replica's drop is an incident
    std::function<Instant()> now;
    std::function<bool()> running;   // every rank of the current generation started
    std::function<bool()> starting;  // a start waits for its ranks
    std::function<void(std::string_view)> note;
    std::function<void(ActionId, bool ok, const std::string&, Instant started)> outcome;
    std::function<void(ActionId, const std::string& why, Instant t)> refuse;
    std::function<void(Event)> deliver;
    std::function<void()> save;  // saves the journal
    // A rank's failure that stops the job (the world's report_exit).
    std::function<void(MachineId, std::int64_t rank, int code, const std::string& signature)>
        stop_job;
  };

  explicit ReplicaGroups(Job job);

  // The replicas' state, and the quorums formed of it (Migrations and the account read them).
  ReplicaSet& set() { return set_; }
  const ReplicaSet& set() const { return set_; }
  Quorums& quorums() { return quorums_; }

  // The actions, after act()'s contract refusals: refused (outcome and ActionFailed) or done.
  void enable(ActionId id, const EnableReplicaGroups& a, Instant t);
  void rejoin(ActionId id, const RejoinReplica& a, Instant t);

  // A launch of the job brings every replica back: the rejoins under way end, not done, and
  // the next quorum, of all replicas, is formed (sent with the launch).
  Quorum launch_all();
  // A rank of the job exited while it trains with replica groups: true when that is a drop
  // (or an echo of one) rather than a failure that stops the job.
  bool exit(MachineId m, std::int64_t rank, int code, const std::string& signature);
  // A report of a replica-group rank (waiting, started, quorum_failed); true when consumed.
  bool report(MachineId m, std::int64_t rank, const RankReport& r);
  // Machines evicted while the job trains with replica groups: true when their replicas drop
  // out and the job trains on.
  bool evict(const MachineSet& machines, const std::string& reason);
  // The rank whose step reports carry the job's step: 0, or the lowest replica training.
  std::int64_t step_rank() const;
  nlohmann::json status() const;  // status: the quorum, its members, the joiners
  // A replica's drop is an incident (category replica_drop, as the simulator's drop is one
  // resolved by the replica_drop mechanism): it opens when the replica leaves the quorum and
  // closes when it trains again. The job trains on meanwhile: it is no stop of the job, and
  // its lost time is the missing replicas' share of the steps (LostTimeAccount::step).
  void incident_closes(std::int64_t r, const std::string& resolution);
  // A restarted controller adopted the job without the replicas the journal says were out:
  // it kills what runs of them (a rejoin under way: `adopted`, the ranks each agent said it
  // runs), forms the quorum without them, and tells the policy each is out (ReplicaDropped),
  // which brings them back.
  void resume_out(const std::set<std::int64_t>& out,
                  const std::map<MachineId, std::set<std::int64_t>>& adopted);

 private:
  void drop(std::int64_t r, MachineId m, int code, const std::string& signature);
  void judge_failed_quorum(std::int64_t quorum);
  void incident_opens(std::int64_t r, MachineId m, const std::string& signature);
  // The outcome of a RejoinReplica still under way; false when it has one already.
  bool rejoin_outcome(ActionId id, bool ok, const std::string& detail);

  Job j_;
  ReplicaSet set_;
  Quorums quorums_;  // forms the quorums of set_ and sends them
};

}  // namespace faultline::live
