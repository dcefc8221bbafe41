// Migration in live mode (MigrateMachines, recovery=migrate; TrainMover, arXiv 2412.12636) on
// the job library's replica groups (python/faultline/replicas.py, job.replica_groups), and the
// operator's failure warning that asks for it (`faultline live inject --fault warn`).
//
// A warned machine's replica moves to a parked standby without a stop: a joiner of the same
// replica starts on the standby in a quorum that does not contain it, so it only says it
// waits while the old process trains on. Then the standby takes the slot, the next quorum
// admits the joiner with its state from a live peer (the replicas' step-boundary switch and
// state transfer, as for a RejoinReplica), and the old machine's process is killed: the
// machine leaves the job for repair, as an eviction. The joiner's "started" report ends it
// (MachinesReady; the outcome's duration is from the action to that report). A faultline.Job
// (DDP) cannot hand a running rank's state to a new process; a live config choosing
// recovery=migrate for one is refused at its start (live_config.cc, policies::live_refusal).
#include <algorithm>
#include <cmath>

#include "realexec/controller/live_world.h"
#include "realexec/controller/live_world_internal.h"
#include "traces/config.h"

namespace faultline::live {

using nlohmann::json;
using world_detail::kRequestTimeoutS;

void LiveWorld::warn(MachineId m, double lead_s) {
  const std::string lead = traces::json_brief(lead_s);
  record_fault(m, "warn", lead, false);
  deliver(FailureWarning{m, "operator", Duration::seconds(lead_s),
                         "faultline live inject --fault warn: a failure in " + lead + " s"});
}

MachineId LiveWorld::migration_standby() const {
  MachineId last = kNoMachine;
  for (MachineId m : cluster_.standby()) {
    if (!link_.connected(m) || cluster_.health(m) == Health::kEvicted) continue;
    if (std::find(avoid_.begin(), avoid_.end(), m) == avoid_.end()) return m;
    if (last == kNoMachine) last = m;
  }
  return last;
}

Quorum LiveWorld::quorum_without(std::int64_t replica) const {
  Quorum q = quorum_of(journal_.state().replica_quorum, {});
  q.members.erase(std::remove(q.members.begin(), q.members.end(), replica), q.members.end());
  if (!q.members.empty()) {  // its store is a remaining member's (the lowest)
    const MachineId host = cluster_.machine_in(static_cast<SlotId>(q.members.front()));
    q.store = machine_config(host).addr + ":" +
              std::to_string(config_.job.master_port + 1 + q.members.front());
  }
  return q;
}

void LiveWorld::act_on(ActionId id, const MigrateMachines& a, Instant t) {
  // act() applied the contract's refusals first (a stopped job, a machine outside it).
  if (!config_.job.replica_groups)
    return refuse(id,
                  "live migration needs replica groups (job.replica_groups in " + config_.file +
                      "): a faultline.Job cannot hand a running rank's state to a new process",
                  t);
  if (a.machines.size() != 1) return refuse(id, "live mode migrates one machine at a time", t);
  if (migration_) return refuse(id, "a migration is under way", t);
  const MachineId from = a.machines.front();
  const std::int64_t r = cluster_.slot_of(from);
  if (start_.pending() || !replicas_.member(r) || replicas_.joining(r))
    return refuse(id, "replica " + std::to_string(r) + " is not training", t);
  const MachineId to = migration_standby();
  if (to == kNoMachine) return refuse(id, "no connected warm standby parked", t);
  cluster_.take_standby(to);
  const auto& s = journal_.state();
  migration_ = Migration{id, r, from, to, s.gen, t, std::nullopt, 0};
  note("migrating replica " + std::to_string(r) + " from " + machine_config(from).name + " to " +
       machine_config(to).name + ": " + a.reason);
  requests_.send(
      to,
      json{{"type", "launch"},
           {"gen", s.gen},
           {"version", s.version},
           {"ranks", json::array({{{"rank", r}, {"local_rank", 0}}})},
           {"world_size", cluster_.slots()},
           {"master_addr", machine_config(cluster_.machine_in(0)).addr},
           {"master_port", config_.job.master_port},
           {"ckpt_every", s.ckpt_every},
           {"replicas", replica_launch(quorum_without(r))}},
      Duration::seconds(kRequestTimeoutS), [this, id, to](const AgentReply& reply) {
        if (reply.ok || !migration_ || migration_->id != id || migration_->swapped) return;
        fail_migration("launch failed on " + machine_config(to).name + ": " + reply.detail);
      });
  migration_->timer =
      reactor_.add_timer(Duration::seconds(config_.job.startup_timeout_s), [this, id] {
        if (!migration_ || migration_->id != id || migration_->swapped) return;
        migration_->timer = 0;
        fail_migration("the joiner did not wait for a quorum within job.startup_timeout_s = " +
                       traces::json_brief(config_.job.startup_timeout_s) + " s");
      });
}

// The joiner waits: the standby takes the slot, the next quorum admits it from a live peer,
// and the old process, sent no quorum, is killed.
void LiveWorld::swap_in_migration() {
  Migration& mg = *migration_;
  const SlotId s = static_cast<SlotId>(mg.replica);
  if (mg.timer) reactor_.cancel_timer(mg.timer);
  mg.timer = 0;
  mg.swapped = now();
  cluster_.vacate(s);
  cluster_.set_health(mg.from, Health::kEvicted);
  cluster_.place(mg.to, s);
  replicas_.migrate(mg.replica, mg.id);
  send_quorum(next_quorum({mg.replica}));
  if (link_.connected(mg.from))
    requests_.send(mg.from, json{{"type", "kill"}, {"gen", mg.gen}},
                   Duration::seconds(kRequestTimeoutS), [](const AgentReply&) {});
  note(machine_config(mg.from).name + " leaves the job: its replica " + std::to_string(mg.replica) +
       " continues on " + machine_config(mg.to).name);
  taken_out(mg.from);
  save_journal();
}

void LiveWorld::fail_migration(const std::string& why) {
  const Migration mg = *migration_;
  migration_.reset();
  if (mg.timer) reactor_.cancel_timer(mg.timer);
  if (!mg.swapped) {
    if (link_.connected(mg.to))
      requests_.send(mg.to, json{{"type", "kill"}, {"gen", mg.gen}},
                     Duration::seconds(kRequestTimeoutS), [](const AgentReply&) {});
    cluster_.add_standby(mg.to);
    save_journal();
  }
  refuse(mg.id, "migration of replica " + std::to_string(mg.replica) + ": " + why, mg.began);
}

bool LiveWorld::migration_report(MachineId m, std::int64_t rank, const RankReport& r) {
  if (!migration_ || m != migration_->to || rank != migration_->replica) return false;
  Migration& mg = *migration_;
  if (!mg.swapped) {
    if (r.type != "waiting") return true;  // nothing else comes from a joiner not admitted
    if (!running_ || journal_.state().gen != mg.gen || !replicas_.member(mg.replica) ||
        replicas_.joining(mg.replica)) {
      fail_migration("replica " + std::to_string(mg.replica) + " stopped training meanwhile");
      return true;
    }
    swap_in_migration();
    return true;
  }
  if (r.type != "started") return false;  // its steps, as any replica's
  const Migration done = mg;
  migration_.reset();
  replicas_.joined(done.replica);
  const Instant t = now();
  outcome(done.id, true,
          "replica " + std::to_string(done.replica) + " moved from " +
              machine_config(done.from).name + " to " + machine_config(done.to).name + " at step " +
              std::to_string(r.step.value_or(-1)) + " (" +
              (r.restored_from.empty() ? std::string("?") : r.restored_from) + "); paused " +
              traces::json_brief(std::round((t - *done.swapped).to_seconds() * 100) / 100) +
              " s from the quorum that admitted it",
          done.began);
  deliver(MachinesReady{done.id, {done.to}});
  return true;
}

bool LiveWorld::migration_exit(MachineId m, const AgentExit& msg) {
  if (!migration_ || m != migration_->to || msg.rank != migration_->replica ||
      msg.gen != migration_->gen)
    return false;
  const bool swapped = migration_->swapped.has_value();
  fail_migration(
      "the joiner on " + machine_config(m).name + " exited (" +
      (msg.signal ? "signal " + std::to_string(msg.signal) : "code " + std::to_string(msg.code)) +
      ")" + (msg.signature.empty() ? "" : ": " + msg.signature));
  // Once in the slot, its exit is the replica's, as any other's (a drop, or a stop).
  return !swapped;
}

}  // namespace faultline::live
