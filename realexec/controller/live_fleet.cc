// The fleet as LiveWorld sees it: agents that connect (adoption, inspections, a repair check
// for a machine back from outside the job), are lost or send messages; machines taken out of
// the job (eviction) and handed to it (acquisition from the standby pool); an operator's
// faults, code updates and repairs. The repair pipeline that checks a machine taken out
// (gpu_diag, then the bit-wise test) before it rejoins the pool, or retires it, is
// RepairPipeline (repair_pipeline.h).
#include <algorithm>

#include "realexec/controller/live_world.h"
#include "realexec/controller/live_world_internal.h"
#include "traces/config.h"

namespace faultline::live {

using nlohmann::json;
using world_detail::kRequestTimeoutS;

namespace {

constexpr double kInjectTimeoutS = 15;  // within `live inject`'s 20 s
// How long the job has to acknowledge a fault-file directive at the agent (within the request's
// timeout above, so the agent's answer, confirmed or withdrawn, normally comes first).
constexpr double kAckDeadlineS = 10;

}  // namespace

void LiveWorld::do_evict(ActionId id, const EvictMachines& a) {
  const Instant t = now();
  // With replica groups, the replicas of the machines drop out and the job trains on.
  const bool replicas_drop = replicas_.evict(a.machines, a.reason);
  std::string names;
  for (MachineId m : a.machines) {
    // Only machines in the job's slots (action.h): a standby or an evicted machine is left as is.
    if (m < 0 || m >= cluster_.machine_count() || cluster_.slot_of(m) < 0) continue;
    cluster_.vacate(cluster_.slot_of(m));
    cluster_.set_health(m, Health::kEvicted);
    names += (names.empty() ? "" : ", ") + config_.machine(m).name;
    if (link_.connected(m))
      requests_.send(m, json{{"type", "kill"}, {"gen", journal_.state().gen}},
                     Duration::seconds(kRequestTimeoutS), [](const AgentReply&) {});
    if (a.retire) {
      repairs_.retire(m, "the policy retired it (" + a.reason + ")");
    } else {
      repairs_.take_out(m);
    }
  }
  if (names.empty()) {
    outcome(id, true, "nothing to evict: no machine of the job named (" + a.reason + ")", t);
    return;
  }
  if (!replicas_drop) job_broken("eviction", "evicted " + names + " (" + a.reason + ")");
  save_journal();
  outcome(id, true, "evicted " + names + " (" + a.reason + ")", t);
}

// --- what agents tell ----------------------------------------------------------------------

void LiveWorld::on_agent_connected(MachineId m, const Auth& auth) {
  const auto& s = journal_.state();
  // A generation newer than the journal's is taken too: the journal may be stale (a save
  // that failed on a full disk before the controller died); adoption then needs every
  // machine of the job to run that same generation.
  if (auth.gen && *auth.gen >= s.gen) {
    adoption_.ranks[m] = std::set<std::int64_t>(auth.alive_ranks.begin(), auth.alive_ranks.end());
    adoption_.gen[m] = *auth.gen;
  } else {
    adoption_.ranks[m] = {};
    adoption_.gen.erase(m);
  }
  if (!tests_.inspections().empty()) {
    json kinds = json::object();
    for (const auto& [k, v] : tests_.inspections()) kinds[k] = v;
    requests_.send(m, json{{"type", "inspect"}, {"kinds", kinds}},
                   Duration::seconds(kRequestTimeoutS), [](const AgentReply&) {});
  }
  // A machine outside the job and the pool (evicted, or a standby whose agent was lost)
  // whose agent is back: check it, unless retired or given up on.
  if (cluster_.slot_of(m) < 0 && auth.gen && !auth.alive_ranks.empty()) {
    // Ranks on a machine outside the job: left from before its eviction (its agent was
    // silent then, so the kill never reached it). They die now, before anything else runs
    // there (they may hold the GPU, or the rendezvous port).
    note(config_.machine(m).name + " is outside the job but still runs " +
         std::to_string(auth.alive_ranks.size()) + " ranks of generation " +
         std::to_string(*auth.gen) + ": killing them");
    requests_.send(m, json{{"type", "kill"}}, Duration::seconds(kRequestTimeoutS),
                   [](const AgentReply&) {});
  }
  repairs_.agent_back(m);
  acquisitions_.retry();
  if (adoption_.active && adoption_.timer) {
    bool all = true;
    for (MachineId x : job_machines()) all &= link_.connected(x) && adoption_.ranks.count(x);
    if (all) {
      reactor_.cancel_timer(adoption_.timer);
      adoption_.timer = reactor_.add_timer(Duration::zero(), [this] {
        // Re-enter do_start's check through a fresh start of the adoption timer path.
        adoption_.timer = 0;
        const ActionId id = adoption_.action;
        do_start(id, "adopt");
      });
    }
  }
}

void LiveWorld::on_agent_lost(MachineId m, const std::string& why) {
  requests_.fail_all_of(m, "agent lost: " + why);
  adoption_.ranks.erase(m);
  adoption_.gen.erase(m);
  if (cluster_.slot_of(m) >= 0) {
    note("agent of " + config_.machine(m).name + " lost: " + why);
    // With replica groups too: its replica drops out when the policy evicts it, or once the
    // other replicas say their collectives with it failed (replica_groups.cc).
    deliver(InspectionAlert{m, "host", "agent lost: " + why});
  } else if (cluster_.take_standby(m)) {
    note("standby " + config_.machine(m).name + " lost (" + why +
         "); removed from the pool until its agent is back and it passes a repair check");
    save_journal();
  } else {
    // Nothing for the policy to decide, but the loss happened: the log keeps it.
    note("agent of " + config_.machine(m).name + " lost (" + why + "); it is out of the job (" +
         (repairs_.is_retired(m) ? "retired" : "its repair check waits for the agent") + ")");
  }
}

void LiveWorld::on_agent_message(MachineId m, const json& msg) {
  const AgentMessage decoded = decode_agent_message(msg);  // throws BadMessage: nothing done
  if (const auto* reply = std::get_if<AgentReply>(&decoded)) {
    requests_.answer(m, *reply);
  } else if (const auto* report = std::get_if<AgentReport>(&decoded)) {
    on_report(m, *report);
  } else if (const auto* exit = std::get_if<AgentExit>(&decoded)) {
    on_exit(m, *exit);
  } else if (const auto* rdv = std::get_if<AgentRendezvous>(&decoded)) {
    tests_.rendezvous(m, *rdv);
  } else if (const auto* alert = std::get_if<AgentAlert>(&decoded)) {
    repairs_.alert(m, now());             // a machine under repair fails its check on it
    if (cluster_.slot_of(m) < 0) return;  // standby or evicted: nothing the job policy acts on
    deliver(InspectionAlert{m, alert->kind, alert->detail});
  }
}

// --- operator -------------------------------------------------------------------------------

void LiveWorld::request_code_update(const std::string& version, bool urgent) {
  record_fault(kNoMachine, "update", version, false);
  deliver(CodeUpdateRequested{version, urgent});
}

void LiveWorld::record_fault(MachineId m, const std::string& kind, const std::string& detail,
                             bool persistent) {
  log("fault", {{"machine", m},
                {"slot", m >= 0 && m < cluster_.machine_count() ? cluster_.slot_of(m) : -1},
                {"fault", kind},
                {"detail", detail},
                {"persistent", persistent}});
}

void LiveWorld::inject(MachineId m, const std::string& fault, const std::string& detail,
                       bool persistent,
                       std::function<void(bool ok, const std::string& detail)> done) {
  json msg{{"type", "inject"}, {"fault", fault}, {"detail", detail}};
  if (fault == "machine_down") {
    record_fault(m, fault, detail, persistent);
    requests_.send(m, msg, Duration::seconds(kInjectTimeoutS), [](const AgentReply&) {});
    return done(true, "");
  }
  // A fault-file directive is answered once the job acknowledged it (PROTOCOL.md, "Fault
  // acknowledgement"); kill, stop and nic_down once the agent itself did it.
  if (is_file_fault(fault)) msg["deadline_ms"] = static_cast<std::int64_t>(kAckDeadlineS * 1000);
  auto req = std::make_shared<std::uint64_t>(0);
  *req = requests_.send(
      m, msg, Duration::seconds(kInjectTimeoutS),
      [this, m, fault, detail, persistent, req, done = std::move(done)](const AgentReply& r) {
        if (r.ok) {
          record_fault(m, fault, detail, persistent);
          return done(true, r.detail);
        }
        std::string why = r.detail;
        if (r.timed_out) {
          // The agent may only be stopped and read the request later: it is cancelled there,
          // so it never acts once nobody records it.
          requests_.send(m, json{{"type", "cancel"}, {"inject_req", *req}},
                         Duration::seconds(kInjectTimeoutS), [](const AgentReply&) {});
          why = "no answer within " + traces::json_brief(kInjectTimeoutS) +
                " s; cancelled at the agent";
        }
        note("the agent of " + config_.machine(m).name + " did not apply the injected " + fault +
             " (" + why + "): not a fault of this run");
        done(false, why);
      });
}

bool LiveWorld::repaired(MachineId m) {
  if (m < 0 || m >= cluster_.machine_count() || cluster_.slot_of(m) >= 0) return false;
  const auto& sb = cluster_.standby();
  if (std::find(sb.begin(), sb.end(), m) != sb.end()) return false;
  repairs_.forget(m);
  auto& js = journal_.state();
  js.strikes.erase(m);
  js.retired.erase(std::remove(js.retired.begin(), js.retired.end(), m), js.retired.end());
  cluster_.set_health(m, Health::kHealthy);
  cluster_.add_standby(m);
  note(config_.machine(m).name + " repaired; back in the standby pool");
  save_journal();
  acquisitions_.retry();
  return true;
}

}  // namespace faultline::live
