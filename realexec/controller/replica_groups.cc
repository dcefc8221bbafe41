// Replica groups in live mode (EnableReplicaGroups, RejoinReplica; FT-HSDP, torchft) on the
// job library's faultline.replicas (python/faultline/replicas.py): one process per
// data-parallel replica, its id its rank and slot. The controller keeps the quorum and the
// agents write it to each replica's quorum file; every replica hosts a TCPStore on
// job.master_port + 1 + its id, and a quorum forms on the store of its lowest member that is
// not joining. A replica that fails drops out while the others train on (ReplicaDropped): a
// rank's exit, an eviction of its machine (the policy's answer to its agent lost), or a
// silence, found when the other members say their collectives of the quorum failed and it
// did not (a hang, or a machine lost that no one evicted). A rejoin
// launches it again with the current quorum; once it says it waits, the next quorum admits
// it with its state from a live peer, and its "started" report is the ReplicaRejoined.
#include "realexec/controller/replica_groups.h"

#include <utility>
#include <vector>

#include "realexec/controller/live_world_internal.h"
#include "traces/config.h"

namespace faultline::live {

using nlohmann::json;
using world_detail::kRequestTimeoutS;

namespace {
// After a member says its quorum failed, how long the others have to say so too (or to exit)
// before the silent ones are judged hung: the members' collectives time out together, within
// their report's trip through the agents.
constexpr double kFailedQuorumGraceS = 2.0;
}  // namespace

ReplicaGroups::ReplicaGroups(Job job)
    : j_(std::move(job)),
      set_(j_.reactor),
      quorums_({j_.config, j_.cluster, set_, j_.journal, j_.requests, j_.link, j_.note, j_.save}) {}

void ReplicaGroups::enable(ActionId id, const EnableReplicaGroups& a, Instant t) {
  // act() refused a minimum outside [1, data-parallel degree].
  if (!j_.config.job.replica_groups)
    return j_.refuse(id,
                     "the job's code does not run replica groups (job.replica_groups is false in " +
                         j_.config.file + "): every failure stops the job",
                     t);
  set_.enable(a);
  j_.outcome(id, true,
             std::to_string(j_.cluster.pp_groups()) + " replicas, the job stops below " +
                 std::to_string(a.min_replicas),
             t);
}

void ReplicaGroups::rejoin(ActionId id, const RejoinReplica& a, Instant t) {
  // act() refused a stopped job, an unknown replica and an empty slot.
  const std::int64_t r = a.replica;
  if (!set_.enabled()) return j_.refuse(id, "replica groups not enabled", t);
  if (set_.member(r) || set_.joining(r))
    return j_.refuse(id, "replica " + std::to_string(r) + " is not dropped", t);
  const MachineId m = j_.cluster.machine_in(static_cast<SlotId>(r));
  set_.rejoin(r, id, t);  // its outcome: when the replica trains again, or drops again
  if (!j_.link.connected(m)) {
    // As a machine still broken fails a rejoin in the simulator: the replica drops again,
    // naming it, and the policy decides whether to evict it.
    drop(r, m, 1, "rejoin: the agent of " + j_.config.machine(m).name + " is not connected");
    return;
  }
  j_.note("replica " + std::to_string(r) + " rejoins on " + j_.config.machine(m).name + ": " +
          a.reason);
  // It starts in the current quorum, which does not contain it, and says it waits; the next
  // quorum admits it (replica_report), so that the others train on while it starts.
  j_.requests.send(
      m, quorums_.launch_one(r, quorums_.current()), Duration::seconds(kRequestTimeoutS),
      [this, id, r, m](const AgentReply& reply) {
        if (set_.joiner(r) != id) return;
        if (reply.ok) {
          set_.launched(r);
          return;
        }
        drop(r, m, 1,
             "rejoin: launch failed on " + j_.config.machine(m).name + ": " + reply.detail);
      });
  j_.reactor.add_timer(Duration::seconds(j_.config.job.startup_timeout_s), [this, id, r, m] {
    if (set_.joiner(r) != id) return;
    j_.requests.send(m, json{{"type", "kill"}, {"gen", j_.journal.state().gen}},
                     Duration::seconds(kRequestTimeoutS), [](const AgentReply&) {});
    drop(r, m, 1, "rejoin: not started within job.startup_timeout_s");
  });
}

std::int64_t ReplicaGroups::step_rank() const {
  return j_.config.job.replica_groups ? set_.step_rank() : 0;
}

void ReplicaGroups::drop(std::int64_t r, MachineId m, int code, const std::string& signature) {
  if (set_.joining(r))
    rejoin_outcome(set_.joiner(r), false,
                   "replica " + std::to_string(r) + " dropped again while rejoining: " + signature);
  const bool member = set_.drop(r);
  j_.ranks.forget_clean_exit(r);
  incident_opens(r, m, signature);  // journaled before the quorum goes out
  if (member) quorums_.send(quorums_.next({}));
  j_.note("replica " + std::to_string(r) + " dropped out of the quorum (" +
          std::to_string(set_.live()) + " of " + std::to_string(j_.cluster.pp_groups()) +
          " train on): " + signature);
  j_.deliver(
      ReplicaDropped{static_cast<int>(r), m, code, signature, j_.ranks.rank_step(r), set_.live()});
}

bool ReplicaGroups::exit(MachineId m, std::int64_t rank, int code, const std::string& signature) {
  if (!set_.enabled() || !j_.running() || j_.starting()) return false;
  if (set_.joining(rank)) {
    if (!set_.was_launched(rank)) return true;    // its previous process, reaped late
    drop(rank, m, code, "rejoin: " + signature);  // failed again while rejoining
    return true;
  }
  if (!set_.member(rank)) return true;  // out already: the echo of its drop
  if (set_.live() - 1 < set_.enabled()->min_replicas) return false;
  drop(rank, m, code, signature);
  return true;
}

bool ReplicaGroups::evict(const MachineSet& machines, const std::string& reason) {
  if (!set_.enabled() || !j_.running() || j_.starting()) return false;
  std::vector<std::int64_t> out;
  for (MachineId m : machines) {
    const SlotId s = m >= 0 && m < j_.cluster.machine_count() ? j_.cluster.slot_of(m) : -1;
    if (s >= 0 && set_.member(s) && !set_.joining(s)) out.push_back(s);
  }
  if (set_.live() - static_cast<int>(out.size()) < set_.enabled()->min_replicas) return false;
  for (std::int64_t r : out)
    drop(r, j_.cluster.machine_in(static_cast<SlotId>(r)), 137, "evicted: " + reason);
  return true;
}

bool ReplicaGroups::report(MachineId m, std::int64_t rank, const RankReport& r) {
  if (!j_.config.job.replica_groups) return false;
  // This controller numbers the quorums: a report of a later one than it formed read a quorum
  // file the controller did not write (a neighbour's, a stale one, a forged one). Believed, it
  // would move the group to a quorum that never comes; it is refused and noted (the first 5,
  // then one in 1000).
  if (r.quorum && *r.quorum > j_.journal.state().replica_quorum &&
      (r.type == "quorum" || r.type == "waiting" || r.type == "quorum_failed")) {
    const std::uint64_t disbelieved = set_.disbelieve();
    if (disbelieved <= 5 || disbelieved % 1000 == 0)
      j_.note("refused a " + r.type + " report of replica " + std::to_string(rank) + " on " +
              j_.config.machine(m).name + ": quorum " + std::to_string(*r.quorum) +
              " is beyond the latest this controller formed (" +
              std::to_string(j_.journal.state().replica_quorum) +
              "): its quorum file was not written by this controller (" +
              std::to_string(disbelieved) + " refused so far)");
    return true;
  }
  if (r.type == "waiting") {
    // A replica launched by a RejoinReplica waits for a quorum with it: the next one admits it.
    if (set_.joining(rank) && !set_.member(rank)) {
      set_.admit(rank);
      quorums_.send(quorums_.next({rank}));
    }
    return true;
  }
  if (r.type == "started" && set_.joining(rank)) {
    const ActionId id = set_.joined(rank);
    const std::string back = "replica " + std::to_string(rank) + " on " +
                             j_.config.machine(m).name + " trains again from step " +
                             std::to_string(r.step.value_or(-1)) + " (" +
                             (r.restored_from.empty() ? std::string("?") : r.restored_from) + ")";
    j_.note(back);
    rejoin_outcome(id, true, back);
    incident_closes(rank, "recovered");
    j_.deliver(ReplicaRejoined{id, static_cast<int>(rank), set_.live()});
    return true;
  }
  if (r.type == "quorum_failed") {
    const std::int64_t q = r.quorum.value_or(-1);
    if (!set_.enabled() || !j_.running() || q != j_.journal.state().replica_quorum) return true;
    // Each member's step when the first said so: one that trains on is no hung member.
    if (set_.say_failed(q, rank, [this](std::int64_t x) { return j_.ranks.rank_step(x); }))
      set_.failed_timer().arm(Duration::seconds(kFailedQuorumGraceS),
                              [this, q] { judge_failed_quorum(q); });
    return true;
  }
  return r.type == "quorum";  // informative: the group formed
}

// A member said quorum `q` failed and the grace passed: the members that did not say so (and
// did not exit) hung. They are killed and drop out; when every member said so, no one hung
// (a collective that timed out on a loaded machine) and the same members form a new quorum.
void ReplicaGroups::judge_failed_quorum(std::int64_t q) {
  const std::set<std::int64_t> said = set_.take_said(q);
  if (!set_.enabled() || !j_.running() || q != j_.journal.state().replica_quorum) return;
  std::vector<std::int64_t> hung, trained_on;
  for (std::int64_t r : set_.members())
    if (!said.count(r) && !set_.joining(r))
      (j_.ranks.rank_step(r) > set_.step_when_failed(r) ? trained_on : hung).push_back(r);
  if (!trained_on.empty()) {
    // A member that reported steps after the quorum was said to fail is training in it: the
    // report was false (or its sayer's alone), and no healthy member is killed for it. A
    // sayer that really left the group times out waiting for the next quorum and exits.
    std::string list;
    for (std::int64_t r : trained_on) list += (list.empty() ? "" : ", ") + std::to_string(r);
    std::string sayers;
    for (std::int64_t r : said) sayers += (sayers.empty() ? "" : ", ") + std::to_string(r);
    j_.note("quorum " + std::to_string(q) + " was said to fail by replica " + sayers +
            ", but replica " + list + " trained on in it: no replica is judged hung");
    return;
  }
  if (hung.empty()) {
    j_.note("quorum " + std::to_string(q) + " failed in every member: forming it again");
    quorums_.send(quorums_.next({}));
    return;
  }
  const std::string why = "hang: no answer in quorum " + std::to_string(q) +
                          "'s collectives within the replicas' timeout of " +
                          traces::json_brief(set_.enabled()->timeout.to_seconds()) + " s";
  const MachineId first = j_.cluster.machine_in(static_cast<SlotId>(hung.front()));
  for (std::int64_t r : hung) {
    const MachineId m = j_.cluster.machine_in(static_cast<SlotId>(r));
    if (m != kNoMachine && j_.link.connected(m))
      j_.requests.send(m, json{{"type", "kill"}, {"gen", j_.journal.state().gen}},
                       Duration::seconds(kRequestTimeoutS), [](const AgentReply&) {});
  }
  if (set_.live() - static_cast<int>(hung.size()) < set_.enabled()->min_replicas) {
    j_.stop_job(first, hung.front(), 124, why);  // too few would train on: the job stops
    return;
  }
  for (std::int64_t r : hung) drop(r, j_.cluster.machine_in(static_cast<SlotId>(r)), 124, why);
}

json ReplicaGroups::status() const {
  json joining = json::array();
  for (const auto& [r, id] : set_.joiners()) joining.push_back(r);
  json out{{"enabled", set_.enabled().has_value()},
           {"replicas", j_.cluster.pp_groups()},
           {"live", set_.live()},
           {"quorum", j_.journal.state().replica_quorum},
           {"members", std::vector<std::int64_t>(set_.members().begin(), set_.members().end())},
           {"joining", joining}};
  if (set_.enabled()) out["min_replicas"] = set_.enabled()->min_replicas;
  return out;
}

// --- replica drops as incidents ------------------------------------------------------------

void ReplicaGroups::incident_opens(std::int64_t r, MachineId m, const std::string& signature) {
  if (j_.incidents.open_replica(r)) return;  // out already (its rejoin failed): the same incident
  // From its last step report, as a stop of the job from rank 0's.
  const std::optional<Instant> at = j_.ranks.reported_at(r);
  const Instant began = at && *at < j_.now() ? *at : j_.now();
  const bool named = m >= 0 && m < j_.cluster.machine_count();
  Incident in{began,
              std::nullopt,
              "replica " + std::to_string(r) + (named ? " on " + j_.config.machine(m).name : "") +
                  " dropped out: " + signature,
              "replica_drop",
              j_.now(),
              std::nullopt,
              {}};
  in.replica = r;
  j_.incidents.open(std::move(in));
  j_.save();
}

void ReplicaGroups::incident_closes(std::int64_t r, const std::string& resolution) {
  Incident* in = j_.incidents.open_replica(r);
  if (!in) return;
  j_.incidents.resolve(*in, j_.now(), resolution);
  j_.save();
}

bool ReplicaGroups::rejoin_outcome(ActionId id, bool ok, const std::string& detail) {
  const std::optional<Instant> began = set_.take_rejoin(id);
  if (!began) return false;
  j_.outcome(id, ok, detail, *began);
  return true;
}

Quorum ReplicaGroups::launch_all() {
  for (const auto& [r, id] : set_.joiners())
    rejoin_outcome(
        id, false,
        "the job was launched again: replica " + std::to_string(r) + " starts with every replica");
  set_.launch_all(j_.cluster.slots());
  return quorums_.next({});
}

void ReplicaGroups::resume_out(const std::set<std::int64_t>& out,
                               const std::map<MachineId, std::set<std::int64_t>>& adopted) {
  // A rejoin under way when the previous controller stopped: its process waits for (or is in)
  // a quorum this controller did not form, and the policy that asked for it is gone. It is
  // killed, and the others train on in a quorum without it.
  bool killed = false;
  for (std::int64_t r : out) {
    const MachineId m = j_.cluster.machine_in(static_cast<SlotId>(r));
    if (m == kNoMachine || !j_.link.connected(m) || !adopted.count(m) || adopted.at(m).empty())
      continue;
    j_.requests.send(m, json{{"type", "kill"}, {"gen", j_.journal.state().gen}},
                     Duration::seconds(kRequestTimeoutS), [](const AgentReply&) {});
    killed = true;
  }
  if (killed) quorums_.send(quorums_.next({}));
  for (std::int64_t r : out) {
    const Incident* in = j_.incidents.open_replica(r);
    const std::string cause = in ? in->cause : "replica " + std::to_string(r) + " out";
    j_.note("replica " + std::to_string(r) +
            " was out of the quorum when the previous controller stopped; the policy is told "
            "again (" +
            cause + ")");
    j_.deliver(ReplicaDropped{static_cast<int>(r), j_.cluster.machine_in(static_cast<SlotId>(r)), 1,
                              "out of the quorum when the controller restarted: " + cause,
                              j_.ranks.rank_step(r), set_.live()});
  }
}

}  // namespace faultline::live
