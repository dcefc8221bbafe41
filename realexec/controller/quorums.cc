// Forming and sending the replica groups' quorums: quorums.h.
#include "realexec/controller/quorums.h"

#include <algorithm>
#include <string>

#include "realexec/controller/live_world_internal.h"

namespace faultline::live {

using nlohmann::json;
using world_detail::kRequestTimeoutS;

json Quorums::launch_field(const Quorum& q) const {
  const double timeout =
      j_.replicas.enabled() ? j_.replicas.enabled()->timeout.to_seconds() : kRequestTimeoutS;
  return json{{"count", j_.cluster.pp_groups()}, {"timeout_s", timeout}, {"quorum", encode(q)}};
}

json Quorums::launch_one(std::int64_t replica, const Quorum& q) const {
  const auto& s = j_.journal.state();
  return json{{"type", "launch"},
              {"gen", s.gen},
              {"version", s.version},
              {"ranks", json::array({{{"rank", replica}, {"local_rank", 0}}})},
              {"world_size", j_.cluster.slots()},
              {"master_addr", j_.config.machine(j_.cluster.machine_in(0)).addr},
              {"master_port", j_.config.job.master_port},
              {"ckpt_every", s.ckpt_every},
              {"replicas", launch_field(q)}};
}

Quorum Quorums::next(std::vector<std::int64_t> join) {
  return of(++j_.journal.state().replica_quorum, std::move(join));
}

Quorum Quorums::of(std::int64_t number, std::vector<std::int64_t> join) const {
  Quorum q;
  q.number = number;
  q.members.assign(j_.replicas.members().begin(), j_.replicas.members().end());
  std::sort(join.begin(), join.end());
  q.join = std::move(join);
  std::int64_t host = q.members.empty() ? 0 : q.members.front();
  for (std::int64_t r : q.members)
    if (!std::binary_search(q.join.begin(), q.join.end(), r)) {
      host = r;
      break;
    }
  const MachineId m = j_.cluster.machine_in(static_cast<SlotId>(host));
  q.store = (m == kNoMachine ? std::string("127.0.0.1") : j_.config.machine(m).addr) + ":" +
            std::to_string(j_.config.job.master_port + 1 + host);
  return q;
}

void Quorums::send(const Quorum& q, std::int64_t except) {
  j_.replicas.quorum_changed();
  std::string members;
  for (std::int64_t r : q.members) members += (members.empty() ? "" : ",") + std::to_string(r);
  j_.note("quorum " + std::to_string(q.number) + ": replicas [" + members + "]" +
          (q.join.empty() ? "" : ", replica " + std::to_string(q.join.front()) + " joining") +
          ", store " + q.store);
  j_.save();
  for (std::int64_t r : q.members) {
    if (r == except) continue;
    const MachineId m = j_.cluster.machine_in(static_cast<SlotId>(r));
    if (m == kNoMachine || !j_.link.connected(m)) continue;
    j_.requests.send(
        m, json{{"type", "quorum"}, {"gen", j_.journal.state().gen}, {"quorum", encode(q)}},
        Duration::seconds(kRequestTimeoutS), [this, m, n = q.number](const AgentReply& r) {
          if (!r.ok)
            j_.note("quorum " + std::to_string(n) + " not written on " + j_.config.machine(m).name +
                    ": " + r.detail);
        });
  }
}

}  // namespace faultline::live
