// A migration's steps (migrations.h): its start, the swap once the joiner waits, its end at
// the joiner's "started", and its failure.
#include "realexec/controller/migrations.h"

#include <algorithm>
#include <cmath>

#include "realexec/controller/live_world_internal.h"
#include "traces/config.h"

namespace faultline::live {

using nlohmann::json;
using world_detail::kRequestTimeoutS;

MachineId Migrations::standby() const {
  MachineId last = kNoMachine;
  for (MachineId m : j_.cluster.standby()) {
    if (!j_.link.connected(m) || j_.cluster.health(m) == Health::kEvicted) continue;
    if (std::find(j_.avoid.begin(), j_.avoid.end(), m) == j_.avoid.end()) return m;
    if (last == kNoMachine) last = m;
  }
  return last;
}

Quorum Migrations::quorum_without(std::int64_t replica) const {
  Quorum q = j_.quorums.current();
  q.members.erase(std::remove(q.members.begin(), q.members.end(), replica), q.members.end());
  if (!q.members.empty()) {  // its store is a remaining member's (the lowest)
    const MachineId host = j_.cluster.machine_in(static_cast<SlotId>(q.members.front()));
    q.store = j_.config.machine(host).addr + ":" +
              std::to_string(j_.config.job.master_port + 1 + q.members.front());
  }
  return q;
}

void Migrations::start(ActionId id, const MigrateMachines& a, Instant t) {
  // act() applied the contract's refusals first (a stopped job, a machine outside it).
  if (!j_.config.job.replica_groups)
    return j_.refuse(id,
                     "live migration needs replica groups (job.replica_groups in " +
                         j_.config.file +
                         "): a faultline.Job cannot hand a running rank's state to a new process",
                     t);
  if (a.machines.size() != 1) return j_.refuse(id, "live mode migrates one machine at a time", t);
  if (m_) return j_.refuse(id, "a migration is under way", t);
  const MachineId from = a.machines.front();
  const std::int64_t r = j_.cluster.slot_of(from);
  if (j_.starting() || !j_.replicas.member(r) || j_.replicas.joining(r))
    return j_.refuse(id, "replica " + std::to_string(r) + " is not training", t);
  const MachineId to = standby();
  if (to == kNoMachine) return j_.refuse(id, "no connected warm standby parked", t);
  j_.cluster.take_standby(to);
  const auto& s = j_.journal.state();
  m_ = Migration{id, r, from, to, s.gen, t, std::nullopt, 0};
  j_.note("migrating replica " + std::to_string(r) + " from " + j_.config.machine(from).name +
          " to " + j_.config.machine(to).name + ": " + a.reason);
  j_.requests.send(to, j_.quorums.launch_one(r, quorum_without(r)),
                   Duration::seconds(kRequestTimeoutS), [this, id, to](const AgentReply& reply) {
                     if (reply.ok || !m_ || m_->id != id || m_->swapped) return;
                     fail("launch failed on " + j_.config.machine(to).name + ": " + reply.detail);
                   });
  m_->timer = j_.reactor.add_timer(Duration::seconds(j_.config.job.startup_timeout_s), [this, id] {
    if (!m_ || m_->id != id || m_->swapped) return;
    m_->timer = 0;
    fail("the joiner did not wait for a quorum within job.startup_timeout_s = " +
         traces::json_brief(j_.config.job.startup_timeout_s) + " s");
  });
}

// The joiner waits: the standby takes the slot, the next quorum admits it from a live peer,
// and the old process, sent no quorum, is killed.
void Migrations::swap_in() {
  Migration& mg = *m_;
  const SlotId s = static_cast<SlotId>(mg.replica);
  if (mg.timer) j_.reactor.cancel_timer(mg.timer);
  mg.timer = 0;
  mg.swapped = j_.now();
  j_.cluster.vacate(s);
  j_.cluster.set_health(mg.from, Health::kEvicted);
  j_.cluster.place(mg.to, s);
  j_.replicas.migrate(mg.replica, mg.id);
  j_.quorums.send(j_.quorums.next({mg.replica}));
  if (j_.link.connected(mg.from))
    j_.requests.send(mg.from, json{{"type", "kill"}, {"gen", mg.gen}},
                     Duration::seconds(kRequestTimeoutS), [](const AgentReply&) {});
  j_.note(j_.config.machine(mg.from).name + " leaves the job: its replica " +
          std::to_string(mg.replica) + " continues on " + j_.config.machine(mg.to).name);
  j_.taken_out(mg.from);
  j_.save();
}

void Migrations::fail(const std::string& why) {
  const Migration mg = *m_;
  m_.reset();
  if (mg.timer) j_.reactor.cancel_timer(mg.timer);
  if (!mg.swapped) {
    if (j_.link.connected(mg.to))
      j_.requests.send(mg.to, json{{"type", "kill"}, {"gen", mg.gen}},
                       Duration::seconds(kRequestTimeoutS), [](const AgentReply&) {});
    j_.cluster.add_standby(mg.to);
    j_.save();
  }
  j_.refuse(mg.id, "migration of replica " + std::to_string(mg.replica) + ": " + why, mg.began);
}

bool Migrations::report(MachineId m, std::int64_t rank, const RankReport& r) {
  if (!m_ || m != m_->to || rank != m_->replica) return false;
  Migration& mg = *m_;
  if (!mg.swapped) {
    if (r.type != "waiting") return true;  // nothing else comes from a joiner not admitted
    if (!j_.running() || j_.journal.state().gen != mg.gen || !j_.replicas.member(mg.replica) ||
        j_.replicas.joining(mg.replica)) {
      fail("replica " + std::to_string(mg.replica) + " stopped training meanwhile");
      return true;
    }
    swap_in();
    return true;
  }
  if (r.type != "started") return false;  // its steps, as any replica's
  const Migration done = mg;
  m_.reset();
  j_.replicas.joined(done.replica);
  const Instant t = j_.now();
  j_.outcome(done.id, true,
             "replica " + std::to_string(done.replica) + " moved from " +
                 j_.config.machine(done.from).name + " to " + j_.config.machine(done.to).name +
                 " at step " + std::to_string(r.step.value_or(-1)) + " (" +
                 (r.restored_from.empty() ? std::string("?") : r.restored_from) + "); paused " +
                 traces::json_brief(std::round((t - *done.swapped).to_seconds() * 100) / 100) +
                 " s from the quorum that admitted it",
             done.began);
  j_.deliver(MachinesReady{done.id, {done.to}});
  return true;
}

bool Migrations::exit(MachineId m, const AgentExit& msg) {
  if (!m_ || m != m_->to || msg.rank != m_->replica || msg.gen != m_->gen) return false;
  const bool swapped = m_->swapped.has_value();
  fail("the joiner on " + j_.config.machine(m).name + " exited (" +
       (msg.signal ? "signal " + std::to_string(msg.signal) : "code " + std::to_string(msg.code)) +
       ")" + (msg.signature.empty() ? "" : ": " + msg.signature));
  // Once in the slot, its exit is the replica's, as any other's (a drop, or a stop).
  return !swapped;
}

}  // namespace faultline::live
