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
#include <algorithm>

#include "realexec/controller/live_world.h"
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

void LiveWorld::act_on(ActionId id, const EnableReplicaGroups& a, Instant t) {
  // act() refused a minimum outside [1, data-parallel degree].
  if (!config_.job.replica_groups)
    return refuse(id,
                  "the job's code does not run replica groups (job.replica_groups is false in " +
                      config_.file + "): every failure stops the job",
                  t);
  replicas_.enable(a);
  outcome(id, true,
          std::to_string(cluster_.pp_groups()) + " replicas, the job stops below " +
              std::to_string(a.min_replicas),
          t);
}

void LiveWorld::act_on(ActionId id, const RejoinReplica& a, Instant t) {
  // act() refused a stopped job, an unknown replica and an empty slot.
  const std::int64_t r = a.replica;
  if (!replicas_.enabled()) return refuse(id, "replica groups not enabled", t);
  if (replicas_.member(r) || replicas_.joining(r))
    return refuse(id, "replica " + std::to_string(r) + " is not dropped", t);
  const MachineId m = cluster_.machine_in(static_cast<SlotId>(r));
  replicas_.rejoin(r, id, t);  // its outcome: when the replica trains again, or drops again
  if (!link_.connected(m)) {
    // As a machine still broken fails a rejoin in the simulator: the replica drops again,
    // naming it, and the policy decides whether to evict it.
    drop_replica(r, m, 1, "rejoin: the agent of " + machine_config(m).name + " is not connected");
    return;
  }
  note("replica " + std::to_string(r) + " rejoins on " + machine_config(m).name + ": " + a.reason);
  // It starts in the current quorum, which does not contain it, and says it waits; the next
  // quorum admits it (replica_report), so that the others train on while it starts.
  const Quorum current = quorums_.current();
  const auto& s = journal_.state();
  requests_.send(m,
                 json{{"type", "launch"},
                      {"gen", s.gen},
                      {"version", s.version},
                      {"ranks", json::array({{{"rank", r}, {"local_rank", 0}}})},
                      {"world_size", cluster_.slots()},
                      {"master_addr", machine_config(cluster_.machine_in(0)).addr},
                      {"master_port", config_.job.master_port},
                      {"ckpt_every", s.ckpt_every},
                      {"replicas", quorums_.launch_field(current)}},
                 Duration::seconds(kRequestTimeoutS), [this, id, r, m](const AgentReply& reply) {
                   if (replicas_.joiner(r) != id) return;
                   if (reply.ok) {
                     replicas_.launched(r);
                     return;
                   }
                   drop_replica(
                       r, m, 1,
                       "rejoin: launch failed on " + machine_config(m).name + ": " + reply.detail);
                 });
  reactor_.add_timer(Duration::seconds(config_.job.startup_timeout_s), [this, id, r, m] {
    if (replicas_.joiner(r) != id) return;
    requests_.send(m, json{{"type", "kill"}, {"gen", journal_.state().gen}},
                   Duration::seconds(kRequestTimeoutS), [](const AgentReply&) {});
    drop_replica(r, m, 1, "rejoin: not started within job.startup_timeout_s");
  });
}

std::int64_t LiveWorld::step_rank() const {
  return config_.job.replica_groups ? replicas_.step_rank() : 0;
}

void LiveWorld::drop_replica(std::int64_t r, MachineId m, int code, const std::string& signature) {
  if (replicas_.joining(r))
    rejoin_outcome(replicas_.joiner(r), false,
                   "replica " + std::to_string(r) + " dropped again while rejoining: " + signature);
  const bool member = replicas_.drop(r);
  ranks_.forget_clean_exit(r);
  replica_incident_opens(r, m, signature);  // journaled before the quorum goes out
  if (member) quorums_.send(quorums_.next({}));
  note("replica " + std::to_string(r) + " dropped out of the quorum (" +
       std::to_string(replicas_.live()) + " of " + std::to_string(cluster_.pp_groups()) +
       " train on): " + signature);
  deliver(ReplicaDropped{static_cast<int>(r), m, code, signature, ranks_.rank_step(r),
                         replicas_.live()});
}

bool LiveWorld::replica_exit(MachineId m, std::int64_t rank, int code,
                             const std::string& signature) {
  if (!replicas_.enabled() || !running_ || start_.pending()) return false;
  if (replicas_.joining(rank)) {
    if (!replicas_.was_launched(rank)) return true;       // its previous process, reaped late
    drop_replica(rank, m, code, "rejoin: " + signature);  // failed again while rejoining
    return true;
  }
  if (!replicas_.member(rank)) return true;  // out already: the echo of its drop
  if (replicas_.live() - 1 < replicas_.enabled()->min_replicas) return false;
  drop_replica(rank, m, code, signature);
  return true;
}

bool LiveWorld::replica_evict(const MachineSet& machines, const std::string& reason) {
  if (!replicas_.enabled() || !running_ || start_.pending()) return false;
  std::vector<std::int64_t> drop;
  for (MachineId m : machines) {
    const SlotId s = m >= 0 && m < cluster_.machine_count() ? cluster_.slot_of(m) : -1;
    if (s >= 0 && replicas_.member(s) && !replicas_.joining(s)) drop.push_back(s);
  }
  if (replicas_.live() - static_cast<int>(drop.size()) < replicas_.enabled()->min_replicas)
    return false;
  for (std::int64_t r : drop)
    drop_replica(r, cluster_.machine_in(static_cast<SlotId>(r)), 137, "evicted: " + reason);
  return true;
}

bool LiveWorld::replica_report(MachineId m, std::int64_t rank, const RankReport& r) {
  if (!config_.job.replica_groups) return false;
  // This controller numbers the quorums: a report of a later one than it formed read a quorum
  // file the controller did not write (a neighbour's, a stale one, a forged one). Believed, it
  // would move the group to a quorum that never comes; it is refused and noted (the first 5,
  // then one in 1000).
  if (r.quorum && *r.quorum > journal_.state().replica_quorum &&
      (r.type == "quorum" || r.type == "waiting" || r.type == "quorum_failed")) {
    const std::uint64_t disbelieved = replicas_.disbelieve();
    if (disbelieved <= 5 || disbelieved % 1000 == 0)
      note("refused a " + r.type + " report of replica " + std::to_string(rank) + " on " +
           machine_config(m).name + ": quorum " + std::to_string(*r.quorum) +
           " is beyond the latest this controller formed (" +
           std::to_string(journal_.state().replica_quorum) +
           "): its quorum file was not written by this controller (" + std::to_string(disbelieved) +
           " refused so far)");
    return true;
  }
  if (r.type == "waiting") {
    // A replica launched by a RejoinReplica waits for a quorum with it: the next one admits it.
    if (replicas_.joining(rank) && !replicas_.member(rank)) {
      replicas_.admit(rank);
      quorums_.send(quorums_.next({rank}));
    }
    return true;
  }
  if (r.type == "started" && replicas_.joining(rank)) {
    const ActionId id = replicas_.joined(rank);
    const std::string back = "replica " + std::to_string(rank) + " on " + machine_config(m).name +
                             " trains again from step " + std::to_string(r.step.value_or(-1)) +
                             " (" + (r.restored_from.empty() ? std::string("?") : r.restored_from) +
                             ")";
    note(back);
    rejoin_outcome(id, true, back);
    replica_incident_closes(rank, "recovered");
    deliver(ReplicaRejoined{id, static_cast<int>(rank), replicas_.live()});
    return true;
  }
  if (r.type == "quorum_failed") {
    const std::int64_t q = r.quorum.value_or(-1);
    if (!replicas_.enabled() || !running_ || q != journal_.state().replica_quorum) return true;
    // Each member's step when the first said so: one that trains on is no hung member.
    if (replicas_.say_failed(q, rank, [this](std::int64_t x) { return ranks_.rank_step(x); }))
      replicas_.failed_timer().arm(Duration::seconds(kFailedQuorumGraceS),
                                   [this, q] { judge_failed_quorum(q); });
    return true;
  }
  return r.type == "quorum";  // informative: the group formed
}

// A member said quorum `q` failed and the grace passed: the members that did not say so (and
// did not exit) hung. They are killed and drop out; when every member said so, no one hung
// (a collective that timed out on a loaded machine) and the same members form a new quorum.
void LiveWorld::judge_failed_quorum(std::int64_t q) {
  const std::set<std::int64_t> said = replicas_.take_said(q);
  if (!replicas_.enabled() || !running_ || q != journal_.state().replica_quorum) return;
  std::vector<std::int64_t> hung, trained_on;
  for (std::int64_t r : replicas_.members())
    if (!said.count(r) && !replicas_.joining(r))
      (ranks_.rank_step(r) > replicas_.step_when_failed(r) ? trained_on : hung).push_back(r);
  if (!trained_on.empty()) {
    // A member that reported steps after the quorum was said to fail is training in it: the
    // report was false (or its sayer's alone), and no healthy member is killed for it. A
    // sayer that really left the group times out waiting for the next quorum and exits.
    std::string list;
    for (std::int64_t r : trained_on) list += (list.empty() ? "" : ", ") + std::to_string(r);
    std::string sayers;
    for (std::int64_t r : said) sayers += (sayers.empty() ? "" : ", ") + std::to_string(r);
    note("quorum " + std::to_string(q) + " was said to fail by replica " + sayers +
         ", but replica " + list + " trained on in it: no replica is judged hung");
    return;
  }
  if (hung.empty()) {
    note("quorum " + std::to_string(q) + " failed in every member: forming it again");
    quorums_.send(quorums_.next({}));
    return;
  }
  const std::string why = "hang: no answer in quorum " + std::to_string(q) +
                          "'s collectives within the replicas' timeout of " +
                          traces::json_brief(replicas_.enabled()->timeout.to_seconds()) + " s";
  const MachineId first = cluster_.machine_in(static_cast<SlotId>(hung.front()));
  for (std::int64_t r : hung) {
    const MachineId m = cluster_.machine_in(static_cast<SlotId>(r));
    if (m != kNoMachine && link_.connected(m))
      requests_.send(m, json{{"type", "kill"}, {"gen", journal_.state().gen}},
                     Duration::seconds(kRequestTimeoutS), [](const AgentReply&) {});
  }
  if (replicas_.live() - static_cast<int>(hung.size()) < replicas_.enabled()->min_replicas) {
    report_exit(first, hung.front(), 124, why);  // too few would train on: the job stops
    return;
  }
  for (std::int64_t r : hung)
    drop_replica(r, cluster_.machine_in(static_cast<SlotId>(r)), 124, why);
}

json LiveWorld::replicas_status() const {
  json joining = json::array();
  for (const auto& [r, id] : replicas_.joiners()) joining.push_back(r);
  json out{{"enabled", replicas_.enabled().has_value()},
           {"replicas", cluster_.pp_groups()},
           {"live", replicas_.live()},
           {"quorum", journal_.state().replica_quorum},
           {"members",
            std::vector<std::int64_t>(replicas_.members().begin(), replicas_.members().end())},
           {"joining", joining}};
  if (replicas_.enabled()) out["min_replicas"] = replicas_.enabled()->min_replicas;
  return out;
}

// --- replica drops as incidents ------------------------------------------------------------

void LiveWorld::replica_incident_opens(std::int64_t r, MachineId m, const std::string& signature) {
  if (incidents_.open_replica(r)) return;  // out already (its rejoin failed): the same incident
  // From its last step report, as a stop of the job from rank 0's.
  const std::optional<Instant> at = ranks_.reported_at(r);
  const Instant began = at && *at < now() ? *at : now();
  const bool named = m >= 0 && m < cluster_.machine_count();
  Incident in{began,
              std::nullopt,
              "replica " + std::to_string(r) + (named ? " on " + machine_config(m).name : "") +
                  " dropped out: " + signature,
              "replica_drop",
              now(),
              std::nullopt,
              {}};
  in.replica = r;
  incidents_.open(std::move(in));
  save_journal();
}

void LiveWorld::replica_incident_closes(std::int64_t r, const std::string& resolution) {
  Incident* in = incidents_.open_replica(r);
  if (!in) return;
  incidents_.resolve(*in, now(), resolution);
  save_journal();
}

bool LiveWorld::rejoin_outcome(ActionId id, bool ok, const std::string& detail) {
  const std::optional<Instant> began = replicas_.take_rejoin(id);
  if (!began) return false;
  outcome(id, ok, detail, *began);
  return true;
}

void LiveWorld::rejoins_superseded() {
  for (const auto& [r, id] : replicas_.joiners())
    rejoin_outcome(
        id, false,
        "the job was launched again: replica " + std::to_string(r) + " starts with every replica");
}

void LiveWorld::resume_replicas_out(const std::set<std::int64_t>& out) {
  // A rejoin under way when the previous controller stopped: its process waits for (or is in)
  // a quorum this controller did not form, and the policy that asked for it is gone. It is
  // killed, and the others train on in a quorum without it.
  bool killed = false;
  for (std::int64_t r : out) {
    const MachineId m = cluster_.machine_in(static_cast<SlotId>(r));
    if (m == kNoMachine || !link_.connected(m) || !adoption_.ranks.count(m) ||
        adoption_.ranks[m].empty())
      continue;
    requests_.send(m, json{{"type", "kill"}, {"gen", journal_.state().gen}},
                   Duration::seconds(kRequestTimeoutS), [](const AgentReply&) {});
    killed = true;
  }
  if (killed) quorums_.send(quorums_.next({}));
  for (std::int64_t r : out) {
    const Incident* in = incidents_.open_replica(r);
    const std::string cause = in ? in->cause : "replica " + std::to_string(r) + " out";
    note("replica " + std::to_string(r) +
         " was out of the quorum when the previous controller stopped; the policy is told "
         "again (" +
         cause + ")");
    deliver(ReplicaDropped{static_cast<int>(r), cluster_.machine_in(static_cast<SlotId>(r)), 1,
                           "out of the quorum when the controller restarted: " + cause,
                           ranks_.rank_step(r), replicas_.live()});
  }
}

}  // namespace faultline::live
